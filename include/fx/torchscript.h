#pragma once
/// \file
/// TorchScript modules as fxcpp reads them, below the importer (library
/// fxcpp_torchscript, which fx::load also stands on): load_torchscript, a
/// torch::jit::load behind fxcpp's file checks; the demangled class name of
/// a module; the LeafPredicate that says which submodules are leaves.
/// fx/import.h includes this header.

#include <fx/error.h>

#include <cstdint>
#include <functional>
#include <string>

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace fx {

/// Decides whether a submodule is a leaf (kept as one call_module node).
/// `type_name` is the module's TorchScript class name without mangling
/// ("__torch__.torch.nn.modules.conv.Conv2d"); `qualified_name` is its path
/// from the root ("layer1.0.conv1").
using LeafPredicate =
    std::function<bool(const torch::jit::Module& module, const std::string& type_name,
                       const std::string& qualified_name)>;

/// The largest TorchScript file load_torchscript opens: 16 GiB.
constexpr uint64_t kMaxModelFileBytes = uint64_t{16} << 30;

/// Loads a TorchScript file (torch::jit::load) on the CPU. Throws
/// fx::ImportError with one line naming the file and the problem: missing,
/// a directory / device / FIFO, larger than kMaxModelFileBytes, not a zip
/// archive, truncated or damaged zip directory, a torch.save file that is not
/// TorchScript, no forward method, or a parameter / buffer / attribute /
/// tensor constant whose storage is smaller than its sizes and strides need
/// (see fx::validate_tensor).
///
/// What is guaranteed for untrusted files: the path is checked to be a
/// regular file of bounded size before it is opened for libtorch; the zip
/// directory is parsed and checked (every record and header inside the file,
/// sizes consistent, stored or deflate only) before torch::jit::load sees it;
/// every pickle record (data.pkl, constants.pkl, the debug_pkl records, also
/// when deflated) is walked first with an opcode whitelist and a simulated
/// stack and memo, and every storage it names must have a record at least as
/// large as the storage claims; any c10::Error or std::bad_alloc from
/// libtorch becomes one fx::ImportError line; no loaded tensor reaches a
/// kernel unless validated (fx::validate_tensor). Not guaranteed: the
/// TorchScript source inside valid records is still compiled by libtorch,
/// which can crash on some damaged sources (seen only after thousands of
/// damaged loads in one process: ScriptTypeParser::parseClassConstant). A
/// caller that must survive that runs the load in a child process, as the
/// fxcpp command line does (tools/fxcpp/main.cpp).
torch::jit::Module load_torchscript(const std::string& path);

/// The class name of a TorchScript module type without the
/// "___torch_mangle_N." parts ("__torch__.torch.nn.modules.conv.Conv2d").
std::string demangled_type_name(const torch::jit::Module& module);

}  // namespace fx
