// fuse_kernels (include/fx/compiler/fuse_kernels.h): which nodes become one
// generated kernel, and the graph surgery that puts it in their place.
//
// Grouping, in graph order: a fusible node joins the groups of the fusible
// nodes it reads (vertical fusion: a producer's value stays in registers),
// merging them when it reads several, if
//  - the group's iteration shape (its full values' shape; a reduction's
//    operand's) is the node's, or the node is arithmetic on the group's row
//    values of their shape (a reduction's epilogue: rsqrt(var + eps));
//  - a full value reads row values only with the reduced dimension kept
//    (size 1), so broadcasting means what it means in the graph;
//  - no path leaves the group and comes back (the group must run as one
//    node: a node outside it cannot run between its members).
// Reductions reduce the last dimension only; a reduction's operand computed
// in the group is its prologue, what reads its result its epilogue; a value
// is never computed twice across groups (a reduction is never duplicated).
//
// Cost model: a group saves the memory traffic of every value it keeps
// inside (one write and at least one read of a tensor of the group's size,
// each). A group whose every value leaves it saves nothing and is left
// alone, as is a group of one node: ATen's or fxcpp's kernel for softmax or
// layer norm alone is as good as a generated one. Recomputation is never
// traded for traffic: each value is computed once per loop over the row
// that needs it, which for a reduction's prologue is once more per level of
// reductions (a softmax reads its input twice from cache, as ATen's does).
// oneDNN kernels are never fused into (their post-ops already are).
#include <fx/compiler/fuse_kernels.h>

#include <fx/compiler/kernel_cache.h>
#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include "compiler/program.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace fx::compiler {

namespace detail {
void prepare_kernels(const std::vector<std::string>& programs, int jobs, FuseReport& report);
}

namespace {

using detail::Op;
using detail::Operand;
using detail::OutputKind;
using detail::Program;

enum class Kind { Pointwise, Reduction, Composite };

struct Target {
  std::string ns, base, overload;
};

Target parse_target(const std::string& t) {
  Target r;
  size_t sep = t.find("::");
  if (sep != std::string::npos) {
    r.ns = t.substr(0, sep);
    const std::string rest = t.substr(sep + 2);
    const size_t dot = rest.find('.');
    r.base = rest.substr(0, dot);
    if (dot != std::string::npos) r.overload = rest.substr(dot + 1);
  } else if (t.rfind("operator.", 0) == 0) {
    r.ns = "operator";
    r.base = t.substr(9);
  }
  return r;
}

/// Positional argument i, else keyword `name`, else `fallback`.
Argument arg_of(const Node* n, size_t i, const char* name, Argument fallback = nullptr) {
  if (i < n->args().size()) return n->args()[i];
  for (const auto& [key, value] : n->kwargs())
    if (key == name) return value;
  return fallback;
}

bool only_kwargs(const Node* n, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : n->kwargs()) {
    (void)value;
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) == allowed.end())
      return false;
  }
  return true;
}

bool is_number(const Argument& a) { return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Double; }

const TensorMetadata* float_meta(const Node* n) {
  const TensorMetadata* m = tensor_meta_of(n);
  return m && m->dtype == at::kFloat && !m->is_quantized ? m : nullptr;
}

/// Emits a node's operators into a program.
struct Builder {
  Program& p;
  const std::unordered_map<const Node*, int>& values;

  Operand of(const Argument& a) const {
    Operand o;
    if (a.is_node()) {
      o.value = values.at(a.to_node());
    } else {
      o.kind = Operand::Kind::Number;
      o.number = a.kind() == Argument::Kind::Bool ? double(a.to_bool()) : a.to_double();
    }
    return o;
  }
  Operand op(const std::string& name, std::vector<Operand> args) {
    p.ops.push_back(Op{name, std::move(args), false, 0});
    Operand o;
    o.value = static_cast<int>(p.ops.size()) - 1;
    return o;
  }
  static Operand number(double v) {
    Operand o;
    o.kind = Operand::Kind::Number;
    o.number = v;
    return o;
  }
};

/// Whether `dims` (an int or a list of one int) names the last of `rank` dimensions.
bool last_dim(const Argument& dims, size_t rank) {
  std::optional<int64_t> d;
  if (dims.kind() == Argument::Kind::Int) {
    d = dims.to_int();
  } else if (auto list = dims.to_int_list(); list && list->size() == 1) {
    d = (*list)[0];
  }
  return d && rank > 0 && (*d == -1 || *d == static_cast<int64_t>(rank) - 1);
}

const std::set<std::string>& unary_ops() {
  static const std::set<std::string> ops = {"neg",  "abs",  "exp", "log",     "sqrt", "rsqrt", "reciprocal",
                                            "tanh", "erf",  "sigmoid", "relu", "silu"};
  return ops;
}

/// What `n` is to the fuser (nullopt: not fusible), emitting its operators
/// into `b` when given; `*out` is its value.
std::optional<Kind> lower(const Node* n, Builder* b, Operand* out) {
  if (n->op() != Opcode::CallFunction || !float_meta(n)) return {};
  const Target t = parse_target(n->target());
  // A uint8 / bool tensor made float32 (a dropout mask): the kernel reads its bytes.
  if (t.ns == "aten" && t.base == "to" && t.overload == "dtype" && n->args().size() >= 2 && n->args()[0].is_node() &&
      n->args()[1].kind() == Argument::Kind::ScalarType && n->args()[1].to_scalar_type() == at::kFloat &&
      only_kwargs(n, {"non_blocking", "copy", "memory_format"}) && n->args().size() <= 4) {
    const TensorMetadata* m = tensor_meta_of(n->args()[0].to_node());
    if (!m || (m->dtype != at::kByte && m->dtype != at::kBool) || m->shape != float_meta(n)->shape) return {};
    if (b && out) *out = b->of(n->args()[0]);
    return Kind::Pointwise;
  }
  for (const Node* in : n->all_input_nodes())
    if (!float_meta(in)) return {};
  const bool aten = t.ns == "aten";
  auto A = [&](size_t i, const char* name, Argument fallback = nullptr) { return arg_of(n, i, name, fallback); };
  auto set = [&](Operand o) {
    if (out) *out = o;
  };
  const Argument x = A(0, "self");
  if (aten && unary_ops().count(t.base) && n->args().size() == 1 && n->kwargs().empty() && x.is_node()) {
    if (b) set(b->op(t.base, {b->of(x)}));
    return Kind::Pointwise;
  }
  if (t.ns == "operator" && t.base == "neg" && n->args().size() == 1 && x.is_node()) {
    if (b) set(b->op("neg", {b->of(x)}));
    return Kind::Pointwise;
  }
  // Binary arithmetic: aten's (with alpha) and Python's operators.
  static const std::map<std::string, std::string> binary = {
      {"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"div", "div"}, {"truediv", "div"},
      {"maximum", "maximum"}, {"minimum", "minimum"}, {"rsub", "rsub"}};
  if (auto it = binary.find(t.base); it != binary.end() && (aten || (t.ns == "operator" && t.base != "rsub" &&
                                                                     t.base != "maximum" && t.base != "minimum"))) {
    if (aten && t.base == "truediv") return {};
    if (!only_kwargs(n, {"other", "alpha"}) || n->args().size() > 3) return {};
    const Argument y = A(1, "other");
    const Argument alpha = A(2, "alpha", Argument(int64_t{1}));
    if (!(x.is_node() || is_number(x)) || !(y.is_node() || is_number(y)) || !is_number(alpha)) return {};
    if (!x.is_node() && !y.is_node()) return {};
    const bool has_alpha = t.base == "add" || t.base == "sub" || t.base == "rsub";
    if (!has_alpha && alpha.to_double() != 1) return {};
    if (b) {
      Operand a = b->of(x), c = b->of(y);
      if (t.base == "rsub") std::swap(a, c);  // rsub(x, y, alpha) = y - alpha * x
      if (has_alpha && alpha.to_double() != 1) c = b->op("mul", {c, Builder::number(alpha.to_double())});
      set(b->op(it->second == "rsub" ? "sub" : it->second, {a, c}));
    }
    return Kind::Pointwise;
  }
  if (aten && t.base == "gelu" && only_kwargs(n, {"approximate"}) && x.is_node()) {
    const Argument approximate = A(1, "approximate", Argument("none"));
    if (approximate.kind() != Argument::Kind::String) return {};
    const std::string& how = approximate.to_string();
    if (how != "none" && how != "tanh") return {};
    if (b) set(b->op(how == "tanh" ? "gelu_tanh" : "gelu", {b->of(x)}));
    return Kind::Pointwise;
  }
  // Clamps: clamp(x, min, max), clamp_min, clamp_max, hardtanh, relu6 (ATen: maximum with min, then minimum with max).
  if (aten && (t.base == "clamp" || t.base == "clamp_min" || t.base == "clamp_max" || t.base == "hardtanh" ||
               t.base == "relu6") &&
      x.is_node() && (t.overload.empty() || t.overload == "default")) {
    Argument lo = nullptr, hi = nullptr;
    if (t.base == "clamp") {
      lo = A(1, "min");
      hi = A(2, "max");
    } else if (t.base == "clamp_min") {
      lo = A(1, "min");
    } else if (t.base == "clamp_max") {
      hi = A(1, "max");
    } else if (t.base == "hardtanh") {
      lo = A(1, "min_val", Argument(-1.0));
      hi = A(2, "max_val", Argument(1.0));
    } else {
      lo = Argument(0.0);
      hi = Argument(6.0);
    }
    if ((!lo.is_none() && !is_number(lo)) || (!hi.is_none() && !is_number(hi)) || (lo.is_none() && hi.is_none()))
      return {};
    if (b) {
      Operand v = b->of(x);
      if (!lo.is_none()) v = b->op("clamp_min", {v, b->of(lo)});
      if (!hi.is_none()) v = b->op("clamp_max", {v, b->of(hi)});
      set(v);
    }
    return Kind::Pointwise;
  }
  if (aten && (t.base == "pow" || t.base == "square") && x.is_node() && n->kwargs().empty()) {
    const Argument e = t.base == "square" ? Argument(2.0) : A(1, "exponent");
    if (!is_number(e)) return {};
    if (b) set(b->op("pow", {b->of(x), b->of(e)}));
    return Kind::Pointwise;
  }
  // The backward formulas of pointwise operators (training graphs), as ATen's kernels compute them.
  if (aten && (t.base == "gelu_backward" || t.base == "threshold_backward" || t.base == "sigmoid_backward" ||
               t.base == "tanh_backward")) {
    const Argument dy = A(0, "grad_output"), v = A(1, t.base == "gelu_backward" || t.base == "threshold_backward"
                                                           ? "self"
                                                           : "output");
    if (!dy.is_node() || !v.is_node()) return {};
    if (t.base == "gelu_backward") {
      if (!only_kwargs(n, {"approximate"})) return {};
      const Argument how = A(2, "approximate", Argument("none"));
      if (how.kind() != Argument::Kind::String || (how.to_string() != "none" && how.to_string() != "tanh")) return {};
      if (b) set(b->op(how.to_string() == "tanh" ? "gelu_tanh_backward" : "gelu_backward", {b->of(dy), b->of(v)}));
    } else if (t.base == "threshold_backward") {
      const Argument threshold = A(2, "threshold");
      if (!is_number(threshold) || !n->kwargs().empty()) return {};
      if (b) set(b->op("le_select", {b->of(v), b->of(threshold), Builder::number(0), b->of(dy)}));
    } else {
      if (!n->kwargs().empty() || n->args().size() != 2) return {};
      if (b) {
        const Operand g = b->of(dy), y = b->of(v);
        if (t.base == "sigmoid_backward")  // dy * (1 - y) * y
          set(b->op("mul", {b->op("mul", {g, b->op("sub", {Builder::number(1), y})}), y}));
        else  // dy * (1 - y * y)
          set(b->op("mul", {g, b->op("sub", {Builder::number(1), b->op("mul", {y, y})})}));
      }
    }
    return Kind::Pointwise;
  }
  const TensorMetadata* xm = x.is_node() ? float_meta(x.to_node()) : nullptr;
  const size_t rank = xm ? xm->shape.size() : 0;
  // Reductions over the last dimension.
  if (aten && (t.base == "mean" || t.base == "sum" || t.base == "amax") && xm && rank > 0 &&
      only_kwargs(n, {"dim", "keepdim", "dtype"})) {
    if (t.base != "amax" && t.overload != "dim" && t.overload != "dim_IntList") return {};
    if (!last_dim(A(1, "dim"), rank) || !A(3, "dtype").is_none()) return {};
    if (A(2, "keepdim", Argument(false)).kind() != Argument::Kind::Bool) return {};
    if (b) set(b->op(t.base == "amax" ? "max" : t.base, {b->of(x)}));
    return Kind::Reduction;
  }
  if (aten && t.base == "var" && xm && rank > 0 && only_kwargs(n, {"dim", "unbiased", "correction", "keepdim"})) {
    double correction = 1;
    if (t.overload == "dim") {
      const Argument unbiased = A(2, "unbiased", Argument(true));
      if (unbiased.kind() != Argument::Kind::Bool) return {};
      correction = unbiased.to_bool() ? 1 : 0;
    } else if (t.overload == "correction") {
      const Argument c = A(2, "correction");
      if (!c.is_none() && !is_number(c)) return {};
      correction = c.is_none() ? 1 : c.to_double();
    } else {
      return {};
    }
    if (!last_dim(A(1, "dim"), rank) || A(3, "keepdim", Argument(false)).kind() != Argument::Kind::Bool) return {};
    if (b) set(b->op("var", {b->of(x), Builder::number(correction)}));
    return Kind::Reduction;
  }
  // Softmax and log_softmax over the last dimension (ATen's last-dimension kernels' arithmetic).
  const bool softmax = t.base == "softmax" || t.base == "_softmax";
  const bool log_softmax = t.base == "log_softmax" || t.base == "_log_softmax";
  if ((aten || (t.ns == "fxcpp" && t.base == "softmax")) && (softmax || log_softmax) && xm && rank > 0) {
    if (!last_dim(A(1, "dim"), rank)) return {};
    const Argument third = n->args().size() > 2 ? n->args()[2] : Argument(nullptr);
    if (t.base[0] == '_' ? !(third.kind() == Argument::Kind::Bool && !third.to_bool()) : !third.is_none()) return {};
    if (!only_kwargs(n, {"dim", "dtype"}) || !arg_of(n, 99, "dtype").is_none()) return {};
    if (b) {
      const Operand v = b->of(x);
      const Operand m = b->op("max", {v});
      const Operand shifted = b->op("sub", {v, m});
      const Operand e = b->op("exp", {shifted});
      const Operand s = b->op("sum", {e});
      if (softmax)
        set(b->op("mul", {e, b->op("div", {Builder::number(1), s})}));
      else
        set(b->op("sub", {shifted, b->op("log", {s})}));
    }
    return Kind::Composite;
  }
  // Their backward over the last dimension: softmax's y * (dy - sum(dy * y)), log_softmax's dy - exp(y) * sum(dy).
  if (aten && (t.base == "_softmax_backward_data" || t.base == "_log_softmax_backward_data") && n->args().size() == 4 &&
      n->kwargs().empty() && x.is_node()) {
    const Argument y = n->args()[1];
    const TensorMetadata* ym = y.is_node() ? float_meta(y.to_node()) : nullptr;
    if (!ym || ym->shape != float_meta(n)->shape || !last_dim(n->args()[2], ym->shape.size()) ||
        n->args()[3].kind() != Argument::Kind::ScalarType || n->args()[3].to_scalar_type() != at::kFloat)
      return {};
    if (b) {
      const Operand g = b->of(x), out = b->of(y);
      if (t.base == "_softmax_backward_data")
        set(b->op("mul", {out, b->op("sub", {g, b->op("sum", {b->op("mul", {g, out})})})}));
      else
        set(b->op("sub", {g, b->op("mul", {b->op("exp", {out}), b->op("sum", {g})})}));
    }
    return Kind::Composite;
  }
  if ((aten || t.ns == "fxcpp") && t.base == "layer_norm" && xm && rank > 0 &&
      only_kwargs(n, {"weight", "bias", "eps", "cudnn_enable"})) {
    const auto shape = A(1, "normalized_shape").to_int_list();
    if (!shape || shape->size() != 1 || (*shape)[0] != xm->shape.back()) return {};
    const Argument w = A(2, "weight"), bias = A(3, "bias"), eps = A(4, "eps", Argument(1e-5));
    for (const Argument& p : {w, bias}) {
      if (p.is_none()) continue;
      const TensorMetadata* pm = p.is_node() ? float_meta(p.to_node()) : nullptr;
      if (!pm || pm->shape.size() != 1 || pm->shape[0] != xm->shape.back()) return {};
    }
    if (!is_number(eps)) return {};
    if (b) {
      // ATen's layer norm: (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(max(var, 0) + eps), var biased.
      const Operand v = b->of(x);
      const Operand mean = b->op("mean", {v});
      const Operand var = b->op("var", {v, Builder::number(0)});
      const Operand rstd = b->op("rsqrt", {b->op("add", {b->op("maximum", {var, Builder::number(0)}), b->of(eps)})});
      Operand y = b->op("mul", {b->op("sub", {v, mean}), rstd});
      if (!w.is_none()) y = b->op("mul", {y, b->of(w)});
      if (!bias.is_none()) y = b->op("add", {y, b->of(bias)});
      set(y);
    }
    return Kind::Composite;
  }
  return {};
}

/// The shape a node iterates over: a reduction's or a composite's input's, a pointwise node's output's.
std::vector<int64_t> iteration_shape(const Node* n, Kind k) {
  if (k == Kind::Pointwise) return float_meta(n)->shape;
  return float_meta(n->all_input_nodes().front())->shape;
}

struct Group {
  std::vector<Node*> members;  // graph order
  std::vector<int64_t> shape;  // iteration shape
  size_t first = 0;            // graph index of the first member
};

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g) {
    size_t i = 0;
    for (Node* n : g.nodes()) index_[n] = i++;
  }

  std::vector<Group> groups() {
    for (Node* n : g_.nodes()) {
      const auto kind = lower(n, nullptr, nullptr);
      if (!kind) continue;
      kind_[n] = *kind;
      place(n, *kind);
    }
    std::vector<Group> out;
    for (auto& [id, group] : groups_) {
      (void)id;
      if (worth_it(group)) out.push_back(std::move(group));
    }
    std::sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.first < b.first; });
    return out;
  }

  bool is_row(const Node* n) const { return row_.count(n) > 0; }

 private:
  /// The row shape of a group's iteration shape: the last dimension kept (size 1) or dropped.
  static std::vector<int64_t> row_shape(const std::vector<int64_t>& shape, bool keep) {
    std::vector<int64_t> r(shape.begin(), shape.end() - 1);
    if (keep) r.push_back(1);
    return r;
  }

  /// Whether n can join the members `in` (iteration shape `shape`); sets *row to its role.
  bool fits(Node* n, Kind kind, const std::unordered_set<const Node*>& in, const std::vector<int64_t>& shape,
            bool* row) const {
    const std::vector<int64_t> own = iteration_shape(n, kind);
    auto row_member = [&](const Node* m) { return in.count(m) && row_.count(m); };
    if (kind != Kind::Pointwise) {
      if (own != shape) return false;
      // A reduction's or a composite's operands: full members or outside values.
      for (const Node* m : n->all_input_nodes())
        if (row_member(m)) return false;
      *row = kind == Kind::Reduction;
      return true;
    }
    if (own == shape) {
      // Full: row values only as [..., 1] (broadcast along the row).
      for (const Node* m : n->all_input_nodes())
        if (row_member(m) && float_meta(m)->shape != row_shape(shape, true)) return false;
      *row = false;
      return true;
    }
    if (shape.empty() || (own != row_shape(shape, true) && own != row_shape(shape, false))) return false;
    for (const Node* m : n->all_input_nodes())
      if (!row_member(m) || float_meta(m)->shape != own) return false;
    *row = true;
    return true;
  }

  /// Whether `from` reaches a member of `in` through its inputs (nodes before `first` cannot).
  bool depends_on(const Node* from, const std::unordered_set<const Node*>& in, size_t first) const {
    std::vector<const Node*> stack{from};
    std::unordered_set<const Node*> seen;
    while (!stack.empty()) {
      const Node* v = stack.back();
      stack.pop_back();
      if (in.count(v)) return true;
      if (index_.at(v) < first || !seen.insert(v).second) continue;
      for (const Node* i : v->all_input_nodes()) stack.push_back(i);
    }
    return false;
  }

  bool acyclic(const std::unordered_set<const Node*>& in, size_t first) const {
    for (const Node* m : in)
      for (const Node* i : m->all_input_nodes())
        if (!in.count(i) && depends_on(i, in, first)) return false;
    return true;
  }

  void place(Node* n, Kind kind) {
    std::vector<int> candidates;
    for (const Node* i : n->all_input_nodes()) {
      auto it = group_of_.find(i);
      if (it != group_of_.end() && std::find(candidates.begin(), candidates.end(), it->second) == candidates.end())
        candidates.push_back(it->second);
    }
    // All of them together, else the latest alone, else a group of its own.
    std::vector<std::vector<int>> tries;
    if (!candidates.empty()) tries.push_back(candidates);
    if (candidates.size() > 1)
      for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) tries.push_back({*it});
    for (const auto& ids : tries) {
      const std::vector<int64_t>& shape = groups_.at(ids.front()).shape;
      std::unordered_set<const Node*> in;
      size_t first = index_.at(n);
      bool same = true;
      for (int id : ids) {
        const Group& grp = groups_.at(id);
        same = same && grp.shape == shape;
        in.insert(grp.members.begin(), grp.members.end());
        first = std::min(first, grp.first);
      }
      bool row = false;
      if (!same || !fits(n, kind, in, shape, &row)) continue;
      in.insert(n);
      if (!acyclic(in, first)) continue;
      // Merge into the first group.
      Group& into = groups_.at(ids.front());
      for (size_t k = 1; k < ids.size(); ++k) {
        Group& other = groups_.at(ids[k]);
        for (Node* m : other.members) group_of_[m] = ids.front();
        into.members.insert(into.members.end(), other.members.begin(), other.members.end());
        into.first = std::min(into.first, other.first);
        groups_.erase(ids[k]);
      }
      into.members.push_back(n);
      std::sort(into.members.begin(), into.members.end(),
                [&](const Node* a, const Node* b) { return index_.at(a) < index_.at(b); });
      group_of_[n] = ids.front();
      if (row) row_.insert(n);
      return;
    }
    const int id = next_id_++;
    Group grp;
    grp.members = {n};
    grp.shape = iteration_shape(n, kind);
    grp.first = index_.at(n);
    groups_.emplace(id, std::move(grp));
    group_of_[n] = id;
    if (kind == Kind::Reduction) row_.insert(n);
  }

  /// The cost model (see the file's comment): two nodes or more, at least one value kept inside.
  bool worth_it(const Group& grp) const {
    if (grp.members.size() < 2 || grp.shape.empty()) return false;
    const std::unordered_set<const Node*> in(grp.members.begin(), grp.members.end());
    for (const Node* m : grp.members) {
      bool escapes = false;
      for (const Node* u : m->users()) escapes = escapes || !in.count(u);
      if (!escapes) return true;
    }
    return false;
  }

  Graph& g_;
  std::unordered_map<const Node*, size_t> index_;
  std::unordered_map<const Node*, Kind> kind_;
  std::unordered_map<const Node*, int> group_of_;
  std::unordered_set<const Node*> row_;
  std::map<int, Group> groups_;
  int next_id_ = 0;
};

/// The program of a group and its inputs (outside nodes, in order of first use).
std::string program_of(const Group& grp, const Fuser& fuser, std::vector<Node*>* inputs, std::vector<Node*>* outputs) {
  const std::unordered_set<const Node*> in(grp.members.begin(), grp.members.end());
  Program p;
  std::unordered_map<const Node*, int> values;
  for (const Node* m : grp.members)
    for (Node* i : m->all_input_nodes())
      if (!in.count(i) && !values.count(i)) {
        values[i] = static_cast<int>(inputs->size());
        inputs->push_back(i);
      }
  p.inputs = static_cast<int>(inputs->size());
  for (int i = 0; i < p.inputs; ++i) {
    p.ops.push_back(Op{"input", {}, false, 0});
    const TensorMetadata* m = tensor_meta_of((*inputs)[i]);
    p.input_types.push_back(m && (m->dtype == at::kByte || m->dtype == at::kBool) ? "u8" : "f32");
  }
  Builder b{p, values};
  for (const Node* m : grp.members) {
    Operand v;
    lower(m, &b, &v);
    values[m] = v.value;
  }
  for (Node* m : grp.members) {
    bool escapes = false;
    for (const Node* u : m->users()) escapes = escapes || !in.count(u);
    if (!escapes) continue;
    const OutputKind kind = !fuser.is_row(m) ? OutputKind::Full
                            : float_meta(m)->shape.size() == grp.shape.size() ? OutputKind::Row
                                                                             : OutputKind::RowFlat;
    p.outputs.emplace_back(values.at(m), kind);
    outputs->push_back(m);
  }
  detail::analyse(p);  // throws if the roles the fuser gave disagree with the program's
  return detail::print_program(p);
}

/// Puts one fused_kernel node in the group's place: before its last member,
/// outside nodes between its members that read its values moved after it.
Node* rewrite(Graph& g, const Group& grp, const std::vector<Node*>& inputs, const std::vector<Node*>& outputs,
              const std::string& program, std::unordered_map<const Node*, Node*>& replaced) {
  Node* last = grp.members.back();
  std::vector<Argument> in;
  for (Node* i : inputs) {
    auto it = replaced.find(i);  // an earlier group's value: its getitem now
    in.emplace_back(it == replaced.end() ? i : it->second);
  }
  Node* fused;
  {
    auto at = g.inserting_before(last);
    fused = g.call_function("fxcpp::fused_kernel", {Argument::list(std::move(in)), Argument(program)});
  }
  Node* tail = fused;
  std::vector<Node*> getitems;
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto at = g.inserting_after(tail);
    Node* item = g.call_function("operator.getitem", {Argument(fused), Argument(static_cast<int64_t>(k))});
    item->meta() = outputs[k]->meta();
    getitems.push_back(item);
    tail = item;
  }
  // Outside readers of the group's values that sit before the fused node move after it, in order.
  const std::unordered_set<const Node*> members(grp.members.begin(), grp.members.end());
  std::unordered_set<const Node*> tainted(members.begin(), members.end());
  std::vector<Node*> moving;
  for (Node* n = grp.members.front(); n && n != fused; n = n->next()) {
    if (members.count(n)) continue;
    bool reads = false;
    for (const Node* i : n->all_input_nodes()) reads = reads || tainted.count(i);
    if (!reads) continue;
    tainted.insert(n);
    moving.push_back(n);
  }
  for (Node* n : moving) {
    tail->append(n);
    tail = n;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    outputs[k]->replace_all_uses_with(getitems[k]);
    replaced[outputs[k]] = getitems[k];
  }
  for (auto it = grp.members.rbegin(); it != grp.members.rend(); ++it) g.erase_node(*it);
  return fused;
}

}  // namespace

size_t fuse_kernels(GraphModule& gm, const FuseOptions& options, FuseReport* report) {
  const size_t groups = fuse_kernels(gm.graph(), options, report);
  if (groups) gm.recompile();
  return groups;
}

size_t fuse_kernels(Graph& g, const FuseOptions& options, FuseReport* report) {
  FuseReport r;
  Fuser fuser(g);
  std::vector<Group> groups = fuser.groups();
  if (groups.empty()) {
    if (report) *report = r;
    return 0;
  }
  if (!can_compile_kernels()) {
    r.warnings.push_back("fuse_kernels: no C++ compiler (" + KernelCache::compiler() +
                         " does not run): " + std::to_string(groups.size()) +
                         (groups.size() == 1 ? " group" : " groups") + " left to ATen");
    if (report) *report = r;
    return 0;
  }
  struct Planned {
    Group group;
    std::vector<Node*> inputs, outputs;
    std::string program;
  };
  std::vector<Planned> planned;
  std::vector<std::string> programs;
  for (Group& grp : groups) {
    Planned p{std::move(grp), {}, {}, {}};
    p.program = program_of(p.group, fuser, &p.inputs, &p.outputs);
    if (std::find(programs.begin(), programs.end(), p.program) == programs.end()) programs.push_back(p.program);
    planned.push_back(std::move(p));
  }
  r.kernels = programs.size();
  if (options.compile) {
    const auto start = std::chrono::steady_clock::now();
    try {
      detail::prepare_kernels(programs, options.jobs, r);
    } catch (const std::exception& e) {
      r.warnings.push_back(std::string("fuse_kernels: ") + e.what() + "; the graph is left unfused");
      r.compiled = 0;
      if (report) *report = r;
      return 0;
    }
    r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::unordered_map<const Node*, Node*> replaced;
  for (Planned& p : planned) {
    // Earlier rewrites may have moved members (readers of an earlier group's values): graph order again.
    std::unordered_map<const Node*, size_t> position;
    size_t i = 0;
    for (const Node* n : g.nodes()) position[n] = i++;
    std::sort(p.group.members.begin(), p.group.members.end(),
              [&](const Node* a, const Node* b) { return position.at(a) < position.at(b); });
    FusedGroup d;
    for (const Node* m : p.group.members) d.replaced.push_back(m->name());
    Node* fused = rewrite(g, p.group, p.inputs, p.outputs, p.program, replaced);
    d.node = fused->name();
    d.program = p.program;
    r.fused_nodes += d.replaced.size();
    r.details.push_back(std::move(d));
  }
  r.groups = planned.size();
  g.lint();
  if (report) *report = r;
  return r.groups;
}

}  // namespace fx::compiler
