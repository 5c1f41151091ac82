// Kernel objects (issue 68: `fxcpp optimize --aot`): a saved file carries
// its generated kernels' compiled objects; where it is loaded, a kernel's
// first use takes the object — no compiler needed — when it was built from
// the source this build generates, for instructions this CPU has, and the
// file is this user's alone. Each test uses a program of its own (a constant
// no other test has), since a process keeps a kernel's function once made.
#include <fx/compiler/fused_kernel.h>
#include <fx/compiler/kernel_cache.h>
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/serialize.h>

#include "../serialize/serialize_test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

using fx::Argument;
using fx::Node;
using fx::compiler::KernelOrigin;

namespace {

/// (x + y) * c: one kernel whose program names c.
std::string program_with(const std::string& c) {
  return "inputs 2; %2 = add(%0, %1); %3 = mul(%2, " + c + "); return %3 full";
}

/// A module whose graph is one fxcpp::fused_kernel node running `program` on two inputs.
std::shared_ptr<fx::GraphModule> kernel_module(const std::string& program) {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* k = g->call_function("fxcpp::fused_kernel", {Argument::list({x, y}), Argument(program)});
  g->output(g->call_function("operator.getitem", {k, int64_t(0)}));
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), std::move(g));
}

/// FXCPP_CXX set to a compiler that does not exist while alive.
struct NoCompiler {
  std::string saved;
  bool had;
  NoCompiler() {
    const char* v = std::getenv("FXCPP_CXX");
    had = v != nullptr;
    saved = v ? v : "";
    setenv("FXCPP_CXX", "/nonexistent/g++", 1);
  }
  ~NoCompiler() {
    if (had)
      setenv("FXCPP_CXX", saved.c_str(), 1);
    else
      unsetenv("FXCPP_CXX");
  }
};

/// The warnings c10 reports while alive.
struct Warnings : c10::WarningHandler {
  std::vector<std::string> lines;
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override { lines.push_back(msg); }
};

std::string temp_file(const std::string& stem) {
  return ::testing::TempDir() + stem + "." + std::to_string(::getpid()) + ".fx";
}

const std::vector<c10::IValue>& inputs() {
  static const std::vector<c10::IValue> in = [] {
    at::manual_seed(3);
    return std::vector<c10::IValue>{at::randn({5, 37}), at::randn({37})};
  }();
  return in;
}

at::Tensor expected(double c) { return (inputs()[0].toTensor() + inputs()[1].toTensor()) * c; }

}  // namespace

TEST(KernelObjects, ASavedFileRunsItsObjectsWithoutACompiler) {
  if (!fx::compiler::can_compile_kernels()) GTEST_SKIP() << "no C++ compiler to build the object";
  const std::string program = program_with("0.37109375");
  const std::string path = temp_file("objects");
  fx::SaveOptions options;
  options.kernel_objects = true;
  const fx::SaveReport report = fx::save(*kernel_module(program), path, options);
  EXPECT_EQ(report.kernel_objects, 1u);
  const std::vector<std::string> want_isa = fx::compiler::kernel_object(program).isa;
  EXPECT_EQ(report.kernel_object_isa, want_isa);
  // The document lists the object: its record, size, symbol, the hash of the C++ it was built from.
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json entry = fx::serialize_test::document_of(bytes).at("kernel_objects").at(0);
  EXPECT_EQ(entry.at("record"), "extra/fxkernels/0");
  EXPECT_EQ(entry.at("source_hash"), fx::compiler::kernel_source_hash(fx::compiler::kernel_source(program)));
  EXPECT_EQ(entry.at("isa").get<std::vector<std::string>>(), want_isa);
  EXPECT_GT(entry.at("bytes").get<int64_t>(), 1000);
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::None);  // saving built it, without running it here

  NoCompiler none;
  ASSERT_FALSE(fx::compiler::can_compile_kernels());
  Warnings w;
  at::Tensor got;
  {
    c10::Warning::WarningHandlerGuard guard(&w);
    auto loaded = fx::load(path);
    got = loaded->forward(inputs()).toTensor();
  }
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::Object);
  EXPECT_TRUE(w.lines.empty()) << w.lines.at(0);
  EXPECT_TRUE(at::equal(got, expected(0.37109375)));
  std::remove(path.c_str());
}

TEST(KernelObjects, WithoutObjectsAndWithoutACompilerTheKernelRunsOnAten) {
  const std::string program = program_with("0.4140625");
  const std::string path = temp_file("plain");
  fx::save(*kernel_module(program), path);
  NoCompiler none;
  auto loaded = fx::load(path);
  const at::Tensor got = loaded->forward(inputs()).toTensor();
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::Aten);
  EXPECT_TRUE(at::allclose(got, expected(0.4140625)));
  std::remove(path.c_str());
}

TEST(KernelObjects, AnObjectForAnotherCpuIsNotTaken) {
  if (!fx::compiler::can_compile_kernels()) GTEST_SKIP() << "no C++ compiler";
  const std::string program = program_with("0.453125");
  fx::compiler::KernelObject object = fx::compiler::kernel_object(program);
  EXPECT_EQ(fx::compiler::object_mismatch(object), "");
  object.isa.push_back("fxcpp_imaginary_isa");
  EXPECT_EQ(fx::compiler::offer_kernel_object(object), "it uses fxcpp_imaginary_isa, which this CPU lacks");
  EXPECT_TRUE(at::equal(fx::compiler::run_kernel(program, {inputs()[0].toTensor(), inputs()[1].toTensor()})[0],
                        expected(0.453125)));
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::Source);
}

TEST(KernelObjects, ADamagedObjectIsCompiledFromItsSourceWithOneWarning) {
  if (!fx::compiler::can_compile_kernels()) GTEST_SKIP() << "no C++ compiler";
  const std::string program = program_with("0.48828125");
  fx::compiler::KernelObject object = fx::compiler::kernel_object(program);
  object.bytes = "\x7f" "ELF, but no more of it";
  EXPECT_EQ(fx::compiler::offer_kernel_object(object), "");
  Warnings w;
  at::Tensor got;
  {
    c10::Warning::WarningHandlerGuard guard(&w);
    got = fx::compiler::run_kernel(program, {inputs()[0].toTensor(), inputs()[1].toTensor()})[0];
  }
  EXPECT_TRUE(at::equal(got, expected(0.48828125)));
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::Source);
  ASSERT_EQ(w.lines.size(), 1u);
  const std::string prefix = "fxcpp::fused_kernel: kernel object " + object.symbol + ": dlopen failed: ";
  EXPECT_EQ(w.lines[0].rfind(prefix, 0), 0u) << w.lines[0];
  EXPECT_NE(w.lines[0].find("; the kernel is compiled from its source"), std::string::npos) << w.lines[0];
}

TEST(KernelObjects, NotTakenFromMemoryNorFromAFileOthersMayWrite) {
  if (!fx::compiler::can_compile_kernels()) GTEST_SKIP() << "no C++ compiler";
  const std::string program = program_with("0.51171875");
  fx::SaveOptions options;
  options.kernel_objects = true;
  const auto gm = kernel_module(program);
  const std::string bytes = fx::save_to_string(*gm, options);
  const std::string path = temp_file("shared");
  fx::save(*gm, path, options);
  ASSERT_EQ(::chmod(path.c_str(), 0602), 0);
  Warnings w;
  {
    c10::Warning::WarningHandlerGuard guard(&w);
    fx::load_from_string(bytes, "mem.fx");
    fx::load(path);
  }
  EXPECT_EQ(w.lines, (std::vector<std::string>{
                         "mem.fx: 1 kernel object not loaded (read from memory or a stream, not from a file of this "
                         "user's); kernels are made from their programs instead",
                         path + ": 1 kernel object not loaded (writable by others (mode 0602)); kernels are made "
                                "from their programs instead"}));
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::None);
  std::remove(path.c_str());
}

TEST(KernelObjects, AMalformedEntryIsOneLineNamingIt) {
  if (!fx::compiler::can_compile_kernels()) GTEST_SKIP() << "no C++ compiler";
  const std::string program = program_with("0.52734375");
  fx::SaveOptions options;
  options.kernel_objects = true;
  const std::string bytes = fx::save_to_string(*kernel_module(program), options);
  nlohmann::json doc = fx::serialize_test::document_of(bytes);
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  auto [data, size] = reader.getRecord("extra/fxkernels/0");
  const std::string object(static_cast<const char*>(data.get()), size);
  const auto rewritten = [&](const nlohmann::json& d) {
    return fx::serialize_test::archive({{"extra/fxcpp.json", d.dump()}, {"extra/fxkernels/0", object}});
  };
  const auto error_of = [&](const nlohmann::json& d) -> std::string {
    try {
      fx::load_from_string(rewritten(d), "bad.fx");
    } catch (const fx::ImportError& e) {
      return e.what();
    }
    return "no error";
  };
  nlohmann::json d = doc;
  d["kernel_objects"][0]["bytes"] = size + 1;
  EXPECT_EQ(error_of(d), "bad.fx: kernel_objects[0]: record 'extra/fxkernels/0' holds " + std::to_string(size) +
                             " bytes, " + std::to_string(size + 1) + " expected");
  d = doc;
  d["kernel_objects"][0]["record"] = "extra/fxkernels/7";
  EXPECT_EQ(error_of(d), "bad.fx: kernel_objects[0]: record 'extra/fxkernels/7' is missing");
  d = doc;
  d["kernel_objects"][0]["record"] = "extra/fxcpp.json";
  EXPECT_EQ(error_of(d), "bad.fx: kernel_objects[0]: record 'extra/fxcpp.json' is not under extra/fxkernels/");
  d = doc;
  d["kernel_objects"][0]["isa"] = {"avx2", 3};
  EXPECT_EQ(error_of(d), "bad.fx: kernel_objects[0]: isa[1]: a string expected, got an integer");
  d = doc;
  d["kernel_objects"] = "objects";
  EXPECT_EQ(error_of(d), "bad.fx: kernel_objects: a list expected, got a string");
  EXPECT_EQ(fx::compiler::kernel_origin(program), KernelOrigin::None);
}

TEST(KernelObjects, SavingObjectsWithoutACompilerIsOneLine) {
  const std::string program = program_with("0.5546875");
  fx::SaveOptions options;
  options.kernel_objects = true;
  const auto gm = kernel_module(program);
  NoCompiler none;
  try {
    fx::save_to_string(*gm, options);
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("fx::save: cannot store kernel objects: kernel ", 0), 0u) << what;
    EXPECT_NE(what.find(": no C++ compiler (`/nonexistent/g++ --version` does not run; set FXCPP_CXX or CXX)"),
              std::string::npos)
        << what;
  }
}
