// Bad files and data-dependent control flow: one fx::ImportError naming the
// file and the problem (and for control flow, the construct and source line).
#include "cases.h"

#include <fx/import.h>
#include <fx/tensor_file.h>

#include <gtest/gtest.h>

#include <string>

namespace {

using fx::testing::case_path;

std::string import_error(const std::string& file) {
  try {
    fx::import_torchscript(case_path(file));
  } catch (const fx::ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << file << " imported without an error";
  return "";
}

void expect_one_line(const std::string& msg) { EXPECT_EQ(msg.find('\n'), std::string::npos) << msg; }

TEST(ImportErrors, MissingFile) {
  std::string msg = import_error("does_not_exist.pt");
  EXPECT_NE(msg.find("does_not_exist.pt: no such file"), std::string::npos) << msg;
}

TEST(ImportErrors, NotAZipArchive) {
  std::string msg = import_error("not_zip.pt");
  EXPECT_NE(msg.find("not a zip archive"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, Truncated) {
  std::string msg = import_error("truncated.pt");
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, TorchSaveIsNotTorchScript) {
  std::string msg = import_error("tensor_save.pt");
  EXPECT_NE(msg.find("not a TorchScript file"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, MissingForward) {
  std::string msg = import_error("no_forward.pt");
  EXPECT_NE(msg.find("no forward method"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, ChangingModuleStateNamesTheSourceLine) {
  std::string msg = import_error("sets_attr.pt");
  EXPECT_NE(msg.find("changing module state (prim::SetAttr) inside run-time control flow cannot be imported into a "
                     "graph; pass the state in as an input and return its new value instead: prim::SetAttr near "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("make_import_cases.py:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("self.calls += 1"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, UnsupportedConstructSaysHowToImportTheRest) {
  std::string msg = import_error("with_no_grad.pt");
  EXPECT_NE(msg.find("unsupported TorchScript construct prim::Enter; move the code that uses it into a submodule and "
                     "import that one as a leaf (ImportOptions::is_leaf_module: a leaf runs its own scripted "
                     "forward): prim::Enter near "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("with torch.no_grad():"), std::string::npos) << msg;
  expect_one_line(msg);
}

TEST(ImportErrors, ForkAndWaitRunInOrder) {
  auto gm = fx::import_torchscript(case_path("forks.pt"));
  EXPECT_EQ(gm->graph().find_nodes(fx::Opcode::CallFunction, "aten::mul.Scalar").size(), 1u);
  auto inputs = fx::load_inputs(case_path("forks.input.pt"));
  EXPECT_TRUE(gm->forward(inputs).toTensor().allclose(fx::load_value(case_path("forks.output.pt")).toTensor()));
}

TEST(ImportErrors, ModuleStateWrittenInForwardImportsAsTheFirstCall) {
  // As torch.fx's symbolic_trace: forward as it ran once (calls 0 -> 1).
  auto gm = fx::import_torchscript(case_path("counts_calls.pt"));
  auto inputs = fx::load_inputs(case_path("counts_calls.input.pt"));
  c10::IValue expected = fx::load_value(case_path("counts_calls.output.pt"));
  EXPECT_TRUE(gm->forward(inputs).toTensor().equal(expected.toTensor()));
  EXPECT_TRUE(gm->forward(inputs).toTensor().equal(expected.toTensor()));  // the module was not changed
}

TEST(ImportErrors, DataDependentControlFlowImports) {
  // Once an error; now a cond / loop module (tests/import/control_flow_test.cpp).
  EXPECT_NO_THROW(fx::import_torchscript(case_path("data_if.pt")));
  EXPECT_NO_THROW(fx::import_torchscript(case_path("data_loop.pt")));
}

TEST(TensorFile, BadInputFiles) {
  EXPECT_THROW(fx::load_value(case_path("not_zip.pt")), fx::ImportError);
  EXPECT_THROW(fx::load_value(case_path("nope.pt")), fx::ImportError);
  auto v = fx::load_inputs(case_path("tuple_out.input.pt"));
  EXPECT_EQ(v.size(), 2u);
}

}  // namespace
