// fx::import_torchscript and the default leaf rule.
#include <fx/import.h>

#include "torchscript/file_checks.h"
#include "import/importer.h"

#include <torch/csrc/jit/api/module.h>

#include <unordered_set>

namespace fx {

bool is_torch_nn_leaf(const torch::jit::Module& /*module*/, const std::string& type_name,
                      const std::string& /*qualified_name*/) {
  static const std::unordered_set<std::string> containers = {"Sequential", "ModuleList", "ModuleDict",
                                                             "ParameterList", "ParameterDict", "Module"};
  const bool torch_nn = type_name.rfind("__torch__.torch.nn.", 0) == 0 ||
                        type_name.rfind("__torch__.torch.ao.nn.", 0) == 0;
  if (!torch_nn) return false;
  // torch.nn's transformer layers are written out by the importer (their
  // fast-path checks would hide their linears and attention).
  if (import_detail::is_opened_transformer_type(type_name)) return false;
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
