// fx::import_torchscript on small hand-made TorchScript files: structure,
// numbers against eager PyTorch, shared parameters, options.
#include "cases.h"

#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/tensor_file.h>

#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

namespace {

using fx::testing::case_path;

std::vector<std::string> ops(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes()) out.push_back(std::string(fx::to_string(n->op())) + " " + n->target());
  return out;
}

size_t count(const fx::Graph& g, fx::Opcode op, const std::string& target) {
  return g.find_nodes(op, target).size();
}

// Imports NAME.pt, runs it on NAME.input.pt through forward() and the
// Interpreter, and checks both against NAME.output.pt.
std::shared_ptr<fx::GraphModule> import_and_check(const std::string& name, fx::ImportOptions options = {}) {
  auto gm = fx::import_torchscript(case_path(name + ".pt"), options);
  gm->graph().lint();
  auto inputs = fx::load_inputs(case_path(name + ".input.pt"));
  c10::IValue expected = fx::load_value(case_path(name + ".output.pt"));
  auto d = fx::compare_values(gm->forward(inputs), expected);
  EXPECT_LE(d.max_abs_diff, 1e-5 * std::max(1.0, d.max_abs_expected)) << name << " forward";
  auto di = fx::compare_values(fx::Interpreter(gm).run(inputs), expected);
  EXPECT_LE(di.max_abs_diff, 1e-5 * std::max(1.0, di.max_abs_expected)) << name << " interpreter";
  return gm;
}

TEST(ImportCases, GeneratorRan) { ASSERT_FALSE(fx::testing::cases_dir().empty()) << "python/make_import_cases.py failed"; }

TEST(ImportCases, SimpleModuleStructure) {
  auto gm = import_and_check("simple");
  std::vector<std::string> expected = {
      "placeholder x",
      "call_module stem",
      "call_module blocks.0.conv",
      "call_module blocks.0.bn",
      "call_module blocks.0.relu",
      "call_function aten::add_.Tensor",
      "call_module blocks.1.conv",
      "call_module blocks.1.bn",
      "call_module blocks.1.relu",
      "call_function aten::adaptive_avg_pool2d",
      "call_function aten::flatten.using_ints",
      "call_module fc",
      "get_attr scale",
      "call_function aten::mul.Tensor",
      "output output",
  };
  EXPECT_EQ(ops(gm->graph()), expected) << gm->graph().str();
  EXPECT_EQ(gm->class_name(), "Simple");
  // Node names follow torch.fx: from the qualified name / the target.
  auto mods = gm->graph().find_nodes(fx::Opcode::CallModule);
  ASSERT_FALSE(mods.empty());
  EXPECT_EQ(mods[1]->name(), "blocks_0_conv");
  // Source positions of the Python code are kept.
  EXPECT_NE(mods[1]->stack_trace().find("make_import_cases.py"), std::string::npos) << mods[1]->stack_trace();
}

TEST(ImportCases, ParametersAreSharedNotCopied) {
  torch::jit::Module m = fx::load_torchscript(case_path("simple.pt"));
  auto gm = fx::import_torchscript(m);
  for (const auto& p : m.named_parameters()) {
    at::Tensor t = gm->fetch_attr(p.name);
    EXPECT_TRUE(t.is_same(p.value)) << p.name;
  }
  // Changing the scripted module's weight changes the GraphModule's result.
  auto inputs = fx::load_inputs(case_path("simple.input.pt"));
  at::Tensor before = gm->forward(inputs).toTensor().clone();
  {
    torch::NoGradGuard no_grad;
    m.attr("scale").toTensor().mul_(2);
  }
  at::Tensor after = gm->forward(inputs).toTensor();
  EXPECT_TRUE(at::allclose(after, before * 2, 1e-5, 1e-6));
}

TEST(ImportCases, TracedModule) {
  auto gm = import_and_check("simple_traced");
  EXPECT_GE(count(gm->graph(), fx::Opcode::CallModule, "blocks.0.conv"), 1u) << gm->graph().str();
}

TEST(ImportCases, SizesBecomeGetitemAndArithmetic) {
  auto gm = import_and_check("sizes");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "operator.getitem"), 4u) << gm->graph().str();
  EXPECT_GE(count(gm->graph(), fx::Opcode::CallFunction, "operator.floordiv"), 2u) << gm->graph().str();
  EXPECT_GE(count(gm->graph(), fx::Opcode::CallFunction, "operator.mul"), 2u) << gm->graph().str();
  // The sizes are read at run time: another shape works too.
  at::Tensor x = at::randn({1, 2, 6, 6});
  at::Tensor expected = x.view({1, 36, 2}).sum(-1) + 3;
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
}

TEST(ImportCases, ConstantLoopIsUnrolled) {
  auto gm = import_and_check("const_loop");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::mul.Scalar"), 3u) << gm->graph().str();
}

TEST(ImportCases, ListAppendIsTrackedAtImport) {
  auto gm = import_and_check("list_append");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::cat"), 3u) << gm->graph().str();
}

TEST(ImportCases, LeafReturningTupleAndDefaultArgument) {
  auto gm = import_and_check("tuple_out");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallModule, "attn"), 1u) << gm->graph().str();
  EXPECT_GE(count(gm->graph(), fx::Opcode::CallFunction, "operator.getitem"), 1u);
  auto inputs = fx::load_inputs(case_path("tuple_out.input.pt"));
  ASSERT_EQ(inputs.size(), 2u);
  auto placeholders = gm->graph().find_nodes(fx::Opcode::Placeholder);
  ASSERT_EQ(placeholders.size(), 3u);
  EXPECT_EQ(placeholders[2]->name(), "alpha");
  // alpha defaults to 2.0; passing it explicitly changes the second output.
  auto with_alpha = inputs;
  with_alpha.push_back(4.0);
  at::Tensor two = gm->forward(inputs).toTupleRef().elements()[1].toTensor();
  at::Tensor four = gm->forward(with_alpha).toTupleRef().elements()[1].toTensor();
  EXPECT_TRUE(at::allclose(four, two * 2));
}

TEST(ImportCases, AssertOnRunTimeValueBecomesTorchAssert) {
  auto gm = import_and_check("asserting");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "torch._assert"), 1u) << gm->graph().str();
  try {
    gm->forward(at::randn({2, 3}));
    FAIL() << "a 2-D input must fail the assert";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("expected a 4-D input"), std::string::npos) << e.what();
  }
}

TEST(ImportCases, EverythingInlinedWithoutLeaves) {
  fx::ImportOptions options;
  options.is_leaf_module = [](const torch::jit::Module&, const std::string&, const std::string&) { return false; };
  auto gm = import_and_check("simple", options);
  EXPECT_TRUE(gm->graph().find_nodes(fx::Opcode::CallModule).empty()) << gm->graph().str();
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::conv2d"), 3u) << gm->graph().str();
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::batch_norm"), 2u) << gm->graph().str();
  EXPECT_EQ(count(gm->graph(), fx::Opcode::GetAttr, "blocks.0.conv.weight"), 1u) << gm->graph().str();
}

TEST(ImportCases, BareOperatorNames) {
  fx::ImportOptions options;
  options.overload_names = false;
  auto gm = import_and_check("simple", options);
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::add_"), 1u) << gm->graph().str();
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "aten::flatten"), 1u) << gm->graph().str();
}

TEST(ImportCases, DemangledTypeNames) {
  torch::jit::Module m = fx::load_torchscript(case_path("simple.pt"));
  torch::jit::Module conv = m.attr("blocks").toModule().attr("1").toModule().attr("conv").toModule();
  EXPECT_EQ(fx::demangled_type_name(conv), "__torch__.torch.nn.modules.conv.Conv2d");
  EXPECT_TRUE(fx::is_torch_nn_leaf(conv, fx::demangled_type_name(conv), "blocks.1.conv"));
  EXPECT_FALSE(fx::is_torch_nn_leaf(m.attr("blocks").toModule(), "__torch__.torch.nn.modules.container.Sequential",
                                    "blocks"));
}

}  // namespace

namespace {

std::string normalized(const fx::GraphModule& gm, const std::string& target, bool only_kwargs = false) {
  fx::NormalizeOptions options;
  options.normalize_to_only_use_kwargs = only_kwargs;
  for (fx::Node* n : gm.graph().find_nodes(fx::Opcode::CallModule, target)) {
    auto r = n->normalized_arguments(&gm, options);
    return r ? fx::format_args(r->args) + " " + fx::format_kwargs(r->kwargs) : "None";
  }
  return "no node";
}

}  // namespace

// Imported torch.nn leaves normalize with their scripted forward's signature,
// as torch.fx normalize_module reads the Python forward; other leaves give None.
TEST(ImportCases, NormalizedArgumentsOfLeaves) {
  auto gm = fx::import_torchscript(case_path("tuple_out.pt"));
  // The importer passes every argument of a scripted call positionally.
  EXPECT_EQ(normalized(*gm, "attn"), "(%x, %x, %x, None, False, None, True) {}") << gm->graph().str();
  EXPECT_EQ(normalized(*gm, "attn", true),
            "() {query: %x, key: %x, value: %x, key_padding_mask: None, need_weights: False, attn_mask: None, "
            "average_attn_weights: True}");
  auto simple = fx::import_torchscript(case_path("simple.pt"));
  EXPECT_EQ(normalized(*simple, "blocks.0.conv"), "(%stem,) {}") << simple->graph().str();
  fx::ImportOptions all_leaves;
  all_leaves.is_leaf_module = [](const torch::jit::Module&, const std::string&, const std::string& name) {
    return name == "blocks.0" || name == "stem" || name == "fc";
  };
  auto coarse = fx::import_torchscript(case_path("simple.pt"), all_leaves);
  EXPECT_EQ(normalized(*coarse, "blocks.0"), "None") << coarse->graph().str();
}
