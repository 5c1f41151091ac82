#pragma once
/// \file
/// The configuration of a torch.nn layer as Python spells it: its class name
/// ("Conv2d") and its non-tensor attributes by their Python names (stride,
/// padding, eps, training ...). Passes that rewrite a module call as the
/// functional call it runs (fx::freeze_modules) read layers through this,
/// whether the layer is a C++ torch::nn module or an imported TorchScript
/// leaf: the importer registers its leaf type with register_module_attributes.
///
/// torch.fx reads these attributes from the Python object directly
/// (`conv.stride`); C++ modules keep them in typed options, hence this table.

#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>
#include <typeindex>
#include <unordered_map>

namespace torch::nn {
class Module;
}

namespace fx {

/// A layer's Python class name and non-tensor attributes.
struct ModuleAttributes {
  /// The Python class name without its module ("Conv2d", "BatchNorm2d").
  std::string type;
  /// The attributes by Python name: ints and tuples of ints as int lists
  /// (stride = [1, 1]), strings, floats, bools; "training" is always set.
  std::unordered_map<std::string, c10::IValue> attributes;

  /// The attribute `name`; throws fx::Error naming the type if it is missing.
  const c10::IValue& at(const std::string& name) const;
};

/// The class name and attributes of `module`, or nullopt for modules that
/// are not a known torch.nn layer (nor of a registered type). Known C++
/// layers: Conv1d/2d/3d, Linear, BatchNorm1d/2d/3d, LayerNorm, ReLU, ReLU6,
/// Hardtanh, SiLU, GELU, Sigmoid, Tanh, Hardswish, Hardsigmoid, Dropout*,
/// Identity, Flatten, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Softmax.
std::optional<ModuleAttributes> module_attributes(const torch::nn::Module& module);

/// Teaches module_attributes about modules whose dynamic type is `type`
/// (the importer registers its TorchScript leaves). fn returns nullopt for
/// modules it does not describe.
void register_module_attributes(std::type_index type,
                                std::function<std::optional<ModuleAttributes>(const torch::nn::Module&)> fn);

}  // namespace fx
