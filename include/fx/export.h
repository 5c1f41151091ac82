#pragma once
/// \file
/// Export to TorchScript: a GraphModule — traced from C++, imported from a
/// .pt file, rewritten by passes — becomes a torch::jit::Module that stock
/// TorchScript runs (`torch::jit::load` in C++, `torch.jit.load` in Python,
/// mobile runtimes), with the same outputs.
///
/// Why: torch.fx graphs leave Python through `torch.jit.script(gm)`, which
/// compiles the generated Python code. fxcpp has no Python at run time, so
/// the TorchScript graph is built directly, node by node:
///  - the module is `__torch__.fxcpp.<class_name>`; every parameter, buffer
///    and submodule of the GraphModule becomes an attribute of the same
///    name, the module hierarchy a hierarchy of TorchScript submodules
///    (TorchScript attribute names cannot contain dots); get_attr nodes are
///    prim::GetAttr chains;
///  - call_function nodes on operators ("aten::add.Tensor", "aten::size.default"
///    ...) call the TorchScript operator of that name (and overload, when
///    the target names one); operator.* builtins become TorchScript's own
///    (aten::add.int, aten::__getitem__.t, prim::TupleIndex, aten::select /
///    aten::slice / aten::index for tensor indexing ...); torch._assert
///    becomes an `if` that raises AssertionError; call_method nodes are the
///    aten::<method> operators (float() ... are aten::to);
///  - call_module nodes: TorchScript leaves from import are their own
///    TorchScript submodules (prim::CallMethod forward); nested
///    GraphModules (split_module) are exported recursively as submodules;
///    run-time control flow (fx/control_flow.h) becomes TorchScript's own:
///    a CondModule call a prim::If whose blocks are its two branch graphs
///    inlined, a WhileLoopModule call a prim::Loop whose block is its body
///    graph inlined (the branch / body modules are mirrored for their
///    attributes and submodules, with no forward of their own);
///    the torch::nn C++ layers that tracing keeps as leaves (Linear, Conv*,
///    ConvTranspose*, BatchNorm*, LayerNorm, GroupNorm, Embedding) are
///    inlined as the ATen operator their options imply (aten::linear,
///    aten::conv2d ...), reading their parameters from the submodule;
///  - the forward graph is checked with TorchScript's lint before use.
///
/// Differences from torch.fx: torch.jit.script(gm) can export anything the
/// TorchScript compiler accepts; here the supported targets are fixed (the
/// list above). Anything else — a C++ function registered with
/// fx::register_function, a C++ module type without a TorchScript form
/// (LSTM, user modules), an argument TorchScript cannot type — is an
/// fx::ExportError naming the node, thrown before any file is written.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <torch/csrc/jit/api/module.h>

#include <string>

namespace fx {

/// A GraphModule that cannot be expressed in TorchScript, or a file that
/// cannot be written. The message is one line naming the node (or the path).
class ExportError : public Error {
 public:
  using Error::Error;
};

/// Builds the TorchScript module of `gm` in memory: `forward` computes what
/// gm.forward does (on the same tensors: parameters and buffers are shared,
/// not copied). The module's training flag is gm's. Throws fx::ExportError
/// naming the first node that has no TorchScript form.
torch::jit::Module to_torchscript(GraphModule& gm);

/// Writes to_torchscript(gm) to `path` as a TorchScript archive (.pt) that
/// torch::jit::load and torch.jit.load read. The write is atomic: the file
/// is written beside `path` under a temporary name and renamed, so a failed
/// export leaves no file and never clobbers an existing one. Throws
/// fx::ExportError (nothing written) on a graph that cannot be exported or
/// a path that cannot be written.
void export_torchscript(GraphModule& gm, const std::string& path);

}  // namespace fx
