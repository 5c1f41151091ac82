// fx::import_torchscript and the default leaf rule.
#include <fx/import.h>

#include "import/file_checks.h"
#include "import/importer.h"

#include <torch/csrc/jit/api/module.h>

#include <unordered_set>

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

bool is_torch_nn_leaf(const torch::jit::Module& /*module*/, const std::string& type_name,
                      const std::string& /*qualified_name*/) {
  static const std::unordered_set<std::string> containers = {"Sequential", "ModuleList", "ModuleDict",
                                                             "ParameterList", "ParameterDict", "Module"};
  const bool torch_nn = type_name.rfind("__torch__.torch.nn.", 0) == 0 ||
                        type_name.rfind("__torch__.torch.ao.nn.", 0) == 0;
  if (!torch_nn) return false;
  size_t dot = type_name.rfind('.');
  return containers.count(type_name.substr(dot + 1)) == 0;
}

std::shared_ptr<GraphModule> import_torchscript(const torch::jit::Module& module, const ImportOptions& options) {
  return import_detail::Importer(module, options).run();
}

std::shared_ptr<GraphModule> import_torchscript(const std::string& path, const ImportOptions& options) {
  return import_torchscript(load_torchscript(path), path, options);
}

std::shared_ptr<GraphModule> import_torchscript(const torch::jit::Module& module, const std::string& path,
                                                const ImportOptions& options) {
  try {
    return import_torchscript(module, options);
  } catch (const ImportError& e) {
    throw ImportError(path + ": " + e.what());
  } catch (const Error&) {
    throw;
  } catch (...) {
    // libtorch reads some records lazily (debug_pkl for source positions):
    // their errors come only now.
    throw ImportError(path + ": cannot import TorchScript: " + import_detail::current_exception_text());
  }
}

}  // namespace fx
