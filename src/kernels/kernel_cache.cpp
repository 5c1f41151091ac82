// The kernel cache (include/fx/compiler/kernel_cache.h): generated C++ built
// by the system's compiler into a shared object, kept on disk under a hash of
// what made it and loaded with dlopen, so that a kernel is compiled once per
// machine rather than once per process.
//
// An entry is two files in the folder (docs/compiler.md, "The kernel cache"):
//   <key>.cpp  the source; the compiler reads it from there, so its messages and the debug info name a file that stays
//   <key>.so   the shared object followed by a 24-byte trailer: the object's size and its 64-bit FNV-1a hash
//              (little-endian), then the magic "fxkernel". The ELF loader reads only what the headers point to,
//              so dlopen never sees the trailer.
// Each is written to a temporary file in the folder (named after the key, the
// process, the thread and a counter) and renamed into place: a reader sees the
// old file or the new one, never half of one, and as the checksum travels in
// the object's own file, no reader pairs one process's object with another's
// checksum. An object whose trailer is missing or does not match (a truncated
// or damaged file) is compiled again and renamed over, never loaded.
//
// Loading a shared object runs its code, so the folder (created 0700) and each
// entry must belong to this user and be writable by nobody else; anything else
// is refused with one line before a byte of it is read. What a process has
// loaded stays loaded, in a map from the object's path to its handle, so a
// second load() of a kernel costs a hash of its source and a map lookup.
//
// load_object() loads a shared object a file carried (a kernel object,
// fused_kernel.h) without the folder: written to an anonymous memory file
// and dlopen'ed by its /proc/self/fd path, so nothing of it reaches the disk
// and no name in the folder can be raced. Whether to trust it is the
// caller's decision (fx::load: a file of this user's alone).
#include <fx/compiler/kernel_cache.h>

#include <fx/error.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

extern char** environ;

namespace fx::compiler {
namespace {
namespace kernel_cache_impl {  // named: src/compiler is built in unity batches

// ---- hashing ----------------------------------------------------------------

constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;   // FNV-1a 64's offset basis
constexpr uint64_t kFnvOffset2 = 0x6c62272e07bb0142ULL;  // the high half of FNV-1a 128's: a second, different walk

uint64_t fnv1a(const char* p, size_t n, uint64_t h = kFnvOffset) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * kFnvPrime;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Two 64-bit FNV-1a hashes (different offsets) over `parts`, each followed by a NUL.
std::string hash_parts(const std::vector<const std::string*>& parts) {
  uint64_t a = kFnvOffset, b = kFnvOffset2;
  for (const std::string* s : parts) {
    a = fnv1a(s->c_str(), s->size() + 1, a);  // with its NUL: ("ab", "c") and ("a", "bc") differ
    b = fnv1a(s->c_str(), s->size() + 1, b);
  }
  return hex64(a) + hex64(b);
}

/// The key of an entry: the hash of its source, the compiler's version and the flags.
std::string key_with(const std::string& source, const std::string& version, const std::vector<std::string>& flags) {
  std::vector<const std::string*> parts = {&source, &version};
  for (const std::string& f : flags) parts.push_back(&f);
  return hash_parts(parts);
}

// ---- the object's trailer -----------------------------------------------------

constexpr size_t kTrailerSize = 24;

/// The trailer of an object of `n` bytes at `p`: n, its FNV-1a 64 (both little-endian), "fxkernel".
std::string trailer_of(const char* p, size_t n) {
  std::string t(kTrailerSize, '\0');
  const uint64_t fields[2] = {static_cast<uint64_t>(n), fnv1a(p, n)};
  for (int f = 0; f < 2; ++f)
    for (int i = 0; i < 8; ++i) t[f * 8 + i] = static_cast<char>((fields[f] >> (8 * i)) & 0xff);
  std::memcpy(&t[16], "fxkernel", 8);
  return t;
}

/// True when `file` is an object followed by its own trailer.
bool intact(const std::string& file) {
  if (file.size() < kTrailerSize) return false;
  const size_t n = file.size() - kTrailerSize;
  return file.compare(n, kTrailerSize, trailer_of(file.data(), n)) == 0;
}

// ---- files --------------------------------------------------------------------

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

std::string errno_text(int e = errno) { return std::strerror(e); }

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

/// Why a folder or an entry with status `st` is not to be trusted; empty when it is.
std::string distrust(const struct stat& st) {
  if (st.st_uid != geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(geteuid()) + ")";
  if (st.st_mode & S_IWOTH) return "writable by others (mode " + octal(st.st_mode) + ")";
  if (st.st_mode & S_IWGRP) return "writable by its group (mode " + octal(st.st_mode) + ")";
  return {};
}

/// Closes a descriptor when it goes.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Removes the files it names when it goes (the temporary files of a compilation, published or not).
struct Unlinked {
  std::vector<std::string> paths;
  ~Unlinked() {
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
};

/// Everything left in `fd`, read from where it is.
std::string read_rest(int fd) {
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

bool write_all(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// A fresh name in the folder for a temporary file of `key`'s: hidden, unique across processes and threads.
std::string temp_path(const std::string& folder, const std::string& key, const char* suffix) {
  static std::atomic<unsigned long> counter{0};
  return folder + "/." + key + "." + std::to_string(::getpid()) + "." + std::to_string(::syscall(SYS_gettid)) + "." +
         std::to_string(counter++) + suffix;
}

/// Opens a new file at `path` for writing, failing if anything is there (a file, or a link planted in its place).
int create_new(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
}

[[noreturn]] void fail_key(const std::string& key, const std::string& what) {
  throw Error("kernel " + key + ": " + what);
}

/// `data` written to `path` with `mode` by way of a temporary file renamed over it.
void write_atomically(const std::string& folder, const std::string& key, const std::string& path,
                      const std::string& data, mode_t mode) {
  const std::string tmp = temp_path(folder, key, ".tmp");
  Unlinked cleanup{{tmp}};
  Fd out{create_new(tmp)};
  if (out.fd < 0) fail_key(key, "cannot create " + tmp + ": " + errno_text());
  if (!write_all(out.fd, data) || ::fchmod(out.fd, mode) != 0)
    fail_key(key, "cannot write " + tmp + ": " + errno_text());
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail_key(key, "cannot rename " + tmp + " to " + path + ": " + errno_text());
}

/// The folder, created with its parents (0700 each) if missing, refused unless it is this user's alone.
void prepare_folder(const std::string& folder) {
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0) {
    for (size_t slash = folder.find('/', 1);; slash = folder.find('/', slash + 1)) {
      const std::string part = folder.substr(0, slash);
      if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
        throw Error("kernel cache " + folder + ": cannot create " + part + ": " + errno_text());
      if (slash == std::string::npos) break;
    }
    if (::stat(folder.c_str(), &st) != 0) throw Error("kernel cache " + folder + ": " + errno_text());
  }
  if (!S_ISDIR(st.st_mode)) throw Error("kernel cache " + folder + ": not a folder; not loading kernels from it");
  const std::string why = distrust(st);
  if (!why.empty()) throw Error("kernel cache " + folder + ": " + why + "; not loading kernels from it");
}

enum class Entry { Missing, Valid, Damaged };

/// The state of the object at `path`; throws when it is there but not to be trusted.
Entry check_entry(const std::string& path) {
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (in.fd < 0) {
    if (errno == ENOENT) return Entry::Missing;
    if (errno == ELOOP) throw Error("kernel cache entry " + path + ": a symbolic link; not loading it");
    throw Error("kernel cache entry " + path + ": " + errno_text());
  }
  struct stat st;
  if (::fstat(in.fd, &st) != 0) throw Error("kernel cache entry " + path + ": " + errno_text());
  if (!S_ISREG(st.st_mode)) throw Error("kernel cache entry " + path + ": not a regular file; not loading it");
  const std::string why = distrust(st);
  if (!why.empty()) throw Error("kernel cache entry " + path + ": " + why + "; not loading it");
  return intact(read_rest(in.fd)) ? Entry::Valid : Entry::Damaged;
}

// ---- running the compiler -------------------------------------------------------

std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = command.find_first_not_of(" \t", i)) != std::string::npos) {
    const size_t end = command.find_first_of(" \t", i);
    out.push_back(command.substr(i, end - i));
    i = end;
  }
  return out;
}

/// Starts `argv` (its program looked up in PATH, no shell) with stdin from /dev/null, stdout and stderr into `out`
/// and LC_ALL=C (English messages, in which the first `error:` line is searched): its pid, or -1 with `why` set.
pid_t spawn(const std::vector<std::string>& argv, int out, std::string* why) {
  if (argv.empty()) {
    *why = "an empty command";
    return -1;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  static char c_locale[] = "LC_ALL=C";
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "LC_ALL=", 7) != 0) env.push_back(*e);
  env.push_back(c_locale);
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *why = errno_text(rc);
    return -1;
  }
  return pid;
}

/// The wait status of `pid`, or -1.
int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

bool succeeded(int status) { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string described(int status) {
  if (status == -1) return "lost (waitpid failed)";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

/// What `compiler --version` said: whether it ran, and its first line.
struct Probe {
  bool ok = false;
  std::string version;
};

/// The probe of `compiler`, run once per process and compiler command.
const Probe& probe(const std::string& compiler) {
  static std::mutex mutex;
  static std::unordered_map<std::string, Probe> probes;  // node-based: references stay valid
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = probes.find(compiler);
  if (found != probes.end()) return found->second;
  Probe p;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) == 0) {
    std::vector<std::string> argv = words(compiler);
    argv.push_back("--version");
    std::string why;
    const pid_t pid = spawn(argv, fds[1], &why);
    ::close(fds[1]);
    const std::string output = read_rest(fds[0]);  // before waiting: a chatty compiler would fill the pipe
    ::close(fds[0]);
    if (pid > 0 && succeeded(wait_for(pid))) {
      p.ok = true;
      p.version = one_line(output.substr(0, output.find('\n')));
    }
  }
  return probes.emplace(compiler, p).first->second;
}

/// The line of `log` to show for a failed compilation: the first `error:` line, else the first one.
std::string first_error(const std::string& log, int status) {
  size_t first = std::string::npos;
  for (size_t start = 0; start < log.size();) {
    const size_t end = std::min(log.find('\n', start), log.size());
    const std::string line = log.substr(start, end - start);
    if (line.find("error:") != std::string::npos) return one_line(line);
    if (first == std::string::npos && line.find_first_not_of(" \t\r") != std::string::npos) first = start;
    start = end + 1;
  }
  if (first != std::string::npos) return one_line(log.substr(first, log.find('\n', first) - first));
  return described(status);
}

/// `source` compiled with `flags` into `folder`/<key>.so (trailer appended), by way of a temporary file.
void compile(const std::string& folder, const std::string& key, const std::string& compiler, const std::string& source,
             const std::vector<std::string>& flags) {
  const std::string cpp = folder + "/" + key + ".cpp", so = folder + "/" + key + ".so";
  write_atomically(folder, key, cpp, source, 0600);
  const std::string tmp = temp_path(folder, key, ".so.tmp"), log = temp_path(folder, key, ".log");
  Unlinked cleanup{{tmp, log}};
  int status = -1;
  {
    Fd out{create_new(log)};
    if (out.fd < 0) fail_key(key, "cannot create " + log + ": " + errno_text());
    // The source before the flags: libraries (-lsleef) must follow the object that needs them with --as-needed.
    std::vector<std::string> argv = words(compiler);
    argv.push_back(cpp);
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("-o");
    argv.push_back(tmp);
    std::string why;
    const pid_t pid = spawn(argv, out.fd, &why);
    if (pid < 0) fail_key(key, "cannot run " + compiler + ": " + why);
    status = wait_for(pid);
  }
  if (!succeeded(status)) {
    Fd in{::open(log.c_str(), O_RDONLY | O_CLOEXEC)};
    fail_key(key, compiler + " failed: " + first_error(in.fd >= 0 ? read_rest(in.fd) : std::string(), status));
  }
  Fd object{::open(tmp.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW)};
  if (object.fd < 0) fail_key(key, compiler + " wrote no " + tmp + ": " + errno_text());
  const std::string bytes = read_rest(object.fd);  // the offset is now at the end: the trailer goes after
  if (!write_all(object.fd, trailer_of(bytes.data(), bytes.size())) || ::fchmod(object.fd, 0700) != 0)
    fail_key(key, "cannot write " + tmp + ": " + errno_text());
  if (::rename(tmp.c_str(), so.c_str()) != 0) fail_key(key, "cannot rename " + tmp + " to " + so + ": " + errno_text());
}

// ---- what this process has loaded ------------------------------------------------

/// Handles by object path, and symbols by path + NUL + name; never unloaded.
struct Loaded {
  std::mutex mutex;
  std::unordered_map<std::string, void*> handles;
  std::unordered_map<std::string, void*> symbols;
};

Loaded& loaded() {
  static Loaded* l = new Loaded;  // never destroyed: kernels may still run during static destruction
  return *l;
}

/// `symbol` in the loaded `handle` of `info`'s entry, remembered under `id`; `l.mutex` held.
void* symbol_in(Loaded& l, void* handle, const LoadInfo& info, const std::string& symbol, const std::string& id) {
  void* address = ::dlsym(handle, symbol.c_str());
  if (!address) fail_key(info.key, "no symbol " + symbol + " in " + info.path);
  l.symbols.emplace(id, address);
  return address;
}

}  // namespace kernel_cache_impl
}  // namespace

KernelCache::KernelCache(std::string folder) : folder_(std::move(folder)) {
  while (folder_.size() > 1 && folder_.back() == '/') folder_.pop_back();
}

std::string KernelCache::default_folder() {
  if (const char* v = std::getenv("FXCPP_KERNEL_CACHE"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v == '/') return std::string(v) + "/fxcpp/kernels";
  if (const char* v = std::getenv("HOME"); v && *v) return std::string(v) + "/.cache/fxcpp/kernels";
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir && *pw->pw_dir)
    return std::string(pw->pw_dir) + "/.cache/fxcpp/kernels";
  return "/tmp/fxcpp-" + std::to_string(::geteuid()) + "/kernels";  // refused if another user made it first
}

KernelCache& KernelCache::global() {
  static KernelCache* cache = new KernelCache(default_folder());  // never destroyed, as what it loaded
  return *cache;
}

std::string KernelCache::compiler() {
  for (const char* name : {"FXCPP_CXX", "CXX"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return "g++";
}

bool KernelCache::compiler_available() { return kernel_cache_impl::probe(compiler()).ok; }

std::string KernelCache::compiler_version() { return kernel_cache_impl::probe(compiler()).version; }

std::string KernelCache::key_of(const std::string& source, const std::vector<std::string>& flags) {
  return kernel_cache_impl::key_with(source, compiler_version(), flags);
}

void* KernelCache::load(const KernelSource& kernel, const std::vector<std::string>& flags, LoadInfo* info) {
  namespace kc = kernel_cache_impl;  // not `using namespace`: other files of the unity batch have their own helpers
  LoadInfo local;
  LoadInfo& out = info ? *info : local;
  out = LoadInfo{};
  const std::string cc = compiler();
  const kc::Probe& p = kc::probe(cc);
  out.key = kc::key_with(kernel.source, p.version, flags);
  out.path = folder_ + "/" + out.key + ".so";
  if (!p.ok) kc::fail_key(out.key, "no C++ compiler (`" + cc + " --version` does not run; set FXCPP_CXX or CXX)");
  const std::string id = out.path + '\0' + kernel.symbol;
  kc::Loaded& l = kc::loaded();
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    if (const auto s = l.symbols.find(id); s != l.symbols.end()) return s->second;
    if (const auto h = l.handles.find(out.path); h != l.handles.end())
      return kc::symbol_in(l, h->second, out, kernel.symbol, id);
  }
  kc::prepare_folder(folder_);
  const kc::Entry entry = kc::check_entry(out.path);
  if (entry != kc::Entry::Valid) {
    out.rebuilt = entry == kc::Entry::Damaged;
    const auto start = std::chrono::steady_clock::now();
    kc::compile(folder_, out.key, cc, kernel.source, flags);
    out.compiled = true;
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  void* handle = ::dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) kc::fail_key(out.key, "dlopen failed: " + kc::one_line(::dlerror()));
  std::lock_guard<std::mutex> lock(l.mutex);
  // Another thread may have loaded it meanwhile: dlopen gave this one the same handle.
  return kc::symbol_in(l, l.handles.emplace(out.path, handle).first->second, out, kernel.symbol, id);
}

std::string KernelCache::distrust_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return kernel_cache_impl::errno_text();
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  return kernel_cache_impl::distrust(st);
}

std::string KernelCache::hash(const std::vector<std::string>& parts) {
  std::vector<const std::string*> p;
  for (const std::string& s : parts) p.push_back(&s);
  return kernel_cache_impl::hash_parts(p);
}

std::string KernelCache::object(const KernelSource& kernel, const std::vector<std::string>& flags, LoadInfo* info) {
  namespace kc = kernel_cache_impl;
  LoadInfo local;
  LoadInfo& out = info ? *info : local;
  load(kernel, flags, &out);  // compiled and checked, or found intact
  kc::Fd in{::open(out.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (in.fd < 0) kc::fail_key(out.key, "cannot read " + out.path + ": " + kc::errno_text());
  std::string bytes = kc::read_rest(in.fd);
  // Read again after load(): another process may have renamed a new entry over it since, intact as well.
  if (!kc::intact(bytes)) kc::fail_key(out.key, out.path + " changed while it was read");
  bytes.resize(bytes.size() - kc::kTrailerSize);
  return bytes;
}

void* KernelCache::load_object(const std::string& name, const std::string& bytes, const std::string& symbol) {
  namespace kc = kernel_cache_impl;
  const std::string id = "object:" + hash({bytes}) + '\0' + symbol;
  kc::Loaded& l = kc::loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (const auto s = l.symbols.find(id); s != l.symbols.end()) return s->second;
  // An anonymous memory file, kept open for the process's life (as the library stays loaded): its
  // /proc/self/fd path is never reused, so dlopen cannot mistake one object for another by name.
  const int fd = ::memfd_create(("fxcpp-kernel-" + symbol).c_str(), MFD_CLOEXEC);
  if (fd < 0) throw Error("kernel object " + name + ": cannot create a memory file: " + kc::errno_text());
  if (!kc::write_all(fd, bytes)) {
    const std::string why = kc::errno_text();
    ::close(fd);
    throw Error("kernel object " + name + ": cannot write a memory file: " + why);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const std::string why = kc::one_line(::dlerror());
    ::close(fd);
    throw Error("kernel object " + name + ": dlopen failed: " + why);
  }
  void* address = ::dlsym(handle, symbol.c_str());
  if (!address) throw Error("kernel object " + name + ": no symbol " + symbol + " in it");
  l.symbols.emplace(id, address);
  return address;
}

std::vector<void*> KernelCache::load_all(const std::vector<KernelSource>& kernels,
                                         const std::vector<std::string>& flags, int jobs,
                                         std::vector<LoadInfo>* infos) {
  const size_t n = kernels.size();
  std::vector<void*> out(n, nullptr);
  std::vector<LoadInfo> done(n);
  std::vector<std::exception_ptr> errors(n);
  // The first kernel of each key goes to the workers: one listed twice compiles once.
  std::vector<std::string> keys(n);
  std::unordered_map<std::string, size_t> first_of;
  std::vector<size_t> firsts;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = key_of(kernels[i].source, flags);
    if (first_of.emplace(keys[i], i).second) firsts.push_back(i);
  }
  const auto run = [&](size_t i) {
    try {
      out[i] = load(kernels[i], flags, &done[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::atomic<size_t> next{0};
  const auto worker = [&] {
    for (size_t j; (j = next++) < firsts.size();) run(firsts[j]);
  };
  const size_t wanted = jobs > 0 ? static_cast<size_t>(jobs) : std::max(1u, std::thread::hardware_concurrency());
  const size_t workers = std::min(wanted, firsts.size());
  if (workers <= 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers; ++w) threads.emplace_back(worker);
    for (std::thread& t : threads) t.join();
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t first = first_of.at(keys[i]);
    if (first == i) continue;
    if (errors[first]) {
      errors[i] = errors[first];
      done[i].key = done[first].key;
      done[i].path = done[first].path;
    } else {
      run(i);  // loaded by now: the in-process lookup (and dlsym when its symbol differs)
    }
  }
  if (infos) *infos = std::move(done);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace fx::compiler
