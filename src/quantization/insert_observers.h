#pragma once
// Internal: prepare's second half, which prepare_qat shares (defined in prepare.cpp).
#include <fx/quantization/prepare.h>

#include <memory>

namespace fx::quantization::detail {

/// prepare's second half: observers (or fake quantizers) placed by
/// `mapping` into `gm`, which is fused and shape-propagated (node meta
/// "tensor_meta"); fills `report`'s nodes and observer counts.
void insert_observers(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& mapping, PrepareReport& report);

}  // namespace fx::quantization::detail
