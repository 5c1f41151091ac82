// Matching run-time values against an operator schema (see schema_match.h).
#include "targets/schema_match.h"

#include <fx/argument.h>

#include <fx/error.h>

#include <ATen/core/jit_type.h>
#include <ATen/ScalarOps.h>
#include <c10/core/Device.h>

#include <sstream>

namespace fx::detail {
namespace {

constexpr int kIncompatible = -1;
/// A Python number passed for a Tensor parameter: allowed, but any overload
/// that takes the number as a Scalar is preferred.
constexpr int kNumberToTensorPenalty = 10;

bool is_number(const c10::IValue& v) { return v.isInt() || v.isDouble() || v.isBool(); }

/// The items of a generic list or tuple (nullptr for anything else).
template <class F>
bool all_items(const c10::IValue& v, F&& pred) {
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (!pred(e)) return false;
    return true;
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (!pred(e)) return false;
    return true;
  }
  return false;
}

bool is_int_kind(c10::TypeKind k) {
  return k == c10::TypeKind::IntType || k == c10::TypeKind::SymIntType || k == c10::TypeKind::ScalarTypeType ||
         k == c10::TypeKind::LayoutType || k == c10::TypeKind::MemoryFormatType;
}

c10::TypePtr unwrap_optional(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::OptionalType) return t->expectRef<c10::OptionalType>().getElementType();
  return t;
}

/// Whether an int passed for `f` stands for a dtype / layout / memory format
/// (the schema's real type): such a match ranks below a plain int one, so
/// x.view(6) picks view(SymInt[]) rather than view.dtype.
bool is_enum_as_int(const c10::Argument& f) {
  const c10::TypeKind k = unwrap_optional(f.real_type())->kind();
  return k == c10::TypeKind::ScalarTypeType || k == c10::TypeKind::LayoutType ||
         k == c10::TypeKind::MemoryFormatType;
}

bool is_int_list_type(const c10::TypePtr& type) {
  c10::TypePtr t = unwrap_optional(type);
  return t->kind() == c10::TypeKind::ListType && is_int_kind(t->expectRef<c10::ListType>().getElementType()->kind());
}

/// Penalty of passing `v` for a parameter of type `t` (kIncompatible if it
/// cannot be passed); sets the conversion needed.
int fit(const c10::IValue& v, const c10::TypePtr& t, const c10::optional<int32_t>& n, Conversion& conv,
        uint32_t& repeat) {
  conv = Conversion::None;
  switch (t->kind()) {
    case c10::TypeKind::AnyType:
      return 0;
    case c10::TypeKind::OptionalType:
      if (v.isNone()) return 0;
      return fit(v, t->expectRef<c10::OptionalType>().getElementType(), n, conv, repeat);
    case c10::TypeKind::TensorType:
      if (v.isTensor()) return 0;
      if (is_number(v)) {
        conv = Conversion::NumberToTensor;
        return kNumberToTensorPenalty;
      }
      return kIncompatible;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
      return v.isInt() ? 0 : kIncompatible;
    case c10::TypeKind::FloatType:
      if (v.isDouble()) return 0;
      if (v.isInt()) {
        conv = Conversion::IntToDouble;
        return 1;
      }
      return kIncompatible;
    case c10::TypeKind::BoolType:
      return v.isBool() ? 0 : kIncompatible;
    case c10::TypeKind::NumberType:
      return (is_number(v) || v.isComplexDouble()) ? 0 : kIncompatible;
    case c10::TypeKind::StringType:
      return v.isString() ? 0 : kIncompatible;
    case c10::TypeKind::DeviceObjType:
      if (v.isDevice()) return 0;
      if (v.isString()) {
        try {
          c10::Device d(v.toStringRef());
          (void)d;
        } catch (const std::exception&) {
          return kIncompatible;
        }
        conv = Conversion::StringToDevice;
        return 1;
      }
      return kIncompatible;
    case c10::TypeKind::ListType: {
      const c10::TypePtr elem = t->expectRef<c10::ListType>().getElementType();
      const c10::TypeKind ek = elem->kind();
      if (is_int_kind(ek)) {
        if (v.isIntList()) return 0;
        conv = Conversion::ToIntList;
        if (v.isInt()) {
          repeat = n ? static_cast<uint32_t>(*n) : 1;
          return 1;
        }
        return all_items(v, [](const c10::IValue& e) { return e.isInt(); }) ? 1 : kIncompatible;
      }
      if (ek == c10::TypeKind::FloatType) {
        if (v.isDoubleList()) return 0;
        conv = Conversion::ToDoubleList;
        return all_items(v, [](const c10::IValue& e) { return e.isDouble() || e.isInt(); }) ? 1 : kIncompatible;
      }
      if (ek == c10::TypeKind::BoolType) {
        if (v.isBoolList()) return 0;
        conv = Conversion::ToBoolList;
        return all_items(v, [](const c10::IValue& e) { return e.isBool(); }) ? 1 : kIncompatible;
      }
      if (ek == c10::TypeKind::TensorType) {
        if (v.isTensorList()) return 0;
        conv = Conversion::ToTensorList;
        return all_items(v, [](const c10::IValue& e) { return e.isTensor(); }) ? 1 : kIncompatible;
      }
      if (ek == c10::TypeKind::OptionalType &&
          elem->expectRef<c10::OptionalType>().getElementType()->kind() == c10::TypeKind::TensorType) {
        conv = Conversion::ToOptTensorList;
        if (v.isTensorList()) return 1;
        return all_items(v, [](const c10::IValue& e) { return e.isTensor() || e.isNone(); }) ? 1 : kIncompatible;
      }
      if (ek == c10::TypeKind::StringType) {
        // str[] (Dimname lists): only real lists of strings.
        if (v.isList() || v.isTuple()) {
          if (!all_items(v, [](const c10::IValue& e) { return e.isString(); })) return kIncompatible;
          conv = Conversion::TupleToList;
          return 1;
        }
        return kIncompatible;
      }
      if (v.isList()) return v.type()->isSubtypeOf(*t) ? 0 : kIncompatible;
      if (v.isTuple()) {
        conv = Conversion::TupleToList;
        return 1;
      }
      return kIncompatible;
    }
    case c10::TypeKind::TupleType:
      return v.isTuple() ? 0 : kIncompatible;
    case c10::TypeKind::GeneratorType:
      return v.isGenerator() ? 0 : kIncompatible;
    default:
      return v.type()->isSubtypeOf(*t) ? 0 : kIncompatible;
  }
}

template <class T, class Get>
c10::List<T> typed_list(const c10::IValue& v, Get&& get) {
  c10::List<T> out;
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) out.push_back(get(e));
  } else {
    for (const c10::IValue& e : v.toListRef()) out.push_back(get(e));
  }
  return out;
}

c10::IValue convert(c10::IValue v, Conversion conv, uint32_t repeat, const c10::TypePtr& formal) {
  switch (conv) {
    case Conversion::None:
      return v;
    case Conversion::IntToDouble:
      return static_cast<double>(v.toInt());
    case Conversion::ToIntList:
      if (v.isInt()) return c10::List<int64_t>(std::vector<int64_t>(repeat, v.toInt()));
      return typed_list<int64_t>(v, [](const c10::IValue& e) { return e.toInt(); });
    case Conversion::ToDoubleList:
      return typed_list<double>(v, [](const c10::IValue& e) { return e.isInt() ? double(e.toInt()) : e.toDouble(); });
    case Conversion::ToBoolList:
      return typed_list<bool>(v, [](const c10::IValue& e) { return e.toBool(); });
    case Conversion::ToTensorList:
      return typed_list<at::Tensor>(v, [](const c10::IValue& e) { return e.toTensor(); });
    case Conversion::ToOptTensorList: {
      if (v.isTensorList()) {
        c10::List<c10::optional<at::Tensor>> out;
        for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
        return out;
      }
      return typed_list<c10::optional<at::Tensor>>(v, [](const c10::IValue& e) {
        return e.isNone() ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(e.toTensor());
      });
    }
    case Conversion::NumberToTensor: {
      at::Tensor t = at::scalar_to_tensor(v.toScalar());
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      return t;
    }
    case Conversion::StringToDevice:
      return c10::Device(v.toStringRef());
    case Conversion::TupleToList: {
      c10::TypePtr lt = unwrap_optional(formal);
      c10::impl::GenericList out(lt->expectRef<c10::ListType>().getElementType());
      if (v.isTuple()) {
        for (const auto& e : v.toTupleRef().elements()) out.push_back(e);
      } else {
        for (const c10::IValue& e : v.toListRef()) out.push_back(e);
      }
      return out;
    }
  }
  return v;
}

uint8_t scalar_kind(const c10::IValue& v) {
  if (v.isTensor()) return 1;
  if (v.isInt()) return 2;
  if (v.isDouble()) return 3;
  if (v.isBool()) return 4;
  if (v.isNone()) return 0;
  if (v.isString()) return 5;
  if (v.isDevice()) return 12;
  if (v.isComplexDouble()) return 14;
  return 15;
}

}  // namespace

bool is_out_schema(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite()) return true;
  return false;
}

namespace {
bool has_formal(const c10::FunctionSchema& schema, const std::string& name) {
  for (const auto& a : schema.arguments())
    if (a.name() == name) return true;
  return false;
}
}  // namespace

std::optional<SchemaMatch> match_schema(const c10::FunctionSchema& schema, c10::ArrayRef<const c10::IValue*> args,
                                        c10::ArrayRef<std::string> kwarg_names,
                                        c10::ArrayRef<const c10::IValue*> kwargs) {
  const auto& formals = schema.arguments();
  SchemaMatch m;
  m.sources.resize(formals.size());
  std::vector<bool> kw_used(kwargs.size(), false);
  size_t last_positional = formals.size();
  for (size_t p = 0; p < formals.size(); ++p)
    if (!formals[p].kwarg_only()) last_positional = p;
  size_t ai = 0;
  for (size_t p = 0; p < formals.size(); ++p) {
    const c10::Argument& f = formals[p];
    ArgSource& s = m.sources[p];
    if (!f.kwarg_only() && ai < args.size()) {
      // Python varargs: x.view(2, 3) passes the last int[] parameter unpacked.
      if (p == last_positional && args.size() - ai > 1 && is_int_list_type(f.type()) && args[ai]->isInt()) {
        for (size_t k = ai; k < args.size(); ++k)
          if (!args[k]->isInt()) return std::nullopt;
        s.kind = ArgSource::Kind::PackRest;
        s.conversion = Conversion::ToIntList;
        s.index = static_cast<uint32_t>(ai);
        m.penalty += 1;
        ai = args.size();
        continue;
      }
      int pen = fit(*args[ai], f.type(), f.N(), s.conversion, s.repeat);
      if (pen < 0) return std::nullopt;
      if (args[ai]->isInt() && is_enum_as_int(f)) pen += 2;
      s.kind = ArgSource::Kind::Positional;
      s.index = static_cast<uint32_t>(ai++);
      m.penalty += pen;
      continue;
    }
    // torch.fx spells `self` as `input` (torch.add(input=x, other=y); what
    // normalize_function gives): both name the same parameter.
    const bool self_as_input = f.name() == "self" && !has_formal(schema, "input");
    size_t j = 0;
    while (j < kwarg_names.size() && kwarg_names[j] != f.name() && !(self_as_input && kwarg_names[j] == "input")) ++j;
    if (j < kwarg_names.size()) {
      int pen = fit(*kwargs[j], f.type(), f.N(), s.conversion, s.repeat);
      if (pen < 0) return std::nullopt;
      s.kind = ArgSource::Kind::Keyword;
      s.index = static_cast<uint32_t>(j);
      kw_used[j] = true;
      m.penalty += pen;
      continue;
    }
    if (f.default_value()) {
      s.kind = ArgSource::Kind::Default;
      ++m.defaults;
      continue;
    }
    return std::nullopt;  // a required argument is missing (out= arguments included)
  }
  if (ai < args.size()) return std::nullopt;
  for (bool used : kw_used)
    if (!used) return std::nullopt;
  return m;
}

c10::IValue materialize(const ArgSource& source, const c10::Argument& formal, c10::ArrayRef<const c10::IValue*> args,
                        c10::ArrayRef<const c10::IValue*> kwargs) {
  switch (source.kind) {
    case ArgSource::Kind::Default:
      return *formal.default_value();
    case ArgSource::Kind::PackRest: {
      c10::List<int64_t> out;
      for (size_t k = source.index; k < args.size(); ++k) out.push_back(args[k]->toInt());
      return out;
    }
    case ArgSource::Kind::Positional:
      return convert(*args[source.index], source.conversion, source.repeat, formal.type());
    case ArgSource::Kind::Keyword:
      return convert(*kwargs[source.index], source.conversion, source.repeat, formal.type());
  }
  return {};
}

uint8_t value_kind(const c10::IValue& v) {
  if (v.isTensor()) return 1;
  if (v.isInt()) return 2;
  if (v.isDouble()) return 3;
  if (v.isBool()) return 4;
  if (v.isNone()) return 0;
  if (v.isList()) {
    if (v.isIntList()) return 6;
    if (v.isDoubleList()) return 7;
    if (v.isBoolList()) return 8;
    if (v.isTensorList()) return 9;
    const auto& l = v.toListRef();
    return static_cast<uint8_t>(32 + (l.empty() ? 0 : scalar_kind(l[0])));
  }
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    return static_cast<uint8_t>(64 + (e.empty() ? 0 : scalar_kind(e[0])));
  }
  return scalar_kind(v);
}

std::string type_name(const c10::IValue& v) {
  if (v.isTensor()) return "Tensor";
  if (v.isInt()) return "int";
  if (v.isDouble()) return "float";
  if (v.isBool()) return "bool";
  if (v.isNone()) return "None";
  if (v.isString()) return "str";
  if (v.isDevice()) return "Device";
  if (v.isIntList()) return "List[int]";
  if (v.isDoubleList()) return "List[float]";
  if (v.isBoolList()) return "List[bool]";
  if (v.isTensorList()) return "List[Tensor]";
  if (v.isList()) return "list";
  if (is_slice_ivalue(v)) return "slice";
  if (is_ellipsis_ivalue(v)) return "ellipsis";
  if (v.isTuple()) {
    std::string s = "Tuple[";
    const auto& e = v.toTupleRef().elements();
    for (size_t i = 0; i < e.size(); ++i) s += (i ? ", " : "") + type_name(e[i]);
    return s + "]";
  }
  if (v.isGenericDict()) return "dict";
  return v.tagKind();
}

std::string describe_call(c10::ArrayRef<const c10::IValue*> args, c10::ArrayRef<std::string> kwarg_names,
                          c10::ArrayRef<const c10::IValue*> kwargs) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + type_name(*args[i]);
  for (size_t i = 0; i < kwargs.size(); ++i)
    s += (args.empty() && i == 0 ? "" : ", ") + kwarg_names[i] + "=" + type_name(*kwargs[i]);
  return s + ")";
}

}  // namespace fx::detail
