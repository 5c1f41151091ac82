// The wire format of fx::distributed's messages (see wire_format.h).
#include "distributed/wire_format.h"

#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <cstring>

namespace fx::distributed::wire {

void encode_string(const std::string& s, std::vector<int64_t>& words) {
  words.push_back(static_cast<int64_t>(s.size()));
  for (size_t i = 0; i < s.size(); i += 8) {
    int64_t w = 0;
    std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
    words.push_back(w);
  }
}

void encode(const c10::IValue& v, std::vector<int64_t>& words, std::vector<at::Tensor>& tensors) {
  if (v.isNone()) {
    words.push_back(kNone);
  } else if (v.isTensor()) {
    at::Tensor t = v.toTensor();
    if (!t.defined()) {
      words.push_back(kNone);
      return;
    }
    if (t.is_quantized() || t.is_sparse() || !t.device().is_cpu() || t.is_mkldnn())
      throw DistributedError("cannot send a " + std::string(t.is_quantized() ? "quantized" : t.is_sparse() ? "sparse" : "non-CPU") +
                             " tensor between ranks (dense CPU tensors only)");
    t = t.detach();
    if (t.is_conj() || t.is_neg() || !t.is_non_overlapping_and_dense()) t = t.resolve_conj().resolve_neg().contiguous();
    words.push_back(kTensor);
    words.push_back(static_cast<int64_t>(t.scalar_type()));
    words.push_back(t.dim());
    for (int64_t s : t.sizes()) words.push_back(s);
    for (int64_t s : t.strides()) words.push_back(s);
    tensors.push_back(t);
  } else if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    words.push_back(kTuple);
    words.push_back(static_cast<int64_t>(items.size()));
    for (const auto& item : items) encode(item, words, tensors);
  } else if (v.isList()) {
    const c10::TypePtr elem = v.type()->containedType(0);
    int64_t kind = kGenericList;
    if (elem->kind() == c10::TypeKind::TensorType) kind = kTensorList;
    else if (elem->kind() == c10::TypeKind::IntType) kind = kIntList;
    else if (elem->kind() == c10::TypeKind::FloatType) kind = kDoubleList;
    else if (elem->kind() == c10::TypeKind::BoolType) kind = kBoolList;
    const auto items = v.toListRef();
    words.push_back(kList);
    words.push_back(static_cast<int64_t>(items.size()));
    words.push_back(kind);
    for (const auto& item : items) encode(item, words, tensors);
  } else if (v.isInt()) {
    words.push_back(kInt);
    words.push_back(v.toInt());
  } else if (v.isDouble()) {
    words.push_back(kDouble);
    int64_t bits = 0;
    const double d = v.toDouble();
    std::memcpy(&bits, &d, sizeof bits);
    words.push_back(bits);
  } else if (v.isBool()) {
    words.push_back(kBool);
    words.push_back(v.toBool() ? 1 : 0);
  } else if (v.isString()) {
    words.push_back(kString);
    encode_string(v.toStringRef(), words);
  } else {
    throw DistributedError("cannot send a value of type " + v.type()->repr_str() +
                           " between ranks (tensors, tuples, lists, numbers, bools, strings and None can)");
  }
}

int64_t Decoder::next() {
  if (p >= end) throw DistributedError("malformed message header (truncated encoding)");
  return *p++;
}
int64_t Decoder::count(int64_t max) {
  const int64_t n = next();
  if (n < 0 || n > max) throw DistributedError("malformed message header (count " + std::to_string(n) + ")");
  return n;
}
std::string Decoder::string() {
  const int64_t n = count(end - p > 0 ? (end - p) * 8 : 0);
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t w = next();
    std::memcpy(&s[static_cast<size_t>(i)], &w, static_cast<size_t>(std::min<int64_t>(8, n - i)));
  }
  return s;
}
c10::IValue Decoder::value() {
  switch (next()) {
    case kNone: return c10::IValue();
    case kTensor: {
      const int64_t dtype = next();
      if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions))
        throw DistributedError("malformed message header (dtype " + std::to_string(dtype) + ")");
      const int64_t dim = count(64);
      std::vector<int64_t> sizes(static_cast<size_t>(dim)), strides(static_cast<size_t>(dim));
      for (auto& s : sizes) s = count();
      for (auto& s : strides) s = count();
      at::Tensor t = at::empty_strided(sizes, strides, at::TensorOptions().dtype(static_cast<c10::ScalarType>(dtype)));
      buffers->push_back(t);
      return t;
    }
    case kTuple: {
      const int64_t n = count();
      std::vector<c10::IValue> items;
      items.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) items.push_back(value());
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case kList: {
      const int64_t n = count();
      const int64_t kind = next();
      std::vector<c10::IValue> items;
      items.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) items.push_back(value());
      switch (kind) {
        case kTensorList: {
          c10::List<at::Tensor> l;
          for (auto& i : items) l.push_back(i.toTensor());
          return l;
        }
        case kIntList: {
          c10::List<int64_t> l;
          for (auto& i : items) l.push_back(i.toInt());
          return l;
        }
        case kDoubleList: {
          c10::List<double> l;
          for (auto& i : items) l.push_back(i.toDouble());
          return l;
        }
        case kBoolList: {
          c10::List<bool> l;
          for (auto& i : items) l.push_back(i.toBool());
          return l;
        }
        default: {
          c10::impl::GenericList l(c10::AnyType::get());
          for (auto& i : items) l.push_back(std::move(i));
          return l;
        }
      }
    }
    case kInt: return next();
    case kDouble: {
      const int64_t bits = next();
      double d = 0;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
    case kBool: return next() != 0;
    case kString: return string();
    default: throw DistributedError("malformed message header (unknown value code)");
  }
}

}  // namespace fx::distributed::wire
