// Loading TorchScript files, with one-line errors for bad files.
#include <fx/import.h>

#include <torch/csrc/jit/serialization/import.h>

#include <fstream>
#include <sys/stat.h>

namespace fx {
namespace {

std::string first_line(const std::string& s) {
  size_t nl = s.find('\n');
  return s.substr(0, nl);
}

}  // namespace

torch::jit::Module load_torchscript(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw ImportError(path + ": no such file");
  if (S_ISDIR(st.st_mode)) throw ImportError(path + ": is a directory, not a TorchScript file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path + ": cannot be opened for reading");
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  if (in.gcount() < 4 || magic[0] != 'P' || magic[1] != 'K' || magic[2] != 3 || magic[3] != 4) {
    throw ImportError(path + ": not a TorchScript file (not a zip archive; expected a file saved by "
                             "torch.jit.save or ScriptModule.save)");
  }
  in.close();
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    if (msg.find("central directory") != std::string::npos || msg.find("failed reading") != std::string::npos ||
        msg.find("file read failed") != std::string::npos || msg.find("invalid header") != std::string::npos) {
      throw ImportError(path + ": truncated or damaged zip archive (" + first_line(msg) + ")");
    }
    if (msg.find("constants.pkl") != std::string::npos || msg.find("code/") != std::string::npos ||
        msg.find("not found") != std::string::npos) {
      throw ImportError(path + ": not a TorchScript file (a zip archive without TorchScript code; torch.save "
                               "files need torch.jit.script/trace and .save): " + first_line(msg));
    }
    throw ImportError(path + ": cannot load TorchScript: " + first_line(msg));
  } catch (const std::exception& e) {
    throw ImportError(path + ": cannot load TorchScript: " + first_line(e.what()));
  }
  if (!module.type()->findMethod("forward")) {
    throw ImportError(path + ": the module (" + demangled_type_name(module) + ") has no forward method");
  }
  return module;
}

}  // namespace fx
