// pipeline_split: a GraphModule cut into balanced consecutive stages, made
// with split_module (see fx/distributed/pipeline.h).
#include <fx/distributed/pipeline.h>

#include <fx/error.h>
#include <fx/passes/model_summary.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/passes/profiler.h>
#include <fx/passes/shape_prop.h>
#include <fx/passes/split_module.h>
#include <fx/passes/split_utils.h>
#include <fx/serialize.h>
#include <fx/tensor_meta.h>

#include <nlohmann/json.hpp>

#include <any>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace fx::distributed {
namespace {

constexpr const char* kValueTag = "fxcpp_pipeline_value";  // original node name, during the split only
constexpr const char* kStageMeta = "fxcpp_pipeline_stage";  // the stage's description, on its output node
constexpr const char* kStageFormat = "fxcpp-pipeline-stage";
constexpr int kStageFormatVersion = 1;

// ---- hashing ---------------------------------------------------------------

struct Hasher {
  uint64_t a = 1469598103934665603ull, b = 0x9e3779b97f4a7c15ull;
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    // FNV-1a for a, and libstdc++'s murmur-style _Hash_bytes (fast on large buffers) for b.
    if (n <= 4096) {
      for (size_t i = 0; i < n; ++i) a = (a ^ p[i]) * 1099511628211ull;
    } else {
      a = (a ^ std::_Hash_bytes(p, n, static_cast<size_t>(a))) * 1099511628211ull;
    }
    b = std::_Hash_bytes(p, n, static_cast<size_t>(b)) ^ (b << 7);
  }
  void text(const std::string& s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return buf;
  }
};

void hash_tensor(Hasher& h, const std::string& name, const at::Tensor& t) {
  h.text(name);
  if (!t.defined()) return;
  h.text(c10::toString(t.scalar_type()));
  for (int64_t s : t.sizes()) h.bytes(&s, sizeof s);
  if (t.is_quantized() || t.is_sparse() || t.is_mkldnn()) return;
  const at::Tensor c = t.contiguous();
  h.bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
}

// ---- values: bytes and whether they can cross ranks -------------------------

int64_t meta_bytes(const Node* n) {
  const auto& meta = n->meta();
  auto it = meta.find("tensor_meta");
  if (it == meta.end()) return 0;
  auto one = [](const TensorMetadata& m) {
    int64_t numel = 1;
    for (int64_t s : m.shape) numel *= s;
    return numel * static_cast<int64_t>(c10::elementSize(m.dtype));
  };
  if (const auto* m = std::any_cast<TensorMetadata>(&it->second)) return one(*m);
  if (const auto* l = std::any_cast<std::vector<TensorMetadata>>(&it->second)) {
    int64_t total = 0;
    for (const auto& m : *l) total += one(m);
    return total;
  }
  return 0;
}

/// The value's Python type name from ShapeProp ("" if unknown).
std::string meta_type(const Node* n) {
  const auto& meta = n->meta();
  auto it = meta.find("type");
  if (it == meta.end()) return "";
  if (const auto* s = std::any_cast<std::string>(&it->second)) return *s;
  return "";
}

/// Whether fx::optimize_for_inference fuses what `n` computes into its
/// consumer (a batch norm folded into a convolution, an activation or a
/// residual sum as a oneDNN post-op): a cut between them would undo that.
std::string lowered_kind(const GraphModule& gm, const Node* n);

bool fusable_producer(const GraphModule& gm, const Node* n) {
  const std::string t = lowered_kind(gm, n);
  for (const char* k : {"conv", "linear", "batch_norm", "batchnorm", "addmm", "matmul", "bmm"})
    if (t.find(k) != std::string::npos) return true;
  return false;
}

/// Whether `n` is an activation or element-wise op that optimize_for_inference
/// fuses into what produces its input (a oneDNN post-op).
bool fused_consumer(const GraphModule& gm, const Node* n) {
  const std::string t = lowered_kind(gm, n);
  for (const char* k : {"relu", "sigmoid", "silu", "gelu", "hardswish", "hardtanh", "tanh", "clamp", "add", "mul"})
    if (t.find(k) != std::string::npos) return true;
  return false;
}

/// What `n` runs, lower case: the module's class for call_module, the target otherwise.
std::string lowered_kind(const GraphModule& gm, const Node* n) {
  std::string t;
  if (n->op() == Opcode::CallModule) {
    try {
      t = gm.get_submodule(n->target())->name();
    } catch (const std::exception&) {
      return "";
    }
  } else if (n->op() == Opcode::CallFunction) {
    t = n->target();
  } else {
    return "";
  }
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return t;
}

bool can_cross(const std::string& type) {
  static const std::unordered_set<std::string> ok = {"",      "torch.Tensor", "tuple", "list", "int",
                                                     "float", "bool",         "NoneType", "str"};
  return ok.count(type) != 0;
}

std::string stage_json(const PipelineStage& s) {
  nlohmann::json j = {{"format", kStageFormat},        {"version", kStageFormatVersion},
                      {"stage", s.index},              {"stages", s.num_stages},
                      {"inputs", s.inputs},            {"outputs", s.outputs},
                      {"nodes", s.nodes},              {"cost", s.cost},
                      {"balance", s.balance},          {"input_bytes", s.input_bytes},
                      {"output_bytes", s.output_bytes}, {"model", s.model_fingerprint},
                      {"split", s.split_id}};
  return j.dump();
}

void set_stage_meta(PipelineStage& s) {
  Node* out = s.module->graph().output_node();
  if (!out) throw Error("pipeline stage " + std::to_string(s.index) + " has no output node");
  out->meta()[kStageMeta] = stage_json(s);
}

// ---- the dynamic program ----------------------------------------------------

/// Cut positions for `stages` stages of the costs, minimising the largest
/// stage cost, then (within tolerance) the bytes crossing the cuts.
std::vector<int64_t> balance_cuts(const std::vector<double>& cost, const std::vector<double>& cut_bytes,
                                  const std::vector<char>& cuttable, int stages, double tolerance) {
  const int64_t n = static_cast<int64_t>(cost.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> prefix(static_cast<size_t>(n + 1), 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i + 1)] = prefix[static_cast<size_t>(i)] + cost[static_cast<size_t>(i)];
  auto seg = [&](int64_t j, int64_t i) { return prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(j)]; };
  auto ok = [&](int64_t j) { return j >= 1 && j <= n - 1 && cuttable[static_cast<size_t>(j)]; };
  const size_t S = static_cast<size_t>(stages);
  // Phase 1: the smallest achievable largest stage cost.
  std::vector<std::vector<double>> f(S + 1, std::vector<double>(static_cast<size_t>(n + 1), inf));
  for (int64_t i = 1; i <= n; ++i) f[1][static_cast<size_t>(i)] = seg(0, i);
  for (size_t s = 2; s <= S; ++s)
    for (int64_t i = static_cast<int64_t>(s); i <= n; ++i)
      for (int64_t j = static_cast<int64_t>(s) - 1; j < i; ++j) {
        if (!ok(j) || f[s - 1][static_cast<size_t>(j)] == inf) continue;
        f[s][static_cast<size_t>(i)] = std::min(f[s][static_cast<size_t>(i)], std::max(f[s - 1][static_cast<size_t>(j)], seg(j, i)));
      }
  const double best = f[S][static_cast<size_t>(n)];
  if (best == inf) return {};
  // Phase 2: fewest bytes with every stage within the bound.
  const double bound = best * (1.0 + tolerance) + 1e-9 * std::max(1.0, std::abs(best));
  const double big = std::numeric_limits<double>::max();
  std::vector<std::vector<double>> g(S + 1, std::vector<double>(static_cast<size_t>(n + 1), big));
  std::vector<std::vector<int64_t>> from(S + 1, std::vector<int64_t>(static_cast<size_t>(n + 1), -1));
  for (int64_t i = 1; i <= n; ++i)
    if (seg(0, i) <= bound) g[1][static_cast<size_t>(i)] = 0;
  for (size_t s = 2; s <= S; ++s)
    for (int64_t i = static_cast<int64_t>(s); i <= n; ++i)
      for (int64_t j = static_cast<int64_t>(s) - 1; j < i; ++j) {
        if (!ok(j) || g[s - 1][static_cast<size_t>(j)] == big || seg(j, i) > bound) continue;
        const double v = g[s - 1][static_cast<size_t>(j)] + cut_bytes[static_cast<size_t>(j)];
        if (v < g[s][static_cast<size_t>(i)]) {
          g[s][static_cast<size_t>(i)] = v;
          from[s][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<int64_t> cuts;
  int64_t i = n;
  for (size_t s = S; s >= 2; --s) {
    const int64_t j = from[s][static_cast<size_t>(i)];
    if (j < 0) return {};
    cuts.push_back(j);
    i = j;
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

std::string join(const std::vector<std::string>& v, size_t max) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += ", ...";
  return s;
}

}  // namespace

std::string to_string(Balance b) { return b == Balance::Time ? "time" : "flops"; }

Balance parse_balance(const std::string& s) {
  if (s == "time") return Balance::Time;
  if (s == "flops") return Balance::Flops;
  throw Error("--balance expects 'time' or 'flops', got '" + s + "'");
}

double PipelinePlan::imbalance() const {
  if (stages.empty()) return 1.0;
  double mx = 0, sum = 0;
  for (const auto& s : stages) {
    mx = std::max(mx, s.cost);
    sum += s.cost;
  }
  return sum > 0 ? mx / (sum / static_cast<double>(stages.size())) : 1.0;
}

std::string model_fingerprint(const GraphModule& gm) {
  Hasher h;
  h.text(gm.graph().str());
  for (const auto& p : gm.named_parameters(true)) hash_tensor(h, "p:" + p.key(), p.value());
  for (const auto& b : gm.named_buffers(true)) hash_tensor(h, "b:" + b.key(), b.value());
  return h.hex();
}

PipelinePlan pipeline_split(const std::shared_ptr<GraphModule>& gm, const SplitOptions& options) {
  if (!gm) throw Error("pipeline_split: the module is null");
  if (options.stages < 1) throw Error("pipeline_split: stages must be at least 1, got " + std::to_string(options.stages));
  Graph& graph = gm->graph();
  const int stages = options.stages;

  // Positions: the call nodes in graph order.
  std::vector<Node*> calls, placeholders;
  Node* output = nullptr;
  const size_t max_id = graph.max_node_id();
  std::vector<int64_t> pos(max_id, -1);
  for (Node* n : graph.nodes()) {
    switch (n->op()) {
      case Opcode::Placeholder: placeholders.push_back(n); break;
      case Opcode::GetAttr: break;
      case Opcode::Output: output = n; break;
      default:
        pos[n->id()] = static_cast<int64_t>(calls.size());
        calls.push_back(n);
    }
  }
  const int64_t n = static_cast<int64_t>(calls.size());
  if (n < stages)
    throw Error("cannot cut a model of " + std::to_string(n) + " call node" + (n == 1 ? "" : "s") + " into " +
                std::to_string(stages) + " stages (each stage needs at least one)");

  const bool balancing = options.cuts.empty() && stages > 1;
  if (balancing && options.example_inputs.empty())
    throw Error("pipeline_split: example inputs (one microbatch) are needed to balance the stages");

  // Shapes and types of every value (tensor_meta, type).
  if (!options.example_inputs.empty()) {
    ShapeProp prop(gm);
    if (balancing) prop.propagate(options.example_inputs);
    else prop.propagate_meta(options.example_inputs);
  }

  // Costs.
  std::vector<double> cost(static_cast<size_t>(n), 0.0);
  std::string balance = balancing ? to_string(options.balance) : "given";
  if (balancing && options.balance == Balance::Time) {
    ProfilingInterpreter prof(gm);
    prof.set_record_ops(false);
    prof.profile_run(options.example_inputs, false);
    std::vector<double> best(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
    for (int r = 0; r < std::max(1, options.profile_runs); ++r) {
      prof.reset();
      prof.profile_run(options.example_inputs, true);
      for (int64_t i = 0; i < n; ++i) {
        auto it = prof.node_us().find(calls[static_cast<size_t>(i)]);
        best[static_cast<size_t>(i)] = std::min(best[static_cast<size_t>(i)], it == prof.node_us().end() ? 0.0 : it->second);
      }
    }
    cost = best;
  } else if (balancing) {
    const ModelSummary summary = summarize_model(*gm);
    for (const auto& row : summary.nodes)
      if (row.node && pos[row.node->id()] >= 0) cost[static_cast<size_t>(pos[row.node->id()])] = static_cast<double>(row.flops);
    if (summary.total_flops <= 0)
      throw Error("fx::summarize_model counts no FLOPs in this model's nodes (its work is inside modules it cannot see into); balance by time instead");
  } else if (stages == 1) {
    balance = options.cuts.empty() ? "none" : "given";
  }

  // Liveness: value v crosses cut c (between positions c - 1 and c) when
  // def(v) < c <= last_use(v); placeholders are defined at -1, the output
  // node uses at n. get_attr values never cross.
  std::vector<int64_t> def(max_id, -2), last(max_id, -2);
  for (Node* p : placeholders) def[p->id()] = -1;
  for (Node* c : calls) def[c->id()] = pos[c->id()];
  auto use = [&](Node* user_node, int64_t at) {
    for_each_node(user_node->args(), user_node->kwargs(), [&](Node* v) {
      if (v->op() == Opcode::GetAttr) return;
      last[v->id()] = std::max(last[v->id()], at);
    });
  };
  for (Node* c : calls) use(c, pos[c->id()]);
  if (output) use(output, n);
  std::vector<int64_t> bytes_at(static_cast<size_t>(n + 1), 0), bad_at(static_cast<size_t>(n + 1), 0),
      breaks_at(static_cast<size_t>(n + 1), 0);
  std::vector<std::vector<std::string>> bad_names(static_cast<size_t>(n + 1));
  std::vector<Node*> values(placeholders);
  values.insert(values.end(), calls.begin(), calls.end());
  for (Node* v : values) {
    const int64_t from = def[v->id()] + 1, to = last[v->id()];  // crosses cuts [from, to]
    if (to < from) continue;
    const int64_t b = meta_bytes(v);
    const bool bad = !can_cross(meta_type(v));
    const bool breaks = v->users().size() == 1 &&
                        (fusable_producer(*gm, v) || fused_consumer(*gm, *v->users().begin()));
    for (int64_t c = std::max<int64_t>(from, 1); c <= std::min(to, n - 1); ++c) {
      bytes_at[static_cast<size_t>(c)] += b;
      breaks_at[static_cast<size_t>(c)] += breaks;
      if (bad) {
        ++bad_at[static_cast<size_t>(c)];
        if (bad_names[static_cast<size_t>(c)].size() < 3) bad_names[static_cast<size_t>(c)].push_back(v->name() + " (" + meta_type(v) + ")");
      }
    }
  }
  std::vector<char> cuttable(static_cast<size_t>(n + 1), 0);
  int64_t cuttable_count = 0;
  for (int64_t c = 1; c <= n - 1; ++c) {
    cuttable[static_cast<size_t>(c)] = bad_at[static_cast<size_t>(c)] == 0;
    cuttable_count += cuttable[static_cast<size_t>(c)];
  }

  // Among balanced cuts: first those that undo no fusion, then the fewest bytes.
  std::vector<double> penalty(static_cast<size_t>(n + 1), 0.0);
  for (int64_t c = 1; c <= n - 1; ++c)
    penalty[static_cast<size_t>(c)] =
        static_cast<double>(bytes_at[static_cast<size_t>(c)]) + 1e15 * static_cast<double>(breaks_at[static_cast<size_t>(c)]);

  // The cuts.
  std::vector<int64_t> cuts;
  if (stages > 1 && !options.cuts.empty()) {
    cuts = options.cuts;
    if (static_cast<int>(cuts.size()) != stages - 1)
      throw Error("pipeline_split: " + std::to_string(cuts.size()) + " cuts given for " + std::to_string(stages) + " stages");
    for (size_t i = 0; i < cuts.size(); ++i) {
      if (cuts[i] < 1 || cuts[i] > n - 1 || (i && cuts[i] <= cuts[i - 1]))
        throw Error("pipeline_split: cut positions must increase within [1, " + std::to_string(n - 1) + "] (the model has " +
                    std::to_string(n) + " call nodes): a split of another model?");
      if (!cuttable[static_cast<size_t>(cuts[i])])
        throw Error("pipeline_split: cut " + std::to_string(cuts[i]) + " would send " +
                    join(bad_names[static_cast<size_t>(cuts[i])], 3) + " between ranks");
    }
  } else if (stages > 1) {
    if (cuttable_count < stages - 1)
      throw Error("cannot cut this model into " + std::to_string(stages) + " stages: only " + std::to_string(cuttable_count) +
                  " of its " + std::to_string(n - 1) + " positions can be cut (values that cannot cross ranks are live at the others)");
    cuts = balance_cuts(cost, penalty, cuttable, stages, options.tolerance);
    if (cuts.empty())
      throw Error("cannot cut this model into " + std::to_string(stages) + " stages at the positions that can be cut");
  }

  // The stages for `cuts` (only `only_stage`'s module, unless -1).
  auto build = [&](const std::vector<int64_t>& cuts, int only_stage) -> PipelinePlan {
    PipelinePlan plan;
    plan.cuts = cuts;
    plan.positions = n;
    plan.cuttable = cuttable_count;
    plan.balance = balance;
    for (double c : cost) plan.total_cost += c;
    plan.model_fingerprint = model_fingerprint(*gm);
    {
      Hasher h;
      h.text(plan.model_fingerprint);
      const int64_t s = stages;
      h.bytes(&s, sizeof s);
      for (int64_t c : cuts) h.bytes(&c, sizeof c);
      plan.split_id = h.hex().substr(0, 16);
    }
    std::vector<int64_t> stage_of(max_id, -1);
    std::vector<int64_t> starts = {0};
    starts.insert(starts.end(), cuts.begin(), cuts.end());
    starts.push_back(n);
    for (Node* c : calls)
      stage_of[c->id()] = static_cast<int64_t>(std::upper_bound(cuts.begin(), cuts.end(), pos[c->id()]) - cuts.begin());

    // split_module, with every call node tagged by its name (its meta is
    // copied into the partitions, so each partition's outputs can be named).
    for (Node* c : calls) c->meta()[kValueTag] = c->name();
    std::shared_ptr<GraphModule> split;
    try {
      split = split_module(gm, gm, [&](Node* node) { return stage_of[node->id()]; }, nullptr, true);
    } catch (...) {
      for (Node* c : calls) c->meta().erase(kValueTag);
      throw;
    }
    for (Node* c : calls) c->meta().erase(kValueTag);
    plan.split = split;

    std::unordered_map<std::string, Node*> by_name;
    for (Node* v : graph.nodes()) by_name[v->name()] = v;

    // The values live across each cut, in graph order (placeholders first).
    auto live_across = [&](int64_t c) {
      std::vector<Node*> live;
      for (Node* v : values)
        if (def[v->id()] < c && last[v->id()] >= c) live.push_back(v);
      return live;
    };

    for (int k = 0; k < stages; ++k) {
      PipelineStage st;
      st.index = k;
      st.num_stages = stages;
      st.model_fingerprint = plan.model_fingerprint;
      st.split_id = plan.split_id;
      st.balance = balance;
      const int64_t begin = starts[static_cast<size_t>(k)], end = starts[static_cast<size_t>(k) + 1];
      st.nodes = end - begin;
      for (int64_t i = begin; i < end; ++i) st.cost += cost[static_cast<size_t>(i)];
      const std::vector<Node*> ins = k == 0 ? placeholders : live_across(begin);
      const std::vector<Node*> outs = k == stages - 1 ? std::vector<Node*>{} : live_across(end);
      for (Node* v : ins) {
        st.inputs.push_back(v->name());
        st.input_bytes += meta_bytes(v);
      }
      for (Node* v : outs) {
        st.outputs.push_back(v->name());
        st.output_bytes += meta_bytes(v);
      }
      if (only_stage >= 0 && only_stage != k) {
        plan.stages.push_back(std::move(st));
        continue;
      }

      // The stage's graph: its inputs, its partition's nodes, its outputs.
      auto sub = std::dynamic_pointer_cast<GraphModule>(split->get_submodule("submod_" + std::to_string(k)));
      if (!sub) throw Error("pipeline_split: split_module made no submod_" + std::to_string(k));
      auto g = std::make_shared<Graph>();
      auto root = std::make_shared<torch::nn::Module>("PipelineStage");
      std::unordered_map<std::string, Node*> env;  // original value name -> node of the stage
      for (Node* v : ins) {
        std::optional<Argument> default_value;
        if (k == 0 && !v->args().empty()) default_value = v->args()[0];
        Node* ph = g->placeholder(v->name(), default_value, v->type().empty() ? std::nullopt : std::optional<std::string>(v->type()));
        for (const char* key : {"tensor_meta", "type"}) {
          auto it = v->meta().find(key);
          if (it != v->meta().end()) ph->meta()[key] = it->second;
        }
        env[v->name()] = ph;
      }
      std::unordered_map<std::string, Node*> attrs;  // get_attr target -> node of the stage
      auto attr = [&](Node* original) {
        auto it = attrs.find(original->target());
        if (it != attrs.end()) return it->second;
        copy_attr_recursive(*gm, original->target(), *root, original->target());
        Node* a = g->get_attr(original->target());
        a->meta() = static_cast<const Node*>(original)->meta();
        return attrs[original->target()] = a;
      };
      std::unordered_map<const Node*, Node*> val_map;
      for (Node* p : sub->graph().nodes()) {
        if (p->op() != Opcode::Placeholder) continue;
        auto orig = by_name.find(p->target());
        if (orig == by_name.end()) throw Error("pipeline_split: partition input " + p->target() + " is not a node of the model");
        if (orig->second->op() == Opcode::GetAttr) {
          val_map[p] = attr(orig->second);
        } else {
          auto e = env.find(p->target());
          if (e == env.end()) throw Error("pipeline_split: stage " + std::to_string(k) + " uses " + p->target() + ", which is not live across its cut");
          val_map[p] = e->second;
        }
      }
      for (const auto& child : sub->named_children()) root->register_module(child.key(), child.value());
      std::optional<Argument> produced = g->graph_copy(sub->graph(), val_map);
      // Name the partition's outputs by the nodes they stand for.
      if (produced) {
        for_each_node(*produced, [&](Node* made) {
          auto it = made->meta().find(kValueTag);
          if (it != made->meta().end()) env[std::any_cast<std::string>(it->second)] = made;
        });
      }
      for (Node* node : g->nodes()) node->meta().erase(kValueTag);
      if (k < stages - 1) {
        std::vector<Argument> items;
        for (Node* v : outs) {
          auto e = env.find(v->name());
          if (e == env.end()) throw Error("pipeline_split: stage " + std::to_string(k) + " cannot send " + v->name());
          items.emplace_back(e->second);
        }
        g->output(Argument::tuple(std::move(items)));
      } else {
        const Argument result = output && !output->args().empty() ? output->args()[0] : Argument();
        g->output(map_arg(result, [&](Node* v) -> Argument {
          if (v->op() == Opcode::GetAttr) return attr(v);
          auto e = env.find(v->name());
          if (e == env.end()) throw Error("pipeline_split: the last stage cannot produce " + v->name());
          return e->second;
        }), output ? std::optional<std::string>(output->type().empty() ? std::nullopt : std::optional<std::string>(output->type())) : std::nullopt);
      }
      g->lint();
      st.module = std::make_shared<GraphModule>(root, g, "PipelineStage" + std::to_string(k));
      set_stage_meta(st);
      plan.stages.push_back(std::move(st));
    }
    return plan;
  };

  if (!(balancing && options.measure && options.refine_rounds > 0)) return build(cuts, options.only_stage);

  // Refinement: build and measure the stages as they will run (optimised,
  // say); scale each node's cost by its stage's measured / predicted time
  // and balance again; keep the cuts whose slowest stage measured fastest.
  std::vector<int64_t> best_cuts = cuts;
  std::vector<double> best_ms;
  double best_max = std::numeric_limits<double>::infinity();
  for (int round = 0; round <= options.refine_rounds; ++round) {
    const PipelinePlan trial = build(cuts, -1);
    const std::vector<double> ms = options.measure(trial.stages);
    if (ms.size() != static_cast<size_t>(stages)) throw Error("pipeline_split: the measure callback returned " + std::to_string(ms.size()) + " times for " + std::to_string(stages) + " stages");
    const double mx = *std::max_element(ms.begin(), ms.end());
    if (mx < best_max) {
      best_max = mx;
      best_cuts = cuts;
      best_ms = ms;
    }
    if (round == options.refine_rounds) break;
    std::vector<int64_t> starts = {0};
    starts.insert(starts.end(), cuts.begin(), cuts.end());
    starts.push_back(n);
    bool scaled = true;
    for (int k = 0; k < stages && scaled; ++k) {
      double predicted = 0;
      for (int64_t i = starts[static_cast<size_t>(k)]; i < starts[static_cast<size_t>(k) + 1]; ++i) predicted += cost[static_cast<size_t>(i)];
      if (!(predicted > 0) || !(ms[static_cast<size_t>(k)] > 0)) {
        scaled = false;
        break;
      }
      const double f = ms[static_cast<size_t>(k)] * 1000.0 / predicted;
      for (int64_t i = starts[static_cast<size_t>(k)]; i < starts[static_cast<size_t>(k) + 1]; ++i) cost[static_cast<size_t>(i)] *= f;
    }
    if (!scaled) break;
    std::vector<int64_t> next = balance_cuts(cost, penalty, cuttable, stages, options.tolerance);
    if (next.empty() || next == cuts) break;
    cuts = next;
  }
  balance = "time (measured)";
  PipelinePlan plan = build(best_cuts, options.only_stage);
  plan.total_cost = 0;
  for (int k = 0; k < stages; ++k) {
    plan.stages[static_cast<size_t>(k)].cost = best_ms[static_cast<size_t>(k)] * 1000.0;
    plan.total_cost += best_ms[static_cast<size_t>(k)] * 1000.0;
    if (plan.stages[static_cast<size_t>(k)].module) set_stage_meta(plan.stages[static_cast<size_t>(k)]);
  }
  return plan;
}

void save_stage(const PipelineStage& stage, const std::string& path) {
  if (!stage.module) throw Error("save_stage: stage " + std::to_string(stage.index) + " has no module");
  PipelineStage copy = stage;
  set_stage_meta(copy);  // the description as it is now
  fx::save(*stage.module, path);
}

PipelineStage load_stage(const std::string& path) {
  PipelineStage s;
  s.module = fx::load(path);
  Node* out = s.module->graph().output_node();
  const std::string* text = nullptr;
  if (out) {
    auto it = out->meta().find(kStageMeta);
    if (it != out->meta().end()) text = std::any_cast<std::string>(&it->second);
  }
  if (!text) throw Error(path + ": not a pipeline stage file (no stage description; fxcpp pipeline-plan -o writes them)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
    if (j.at("format").get<std::string>() != kStageFormat) throw std::runtime_error("format");
    if (j.at("version").get<int>() > kStageFormatVersion)
      throw Error(path + ": pipeline stage format version " + std::to_string(j.at("version").get<int>()) +
                  " is newer than this fxcpp's (" + std::to_string(kStageFormatVersion) + ")");
    s.index = j.at("stage").get<int>();
    s.num_stages = j.at("stages").get<int>();
    s.inputs = j.at("inputs").get<std::vector<std::string>>();
    s.outputs = j.at("outputs").get<std::vector<std::string>>();
    s.nodes = j.at("nodes").get<int64_t>();
    s.cost = j.at("cost").get<double>();
    s.balance = j.at("balance").get<std::string>();
    s.input_bytes = j.at("input_bytes").get<int64_t>();
    s.output_bytes = j.at("output_bytes").get<int64_t>();
    s.model_fingerprint = j.at("model").get<std::string>();
    s.split_id = j.at("split").get<std::string>();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": damaged pipeline stage description (" + std::string(e.what()) + ")");
  }
  if (s.num_stages < 1 || s.index < 0 || s.index >= s.num_stages)
    throw Error(path + ": damaged pipeline stage description (stage " + std::to_string(s.index) + " of " +
                std::to_string(s.num_stages) + ")");
  size_t placeholders = 0;
  for (Node* n : s.module->graph().nodes()) placeholders += n->op() == Opcode::Placeholder;
  if (placeholders != s.inputs.size())
    throw Error(path + ": damaged pipeline stage description (" + std::to_string(s.inputs.size()) + " inputs, " +
                std::to_string(placeholders) + " placeholders)");
  return s;
}

std::vector<c10::IValue> stage_example_inputs(const PipelineStage& stage) {
  std::vector<c10::IValue> out;
  if (!stage.module) return out;
  for (Node* n : stage.module->graph().nodes()) {
    if (n->op() != Opcode::Placeholder) continue;
    const TensorMetadata* m = tensor_meta_of(n);
    if (!m || m->is_quantized || m->stride.size() != m->shape.size()) return {};
    out.emplace_back(at::zeros_like(at::empty_strided(m->shape, m->stride, at::TensorOptions().dtype(m->dtype)),
                                    at::MemoryFormat::Preserve));
  }
  return out;
}

namespace {

/// Optimised stages hand activations over in the layout their kernels use.
/// optimize_for_inference restores a graph's outputs to the unoptimised
/// program's layout (NCHW) and a convolution reading an NCHW input reorders
/// it to channels_last: two conversions per boundary, for nothing. So a stage
/// that is not the last drops the restores that only feed its output, and a
/// stage that is not the first lets fxcpp's kernels (oneDNN convolutions,
/// with a residual sum fused or not; pooling) read their inputs as they
/// arrive, any layout, every other use reading a contiguous copy (what the
/// unoptimised program saw: views and the like behave the same, and
/// restore_layout's formats come out as before). Values do not change; the
/// stages chained compute what they did.
void keep_boundary_layouts(GraphModule& gm, bool first, bool last) {
  Graph& g = gm.graph();
  if (!first) {
    for (Node* ph : g.find_nodes(Opcode::Placeholder)) {
      std::vector<Node*> others;
      for (Node* user : ph->users().to_vector()) {
        const bool kernel = user->op() == Opcode::CallFunction &&
                            (user->target().rfind("fxcpp::onednn_", 0) == 0 || user->target() == "fxcpp::max_pool2d");
        if (!kernel) others.push_back(user);
      }
      if (others.empty()) continue;
      Node* copy = nullptr;
      {
        Node* after = ph;
        for (Node* p : g.find_nodes(Opcode::Placeholder)) after = p;
        InsertPoint at = g.inserting_after(after);
        copy = g.call_function("aten::contiguous", {ph});
      }
      copy->meta() = static_cast<const Node*>(ph)->meta();
      for (Node* user : others) user->replace_input_with(ph, copy);
    }
  }
  if (!last) {
    // A value restored because it leaves the graph: the output, and fxcpp's
    // kernels that read the restored copy only because the output needed it,
    // read the value itself.
    Node* out = g.output_node();
    if (out) {
      std::vector<Node*> restores;
      for (Node* v : out->all_input_nodes())
        if (v->op() == Opcode::CallFunction && v->target() == "fxcpp::restore_layout") restores.push_back(v);
      for (Node* r : restores) {
        Node* source = r->args()[0].to_node();
        for (Node* user : r->users().to_vector()) {
          const bool kernel = user->op() == Opcode::CallFunction &&
                              (user->target().rfind("fxcpp::onednn_", 0) == 0 || user->target() == "fxcpp::max_pool2d");
          if (user == out || kernel) user->replace_input_with(r, source);
        }
        if (r->users().empty()) g.erase_node(r);
      }
      g.eliminate_dead_code();
    }
  }
  g.lint();
}

}  // namespace

PipelineStage optimize_stage(const PipelineStage& stage) {
  PipelineStage out = stage;
  const bool first = stage.index == 0, last = stage.index + 1 >= stage.num_stages;
  OptimizeOptions o;
  o.example_inputs = stage_example_inputs(stage);
  // Activations of optimised stages arrive channels_last (keep_boundary_layouts).
  if (!first)
    for (auto& v : o.example_inputs)
      if (v.isTensor() && v.toTensor().dim() == 4 && v.toTensor().is_floating_point())
        v = v.toTensor().contiguous(at::MemoryFormat::ChannelsLast);
  o.warm_up = false;  // after the layouts are settled
  out.module = optimize_for_inference(stage.module, o);
  keep_boundary_layouts(*out.module, first, last);
  if (!o.example_inputs.empty()) out.module->forward(o.example_inputs);
  return out;
}

std::vector<c10::IValue> stage_inputs(const PipelineStage& stage, const c10::IValue& received) {
  if (stage.index == 0) {
    if (received.isTuple()) {
      const auto& e = received.toTupleRef().elements();
      return std::vector<c10::IValue>(e.begin(), e.end());
    }
    return {received};
  }
  if (!received.isTuple())
    throw Error("stage " + std::to_string(stage.index) + " expects a tuple of " + std::to_string(stage.inputs.size()) +
                " values from stage " + std::to_string(stage.index - 1));
  const auto& e = received.toTupleRef().elements();
  if (e.size() != stage.inputs.size())
    throw Error("stage " + std::to_string(stage.index) + " expects " + std::to_string(stage.inputs.size()) +
                " values from stage " + std::to_string(stage.index - 1) + ", got " + std::to_string(e.size()));
  return std::vector<c10::IValue>(e.begin(), e.end());
}

std::vector<double> time_stages(const std::vector<PipelineStage>& stages, const std::vector<c10::IValue>& inputs,
                                int runs) {
  std::vector<double> best(stages.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r <= std::max(1, runs); ++r) {  // run 0 warms up
    std::vector<c10::IValue> args = inputs;
    for (size_t k = 0; k < stages.size(); ++k) {
      if (!stages[k].module) throw Error("time_stages: stage " + std::to_string(k) + " has no module");
      const auto t0 = std::chrono::steady_clock::now();
      c10::IValue y = stages[k].module->forward(std::move(args));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best[k] = std::min(best[k], ms);
      if (k + 1 < stages.size()) args = stage_inputs(stages[k + 1], y);
    }
  }
  return best;
}

c10::IValue run_stages(const std::vector<PipelineStage>& stages, const std::vector<c10::IValue>& inputs) {
  if (stages.empty()) throw Error("run_stages: no stages");
  c10::IValue value;
  std::vector<c10::IValue> args = inputs;
  for (size_t k = 0; k < stages.size(); ++k) {
    if (!stages[k].module) throw Error("run_stages: stage " + std::to_string(k) + " has no module");
    value = stages[k].module->forward(std::move(args));
    if (k + 1 < stages.size()) args = stage_inputs(stages[k + 1], value);
  }
  return value;
}

}  // namespace fx::distributed
