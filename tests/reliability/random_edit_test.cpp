// Random edits on random graphs (issue #12): insert, erase, move, RAUW,
// node_copy, placeholders anywhere, output changes, and operations the API
// must refuse (erasing a used node, any edit through an erased node, an
// argument index out of range). After every edit either fx::Error was thrown
// and the graph is exactly as before (str() equal), or the graph lints clean
// and GraphModule::forward == Interpreter::run == an independent reference
// evaluation of the edited graph. Bounded: fixed seeds, a few hundred edits.
//
// Edits that torch.fx accepts without checking and only lint() rejects
// (moving a node before its inputs) are not generated: the property is about
// what the API promises to check.
#include "../passes/random_graph.h"

#include <fx/error.h>
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <unordered_map>

namespace {

// Evaluates the graph node by node with ATen directly (the targets of
// make_random_graph only).
c10::IValue reference(fx::GraphModule& gm, const std::map<fx::Node*, at::Tensor>& inputs) {
  std::unordered_map<fx::Node*, c10::IValue> env;
  auto lookup = [&](fx::Node* n) { return env.at(n); };
  for (fx::Node* n : gm.graph().nodes()) {
    switch (n->op()) {
      case fx::Opcode::Placeholder:
        env[n] = inputs.at(n);
        break;
      case fx::Opcode::GetAttr:
        env[n] = gm.fetch_attr(n->target());
        break;
      case fx::Opcode::Output:
        return n->args().at(0).to_ivalue(lookup);
      default: {
        std::vector<c10::IValue> a;
        for (const auto& x : n->args()) a.push_back(x.to_ivalue(lookup));
        const std::string& t = n->target();
        const at::Tensor x = a.at(0).toTensor();
        auto other = [&](size_t i) {
          return a.at(i).isTensor() ? a[i].toTensor() : at::scalar_tensor(a[i].toDouble());
        };
        at::Tensor r;
        if (t == "aten::relu")
          r = at::relu(x);
        else if (t == "aten::tanh")
          r = at::tanh(x);
        else if (t == "aten::sigmoid")
          r = at::sigmoid(x);
        else if (t == "aten::neg")
          r = at::neg(x);
        else if (t == "aten::abs")
          r = at::abs(x);
        else if (t == "aten::mul")
          r = at::mul(x, other(1));
        else if (t == "aten::sub")
          r = at::sub(x, other(1));
        else if (t == "aten::maximum")
          r = at::maximum(x, other(1));
        else if (t == "aten::add") {
          double alpha = 1;
          for (const auto& kv : n->kwargs())
            if (kv.first == "alpha") alpha = kv.second.to_double();
          r = at::add(x, other(1), alpha);
        } else {
          throw std::logic_error("reference: unexpected target " + t);
        }
        env[n] = r;
      }
    }
  }
  throw std::logic_error("reference: no output node");
}

void expect_same(const c10::IValue& a, const c10::IValue& b, const std::string& what) {
  ASSERT_TRUE(a.isTuple() && b.isTuple()) << what;
  const auto& x = a.toTupleRef().elements();
  const auto& y = b.toTupleRef().elements();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_TRUE(at::allclose(x[i].toTensor(), y[i].toTensor(), 1e-5, 1e-6, /*equal_nan=*/true))
        << what << " [" << i << "]";
}

struct Stats {
  int applied = 0, refused = 0;
};

class Editor {
 public:
  explicit Editor(uint64_t seed) : rng_(seed) {
    rg_ = fx_test::make_random_graph(seed, {2, 3, 12, 0.15, 0.2});
    size_t i = 0;
    for (fx::Node* p : graph().find_nodes(fx::Opcode::Placeholder)) inputs_[p] = rg_.inputs.at(i++).toTensor();
  }

  fx::Graph& graph() { return rg_.gm->graph(); }

  // One random edit; returns true when applied, false when refused with fx::Error.
  void step(Stats& stats, int edit_no) {
    const std::string before = graph().str();
    const std::string what = "edit " + std::to_string(edit_no);
    bool refused = false;
    std::string kind;
    try {
      kind = apply();
    } catch (const fx::Error& e) {
      refused = true;
      kind += std::string(" refused: ") + e.what();
    }
    if (refused || kind.rfind("expect-error", 0) == 0) {
      EXPECT_TRUE(refused) << what << ": " << kind << " was accepted";
      EXPECT_EQ(graph().str(), before) << what << ": " << kind << " changed the graph";
      ++stats.refused;
      return;
    }
    ++stats.applied;
    ASSERT_NO_THROW(graph().lint()) << what << " (" << kind << ")\n" << graph().str();
    std::vector<c10::IValue> args;
    for (fx::Node* p : graph().find_nodes(fx::Opcode::Placeholder)) args.push_back(inputs_.at(p));
    c10::IValue ref = reference(*rg_.gm, inputs_);
    c10::IValue fwd = rg_.gm->forward(args);
    c10::IValue interp = fx::Interpreter(rg_.gm).run(args);
    expect_same(fwd, ref, what + " forward (" + kind + ")");
    expect_same(interp, ref, what + " Interpreter (" + kind + ")");
  }

 private:
  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }

  std::vector<fx::Node*> order() { return graph().nodes().to_vector(); }

  std::string apply() {
    std::vector<fx::Node*> nodes = order();
    std::unordered_map<fx::Node*, size_t> pos;
    for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i]] = i;
    fx::Node* out = graph().output_node();
    const size_t last = nodes.size() - 1;  // the output node
    static const char* unary[] = {"aten::relu", "aten::tanh", "aten::neg"};
    switch (pick(10)) {
      case 0: {  // insert a new op before node k over values before k
        size_t k = 1 + pick(last);
        auto guard = graph().inserting_before(nodes[k]);
        fx::Node* a = nodes[pick(k)];
        if (pick(2))
          graph().call_function(unary[pick(3)], {a});
        else
          graph().call_function("aten::add", {a, nodes[pick(k)]}, {{"alpha", 0.25}});
        return "insert before " + nodes[k]->name();
      }
      case 1: {  // erase: refused when the node has users
        fx::Node* n = nodes[pick(last)];
        const bool used = !n->users().empty();
        graph().erase_node(n);
        inputs_.erase(n);
        return used ? "expect-error: erase used " + n->name() : "erase " + n->name();
      }
      case 2: {  // move x right before anchor j, where that keeps def-before-use
        fx::Node* x = nodes[pick(last)];
        size_t j = pick(last + 1);
        if (nodes[j] == x) return "nothing";
        for (fx::Node* in : x->all_input_nodes())
          if (pos[in] >= j) return "nothing";
        for (const auto& u : x->users())
          if (pos[u] < j) return "nothing";
        nodes[j]->prepend(x);
        return "move " + x->name() + " before " + nodes[j]->name();
      }
      case 3: {  // RAUW a -> b, b before every user of a
        fx::Node* a = nodes[pick(last)];
        fx::Node* b = nodes[pick(last)];
        if (a == b || a->users().empty()) return "nothing";
        size_t first_user = nodes.size();
        for (const auto& u : a->users()) first_user = std::min(first_user, pos[u]);
        if (pos[b] >= first_user) return "nothing";
        a->replace_all_uses_with(b);
        return "rauw " + a->name() + " -> " + b->name();
      }
      case 4: {  // copy an op node to just before the output
        fx::Node* x = nodes[pick(last)];
        if (x->op() != fx::Opcode::CallFunction) return "nothing";
        auto guard = graph().inserting_before(out);
        graph().node_copy(x, [](fx::Node* n) { return fx::Argument(n); });
        return "copy " + x->name();
      }
      case 5: {  // a placeholder anywhere (after an op node too)
        fx::Node* anchor = nodes[pick(last)];
        auto guard = graph().inserting_after(anchor);
        fx::Node* p = graph().placeholder("late");
        inputs_[p] = at::rand({4, 4}) - 0.5;
        return "placeholder after " + anchor->name();
      }
      case 6: {  // the output: a new tuple of values
        std::vector<fx::Argument> outs{nodes[pick(last)]};
        if (pick(2)) outs.push_back(nodes[pick(last)]);
        out->update_arg(0, fx::Argument::tuple(outs));
        return "output";
      }
      case 7: {  // anything through an erased node is refused
        fx::Node* dead = nullptr;
        {
          auto guard = graph().inserting_before(out);
          dead = graph().call_function("aten::relu", {nodes[0]});
        }
        graph().erase_node(dead);
        // the create+erase pair leaves the graph's text as it was: compared by step()
        fx::Node* live = nodes[pick(last)];
        switch (pick(4)) {
          case 0:
            dead->prepend(live);
            break;
          case 1:
            dead->append(live);
            break;
          case 2:
            live->prepend(dead);
            break;
          default:
            dead->replace_all_uses_with(live);
            break;
        }
        return "expect-error: edit through erased node";
      }
      case 8: {  // an argument index out of range
        fx::Node* n = nodes[pick(last + 1)];
        n->update_arg(n->args().size() + pick(3), fx::Argument(1.0));
        return "expect-error: update_arg out of range on " + n->name();
      }
      default: {  // dead code elimination keeps the values
        graph().eliminate_dead_code();
        for (auto it = inputs_.begin(); it != inputs_.end();) {
          bool alive = false;
          for (fx::Node* p : graph().find_nodes(fx::Opcode::Placeholder)) alive |= p == it->first;
          it = alive ? std::next(it) : inputs_.erase(it);
        }
        return "dce";
      }
    }
  }

  std::mt19937_64 rng_;
  fx_test::RandomGraph rg_;
  std::map<fx::Node*, at::Tensor> inputs_;
};

TEST(RandomEdits, EveryEditIsCleanOrRefusedWithoutChange) {
  Stats stats;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Editor e(seed);
    for (int i = 0; i < 30; ++i) {
      e.step(stats, i);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "seed " << seed;
        return;
      }
    }
  }
  EXPECT_GT(stats.applied, 800);
  EXPECT_GT(stats.refused, 200);
  RecordProperty("applied", stats.applied);
  RecordProperty("refused", stats.refused);
}

}  // namespace
