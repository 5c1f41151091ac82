#pragma once
/// \file
/// Custom operator libraries: shared libraries that register operators with
/// libtorch (TORCH_LIBRARY), such as torchvision's `_C` library with
/// torchvision::nms. A TorchScript file that calls such an operator loads
/// only after its library is loaded.

#include <string>

namespace fx {

/// Loads the shared library at `path` into the process, as Python's
/// torch.ops.load_library does (dlopen with RTLD_NOW | RTLD_GLOBAL): its
/// operators become known to the dispatcher and to TorchScript, so models
/// calling them import and run. Loading a library again does nothing more.
/// A path without '/' is searched for as the dynamic loader does. Throws
/// fx::ImportError naming the path and the loader's reason.
void load_library(const std::string& path);

}  // namespace fx
