// PassManager: ordered passes, constraints, checks, fixed-point rounds
// (torch.fx passes/infra/pass_manager.py), with the graph restored when a
// pass fails.
#include <fx/passes/pass_manager.h>

#include "passes/graph_copy.h"

#include <fx/control_flow.h>

#include <exception>
#include <unordered_map>

namespace fx {

namespace {

/// "['a', 'b']": how torch.fx prints a list of pass names.
std::string name_list(const std::vector<NamedPass>& passes, size_t count) {
  std::string s = "[";
  for (size_t i = 0; i < count; ++i) s += (i ? ", '" : "'") + passes[i].name + "'";
  return s + "]";
}

}  // namespace

namespace passes_detail {

std::shared_ptr<Graph> copy_graph(const Graph& g) {
  auto copy = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> val_map;
  std::optional<Argument> out = copy->graph_copy(g, val_map);
  if (out) {
    Node* o = copy->output(*out);
    if (const Node* old = g.output_node(); old && !old->meta().empty()) o->meta() = old->meta();
  }
  return copy;
}

}  // namespace passes_detail

PassResult PassBase::operator()(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("pass '" + name() + "' was given no module");
  requires_(*gm);
  PassResult r = call(gm);
  if (!r.graph_module) r.graph_module = gm;
  ensures(*r.graph_module);
  return r;
}

NamedPass make_pass(std::shared_ptr<PassBase> pass) {
  if (!pass) throw PassError("make_pass: pass is null");
  std::string name = pass->name();
  const bool handles_subgraphs = pass->handles_subgraphs();
  return NamedPass{std::move(name), [pass](std::shared_ptr<GraphModule> gm) { return (*pass)(std::move(gm)); },
                   handles_subgraphs};
}

NamedPass make_pass(std::string name, PassFn fn) {
  if (!fn) throw PassError("make_pass: pass '" + name + "' has no function");
  return NamedPass{std::move(name), std::move(fn)};
}

void for_each_graph_module(GraphModule& gm, const std::function<void(GraphModule&)>& fn) {
  for_each_subgraph(gm, [&](const std::string&, GraphModule& sub) { fn(sub); });
  fn(gm);
}

PassConstraint this_before_that_pass_constraint(std::string this_pass, std::string that_pass) {
  return [this_pass, that_pass](const NamedPass& a, const NamedPass& b) {
    return !(a.name == that_pass && b.name == this_pass);
  };
}

PassConstraint these_before_those_pass_constraint(std::string these, std::string those) {
  // loop_pass wrappers keep their base pass's name: comparing names compares
  // the unwrapped passes (torch.fx inspect.unwrap).
  return this_before_that_pass_constraint(std::move(these), std::move(those));
}

NamedPass loop_pass(NamedPass base_pass, std::optional<int> n_iter, LoopPredicate predicate) {
  if (n_iter.has_value() == static_cast<bool>(predicate))
    throw PassError("Exactly one of `n_iter`or `predicate` must be specified.");
  if (n_iter && *n_iter <= 0)
    throw PassError("loop_pass must be given positive int n_iter (given " + std::to_string(*n_iter) +
                    ") xor predicate (given None)");
  PassFn base = base_pass.fn;
  base_pass.fn = [base, n_iter, predicate](std::shared_ptr<GraphModule> gm) {
    PassResult out{std::move(gm), false};
    auto run_once = [&] {
      PassResult r = base(out.graph_module);
      if (r.graph_module) out.graph_module = std::move(r.graph_module);
      out.modified = out.modified || r.modified;
    };
    if (n_iter) {
      for (int i = 0; i < *n_iter; ++i) run_once();
    } else {
      while (predicate(out.graph_module)) run_once();
    }
    return out;
  };
  return base_pass;
}

PassManager::PassManager(std::vector<NamedPass> passes, std::vector<PassConstraint> constraints, int steps,
                         bool run_checks_after_each_pass, bool suppress_check_failures)
    : passes_(std::move(passes)),
      constraints_(std::move(constraints)),
      run_checks_after_each_pass_(run_checks_after_each_pass),
      suppress_check_failures_(suppress_check_failures) {
  set_steps(steps);
  for (const NamedPass& p : passes_)
    if (!p.fn) throw PassError("PassManager: pass '" + p.name + "' has no function");
}

void PassManager::add_pass(NamedPass pass) {
  if (!pass.fn) throw PassError("PassManager: pass '" + pass.name + "' has no function");
  passes_.push_back(std::move(pass));
  solved_ = false;
}

void PassManager::add_constraint(PassConstraint constraint) {
  if (!constraint) throw PassError("PassManager: constraint is null");
  constraints_.push_back(std::move(constraint));
  solved_ = false;
}

void PassManager::add_checks(PassCheck check) {
  if (!check) throw PassError("PassManager: check is null");
  checks_.push_back(std::move(check));
}

void PassManager::set_steps(int steps) {
  if (steps < 1) throw PassError("PassManager: steps must be at least 1, got " + std::to_string(steps));
  steps_ = steps;
}

void PassManager::validate_constraints() const {
  for (const PassConstraint& c : constraints_) {
    for (size_t i = 0; i < passes_.size(); ++i) {
      for (size_t j = i + 1; j < passes_.size(); ++j) {
        if (!c(passes_[i], passes_[j]))
          throw PassError("pass schedule constraint violated. Expected '" + passes_[j].name + "' before '" +
                          passes_[i].name + "' but found '" + passes_[i].name + "' at index " + std::to_string(i) +
                          " and '" + passes_[j].name + "' at index " + std::to_string(j) + " in pass list.");
      }
    }
  }
}

void PassManager::solve_constraints() {
  // Kahn's algorithm; among the ready passes the earliest listed goes first,
  // so an order that already satisfies the constraints is kept.
  const size_t n = passes_.size();
  if (!constraints_.empty()) {
    std::vector<std::vector<size_t>> after(n);  // after[b]: passes that must wait for b
    std::vector<size_t> indegree(n, 0);
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b)
        if (a != b)
          for (const PassConstraint& c : constraints_)
            if (!c(passes_[a], passes_[b])) {  // a may not run before b: b first
              after[b].push_back(a);
              ++indegree[a];
            }
    std::vector<NamedPass> sorted;
    std::vector<bool> done(n, false);
    while (sorted.size() < n) {
      size_t pick = n;
      for (size_t i = 0; i < n && pick == n; ++i)
        if (!done[i] && indegree[i] == 0) pick = i;
      if (pick == n) {
        std::string cycle;
        for (size_t i = 0; i < n; ++i)
          if (!done[i]) cycle += (cycle.empty() ? "'" : ", '") + passes_[i].name + "'";
        throw PassError("Circular dependency detected within the following passes: [" + cycle + "]");
      }
      done[pick] = true;
      sorted.push_back(passes_[pick]);
      for (size_t m : after[pick]) --indegree[m];
    }
    passes_ = std::move(sorted);
  }
  solved_ = true;
}

void PassManager::check(GraphModule& gm) const {
  auto check_one = [this](GraphModule& m) {
    m.graph().lint();
    for (const PassCheck& c : checks_) c(m);
  };
  if (recurse_into_subgraphs_)
    for_each_subgraph(gm, [&](const std::string& path, GraphModule& sub) {
      try {
        check_one(sub);
      } catch (const std::exception& e) {
        throw PassError("subgraph '" + path + "': " + e.what());
      }
    });
  check_one(gm);
}

namespace {

/// A graph the manager runs a pass on: the module, its path below the root
/// ("" for the root) and the graph it had before the pass.
struct Target {
  std::shared_ptr<GraphModule> module;
  std::string path;
  std::shared_ptr<Graph> before;
};

/// Every subgraph below `gm`, inner first, then `gm` itself, each with a copy of its graph.
std::vector<Target> targets_of(const std::shared_ptr<GraphModule>& gm) {
  std::vector<Target> out;
  for_each_subgraph(*gm, [&](const std::string& path, GraphModule& sub) {
    auto shared = std::dynamic_pointer_cast<GraphModule>(sub.shared_from_this());
    out.push_back(Target{std::move(shared), path, passes_detail::copy_graph(sub.graph())});
  });
  out.push_back(Target{gm, "", passes_detail::copy_graph(gm->graph())});
  return out;
}

}  // namespace

PassResult PassManager::operator()(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("PassManager: no module given");
  if (!solved_) solve_constraints();
  suppressed_ = 0;
  auto run_check = [&](GraphModule& m) -> bool {
    try {
      check(m);
      return true;
    } catch (const std::exception&) {
      if (!suppress_check_failures_) throw;
      ++suppressed_;
      return false;
    }
  };
  run_check(*gm);

  bool overall = false;
  for (int step = 0; step < steps_; ++step) {
    bool modified = false;
    for (size_t i = 0; i < passes_.size(); ++i) {
      const NamedPass& p = passes_[i];
      // Every graph is saved, subgraphs too: a pass may edit them even when
      // the manager does not run it there (it visits them itself).
      std::vector<Target> targets = targets_of(gm);
      auto fail = [&](const std::string& where, const std::string& what, const std::string& why) {
        for (Target& t : targets) t.module->set_graph(t.before);  // no half-applied pass
        throw PassError("An error occurred when running the '" + p.name + "' pass after the following passes: " +
                        name_list(passes_, i) + "\n" + (where.empty() ? "" : "on subgraph '" + where + "': ") +
                        what + why);
      };
      const bool recurse = recurse_into_subgraphs_ && !p.handles_subgraphs;
      std::shared_ptr<GraphModule> result;
      for (Target& t : targets) {
        const bool root = t.path.empty();
        if (!root && !recurse) continue;
        PassResult r;
        try {
          r = p.fn(t.module);
        } catch (const std::exception& e) {
          fail(t.path, "", e.what());
        }
        if (!r.graph_module) r.graph_module = t.module;
        if (!root && r.graph_module != t.module)
          fail(t.path, "", "the pass returned a new module; on a subgraph a pass must edit the module in place");
        if (root) result = r.graph_module;
        modified = modified || r.modified;
      }
      if (run_checks_after_each_pass_) {
        try {
          run_check(*result);
        } catch (const std::exception& e) {
          fail("", "the check after it failed: ", e.what());
        }
      }
      try {
        if (recurse_into_subgraphs_)
          for_each_subgraph(*result, [](const std::string&, GraphModule& sub) { sub.recompile(); });
        result->recompile();
      } catch (const std::exception& e) {
        fail("", "its module does not compile: ", e.what());
      }
      gm = result;
    }
    overall = overall || modified;
    if (!modified) break;
  }
  return PassResult{gm, overall};
}

}  // namespace fx
