#pragma once
/// \file
/// ShapeGuard: the shape and dtype a graph input was specialised to, checked
/// on every run.
///
/// Why: fx::symbolic_trace runs the code on example values, so sizes the code
/// reads (`x.size(0)` in a view, an arange length) are baked into the graph as
/// constants. Running the graph on an input of another size would compute
/// with the traced sizes and could return wrong numbers without a word. The
/// tracer therefore stores a guard in `meta["shape_guard"]` of every tensor
/// placeholder, and GraphModule::forward (its compiled plan) and
/// Interpreter::run check the given tensor against it before anything runs:
/// an fx::ShapeGuardError names the input, the traced shape and dtype and the
/// given ones. Dimensions declared dynamic (TraceOptions::dynamic_dims) are
/// kDynamicDim in the guard and accept any size.
///
/// Which graphs have guards: only placeholders carrying `meta["shape_guard"]`
/// are checked, so graphs built by hand or imported from TorchScript have
/// none unless someone sets the key; `meta["tensor_meta"]` alone (ShapeProp's
/// output) is never a guard. fx::save / fx::load keep the guard (it is a
/// meta value of its own kind, "shape_guard", in the file's node meta) unless
/// SaveOptions::keep_meta is off. Only tensor inputs are guarded (not lists
/// or tuples of tensors).
///
/// Differences from torch.fx: torch.fx traces with symbolic sizes and has no
/// input guards; torch.export / dynamo guard inputs the same way.

#include <fx/error.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fx {

class Node;

/// The Node::meta() key holding a placeholder's ShapeGuard.
inline constexpr const char* kShapeGuardKey = "shape_guard";

/// A ShapeGuard::shape entry that accepts any size.
inline constexpr int64_t kDynamicDim = -1;

/// A given input does not match the shape or dtype its graph was traced with.
class ShapeGuardError : public Error {
 public:
  using Error::Error;
};

/// What a tensor input must look like for the graph to be valid.
struct ShapeGuard {
  /// Size of every dimension; kDynamicDim for a dimension that may vary.
  std::vector<int64_t> shape;
  /// Element type.
  c10::ScalarType dtype = c10::ScalarType::Float;

  /// Whether `t` (a defined tensor) has this rank, these sizes and this dtype.
  bool matches(const at::Tensor& t) const {
    if (t.scalar_type() != dtype) return false;
    const c10::IntArrayRef sizes = t.sizes();
    if (sizes.size() != shape.size()) return false;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != sizes[i] && shape[i] != kDynamicDim) return false;
    }
    return true;
  }

  /// "[?, 3, 32, 32]": the shape, a dynamic dimension as "?".
  std::string shape_str() const;

  bool operator==(const ShapeGuard& o) const { return shape == o.shape && dtype == o.dtype; }
  bool operator!=(const ShapeGuard& o) const { return !(*this == o); }
};

/// The guard of placeholder `n` (meta["shape_guard"]), or nullptr if it has
/// none. Throws fx::Error naming the node if the key holds another type.
const ShapeGuard* shape_guard_of(const Node& n);

/// Throws the ShapeGuardError for a `value` that `guard` does not accept
/// (see check_shape_guard).
[[noreturn]] void throw_shape_guard_error(const ShapeGuard& guard, const c10::IValue& value, const char* who,
                                          const std::string& input);

/// Throws ShapeGuardError unless `value` is a tensor `guard` matches (a few
/// nanoseconds when it is). `who` starts the message ("forward()"), `input`
/// is the placeholder's name: "forward(): input 'x' was traced with shape
/// [1, 3] (dtype torch.float32) but got shape [2, 3]; declare dimension 0
/// dynamic (TraceOptions::dynamic_dims) to allow other sizes".
inline void check_shape_guard(const ShapeGuard& guard, const c10::IValue& value, const char* who,
                              const std::string& input) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (t.defined() && guard.matches(t)) return;
  }
  throw_shape_guard_error(guard, value, who, input);
}

}  // namespace fx
