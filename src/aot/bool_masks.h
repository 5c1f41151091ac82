#pragma once
// Random 0/1 masks saved as bool (bool_masks.cpp).

#include <fx/graph.h>

#include <cstddef>

namespace fx::aot_impl {

/// Reads every 0/1 mask that aten::bernoulli_ draws and a scalar division or
/// multiplication then scales (dropout's decomposition) through a bool copy:
/// `to(view(to(mask, bool), uint8), dtype)` right after the draw, and the
/// scaling reads that instead. The values are the same to the bit; the min
/// cut can then save the bool (1 byte an element) rather than the mask (4).
/// Returns how many masks it rewrote.
size_t read_random_masks_as_bool(Graph& g);

}  // namespace fx::aot_impl
