// TorchScript files using what the TorchScript interpreter runs itself
// (warnings.warn, "{}".format, print) and custom operator libraries
// (torchvision::nms through fx::load_library), from
// python/make_op_cases.py: they import, run and equal eager PyTorch.
#include "cases.h"

#include "../common/captured_warnings.h"
#include "../common/error_of.h"

#include <fx/import.h>
#include <fx/load_library.h>
#include <fx/tensor_file.h>

#include <torch/csrc/jit/runtime/print_handler.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace {

const std::string& op_cases_dir() {
  static const std::string dir = fx::testing::generate_cases("make_op_cases.py", "op_cases");
  return dir;
}

std::string op_case(const std::string& name) { return op_cases_dir() + "/" + name; }

using fx_test::CapturedWarnings;
using fx_test::error_of;

/// The eager output python/make_op_cases.py saved for case `name`.
c10::IValue eager_output(const std::string& name) { return fx::load_value(op_case(name + ".output.pt")); }

std::vector<std::string> targets(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (fx::Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) out.push_back(n->target());
  return out;
}

/// What TorchScript's print() wrote while capture_print was its handler.
std::string& printed() {
  static std::string text;
  return text;
}
void capture_print(const std::string& s) { printed() += s; }

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// What scripted googlenet / inception_v3 do: warnings.warn(...) and
// torch._assert(cond, "...{}".format(self.k)).
TEST(ScriptOps, WarnAndFormattedAssertLikeGoogLeNet) {
  ASSERT_FALSE(op_cases_dir().empty());
  auto gm = fx::import_torchscript(op_case("warn_assert.pt"));
  const auto t = targets(*gm);
  EXPECT_TRUE(has(t, "aten::warn")) << gm->graph().str();
  EXPECT_TRUE(has(t, "torch._assert")) << gm->graph().str();
  bool message_formatted = false;
  for (fx::Node* n : gm->graph().nodes())
    if (n->target() == "torch._assert" && n->args().size() == 2)
      message_formatted = n->args()[1].to_string() == "AssertionError: expected a 4-d input for k=3";
  EXPECT_TRUE(message_formatted) << gm->graph().str();

  auto inputs = fx::load_inputs(op_case("warn_assert.input.pt"));
  CapturedWarnings w;
  at::Tensor out = gm->forward(inputs).toTensor();
  EXPECT_TRUE(at::allclose(out, eager_output("warn_assert").toTensor(), 1e-5, 1e-6));
  EXPECT_EQ(w.messages, std::vector<std::string>{"Scripted WarnAssert always returns a tensor"});
  // A 3-d input fails the model's own check, with its formatted message.
  const std::string e = error_of([&] { gm->forward({at::zeros({3, 8, 8})}); });
  EXPECT_EQ(e.substr(0, e.find('\n')), "AssertionError: expected a 4-d input for k=3") << e;
}

// aten::format on run-time values becomes the aten::format builtin; print()
// runs TorchScript's prim::Print (a vararg operation) with all its inputs.
TEST(ScriptOps, FormatAndPrintAtRunTime) {
  auto gm = fx::import_torchscript(op_case("format_run_time.pt"));
  const auto t = targets(*gm);
  EXPECT_TRUE(has(t, "aten::format")) << gm->graph().str();
  printed().clear();
  torch::jit::setPrintHandler(capture_print);
  c10::IValue out = gm->forward(fx::load_inputs(op_case("format_run_time.input.pt")));
  torch::jit::setPrintHandler(torch::jit::getDefaultPrintHandler());
  c10::IValue eager = eager_output("format_run_time");
  const auto& got = out.toTupleRef().elements();
  const auto& want = eager.toTupleRef().elements();
  EXPECT_TRUE(at::allclose(got[0].toTensor(), want[0].toTensor()));
  EXPECT_EQ(got[1].toStringRef(), want[1].toStringRef());
  EXPECT_EQ(got[1].toStringRef(), "2 rows, k=7, scale 0.5");
  EXPECT_EQ(printed(), "rows 2 k 7\n");
}

// torchvision::nms lives in torchvision's operator library: without it the
// file does not load, and the error says which operator is missing; with
// fx::load_library it imports, runs, and returns eager's indices.
TEST(ScriptOps, CustomOperatorLibrary) {
  std::ifstream lib_file(op_case("torchvision_ops.txt"));
  std::string lib;
  std::getline(lib_file, lib);
  if (lib.empty()) GTEST_SKIP() << "torchvision is not installed";
  const std::string nms = op_case("nms.pt");
  EXPECT_EQ(error_of([&] { fx::import_torchscript(nms); }),
            nms + ": cannot load TorchScript: Unknown builtin op: torchvision::nms. Could not find any similar ops "
                  "to torchvision::nms. This op may not exist or may not be currently supported in TorchScript "
                  "(an operator of a custom library? load it first: fx::load_library, fxcpp --load-library PATH) "
                  "at File \"code/__torch__/torchvision/ops/boxes.py\", line 6: "
                  "_2 = ops.torchvision.nms(boxes, scores, iou_threshold)");
  fx::load_library(lib);
  fx::load_library(lib);  // again: nothing more happens
  auto gm = fx::import_torchscript(nms);
  EXPECT_TRUE(has(targets(*gm), "torchvision::nms")) << gm->graph().str();
  at::Tensor keep = gm->forward(fx::load_inputs(op_case("nms.input.pt"))).toTensor();
  at::Tensor eager = eager_output("nms").toTensor();
  EXPECT_EQ(keep.scalar_type(), at::kLong);
  EXPECT_TRUE(keep.equal(eager)) << keep << eager;
}

TEST(ScriptOps, LoadLibraryErrors) {
  EXPECT_EQ(error_of([] { fx::load_library("/no/such/libops.so"); }),
            "/no/such/libops.so: no such file (an operator library to load)");
  EXPECT_EQ(error_of([] { fx::load_library(FX_SOURCE_DIR); }),
            std::string(FX_SOURCE_DIR) + ": is a directory, not a shared library");
  const std::string readme = std::string(FX_SOURCE_DIR) + "/README.md";
  const std::string e = error_of([&] { fx::load_library(readme); });
  EXPECT_EQ(e.rfind(readme + ": cannot load the library: ", 0), 0u) << e;
  EXPECT_NE(e.find("invalid ELF header"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { fx::load_library(""); }), "load_library: no library path given");
  try {
    fx::load_library("/no/such/libops.so");
  } catch (const fx::ImportError&) {
    SUCCEED();
    return;
  }
  ADD_FAILURE() << "not an fx::ImportError";
}

}  // namespace
