// Argument: the values inside args and kwargs and their traversal (printing
// them: argument_printing.cpp).
#include <fx/argument.h>
#include <fx/error.h>
#include <fx/node.h>

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

namespace fx {

struct Argument::Payload {
  std::string str;
  c10::IValue constant;
  std::vector<Argument> items;  // List, Tuple
  Kwargs dict;                  // Dict
};

namespace {

const char* kind_name(Argument::Kind k) {
  switch (k) {
    case Argument::Kind::None: return "None";
    case Argument::Kind::Bool: return "bool";
    case Argument::Kind::Int: return "int";
    case Argument::Kind::Double: return "float";
    case Argument::Kind::String: return "str";
    case Argument::Kind::Node: return "Node";
    case Argument::Kind::ScalarType: return "dtype";
    case Argument::Kind::Device: return "device";
    case Argument::Kind::Layout: return "layout";
    case Argument::Kind::MemoryFormat: return "memory_format";
    case Argument::Kind::Constant: return "constant";
    case Argument::Kind::List: return "list";
    case Argument::Kind::Tuple: return "tuple";
    case Argument::Kind::Dict: return "dict";
    case Argument::Kind::Slice: return "slice";
    case Argument::Kind::Ellipsis: return "ellipsis";
  }
  return "?";
}

[[noreturn]] void wrong_kind(Argument::Kind have, const char* want) {
  throw Error(std::string("Argument holds a ") + kind_name(have) + ", not a " + want);
}

const c10::TupleTypePtr& slice_type() {
  static const c10::TupleTypePtr t = c10::TupleType::createNamed(
      c10::QualifiedName("fx.slice"), std::vector<std::string>{"start", "stop", "step"},
      // Named tuples may not hold Any; the parts are checked when the slice is used.
      std::vector<c10::TypePtr>{c10::OptionalType::create(c10::IntType::get()),
                                c10::OptionalType::create(c10::IntType::get()),
                                c10::OptionalType::create(c10::IntType::get())});
  return t;
}

const c10::TupleTypePtr& ellipsis_type() {
  static const c10::TupleTypePtr t = c10::TupleType::createNamed(
      c10::QualifiedName("fx.ellipsis"), std::vector<std::string>{}, std::vector<c10::TypePtr>{});
  return t;
}

bool is_named_tuple(const c10::IValue& v, size_t size, const c10::TupleTypePtr& type) {
  if (!v.isTuple()) return false;
  const auto& t = v.toTupleRef();
  if (t.size() != size) return false;
  // An unnamed tuple's type() is computed from its elements, which fails on
  // an undefined tensor (aten::convolution_backward's masked-out results);
  // a slice or an ellipsis never holds one.
  for (const c10::IValue& e : t.elements())
    if (e.isTensor() && !e.toTensor().defined()) return false;
  return t.type().get() == type.get();
}

}  // namespace

c10::IValue make_slice_ivalue(c10::IValue start, c10::IValue stop, c10::IValue step) {
  return c10::ivalue::Tuple::createNamed({std::move(start), std::move(stop), std::move(step)}, slice_type());
}

bool is_slice_ivalue(const c10::IValue& v) { return is_named_tuple(v, 3, slice_type()); }

c10::IValue ellipsis_ivalue() {
  static const c10::IValue e = c10::ivalue::Tuple::createNamed(std::vector<c10::IValue>{}, ellipsis_type());
  return e;
}

bool is_ellipsis_ivalue(const c10::IValue& v) { return is_named_tuple(v, 0, ellipsis_type()); }

Argument::Argument(const char* v) : Argument(std::string(v)) {}

Argument::Argument(std::string v) : kind_(Kind::String) {
  auto p = std::make_shared<Payload>();
  p->str = std::move(v);
  payload_ = std::move(p);
}

Argument Argument::from_ivalue(const c10::IValue& v) {
  if (v.isNone()) return Argument();
  if (v.isBool()) return Argument(v.toBool());
  if (v.isInt()) return Argument(v.toInt());
  if (v.isDouble()) return Argument(v.toDouble());
  if (v.isString()) return Argument(v.toStringRef());
  if (v.isDevice()) return Argument(v.toDevice());
  if (is_slice_ivalue(v)) {
    const auto& e = v.toTupleRef().elements();
    return slice(from_ivalue(e[0]), from_ivalue(e[1]), from_ivalue(e[2]));
  }
  if (is_ellipsis_ivalue(v)) return ellipsis();
  if (v.isTuple()) {
    std::vector<Argument> items;
    for (const auto& e : v.toTupleRef().elements()) items.push_back(from_ivalue(e));
    return tuple(std::move(items));
  }
  if (v.isIntList() || v.isDoubleList() || v.isBoolList()) {
    std::vector<Argument> items;
    for (const auto& e : v.toListRef()) items.push_back(from_ivalue(e));
    return list(std::move(items));
  }
  Argument a;
  a.kind_ = Kind::Constant;
  auto p = std::make_shared<Payload>();
  p->constant = v;
  a.payload_ = std::move(p);
  return a;
}

Argument Argument::list(std::vector<Argument> items) {
  Argument a;
  a.kind_ = Kind::List;
  auto p = std::make_shared<Payload>();
  p->items = std::move(items);
  a.payload_ = std::move(p);
  return a;
}

Argument Argument::tuple(std::vector<Argument> items) {
  Argument a = list(std::move(items));
  a.kind_ = Kind::Tuple;
  return a;
}

Argument Argument::dict(Kwargs items) {
  Argument a;
  a.kind_ = Kind::Dict;
  auto p = std::make_shared<Payload>();
  p->dict = std::move(items);
  a.payload_ = std::move(p);
  return a;
}

Argument Argument::slice(Argument start, Argument stop, Argument step) {
  Argument a = list({std::move(start), std::move(stop), std::move(step)});
  a.kind_ = Kind::Slice;
  return a;
}

Argument Argument::ellipsis() {
  Argument a;
  a.kind_ = Kind::Ellipsis;
  return a;
}

bool Argument::to_bool() const {
  if (kind_ != Kind::Bool) wrong_kind(kind_, "bool");
  return s_.b;
}
int64_t Argument::to_int() const {
  if (kind_ != Kind::Int) wrong_kind(kind_, "int");
  return s_.i;
}
std::optional<std::vector<int64_t>> Argument::to_int_list(size_t expand_to) const {
  std::vector<int64_t> out;
  if (kind_ == Kind::Int) {
    out.push_back(s_.i);
  } else if (is_sequence()) {
    out.reserve(payload_->items.size());
    for (const Argument& a : payload_->items) {
      if (a.kind_ != Kind::Int) return std::nullopt;
      out.push_back(a.s_.i);
    }
  } else {
    return std::nullopt;
  }
  if (expand_to > 0 && out.size() == 1) out.assign(expand_to, out[0]);
  return out;
}
double Argument::to_double() const {
  if (kind_ == Kind::Int) return static_cast<double>(s_.i);
  if (kind_ != Kind::Double) wrong_kind(kind_, "float");
  return s_.d;
}
const std::string& Argument::to_string() const {
  if (kind_ != Kind::String) wrong_kind(kind_, "str");
  return payload_->str;
}
Node* Argument::to_node() const {
  if (kind_ != Kind::Node) wrong_kind(kind_, "Node");
  return s_.node;
}
c10::ScalarType Argument::to_scalar_type() const {
  if (kind_ != Kind::ScalarType) wrong_kind(kind_, "dtype");
  return s_.dtype;
}
c10::Device Argument::to_device() const {
  if (kind_ != Kind::Device) wrong_kind(kind_, "device");
  return device_;
}
c10::Layout Argument::to_layout() const {
  if (kind_ != Kind::Layout) wrong_kind(kind_, "layout");
  return s_.layout;
}
c10::MemoryFormat Argument::to_memory_format() const {
  if (kind_ != Kind::MemoryFormat) wrong_kind(kind_, "memory_format");
  return s_.memory_format;
}
const c10::IValue& Argument::to_constant() const {
  if (kind_ != Kind::Constant) wrong_kind(kind_, "constant");
  return payload_->constant;
}
const std::vector<Argument>& Argument::items() const {
  if (!is_sequence()) wrong_kind(kind_, "list or tuple");
  return payload_->items;
}
const std::vector<Argument>& Argument::slice_parts() const {
  if (kind_ != Kind::Slice) wrong_kind(kind_, "slice");
  return payload_->items;
}
const Kwargs& Argument::dict_items() const {
  if (kind_ != Kind::Dict) wrong_kind(kind_, "dict");
  return payload_->dict;
}

c10::IValue Argument::to_ivalue(const std::function<c10::IValue(Node*)>& lookup) const {
  switch (kind_) {
    case Kind::None: return c10::IValue();
    case Kind::Bool: return c10::IValue(s_.b);
    case Kind::Int: return c10::IValue(s_.i);
    case Kind::Double: return c10::IValue(s_.d);
    case Kind::String: return c10::IValue(payload_->str);
    case Kind::Node: return lookup(s_.node);
    case Kind::ScalarType: return c10::IValue(s_.dtype);
    case Kind::Device: return c10::IValue(device_);
    case Kind::Layout: return c10::IValue(s_.layout);
    case Kind::MemoryFormat: return c10::IValue(s_.memory_format);
    case Kind::Constant: return payload_->constant;
    case Kind::Tuple: {
      std::vector<c10::IValue> elems;
      elems.reserve(payload_->items.size());
      for (const auto& a : payload_->items) elems.push_back(a.to_ivalue(lookup));
      return c10::ivalue::Tuple::create(std::move(elems));
    }
    case Kind::List: {
      std::vector<c10::IValue> elems;
      elems.reserve(payload_->items.size());
      for (const auto& a : payload_->items) elems.push_back(a.to_ivalue(lookup));
      // The dispatcher wants typed lists: int[], float[], bool[], Tensor[], Tensor?[].
      auto all = [&](auto pred) { return std::all_of(elems.begin(), elems.end(), pred); };
      if (!elems.empty()) {
        if (all([](const c10::IValue& v) { return v.isInt(); })) {
          c10::List<int64_t> l;
          for (auto& v : elems) l.push_back(v.toInt());
          return l;
        }
        if (all([](const c10::IValue& v) { return v.isDouble(); })) {
          c10::List<double> l;
          for (auto& v : elems) l.push_back(v.toDouble());
          return l;
        }
        if (all([](const c10::IValue& v) { return v.isBool(); })) {
          c10::List<bool> l;
          for (auto& v : elems) l.push_back(v.toBool());
          return l;
        }
        if (all([](const c10::IValue& v) { return v.isTensor(); })) {
          c10::List<at::Tensor> l;
          for (auto& v : elems) l.push_back(v.toTensor());
          return l;
        }
        if (all([](const c10::IValue& v) { return v.isTensor() || v.isNone(); })) {
          c10::List<c10::optional<at::Tensor>> l;
          for (auto& v : elems) l.push_back(v.isNone() ? c10::optional<at::Tensor>() : v.toTensor());
          return l;
        }
      }
      c10::impl::GenericList l(c10::AnyType::get());
      for (auto& v : elems) l.push_back(std::move(v));
      return l;
    }
    case Kind::Dict: {
      c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
      for (const auto& kv : payload_->dict) d.insert(kv.first, kv.second.to_ivalue(lookup));
      return d;
    }
    case Kind::Slice: {
      const auto& p = payload_->items;
      return make_slice_ivalue(p[0].to_ivalue(lookup), p[1].to_ivalue(lookup), p[2].to_ivalue(lookup));
    }
    case Kind::Ellipsis: return ellipsis_ivalue();
  }
  return c10::IValue();
}

c10::IValue Argument::to_ivalue() const {
  return to_ivalue([](Node* n) -> c10::IValue {
    throw Error("Argument::to_ivalue: argument refers to node " + n->name() + " and no value was given for it");
  });
}

bool Argument::operator==(const Argument& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::None: return true;
    case Kind::Bool: return s_.b == o.s_.b;
    case Kind::Int: return s_.i == o.s_.i;
    case Kind::Double: return s_.d == o.s_.d;
    case Kind::String: return payload_->str == o.payload_->str;
    case Kind::Node: return s_.node == o.s_.node;
    case Kind::ScalarType: return s_.dtype == o.s_.dtype;
    case Kind::Device: return device_ == o.device_;
    case Kind::Layout: return s_.layout == o.s_.layout;
    case Kind::MemoryFormat: return s_.memory_format == o.s_.memory_format;
    case Kind::Constant: return payload_->constant.isSameIdentity(o.payload_->constant);
    case Kind::List:
    case Kind::Tuple: return payload_->items == o.payload_->items;
    case Kind::Dict: return payload_->dict == o.payload_->dict;
    case Kind::Slice: return payload_->items == o.payload_->items;
    case Kind::Ellipsis: return true;
  }
  return false;
}

Argument map_aggregate(const Argument& arg, const std::function<Argument(const Argument&)>& fn) {
  switch (arg.kind()) {
    case Argument::Kind::List:
    case Argument::Kind::Tuple: {
      std::vector<Argument> items;
      items.reserve(arg.items().size());
      for (const auto& a : arg.items()) items.push_back(map_aggregate(a, fn));
      return arg.kind() == Argument::Kind::List ? Argument::list(std::move(items))
                                                : Argument::tuple(std::move(items));
    }
    case Argument::Kind::Dict: {
      Kwargs items;
      items.reserve(arg.dict_items().size());
      for (const auto& kv : arg.dict_items()) items.emplace_back(kv.first, map_aggregate(kv.second, fn));
      return Argument::dict(std::move(items));
    }
    case Argument::Kind::Slice: {
      const auto& p = arg.slice_parts();
      return Argument::slice(map_aggregate(p[0], fn), map_aggregate(p[1], fn), map_aggregate(p[2], fn));
    }
    default: return fn(arg);
  }
}

Argument map_arg(const Argument& arg, const std::function<Argument(Node*)>& fn) {
  switch (arg.kind()) {
    case Argument::Kind::Node: return fn(arg.to_node());
    case Argument::Kind::List:
    case Argument::Kind::Tuple:
    case Argument::Kind::Dict:
    case Argument::Kind::Slice: {
      // Aggregates without nodes are shared, not rebuilt.
      bool has_node = false;
      for_each_node(arg, [&](Node*) { has_node = true; });
      if (!has_node) return arg;
      return map_aggregate(arg, [&](const Argument& a) { return a.is_node() ? fn(a.to_node()) : a; });
    }
    default: return arg;
  }
}

ArgList map_arg(const ArgList& args, const std::function<Argument(Node*)>& fn) {
  ArgList out;
  out.reserve(args.size());
  for (const auto& a : args) out.push_back(map_arg(a, fn));
  return out;
}

Kwargs map_arg(const Kwargs& kwargs, const std::function<Argument(Node*)>& fn) {
  Kwargs out;
  out.reserve(kwargs.size());
  for (const auto& kv : kwargs) out.emplace_back(kv.first, map_arg(kv.second, fn));
  return out;
}

const Argument* find_kwarg(const Kwargs& kwargs, const std::string& key) {
  for (const auto& kv : kwargs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

}  // namespace fx
