#pragma once
// Internal: what the builtins of builtins.cpp and builtins_getitem.cpp share —
// Python numbers, argument checks, sequences — and the getitem / getattr
// family, which builtins_getitem.cpp implements.
#include "targets/builtins.h"

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace fx::detail::builtins {

/// A builtin's positional arguments.
using Args = c10::ArrayRef<const c10::IValue*>;

/// A Python int (bools count as ints) or float.
struct Num {
  bool is_double = false;
  int64_t i = 0;
  double d = 0;
  double as_double() const { return is_double ? d : static_cast<double>(i); }
};

/// `v` as a Python number (an int, a bool as an int, a float); false for anything else.
bool to_num(const c10::IValue& v, Num& out);
/// The IValue of a Python number.
c10::IValue num_value(const Num& n);
/// Throws Python's TypeError text: "unsupported operand type(s) for OP: 'A' and 'B'".
[[noreturn]] void unsupported(const char* op, const c10::IValue& a, const c10::IValue& b);
/// Throws unless `args` has `n` values ("NAME expected N arguments, got M").
void expect_args(const char* name, Args args, size_t n);
/// The items of a tuple or list.
std::vector<c10::IValue> items_of(const c10::IValue& v);
/// A list like `like` (same element type) holding `items`.
c10::IValue make_list_like(const c10::IValue& like, std::vector<c10::IValue> items);

/// operator.getitem: tensors (ATen indexing), lists, tuples, strings, dicts; slices.
c10::IValue op_getitem(Args a);
/// operator.setitem(obj, key, value): a tensor written in place through
/// ATen's Python indexing (x[:, :, pos] = v: index_put_), a list's item, a
/// dict's entry; returns None.
c10::IValue op_setitem(Args a);
/// getattr(obj, name[, default]): a Tensor's shape / dtype / device ..., a
/// dict's item.
c10::IValue op_getattr(Args a);

}  // namespace fx::detail::builtins
