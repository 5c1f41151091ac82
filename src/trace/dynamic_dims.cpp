// Tracer::trace_dynamic: a graph valid for any size of the declared
// dimensions (TraceOptions::dynamic_dims).
//
// The code is traced at the example sizes (the base graph) and again with
// each declared dimension grown by 1 and by 2 (and, with several dimensions,
// once with all of them grown by 1). The graphs must have the same nodes;
// integer arguments that differ are fitted to a*s + b over the declared sizes
// s and replaced, in the base graph, by nodes computing them from the input:
// aten::size.int(x, d) nodes and operator.mul / add / sub nodes, inserted
// right after the placeholders.
#include <fx/trace.h>

#include <ATen/ops/arange.h>
#include <c10/util/Exception.h>

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace fx {
namespace {

using Dim = TraceOptions::Dim;

// One dynamic size: the declared dimensions that share it (one unnamed
// dimension, or every dimension declared with the same name).
struct Size {
  std::vector<Dim> members;
  std::string label;  // "input 0 dimension 0", or "'batch'"
};

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// `t` with dimension `dim` grown by k: the elements repeat cyclically, so an
// index tensor keeps valid indices.
at::Tensor grown(const at::Tensor& t, int64_t dim, int64_t k) {
  at::NoGradGuard no_grad;
  const int64_t s = t.size(dim);
  at::Tensor g = t.index_select(dim, at::arange(s + k, at::kLong).remainder(s));
  if (t.requires_grad()) g.requires_grad_(true);
  return g;
}

// One extra trace: how far each declared dimension was grown, and its graph.
struct Probe {
  std::vector<int64_t> delta;
  std::shared_ptr<Graph> graph;
  std::shared_ptr<torch::nn::Module> root;
  std::unordered_map<const Node*, size_t> index;  // node → position in graph
};

// An integer argument as a function of the dynamic sizes: sum a[d]*s[d] + b.
struct Affine {
  std::vector<int64_t> a;
  int64_t b = 0;
  bool operator<(const Affine& o) const { return std::tie(a, b) < std::tie(o.a, o.b); }
};

// Rewrites the base graph's moving integer arguments as nodes.
class Generalizer {
 public:
  Generalizer(Graph& graph, const torch::nn::Module& base_root, const std::vector<Size>& dims,
              std::vector<int64_t> sizes, std::vector<Probe>& probes)
      : base_root_(base_root), graph_(graph), dims_(dims), sizes_(std::move(sizes)), probes_(probes) {
    for (Node* n : graph_.nodes()) {
      index_.emplace(n, base_nodes_.size());
      base_nodes_.push_back(n);
      if (n->op() == Opcode::Placeholder) {
        placeholders_.push_back(n);
      } else if (anchor_ == nullptr) {
        anchor_ = n;
      }
    }
  }

  void run() {
    std::vector<std::vector<Node*>> probe_nodes;
    for (Probe& p : probes_) {
      std::vector<Node*> nodes;
      for (Node* n : p.graph->nodes()) {
        p.index.emplace(n, nodes.size());
        nodes.push_back(n);
      }
      if (nodes.size() != base_nodes_.size()) {
        throw TraceError("TraceOptions::dynamic_dims: the graph traced at " + where(p) + " has " +
                         std::to_string(nodes.size()) + " nodes, the one at the example sizes " +
                         std::to_string(base_nodes_.size()) +
                         ": the traced code takes another path for other sizes, so the dimension cannot be dynamic");
      }
      probe_nodes.push_back(std::move(nodes));
    }
    for (size_t i = 0; i < base_nodes_.size(); ++i) {
      Node* n = base_nodes_[i];
      std::vector<const Node*> alts;
      for (size_t k = 0; k < probes_.size(); ++k) {
        const Node* m = probe_nodes[k][i];
        if (m->op() != n->op() || m->target() != n->target()) {
          throw TraceError("TraceOptions::dynamic_dims: node %" + n->name() + " (" + n->target() + ") is " +
                           m->target() + " in the graph traced at " + where(probes_[k]) +
                           ": the traced code takes another path for other sizes");
        }
        alts.push_back(m);
      }
      generalize_node(*n, alts);
    }
  }

 private:
  // "input 0 dimension 0 = 3".
  std::string where(const Probe& p) const {
    std::string s;
    for (size_t d = 0; d < dims_.size(); ++d) {
      if (p.delta[d] == 0) continue;
      s += (s.empty() ? "" : ", ") + dims_[d].label + " = " + std::to_string(sizes_[d] + p.delta[d]);
    }
    return s;
  }

  [[noreturn]] void moving(const Node& n, const std::string& what, const std::string& v0, const Probe& p,
                           const std::string& v1, const std::string& why) const {
    std::string sizes;
    for (size_t d = 0; d < dims_.size(); ++d) {
      sizes += (d ? ", " : "") + dims_[d].label + " = " + std::to_string(sizes_[d]);
    }
    throw TraceError("TraceOptions::dynamic_dims: " + what + " of node %" + n.name() + " (" + n.target() + ") is " +
                     v0 + " at " + sizes + " but " + v1 + " at " + where(p) + ": " + why);
  }

  void generalize_node(Node& n, const std::vector<const Node*>& alts) {
    if (n.op() == Opcode::GetAttr) check_constant(n);
    bool changed = false;
    ArgList args;
    for (size_t j = 0; j < n.args().size(); ++j) {
      std::vector<const Argument*> vs;
      for (const Node* m : alts) {
        if (m->args().size() != n.args().size()) mismatch(n, "the number of arguments", alts, m);
        vs.push_back(&m->args()[j]);
      }
      args.push_back(generalize(n, "argument " + std::to_string(j), n.args()[j], vs, changed));
    }
    Kwargs kwargs;
    for (size_t j = 0; j < n.kwargs().size(); ++j) {
      const std::string& key = n.kwargs()[j].first;
      std::vector<const Argument*> vs;
      for (const Node* m : alts) {
        if (m->kwargs().size() != n.kwargs().size() || m->kwargs()[j].first != key)
          mismatch(n, "the keyword arguments", alts, m);
        vs.push_back(&m->kwargs()[j].second);
      }
      kwargs.emplace_back(key, generalize(n, "keyword argument '" + key + "'", n.kwargs()[j].second, vs, changed));
    }
    if (changed) {
      n.set_args(std::move(args));
      n.set_kwargs(std::move(kwargs));
    }
  }

  [[noreturn]] void mismatch(const Node& n, const std::string& what, const std::vector<const Node*>& alts,
                             const Node* m) const {
    size_t k = 0;
    while (alts[k] != m) ++k;
    moving(n, what, format_args(n.args()) + " " + format_kwargs(n.kwargs()), probes_[k],
           format_args(m->args()) + " " + format_kwargs(m->kwargs()),
           "the traced code calls it differently for other sizes");
  }

  // A tensor constant must not depend on the dynamic sizes.
  void check_constant(const Node& n) {
    if (n.target().rfind("_tensor_constant", 0) != 0) return;
    const at::Tensor t0 = root_tensor(base_root_, n.target());
    for (const Probe& p : probes_) {
      const at::Tensor t = root_tensor(*p.root, n.target());
      if (t0.defined() && t.defined() && t0.sizes() != t.sizes()) {
        moving(n, "the tensor constant's shape", ints_str(t0.sizes().vec()), p, ints_str(t.sizes().vec()),
               "a tensor made from a dynamic size outside a traced operator cannot be generalised");
      }
    }
  }

  static at::Tensor root_tensor(const torch::nn::Module& m, const std::string& name) {
    const auto buffers = m.named_buffers(false);
    if (const at::Tensor* b = buffers.find(name)) return *b;
    const auto params = m.named_parameters(false);
    const at::Tensor* p = params.find(name);
    return p ? *p : at::Tensor();
  }

  Argument generalize(const Node& n, const std::string& what, const Argument& a0,
                      const std::vector<const Argument*>& vs, bool& changed) {
    for (size_t k = 0; k < vs.size(); ++k) {
      if (vs[k]->kind() != a0.kind()) moving(n, what, a0.repr(), probes_[k], vs[k]->repr(), "its kind changes");
    }
    switch (a0.kind()) {
      case Argument::Kind::Int:
        return generalize_int(n, what, a0, vs, changed);
      case Argument::Kind::Node:
        for (size_t k = 0; k < vs.size(); ++k) {
          if (probes_[k].index.at(vs[k]->to_node()) != index_.at(a0.to_node()))
            moving(n, what, a0.repr(), probes_[k], vs[k]->repr(), "the traced code takes another path");
        }
        return a0;
      case Argument::Kind::List:
      case Argument::Kind::Tuple: {
        std::vector<Argument> items;
        for (size_t k = 0; k < vs.size(); ++k) {
          if (vs[k]->items().size() != a0.items().size())
            moving(n, what, a0.repr(), probes_[k], vs[k]->repr(), "its length changes");
        }
        bool inner = false;
        for (size_t j = 0; j < a0.items().size(); ++j) {
          std::vector<const Argument*> sub;
          for (const Argument* v : vs) sub.push_back(&v->items()[j]);
          items.push_back(generalize(n, what, a0.items()[j], sub, inner));
        }
        if (!inner) return a0;
        changed = true;
        return a0.kind() == Argument::Kind::List ? Argument::list(std::move(items)) : Argument::tuple(std::move(items));
      }
      case Argument::Kind::Constant:
        return a0;  // tensors and objects compare by identity: not comparable across traces
      default:
        for (size_t k = 0; k < vs.size(); ++k) {
          if (*vs[k] != a0) {
            moving(n, what, a0.repr(), probes_[k], vs[k]->repr(),
                   "only integer arguments can follow a dynamic dimension (as a*s + b)");
          }
        }
        return a0;
    }
  }

  Argument generalize_int(const Node& n, const std::string& what, const Argument& a0,
                          const std::vector<const Argument*>& vs, bool& changed) {
    const int64_t v0 = a0.to_int();
    bool moves = false;
    for (const Argument* v : vs) moves = moves || v->to_int() != v0;
    if (!moves) return a0;
    // probes_[2d] grows dimension d by 1, probes_[2d + 1] by 2.
    Affine f;
    f.a.resize(dims_.size());
    f.b = v0;
    for (size_t d = 0; d < dims_.size(); ++d) {
      const int64_t step1 = vs[2 * d]->to_int() - v0, step2 = vs[2 * d + 1]->to_int() - v0;
      if (step2 != 2 * step1) {
        moving(n, what, std::to_string(v0), probes_[2 * d + 1], std::to_string(vs[2 * d + 1]->to_int()),
               "it is " + std::to_string(vs[2 * d]->to_int()) + " at " + where(probes_[2 * d]) +
                   ", not an affine function a*s + b of the dynamic sizes");
      }
      f.a[d] = step1;
      f.b -= step1 * sizes_[d];
    }
    for (size_t k = 2 * dims_.size(); k < vs.size(); ++k) {  // all dimensions grown at once
      int64_t expected = f.b;
      for (size_t d = 0; d < dims_.size(); ++d) expected += f.a[d] * (sizes_[d] + probes_[k].delta[d]);
      if (vs[k]->to_int() != expected) {
        moving(n, what, std::to_string(v0), probes_[k], std::to_string(vs[k]->to_int()),
               "not an affine function of the dynamic sizes (a product of two of them?)");
      }
    }
    changed = true;
    return Argument(expression(f));
  }

  Node* size_node(size_t d) {
    auto it = size_nodes_.find(d);
    if (it != size_nodes_.end()) return it->second;
    auto at = graph_.inserting_before(anchor_);
    const Dim& first = dims_[d].members.front();
    Node* s = graph_.call_function("aten::size.int", {Argument(placeholders_[first.input]), Argument(first.dim)});
    size_nodes_.emplace(d, s);
    return s;
  }

  Node* expression(const Affine& f) {
    auto it = exprs_.find(f);
    if (it != exprs_.end()) return it->second;
    Node* acc = nullptr;
    for (size_t d = 0; d < dims_.size(); ++d) {
      if (f.a[d] == 0) continue;
      Node* term = size_node(d);
      auto at = graph_.inserting_before(anchor_);
      if (f.a[d] != 1) term = graph_.call_function("operator.mul", {Argument(term), Argument(f.a[d])});
      acc = acc ? graph_.call_function("operator.add", {Argument(acc), Argument(term)}) : term;
    }
    if (acc == nullptr)
      throw TraceError("TraceOptions::dynamic_dims: internal error: a moving argument without a slope");
    auto at = graph_.inserting_before(anchor_);
    if (f.b > 0) acc = graph_.call_function("operator.add", {Argument(acc), Argument(f.b)});
    if (f.b < 0) acc = graph_.call_function("operator.sub", {Argument(acc), Argument(-f.b)});
    exprs_.emplace(f, acc);
    return acc;
  }

  const torch::nn::Module& base_root_;
  Graph& graph_;
  const std::vector<Size>& dims_;
  std::vector<int64_t> sizes_;
  std::vector<Probe>& probes_;
  std::vector<Node*> base_nodes_;
  std::unordered_map<const Node*, size_t> index_;
  std::vector<Node*> placeholders_;
  Node* anchor_ = nullptr;
  std::map<size_t, Node*> size_nodes_;
  std::map<Affine, Node*> exprs_;
};

}  // namespace

std::shared_ptr<Graph> Tracer::trace_dynamic(const std::shared_ptr<torch::nn::Module>& root,
                                             const TracedFunction& forward, std::vector<c10::IValue> example_inputs,
                                             const ConcreteArgs& concrete_args) {
  // The declared dimensions, normalised and grouped by name, and their
  // example sizes.
  std::vector<Size> dims;
  std::vector<int64_t> sizes;
  std::set<std::pair<size_t, int64_t>> seen;
  for (const Dim& d : options_.dynamic_dims) {
    const std::string name = "input " + std::to_string(d.input) + " dimension " + std::to_string(d.dim);
    if (d.input >= example_inputs.size() || !example_inputs[d.input].isTensor() ||
        !example_inputs[d.input].toTensor().defined()) {
      throw TraceError("TraceOptions::dynamic_dims: " + name + ": example input " + std::to_string(d.input) +
                       (d.input >= example_inputs.size()
                            ? " does not exist (" + std::to_string(example_inputs.size()) + " example inputs)"
                            : " is not a tensor"));
    }
    const at::Tensor& t = example_inputs[d.input].toTensor();
    if (d.dim < -t.dim() || d.dim >= t.dim()) {
      throw TraceError("TraceOptions::dynamic_dims: " + name + ": the example input has " + std::to_string(t.dim()) +
                       " dimensions");
    }
    Dim nd{d.input, d.dim < 0 ? d.dim + t.dim() : d.dim, d.name};
    if (!seen.insert({nd.input, nd.dim}).second) {
      throw TraceError("TraceOptions::dynamic_dims: " + name + " is declared twice");
    }
    const int64_t size = t.size(nd.dim);
    if (size == 0) {
      throw TraceError("TraceOptions::dynamic_dims: " + name + " has size 0 in the example; trace with a size >= 1");
    }
    size_t g = 0;
    while (g < dims.size() && (d.name.empty() || dims[g].members.front().name != d.name)) ++g;
    if (g < dims.size()) {
      if (sizes[g] != size) {
        throw TraceError("TraceOptions::dynamic_dims: '" + d.name + "' is " + std::to_string(sizes[g]) + " in " +
                         "input " + std::to_string(dims[g].members.front().input) + " dimension " +
                         std::to_string(dims[g].members.front().dim) + " but " + std::to_string(size) + " in " +
                         name + "; dimensions sharing a name must have the same size");
      }
      dims[g].members.push_back(nd);
      continue;
    }
    dims.push_back(Size{{nd}, d.name.empty() ? name : "'" + d.name + "'"});
    sizes.push_back(size);
  }

  // The probes: each dimension grown by 1 and 2, then all grown by 1.
  std::vector<std::vector<int64_t>> deltas;
  for (size_t d = 0; d < dims.size(); ++d) {
    for (int64_t k : {1, 2}) {
      deltas.emplace_back(dims.size(), 0);
      deltas.back()[d] = k;
    }
  }
  if (dims.size() > 1) deltas.emplace_back(dims.size(), 1);

  auto graph = trace_once(root, forward, example_inputs, concrete_args, /*record_factories=*/true);
  auto base_root = traced_root_;
  std::vector<Probe> probes;
  try {
    for (const auto& delta : deltas) {
      std::vector<c10::IValue> inputs = example_inputs;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (delta[d] == 0) continue;
        for (const Dim& m : dims[d].members) inputs[m.input] = grown(inputs[m.input].toTensor(), m.dim, delta[d]);
      }
      Probe p;
      p.delta = delta;
      try {
        p.graph = trace_once(root, forward, std::move(inputs), concrete_args, /*record_factories=*/true);
      } catch (const c10::Error& e) {
        std::string at;
        for (size_t d = 0; d < dims.size(); ++d) {
          if (delta[d] == 0) continue;
          at += (at.empty() ? "" : ", ") + dims[d].label + " = " + std::to_string(sizes[d] + delta[d]);
        }
        throw TraceError("TraceOptions::dynamic_dims: tracing at " + at + " failed: " + e.what_without_backtrace());
      }
      p.root = traced_root_;
      probes.push_back(std::move(p));
    }
  } catch (...) {
    traced_root_ = base_root;
    throw;
  }
  traced_root_ = base_root;

  Generalizer(*graph, *base_root, dims, sizes, probes).run();

  std::vector<Node*> placeholders = graph->find_nodes(Opcode::Placeholder);
  for (Node* p : placeholders) {
    if (!options_.shape_guards) p->meta().erase(kShapeGuardKey);
  }
  if (options_.shape_guards) {
    for (const Size& size : dims) {
      for (const Dim& d : size.members) {
        auto it = placeholders[d.input]->meta().find(kShapeGuardKey);
        if (it != placeholders[d.input]->meta().end()) {
          std::any_cast<ShapeGuard&>(it->second).shape[d.dim] = kDynamicDim;
        }
      }
    }
  }
  return graph;
}

}  // namespace fx
