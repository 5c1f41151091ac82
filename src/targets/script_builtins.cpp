// The operators TorchScript's interpreter implements itself, as builtin
// call_function targets (see builtins.h): imported graphs that still hold
// them run under GraphModule::forward and the Interpreter.
#include "targets/builtins.h"

#include "targets/schema_match.h"

#include <fx/error.h>

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/mobile/type_parser.h>

#include <mutex>
#include <sstream>
#include <unordered_map>

namespace fx::detail {
namespace {

using Args = c10::ArrayRef<const c10::IValue*>;

void expect_arg_count(const char* name, Args a, size_t min, size_t max) {
  if (a.size() >= min && a.size() <= max) return;
  const std::string expected = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
  throw Error(std::string(name) + " expected " + expected + " argument" + (max == 1 ? "" : "s") + ", got " +
              std::to_string(a.size()));
}

const std::string& string_arg(const char* name, const c10::IValue& v, const char* what) {
  if (!v.isString()) throw Error(std::string(name) + ": " + what + " must be a str, got " + type_name(v));
  return v.toStringRef();
}

// aten::warn(str message, int stacklevel=2): a c10 warning to the current
// handler, as TorchScript's TORCH_WARN for code without a source file, from
// "function aten::warn". One warning per call (TorchScript warns once per
// warn node and process).
c10::IValue op_warn(Args a) {
  expect_arg_count("aten::warn", a, 1, 2);
  const std::string& message = string_arg("aten::warn", *a[0], "message");
  if (a.size() == 2 && !a[1]->isInt())
    throw Error("aten::warn: stacklevel must be an int, got " + type_name(*a[1]));
  c10::Warning::warn({"aten::warn", __FILE__, static_cast<uint32_t>(__LINE__)}, message, /*verbatim=*/false);
  return c10::IValue();
}

// prim::RaiseException(str msg, str? cls=None): the model's own raise. The
// text is what TorchScript's interpreter reports: "<cls>: <msg>", with
// "RuntimeError" when no class is given.
c10::IValue op_raise_exception(Args a) {
  expect_arg_count("prim::RaiseException", a, 1, 2);
  const std::string& message = string_arg("prim::RaiseException", *a[0], "msg");
  c10::optional<std::string> cls;
  if (a.size() == 2 && !a[1]->isNone()) cls = string_arg("prim::RaiseException", *a[1], "cls");
  throw Error(cls.value_or("RuntimeError") + ": " + message);
}

// prim::Uninitialized(): a value that is never read (TorchScript's early
// returns and breaks); None here.
c10::IValue op_uninitialized(Args a) {
  expect_arg_count("prim::Uninitialized", a, 0, 0);
  return c10::IValue();
}

// prim::unchecked_cast(x): x (a refinement of its static type).
c10::IValue op_unchecked_cast(Args a) {
  expect_arg_count("prim::unchecked_cast", a, 1, 1);
  return *a[0];
}

// aten::format(str self, ...): each "{}" replaced by the next argument as
// TorchScript prints it; extra arguments are ignored, as TorchScript does.
c10::IValue op_format(Args a) {
  if (a.empty()) throw Error("aten::format expected a format string, got no arguments");
  const std::string& format = string_arg("aten::format", *a[0], "the format string");
  std::ostringstream out;
  size_t used = 1;
  for (size_t begin = 0;;) {
    const size_t at = format.find("{}", begin);
    if (at == std::string::npos) {
      out << format.substr(begin);
      break;
    }
    out << format.substr(begin, at - begin);
    if (used >= a.size()) throw Error("Too few arguments for format string: " + format);
    out << *a[used++];
    begin = at + 2;
  }
  return out.str();
}

// The TorchScript type a type string names ("Tensor", "List[int]",
// "Optional[Tensor]", "Tuple[int, str]", "Dict[str, Tensor]", "NoneType"),
// parsed once.
c10::TypePtr parse_type_name(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, c10::TypePtr> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  c10::TypePtr type;
  std::string why = "not a TorchScript type annotation";
  try {
    type = c10::parseType(name);
  } catch (const c10::Error& e) {
    why = e.what_without_backtrace();
  }
  if (!type) throw Error("prim::isinstance: unknown type '" + name + "' (" + why + ")");
  return cache.emplace(name, type).first->second;
}

// prim::isinstance(value, types): whether the value's type is a subtype of
// one of the types, named by their TorchScript annotations (a str or a list
// or tuple of str: "int", "List[int]" ...). TorchScript keeps the types as a
// node attribute; fxcpp passes them as an argument.
c10::IValue op_isinstance(Args a) {
  expect_arg_count("prim::isinstance", a, 2, 2);
  std::vector<std::string> names;
  const c10::IValue& types = *a[1];
  if (types.isString()) {
    names.push_back(types.toStringRef());
  } else if (types.isList() || types.isTuple()) {
    for (const c10::IValue& t : types.isList() ? types.toListRef().vec() : types.toTupleRef().elements().vec())
      names.push_back(string_arg("prim::isinstance", t, "each type name"));
  } else {
    throw Error("prim::isinstance: the types must be a str or a list of str, got " + type_name(types));
  }
  const c10::TypePtr type = a[0]->type();
  for (const std::string& name : names) {
    // Objects of TorchScript classes: by qualified name (no class table here).
    if (name.rfind("__torch__.", 0) == 0) {
      if (type->annotation_str() == name) return true;
      continue;
    }
    if (type->isSubtypeOf(*parse_type_name(name))) return true;
  }
  return false;
}

// aten::__is__(a, b) / aten::__isnot__(a, b): Python's `is` (None, same
// object, equal primitive values), as TorchScript's IValue::is.
c10::IValue op_is(Args a) {
  expect_arg_count("aten::__is__", a, 2, 2);
  return a[0]->is(*a[1]);
}

c10::IValue op_isnot(Args a) {
  expect_arg_count("aten::__isnot__", a, 2, 2);
  return !a[0]->is(*a[1]);
}

const c10::ivalue::Tuple& tuple_arg(const char* name, const c10::IValue& v) {
  if (!v.isTuple()) throw Error(std::string(name) + ": expected a tuple, got " + type_name(v));
  return v.toTupleRef();
}

int64_t int_arg(const char* name, const c10::IValue& v, const char* what) {
  if (!v.isInt()) throw Error(std::string(name) + ": " + what + " must be an int, got " + type_name(v));
  return v.toInt();
}

// prim::TupleIndex(Any tup, int i): tup[i], negative indices from the end.
c10::IValue op_tuple_index(Args a) {
  expect_arg_count("prim::TupleIndex", a, 2, 2);
  const auto& elements = tuple_arg("prim::TupleIndex", *a[0]).elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  int64_t i = int_arg("prim::TupleIndex", *a[1], "the index");
  if (i < 0) i += size;
  if (i < 0 || i >= size) throw Error("Tuple list index out of range");  // TorchScript's text
  return elements[static_cast<size_t>(i)];
}

// prim::TupleSlice(tup, beg, end): tup[beg:end] (TorchScript's node keeps beg
// and end as attributes; fxcpp passes them as arguments). Python's slice
// rules: negative from the end, clamped to the tuple.
c10::IValue op_tuple_slice(Args a) {
  expect_arg_count("prim::TupleSlice", a, 3, 3);
  const auto& elements = tuple_arg("prim::TupleSlice", *a[0]).elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  auto clamp = [size](int64_t i) { return std::min(std::max(i < 0 ? i + size : i, int64_t(0)), size); };
  const int64_t begin = clamp(int_arg("prim::TupleSlice", *a[1], "beg"));
  const int64_t end = clamp(int_arg("prim::TupleSlice", *a[2], "end"));
  std::vector<c10::IValue> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(elements[static_cast<size_t>(i)]);
  return c10::ivalue::Tuple::create(std::move(out));
}

}  // namespace

const std::vector<ScriptBuiltin>& script_builtins() {
  static const std::vector<ScriptBuiltin> all = {
      {"aten::warn", op_warn, /*impure=*/true},
      {"prim::RaiseException", op_raise_exception, /*impure=*/true},
      {"prim::Uninitialized", op_uninitialized, false},
      {"prim::unchecked_cast", op_unchecked_cast, false},
      {"aten::format", op_format, false},
      {"prim::isinstance", op_isinstance, false},
      {"aten::__is__", op_is, false},
      {"aten::__isnot__", op_isnot, false},
      {"prim::TupleIndex", op_tuple_index, false},
      {"prim::TupleSlice", op_tuple_slice, false},
  };
  return all;
}

}  // namespace fx::detail
