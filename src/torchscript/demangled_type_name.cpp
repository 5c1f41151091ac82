// fx::demangled_type_name: a TorchScript module's class name without mangling.
#include <fx/torchscript.h>

#include <torch/csrc/jit/api/module.h>

namespace fx {

std::string demangled_type_name(const torch::jit::Module& module) {
  std::string name = module.type()->name() ? module.type()->name()->qualifiedName() : "";
  // "__torch__.torch.nn.modules.conv.___torch_mangle_0.Conv2d" → "__torch__.torch.nn.modules.conv.Conv2d"
  const std::string mangle = "___torch_mangle_";
  size_t pos;
  while ((pos = name.find(mangle)) != std::string::npos) {
    size_t dot = name.find('.', pos);
    name.erase(pos, dot == std::string::npos ? std::string::npos : dot - pos + 1);
  }
  return name;
}

}  // namespace fx
