#pragma once
// What fuse_kernels knows of ATen's operators (lowering.cpp): whether a node
// is fusible, of which kind, and the operators of a fused kernel's program
// (program.h) it becomes, as ATen's CPU kernels compute it. The grouping and
// the graph surgery are fuse_kernels.cpp's.
#include "kernels/program.h"

#include <fx/node.h>
#include <fx/tensor_meta.h>

#include <optional>
#include <unordered_map>

namespace fx::compiler::detail {

/// What a fusible node is: arithmetic on elements, a reduction over the
/// last dimension, or an operator made of both (softmax, layer norm, their
/// backward formulas).
enum class Kind { Pointwise, Reduction, Composite };

/// Emits a node's operators into a program; `values` maps the nodes
/// already in it (the group's inputs and earlier members) to their values.
struct Builder {
  /// The program written.
  Program& p;
  /// Nodes already in the program -> their values.
  const std::unordered_map<const Node*, int>& values;

  /// `a` (a node of `values`, or a number) as an operand.
  Operand of(const Argument& a) const {
    Operand o;
    if (a.is_node()) {
      o.value = values.at(a.to_node());
    } else {
      o.kind = Operand::Kind::Number;
      o.number = a.kind() == Argument::Kind::Bool ? double(a.to_bool()) : a.to_double();
    }
    return o;
  }
  /// Appends the operator `name` on `args`; its value.
  Operand op(const std::string& name, std::vector<Operand> args) {
    p.ops.push_back(Op{name, std::move(args), false, 0});
    Operand o;
    o.value = static_cast<int>(p.ops.size()) - 1;
    return o;
  }
  /// The number `v` as an operand.
  static Operand number(double v) {
    Operand o;
    o.kind = Operand::Kind::Number;
    o.number = v;
    return o;
  }
};

/// n's tensor_meta when it is a float32 (not quantized) tensor, else nullptr.
const TensorMetadata* float_meta(const Node* n);

/// What `n` is to the fuser (nullopt: not fusible); with `b`, emits its
/// operators and sets `*out` to its value.
std::optional<Kind> lower(const Node* n, Builder* b, Operand* out);

/// The shape a node of kind `k` iterates over: a reduction's or a
/// composite's input's, a pointwise node's output's.
std::vector<int64_t> iteration_shape(const Node* n, Kind k);

}  // namespace fx::compiler::detail
