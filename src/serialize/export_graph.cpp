// One fx Graph → one torch::jit::Graph (the forward method of the exported module).
#include "serialize/export_internal.h"

#include "torchscript/jit_targets.h"
#include "torchscript/leaf_module.h"

#include <fx/control_flow.h>
#include <fx/graph.h>

#include <torch/csrc/jit/frontend/schema_matching.h>
#include <torch/csrc/jit/frontend/script_type_parser.h>
#include <torch/csrc/jit/ir/named_value.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <limits>
#include <sstream>
#include <unordered_map>

namespace fx::export_detail {

namespace jit = torch::jit;
using c10::TypePtr;

void fail(const Node* node, const std::string& why) {
  throw ExportError("cannot export node '" + node->name() + "' (" + to_string(node->op()) + "[target=" +
                    node->target() + "]): " + why);
}

namespace {

/// The first line of an exception text (TorchScript errors span many lines).
std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of(" \n");
  if (start == std::string::npos) return text;
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

bool is_tensor(const jit::Value* v) { return v->type()->isSubtypeOf(*c10::TensorType::get()); }

/// "aten::add.Tensor" → {"aten::add", "Tensor"}; "aten::size.default" → overload "";
/// "aten::format.default_3" (a vararg operator registered by import) → "".
struct OpName {
  std::string qualified;
  std::string overload;
  bool has_overload = false;
};

OpName parse_op_name(const std::string& target) {
  OpName out;
  size_t colons = target.find("::");
  size_t dot = target.find('.', colons == std::string::npos ? 0 : colons + 2);
  out.qualified = target.substr(0, dot);
  if (dot != std::string::npos) {
    out.has_overload = true;
    out.overload = target.substr(dot + 1);
    if (out.overload.rfind("default", 0) == 0) out.overload.clear();
  }
  return out;
}

/// The TorchScript schemas of `name` (restricted to `overload` when given).
std::vector<const c10::FunctionSchema*> schemas_of(const OpName& name) {
  std::vector<const c10::FunctionSchema*> out;
  if (name.qualified.find("::") == std::string::npos) return out;
  for (const auto& op : jit::getAllOperatorsFor(c10::Symbol::fromQualString(name.qualified))) {
    const c10::FunctionSchema& s = op->schema();
    if (!name.has_overload || s.overload_name() == name.overload) out.push_back(&s);
  }
  return out;
}

/// The list element type the first schema with a list argument at `pos` (or
/// keyword `kw`) expects: how an empty or constant list gets its type.
TypePtr list_hint(const std::vector<const c10::FunctionSchema*>& schemas, size_t pos, const std::string& kw) {
  for (const c10::FunctionSchema* s : schemas) {
    const auto& args = s->arguments();
    const c10::Argument* a = nullptr;
    if (kw.empty()) {
      if (pos < args.size() && !args[pos].kwarg_only()) a = &args[pos];
    } else {
      for (const auto& x : args)
        if (x.name() == kw) a = &x;
    }
    if (a == nullptr) continue;
    TypePtr t = a->type();
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    if (auto list = t->cast<c10::ListType>()) return list->getElementType();
  }
  return nullptr;
}

/// Inserts `sym` with the inputs and results matched against `schemas`; the
/// results of a multi-result operator are packed into a tuple (fx's value).
jit::Value* insert_matched(jit::Graph& g, c10::Symbol sym, const std::vector<const c10::FunctionSchema*>& schemas,
                           const std::vector<jit::NamedValue>& args, const std::vector<jit::NamedValue>& kwargs,
                           std::string& why) {
  std::pair<size_t, jit::MatchedSchema> matched;
  try {
    matched = jit::matchSchemas(schemas, jit::SourceRange(), g, args, kwargs, c10::nullopt, /*render_errors=*/true);
  } catch (const std::exception& e) {
    why = std::string("the arguments match no schema of ") + sym.toQualString() + ": " + first_line(e.what());
    return nullptr;
  }
  jit::Node* n = g.insertNode(g.create(sym, matched.second.inputs, 0));
  for (const TypePtr& t : matched.second.return_types) n->addOutput()->setType(t);
  if (n->maybeOperator() == nullptr) {
    why = std::string("TorchScript has no operator ") + sym.toQualString() + " for these argument types";
    n->destroy();
    return nullptr;
  }
  if (n->outputs().size() == 1) return n->output();
  if (n->outputs().empty()) return g.insertConstant(c10::IValue());
  return g.insertNode(g.createTuple(n->outputs()))->output();
}

}  // namespace

jit::Value* insert_op(jit::Graph& g, const std::string& name, const std::vector<jit::NamedValue>& args,
                      std::string& why) {
  OpName op = parse_op_name(name);
  auto schemas = schemas_of(op);
  if (schemas.empty()) {
    why = "TorchScript has no operator " + name;
    return nullptr;
  }
  return insert_matched(g, c10::Symbol::fromQualString(op.qualified), schemas, args, {}, why);
}

namespace {

/// Translates the nodes of one graph, in order.
class GraphBuilder {
 public:
  GraphBuilder(GraphModule& gm, const jit::Module& self_module)
      : gm_(gm), self_module_(&self_module), g_(std::make_shared<jit::Graph>()) {}

  /// A builder that inlines `gm`'s graph (a branch or loop body) into `g` at
  /// its insertion point: `self` is gm's TorchScript mirror, `inputs` stand
  /// for its placeholders in order.
  GraphBuilder(GraphModule& gm, std::shared_ptr<jit::Graph> g, jit::Value* self, std::vector<jit::Value*> inputs)
      : gm_(gm), g_(std::move(g)), self_(self), inline_inputs_(std::move(inputs)) {}

  /// Inlines the graph; its `count` results (its output argument: None, the
  /// value, or a tuple of `count` values), `what` names it in errors.
  std::vector<jit::Value*> build_inline(size_t count, const std::string& what) {
    Node* output = nullptr;
    for (Node* n : gm_.graph().nodes()) {
      if (n->op() == Opcode::Output) output = n;
      else emit(n);
    }
    if (output == nullptr) throw ExportError("the graph of " + gm_.class_name() + " has no output");
    const Argument& a = output->args().at(0);
    if (count > 1 && a.kind() == Argument::Kind::Tuple && a.items().size() == count) {
      std::vector<jit::Value*> out;  // the items themselves: constants stay constants
      for (const Argument& item : a.items()) out.push_back(value(output, item));
      return out;
    }
    return results(output, value(output, a), count, what);
  }

  std::shared_ptr<jit::Graph> build() {
    self_ = g_->addInput("self");
    self_->setType(self_module_->type());
    for (Node* n : gm_.graph().nodes()) emit(n);
    if (!has_output_) g_->registerOutput(g_->insertConstant(c10::IValue()));
    try {
      g_->lint();
    } catch (const std::exception& e) {
      throw ExportError("the exported TorchScript graph of " + gm_.class_name() +
                        " fails TorchScript's lint: " + first_line(e.what()));
    }
    return g_;
  }

 private:
  void emit(Node* n) {
    jit::Value* v = nullptr;
    switch (n->op()) {
      case Opcode::Placeholder: v = placeholder(n); break;
      case Opcode::GetAttr: v = attr_path(n, n->target()); break;
      case Opcode::CallFunction: v = call_function(n); break;
      case Opcode::CallMethod: v = call_method(n); break;
      case Opcode::CallModule: v = call_module(n); break;
      case Opcode::Output:
        g_->registerOutput(value(n, n->args().at(0)));
        has_output_ = true;
        return;
    }
    values_[n] = v;
  }

  // ---- values -------------------------------------------------------------

  jit::Value* placeholder(Node* n) {
    if (self_module_ == nullptr) {
      if (next_input_ >= inline_inputs_.size()) fail(n, "the graph of " + gm_.class_name() + " has more inputs than its call gives");
      return inline_inputs_[next_input_++];
    }
    if (!n->target().empty() && n->target()[0] == '*')
      fail(n, "variadic inputs (*args, **kwargs) have no TorchScript form");
    if (!n->args().empty()) fail(n, "inputs with default values are not exported");
    std::string annotation = n->type().empty() ? "Tensor" : n->type();
    if (annotation.rfind("torch.", 0) == 0) annotation = annotation.substr(6);
    TypePtr type;
    try {
      type = jit::ScriptTypeParser().parseType(annotation);
    } catch (const std::exception&) {
      fail(n, "the type annotation '" + n->type() + "' is not a TorchScript type");
    }
    jit::Value* v = g_->addInput();
    std::string name = n->name() == "self" ? "self_1" : n->name();
    v->setDebugName(name);  // fx names are Python identifiers
    v->setType(type);
    return v;
  }

  /// self.a.b.c as a chain of prim::GetAttr (shared prefixes read once).
  jit::Value* attr_path(Node* n, const std::string& qualified_name) {
    auto it = attrs_.find(qualified_name);
    if (it != attrs_.end()) return it->second;
    size_t dot = qualified_name.rfind('.');
    jit::Value* owner = dot == std::string::npos ? self_ : attr_path(n, qualified_name.substr(0, dot));
    std::string field = dot == std::string::npos ? qualified_name : qualified_name.substr(dot + 1);
    auto cls = owner->type()->cast<c10::ClassType>();
    if (!cls || !cls->hasAttribute(field))
      fail(n, "'" + qualified_name + "' is not an exported attribute (an undefined tensor or a non-tensor attribute)");
    jit::Value* v = g_->insertGetAttr(owner, field);
    attrs_[qualified_name] = v;
    return v;
  }

  /// A constant or a node's value, as a TorchScript value. `elem_hint` is the
  /// element type expected if `a` is a list.
  jit::Value* value(Node* n, const Argument& a, const TypePtr& elem_hint = nullptr) {
    using K = Argument::Kind;
    switch (a.kind()) {
      case K::None: return g_->insertConstant(c10::IValue());
      case K::Bool: return g_->insertConstant(a.to_bool());
      case K::Int: return g_->insertConstant(a.to_int());
      case K::Double: return g_->insertConstant(a.to_double());
      case K::String: return g_->insertConstant(a.to_string());
      case K::Node: {
        auto it = values_.find(a.to_node());
        if (it == values_.end()) fail(n, "uses '" + a.to_node()->name() + "' before it is defined");
        return it->second;
      }
      case K::ScalarType: return g_->insertConstant(static_cast<int64_t>(a.to_scalar_type()));
      case K::Device: return g_->insertConstant(a.to_device());
      case K::Layout: return g_->insertConstant(static_cast<int64_t>(a.to_layout()));
      case K::MemoryFormat: return g_->insertConstant(static_cast<int64_t>(a.to_memory_format()));
      case K::Constant:
        try {
          return g_->insertConstant(a.to_constant());
        } catch (const std::exception&) {
          fail(n, "the constant " + a.repr() + " has no TorchScript form");
        }
      case K::List:
      case K::Tuple: {
        std::vector<jit::Value*> items;
        for (const Argument& item : a.items()) items.push_back(value(n, item));
        if (a.kind() == K::Tuple) return g_->insertNode(g_->createTuple(items))->output();
        return g_->insertNode(g_->createList(list_element_type(n, items, elem_hint), items))->output();
      }
      case K::Dict: {
        std::vector<jit::Value*> keys, vals;
        for (const auto& kv : a.dict_items()) {
          keys.push_back(g_->insertConstant(kv.first));
          vals.push_back(value(n, kv.second));
        }
        return g_->insertNode(g_->createDict(c10::StringType::get(), list_element_type(n, vals, nullptr), keys, vals))
            ->output();
      }
      case K::Slice:
      case K::Ellipsis: fail(n, "a slice or Ellipsis is exported only as an index of operator.getitem");
    }
    fail(n, "unknown argument kind");
  }

  TypePtr list_element_type(Node* n, const std::vector<jit::Value*>& items, const TypePtr& hint) {
    if (hint) {
      bool fits = true;
      for (jit::Value* v : items) fits = fits && v->type()->isSubtypeOf(*hint);
      if (fits) return hint;
    }
    if (items.empty()) return c10::IntType::get();
    std::vector<TypePtr> types;
    for (jit::Value* v : items) types.push_back(v->type());
    std::stringstream why;
    if (auto t = c10::unifyTypeList(types, why)) return *t;
    fail(n, "a list or dict whose items have no common TorchScript type");
  }

  // ---- calls ----------------------------------------------------------------

  /// Calls operator `name` on the node's arguments (`args`/`kwargs`, which may
  /// differ from the node's own: builtins reorder them).
  jit::Value* op(Node* n, const std::string& name, const ArgList& args, const Kwargs& kwargs) {
    OpName parsed = parse_op_name(name);
    auto schemas = schemas_of(parsed);
    if (schemas.empty()) {
      if (n->op() == Opcode::CallFunction && n->target() == name)
        fail(n, "'" + name + "' is not a TorchScript operator (functions registered with fx::register_function "
                "cannot be exported)");
      fail(n, "TorchScript has no operator " + name);
    }
    std::vector<jit::NamedValue> a, k;
    for (size_t i = 0; i < args.size(); ++i) a.emplace_back(value(n, args[i], list_hint(schemas, i, "")));
    for (const auto& kv : kwargs) k.emplace_back(kv.first, value(n, kv.second, list_hint(schemas, 0, kv.first)));
    std::string why;
    jit::Value* v = insert_matched(*g_, c10::Symbol::fromQualString(parsed.qualified), schemas, a, k, why);
    if (v == nullptr) fail(n, why);
    return v;
  }

  bool arg_is_tensor(Node* n, const Argument& a) {
    if (a.is_node()) return is_tensor(value(n, a));
    return a.kind() == Argument::Kind::Constant && a.to_constant().isTensor();
  }

  bool is_int(Node* n, const Argument& a) {
    if (a.kind() == Argument::Kind::Int) return true;
    return a.is_node() && value(n, a)->type()->isSubtypeOf(*c10::IntType::get());
  }

  jit::Value* op(Node* n, const std::string& name) { return op(n, name, n->args(), n->kwargs()); }

  jit::Value* call_function(Node* n) {
    const std::string& t = n->target();
    if (t.rfind("operator.", 0) == 0) return builtin(n, t.substr(9));
    if (t == "torch._assert") return assert_call(n);
    if (c10::TypePtr type = import_detail::construct_target_type(t)) return construct(n, type);
    if (t.find("::") == std::string::npos) fail(n, "'" + t + "' is not a TorchScript operator");
    return op(n, t);
  }

  /// Python's operator module on TorchScript values.
  jit::Value* builtin(Node* n, const std::string& name) {
    static const std::unordered_map<std::string, std::string> same = {
        {"add", "aten::add"},       {"sub", "aten::sub"},         {"mul", "aten::mul"},
        {"truediv", "aten::div"},   {"mod", "aten::remainder"},   {"pow", "aten::pow"},
        {"matmul", "aten::matmul"}, {"neg", "aten::neg"},         {"eq", "aten::eq"},
        {"ne", "aten::ne"},         {"lt", "aten::lt"},           {"le", "aten::le"},
        {"gt", "aten::gt"},         {"ge", "aten::ge"},           {"and_", "aten::__and__"},
        {"or_", "aten::__or__"},    {"xor", "aten::__xor__"},     {"not_", "aten::__not__"},
        {"lshift", "aten::__lshift__"}, {"rshift", "aten::__rshift__"}, {"contains", "aten::__contains__"},
        {"truth", "aten::Bool"}};
    if (!n->kwargs().empty()) fail(n, "operator." + name + " takes no keyword arguments");
    const ArgList& args = n->args();
    if (name == "getitem") {
      if (args.size() != 2) fail(n, "operator.getitem takes 2 arguments");
      return getitem(n, value(n, args[0]), args[1]);
    }
    bool tensor0 = !args.empty() && arg_is_tensor(n, args[0]);
    bool tensor1 = args.size() > 1 && arg_is_tensor(n, args[1]);
    if (tensor1 && !tensor0 && args.size() == 2) {  // number OP tensor: torch's reflected operators
      if (name == "add" || name == "mul") return op(n, "aten::" + name, {args[1], args[0]}, {});
      if (name == "sub") return op(n, "aten::rsub", {args[1], args[0]}, {});
      if (name == "truediv")  // torch's Tensor.__rtruediv__
        return op_on(n, "aten::mul", {op(n, "aten::reciprocal", {args[1]}, {}), value(n, args[0])});
    }
    if (name == "iadd" || name == "isub" || name == "imul" || name == "itruediv") {
      std::string base = name.substr(1) == "truediv" ? "div" : name.substr(1);
      return op(n, "aten::" + base + (tensor0 ? "_" : ""), args, {});
    }
    if (name == "pow" && args.size() == 2 && is_int(n, args[0]) && is_int(n, args[1])) {
      // Python: int ** int is an int for exponents >= 0, a float otherwise;
      // TorchScript types the result statically, and its saved code has no
      // int ** int -> int (aten::pow.int_to_int prints as torch.pow, which
      // loads back as the float overload): round the float result, exact
      // below 2**53.
      if (args[1].kind() != Argument::Kind::Int)
        fail(n, "int ** int with a run-time exponent has no TorchScript form (its result type depends on the sign)");
      jit::Value* p = op(n, "aten::pow.int", args, {});
      return args[1].to_int() >= 0 ? op_on(n, "aten::Int", {op_on(n, "aten::round", {p})}) : p;
    }
    if (name == "floordiv") return op(n, tensor0 ? "aten::floor_divide" : "aten::floordiv", args, {});
    if (name == "abs") return op(n, tensor0 ? "aten::abs" : "prim::abs", args, {});
    if (name == "invert") return op(n, tensor0 ? "aten::bitwise_not" : "aten::__invert__", args, {});
    if (name == "pos") {
      if (args.size() != 1) fail(n, "operator.pos takes 1 argument");
      return tensor0 ? op(n, "aten::positive", args, {}) : value(n, args[0]);
    }
    auto it = same.find(name);
    if (it == same.end()) fail(n, "operator." + name + " has no TorchScript form");
    return op(n, it->second, args, {});
  }

  /// obj[index]: tuples by constant position, lists / dicts / strings through
  /// aten::__getitem__ or aten::slice, tensors as TorchScript indexes them.
  jit::Value* getitem(Node* n, jit::Value* obj, const Argument& index) {
    if (auto tuple = obj->type()->cast<c10::TupleType>()) {
      if (index.kind() != Argument::Kind::Int) fail(n, "a tuple is indexed only by a constant int in TorchScript");
      int64_t size = static_cast<int64_t>(tuple->elements().size());
      int64_t i = index.to_int() < 0 ? index.to_int() + size : index.to_int();
      if (i < 0 || i >= size) fail(n, "tuple index " + std::to_string(index.to_int()) + " out of range");
      return g_->insertNode(g_->createTupleIndex(obj, g_->insertConstant(i), tuple->elements()[i]))->output();
    }
    if (is_tensor(obj)) return tensor_index(n, obj, index);
    if (index.is_slice()) {
      const auto& p = index.slice_parts();
      return op_on(n, "aten::slice", {obj, value(n, p[0]), value(n, p[1]), step_value(n, p[2])});
    }
    return op_on(n, "aten::__getitem__", {obj, value(n, index)});
  }

  jit::Value* step_value(Node* n, const Argument& step) {
    return step.is_none() ? g_->insertConstant(int64_t{1}) : value(n, step);
  }

  /// An operator on values already translated.
  jit::Value* op_on(Node* n, const std::string& name, const std::vector<jit::NamedValue>& args) {
    std::string why;
    jit::Value* v = insert_op(*g_, name, args, why);
    if (v == nullptr) fail(n, why);
    return v;
  }

  /// t[index] with ints, slices, None, one Ellipsis and tensors, as
  /// TorchScript's frontend (and libtorch's Python-style Tensor::index)
  /// lowers it: select / slice / unsqueeze, dims counted from the end after
  /// the Ellipsis, then one aten::index for the tensor indices.
  jit::Value* tensor_index(Node* n, jit::Value* t, const Argument& index) {
    std::vector<Argument> items;
    if (index.kind() == Argument::Kind::Tuple || index.kind() == Argument::Kind::List)
      items = index.items();
    else
      items.push_back(index);
    size_t ellipsis = items.size();
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].kind() != Argument::Kind::Ellipsis) continue;
      if (ellipsis != items.size()) fail(n, "an index can only have a single ellipsis");
      ellipsis = i;
    }
    auto consumes = [](const Argument& a) {
      return a.kind() != Argument::Kind::None && a.kind() != Argument::Kind::Ellipsis;
    };
    int64_t after = 0;
    for (size_t i = ellipsis + 1; i < items.size(); ++i) after += consumes(items[i]) ? 1 : 0;
    int64_t dim = 0;
    std::vector<std::pair<int64_t, jit::Value*>> tensors;  // (dim, index tensor)
    for (size_t i = 0; i < items.size(); ++i) {
      const Argument& a = items[i];
      const bool after_ellipsis = ellipsis != items.size() && i > ellipsis;
      if (i == ellipsis) {
        dim = -after;
        continue;
      }
      jit::Value* v = a.is_node() ? value(n, a) : nullptr;
      if (a.is_none()) {
        if (after_ellipsis) fail(n, "None after an Ellipsis in an index is not exported");
        t = op_on(n, "aten::unsqueeze", {t, g_->insertConstant(dim)});
        ++dim;
      } else if (a.is_slice()) {
        const auto& p = a.slice_parts();
        bool full = p[0].is_none() && p[1].is_none() && p[2].is_none();
        if (!full)
          t = op_on(n, "aten::slice",
                    {t, g_->insertConstant(dim), value(n, p[0]), value(n, p[1]), step_value(n, p[2])});
        ++dim;
      } else if (a.kind() == Argument::Kind::Int || (v && v->type()->isSubtypeOf(*c10::IntType::get()))) {
        t = op_on(n, "aten::select", {t, g_->insertConstant(dim), value(n, a)});
        if (dim < 0) ++dim;  // counted from the end, the next dim moved up
      } else if (v && is_tensor(v) && !after_ellipsis) {
        tensors.emplace_back(dim++, v);
      } else {
        fail(n, "tensor index " + a.repr() +
                    " is not exported (ints, slices, None, Ellipsis and tensors before any Ellipsis are)");
      }
    }
    if (tensors.empty()) return t;
    std::vector<jit::Value*> indices(static_cast<size_t>(tensors.back().first + 1), nullptr);
    for (auto& [d, v] : tensors) indices[static_cast<size_t>(d)] = v;
    for (jit::Value*& v : indices)
      if (v == nullptr) v = g_->insertConstant(c10::IValue());
    jit::Value* list = g_->insertNode(g_->createList(c10::OptionalType::ofTensor(), indices))->output();
    return op_on(n, "aten::index", {t, list});
  }

  /// torch._assert(condition, message): `if not condition: raise AssertionError(message)`.
  jit::Value* assert_call(Node* n) {
    const Argument* cond = n->args().size() > 0 ? &n->args()[0] : find_kwarg(n->kwargs(), "condition");
    const Argument* msg = n->args().size() > 1 ? &n->args()[1] : find_kwarg(n->kwargs(), "message");
    if (cond == nullptr) fail(n, "torch._assert needs a condition");
    jit::Value* c = value(n, *cond);
    if (!c->type()->isSubtypeOf(*c10::BoolType::get())) c = op_on(n, "aten::Bool", {c});
    jit::Value* m = msg ? value(n, *msg) : g_->insertConstant(std::string("assertion failed"));
    jit::Node* if_node = g_->insertNode(g_->create(c10::prim::If, {c}, 0));
    if_node->addBlock();
    jit::Block* raise = if_node->addBlock();
    {
      jit::WithInsertPoint guard(raise);
      op_on(n, "prim::RaiseException", {m, g_->insertConstant(std::string("builtins.AssertionError"))});
    }
    return g_->insertConstant(c10::IValue());
  }

  jit::Value* call_method(Node* n) {
    static const std::unordered_map<std::string, c10::ScalarType> casts = {
        {"float", at::kFloat}, {"double", at::kDouble}, {"half", at::kHalf},   {"bfloat16", at::kBFloat16},
        {"int", at::kInt},     {"long", at::kLong},     {"short", at::kShort}, {"bool", at::kBool},
        {"byte", at::kByte},   {"char", at::kChar}};
    if (n->args().empty()) fail(n, "a method call needs self as its first argument");
    auto cast = casts.find(n->target());
    if (cast != casts.end()) {
      if (n->args().size() != 1) fail(n, "Tensor." + n->target() + "() takes no positional arguments");
      return op(n, "aten::to", {n->args()[0], cast->second}, n->kwargs());
    }
    return op(n, "aten::" + n->target());
  }

  /// A run-time list (items) or dict (key, value, key, value ...) of the
  /// constructor target's type.
  jit::Value* construct(Node* n, const TypePtr& type) {
    if (!n->kwargs().empty()) fail(n, "a list or dict constructor takes no keyword arguments");
    std::vector<jit::Value*> items;
    for (const Argument& a : n->args()) items.push_back(value(n, a));
    if (auto list = type->cast<c10::ListType>())
      return g_->insertNode(g_->createList(list->getElementType(), items))->output();
    auto dict = type->expect<c10::DictType>();
    if (items.size() % 2 != 0) fail(n, "a dict constructor takes keys and values in pairs");
    std::vector<jit::Value*> keys, vals;
    for (size_t i = 0; i < items.size(); i += 2) {
      keys.push_back(items[i]);
      vals.push_back(items[i + 1]);
    }
    return g_->insertNode(g_->createDict(dict->getKeyType(), dict->getValueType(), keys, vals))->output();
  }

  /// A predicate as TorchScript's bool (CondModule reads bools, ints and one-element tensors).
  jit::Value* as_bool(Node* n, jit::Value* v) {
    if (v->type()->isSubtypeOf(*c10::BoolType::get())) return v;
    return op_on(n, "aten::Bool", {v});
  }

  /// The `count` values a branch or body graph gave as `v` (None, the value, or a tuple).
  std::vector<jit::Value*> results(Node* n, jit::Value* v, size_t count, const std::string& what) {
    if (count == 1) return {v};
    if (count == 0) return {};
    auto tuple = v->type()->cast<c10::TupleType>();
    if (!tuple || tuple->elements().size() != count)
      fail(n, what + " returns " + v->type()->repr_str() + ", not a tuple of " + std::to_string(count) + " values");
    auto outputs = g_->insertNode(g_->createTupleUnpack(v))->outputs();
    return std::vector<jit::Value*>(outputs.begin(), outputs.end());
  }

  /// The value of a control-flow call from its `count` results.
  jit::Value* pack(const std::vector<jit::Value*>& values) {
    if (values.empty()) return g_->insertConstant(c10::IValue());
    if (values.size() == 1) return values[0];
    return g_->insertNode(g_->createTuple(values))->output();
  }

  /// Inlines `sub` (at `path` below this graph's module) on `inputs` into `block`; its `count` results.
  std::vector<jit::Value*> inline_graph(Node* n, GraphModule& sub, const std::string& path, jit::Block* block,
                                        std::vector<jit::Value*> inputs, size_t count) {
    jit::Value* self = attr_path(n, path);  // before the block: read once, visible inside
    jit::WithInsertPoint guard(block);
    return GraphBuilder(sub, g_, self, std::move(inputs)).build_inline(count, path);
  }

  /// CondModule: prim::If with both branch graphs inlined as its blocks.
  jit::Value* cond(Node* n, CondModule& c) {
    if (n->args().empty() || !n->kwargs().empty()) fail(n, "a cond is called with (pred, *operands)");
    jit::Value* pred = as_bool(n, value(n, n->args()[0]));
    std::vector<jit::Value*> operands;
    for (size_t i = 1; i < n->args().size(); ++i) operands.push_back(value(n, n->args()[i]));
    jit::Node* if_node = g_->create(c10::prim::If, {pred}, 0);
    jit::Block* then_block = if_node->addBlock();
    jit::Block* else_block = if_node->addBlock();
    auto t = inline_graph(n, c.true_graph(), n->target() + ".true_graph", then_block, operands, c.num_results());
    auto f = inline_graph(n, c.false_graph(), n->target() + ".false_graph", else_block, operands, c.num_results());
    g_->insertNode(if_node);
    std::vector<jit::Value*> outs;
    for (size_t i = 0; i < t.size(); ++i) {
      then_block->registerOutput(t[i]);
      else_block->registerOutput(f[i]);
      c10::optional<TypePtr> type = c10::unifyTypes(t[i]->type(), f[i]->type());
      if (!type)
        fail(n, "result " + std::to_string(i) + " is " + t[i]->type()->repr_str() + " in the true branch but " +
                    f[i]->type()->repr_str() + " in the false branch");
      outs.push_back(if_node->addOutput()->setType(*type));
    }
    return pack(outs);
  }

  /// Whether TorchScript can print a prim::Loop of this call as Python: a
  /// `for` (the condition constant true before and after every iteration)
  /// or a `while` (no trip count: the maximum, and the iteration unused).
  static bool printable_as_is(Node* n, WhileLoopModule& l) {
    const Argument& trip = n->args()[0];
    const Argument& condition = n->args()[1];
    const Argument& next = l.body().graph().output_node()->args().at(0);
    const Argument& next_condition = l.num_carried() == 0 || next.kind() != Argument::Kind::Tuple ? next : next.items().at(0);
    auto is_true = [](const Argument& a) { return a.kind() == Argument::Kind::Bool && a.to_bool(); };
    if (is_true(condition) && is_true(next_condition)) return true;
    Node* iteration = l.body().graph().find_nodes(Opcode::Placeholder).at(0);
    return trip.kind() == Argument::Kind::Int && trip.to_int() == std::numeric_limits<int64_t>::max() &&
           iteration->users().empty();
  }

  /// WhileLoopModule: prim::Loop whose block is the body graph inlined. A
  /// loop with both a trip count and a run-time condition (a `for` left by
  /// `break`), which TorchScript cannot print, is a `while` counting its
  /// iterations itself: while cond and k < trip_count: ...; k += 1.
  jit::Value* loop(Node* n, WhileLoopModule& l) {
    const size_t k = l.num_carried();
    if (n->args().size() < 2 + k || !n->kwargs().empty())
      fail(n, "a loop is called with (trip_count, condition, *carried, *operands)");
    if (l.body().graph().find_nodes(Opcode::Placeholder).empty()) fail(n, "the loop body takes no iteration input");
    const bool counted = !printable_as_is(n, l);
    jit::Value* trip = value(n, n->args()[0]);
    if (!trip->type()->isSubtypeOf(*c10::IntType::get())) fail(n, "the trip count is not an int");
    jit::Value* condition = as_bool(n, value(n, n->args()[1]));
    jit::Value* zero = counted ? g_->insertConstant(int64_t(0)) : nullptr;
    std::vector<jit::Value*> inputs{trip, condition};
    if (counted) {
      inputs[0] = g_->insertConstant(std::numeric_limits<int64_t>::max());
      inputs[1] = op_on(n, "aten::__and__", {condition, op_on(n, "aten::lt", {zero, trip})});
      inputs.push_back(zero);
    }
    const size_t first_carried = inputs.size();
    for (size_t i = 0; i < k; ++i) inputs.push_back(value(n, n->args()[2 + i]));
    jit::Node* loop_node = g_->create(c10::prim::Loop, inputs, 0);
    jit::Block* body = loop_node->addBlock();
    std::vector<jit::Value*> block_inputs;
    for (size_t i = 0; i < inputs.size() - 1; ++i)
      block_inputs.push_back(body->addInput()->setType(i == 0 ? c10::IntType::get() : inputs[i + 1]->type()));
    // The body's inputs: (iteration, *carried, *operands).
    std::vector<jit::Value*> body_inputs{counted ? block_inputs[1] : block_inputs[0]};
    body_inputs.insert(body_inputs.end(), block_inputs.end() - static_cast<std::ptrdiff_t>(k), block_inputs.end());
    for (size_t i = 2 + k; i < n->args().size(); ++i) body_inputs.push_back(value(n, n->args()[i]));
    auto out = inline_graph(n, l.body(), n->target() + ".body", body, body_inputs, 1 + k);
    {
      jit::WithInsertPoint guard(body);
      jit::Value* next = as_bool(n, out[0]);
      if (counted) {
        jit::Value* next_k = op_on(n, "aten::add", {block_inputs[1], g_->insertConstant(int64_t(1))});
        body->registerOutput(op_on(n, "aten::__and__", {next, op_on(n, "aten::lt", {next_k, trip})}));
        body->registerOutput(next_k);
      } else {
        body->registerOutput(next);
      }
    }
    g_->insertNode(loop_node);
    if (counted) loop_node->addOutput()->setType(c10::IntType::get());
    std::vector<jit::Value*> outs;
    for (size_t i = 0; i < k; ++i) {
      const TypePtr& type = inputs[first_carried + i]->type();
      if (!out[1 + i]->type()->isSubtypeOf(*type))
        fail(n, "carried value " + std::to_string(i) + " enters the loop as " + type->repr_str() +
                    " but the body gives " + out[1 + i]->type()->repr_str());
      body->registerOutput(out[1 + i]);
      outs.push_back(loop_node->addOutput()->setType(type));
    }
    return pack(outs);
  }

  jit::Value* call_module(Node* n) {
    std::shared_ptr<torch::nn::Module> module;
    try {
      module = gm_.get_submodule(n->target());
    } catch (const std::exception& e) {
      fail(n, first_line(e.what()));
    }
    if (auto* c = dynamic_cast<CondModule*>(module.get())) return cond(n, *c);
    if (auto* l = dynamic_cast<WhileLoopModule*>(module.get())) return loop(n, *l);
    jit::Value* obj = attr_path(n, n->target());
    auto cls = obj->type()->cast<c10::ClassType>();
    if (!cls) fail(n, "'" + n->target() + "' is not a module");
    if (torch::jit::Function* forward = cls->findMethod("forward")) {
      std::vector<jit::NamedValue> args, kwargs;
      for (const Argument& a : n->args()) args.emplace_back(value(n, a));
      for (const auto& kv : n->kwargs()) kwargs.emplace_back(kv.first, value(n, kv.second));
      try {
        jit::MatchedSchema m =
            jit::matchSchema(forward->getSchema(), jit::SourceRange(), *g_, args, kwargs, jit::NamedValue(obj));
        return g_->insertMethodCall("forward", m);
      } catch (const std::exception& e) {
        fail(n, "the arguments do not fit " + cls->repr_str() + ".forward: " + first_line(e.what()));
      }
    }
    if (!n->kwargs().empty()) fail(n, "keyword arguments to a torch::nn leaf are not exported");
    std::vector<jit::Value*> inputs;
    for (const Argument& a : n->args()) inputs.push_back(value(n, a));
    std::string why;
    jit::Value* v = emit_nn_leaf(*module, *g_, obj, inputs, why);
    if (v == nullptr) fail(n, why);
    return v;
  }

  GraphModule& gm_;
  const jit::Module* self_module_ = nullptr;  ///< null when inlining
  std::shared_ptr<jit::Graph> g_;
  jit::Value* self_ = nullptr;
  bool has_output_ = false;
  std::vector<jit::Value*> inline_inputs_;
  size_t next_input_ = 0;
  std::unordered_map<const Node*, jit::Value*> values_;
  std::unordered_map<std::string, jit::Value*> attrs_;
};

}  // namespace

std::shared_ptr<jit::Graph> build_forward_graph(GraphModule& gm, const jit::Module& self_module) {
  return GraphBuilder(gm, self_module).build();
}

}  // namespace fx::export_detail
