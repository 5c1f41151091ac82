#pragma once
/// \file
/// Values in torch.save files: what `fxcpp run` reads as inputs and writes as
/// outputs, and what tests compare against PyTorch's eager results.

#include <fx/error.h>

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace fx {

/// Reads a file written by torch.save (or save_value): a tensor, or a tuple /
/// list of values. Throws fx::ImportError naming the file when it cannot.
c10::IValue load_value(const std::string& path);

/// The forward inputs in a torch.save file: a tuple or list is the argument
/// list, anything else one argument.
std::vector<c10::IValue> load_inputs(const std::string& path);

/// Writes `value` so that torch.load in Python reads it back.
void save_value(const std::string& path, const c10::IValue& value);

/// The largest absolute difference between the tensors of `a` and `b`
/// (matched through tuples, lists and dicts) and the largest absolute value
/// in `b`. Throws fx::Error when the structure, shapes or dtypes differ.
struct Difference {
  double max_abs_diff = 0;
  double max_abs_expected = 0;
};
/// Compares `actual` with `expected` (see Difference).
Difference compare_values(const c10::IValue& actual, const c10::IValue& expected);

}  // namespace fx
