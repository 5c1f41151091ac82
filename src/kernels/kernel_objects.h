#pragma once
// Internal: the kernel objects offered by loaded files (fused_kernel.h's
// offer_kernel_object), looked up by the first use of a program.
#include <fx/compiler/fused_kernel.h>

#include <optional>
#include <string>

namespace fx::compiler::detail {

/// The object offered for the kernel whose C++ hashes to `source_hash`, if any.
std::optional<KernelObject> offered_object(const std::string& source_hash);

}  // namespace fx::compiler::detail
