#pragma once
// Internal: layout choices stay unobservable (lower_to_onednn).
//
// fxcpp::onednn_conv2d writes channels_last whatever its input's layout, and
// the ops that follow it (element-wise, pooling, more convolutions) keep
// that layout. Their values do not depend on strides, so inside such a
// region the layout is free; anything else that reads a value of the
// region — view, reshape, flatten, as_strided, a graph output, a
// call_module, a registered or unknown function, any op not known to be
// layout-free — could see the difference (a view that eager allows fails,
// as_strided reads other elements, an output has other strides). Such a
// value is replaced, right where it is made, by
// fxcpp::restore_layout(value, format): a copy in the memory format the
// unoptimised program gave it, which is the format eager ATen gives the
// region's first convolution for its input (fxcpp::suggest_memory_format of
// that input, computed at run time: contiguous for a contiguous input,
// channels_last for a channels_last one).
#include <fx/graph.h>

#include <cstddef>

namespace fx::passes_detail {

/// Inserts the restore_layout nodes `g` needs after lowering (see above);
/// returns how many.
size_t keep_layouts(Graph& g);

}  // namespace fx::passes_detail
