#pragma once
/// \file
/// remove_noops: removes operations that return their input unchanged
/// (the "identity / no-op" cleanup of torch.fx's experimental
/// optimization passes, which torch.fx leaves to each backend).
///
/// Removed, each replaced by its input:
///  - call_module of Identity modules (torch::nn::Identity, TorchScript nn.Identity);
///  - x * 1, x / 1, x + 0, x - 0 (aten::mul/div/add/sub, call_function or
///    call_method, any alpha), x.contiguous() on a contiguous value,
///    view/reshape/flatten to the shape it already has — only when
///    meta["tensor_meta"] (from tracing or ShapeProp) proves that input and
///    result have the same shape and dtype, so broadcasting and type
///    promotion (`bool_tensor + 0` is int64) can never change a value.
/// A node is kept when one of its users writes to it in place (replacing a
/// fresh tensor by its input would then mutate the input).

#include <fx/passes/pass_manager.h>

namespace fx {

/// Removes identity modules and no-op arithmetic from `gm` and from every
/// branch and loop body below it (fx/control_flow.h), in place.
PassResult remove_noops(std::shared_ptr<GraphModule> gm);

}  // namespace fx
