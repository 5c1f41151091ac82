#pragma once
/// \file
/// reinplace: an out-of-place ATen op whose first input is a fresh tensor
/// that nothing reads afterwards becomes its in-place form (relu → relu_,
/// mul → mul_ ...), saving an allocation and a pass over memory. What
/// torch.fx 2.x's passes.reinplace does for functionalized graphs; fxcpp
/// is conservative instead of functionalizing: the input must come from an
/// op that allocates its result, every other reader of it must run earlier
/// and make a fresh result of its own (so no view of it outlives it), and
/// for binary ops tensor_meta must show the result has the input's shape
/// and dtype (no broadcasting into it, no type promotion).
///
/// Ops: relu, hardtanh, silu, sigmoid, hardswish, hardsigmoid, gelu, tanh
/// (input and result of the same dtype per tensor_meta), add, sub, mul, div.

#include <fx/passes/pass_manager.h>

namespace fx {

/// Rewrites the ops of `gm` that may run in place (see the file comment);
/// modified when any did. `count`, when given, receives how many.
PassResult reinplace(std::shared_ptr<GraphModule> gm, size_t* count = nullptr);

}  // namespace fx
