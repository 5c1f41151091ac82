#pragma once
/// \file
/// Argument: what a Node's args and kwargs hold (torch.fx's `Argument`).
///
/// An Argument is an immutable value: None, bool, int, double, string, a
/// `Node*`, a dtype, device, layout or memory format, a constant `IValue`,
/// a Python slice (start/stop/step, each an Argument) or Ellipsis, or a
/// list / tuple / string-keyed ordered dict of Arguments. Copies are
/// cheap (aggregates share their immutable payload). Every traversal of the
/// nodes inside an argument goes through map_arg / for_each_node, so use
/// lists, copying, printing and execution agree on what "an input" is.

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fx {

class Node;
class Argument;

/// Positional arguments of a node (a Python tuple).
using ArgList = std::vector<Argument>;
/// Keyword arguments of a node, in insertion order (a Python dict).
using Kwargs = std::vector<std::pair<std::string, Argument>>;

/// One value inside a node's args or kwargs.
class Argument {
 public:
  /// What an Argument holds.
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Double,
    String,
    Node,
    ScalarType,
    Device,
    Layout,
    MemoryFormat,
    Constant,  ///< any other constant IValue (a tensor, a generic list ...)
    List,
    Tuple,
    Dict,
    Slice,     ///< Python slice(start, stop, step): x[:, 0] traces to getitem(x, (slice(None, None, None), 0))
    Ellipsis,  ///< Python Ellipsis (x[..., 1])
  };

  /// None.
  Argument() = default;
  /// None.
  Argument(std::nullptr_t) {}
  /// A bool.
  Argument(bool v) : kind_(Kind::Bool) { s_.b = v; }
  /// An int (Python int is 64-bit here).
  Argument(int v) : kind_(Kind::Int) { s_.i = v; }
  /// An int.
  Argument(int64_t v) : kind_(Kind::Int) { s_.i = v; }
  /// A float.
  Argument(double v) : kind_(Kind::Double) { s_.d = v; }
  /// A string.
  Argument(const char* v);
  /// A string.
  Argument(std::string v);
  /// A reference to the value another node produces.
  Argument(Node* v) : kind_(Kind::Node) { s_.node = v; }
  /// A dtype (prints as torch.float32).
  Argument(c10::ScalarType v) : kind_(Kind::ScalarType) { s_.dtype = v; }
  /// A device (prints as cpu / cuda:0).
  Argument(c10::Device v) : kind_(Kind::Device), device_(v) {}
  /// A layout (prints as torch.strided).
  Argument(c10::Layout v) : kind_(Kind::Layout) { s_.layout = v; }
  /// A memory format (prints as torch.channels_last).
  Argument(c10::MemoryFormat v) : kind_(Kind::MemoryFormat) { s_.memory_format = v; }

  /// Any IValue as a constant. None, bool, int, double, string, device and
  /// scalar lists are converted to their own kinds; other values (tensors,
  /// objects) are kept as Kind::Constant.
  static Argument from_ivalue(const c10::IValue& v);
  /// A Python list of arguments.
  static Argument list(std::vector<Argument> items);
  /// A Python tuple of arguments.
  static Argument tuple(std::vector<Argument> items);
  /// A Python dict with string keys, in the given order.
  static Argument dict(Kwargs items);
  /// A Python slice(start, stop, step); each part is None, an int or a Node
  /// (other values are kept and rejected when the slice is used, as Python does).
  static Argument slice(Argument start, Argument stop, Argument step);
  /// Python's Ellipsis (`...` in an index).
  static Argument ellipsis();

  /// What this holds.
  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_node() const { return kind_ == Kind::Node; }
  /// A list or a tuple.
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_slice() const { return kind_ == Kind::Slice; }

  /// The value; each throws fx::Error if the kind differs.
  bool to_bool() const;
  int64_t to_int() const;
  /// An int or a double, as double.
  double to_double() const;
  const std::string& to_string() const;
  Node* to_node() const;
  c10::ScalarType to_scalar_type() const;
  c10::Device to_device() const;
  c10::Layout to_layout() const;
  c10::MemoryFormat to_memory_format() const;
  const c10::IValue& to_constant() const;
  /// Items of a list or tuple.
  const std::vector<Argument>& items() const;
  /// The ints of an int-list argument (ATen's `int[]`, `int[N]`): the items
  /// of a list or tuple whose items are all ints. A single int is a
  /// one-item list; with `expand_to` > 0 a single int and a one-item list
  /// stand for `expand_to` copies of their value, as a 2-d convolution or
  /// pooling reads `stride=2` and `stride=[2]` as {2, 2} (pass the
  /// operator's spatial rank). Longer lists and the empty list are returned
  /// as they are, whatever `expand_to`. nullopt for anything else: None, a
  /// node, a double, a string, a list holding a non-int (a node, a double).
  std::optional<std::vector<int64_t>> to_int_list(size_t expand_to = 0) const;
  /// Entries of a dict.
  const Kwargs& dict_items() const;
  /// {start, stop, step} of a slice.
  const std::vector<Argument>& slice_parts() const;

  /// The argument as an IValue, with every node replaced by lookup(node).
  /// Lists of ints/doubles/bools/tensors become typed lists, as the
  /// dispatcher expects them.
  c10::IValue to_ivalue(const std::function<c10::IValue(Node*)>& lookup) const;
  /// As to_ivalue; throws fx::Error if the argument contains a node.
  c10::IValue to_ivalue() const;

  /// Structural equality (nodes compare by identity).
  bool operator==(const Argument& other) const;
  bool operator!=(const Argument& other) const { return !(*this == other); }

  /// Python's repr() of the value: what generated code prints
  /// ('a string', torch.float32, (x,), [1, 2], {'k': v}); nodes by name.
  std::string repr() const;
  /// Python's str() of the value: strings unquoted at the top level.
  std::string str() const;

 private:
  struct Payload;
  Kind kind_ = Kind::None;
  union Scalar {
    bool b;
    int64_t i;
    double d;
    Node* node;
    c10::ScalarType dtype;
    c10::Layout layout;
    c10::MemoryFormat memory_format;
  } s_{};
  c10::Device device_{c10::kCPU};
  std::shared_ptr<const Payload> payload_;  // String, Constant, List, Tuple, Dict, Slice
};

/// Calls fn(Node*) on every Node* inside arg, depth first, left to right.
template <class F>
void for_each_node(const Argument& arg, F&& fn) {
  switch (arg.kind()) {
    case Argument::Kind::Node: fn(arg.to_node()); return;
    case Argument::Kind::List:
    case Argument::Kind::Tuple:
      for (const auto& a : arg.items()) for_each_node(a, fn);
      return;
    case Argument::Kind::Dict:
      for (const auto& kv : arg.dict_items()) for_each_node(kv.second, fn);
      return;
    case Argument::Kind::Slice:
      for (const auto& a : arg.slice_parts()) for_each_node(a, fn);
      return;
    default: return;
  }
}
/// Calls fn(Node*) on every Node* inside every argument and keyword value.
template <class F>
void for_each_node(const ArgList& args, const Kwargs& kwargs, F&& fn) {
  for (const auto& a : args) for_each_node(a, fn);
  for (const auto& kv : kwargs) for_each_node(kv.second, fn);
}

/// torch.fx map_aggregate: rebuilds arg with fn applied to every leaf
/// (everything that is not a list, tuple, dict or slice).
Argument map_aggregate(const Argument& arg, const std::function<Argument(const Argument&)>& fn);
/// torch.fx map_arg: rebuilds arg with every Node* replaced by fn(node).
Argument map_arg(const Argument& arg, const std::function<Argument(Node*)>& fn);
/// map_arg over positional arguments.
ArgList map_arg(const ArgList& args, const std::function<Argument(Node*)>& fn);
/// map_arg over keyword arguments.
Kwargs map_arg(const Kwargs& kwargs, const std::function<Argument(Node*)>& fn);

/// torch.fx _format_arg: how str(graph) prints an argument (nodes as %name).
std::string format_arg(const Argument& arg);
/// format_arg of a positional tuple: "(%x, %y)".
std::string format_args(const ArgList& args);
/// format_arg of keyword arguments: "{alpha: 2}".
std::string format_kwargs(const Kwargs& kwargs);

/// Python's repr of a double ("2.0", "0.1", "1e-05", "inf").
std::string python_float_repr(double v);
/// torch's name of a dtype ("torch.float32").
std::string python_dtype_repr(c10::ScalarType t);

/// How a slice travels at run time: an IValue named tuple `fx.slice(start,
/// stop, step)` (IValue has no slice type); operator.getitem understands it.
c10::IValue make_slice_ivalue(c10::IValue start, c10::IValue stop, c10::IValue step);
/// Whether `v` was made by make_slice_ivalue.
bool is_slice_ivalue(const c10::IValue& v);
/// How Ellipsis travels at run time: an empty named tuple `fx.ellipsis`.
c10::IValue ellipsis_ivalue();
/// Whether `v` is ellipsis_ivalue().
bool is_ellipsis_ivalue(const c10::IValue& v);

/// Looks up a keyword argument; nullptr when absent.
const Argument* find_kwarg(const Kwargs& kwargs, const std::string& key);

}  // namespace fx
