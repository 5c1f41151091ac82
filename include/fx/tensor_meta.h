#pragma once
/// \file
/// TensorMetadata: what a node's `meta["tensor_meta"]` holds (torch.fx
/// `torch.fx.passes.shape_prop.TensorMetadata`).
///
/// symbolic_trace sets it on every node whose value is a tensor. A node whose
/// value is a tuple or list of tensors (aten::max.dim, an LSTM call_module)
/// gets a `std::vector<TensorMetadata>` instead, flattened in order.

#include <fx/argument.h>

#include <ATen/core/Tensor.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fx {

class Node;

/// Shape, dtype and layout of a tensor value, as torch.fx's ShapeProp records them.
struct TensorMetadata {
  /// Sizes of every dimension.
  std::vector<int64_t> shape;
  /// Element type.
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// Whether autograd would track the value.
  bool requires_grad = false;
  /// Strides of every dimension, in elements.
  std::vector<int64_t> stride;
  /// The first of contiguous_format, channels_last, channels_last_3d the
  /// tensor is contiguous in; nullopt if none.
  std::optional<c10::MemoryFormat> memory_format;
  /// Whether the tensor is quantized.
  bool is_quantized = false;

  /// The metadata of `t` (requires_grad taken from `t` unless given).
  static TensorMetadata from_tensor(const at::Tensor& t, std::optional<bool> requires_grad = std::nullopt) {
    TensorMetadata m;
    m.shape = t.sizes().vec();
    m.dtype = t.scalar_type();
    m.requires_grad = requires_grad.value_or(t.requires_grad());
    m.stride = t.strides().vec();
    for (c10::MemoryFormat f :
         {c10::MemoryFormat::Contiguous, c10::MemoryFormat::ChannelsLast, c10::MemoryFormat::ChannelsLast3d}) {
      if ((f == c10::MemoryFormat::ChannelsLast && t.dim() != 4) ||
          (f == c10::MemoryFormat::ChannelsLast3d && t.dim() != 5))
        continue;
      if (t.is_contiguous(f)) {
        m.memory_format = f;
        break;
      }
    }
    m.is_quantized = t.is_quantized();
    return m;
  }

  /// torch.fx's repr: "TensorMetadata(shape=torch.Size([2, 3]), dtype=torch.float32, ...)".
  std::string str() const {
    auto ints = [](const std::vector<int64_t>& v) {
      std::ostringstream os;
      for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
      return os.str();
    };
    std::ostringstream os;
    os << "TensorMetadata(shape=torch.Size([" << ints(shape) << "]), dtype=" << python_dtype_repr(dtype)
       << ", requires_grad=" << (requires_grad ? "True" : "False") << ", stride=(" << ints(stride)
       << (stride.size() == 1 ? ",)" : ")") << ", memory_format=";
    if (!memory_format) {
      os << "None";
    } else if (*memory_format == c10::MemoryFormat::Contiguous) {
      os << "torch.contiguous_format";
    } else if (*memory_format == c10::MemoryFormat::ChannelsLast) {
      os << "torch.channels_last";
    } else {
      os << "torch.channels_last_3d";
    }
    os << ", is_quantized=" << (is_quantized ? "True" : "False") << ", qparams={})";
    return os.str();
  }

  bool operator==(const TensorMetadata& o) const {
    return shape == o.shape && dtype == o.dtype && requires_grad == o.requires_grad && stride == o.stride &&
           memory_format == o.memory_format && is_quantized == o.is_quantized;
  }
  bool operator!=(const TensorMetadata& o) const { return !(*this == o); }
};

/// The TensorMetadata in `n->meta()["tensor_meta"]` (from the tracer or
/// ShapeProp); nullptr when there is none or when it holds a
/// std::vector<TensorMetadata> (a tuple or list value).
const TensorMetadata* tensor_meta_of(const Node* n);

}  // namespace fx
