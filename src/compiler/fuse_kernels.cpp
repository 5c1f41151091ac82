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
// Then horizontally: groups of one iteration shape reading a common outside
// value merge (merge_siblings), when neither depends on the other and
// nothing outside reads a member's value before the last member.
//
// Cost model: a group saves the memory traffic of every value it keeps
// inside (one write and at least one read of a tensor of the group's size,
// each), and siblings merged horizontally one read of each value they share.
// A group whose every value leaves it, and that shares no read, saves nothing
// and is left alone, as is a group of one node: ATen's or fxcpp's kernel for softmax or
// layer norm alone is as good as a generated one. Recomputation is never
// traded for traffic: each value is computed once per loop over the row
// that needs it, which for a reduction's prologue is once more per level of
// reductions (a softmax reads its input twice from cache, as ATen's does).
// oneDNN kernels are never fused into (their post-ops already are).
#include <fx/compiler/fuse_kernels.h>

#include <fx/compiler/kernel_cache.h>
#include <fx/passes/graph_drawer.h>
#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include "compiler/lowering.h"
#include "kernels/program.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace fx::compiler {

namespace {

using detail::Builder;
using detail::float_meta;
using detail::iteration_shape;
using detail::Kind;
using detail::lower;
using detail::Op;
using detail::Operand;
using detail::OutputKind;
using detail::Program;

struct Group {
  std::vector<Node*> members;  // graph order
  std::vector<int64_t> shape;  // iteration shape
  size_t first = 0;            // graph index of the first member
  bool siblings = false;       // merged horizontally: groups reading a common value (read once now)
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
    merge_siblings();
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

  /// The outside values `grp`'s members read.
  std::unordered_set<const Node*> inputs_of(const Group& grp) const {
    const std::unordered_set<const Node*> in(grp.members.begin(), grp.members.end());
    std::unordered_set<const Node*> out;
    for (const Node* m : grp.members)
      for (const Node* i : m->all_input_nodes())
        if (!in.count(i)) out.insert(i);
    return out;
  }

  /// Horizontal fusion: groups of one iteration shape that read a common outside value become one group (its
  /// kernel reads the value once for all of them: gpt-fast's rotary halves, x1 * cos - x2 * sin and
  /// x2 * cos + x1 * sin), in graph order, when no path leads from one to the other (acyclic) and no outside
  /// node before the last member reads a member's value: the fused node takes the last member's place and
  /// nothing has to move, so the graph's order (and its memory) stays as it was.
  void merge_siblings() {
    std::vector<int> ids;
    for (const auto& [id, grp] : groups_) ids.push_back(id);
    std::sort(ids.begin(), ids.end(), [&](int a, int b) { return groups_.at(a).first < groups_.at(b).first; });
    for (size_t a = 0; a < ids.size(); ++a) {
      if (!groups_.count(ids[a])) continue;
      for (size_t b = a + 1; b < ids.size(); ++b) {
        if (!groups_.count(ids[b]) || !groups_.count(ids[a])) continue;
        Group& x = groups_.at(ids[a]);
        const Group& y = groups_.at(ids[b]);
        if (x.shape != y.shape || x.shape.empty()) continue;
        const std::unordered_set<const Node*> xs = inputs_of(x), ys = inputs_of(y);
        if (std::none_of(ys.begin(), ys.end(), [&](const Node* i) { return xs.count(i) > 0; })) continue;
        std::unordered_set<const Node*> in(x.members.begin(), x.members.end());
        in.insert(y.members.begin(), y.members.end());
        size_t last = 0;
        for (const Node* m : in) last = std::max(last, index_.at(m));
        const bool read_before = std::any_of(in.begin(), in.end(), [&](const Node* m) {
          for (const Node* u : m->users())
            if (!in.count(u) && index_.at(u) < last) return true;
          return false;
        });
        if (read_before || !acyclic(in, std::min(x.first, y.first))) continue;
        for (Node* m : y.members) group_of_[m] = ids[a];
        x.members.insert(x.members.end(), y.members.begin(), y.members.end());
        std::sort(x.members.begin(), x.members.end(),
                  [&](const Node* p, const Node* q) { return index_.at(p) < index_.at(q); });
        x.first = std::min(x.first, y.first);
        x.siblings = true;
        groups_.erase(ids[b]);
      }
    }
  }

  /// The cost model (see the file's comment): two nodes or more, at least one value kept inside, or siblings
  /// that read a value once between them.
  bool worth_it(const Group& grp) const {
    if (grp.members.size() < 2 || grp.shape.empty()) return false;
    if (grp.siblings) return true;
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
      r.compiled = prepare_kernels(programs, options.jobs);
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

namespace {
namespace fuse_kernels_drawing {  // named: src/compiler is built in unity batches

/// The HTML drawing of a graph shows a fused kernel's program and its C++
/// one click away (fx::register_node_details).
const bool kDrawsKernels = [] {
  register_node_details("fxcpp::fused_kernel", [](const Node& n) -> std::vector<std::pair<std::string, std::string>> {
    if (n.args().size() < 2 || n.args()[1].kind() != Argument::Kind::String) return {};
    const std::string& program = n.args()[1].to_string();
    return {{"kernel program", program}, {"kernel C++", kernel_source(program)}};
  });
  return true;
}();

}  // namespace fuse_kernels_drawing
}  // namespace

}  // namespace fx::compiler
