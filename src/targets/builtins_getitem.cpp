// The getitem / getattr builtins: operator.getitem on tensors, sequences,
// strings and dicts (Python's indexing and slicing), and getattr.
#include "targets/builtin_values.h"
#include "targets/schema_match.h"

#include <fx/argument.h>
#include <fx/error.h>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

namespace fx::detail::builtins {
namespace {

int64_t normalize_index(int64_t i, size_t size, const char* what) {
  int64_t n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw Error(std::string(what) + " index out of range");
  return i;
}

std::string python_repr_key(const c10::IValue& k) {
  if (k.isString()) return "'" + k.toStringRef() + "'";
  if (k.isInt()) return std::to_string(k.toInt());
  return type_name(k);
}

/// One part of a slice as an index: None or an int (bools count, as in Python).
c10::optional<int64_t> slice_part(const c10::IValue& v) {
  if (v.isNone()) return c10::nullopt;
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return int64_t(v.toBool());
  throw Error("slice indices must be integers or None or have an __index__ method");
}

/// Appends one element of a tensor index (int, None, Ellipsis, slice, bool or
/// Tensor), constructed in place: libtorch's TensorIndex leaves its bool member
/// uninitialized unless it is a bool index, so moving one reads an
/// indeterminate bool (UBSan: "load of value 3, which is not a valid value
/// for type 'bool'", found by make check-sanitize).
void append_tensor_index(std::vector<at::indexing::TensorIndex>& out, const c10::IValue& e) {
  if (e.isBool()) {
    out.emplace_back(e.toBool());
  } else if (e.isInt()) {
    out.emplace_back(e.toInt());
  } else if (e.isNone()) {
    out.emplace_back(at::indexing::None);
  } else if (is_ellipsis_ivalue(e)) {
    out.emplace_back(at::indexing::Ellipsis);
  } else if (is_slice_ivalue(e)) {
    const auto& p = e.toTupleRef().elements();
    out.emplace_back(at::indexing::Slice(slice_part(p[0]), slice_part(p[1]), slice_part(p[2])));
  } else if (e.isTensor()) {
    out.emplace_back(e.toTensor());
  } else {
    throw Error("operator.getitem: unsupported index of type " + type_name(e) + " into a Tensor");
  }
}

/// The ATen indices of a Python index: a tuple or list of them, or one alone.
std::vector<at::indexing::TensorIndex> tensor_indices(const c10::IValue& idx) {
  std::vector<at::indexing::TensorIndex> indices;
  if ((idx.isTuple() && !is_slice_ivalue(idx) && !is_ellipsis_ivalue(idx)) || idx.isList()) {
    const auto items = items_of(idx);
    indices.reserve(items.size());  // no reallocation: it would move the indices
    for (const auto& e : items) append_tensor_index(indices, e);
  } else {
    indices.reserve(1);
    append_tensor_index(indices, idx);
  }
  return indices;
}

at::Tensor tensor_getitem(const at::Tensor& t, const c10::IValue& idx) {
  if (idx.isInt()) {
    int64_t i = idx.toInt();
    if (t.dim() == 0) throw Error("invalid index of a 0-dim tensor");
    int64_t n = t.size(0);
    if (i < -n || i >= n)
      throw Error("index " + std::to_string(i) + " is out of bounds for dimension 0 with size " + std::to_string(n));
    return t.select(0, i);
  }
  if (idx.isNone()) return t.unsqueeze(0);
  if (idx.isTensor()) return at::index(t, c10::List<c10::optional<at::Tensor>>({idx.toTensor()}));
  const std::vector<at::indexing::TensorIndex> indices = tensor_indices(idx);  // a slice, Ellipsis, bool, tuple
  try {
    return t.index(indices);  // x[:, 0], x[..., 1:3], x[None, ::2]: libtorch's Python indexing
  } catch (const c10::Error& e) {
    throw Error(e.what_without_backtrace());
  }
}

/// The positions slice(start, stop, step) picks from a sequence of `len`
/// (CPython's PySlice_AdjustIndices).
std::vector<int64_t> slice_positions(const c10::IValue& s, int64_t len) {
  const auto& p = s.toTupleRef().elements();
  const c10::optional<int64_t> start = slice_part(p[0]), stop = slice_part(p[1]), step_v = slice_part(p[2]);
  const int64_t step = step_v.value_or(1);
  if (step == 0) throw Error("slice step cannot be zero");
  auto adjust = [&](c10::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v;
    if (i < 0) {
      i += len;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) {
      i = step < 0 ? len - 1 : len;
    }
    return i;
  };
  const int64_t b = adjust(start, step < 0 ? len - 1 : 0), e = adjust(stop, step < 0 ? -1 : len);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

c10::IValue sequence_slice(const c10::IValue& obj, const c10::IValue& s) {
  if (obj.isString()) {
    const std::string& str = obj.toStringRef();
    std::string out;
    for (int64_t i : slice_positions(s, static_cast<int64_t>(str.size()))) out += str[static_cast<size_t>(i)];
    return out;
  }
  std::vector<c10::IValue> items = items_of(obj), out;
  for (int64_t i : slice_positions(s, static_cast<int64_t>(items.size()))) out.push_back(items[static_cast<size_t>(i)]);
  if (obj.isTuple()) return c10::ivalue::Tuple::create(std::move(out));
  return make_list_like(obj, std::move(out));
}

}  // namespace

c10::IValue op_getitem(Args a) {
  expect_args("operator.getitem", a, 2);
  const c10::IValue &obj = *a[0], &idx = *a[1];
  if (obj.isTensor()) return tensor_getitem(obj.toTensor(), idx);
  if (obj.isGenericDict()) {
    auto d = obj.toGenericDict();
    auto it = d.find(idx);
    if (it == d.end()) throw Error(python_repr_key(idx));  // Python's KeyError('k') prints as 'k'
    return it->value();
  }
  if ((obj.isTuple() && !is_slice_ivalue(obj) && !is_ellipsis_ivalue(obj)) || obj.isList() || obj.isString()) {
    const char* kind = obj.isTuple() ? "tuple" : obj.isList() ? "list" : "string";
    if (is_slice_ivalue(idx)) return sequence_slice(obj, idx);
    if (!idx.isInt() && !idx.isBool())
      throw Error(std::string(kind) + " indices must be integers or slices, not " + type_name(idx));
    int64_t i = idx.isBool() ? int64_t(idx.toBool()) : idx.toInt();
    if (obj.isTuple()) {
      const auto& e = obj.toTupleRef().elements();
      return e[normalize_index(i, e.size(), kind)];
    }
    if (obj.isList()) {
      const auto& l = obj.toListRef();
      return l[normalize_index(i, l.size(), kind)];
    }
    const std::string& s = obj.toStringRef();
    return std::string(1, s[normalize_index(i, s.size(), kind)]);
  }
  throw Error("'" + type_name(obj) + "' object is not subscriptable");
}

c10::IValue op_setitem(Args a) {
  expect_args("operator.setitem", a, 3);
  const c10::IValue &obj = *a[0], &idx = *a[1], &value = *a[2];
  if (obj.isTensor()) {
    at::Tensor t = obj.toTensor();
    try {
      if (value.isTensor())
        t.index_put_(tensor_indices(idx), value.toTensor());  // x[:, :, pos] = v (gpt-fast's KV cache update)
      else if (value.isScalar())
        t.index_put_(tensor_indices(idx), value.toScalar());
      else
        throw Error("can't assign a " + type_name(value) + " to a Tensor");
    } catch (const c10::Error& e) {
      throw Error(e.what_without_backtrace());
    }
    return c10::IValue();
  }
  if (obj.isList()) {
    if (!idx.isInt()) throw Error("list indices must be integers, not " + type_name(idx));
    auto l = obj.toList();
    l.set(static_cast<size_t>(normalize_index(idx.toInt(), l.size(), "list assignment")), value);
    return c10::IValue();
  }
  if (obj.isGenericDict()) {
    obj.toGenericDict().insert_or_assign(idx, value);
    return c10::IValue();
  }
  throw Error("'" + (obj.isTuple() ? std::string("tuple") : type_name(obj)) + "' object does not support item assignment");
}

c10::IValue op_getattr(Args a) {
  if (a.size() != 2 && a.size() != 3)
    throw Error("getattr expected 2 or 3 arguments, got " + std::to_string(a.size()));
  const c10::IValue& obj = *a[0];
  if (!a[1]->isString()) throw Error("getattr(): attribute name must be string, not '" + type_name(*a[1]) + "'");
  const std::string& name = a[1]->toStringRef();
  if (obj.isTensor()) {
    const at::Tensor& t = obj.toTensor();
    if (name == "shape") return c10::List<int64_t>(t.sizes().vec());
    if (name == "dtype") return t.scalar_type();
    if (name == "device") return t.device();
    if (name == "layout") return t.layout();
    if (name == "ndim") return t.dim();
    if (name == "requires_grad") return t.requires_grad();
    if (name == "is_leaf") return t.is_leaf();
    if (name == "is_cuda") return t.is_cuda();
    if (name == "is_sparse") return t.is_sparse();
    if (name == "is_quantized") return t.is_quantized();
    if (name == "is_meta") return t.is_meta();
    if (name == "T") return t.numpy_T();
    if (name == "mT") return t.mT();
    if (name == "H") return t.mH().dim() == 2 ? t.mH() : t.numpy_T();
    if (name == "mH") return t.mH();
    if (name == "data") return t.variable_data();
    if (name == "real") return at::real(t);
    if (name == "imag") return at::imag(t);
    if (name == "grad") {
      const at::Tensor& g = t.grad();
      return g.defined() ? c10::IValue(g) : c10::IValue();
    }
  } else if (obj.isDevice()) {
    if (name == "type") return c10::DeviceTypeName(obj.toDevice().type(), /*lower_case=*/true);
    if (name == "index") return obj.toDevice().has_index() ? c10::IValue(int64_t(obj.toDevice().index())) : c10::IValue();
  } else if (obj.isComplexDouble() || obj.isDouble() || obj.isInt()) {
    Num n;
    if (to_num(obj, n) && name == "real") return num_value(n);
    if (to_num(obj, n) && name == "imag") return n.is_double ? c10::IValue(0.0) : c10::IValue(int64_t(0));
  }
  if (a.size() == 3) return *a[2];
  throw Error("'" + (obj.isTensor() ? std::string("Tensor") : type_name(obj)) + "' object has no attribute '" +
              name + "'");
}

}  // namespace fx::detail::builtins
