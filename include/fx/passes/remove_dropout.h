#pragma once
/// \file
/// remove_dropout: drops every dropout for inference (torch.fx
/// `experimental/optimization.remove_dropout`).
///
/// In eval mode a dropout returns its input, so each one is replaced by its
/// input and erased: call_module nodes of dropout modules (torch::nn
/// Dropout/Dropout2d/Dropout3d/AlphaDropout/FeatureAlphaDropout, and the
/// same TorchScript classes from import), call_function nodes of
/// aten::dropout, feature_dropout, alpha_dropout, feature_alpha_dropout (and
/// their in-place forms), and call_method nodes of the same names.
///
/// Differences from torch.fx: Python re-traces the model and only knows
/// nn.Dropout modules; this edits any GraphModule in place (traced or
/// imported) and also removes the functional forms, which is what C++
/// tracing produces for parameter-free modules. Like Python, it removes a
/// dropout whatever its training flag: the result is an inference graph.

#include <fx/passes/pass_manager.h>

namespace fx {

/// Replaces every dropout of `gm`, and of every branch and loop body below
/// it (fx/control_flow.h), by its input (in place); modified is whether any
/// was found. Dropout submodules no node uses any more are
/// deleted.
PassResult remove_dropout(std::shared_ptr<GraphModule> gm);

}  // namespace fx
