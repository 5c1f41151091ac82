// Printing Arguments as Python does: str() and repr() of a value, torch.fx's
// _format_arg (how str(graph) prints args and kwargs), Python's float and
// dtype reprs.
#include <fx/argument.h>
#include <fx/node.h>

#include <ATen/core/function.h>
#include <ATen/core/jit_type.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace fx {

namespace {

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

}  // namespace

std::string Argument::repr() const { return to_python(*this, false); }
std::string Argument::str() const { return to_python(*this, true); }

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

}  // namespace fx
