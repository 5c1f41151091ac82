// The kernel cache: generated C++ compiled by the system's compiler into a
// shared object, kept on disk under a hash of what made it, loaded with
// dlopen (as TorchInductor's C++ backend caches its kernels).
//
// A shared object runs its code when loaded, so the cache trusts nothing it
// did not write itself: the folder is created mode 0700, and a folder or an
// entry owned by another user, or writable by group or others, is refused
// with one line. An entry is written to a temporary file and renamed into
// place, so two processes compiling the same kernel at once both succeed; an
// entry whose checksum does not match (a truncated or damaged file) is
// rebuilt, never loaded.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fx::compiler {

/// One kernel to build: C++ source and the name of the extern "C" function
/// to look up in it.
struct KernelSource {
  /// The complete translation unit.
  std::string source;
  /// The extern "C" symbol returned by KernelCache::load.
  std::string symbol;
};

/// What one load did (for reports and tests).
struct LoadInfo {
  /// The entry's key: a hash of the source, the compiler's version and the flags (32 hex digits).
  std::string key;
  /// The shared object's path in the cache folder.
  std::string path;
  /// True when this call ran the compiler (a cold entry, or a damaged one rebuilt).
  bool compiled = false;
  /// True when an entry was found damaged (checksum or size) and rebuilt.
  bool rebuilt = false;
  /// Milliseconds spent compiling (0 when cached).
  double compile_ms = 0;
};

/// A folder of compiled kernels. Thread-safe; one per folder per process is
/// enough (KernelCache::global()).
class KernelCache {
 public:
  /// A cache in `folder` (created mode 0700 on first use, with its parents).
  explicit KernelCache(std::string folder);

  /// The process's cache: $FXCPP_KERNEL_CACHE, else $XDG_CACHE_HOME/fxcpp/kernels,
  /// else $HOME/.cache/fxcpp/kernels.
  static KernelCache& global();

  /// The folder global() uses, resolved from the environment now (exposed for tests):
  /// $FXCPP_KERNEL_CACHE, else $XDG_CACHE_HOME/fxcpp/kernels (an absolute $XDG_CACHE_HOME),
  /// else $HOME/.cache/fxcpp/kernels, else the user's home from the password database.
  static std::string default_folder();

  /// The folder.
  const std::string& folder() const { return folder_; }

  /// The compiler command: $FXCPP_CXX, else $CXX, else "g++".
  static std::string compiler();

  /// True when the compiler runs (`compiler() --version` exits 0); probed once per process.
  static bool compiler_available();

  /// The first line of `compiler() --version` (part of every key); empty when unavailable.
  static std::string compiler_version();

  /// Compiles `kernel.source` with `flags` unless the cache holds it, loads
  /// it, and returns the address of `kernel.symbol`. The library stays loaded
  /// for the process's life. Throws fx::Error in one line naming the key and
  /// the reason: no compiler, the compiler's first error line, a refused
  /// folder or entry, a missing symbol.
  void* load(const KernelSource& kernel, const std::vector<std::string>& flags, LoadInfo* info = nullptr);

  /// load() for several kernels, compiling the missing ones `jobs` at a time
  /// (0: one per hardware thread). Results in the order given; the first
  /// failure is thrown after every job has finished.
  std::vector<void*> load_all(const std::vector<KernelSource>& kernels, const std::vector<std::string>& flags,
                              int jobs = 0, std::vector<LoadInfo>* infos = nullptr);

  /// The key load() would use (exposed for tests).
  static std::string key_of(const std::string& source, const std::vector<std::string>& flags);

  /// Why the file at `path` is not to be loaded as code: owned by another
  /// user, writable by its group or by others, not a regular file, or not
  /// there ("owned by uid 0, not by this user (uid 1000)"); empty when it may be.
  static std::string distrust_file(const std::string& path);

  /// The hash the keys are made of, over `parts` (each ended by a NUL, so
  /// ("ab", "c") and ("a", "bc") differ): two 64-bit FNV-1a walks, 32 hex digits.
  static std::string hash(const std::vector<std::string>& parts);

  /// The shared object load() would load for `kernel`, compiling it first if
  /// the cache does not hold it (without its trailer: the bytes the compiler
  /// wrote). Throws what load() throws.
  std::string object(const KernelSource& kernel, const std::vector<std::string>& flags, LoadInfo* info = nullptr);

  /// Loads a shared object held in memory (a kernel object a file carried:
  /// an anonymous memory file, dlopen'ed by its /proc/self/fd path, never on
  /// disk) and returns the address of `symbol`; the same bytes are loaded
  /// once per process. Throws fx::Error in one line naming `name` when the
  /// object does not load or lacks the symbol.
  static void* load_object(const std::string& name, const std::string& bytes, const std::string& symbol);

 private:
  std::string folder_;
};

}  // namespace fx::compiler
