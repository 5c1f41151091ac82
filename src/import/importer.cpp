// The TorchScript → fx::Graph importer: symbolic execution of forward.
#include "import/importer.h"

#include "torchscript/jit_targets.h"
#include "torchscript/leaf_module.h"
#include "import/source_position.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>

#include <sstream>

namespace fx::import_detail {

namespace jit = torch::jit;

Val Val::of_constant(c10::IValue v) {
  Val r;
  r.kind = Kind::Constant;
  r.constant = std::move(v);
  return r;
}

Val Val::of_node(Node* n) {
  Val r;
  r.kind = Kind::Symbolic;
  r.symbolic = Argument(n);
  return r;
}

Val Val::of_list(std::vector<Val> items) {
  Val r;
  r.kind = Kind::List;
  r.items = std::make_shared<std::vector<Val>>(std::move(items));
  return r;
}

Val Val::of_tuple(std::vector<Val> items) {
  Val r;
  r.kind = Kind::Tuple;
  r.items = std::make_shared<std::vector<Val>>(std::move(items));
  return r;
}

namespace {

// Recursion guard: a TorchScript call chain deeper than this is a cycle.
constexpr size_t kMaxCallDepth = 200;

std::string strip_debug_suffix(const std::string& name) {
  // TorchScript's unique names: "x.1" → "x".
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  return name.substr(0, dot);
}

bool is_optional(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::OptionalType || type->kind() == c10::TypeKind::NoneType ||
         type->kind() == c10::TypeKind::AnyType;
}

// Operators that are never evaluated at import time even on constants.
bool never_fold(const jit::Node* n) {
  static const std::unordered_set<std::string> kinds = {"prim::RaiseException", "aten::warn", "prim::Print"};
  return kinds.count(n->kind().toQualString()) != 0;
}

}  // namespace

Importer::Importer(const jit::Module& root, const ImportOptions& options)
    : root_(root), options_(options), graph_(std::make_shared<Graph>()) {
  if (!options_.is_leaf_module) options_.is_leaf_module = is_torch_nn_leaf;
}

std::shared_ptr<GraphModule> Importer::run() {
  register_leaf_forward();
  build_graph();
  auto mirror = attach_subgraphs(build_module_tree(root_, "", options_.is_leaf_module));
  std::string class_name = short_type_name(demangled_type_name(root_));
  return std::make_shared<GraphModule>(mirror, graph_, class_name);
}

std::shared_ptr<Graph> Importer::build_graph() {
  jit::Function* forward = root_.type()->findMethod("forward");
  if (!forward) throw ImportError("the module (" + demangled_type_name(root_) + ") has no forward method");
  const jit::Graph& g = *jit::toGraphFunction(*forward).graph();
  const c10::FunctionSchema& schema = forward->getSchema();

  // Fewer example inputs than forward takes: the rest keep their defaults.
  if (options_.example_inputs.size() + 1 > g.inputs().size())
    throw ImportError("example_inputs has " + std::to_string(options_.example_inputs.size()) +
                      " values but forward of " + demangled_type_name(root_) + " takes " +
                      std::to_string(g.inputs().size() - 1));
  auto root_ref = std::make_shared<ModuleRef>(ModuleRef{root_, "", demangled_type_name(root_)});
  std::vector<Val> inputs;
  inputs.reserve(g.inputs().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (i == 0) {
      Val self;
      self.kind = Val::Kind::Module;
      self.module = root_ref;
      inputs.push_back(self);
      continue;
    }
    std::string name;
    std::optional<Argument> default_value;
    if (i < schema.arguments().size()) {
      const c10::Argument& a = schema.arguments()[i];
      name = a.name();
      if (a.default_value()) default_value = Argument::from_ivalue(*a.default_value());
    }
    if (name.empty() || name == "self") name = g.inputs()[i]->debugName();
    name = strip_debug_suffix(name);
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "arg_" + std::to_string(i - 1);
    Node* p = graph_->placeholder(name, default_value);
    p->meta()["torchscript_type"] = g.inputs()[i]->type()->annotation_str();
    root_placeholders_[p] = i - 1;
    inputs.push_back(Val::of_node(p));
  }

  Frame top;
  top.function_name = "forward";
  top.self = root_ref;
  // A root of torch.nn's transformer classes: written out (transformer_import.cpp).
  std::optional<std::vector<Val>> opened;
  if (is_opened_transformer_type(root_ref->type_name) || is_attention_type(root_ref->type_name)) {
    std::vector<Val> args(inputs.begin() + 1, inputs.end());
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == Val::Kind::Symbolic) args[i].type = g.inputs()[i + 1]->type();
    opened = open_transformer(root_ref, args, g.return_node(), top);
  }
  std::vector<Val> outputs = opened ? std::move(*opened)
                                    : call_graph(g, std::move(inputs), "forward", root_ref, nullptr, nullptr,
                                                 root_ref->type_name + ".forward");
  if (outputs.size() == 1) {
    graph_->output(to_argument(outputs[0], g.return_node(), top));
  } else {
    ArgList items;
    for (const Val& v : outputs) items.push_back(to_argument(v, g.return_node(), top));
    graph_->output(Argument::tuple(std::move(items)));
  }
  if (options_.eliminate_dead_code) graph_->eliminate_dead_code();
  if (folded_with_example_) guard_example_inputs();
  meta_.clear();
  return graph_;
}

std::vector<Val> Importer::call_graph(const jit::Graph& graph, std::vector<Val> inputs, std::string function_name,
                                      std::shared_ptr<const ModuleRef> self, const Frame* caller,
                                      const jit::Node* call_site, std::string qualified_name) {
  Frame f;
  f.function_name = std::move(function_name);
  f.qualified_name = std::move(qualified_name);
  f.self = std::move(self);
  f.caller = caller;
  f.call_site = call_site;
  if (++depth_ > kMaxCallDepth) fail(call_site, *caller, "calls nested too deeply (recursion?)");
  if (inputs.size() != graph.inputs().size())
    fail(call_site, *caller, "wrong number of arguments for " + f.function_name);
  for (size_t i = 0; i < inputs.size(); ++i) bind(graph.inputs()[i], std::move(inputs[i]), f);
  run_block(graph.block(), f);
  std::vector<Val> outputs;
  for (const jit::Value* v : graph.outputs()) outputs.push_back(value(v, f, graph.return_node()));
  --depth_;
  return outputs;
}

void Importer::run_block(const jit::Block* block, Frame& f) {
  for (const jit::Node* n : block->nodes()) run_node(n, f);
}

const Val& Importer::value(const jit::Value* v, Frame& f, const jit::Node* user) {
  auto it = f.env.find(v);
  if (it == f.env.end()) fail(user, f, "internal error: TorchScript value %" + v->debugName() + " has no value");
  return it->second;
}

bool Importer::is_leaf(const ModuleRef& m) {
  if (m.path.empty()) return false;
  auto it = leaf_cache_.find(m.path);
  if (it != leaf_cache_.end()) return it->second;
  bool leaf = options_.is_leaf_module(m.module, m.type_name, m.path);
  leaf_cache_.emplace(m.path, leaf);
  return leaf;
}

void Importer::fail(const jit::Node* n, const Frame& f, const std::string& what) const {
  std::ostringstream os;
  os << what;
  if (n) os << ": " << describe_node(n);
  os << " (in ";
  if (f.self && !f.self->path.empty()) {
    os << "module " << f.self->path << " (" << short_type_name(f.self->type_name) << ")." << f.function_name;
  } else if (f.self) {
    os << short_type_name(f.self->type_name) << "." << f.function_name;
  } else {
    os << f.function_name;
  }
  os << ")";
  int shown = 0;
  for (const Frame* c = &f; c && c->call_site && shown < 4; c = c->caller, ++shown) {
    std::string pos = source_position(c->call_site);
    if (!pos.empty()) os << ", called from " << pos;
  }
  throw ImportError(os.str());
}

bool Importer::is_constant(const Val& v) const {
  switch (v.kind) {
    case Val::Kind::Constant:
      return true;
    case Val::Kind::List:
    case Val::Kind::Tuple:
      for (const Val& i : *v.items)
        if (!is_constant(i)) return false;
      return true;
    case Val::Kind::Dict:
      for (const auto& kv : *v.entries)
        if (!is_constant(kv.first) || !is_constant(kv.second)) return false;
      return true;
    default:
      return false;
  }
}

c10::IValue Importer::to_ivalue(const Val& v, const c10::TypePtr& type) const {
  switch (v.kind) {
    case Val::Kind::Constant:
      return v.constant;
    case Val::Kind::List: {
      c10::TypePtr elem = c10::AnyType::get();
      if (auto lt = type->cast<c10::ListType>()) elem = lt->getElementType();
      c10::impl::GenericList list(elem);
      for (const Val& i : *v.items) list.push_back(to_ivalue(i, elem));
      return list;
    }
    case Val::Kind::Tuple: {
      std::vector<c10::IValue> items;
      auto tt = type->cast<c10::TupleType>();
      for (size_t i = 0; i < v.items->size(); ++i)
        items.push_back(to_ivalue((*v.items)[i], tt && i < tt->elements().size() ? tt->elements()[i] : c10::AnyType::get()));
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case Val::Kind::Dict: {
      c10::TypePtr kt = c10::StringType::get(), vt = c10::AnyType::get();
      if (auto dt = type->cast<c10::DictType>()) {
        kt = dt->getKeyType();
        vt = dt->getValueType();
      }
      c10::impl::GenericDict dict(kt, vt);
      for (const auto& kv : *v.entries) dict.insert(to_ivalue(kv.first, kt), to_ivalue(kv.second, vt));
      return dict;
    }
    default:
      return c10::IValue();
  }
}

Argument Importer::to_argument(const Val& v, const jit::Node* n, Frame& f) {
  switch (v.kind) {
    case Val::Kind::Constant:
      return Argument::from_ivalue(v.constant);
    case Val::Kind::Symbolic:
      return v.symbolic;
    case Val::Kind::List:
    case Val::Kind::Tuple: {
      std::vector<Argument> items;
      items.reserve(v.items->size());
      for (const Val& i : *v.items) items.push_back(to_argument(i, n, f));
      return v.kind == Val::Kind::List ? Argument::list(std::move(items)) : Argument::tuple(std::move(items));
    }
    case Val::Kind::Dict: {
      Kwargs items;
      for (const auto& kv : *v.entries) {
        if (kv.first.kind != Val::Kind::Constant || !kv.first.constant.isString())
          fail(n, f, "a dict with non-string keys cannot be a node argument");
        items.emplace_back(kv.first.constant.toStringRef(), to_argument(kv.second, n, f));
      }
      return Argument::dict(std::move(items));
    }
    case Val::Kind::Module:
      fail(n, f, "a module (" + v.module->path + ") cannot be passed as a value");
    case Val::Kind::Function:
      fail(n, f, "a function cannot be passed as a value");
    case Val::Kind::Object:
      fail(n, f, "an object of class " + class_name_of(v.class_type) +
                     " cannot be a value of the graph (objects exist only while importing: return its tensors instead)");
  }
  return Argument();
}

Node* Importer::emit(const std::string& target, ArgList args, Kwargs kwargs, const jit::Node* n, Frame& f) {
  Node* node = nullptr;
  try {
    node = graph_->call_function(target, local(args), map_arg(kwargs, [&](Node* x) { return local(Argument(x)); }));
  } catch (const ImportError&) {
    throw;
  } catch (const std::exception& e) {
    fail(n, f, std::string("cannot create a node: ") + e.what());
  }
  if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
  return node;
}

Val Importer::getitem(const Val& v, int64_t i, const jit::Node* n, Frame& f) {
  if (v.kind == Val::Kind::List || v.kind == Val::Kind::Tuple) {
    int64_t size = static_cast<int64_t>(v.items->size());
    int64_t j = i < 0 ? i + size : i;
    if (j < 0 || j >= size) fail(n, f, "index " + std::to_string(i) + " out of range");
    return (*v.items)[j];
  }
  if (v.kind == Val::Kind::Constant) {
    if (v.constant.isTuple()) {
      const auto& elements = v.constant.toTupleRef().elements();
      const int64_t j = i < 0 ? i + static_cast<int64_t>(elements.size()) : i;
      if (j < 0 || j >= static_cast<int64_t>(elements.size())) fail(n, f, "tuple index " + std::to_string(i) + " out of range");
      return Val::of_constant(elements[j]);
    }
    if (v.constant.isList()) {
      auto list = v.constant.toListRef();
      const int64_t j = i < 0 ? i + static_cast<int64_t>(list.size()) : i;
      if (j < 0 || j >= static_cast<int64_t>(list.size())) fail(n, f, "list index " + std::to_string(i) + " out of range");
      return Val::of_constant(list[j]);
    }
    fail(n, f, "cannot index a " + v.constant.tagKind());
  }
  return Val::of_node(emit("operator.getitem", {to_argument(v, n, f), Argument(i)}, {}, n, f));
}

void Importer::run_node(const jit::Node* n, Frame& f) {
  const jit::NodeKind kind = n->kind();
  if (kind == jit::prim::Constant) {
    const jit::Value* out = n->output();
    if (auto ft = out->type()->cast<c10::FunctionType>()) {
      Val v;
      v.kind = Val::Kind::Function;
      v.function = ft->function();
      bind(out, v, f);
      return;
    }
    auto iv = jit::toIValue(out);
    if (!iv) fail(n, f, "unsupported constant");
    bind(out, Val::of_constant(*iv), f);
    return;
  }
  if (kind == jit::prim::GetAttr) return get_attr(n, f);
  if (kind == jit::prim::CallMethod) return call_method(n, f);
  if (kind == jit::prim::CallFunction) return call_function(n, f);
  if (kind == jit::prim::If) return run_if(n, f);
  if (kind == jit::prim::Loop) return run_loop(n, f);
  if (kind == jit::prim::SetAttr) return set_attr(n, f);
  if (kind == jit::prim::CreateObject) return create_object(n, f);
  if (kind == jit::prim::ListConstruct || kind == jit::prim::TupleConstruct) {
    std::vector<Val> items;
    for (const jit::Value* in : n->inputs()) items.push_back(value(in, f, n));
    bind(n->output(), kind == jit::prim::ListConstruct ? Val::of_list(std::move(items)) : Val::of_tuple(std::move(items)), f);
    return;
  }
  if (kind == jit::prim::DictConstruct) {
    Val d;
    d.kind = Val::Kind::Dict;
    d.entries = std::make_shared<std::vector<std::pair<Val, Val>>>();
    for (size_t i = 0; i + 1 < n->inputs().size(); i += 2)
      d.entries->emplace_back(value(n->input(i), f, n), value(n->input(i + 1), f, n));
    bind(n->output(), d, f);
    return;
  }
  if (kind == jit::prim::ListUnpack || kind == jit::prim::TupleUnpack) return unpack(n, f);
  if (kind == jit::prim::TupleIndex) {
    const Val& idx = value(n->input(1), f, n);
    if (idx.kind != Val::Kind::Constant || !idx.constant.isInt()) fail(n, f, "tuple index not known at import");
    Val tuple = value(n->input(0), f, n);
    bind(n->output(), getitem(tuple, idx.constant.toInt(), n, f), f);
    return;
  }
  if (kind == jit::prim::fork) {
    // torch.jit.fork(fn, *args): run now, in order (the values are those of
    // the asynchronous run); the future is its result, aten::wait reads it.
    std::vector<Val> inputs;
    for (const jit::Value* in : n->inputs()) inputs.push_back(value(in, f, n));
    std::vector<Val> outs = call_graph(*n->g(jit::attr::Subgraph), std::move(inputs), "fork", nullptr, &f, n, "fork");
    bind(n->output(), outs.size() == 1 ? outs[0] : Val::of_tuple(std::move(outs)), f);
    return;
  }
  if (kind == jit::aten::wait && n->inputs().size() == 1) {
    bind(n->output(), value(n->input(0), f, n), f);
    return;
  }
  if (kind == jit::prim::isinstance) {
    // Known now for import-time values; a builtin call on run-time ones.
    const Val& v = value(n->input(0), f, n);
    std::vector<Argument> types;
    for (const c10::TypePtr& t : n->tys(jit::attr::types)) types.emplace_back(t->annotation_str());
    Argument type_list = Argument::list(std::move(types));
    if (is_constant(v)) {
      c10::IValue result = fx::call_function("prim::isinstance", {to_ivalue(v, n->input(0)->type()), type_list.to_ivalue()});
      bind(n->output(), Val::of_constant(result), f);
      return;
    }
    bind(n->output(), Val::of_node(emit("prim::isinstance", {to_argument(v, n, f), type_list}, {}, n, f)), f);
    return;
  }
  if (kind == jit::prim::TupleSlice) {
    const Val tuple = value(n->input(0), f, n);
    const int64_t beg = n->i(jit::attr::beg), end = n->i(jit::attr::end);
    if (tuple.kind == Val::Kind::Tuple) {
      const int64_t size = static_cast<int64_t>(tuple.items->size());
      auto clamp = [&](int64_t i) { return std::max<int64_t>(0, std::min(size, i < 0 ? i + size : i)); };
      std::vector<Val> items(tuple.items->begin() + clamp(beg), tuple.items->begin() + std::max(clamp(beg), clamp(end)));
      bind(n->output(), Val::of_tuple(std::move(items)), f);
      return;
    }
    bind(n->output(), Val::of_node(emit("prim::TupleSlice", {to_argument(tuple, n, f), beg, end}, {}, n, f)), f);
    return;
  }
  if (kind == jit::prim::Uninitialized) {
    bind(n->output(), Val::of_constant(c10::IValue()), f);
    return;
  }
  if (kind == jit::prim::unchecked_cast) {
    Val v = value(n->input(0), f, n);
    bind(n->output(), v, f);
    return;
  }
  if (kind == jit::prim::RaiseException) {
    // Reached unconditionally: the module always raises, unless the condition
    // folded because of the example inputs (`torch._assert(x.dim() == 4)` on
    // a 3-D example): then running it raises the model's own message.
    if (subgraph_depth_ == 0 && !folded_with_example_) {
      std::string msg = message_text(n->input(0), f);
      fail(n, f, "the module always raises here (" + msg + ")");
    }
    // In a branch taken at run time: raised when it runs.
    ArgList args;
    for (const jit::Value* in : n->inputs()) args.push_back(to_argument(value(in, f, n), n, f));
    emit("prim::RaiseException", std::move(args), {}, n, f);
    return;
  }
  if (!n->maybeOperator())
    fail(n, f,
         "unsupported TorchScript construct " + std::string(n->kind().toQualString()) +
             "; move the code that uses it into a submodule and import that one as a leaf "
             "(ImportOptions::is_leaf_module: a leaf runs its own scripted forward)");
  if (run_mutation(n, f)) return;
  if (run_special(n, f)) return;
  if (expand_fused_transformer(n, f)) return;
  run_operator(n, f);
}

void Importer::get_attr(const jit::Node* n, Frame& f) {
  if (get_object_attr(n, f)) return;
  const Val obj = value(n->input(0), f, n);
  const std::string name = n->s(jit::attr::name);
  if (obj.kind != Val::Kind::Module) fail(n, f, "attribute '" + name + "' of a value that is not a module");
  auto written = module_attr_writes_.find(obj.module->path + "." + name);
  if (written != module_attr_writes_.end()) {
    bind(n->output(), written->second, f);
    return;
  }
  const auto& type = obj.module->module.type();
  auto slot = type->findAttributeSlot(name);
  if (!slot) fail(n, f, "module has no attribute '" + name + "'");
  c10::IValue attr = obj.module->module._ivalue()->getSlot(*slot);
  const std::string qualified = obj.module->path.empty() ? name : obj.module->path + "." + name;
  if (attr.isObject() && attr.toObjectRef().type()->is_module()) {
    Val m;
    m.kind = Val::Kind::Module;
    jit::Module child(attr.toObject());
    m.module = std::make_shared<ModuleRef>(ModuleRef{child, qualified, demangled_type_name(child)});
    bind(n->output(), m, f);
    return;
  }
  if (attr.isObject()) {  // an object of a TorchScript class held by the module (a BoxCoder)
    bind(n->output(), object_val(attr), f);
    return;
  }
  if (attr.isTensor() && attr.toTensor().defined()) {
    Node* node = graph_->get_attr(qualified);
    if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
    bind(n->output(), Val::of_node(node), f);
    return;
  }
  bind(n->output(), Val::of_constant(attr), f);
}

void Importer::call_method(const jit::Node* n, Frame& f) {
  if (call_object_method(n, f)) return;
  const Val self = value(n->input(0), f, n);
  const std::string name = n->s(jit::attr::name);
  if (self.kind != Val::Kind::Module) fail(n, f, "method '" + name + "' called on a value that is not a module");
  bool inline_attention = false;
  if (is_forward_method(name)) {
    // torch.nn's transformer layers, written out (transformer_import.cpp).
    std::vector<Val> args;
    for (size_t i = 1; i < n->inputs().size(); ++i) args.push_back(value(n->input(i), f, n));
    if (auto outs = open_transformer(self.module, args, n, f)) {
      for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], outs->at(i), f);
      return;
    }
    // A traced layer's attention: its traced forward, inlined with the layer's.
    inline_attention = is_attention_type(self.module->type_name) && f.self &&
                       is_transformer_layer_type(f.self->type_name) && !self.module->module.hasattr("num_heads");
  }
  if (is_forward_method(name) && !inline_attention && is_leaf(*self.module)) {
    ArgList args;
    for (size_t i = 1; i < n->inputs().size(); ++i) args.push_back(to_argument(value(n->input(i), f, n), n, f));
    Node* node = graph_->call_module(self.module->path, local(args));
    if (options_.record_stack_traces) node->set_stack_trace(stack_trace_entry(n, f.function_name));
    if (n->outputs().size() == 1) {
      bind(n->output(), Val::of_node(node), f);
    } else {
      Val v = Val::of_node(node);
      for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], getitem(v, static_cast<int64_t>(i), n, f), f);
    }
    return;
  }
  jit::Function* fn = self.module->module.type()->findMethod(name);
  if (!fn) fail(n, f, "module has no method '" + name + "'");
  std::vector<Val> inputs;
  for (const jit::Value* in : n->inputs()) inputs.push_back(value(in, f, n));
  std::vector<Val> outs = call_graph(*jit::toGraphFunction(*fn).graph(), std::move(inputs), name, self.module, &f, n,
                                     self.module->type_name + "." + name);
  for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], outs.at(i), f);
}

void Importer::call_function(const jit::Node* n, Frame& f) {
  const Val callee = value(n->input(0), f, n);
  if (callee.kind != Val::Kind::Function) fail(n, f, "call of a value that is not a function");
  std::vector<Val> inputs;
  for (size_t i = 1; i < n->inputs().size(); ++i) inputs.push_back(value(n->input(i), f, n));
  jit::GraphFunction* gf = jit::tryToGraphFunction(*callee.function);
  if (!gf) fail(n, f, "call of a function without a TorchScript graph (" + callee.function->name() + ")");
  std::vector<Val> outs = call_graph(*gf->graph(), std::move(inputs), callee.function->name(), nullptr, &f, n,
                                     callee.function->qualname().qualifiedName());
  for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], outs.at(i), f);
}

void Importer::unpack(const jit::Node* n, Frame& f) {
  const Val v = value(n->input(0), f, n);
  if ((v.kind == Val::Kind::List || v.kind == Val::Kind::Tuple) && v.items->size() != n->outputs().size())
    fail(n, f, "unpacking " + std::to_string(v.items->size()) + " values into " +
                   std::to_string(n->outputs().size()) + " names");
  for (size_t i = 0; i < n->outputs().size(); ++i)
    bind(n->outputs()[i], getitem(v, static_cast<int64_t>(i), n, f), f);
}

void Importer::run_if(const jit::Node* n, Frame& f) {
  const Val cond = value(n->input(0), f, n);
  if (cond.kind != Val::Kind::Constant || !cond.constant.isBool()) {
    if (try_emit_assert(n, f, cond)) return;
    if (cond.kind != Val::Kind::Symbolic) fail(n, f, "the condition of an if is not a bool");
    return emit_cond(n, f, cond);
  }
  const jit::Block* block = n->blocks()[cond.constant.toBool() ? 0 : 1];
  run_block(block, f);
  for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], value(block->outputs()[i], f, block->return_node()), f);
}

void Importer::run_loop(const jit::Node* n, Frame& f) {
  const Val trip = value(n->input(0), f, n);
  Val cond = value(n->input(1), f, n);
  // Unrolled when the trip count and the condition are known now; a loop
  // module otherwise (control_flow_import.cpp).
  if (trip.kind != Val::Kind::Constant || !trip.constant.isInt() || cond.kind != Val::Kind::Constant ||
      !cond.constant.isBool())
    return emit_loop(n, f);
  std::vector<Val> carried;
  for (size_t i = 2; i < n->inputs().size(); ++i) carried.push_back(value(n->input(i), f, n));
  const jit::Block* body = n->blocks()[0];
  const int64_t max_trip = trip.constant.toInt();
  for (int64_t i = 0; i < max_trip; ++i) {
    if (cond.kind != Val::Kind::Constant || !cond.constant.isBool()) {
      // Left early by the data (a break): the rest of the loop runs as a loop module.
      std::vector<Val> rest{Val::of_constant(max_trip - i), cond};
      rest.insert(rest.end(), carried.begin(), carried.end());
      return emit_loop(n, f, i, std::move(rest));
    }
    if (!cond.constant.toBool()) break;
    if (++unrolled_ > options_.max_unrolled_iterations)
      fail(n, f, "loop unrolling stopped after " + std::to_string(options_.max_unrolled_iterations) + " iterations");
    bind(body->inputs()[0], Val::of_constant(i), f);
    for (size_t k = 0; k < carried.size(); ++k) bind(body->inputs()[k + 1], carried[k], f);
    run_block(body, f);
    cond = value(body->outputs()[0], f, body->return_node());
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = value(body->outputs()[k + 1], f, body->return_node());
  }
  for (size_t k = 0; k < n->outputs().size(); ++k) bind(n->outputs()[k], carried.at(k), f);
}

// Operators with import-time meaning on lists, tuples, dicts and None checks.
bool Importer::run_special(const jit::Node* n, Frame& f) {
  const std::string& name = n->schema().name();
  auto input = [&](size_t i) -> const Val& { return value(n->input(i), f, n); };
  if (name == "aten::__getitem__" && n->inputs().size() == 2) {
    const Val& c = input(0);
    const Val& k = input(1);
    if (k.kind != Val::Kind::Constant) return false;
    if ((c.kind == Val::Kind::List || c.kind == Val::Kind::Tuple) && k.constant.isInt()) {
      bind(n->output(), getitem(c, k.constant.toInt(), n, f), f);
      return true;
    }
    if (c.kind == Val::Kind::Dict) {
      for (const auto& kv : *c.entries) {
        if (kv.first.kind == Val::Kind::Constant && kv.first.constant == k.constant) {
          bind(n->output(), kv.second, f);
          return true;
        }
      }
      fail(n, f, "key not in dict");
    }
    return false;
  }
  if (name == "aten::len" && n->inputs().size() == 1) {
    const Val& c = input(0);
    if (c.kind == Val::Kind::List || c.kind == Val::Kind::Tuple) {
      bind(n->output(), Val::of_constant(static_cast<int64_t>(c.items->size())), f);
      return true;
    }
    if (c.kind == Val::Kind::Dict) {
      bind(n->output(), Val::of_constant(static_cast<int64_t>(c.entries->size())), f);
      return true;
    }
    return false;
  }
  if ((name == "aten::__is__" || name == "aten::__isnot__") && n->inputs().size() == 2) {
    const Val& a = input(0);
    const Val& b = input(1);
    auto is_none = [](const Val& v) { return v.kind == Val::Kind::Constant && v.constant.isNone(); };
    auto never_none = [&](const Val& v, const jit::Value* jv) {
      if (v.kind == Val::Kind::Constant) return !v.constant.isNone();
      if (v.kind == Val::Kind::Symbolic) return !is_optional(v.type ? v.type : jv->type());
      return true;  // modules, functions, import-time aggregates
    };
    std::optional<bool> same;
    if (is_none(a) && is_none(b)) same = true;
    else if ((is_none(a) && never_none(b, n->input(1))) || (is_none(b) && never_none(a, n->input(0)))) same = false;
    if (!same) return false;
    bind(n->output(), Val::of_constant(name == "aten::__is__" ? *same : !*same), f);
    return true;
  }
  if (name == "aten::list_with_default" && n->inputs().size() == 2) {
    // F.adaptive_avg_pool2d's _list_with_default(output_size, input.size()):
    // with an int list known at import the sizes are not needed.
    const Val& out = input(0);
    if (out.kind == Val::Kind::List || (out.kind == Val::Kind::Constant && out.constant.isIntList())) {
      bind(n->output(), out, f);
      return true;
    }
    return false;
  }
  return false;
}

void Importer::run_operator(const jit::Node* n, Frame& f) {
  const c10::FunctionSchema& schema = n->schema();
  if (fold_with_example(n, f)) return;
  // Evaluate now: no tensors involved, every input known.
  // A change of a list or dict known now (all its arguments known) is made
  // now, in place, so every name of it sees it (mutable_constant_args).
  bool foldable = !never_fold(n) && !n->hasSideEffects() && (!schema.is_mutable() || mutable_constant_args(n, f));
  if (foldable) {
    for (const jit::Value* v : n->outputs())
      if (mentions_tensor(v->type())) foldable = false;
  }
  if (foldable) {
    for (const jit::Value* v : n->inputs()) {
      const Val& in = value(v, f, n);
      if (!is_constant(in) || mentions_tensor(v->type())) {
        foldable = false;
        break;
      }
    }
  }
  if (foldable) {
    jit::Stack stack;
    for (const jit::Value* v : n->inputs()) stack.push_back(to_ivalue(value(v, f, n), v->type()));
    // TorchScript's interpreter pushes the input count for vararg operations
    // (aten::format, prim::Print ...), which pop it first.
    if (pushes_num_inputs(*n)) stack.emplace_back(static_cast<int64_t>(n->inputs().size()));
    try {
      n->getOperation()(stack);
    } catch (const std::exception& e) {
      std::string what = e.what();
      fail(n, f, "evaluating a constant expression failed: " + what.substr(0, what.find('\n')));
    }
    const size_t k = n->outputs().size();
    for (size_t i = 0; i < k; ++i) bind(n->outputs()[i], Val::of_constant(stack[stack.size() - k + i]), f);
    return;
  }

  // A list or dict the importer holds, changed in a way it cannot follow
  // (an index known only at run time): the change would be lost.
  for (size_t i = 0; schema.is_mutable() && i < n->inputs().size() && i < schema.arguments().size(); ++i) {
    if (!schema.is_mutable({c10::SchemaArgType::input, i})) continue;
    const Val& v = value(n->input(i), f, n);
    if (v.kind == Val::Kind::List || v.kind == Val::Kind::Dict ||
        (v.kind == Val::Kind::Constant && (v.constant.isList() || v.constant.isGenericDict())))
      fail(n, f,
           "a list or dict built in the model is changed at an index or key known only at run time; build it in "
           "order (append) or from known indices");
  }
  JitTarget target = resolve_jit_target(n, options_.overload_names);
  const auto& formals = schema.arguments();
  const bool by_schema = target.kind == JitTarget::Kind::Dispatcher && !schema.is_vararg() &&
                         formals.size() == n->inputs().size();
  ArgList args;
  Kwargs kwargs;
  std::vector<Val> ins;
  ins.reserve(n->inputs().size());
  for (const jit::Value* v : n->inputs()) ins.push_back(value(v, f, n));
  size_t count = ins.size();
  if (by_schema && options_.drop_default_args) {
    // Trailing arguments equal to their defaults, as torch.fx would not record them.
    while (count > 0) {
      const c10::Argument& a = formals[count - 1];
      const Val& v = ins[count - 1];
      if (!a.default_value() || v.kind != Val::Kind::Constant) break;
      const c10::IValue& d = *a.default_value();
      bool equal = false;
      try {
        equal = (d.isNone() && v.constant.isNone()) ||
                (!d.isNone() && !v.constant.isNone() && d.tagKind() == v.constant.tagKind() && d == v.constant);
        if (!equal && d.isIntList() && v.constant.isIntList()) equal = d.toIntVector() == v.constant.toIntVector();
      } catch (const std::exception&) {
        equal = false;
      }
      if (!equal) break;
      --count;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    Argument a = to_argument(ins[i], n, f);
    if (by_schema && formals[i].kwarg_only()) {
      kwargs.emplace_back(formals[i].name(), std::move(a));
    } else {
      args.push_back(std::move(a));
    }
  }
  Node* node = emit(target.target, std::move(args), std::move(kwargs), n, f);
  if (n->outputs().size() == 1) {
    bind(n->output(), Val::of_node(node), f);
  } else if (n->outputs().size() > 1) {
    Val v = Val::of_node(node);
    for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], getitem(v, static_cast<int64_t>(i), n, f), f);
  }
}

}  // namespace fx::import_detail
