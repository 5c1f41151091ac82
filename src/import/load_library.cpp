// fx::load_library: custom operator libraries, as torch.ops.load_library.
#include <fx/error.h>
#include <fx/load_library.h>

#include <dlfcn.h>
#include <sys/stat.h>

namespace fx {

void load_library(const std::string& path) {
  if (path.empty()) throw ImportError("load_library: no library path given");
  if (path.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw ImportError(path + ": no such file (an operator library to load)");
    if (S_ISDIR(st.st_mode)) throw ImportError(path + ": is a directory, not a shared library");
  }
  // Never closed: the operators it registered stay in use.
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* why = ::dlerror();
    throw ImportError(path + ": cannot load the library: " + (why ? why : "unknown reason"));
  }
}

}  // namespace fx
