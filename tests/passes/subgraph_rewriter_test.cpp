// replace_pattern / replace_pattern_with_filters: differential tests against
// torch.fx 1.13 (tests/passes/goldens/subgraph_rewriter.json, written by
// python/goldens/subgraph_rewriter_goldens.py), the cases where torch.fx is
// wrong, values against eager libtorch, and bad input.
#include <ATen/ATen.h>
#include <fx/examples/residual_net.h>
#include <fx/graph_module.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/trace.h>
#include <fx_paths.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/torch.h>

#include "passes_test_util.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "random_graph.h"

namespace {

using fx::Argument;
using fx::Graph;
using fx::GraphModule;
using fx::Node;
using fx::Opcode;

// ---- a minimal JSON reader for the golden file ----------------------------
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& operator[](const std::string& k) const { return obj.at(k); }
  const Json& operator[](size_t i) const { return arr.at(i); }
  bool has(const std::string& k) const { return obj.count(k) > 0; }
};

struct JsonReader {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  Json parse() {
    ws();
    Json j;
    char c = s.at(i);
    if (c == '{') {
      j.kind = Json::Object;
      ++i;
      ws();
      if (s[i] == '}') return ++i, j;
      while (true) {
        ws();
        std::string k = parse().str;
        ws();
        ++i;  // ':'
        j.obj[k] = parse();
        ws();
        if (s[i++] == '}') return j;
      }
    }
    if (c == '[') {
      j.kind = Json::Array;
      ++i;
      ws();
      if (s[i] == ']') return ++i, j;
      while (true) {
        j.arr.push_back(parse());
        ws();
        if (s[i++] == ']') return j;
      }
    }
    if (c == '"') {
      j.kind = Json::String;
      ++i;
      while (s[i] != '"') {
        if (s[i] == '\\') {
          ++i;
          char e = s[i++];
          if (e == 'n')
            j.str += '\n';
          else if (e == 'u') {
            j.str += static_cast<char>(std::stoi(s.substr(i, 4), nullptr, 16));
            i += 4;
          } else
            j.str += e;
        } else {
          j.str += s[i++];
        }
      }
      ++i;
      return j;
    }
    if (s.compare(i, 4, "null") == 0) return i += 4, j;
    if (s.compare(i, 4, "true") == 0) return i += 4, j.kind = Json::Bool, j.b = true, j;
    if (s.compare(i, 5, "false") == 0) return i += 5, j.kind = Json::Bool, j;
    size_t end = i;
    while (end < s.size() && (isdigit(static_cast<unsigned char>(s[end])) || strchr("+-.eE", s[end]))) ++end;
    j.kind = Json::Number;
    j.num = std::stod(s.substr(i, end - i));
    i = end;
    return j;
  }
};

const Json& goldens() {
  static const Json root = [] {
    std::ifstream f(std::string(FX_SOURCE_DIR) + "/tests/passes/goldens/subgraph_rewriter.json");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    return JsonReader{text}.parse();
  }();
  return root;
}

const Json& golden(const std::string& name) {
  for (const Json& c : goldens()["cases"].arr)
    if (c["name"].str == name) return c;
  throw std::runtime_error("no golden case " + name);
}

// The rewritten graph as the golden's rows: op, name, target, args, kwargs.
std::vector<std::vector<std::string>> rows(const Graph& g) {
  std::vector<std::vector<std::string>> out;
  for (Node* n : g.nodes())
    out.push_back(
        {to_string(n->op()), n->name(), n->target(), fx::format_args(n->args()), fx::format_kwargs(n->kwargs())});
  return out;
}

std::vector<std::vector<std::string>> golden_rows(const Json& c) {
  std::vector<std::vector<std::string>> out;
  for (const Json& r : c["graph"].arr) {
    std::vector<std::string> row;
    for (const Json& cell : r.arr) row.push_back(cell.str);
    out.push_back(row);
  }
  return out;
}

std::string show(const std::vector<std::vector<std::string>>& rs) {
  std::string s;
  for (const auto& r : rs) {
    for (const auto& c : r) s += c + " | ";
    s += "\n";
  }
  return s;
}

using fx_test::module_of;

// ---- the graphs of the golden cases, built as Python's tracer builds them ----
std::shared_ptr<Graph> add_relu_pattern() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  g->output(g->call_function("aten::relu", {g->call_function("aten::add", {x, y})}));
  return g;
}

std::shared_ptr<Graph> mul_sigmoid_replacement() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  g->output(g->call_function("aten::sigmoid", {g->call_function("aten::mul", {x, y})}));
  return g;
}

std::shared_ptr<Graph> unary_chain(const std::string& target, int n) {
  auto g = std::make_shared<Graph>();
  Node* v = g->placeholder("x");
  for (int i = 0; i < n; ++i) v = g->call_function(target, {v});
  g->output(v);
  return g;
}

// Every placeholder binding of every returned match is a live node of g.
void expect_no_stale_bindings(const std::vector<fx::ReplacedPatterns>& rs) {
  for (const auto& r : rs)
    for (const auto& [pn, v] : r.nodes_map)
      if (pn->op() == Opcode::Placeholder)
        fx::for_each_node(v, [&](Node* n) { EXPECT_FALSE(n->is_erased()) << pn->name() << " -> " << n->name(); });
}

void expect_golden(const std::string& name, GraphModule& gm, size_t matches) {
  const Json& c = golden(name);
  EXPECT_EQ(static_cast<size_t>(c["matches"].num), matches) << name;
  EXPECT_EQ(rows(gm.graph()), golden_rows(c)) << name << "\nfxcpp:\n"
                                              << show(rows(gm.graph())) << "torch.fx:\n"
                                              << show(golden_rows(c));
  gm.graph().lint();
}

TEST(SubgraphRewriterGolden, GoldenFileIsTorch113) { EXPECT_EQ(goldens()["torch"].str.substr(0, 4), "1.13"); }

TEST(SubgraphRewriterGolden, Simple) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* relu = g->call_function("aten::relu", {g->call_function("aten::add", {x, y})});
  g->output(g->call_function("aten::mul", {relu, 2}));
  auto gm = module_of(g);
  auto pattern = add_relu_pattern();
  auto replacement = mul_sigmoid_replacement();
  auto matches = fx::replace_pattern(*gm, *pattern, *replacement);
  ASSERT_EQ(matches.size(), 1u);
  // As torch.fx: the anchor is the pattern's node, nodes_map leads to the graph's.
  EXPECT_EQ(matches[0].anchor->graph().nodes().size(), pattern->nodes().size());
  EXPECT_EQ(matches[0].nodes_map.node(matches[0].anchor)->name(), "relu");
  expect_golden("simple", *gm, matches.size());
  at::Tensor a = at::rand({2, 3}), b = at::rand({2, 3});
  EXPECT_TRUE(at::allclose(gm->forward({a, b}).toTensor(), at::sigmoid(a * b) * 2));
}

// pytorch/pytorch#99039: after back-to-back matches torch.fx 1.13 returns
// nodes_map / placeholder_nodes that point at nodes it erased (golden:
// stale_placeholder_bindings [[], [relu], [relu_1]]). fxcpp returns the live
// replacement nodes; the graphs are identical.
TEST(SubgraphRewriterGolden, BackToBackMatchesReturnLiveNodes) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* v = x;
  for (int i = 0; i < 3; ++i) v = g->call_function("aten::relu", {g->call_function("aten::add", {v, y})});
  g->output(v);
  auto gm = module_of(g);
  auto pattern = add_relu_pattern();
  auto r = fx::replace_pattern_with_filters(*gm, *pattern, *mul_sigmoid_replacement());
  ASSERT_EQ(r.size(), 3u);
  expect_golden("back_to_back", *gm, r.size());
  const Json& stale = golden("back_to_back")["stale_placeholder_bindings"];
  EXPECT_EQ(stale[1][0].str, "relu");  // torch.fx: match 2's x is the erased relu
  expect_no_stale_bindings(r);         // fxcpp: it is the live sigmoid
  Node* px = pattern->nodes().to_vector()[0];
  EXPECT_EQ(r[1].nodes_map.node(px)->name(), "sigmoid");
  EXPECT_EQ(r[2].nodes_map.node(px)->name(), "sigmoid_1");
  // replacements: the nodes added, in graph order.
  ASSERT_EQ(r[2].replacements.size(), 2u);
  EXPECT_EQ(r[2].replacements[0]->name(), "mul_2");
  EXPECT_EQ(r[2].replacements[1]->name(), "sigmoid_2");
  at::Tensor a = at::rand({2, 3}), b = at::rand({2, 3});
  at::Tensor want = a;
  for (int i = 0; i < 3; ++i) want = at::sigmoid(want * b);
  EXPECT_TRUE(at::allclose(gm->forward({a, b}).toTensor(), want));
}

// Overlapping matches of relu(relu(x)) in relu^4: the first of each
// overlapping pair wins, as in torch.fx (two matches, not three).
TEST(SubgraphRewriterGolden, Overlapping) {
  auto gm = module_of(unary_chain("aten::relu", 4));
  auto pattern = unary_chain("aten::relu", 2);
  auto r = fx::replace_pattern_with_filters(*gm, *pattern, *unary_chain("aten::neg", 1));
  expect_golden("overlapping", *gm, r.size());
  expect_no_stale_bindings(r);  // torch.fx: match 2's x is the erased relu_1
  EXPECT_EQ(golden("overlapping")["stale_placeholder_bindings"][1][0].str, "relu_1");
}

// An inner node used outside the match: that match is not replaced.
TEST(SubgraphRewriterGolden, InnerNodeUsedOutsideIsNotReplaced) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function("aten::add", {x, y});
  Node* b = g->call_function("aten::relu", {a});
  Node* c = g->call_function("aten::relu", {g->call_function("aten::add", {x, y})});
  g->output(g->call_function("aten::add", {g->call_function("aten::add", {b, a}), c}));
  auto gm = module_of(g);
  auto r = fx::replace_pattern(*gm, *add_relu_pattern(), *mul_sigmoid_replacement());
  expect_golden("leaking", *gm, r.size());
}

TEST(SubgraphRewriterGolden, LiteralsMustBeEqual) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* r1 = g->call_function("aten::relu", {g->call_function("aten::add", {x, 1})});
  Node* r2 = g->call_function("aten::relu", {g->call_function("aten::add", {x, 2})});
  g->output(g->call_function("aten::add", {r1, r2}));
  auto gm = module_of(g);
  Graph pattern, replacement;
  {
    Node* px = pattern.placeholder("x");
    pattern.output(pattern.call_function("aten::relu", {pattern.call_function("aten::add", {px, 1})}));
    Node* rx = replacement.placeholder("x");
    replacement.output(replacement.call_function("aten::tanh", {replacement.call_function("aten::mul", {rx, 1})}));
  }
  auto r = fx::replace_pattern(*gm, pattern, replacement);
  expect_golden("literals", *gm, r.size());
}

TEST(SubgraphRewriterGolden, KwargsMustBeEqual) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a2 = g->call_function("aten::add", {x, y}, {{"alpha", 2}});
  Node* a3 = g->call_function("aten::add", {x, y}, {{"alpha", 3}});
  g->output(g->call_function("aten::mul", {a2, a3}));
  auto gm = module_of(g);
  Graph pattern, replacement;
  {
    Node* px = pattern.placeholder("x");
    Node* py = pattern.placeholder("y");
    pattern.output(pattern.call_function("aten::add", {px, py}, {{"alpha", 2}}));
    Node* rx = replacement.placeholder("x");
    Node* ry = replacement.placeholder("y");
    replacement.output(replacement.call_function("aten::add", {replacement.call_function("aten::add", {rx, ry}), ry}));
  }
  at::Tensor a = at::rand({2, 3}), b = at::rand({2, 3});
  auto r = fx::replace_pattern(*gm, pattern, replacement);
  expect_golden("kwargs", *gm, r.size());
  EXPECT_TRUE(at::allclose(gm->forward({a, b}).toTensor(), (a + b + b) * (a + 3 * b)));
}

Graph* build_multi_output(Graph& g, const char* t1, const char* t2, const char* t3) {
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function(t1, {x, y});
  g.output(Argument::tuple({g.call_function(t2, {a}), g.call_function(t3, {a})}));
  return &g;
}

TEST(SubgraphRewriterGolden, MultipleOutputs) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function("aten::add", {x, y});
  Node* b = g->call_function("aten::relu", {a});
  Node* c = g->call_function("aten::sigmoid", {a});
  g->output(g->call_function("aten::mul", {b, c}));
  auto gm = module_of(g);
  Graph pattern, replacement;
  build_multi_output(pattern, "aten::add", "aten::relu", "aten::sigmoid");
  build_multi_output(replacement, "aten::mul", "aten::tanh", "aten::neg");
  auto r = fx::replace_pattern_with_filters(*gm, pattern, replacement);
  expect_golden("multiple_outputs", *gm, r.size());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].replacements.size(), 3u);
  at::Tensor p = at::rand({2, 3}), q = at::rand({2, 3});
  EXPECT_TRUE(at::allclose(gm->forward({p, q}).toTensor(), at::tanh(p * q) * -(p * q)));
}

// A two-output match whose input tanh(y) is defined after the first user of
// its first output. torch.fx inserts the replacement before that user and
// the graph fails lint (golden: run_error "Argument 'tanh' of Node 'add_1'
// was used before it has been defined!"). fxcpp inserts it after the input
// and moves the user after it: lint-clean and the right values.
TEST(SubgraphRewriterGolden, MultipleOutputsWithLateInputStayOrdered) {
  const Json& c = golden("late_input");
  EXPECT_NE(c["run_error"].str.find("Argument 'tanh' of Node 'add_1' was used before it has been defined!"),
            std::string::npos);
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* a = g->call_function("aten::add", {x, y});
  Node* r1 = g->call_function("aten::relu", {a});
  Node* u = g->call_function("aten::neg", {r1});
  Node* w = g->call_function("aten::tanh", {y});
  Node* r2 = g->call_function("aten::mul", {a, w});
  g->output(Argument::tuple({u, r2}));
  auto gm = module_of(g);
  Graph pattern, replacement;
  {
    Node* px = pattern.placeholder("x");
    Node* py = pattern.placeholder("y");
    Node* pw = pattern.placeholder("w");
    Node* pa = pattern.call_function("aten::add", {px, py});
    pattern.output(
        Argument::tuple({pattern.call_function("aten::relu", {pa}), pattern.call_function("aten::mul", {pa, pw})}));
    Node* rx = replacement.placeholder("x");
    Node* ry = replacement.placeholder("y");
    Node* rw = replacement.placeholder("w");
    Node* m = replacement.call_function("aten::mul", {rx, ry});
    replacement.output(Argument::tuple(
        {replacement.call_function("aten::sigmoid", {m}), replacement.call_function("aten::add", {m, rw})}));
  }
  auto r = fx::replace_pattern(*gm, pattern, replacement);
  ASSERT_EQ(r.size(), 1u);
  gm->graph().lint();
  std::vector<std::string> names;
  for (Node* n : gm->graph().nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y", "tanh", "mul_1", "sigmoid", "add_1", "neg", "output"}));
  at::Tensor p = at::rand({2, 3}), q = at::rand({2, 3});
  auto out = gm->forward({p, q}).toTuple()->elements();
  EXPECT_TRUE(at::allclose(out[0].toTensor(), -at::sigmoid(p * q)));
  EXPECT_TRUE(at::allclose(out[1].toTensor(), p * q + at::tanh(q)));
}

// pytorch/pytorch#159613: cat([cat([x, y], 1), z], 1) with a pattern whose
// placeholder stands for the tensor list. torch 1.13 cannot bind a list to a
// placeholder (golden: 0 matches); newer torch.fx binds it but the second
// replacement keeps reading the first, erased cat. fxcpp replaces both and
// the second reads the first replacement.
TEST(SubgraphRewriterGolden, BackToBackMatchesThroughLists) {
  EXPECT_EQ(golden("cat_lists")["matches"].num, 0);
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* z = g->placeholder("z");
  Node* c1 = g->call_function("aten::cat", {Argument::list({x, y}), 1});
  g->output(g->call_function("aten::cat", {Argument::list({c1, z}), 1}));
  auto gm = module_of(g);
  Graph pattern, replacement;
  {
    Node* xs = pattern.placeholder("xs");
    Node* dim = pattern.placeholder("dim");
    pattern.output(pattern.call_function("aten::cat", {xs, dim}));
    Node* rxs = replacement.placeholder("xs");
    Node* rdim = replacement.placeholder("dim");
    replacement.output(replacement.call_function("aten::concat", {rxs, rdim}));
  }
  auto r = fx::replace_pattern_with_filters(*gm, pattern, replacement);
  ASSERT_EQ(r.size(), 2u);
  gm->graph().lint();
  std::vector<std::vector<std::string>> want = {
      {"placeholder", "x", "x", "()", "{}"},
      {"placeholder", "y", "y", "()", "{}"},
      {"placeholder", "z", "z", "()", "{}"},
      {"call_function", "concat", "aten::concat", "([%x, %y], 1)", "{}"},
      {"call_function", "concat_1", "aten::concat", "([%concat, %z], 1)", "{}"},
      {"output", "output", "output", "(%concat_1,)", "{}"}};
  EXPECT_EQ(rows(gm->graph()), want) << show(rows(gm->graph()));
  EXPECT_EQ(r[1].nodes_map.at(pattern.nodes().to_vector()[0]).repr(), "[concat, z]");
  expect_no_stale_bindings(r);
  at::Tensor a = at::rand({2, 3}), b = at::rand({2, 3}), c = at::rand({2, 3});
  EXPECT_TRUE(at::equal(gm->forward({a, b, c}).toTensor(), at::cat({at::cat({a, b}, 1), c}, 1)));
}

// ---- traced patterns, filters, literals ----------------------------------

at::Tensor t(const c10::IValue& v) { return v.toTensor(); }

TEST(SubgraphRewriter, TracedFunctionsOnResidualNet) {
  torch::NoGradGuard no_grad;
  at::manual_seed(0);
  auto model = fx::examples::ResidualNet(3, 8, 10);
  model->eval();
  at::Tensor x = at::randn({2, 3, 16, 16});
  auto gm = fx::symbolic_trace(model.ptr(), {x});
  at::Tensor ex = at::randn({2, 8, 8, 8});
  auto pattern = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0]) + t(a[1])); }, {ex, ex});
  auto replacement = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::clamp_min(at::add(t(a[0]), t(a[1])), 0); }, {ex, ex});
  const std::string before = gm->code();
  auto r = fx::replace_pattern(*gm, *pattern, *replacement);
  ASSERT_EQ(r.size(), 1u) << before;
  const std::string after = gm->code();
  EXPECT_NE(after.find("clamp_min"), std::string::npos) << after;
  EXPECT_TRUE(at::allclose(gm->forward(x), model->forward(x), 1e-5, 1e-6));
  gm->graph().lint();
}

TEST(SubgraphRewriter, FiltersAndIgnoreLiterals) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {g->call_function("aten::mul", {x, 2})});
  Node* b = g->call_function("aten::relu", {g->call_function("aten::mul", {x, 3})});
  g->output(g->call_function("aten::add", {a, b}));
  Graph pattern, replacement;
  Node* px = pattern.placeholder("x");
  pattern.output(pattern.call_function("aten::relu", {pattern.call_function("aten::mul", {px, 2})}));
  Node* rx = replacement.placeholder("x");
  replacement.output(replacement.call_function("aten::neg", {rx}));
  auto count = [&](bool ignore, std::vector<fx::MatchFilter> filters) {
    auto g2 = std::make_shared<Graph>();
    std::unordered_map<const Node*, Node*> vm;
    g2->output(*g2->graph_copy(*g, vm));
    auto gm = module_of(g2);
    size_t n = fx::replace_pattern_with_filters(*gm, pattern, replacement, filters, ignore).size();
    gm->graph().lint();
    return n;
  };
  EXPECT_EQ(count(false, {}), 1u);
  EXPECT_EQ(count(true, {}), 2u);  // ignore_literals: mul(x, 3) matches too
  // A filter that rejects matches whose mul multiplies by 3.
  fx::MatchFilter not_three = [&](const fx::InternalMatch& m, const Graph&, const Graph&) {
    Node* mul = m.nodes_map.node(pattern.nodes().to_vector()[1]);
    return mul->args()[1].to_int() != 3;
  };
  EXPECT_EQ(count(true, {not_three}), 1u);
  fx::MatchFilter none = [](const fx::InternalMatch&, const Graph&, const Graph&) { return false; };
  EXPECT_EQ(count(true, {not_three, none}), 0u);
}

// A replacement GraphModule with a submodule and a parameter: both are
// copied (cloned) into gm, as torch.fx deep-copies them.
struct Scaled : torch::nn::Module {
  Scaled() {
    fc = register_module("fc", torch::nn::Linear(4, 4));
    scale = register_parameter("scale", at::full({4}, 0.5));
  }
  at::Tensor forward(const at::Tensor& x) { return at::relu(fc(x)) * scale; }
  torch::nn::Linear fc{nullptr};
  at::Tensor scale;
};

TEST(SubgraphRewriter, ReplacementSubmodulesAreCopied) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function("aten::neg", {g->call_function("aten::relu", {x})}));
  auto gm = module_of(g);
  at::Tensor ex = at::randn({4});
  auto pattern = fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0])); }, {ex});
  auto scaled = std::make_shared<Scaled>();
  auto replacement = fx::symbolic_trace(scaled, {ex});
  ASSERT_EQ(replacement->graph().find_nodes(Opcode::CallModule).size(), 1u) << replacement->graph();
  ASSERT_EQ(replacement->graph().find_nodes(Opcode::GetAttr).size(), 1u) << replacement->graph();
  auto r = fx::replace_pattern(*gm, *pattern, *replacement);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(gm->get_submodule("fc"), nullptr);
  EXPECT_NE(gm->get_submodule("fc"), replacement->get_submodule("fc"));  // a copy
  EXPECT_TRUE(at::equal(gm->fetch_attr("scale"), scaled->scale));
  at::Tensor v = at::randn({3, 4});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(at::allclose(gm->forward(v), -scaled->forward(v)));
}

TEST(SubgraphRewriter, AsAPass) {
  at::Tensor ex = at::randn({4});
  auto pattern =
      fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::neg(at::neg(t(a[0]))); }, {ex});
  auto replacement = fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return a[0]; }, {ex});
  auto gm = module_of(unary_chain("aten::neg", 4));
  fx::PassFn pass = fx::replace_pattern_pass(pattern, replacement);
  fx::PassResult res = pass(gm);
  EXPECT_TRUE(res.modified);
  gm->graph().lint();
  // Identity replacements: the users read the input directly.
  EXPECT_EQ(gm->graph().nodes().size(), 2u) << gm->graph();
  EXPECT_FALSE(pass(gm).modified);
  at::Tensor v = at::randn({4});
  EXPECT_TRUE(at::equal(gm->forward(v), v));
}

// ---- property: equivalent rewrites keep the outputs of random graphs -------

// Random graphs (duplicates, dead code, attribute-only chains, 1-3 outputs)
// rewritten with three value-preserving rules; every instance of each
// pattern is gone afterwards (dead ones too: torch.fx asserts on a match
// without users), the graph lints, and the outputs are unchanged.
TEST(SubgraphRewriterProperty, RandomGraphsKeepTheirValues) {
  auto rule = [](const char* what) {
    auto p = std::make_shared<Graph>(), r = std::make_shared<Graph>();
    Node* x = p->placeholder("x");
    Node* rx = r->placeholder("x");
    if (std::string(what) == "neg") {
      p->output(p->call_function("aten::neg", {x}));
      r->output(r->call_function("aten::mul", {rx, -1.0}));
    } else if (std::string(what) == "tanh_half") {
      p->output(p->call_function("aten::tanh", {p->call_function("aten::mul", {x, 0.5})}));
      r->output(r->call_function("aten::tanh", {r->call_function("aten::div", {rx, 2.0})}));
    } else {
      Node* y = p->placeholder("y");
      Node* ry = r->placeholder("y");
      p->output(p->call_function("aten::add", {x, y}, {{"alpha", 0.5}}));
      r->output(r->call_function("aten::add", {rx, r->call_function("aten::mul", {ry, 0.5})}));
    }
    return std::make_pair(p, r);
  };
  size_t total = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    fx_test::RandomGraph rg = fx_test::make_random_graph(seed);
    const c10::IValue want = rg.gm->forward(rg.inputs);
    for (const char* what : {"neg", "tanh_half", "add_alpha"}) {
      auto [p, r] = rule(what);
      total += fx::replace_pattern(*rg.gm, *p, *r).size();
      rg.gm->graph().lint();
      // Nothing left to match.
      EXPECT_TRUE(fx::SubgraphMatcher(*p).match(rg.gm->graph()).empty()) << what << " seed " << seed;
    }
    EXPECT_TRUE(rg.gm->graph().find_nodes(Opcode::CallFunction, "aten::neg").empty());
    const auto got = rg.gm->forward(rg.inputs).toTuple()->elements();
    const auto expected = want.toTuple()->elements();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(at::allclose(got[i].toTensor(), expected[i].toTensor(), 1e-5, 1e-6)) << "seed " << seed;
  }
  EXPECT_GT(total, 100u);
}

// ---- bad input: fx::Error naming the node, graph unchanged -----------------

void expect_error_unchanged(const Graph& pattern, const Graph& replacement, const std::string& message) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  g->output(g->call_function("aten::relu", {g->call_function("aten::add", {x, y})}));
  auto gm = module_of(g);
  const std::string before = g->str();
  const uint64_t version = g->version();
  try {
    fx::replace_pattern(*gm, pattern, replacement);
    ADD_FAILURE() << "no error, wanted: " << message;
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
  EXPECT_EQ(g->str(), before);
  EXPECT_EQ(g->version(), version);
}

TEST(SubgraphRewriterErrors, PatternWithoutOutput) {
  Graph pattern;
  Node* px = pattern.placeholder("x");
  Node* py = pattern.placeholder("y");
  pattern.call_function("aten::relu", {pattern.call_function("aten::add", {px, py})});
  expect_error_unchanged(pattern, *mul_sigmoid_replacement(),
                         "SubgraphMatcher: the pattern has no output node (its last node is %relu : [#users=0] = "
                         "call_function[target=aten::relu](args = (%add,), kwargs = {}))");
}

TEST(SubgraphRewriterErrors, ReplacementWithOtherInputCount) {
  Graph replacement;
  Node* rx = replacement.placeholder("x");
  replacement.output(replacement.call_function("aten::neg", {rx}));
  expect_error_unchanged(*add_relu_pattern(), replacement,
                         "replace_pattern: the pattern has 2 placeholders (x, y) but the replacement has 1 "
                         "placeholder (x)");
}

TEST(SubgraphRewriterErrors, ReplacementWithOtherOutputCount) {
  Graph replacement;
  build_multi_output(replacement, "aten::mul", "aten::tanh", "aten::neg");
  expect_error_unchanged(*add_relu_pattern(), replacement,
                         "replace_pattern: the pattern returns 1 value (relu) but the replacement returns 2 values: "
                         "return (tanh, neg)");
}

TEST(SubgraphRewriterErrors, ReplacementWithoutOutput) {
  Graph replacement;
  Node* rx = replacement.placeholder("x");
  Node* ry = replacement.placeholder("y");
  replacement.call_function("aten::add", {rx, ry});
  expect_error_unchanged(*add_relu_pattern(), replacement, "replace_pattern: the replacement has no output node");
}

TEST(SubgraphRewriterErrors, PatternWithDeadCode) {
  Graph pattern;
  Node* px = pattern.placeholder("x");
  Node* py = pattern.placeholder("y");
  pattern.call_function("aten::neg", {px});
  pattern.output(pattern.call_function("aten::relu", {pattern.call_function("aten::add", {px, py})}));
  expect_error_unchanged(pattern, *mul_sigmoid_replacement(),
                         "SubgraphMatcher cannot be initialized with an pattern with dead code: %neg : [#users=0] = "
                         "call_function[target=aten::neg](args = (%x,), kwargs = {})");
}

TEST(SubgraphRewriterErrors, ReplacementTargetMissing) {
  Graph replacement;
  Node* rx = replacement.placeholder("x");
  replacement.placeholder("y");
  replacement.output(replacement.call_module("fused", {rx}));
  expect_error_unchanged(*add_relu_pattern(), replacement,
                         "Attempted to create a \"call_module\" node during subgraph rewriting with target fused, "
                         "but the referenced attribute does not exist in the replacement GraphModule (%fused : "
                         "[#users=1] = call_module[target=fused](args = (%x,), kwargs = {}))");
}

TEST(SubgraphRewriterErrors, ReplacementReturningALiteralBinding) {
  // The pattern's y matches the literal 1; the replacement returns y.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function("aten::relu", {g->call_function("aten::add", {x, 1})}));
  auto gm = module_of(g);
  const std::string before = g->str();
  Graph replacement;
  replacement.placeholder("x");
  replacement.output(replacement.placeholder("y"));
  EXPECT_THROW(fx::replace_pattern(*gm, *add_relu_pattern(), replacement), fx::Error);
  EXPECT_EQ(g->str(), before);
}

}  // namespace
