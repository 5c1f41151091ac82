// CSEPass against Python torch.fx 1.13's CSEPass: the same random graphs
// (tests/passes/goldens/cse.txt, written by python/goldens/cse_goldens.py)
// give the same nodes after the pass, name for name.
#include <fx/passes/cse.h>

#include <fx_paths.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <unordered_map>

namespace {

/// One argument in the goldens' text form (n:name, i:1, f:0.5, t:a,b).
fx::Argument parse_arg(const std::string& s, const std::unordered_map<std::string, fx::Node*>& nodes) {
  const std::string v = s.substr(2);
  switch (s.at(0)) {
    case 'n': return nodes.at(v);
    case 'i': return static_cast<int64_t>(std::stoll(v));
    case 'f': return std::stod(v);
    case 't': {
      std::vector<fx::Argument> items;
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) items.push_back(parse_arg(item, nodes));
      return fx::Argument::tuple(items);
    }
  }
  throw std::runtime_error("bad golden argument " + s);
}

std::string golden_arg(const fx::Argument& a) {
  switch (a.kind()) {
    case fx::Argument::Kind::Node: return "n:" + a.to_node()->name();
    case fx::Argument::Kind::Int: return "i:" + std::to_string(a.to_int());
    case fx::Argument::Kind::Double: return "f:" + fx::python_float_repr(a.to_double());
    case fx::Argument::Kind::Tuple: {
      std::string s = "t:";
      for (size_t i = 0; i < a.items().size(); ++i) s += (i ? "," : "") + golden_arg(a.items()[i]);
      return s;
    }
    default: return "?";
  }
}

std::vector<std::string> dump(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes()) {
    std::string line = n->name() + " " + fx::to_string(n->op()) + " " + n->target();
    for (const auto& a : n->args()) line += " " + golden_arg(a);
    for (const auto& kv : n->kwargs()) line += " k:" + kv.first + "=" + golden_arg(kv.second);
    out.push_back(line);
  }
  return out;
}

struct Case {
  std::string name;
  bool modified = false;
  std::vector<std::string> before, after;
};

std::vector<Case> read_cases() {
  std::ifstream in(std::string(FX_SOURCE_DIR) + "/tests/passes/goldens/cse.txt");
  std::vector<Case> cases;
  std::vector<std::string>* section = nullptr;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("case ", 0) == 0) {
      cases.push_back({line.substr(5, line.find(' ', 5) - 5), line.find("modified=True") != std::string::npos, {}, {}});
      section = &cases.back().before;
    } else if (line == "after") {
      section = &cases.back().after;
    } else if (line != "end") {
      section->push_back(line);
    }
  }
  return cases;
}

std::shared_ptr<fx::GraphModule> build(const std::vector<std::string>& lines) {
  auto g = std::make_shared<fx::Graph>();
  std::unordered_map<std::string, fx::Node*> nodes;
  for (const std::string& line : lines) {
    std::stringstream ss(line);
    std::string name, op, target, tok;
    ss >> name >> op >> target;
    fx::ArgList args;
    fx::Kwargs kwargs;
    while (ss >> tok) {
      if (tok.rfind("k:", 0) == 0) {
        size_t eq = tok.find('=');
        kwargs.emplace_back(tok.substr(2, eq - 2), parse_arg(tok.substr(eq + 1), nodes));
      } else {
        args.push_back(parse_arg(tok, nodes));
      }
    }
    fx::Node* n = op == "placeholder" ? g->placeholder(name)
                  : op == "output"    ? g->output(args.at(0))
                                      : g->create_node(fx::opcode_from_string(op), target, args, kwargs, name);
    EXPECT_EQ(n->name(), name);
    nodes[name] = n;
  }
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
}

TEST(CSEPassGolden, SameResultAsPythonTorchFx) {
  std::vector<Case> cases = read_cases();
  ASSERT_EQ(cases.size(), 40u) << "regenerate with /usr/bin/python3 python/goldens/cse_goldens.py";
  size_t merged = 0;
  for (const Case& c : cases) {
    auto gm = build(c.before);
    ASSERT_EQ(dump(gm->graph()), c.before) << "case " << c.name;
    std::vector<c10::IValue> inputs{at::randn({3, 3}), at::randn({3, 3})};
    auto expected = gm->forward(inputs).toTupleRef().elements().vec();
    fx::CSEPass cse;
    fx::PassResult r = cse(gm);
    merged += cse.merged();
    EXPECT_EQ(r.modified, c.modified) << "case " << c.name;
    EXPECT_EQ(dump(gm->graph()), c.after) << "case " << c.name;
    auto got = gm->forward(inputs).toTupleRef().elements().vec();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i].toTensor(), expected[i].toTensor()));
  }
  EXPECT_GT(merged, 100u);
}

TEST(CSEPassGolden, WherePythonIsWrong) {
  // Python compares literals with ==, so torch.fx's CSEPass merges
  // mul(x, 1) with mul(x, 1.0) (1 == 1.0 and hash(1) == hash(1.0)) and
  // mul(x, 0.0) with mul(x, -0.0). For an integer tensor x * 1 is int64 and
  // x * 1.0 is float32; x * -0.0 has negative zeros. fxcpp keeps both pairs.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::mul", {x, 1});
  fx::Node* b = g->call_function("aten::mul", {x, 1.0});
  fx::Node* c = g->call_function("aten::mul", {x, 0.0});
  fx::Node* d = g->call_function("aten::mul", {x, -0.0});
  g->output(fx::Argument::tuple({a, b, c, d}));
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
  EXPECT_FALSE(fx::CSEPass()(gm).modified);
  auto out = gm->forward({at::arange(3)}).toTupleRef().elements().vec();
  EXPECT_EQ(out[0].toTensor().scalar_type(), at::kLong);
  EXPECT_EQ(out[1].toTensor().scalar_type(), at::kFloat);
  at::Tensor f = gm->forward({at::ones({2})}).toTupleRef().elements()[3].toTensor();
  EXPECT_TRUE(f.signbit().all().item<bool>());
}

}  // namespace
