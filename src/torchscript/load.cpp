// Loading TorchScript files, with one-line errors for bad files.
#include <fx/torchscript.h>
#include <fx/tensor_file.h>

#include "file_checks.h"
#include "pickle_check.h"

#include <torch/csrc/jit/serialization/import.h>

#include <fstream>

namespace fx {
namespace {

// Every tensor the module holds (parameters, buffers, tensor attributes, also
// inside lists / dicts) and every tensor constant of its methods' code.
void validate_module_tensors(const torch::jit::Module& module, const std::string& path) {
  for (const auto& a : module.named_attributes(/*recurse=*/true)) {
    if (a.value.isModule()) continue;
    validate_value(a.value, path + ": attribute '" + a.name + "'");
  }
  size_t constant = 0;
  for (const auto& m : module.modules()) {
    for (const auto& method : m.get_methods()) {
      std::vector<torch::jit::Block*> blocks{method.graph()->block()};
      while (!blocks.empty()) {
        torch::jit::Block* b = blocks.back();
        blocks.pop_back();
        for (torch::jit::Node* n : b->nodes()) {
          for (torch::jit::Block* sub : n->blocks()) blocks.push_back(sub);
          if (n->kind() != c10::prim::Constant || !n->hasAttribute(c10::attr::value) ||
              n->kindOf(c10::attr::value) != torch::jit::AttributeKind::t)
            continue;
          validate_tensor(n->t(c10::attr::value), path + ": tensor constant " + std::to_string(constant++) +
                                                       " of " + method.name());
        }
      }
    }
  }
}

// "Unknown builtin op: torchvision::nms. ..." names an operator that a
// library registers (not aten:: or prim::): say how to load one.
std::string with_library_hint(const std::string& msg) {
  const std::string unknown = "Unknown builtin op: ";
  if (msg.rfind(unknown, 0) != 0 || msg.compare(unknown.size(), 6, "aten::") == 0 ||
      msg.compare(unknown.size(), 6, "prim::") == 0)
    return msg;
  const std::string hint =
      " (an operator of a custom library? load it first: fx::load_library, fxcpp --load-library PATH)";
  const size_t at = msg.find(" at File \"");
  return at == std::string::npos ? msg + hint : msg.substr(0, at) + hint + msg.substr(at);
}

}  // namespace

torch::jit::Module load_torchscript(const std::string& path) {
  const uint64_t size = import_detail::check_regular_file(path, kMaxModelFileBytes, "a TorchScript file");
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ImportError(path + ": cannot be opened for reading");
    char magic[4] = {0, 0, 0, 0};
    in.read(magic, 4);
    if (in.gcount() < 4 || magic[0] != 'P' || magic[1] != 'K' || magic[2] != 3 || magic[3] != 4) {
      throw ImportError(path + ": not a TorchScript file (not a zip archive; expected a file saved by "
                               "torch.jit.save or ScriptModule.save)");
    }
  }
  // The zip directory first: libtorch trusts record sizes and offsets.
  std::vector<import_detail::ZipRecord> records;
  try {
    records = import_detail::check_zip_file(path, size);
  } catch (const ImportError& e) {
    const std::string msg = e.what();
    const std::string prefix = path + ": damaged zip archive";
    throw ImportError(path + ": truncated or damaged zip archive" +
                      (msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : ": " + msg));
  }
  bool has_code = false, has_constants = false;
  for (const auto& r : records) {
    const size_t slash = r.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string rest = r.name.substr(slash + 1);
    if (rest.rfind("code/", 0) == 0) has_code = true;
    if (rest == "constants.pkl") has_constants = true;
  }
  if (!has_code || !has_constants) {
    throw ImportError(path + ": not a TorchScript file (a zip archive without TorchScript code; torch.save "
                             "files need torch.jit.script/trace and .save): no " +
                      std::string(has_code ? "constants.pkl" : "code/") + " record");
  }
  // Every pickle walked (opcodes, stack, memo) and every storage it names
  // checked against its record, before libtorch's Unpickler runs.
  {
    std::shared_ptr<void> reader;
    import_detail::check_pickles(path, records, [&](const import_detail::ZipRecord& r) {
      return import_detail::read_record(path, r, reader);
    });
    // Every record but the tensor storages (the TorchScript code, stored or
    // deflated): libtorch's zip reader does not check CRCs and hands damaged
    // data to its lexer and type parser, which crash on some of it
    // (ScriptTypeParser::parseClassConstant, found by fuzz/import_fuzz.cpp).
    for (const auto& r : records) {
      const size_t slash = r.name.find('/');
      const bool storage = slash != std::string::npos && r.name.compare(slash + 1, 5, "data/") == 0;
      if (!storage && r.name.find("debug_pkl") == std::string::npos) import_detail::read_record(path, r, reader);
    }
  }
  // Every stored record (the tensor storages too) against its CRC-32 as libtorch reads it.
  const auto adapter = import_detail::checked_file_adapter(path, records);
  torch::jit::Module module;
  try {
    module = torch::jit::load(adapter, c10::Device(c10::kCPU));
  } catch (...) {
    adapter->throw_if_damaged();
    const std::string msg = import_detail::current_exception_text();
    if (msg.find("central directory") != std::string::npos || msg.find("failed reading") != std::string::npos ||
        msg.find("file read failed") != std::string::npos || msg.find("invalid header") != std::string::npos) {
      throw ImportError(path + ": truncated or damaged zip archive (" + msg + ")");
    }
    throw ImportError(path + ": cannot load TorchScript: " + with_library_hint(msg));
  }
  try {
    if (!module.type()->findMethod("forward")) {
      throw ImportError(path + ": the module (" + demangled_type_name(module) + ") has no forward method");
    }
    validate_module_tensors(module, path);
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw ImportError(path + ": cannot load TorchScript: " + import_detail::current_exception_text());
  }
  return module;
}

}  // namespace fx
