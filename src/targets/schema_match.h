#pragma once
// Internal: matching run-time argument values against an operator schema.
//
// A call_function node names an operator ("aten::add") but not its overload;
// the overload is chosen from the values of the first call. match_schema()
// says whether (and how well) positional values and keyword values fit one
// schema, and how to build the schema's argument stack from them: which value
// goes to which schema position, with which conversion (a Python tuple of
// ints for an int[] parameter, a lone int broadcast to int[2], an int for a
// float, trailing varargs packed into a list as in x.view(2, 3) ...), and
// which defaults fill the rest.

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fx::detail {

/// How a value is converted to fit its schema parameter.
enum class Conversion : uint8_t {
  None,            ///< passed as is
  IntToDouble,     ///< int for a float parameter
  ToIntList,       ///< list/tuple of ints, or one int broadcast, for int[]
  ToDoubleList,    ///< list/tuple of numbers for float[]
  ToBoolList,      ///< list/tuple of bools for bool[]
  ToTensorList,    ///< list/tuple of tensors for Tensor[]
  ToOptTensorList, ///< list/tuple of tensors or None for Tensor?[]
  NumberToTensor,  ///< a Python number for a Tensor parameter (a wrapped 0-dim tensor)
  StringToDevice,  ///< "cpu" / "cuda:0" for a Device parameter
  TupleToList,     ///< a tuple for a generic list parameter
};

/// Where one schema argument's value comes from.
struct ArgSource {
  enum class Kind : uint8_t {
    Positional,  ///< args[index]
    Keyword,     ///< kwargs[index]
    Default,     ///< the schema's default value
    PackRest,    ///< args[index..] packed into an int list (x.view(2, 3))
  };
  Kind kind = Kind::Default;
  Conversion conversion = Conversion::None;
  uint32_t index = 0;
  /// For ToIntList from a single int: the list length (int[2] → 2), 1 if unsized.
  uint32_t repeat = 1;
};

/// A successful match of values against a schema.
struct SchemaMatch {
  /// One source per schema argument, in schema order.
  std::vector<ArgSource> sources;
  /// Lower is better: the number (and cost) of conversions.
  int penalty = 0;
  /// How many schema defaults were used (fewer is better on ties).
  int defaults = 0;
};

/// Whether `values` / named `kwargs` fit `schema`; nullopt if they do not.
std::optional<SchemaMatch> match_schema(const c10::FunctionSchema& schema,
                                        c10::ArrayRef<const c10::IValue*> args,
                                        c10::ArrayRef<std::string> kwarg_names,
                                        c10::ArrayRef<const c10::IValue*> kwargs);

/// Whether `schema` is an out= variant (keyword-only arguments it writes to).
bool is_out_schema(const c10::FunctionSchema& schema);

/// The value for schema argument `formal` from `source`, converted.
c10::IValue materialize(const ArgSource& source, const c10::Argument& formal,
                        c10::ArrayRef<const c10::IValue*> args,
                        c10::ArrayRef<const c10::IValue*> kwargs);

/// A cheap code for the kind of a value (tensor, int, list of ints ...). Two
/// calls whose values have the same codes match the same overload the same way.
uint8_t value_kind(const c10::IValue& v);

/// The Python-ish type name of a value for error messages ("Tensor", "int",
/// "List[int]", "tuple", "None").
std::string type_name(const c10::IValue& v);

/// "(Tensor, int, alpha=float)": the argument types of a call, for errors.
std::string describe_call(c10::ArrayRef<const c10::IValue*> args, c10::ArrayRef<std::string> kwarg_names,
                          c10::ArrayRef<const c10::IValue*> kwargs);

}  // namespace fx::detail
