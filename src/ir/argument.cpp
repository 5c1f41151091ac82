// Argument: the values inside args and kwargs, their traversal and printing.
#include <fx/argument.h>
#include <fx/error.h>
#include <fx/node.h>

#include <ATen/core/function.h>
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <sstream>

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

std::string python_str_repr(const std::string& s) {
  // Python prefers single quotes unless the string contains one and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c == q) out += '\\';
        out += c;
    }
  }
  out += q;
  return out;
}

std::string layout_repr(c10::Layout l) {
  switch (l) {
    case c10::kStrided: return "torch.strided";
    case c10::kSparse: return "torch.sparse_coo";
    case c10::kMkldnn: return "torch._mkldnn";
    default: {
      std::ostringstream os;
      os << "torch." << l;
      return os.str();
    }
  }
}

std::string memory_format_repr(c10::MemoryFormat m) {
  switch (m) {
    case c10::MemoryFormat::Contiguous: return "torch.contiguous_format";
    case c10::MemoryFormat::Preserve: return "torch.preserve_format";
    case c10::MemoryFormat::ChannelsLast: return "torch.channels_last";
    case c10::MemoryFormat::ChannelsLast3d: return "torch.channels_last_3d";
    default: return "torch.contiguous_format";
  }
}

std::string device_str(c10::Device d) { return d.str(); }

std::string constant_str(const c10::IValue& v) {
  std::ostringstream os;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    os << "tensor(shape=" << t.sizes() << ", dtype=" << python_dtype_repr(t.scalar_type()) << ")";
  } else if (v.isObject() && v.toObjectRef().type()->findMethod("__str__")) {
    // A torch custom class that says what it is (fx::onednn's packed kernels).
    os << (*v.toObjectRef().type()->findMethod("__str__"))({v}).toStringRef();
  } else {
    os << v;
  }
  return os.str();
}

// Python's str()/repr() of the value. `top_str`: Python str() at the top level
// (strings unquoted); nested elements always use repr, as Python does.
std::string to_python(const Argument& a, bool top_str) {
  switch (a.kind()) {
    case Argument::Kind::None: return "None";
    case Argument::Kind::Bool: return a.to_bool() ? "True" : "False";
    case Argument::Kind::Int: return std::to_string(a.to_int());
    case Argument::Kind::Double: return python_float_repr(a.to_double());
    case Argument::Kind::String: return top_str ? a.to_string() : python_str_repr(a.to_string());
    case Argument::Kind::Node: return a.to_node()->name();
    case Argument::Kind::ScalarType: return python_dtype_repr(a.to_scalar_type());
    case Argument::Kind::Device:
      return top_str ? device_str(a.to_device()) : "device(type='" + device_str(a.to_device()) + "')";
    case Argument::Kind::Layout: return layout_repr(a.to_layout());
    case Argument::Kind::MemoryFormat: return memory_format_repr(a.to_memory_format());
    case Argument::Kind::Constant: return constant_str(a.to_constant());
    case Argument::Kind::List:
    case Argument::Kind::Tuple: {
      const bool tuple = a.kind() == Argument::Kind::Tuple;
      std::string s = tuple ? "(" : "[";
      const auto& items = a.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) s += ", ";
        s += to_python(items[i], false);
      }
      if (tuple && items.size() == 1) s += ",";
      s += tuple ? ")" : "]";
      return s;
    }
    case Argument::Kind::Dict: {
      std::string s = "{";
      bool first = true;
      for (const auto& kv : a.dict_items()) {
        if (!first) s += ", ";
        first = false;
        s += python_str_repr(kv.first) + ": " + to_python(kv.second, false);
      }
      return s + "}";
    }
    case Argument::Kind::Slice: {
      // Python prints slice parts with repr, also under str().
      const auto& p = a.slice_parts();
      return "slice(" + to_python(p[0], false) + ", " + to_python(p[1], false) + ", " + to_python(p[2], false) + ")";
    }
    case Argument::Kind::Ellipsis: return "Ellipsis";
  }
  return "?";
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

std::string Argument::repr() const { return to_python(*this, false); }
std::string Argument::str() const { return to_python(*this, true); }

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

std::string format_arg(const Argument& arg) {
  switch (arg.kind()) {
    case Argument::Kind::Node: return "%" + arg.to_node()->name();
    case Argument::Kind::List:
    case Argument::Kind::Tuple: {
      const bool tuple = arg.kind() == Argument::Kind::Tuple;
      std::string s = tuple ? "(" : "[";
      const auto& items = arg.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) s += ", ";
        s += format_arg(items[i]);
      }
      if (tuple && items.size() == 1) s += ",";
      return s + (tuple ? ")" : "]");
    }
    case Argument::Kind::Dict: {
      std::string s = "{";
      bool first = true;
      for (const auto& kv : arg.dict_items()) {
        if (!first) s += ", ";
        first = false;
        s += kv.first + ": " + format_arg(kv.second);
      }
      return s + "}";
    }
    default: return arg.str();
  }
}

std::string format_args(const ArgList& args) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    s += format_arg(args[i]);
  }
  if (args.size() == 1) s += ",";
  return s + ")";
}

std::string format_kwargs(const Kwargs& kwargs) {
  std::string s = "{";
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (i) s += ", ";
    s += kwargs[i].first + ": " + format_arg(kwargs[i].second);
  }
  return s + "}";
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest digits that round-trip, then Python's choice of notation.
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string sci(buf);  // d.ddde[+-]XX
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant = mant.substr(1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

std::string python_dtype_repr(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kByte: return "torch.uint8";
    case c10::kChar: return "torch.int8";
    case c10::kShort: return "torch.int16";
    case c10::kInt: return "torch.int32";
    case c10::kLong: return "torch.int64";
    case c10::kBool: return "torch.bool";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    case c10::kComplexHalf: return "torch.complex32";
    case c10::kQInt8: return "torch.qint8";
    case c10::kQUInt8: return "torch.quint8";
    case c10::kQInt32: return "torch.qint32";
    default: return std::string("torch.") + c10::toString(t);
  }
}

const Argument* find_kwarg(const Kwargs& kwargs, const std::string& key) {
  for (const auto& kv : kwargs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

}  // namespace fx
