#pragma once
// Internal: one traversal of the tensors inside a run-time value, for the
// passes and the importer that rebuild a value with other tensors (meta
// tensors, zeros, clones).

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <utility>
#include <vector>

namespace fx::detail {

/// `v` with every defined tensor t replaced by fn(t), through tuples, lists
/// and dicts; the containers are new (element types kept), so nothing done
/// to the result reaches `v`'s lists and dicts. Other values are kept.
template <class Fn>
c10::IValue map_tensors(const c10::IValue& v, const Fn& fn) {
  if (v.isTensor()) return v.toTensor().defined() ? c10::IValue(fn(v.toTensor())) : v;
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(map_tensors(e, fn));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(map_tensors(e, fn));
    return out;
  }
  if (v.isGenericDict()) {
    auto dict = v.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& kv : dict) out.insert(kv.key(), map_tensors(kv.value(), fn));
    return out;
  }
  return v;
}

}  // namespace fx::detail
