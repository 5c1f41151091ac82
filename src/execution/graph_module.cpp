// GraphModule: a module holding a graph, run through a compiled plan.
#include <fx/graph_module.h>
#include <fx/control_flow.h>

#include "execution/compiled_plan.h"
#include "execution/memory_plan.h"

#include <fx/error.h>

#include <unordered_map>
#include <unordered_set>

namespace fx {

namespace {

std::vector<std::string> split_name(const std::string& target) {
  std::vector<std::string> atoms;
  size_t start = 0;
  while (true) {
    size_t dot = target.find('.', start);
    atoms.push_back(target.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return atoms;
}

std::string join_prefix(const std::vector<std::string>& atoms, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "." : "") + atoms[i];
  return out;
}

std::shared_ptr<torch::nn::Module> child_of(const torch::nn::Module& m, const std::string& name) {
  auto children = m.named_children();
  auto* c = children.find(name);
  return c ? *c : nullptr;
}

const at::Tensor* find_tensor(const torch::nn::Module& m, const std::string& name, at::Tensor& holder,
                              bool* is_parameter = nullptr) {
  auto params = m.named_parameters(/*recurse=*/false);
  if (auto* p = params.find(name)) {
    holder = *p;
    if (is_parameter) *is_parameter = true;
    return &holder;
  }
  auto buffers = m.named_buffers(/*recurse=*/false);
  if (auto* b = buffers.find(name)) {
    holder = *b;
    if (is_parameter) *is_parameter = false;
    return &holder;
  }
  return nullptr;
}

bool has_tensor(const torch::nn::Module& m, const std::string& name) {
  at::Tensor holder;
  return find_tensor(m, name, holder) != nullptr;
}

std::shared_ptr<torch::nn::Module> new_empty_module() { return std::make_shared<torch::nn::Module>("Module"); }

/// Name lookups in modules during GraphModule construction. torch::nn's
/// named_children() / named_parameters() copy the whole dict per call, which
/// made building a GraphModule quadratic in the number of submodules and
/// attributes; each module is indexed once here and kept up to date with
/// what construction registers.
class ModuleIndex {
 public:
  std::shared_ptr<torch::nn::Module> child(const torch::nn::Module& m, const std::string& name) {
    auto& c = entry(m).children;
    auto it = c.find(name);
    return it == c.end() ? nullptr : it->second;
  }
  /// The parameter or buffer `name` of m, or nullptr; *is_parameter says which.
  const at::Tensor* tensor(const torch::nn::Module& m, const std::string& name, bool* is_parameter) {
    auto& t = entry(m).tensors;
    auto it = t.find(name);
    if (it == t.end()) return nullptr;
    *is_parameter = it->second.second;
    return &it->second.first;
  }
  void register_module(torch::nn::Module& m, const std::string& name, std::shared_ptr<torch::nn::Module> child) {
    auto& c = entry(m).children;
    const bool replacing = c.count(name) > 0;
    c[name] = child;
    if (replacing) {
      m.replace_module(name, std::move(child));
    } else {
      m.register_module(name, std::move(child));
    }
  }
  void register_tensor(torch::nn::Module& m, const std::string& name, const at::Tensor& value, bool is_parameter) {
    if (is_parameter) {
      m.register_parameter(name, value, value.requires_grad());
    } else {
      m.register_buffer(name, value);
    }
    entry(m).tensors[name] = {value, is_parameter};
  }

 private:
  struct Entry {
    std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> children;
    std::unordered_map<std::string, std::pair<at::Tensor, bool>> tensors;
  };
  Entry& entry(const torch::nn::Module& m) {
    auto [it, fresh] = index_.try_emplace(&m);
    if (fresh) {
      for (const auto& c : m.named_children()) it->second.children.emplace(c.key(), c.value());
      for (const auto& b : m.named_buffers(/*recurse=*/false)) it->second.tensors[b.key()] = {b.value(), false};
      for (const auto& p : m.named_parameters(/*recurse=*/false)) it->second.tensors[p.key()] = {p.value(), true};
    }
    return it->second;
  }
  std::unordered_map<const torch::nn::Module*, Entry> index_;
};

/// torch.fx _copy_attr: installs root's object at `node`'s target in `to`,
/// sharing it, with empty modules for missing parents.
void copy_attr(ModuleIndex& index, torch::nn::Module& root, torch::nn::Module& self, const Node& node) {
  const std::string& target = node.target();
  auto missing = [&](const std::string& what) {
    throw Error("Node " + node.format_node() + " referenced target " + target +
                " but that target was not found in root (" + root.name() + " has no " + what + ")");
  };
  auto atoms = split_name(target);
  torch::nn::Module* from = &root;
  torch::nn::Module* to = &self;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    auto f = index.child(*from, atoms[i]);
    if (!f) missing("submodule '" + join_prefix(atoms, i + 1) + "'");
    auto t = index.child(*to, atoms[i]);
    if (t && t.get() == f.get()) return;  // a parent is installed already: it brings this one
    if (!t) {
      t = new_empty_module();
      index.register_module(*to, atoms[i], t);
    }
    from = f.get();
    to = t.get();
  }
  const std::string& field = atoms.back();
  if (auto f = index.child(*from, field)) {
    auto t = index.child(*to, field);
    if (t.get() == f.get()) return;
    index.register_module(*to, field, f);
    return;
  }
  bool is_parameter = false;
  if (const at::Tensor* value = index.tensor(*from, field, &is_parameter)) {
    bool ignored = false;
    if (index.tensor(*to, field, &ignored)) return;
    index.register_tensor(*to, field, *value, is_parameter);
    return;
  }
  missing("submodule, parameter or buffer '" + target + "'");
}

/// torch.fx's nn.Module._addindent: indents every line but the first.
std::string add_indent(const std::string& s, size_t spaces) {
  if (s.find('\n') == std::string::npos) return s;
  const std::string pad(spaces, ' ');
  std::string out;
  size_t start = 0;
  bool first = true;
  while (true) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    out += first ? line : pad + line;
    first = false;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

}  // namespace

GraphModule::GraphModule(const std::shared_ptr<torch::nn::Module>& root, std::shared_ptr<Graph> graph,
                         std::string class_name)
    : torch::nn::Module(class_name), graph_(std::move(graph)), class_name_(std::move(class_name)) {
  if (!graph_) throw Error("GraphModule: graph is null");
  if (root) torch::nn::Module::train(root->is_training());  // this module only, as torch.fx does
  ModuleIndex index;
  for (Node* n : graph_->nodes()) {
    if (n->op() != Opcode::GetAttr && n->op() != Opcode::CallModule) continue;
    if (!root)
      throw Error("Node " + n->format_node() + " referenced target " + n->target() +
                  " but that target was not found in root (root is null)");
    copy_attr(index, *root, *this, *n);
  }
  graph_->add_owner(this);  // last: a constructor that throws registers nothing
}

GraphModule::~GraphModule() {
  if (graph_) graph_->remove_owner(this);
}

void GraphModule::set_graph(std::shared_ptr<Graph> graph) {
  if (!graph) throw Error("GraphModule::set_graph: graph is null");
  std::lock_guard<std::mutex> lock(compile_mutex_);
  if (graph != graph_) {
    graph_->remove_owner(this);
    graph->add_owner(this);
  }
  graph_ = std::move(graph);
  touch();
}

std::shared_ptr<const detail::CompiledPlan> GraphModule::plan() {
  auto current = [&](const std::shared_ptr<const detail::CompiledPlan>& p) {
    return p && p->graph == graph_.get() && p->graph_version == graph_->version() &&
           p->module_version == module_version_.load(std::memory_order_acquire);
  };
  auto p = std::atomic_load(&plan_);
  if (current(p)) return p;
  std::lock_guard<std::mutex> lock(compile_mutex_);
  p = std::atomic_load(&plan_);
  if (current(p)) return p;
  const uint64_t version = module_version_.load(std::memory_order_acquire);
  auto fresh = std::make_shared<detail::CompiledPlan>(*this);
  fresh->module_version = version;
  std::shared_ptr<const detail::CompiledPlan> result = std::move(fresh);
  std::atomic_store(&plan_, result);
  return result;
}

c10::IValue GraphModule::forward(std::vector<c10::IValue> inputs) {
  auto p = plan();
  auto planner = std::atomic_load(&memory_planner_);
  if (!planner) return p->run(inputs);
  auto scope = planner->begin(p, inputs);  // the forward's buffers come from the plan
  return p->run(inputs);
}

void GraphModule::set_memory_planning(bool enabled) {
  if (enabled == memory_planning()) return;
  std::atomic_store(&memory_planner_, enabled ? std::make_shared<detail::MemoryPlanner>() : nullptr);
}

MemoryPlanStats GraphModule::memory_plan_stats() const {
  auto planner = std::atomic_load(&memory_planner_);
  return planner ? planner->stats() : MemoryPlanStats{};
}

at::Tensor GraphModule::forward_tensor(const at::Tensor& x) {
  std::vector<c10::IValue> inputs;
  inputs.emplace_back(x);
  return forward(std::move(inputs)).toTensor();
}

void GraphModule::recompile() {
  {
    std::lock_guard<std::mutex> lock(compile_mutex_);
    const uint64_t version = module_version_.load(std::memory_order_acquire);
    auto fresh = std::make_shared<detail::CompiledPlan>(*this);
    fresh->module_version = version;
    std::shared_ptr<const detail::CompiledPlan> result = std::move(fresh);
    std::atomic_store(&plan_, result);
    code_graph_ = nullptr;
  }
  code();
}

std::string GraphModule::code() {
  std::lock_guard<std::mutex> lock(compile_mutex_);
  if (code_graph_ != graph_.get() || code_version_ != graph_->version()) {
    code_ = graph_->python_code("self").src;
    code_graph_ = graph_.get();
    code_version_ = graph_->version();
  }
  return code_;
}

namespace {

/// torch.fx print_readable (verbose: stack-trace summary comments) and
/// __nested_code (the children's plain code).
std::string readable_code(GraphModule& gm, bool verbose) {
  std::string src = verbose ? gm.graph().python_code("self", /*verbose=*/true).src : gm.code();
  size_t start = src.find_first_not_of('\n');
  src = start == std::string::npos ? std::string() : src.substr(start);
  std::string module_code = add_indent("class " + gm.class_name() + "(torch.nn.Module):\n" + src, 4);
  std::string submodule_code;
  for (const auto& child : gm.children()) {
    if (auto sub = std::dynamic_pointer_cast<GraphModule>(child)) submodule_code += "\n" + readable_code(*sub, false);
    // Branches and loop bodies (fx/control_flow.h), as torch.export prints torch.cond's graphs.
    for (const auto& [name, branch] : control_flow_graphs(*child)) submodule_code += "\n" + readable_code(*branch, false);
  }
  return module_code + add_indent(submodule_code, 4);
}

}  // namespace

std::string GraphModule::print_readable() { return readable_code(*this, true); }

at::Tensor GraphModule::fetch_attr(const std::string& qualified_name) const {
  auto atoms = split_name(qualified_name);
  const torch::nn::Module* mod = this;
  std::shared_ptr<torch::nn::Module> keep;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    keep = child_of(*mod, atoms[i]);
    if (!keep) throw Error("Node referenced nonexistent target " + join_prefix(atoms, i + 1));
    mod = keep.get();
  }
  at::Tensor holder;
  if (const at::Tensor* t = find_tensor(*mod, atoms.back(), holder)) return *t;
  if (child_of(*mod, atoms.back()))
    throw Error("fetch_attr: target " + qualified_name + " is a module, not a parameter or buffer");
  throw Error("Node referenced nonexistent target " + qualified_name);
}

std::shared_ptr<torch::nn::Module> GraphModule::get_submodule(const std::string& target) const {
  if (target.empty()) return std::const_pointer_cast<torch::nn::Module>(shared_from_this());
  auto atoms = split_name(target);
  std::shared_ptr<torch::nn::Module> mod;
  const torch::nn::Module* cur = this;
  for (const auto& item : atoms) {
    mod = child_of(*cur, item);
    if (!mod) throw Error(cur->name() + " has no attribute `" + item + "`");
    cur = mod.get();
  }
  return mod;
}

bool GraphModule::add_submodule(const std::string& target, std::shared_ptr<torch::nn::Module> module) {
  if (!module || target.empty()) return false;
  auto atoms = split_name(target);
  torch::nn::Module* mod = this;
  std::shared_ptr<torch::nn::Module> keep;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    keep = child_of(*mod, atoms[i]);
    if (!keep) {
      if (has_tensor(*mod, atoms[i])) return false;  // a non-module attribute is in the way
      keep = new_empty_module();
      mod->register_module(atoms[i], keep);
    }
    mod = keep.get();
  }
  const std::string& field = atoms.back();
  if (has_tensor(*mod, field)) return false;
  if (child_of(*mod, field)) {
    mod->replace_module(field, std::move(module));
  } else {
    mod->register_module(field, std::move(module));
  }
  touch();
  return true;
}

bool GraphModule::delete_submodule(const std::string& target) {
  if (target.empty()) return false;
  auto atoms = split_name(target);
  torch::nn::Module* mod = this;
  std::shared_ptr<torch::nn::Module> keep;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    keep = child_of(*mod, atoms[i]);
    if (!keep) return false;
    mod = keep.get();
  }
  if (!child_of(*mod, atoms.back())) return false;
  mod->unregister_module(atoms.back());
  touch();
  return true;
}

void GraphModule::delete_all_unused_submodules() {
  std::unordered_set<std::string> used;
  for (Node* n : graph_->nodes()) {
    if (n->op() != Opcode::CallModule && n->op() != Opcode::GetAttr) continue;
    auto atoms = split_name(n->target());
    for (size_t i = 1; i <= atoms.size(); ++i) used.insert(join_prefix(atoms, i));
    if (n->op() == Opcode::CallModule) {
      std::shared_ptr<torch::nn::Module> sub;
      try {
        sub = get_submodule(n->target());
      } catch (const Error&) {
        continue;  // a node naming a missing module keeps nothing alive
      }
      for (const auto& kv : sub->named_modules("", /*include_self=*/false)) used.insert(n->target() + "." + kv.key());
    }
  }
  std::vector<std::string> to_delete;
  for (const auto& kv : named_modules("", /*include_self=*/false))
    if (!used.count(kv.key())) to_delete.push_back(kv.key());
  for (const auto& name : to_delete) delete_submodule(name);
}

void GraphModule::register_attr(const std::string& qualified_name, const at::Tensor& value) {
  auto atoms = split_name(qualified_name);
  torch::nn::Module* mod = this;
  std::shared_ptr<torch::nn::Module> keep;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    keep = child_of(*mod, atoms[i]);
    if (!keep) {
      if (has_tensor(*mod, atoms[i]))
        throw Error("register_attr: " + join_prefix(atoms, i + 1) + " is a tensor, not a module");
      keep = new_empty_module();
      mod->register_module(atoms[i], keep);
    }
    mod = keep.get();
  }
  const std::string& field = atoms.back();
  if (child_of(*mod, field)) throw Error("register_attr: " + qualified_name + " is a module, not a tensor");
  at::Tensor holder;
  if (const at::Tensor* existing = find_tensor(*mod, field, holder)) {
    at::Tensor t = *existing;
    t.set_data(value);
  } else if (value.requires_grad()) {
    mod->register_parameter(field, value, true);
  } else {
    mod->register_buffer(field, value);
  }
  touch();
}

}  // namespace fx
