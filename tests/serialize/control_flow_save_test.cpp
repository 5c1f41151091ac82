// Models with run-time control flow (cond / loop modules with branch and body
// graphs, fx/control_flow.h) through fx::save / fx::load: every case of
// python/make_control_flow_cases.py computes as eager PyTorch after a round
// trip, with the same structure; leaves shared by several graphs stay one
// module stored once; targets registered at import are registered again
// from their names; a damaged control-flow entry is one error naming it.
#include "serialize_test_util.h"

#include "../import/cases.h"
#include "torchscript/jit_targets.h"

#include <fx/control_flow.h>
#include <fx/export.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/tensor_file.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_set>

namespace fx {
namespace {

using json = nlohmann::json;
using serialize_test::archive;
using serialize_test::document_of;
using serialize_test::error_of;

/// Every case of python/make_control_flow_cases.py.
const std::vector<std::string>& case_names() {
  static const std::vector<std::string> names = {
      "data_if",       "nested_if",    "loop_over_length", "carried_loop", "while_data",
      "break_loop",    "early_return", "optional_arg",     "dict_out",     "raising_branch",
      "interpolate",   "lstm",         "lstm_traced",      "weight_only_traced"};
  return names;
}

std::string case_file(const std::string& name) { return testing::control_flow_cases_dir() + "/" + name; }

bool exists(const std::string& p) { return std::ifstream(p).good(); }

/// `gm` computes NAME.output.pt on NAME.input.pt (and the second input when
/// the case has one) through forward() and the Interpreter.
void expect_eager_values(const std::shared_ptr<GraphModule>& gm, const std::string& name) {
  for (const std::string suffix : {"", "2"}) {
    const std::string in = case_file(name + ".input" + suffix + ".pt");
    if (!exists(in)) continue;
    auto inputs = load_inputs(in);
    const c10::IValue expected = load_value(case_file(name + ".output" + suffix + ".pt"));
    auto d = compare_values(gm->forward(inputs), expected);
    EXPECT_LE(d.max_abs_diff, 1e-5 * std::max(1.0, d.max_abs_expected)) << name << suffix << " forward";
    auto di = compare_values(Interpreter(gm).run(inputs), expected);
    EXPECT_LE(di.max_abs_diff, 1e-5 * std::max(1.0, di.max_abs_expected)) << name << suffix << " interpreter";
  }
}

/// `m` (TorchScript) computes NAME.output.pt on each input of the case.
void expect_eager_values(torch::jit::Module& m, const std::string& name) {
  for (const std::string suffix : {"", "2"}) {
    const std::string in = case_file(name + ".input" + suffix + ".pt");
    if (!exists(in)) continue;
    const c10::IValue expected = load_value(case_file(name + ".output" + suffix + ".pt"));
    auto d = compare_values(m.forward(load_inputs(in)), expected);
    EXPECT_LE(d.max_abs_diff, 1e-5 * std::max(1.0, d.max_abs_expected)) << name << suffix << " TorchScript";
  }
}

/// The control-flow structure below `gm`: per nested graph, its path, class,
/// code, and every control-flow module it calls with its counts.
std::vector<std::string> structure(GraphModule& gm) {
  std::vector<std::string> out;
  auto describe = [&](const std::string& path, GraphModule& g) {
    out.push_back(path + ": " + g.class_name() + "\n" + g.code());
    for (Node* n : g.graph().nodes()) {
      if (n->op() != Opcode::CallModule) continue;
      auto m = g.get_submodule(n->target());
      if (auto* c = dynamic_cast<CondModule*>(m.get()))
        out.push_back(path + "/" + n->target() + ": cond of " + std::to_string(c->num_results()));
      if (auto* l = dynamic_cast<WhileLoopModule*>(m.get()))
        out.push_back(path + "/" + n->target() + ": loop carrying " + std::to_string(l->num_carried()));
    }
  };
  describe("", gm);
  for_each_subgraph(gm, describe);
  return out;
}

/// The [name, MODULE] child `name` of a module document.
json& child(json& module, const std::string& name) {
  for (json& item : module["children"])
    if (item[0] == name) return item[1];
  throw std::runtime_error("no child " + name);
}

TEST(ControlFlowSave, GeneratorRan) {
  ASSERT_FALSE(testing::control_flow_cases_dir().empty()) << "python/make_control_flow_cases.py failed";
}

TEST(ControlFlowSave, EveryCaseRoundTripsWithItsStructureAndEagerValues) {
  size_t with_control_flow = 0;
  for (const std::string& name : case_names()) {
    SCOPED_TRACE(name);
    auto gm = import_torchscript(case_file(name + ".pt"));
    auto loaded = serialize_test::round_trip(*gm);
    EXPECT_EQ(structure(*loaded), structure(*gm));
    EXPECT_EQ(loaded->print_readable(), gm->print_readable());
    expect_eager_values(loaded, name);
    size_t subgraphs = 0;
    for_each_subgraph(*loaded, [&](const std::string&, GraphModule& g) {
      g.graph().lint();
      ++subgraphs;
    });
    with_control_flow += subgraphs > 0;
  }
  // Most cases keep control flow: the round trip above is about them.
  EXPECT_GE(with_control_flow, 9u);
}

TEST(ControlFlowSave, NestedCondsAndLoopsKeepTheirKindsCountsAndPaths) {
  auto gm = import_torchscript(case_file("nested_if.pt"));
  auto loaded = serialize_test::round_trip(*gm);
  std::vector<std::string> paths;
  for_each_subgraph(*loaded, [&](const std::string& p, GraphModule&) { paths.push_back(p); });
  EXPECT_EQ(paths, (std::vector<std::string>{"cond_1.true_graph.cond_0.true_graph", "cond_1.true_graph.cond_0.false_graph",
                                             "cond_1.true_graph", "cond_1.false_graph"}));
  auto cond = std::dynamic_pointer_cast<CondModule>(loaded->get_submodule("cond_1"));
  ASSERT_TRUE(cond);
  EXPECT_EQ(cond->num_results(), 2u);
  auto loop = std::dynamic_pointer_cast<WhileLoopModule>(
      serialize_test::round_trip(*import_torchscript(case_file("carried_loop.pt")))->get_submodule("loop_0"));
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->num_carried(), 1u);
  EXPECT_EQ(loop->body().class_name(), "body_graph_0");
}

TEST(ControlFlowSave, LeavesSharedByTheRootAndABranchAreOneModuleStoredOnce) {
  // lin runs in the root graph and in the true branch: one module, one weight.
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("lin", torch::nn::Linear(3, 3).ptr());
  auto branch = [&](bool with_lin, const std::string& class_name) {
    auto g = std::make_shared<Graph>();
    Node* x = g->placeholder("x");
    g->output(with_lin ? g->call_module("lin", {x}) : g->call_function("aten::neg", {x}));
    return std::make_shared<GraphModule>(root, g, class_name);
  };
  root->register_module("cond_0", std::make_shared<CondModule>(branch(true, "t"), branch(false, "f"), 1));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->call_module("lin", {x});
  Node* pred = g->call_function("aten::gt", {g->call_function("aten::sum", {y}), 0});
  g->output(g->call_module("cond_0", {pred, y}));
  auto gm = std::make_shared<GraphModule>(root, g);

  SaveReport report;
  const std::string bytes = save_to_string(*gm, {}, &report);
  EXPECT_EQ(report.storages, 2u);  // weight and bias, once
  json doc = document_of(bytes);
  EXPECT_EQ(child(child(doc["root"], "cond_0")["true_graph"], "lin"), (json{{"kind", "shared"}, {"path", "lin"}}));
  auto loaded = load_from_string(bytes, "mem.fx");
  EXPECT_EQ(loaded->get_submodule("lin").get(), loaded->get_submodule("cond_0.true_graph.lin").get());
  for (float sign : {1.0f, -1.0f}) {
    at::Tensor in = at::full({2, 3}, sign);
    EXPECT_TRUE(serialize_test::same_value(loaded->forward({in}), gm->forward({in})));
  }
}

TEST(ControlFlowSave, ImportTargetsAreRegisteredAgainFromTheirNames) {
  using import_detail::register_import_target;
  // Names this process has not imported: the types come from the names.
  ASSERT_TRUE(register_import_target("prim::ListConstruct.Tuple_int_Tensor"));
  std::vector<c10::IValue> args{c10::ivalue::Tuple::create({int64_t(1), at::ones({2})})};
  std::vector<c10::IValue> kwargs;
  c10::IValue list = FunctionCall("prim::ListConstruct.Tuple_int_Tensor", {}).call(args, kwargs);
  EXPECT_EQ(list.toList().elementType()->annotation_str(), "Tuple[int, Tensor]");
  ASSERT_TRUE(register_import_target("prim::DictConstruct.Dict_int_List_float"));
  args = {int64_t(3), c10::List<double>({1.5})};
  c10::IValue dict = FunctionCall("prim::DictConstruct.Dict_int_List_float", {}).call(args, kwargs);
  EXPECT_EQ(dict.toGenericDict().keyType()->annotation_str(), "int");
  EXPECT_EQ(dict.toGenericDict().valueType()->annotation_str(), "List[float]");
  EXPECT_EQ(dict.toGenericDict().at(int64_t(3)).toDoubleList().get(0), 1.5);
  // TorchScript-only operators, a vararg one with its input count.
  ASSERT_TRUE(register_import_target("aten::format.default_3"));
  args = {std::string("{}-{}"), int64_t(4), std::string("b")};
  EXPECT_EQ(FunctionCall("aten::format.default_3", {}).call(args, kwargs).toStringRef(), "4-b");
  ASSERT_TRUE(register_import_target("aten::append.t"));
  c10::impl::GenericList l(c10::IntType::get());
  args = {l, int64_t(7)};
  FunctionCall("aten::append.t", {}).call(args, kwargs);
  EXPECT_EQ(l.size(), 1u);
  // Not such names: nothing registered.
  EXPECT_FALSE(register_import_target("prim::ListConstruct.Tuple_Tuple_int_int"));  // two readings
  EXPECT_FALSE(register_import_target("prim::ListConstruct.NoSuchType"));
  EXPECT_FALSE(register_import_target("aten::append.no_such_overload"));
  EXPECT_FALSE(register_import_target("mylib::nothing.default"));
}

TEST(ControlFlowExport, EveryCaseExportsToTorchScriptThatComputesAsEager) {
  const std::string file = ::testing::TempDir() + "/control_flow_export_" + std::to_string(::getpid()) + ".pt";
  const std::map<std::string, std::string> refusals = {
      {"optional_arg", "cannot export node 'bias' (placeholder[target=bias]): inputs with default values are not exported"},
      {"lstm", "cannot export node 'rnn' (call_module[target=rnn]): the C++ module LSTM has no TorchScript form "
               "(exported leaves: Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, BatchNorm1d/2d/3d, LayerNorm, GroupNorm, "
               "Embedding, TorchScript leaves, GraphModules)"}};
  size_t exported = 0;
  for (const std::string& name : case_names()) {
    SCOPED_TRACE(name);
    auto gm = import_torchscript(case_file(name + ".pt"));
    auto refused = refusals.find(name);
    if (refused != refusals.end()) {  // not about control flow: what export has no TorchScript form for
      EXPECT_EQ(error_of([&] { export_torchscript(*gm, file); }), refused->second);
      EXPECT_FALSE(exists(file));
      continue;
    }
    export_torchscript(*gm, file);
    torch::jit::Module m = torch::jit::load(file);
    std::remove(file.c_str());
    expect_eager_values(m, name);
    // The conditions and loops are TorchScript's own, not calls of branch modules.
    size_t blocks = 0;
    for (const torch::jit::Node* n : m.get_method("forward").graph()->nodes())
      blocks += n->kind() == c10::prim::If || n->kind() == c10::prim::Loop;
    size_t modules = 0;
    for (Node* n : gm->graph().nodes())
      if (n->op() == Opcode::CallModule && !control_flow_graphs(*gm->get_submodule(n->target())).empty()) ++modules;
    EXPECT_GE(blocks, modules);
    ++exported;
  }
  EXPECT_EQ(exported, case_names().size() - refusals.size());
}

TEST(ControlFlowExport, ABranchThatCannotBeExportedNamesItsNode) {
  static bool registered = [] {
    register_function("cf_test::twice", [](std::vector<c10::IValue>& args, ValueKwargs&) -> c10::IValue {
      return args.at(0).toTensor() * 2;
    });
    return true;
  }();
  ASSERT_TRUE(registered);
  auto root = std::make_shared<torch::nn::Module>();
  auto branch = [&](const std::string& target) {
    auto g = std::make_shared<Graph>();
    g->output(g->call_function(target, {g->placeholder("x")}));
    return std::make_shared<GraphModule>(root, g, "b");
  };
  root->register_module("cond_0", std::make_shared<CondModule>(branch("aten::neg"), branch("cf_test::twice"), 1));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_module("cond_0", {g->call_function("aten::any", {x}), x}));
  GraphModule gm(root, g);
  EXPECT_EQ(error_of([&] { to_torchscript(gm); }),
            "cannot export node 'twice' (call_function[target=cf_test::twice]): 'cf_test::twice' is not a TorchScript "
            "operator (functions registered with fx::register_function cannot be exported)");
}

TEST(ControlFlowSave, DamagedControlFlowEntriesNameTheModule) {
  const std::string bytes = save_to_string(*import_torchscript(case_file("nested_if.pt")));
  const json good = document_of(bytes);
  auto error_with = [&](const std::function<void(json& cond)>& damage) {
    json doc = good;
    damage(child(doc["root"], "cond_1"));
    // The document alone suffices: this case has no leaves and no tensors.
    const std::string file = archive({{"extra/fxcpp.json", doc.dump()}});
    return error_of([&] { load_from_string(file, "bad.fx"); });
  };
  ASSERT_FALSE(good.contains("torchscript"));
  EXPECT_EQ(error_with([](json& c) { c.erase("num_results"); }), "bad.fx: module 'cond_1': missing key 'num_results'");
  EXPECT_EQ(error_with([](json& c) { c["num_results"] = -2; }),
            "bad.fx: module 'cond_1': num_results is -2, it must not be negative");
  EXPECT_EQ(error_with([](json& c) { c.erase("false_graph"); }), "bad.fx: module 'cond_1': missing key 'false_graph'");
  EXPECT_EQ(error_with([](json& c) { c["true_graph"] = {{"kind", "module"}, {"training", false}, {"parameters", json::array()},
                                                       {"buffers", json::array()}, {"children", json::array()}}; }),
            "bad.fx: module 'cond_1': its true_graph is not a graph_module");
  EXPECT_EQ(error_with([](json& c) { child(c["true_graph"], "cond_0")["kind"] = "switch"; }),
            "bad.fx: module 'cond_1.true_graph.cond_0': unknown module kind 'switch'");
  EXPECT_EQ(error_with([](json& c) { c = {{"kind", "shared"}, {"path", "cond_1.true_graph"}}; }),
            "bad.fx: module 'cond_1': refers to module 'cond_1.true_graph', which is not written before it");
  EXPECT_EQ(error_with([](json& c) { c["kind"] = "while_loop"; }), "bad.fx: module 'cond_1': missing key 'num_carried'");
}

}  // namespace
}  // namespace fx
