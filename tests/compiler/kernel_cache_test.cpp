// fx::compiler::KernelCache: a kernel compiled once and then found on disk by
// another process, keys that follow the source and the flags, two processes
// compiling the same kernel at once, damaged entries rebuilt rather than
// loaded, folders and entries others could write refused, and the one-line
// errors of a missing compiler and of a kernel that does not compile. Each
// test works in a fresh folder under /tmp; other processes are fork()ed
// children that report by exit status what their load did.
#include <fx/compiler/kernel_cache.h>

#include "../common/error_of.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

namespace kernel_cache_test {

namespace fc = fx::compiler;

const std::vector<std::string> kFlags = {"-O1", "-shared", "-fPIC"};

fc::KernelSource answer_kernel(int value = 42) {
  return {"extern \"C\" int answer() { return " + std::to_string(value) + "; }\n", "answer"};
}

int call(void* f) { return reinterpret_cast<int (*)()>(f)(); }

/// Runs `f` in a child process: its return value, or -1 when it threw or died.
int in_child(const std::function<int()>& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = -1;
    try {
      rc = f();
    } catch (...) {
    }
    _exit(rc & 0xff);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? static_cast<int8_t>(WEXITSTATUS(status)) : -2;
}

/// In a child: loads `kernel` from `folder`; 0 when it runs and was cached, 1 compiled, 2 rebuilt, 3 wrong answer.
int child_load(const std::string& folder, const fc::KernelSource& kernel = answer_kernel()) {
  return in_child([&] {
    fc::LoadInfo info;
    void* f = fc::KernelCache(folder).load(kernel, kFlags, &info);
    if (call(f) != 42) return 3;
    return info.rebuilt ? 2 : info.compiled ? 1 : 0;
  });
}

/// Sets (or unsets, with nullptr) an environment variable for its life.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_.c_str(), old_->c_str(), 1) : unsetenv(name_.c_str()); }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The names in `folder`, sorted.
std::vector<std::string> listing(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// A fresh temporary folder; the cache's folder `kernels` inside it is not made yet. Skips without a compiler.
class CacheFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fxcpp_kernel_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    folder_ = root_ + "/kernels";
    if (!fc::KernelCache::compiler_available())
      GTEST_SKIP() << "no C++ compiler (" << fc::KernelCache::compiler() << ")";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string root_, folder_;
};

using KernelCache = CacheFolder;
using KernelCacheDamage = CacheFolder;
using KernelCacheTrust = CacheFolder;
using KernelCacheErrors = CacheFolder;

TEST_F(KernelCache, CompilesOnceThenAnotherProcessFindsIt) {
  fc::KernelCache cache(folder_);
  fc::LoadInfo info;
  void* f = cache.load(answer_kernel(), kFlags, &info);
  EXPECT_EQ(call(f), 42);
  EXPECT_TRUE(info.compiled);
  EXPECT_FALSE(info.rebuilt);
  EXPECT_GT(info.compile_ms, 0);
  EXPECT_EQ(info.key, fc::KernelCache::key_of(answer_kernel().source, kFlags));
  EXPECT_EQ(info.path, folder_ + "/" + info.key + ".so");
  // The folder is private, and holds the object and its source, nothing else.
  struct stat st;
  ASSERT_EQ(stat(folder_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(listing(folder_), (std::vector<std::string>{info.key + ".cpp", info.key + ".so"}));
  EXPECT_EQ(read_file(folder_ + "/" + info.key + ".cpp"), answer_kernel().source);

  // Again in this process: the same function, from memory.
  fc::LoadInfo again;
  EXPECT_EQ(cache.load(answer_kernel(), kFlags, &again), f);
  EXPECT_FALSE(again.compiled);
  EXPECT_EQ(again.compile_ms, 0);
  EXPECT_EQ(fc::KernelCache(folder_ + "/").load(answer_kernel(), kFlags), f);
  const fc::KernelSource kernel = answer_kernel();
  const int n = 20000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) cache.load(kernel, kFlags);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
  std::printf("a load of a kernel this process holds: %.3f us\n", us);
  EXPECT_LT(us, 20);

  // Another process finds it on disk.
  EXPECT_EQ(child_load(folder_), 0);

  // A symbol the object lacks: one line, no compilation.
  EXPECT_EQ(fx_test::error_of([&] { cache.load({answer_kernel().source, "question"}, kFlags); }),
            "kernel " + info.key + ": no symbol question in " + info.path);
}

TEST_F(KernelCache, KeyFollowsTheSourceAndTheFlags) {
  const std::string source = answer_kernel().source, key = fc::KernelCache::key_of(source, kFlags);
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
  EXPECT_EQ(fc::KernelCache::key_of(std::string(source), std::vector<std::string>(kFlags)), key);
  EXPECT_NE(fc::KernelCache::key_of(answer_kernel(43).source, kFlags), key);
  EXPECT_NE(fc::KernelCache::key_of(source, {"-O2", "-shared", "-fPIC"}), key);
  EXPECT_NE(fc::KernelCache::key_of(source, {"-O1", "-shared", "-fPIC", "-DX"}), key);
  EXPECT_NE(fc::KernelCache::key_of(source, {"-O1 -shared", "-fPIC"}), key);  // flags are not joined
  EXPECT_NE(fc::KernelCache::key_of(source, {}), key);
  // The same in another process (not std::hash): the child compares with this one's.
  EXPECT_EQ(in_child([&] { return fc::KernelCache::key_of(source, kFlags) == key ? 0 : 1; }), 0);
}

TEST_F(KernelCache, TwoProcessesCompilingAtOnceBothSucceed) {
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  pid_t pids[2];
  for (pid_t& pid : pids) {
    pid = fork();
    if (pid == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) > 0) {
      }  // the gate opens when the parent closes its end
      int rc = -1;
      try {
        fc::LoadInfo info;
        rc = call(fc::KernelCache(folder_).load(answer_kernel(7), kFlags, &info)) == 7 ? info.compiled : 3;
      } catch (...) {
      }
      _exit(rc & 0xff);
    }
  }
  close(gate[0]);
  close(gate[1]);
  int compiled = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= 1) << status;  // 0: found it, 1: compiled it
    compiled += WIFEXITED(status) && WEXITSTATUS(status) == 1;
  }
  EXPECT_GE(compiled, 1);
  std::printf("processes that compiled it: %d of 2\n", compiled);
  fc::LoadInfo info;
  EXPECT_EQ(call(fc::KernelCache(folder_).load(answer_kernel(7), kFlags, &info)), 7);
  EXPECT_FALSE(info.compiled);  // a valid entry
  EXPECT_EQ(listing(folder_), (std::vector<std::string>{info.key + ".cpp", info.key + ".so"}));  // no temporary left
}

TEST_F(KernelCache, LoadAllCompilesInParallelAndThrowsTheFirstFailureLast) {
  fc::KernelCache cache(folder_);
  const std::vector<fc::KernelSource> kernels = {answer_kernel(1), answer_kernel(2), answer_kernel(1),
                                                 answer_kernel(3)};
  std::vector<fc::LoadInfo> infos;
  const std::vector<void*> fs = cache.load_all(kernels, kFlags, 2, &infos);
  ASSERT_EQ(fs.size(), 4u);
  ASSERT_EQ(infos.size(), 4u);
  EXPECT_EQ(call(fs[0]) * 100 + call(fs[1]) * 10 + call(fs[3]), 123);
  EXPECT_EQ(fs[2], fs[0]);
  EXPECT_TRUE(infos[0].compiled && infos[1].compiled && infos[3].compiled);
  EXPECT_FALSE(infos[2].compiled);  // listed twice, compiled once

  const fc::KernelSource broken{"extern \"C\" int answer() { return }\n", "answer"};
  const std::string message = fx_test::error_of([&] { cache.load_all({broken, answer_kernel(4)}, kFlags, 2, &infos); });
  EXPECT_EQ(message.rfind("kernel " + fc::KernelCache::key_of(broken.source, kFlags) + ": ", 0), 0u) << message;
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_TRUE(infos[1].compiled);  // built all the same
  fc::LoadInfo info;
  EXPECT_EQ(call(cache.load(answer_kernel(4), kFlags, &info)), 4);
  EXPECT_FALSE(info.compiled);
}

TEST_F(KernelCache, DefaultFolderFollowsTheEnvironment) {
  {
    ScopedEnv moved("FXCPP_KERNEL_CACHE", "/somewhere/kernels"), xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(fc::KernelCache::default_folder(), "/somewhere/kernels");
  }
  ScopedEnv moved("FXCPP_KERNEL_CACHE", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg"), home("HOME", "/home/someone");
    EXPECT_EQ(fc::KernelCache::default_folder(), "/xdg/fxcpp/kernels");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative"), home("HOME", "/home/someone");  // XDG: relative paths are ignored
    EXPECT_EQ(fc::KernelCache::default_folder(), "/home/someone/.cache/fxcpp/kernels");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr), home("HOME", "/home/someone");
  EXPECT_EQ(fc::KernelCache::default_folder(), "/home/someone/.cache/fxcpp/kernels");
}

TEST_F(KernelCacheDamage, DamagedObjectsAreRebuiltNotLoaded) {
  ASSERT_EQ(child_load(folder_), 1);  // compiled; this process never maps the files it damages
  const std::string so = folder_ + "/" + fc::KernelCache::key_of(answer_kernel().source, kFlags) + ".so";
  const std::string good = read_file(so);
  const auto damage = [&](const std::function<void(std::string&)>& how) {
    std::string bytes = good;
    how(bytes);
    std::ofstream(so, std::ios::binary | std::ios::trunc) << bytes;
  };
  damage([](std::string& b) { b.resize(b.size() / 2); });  // truncated to half
  EXPECT_EQ(child_load(folder_), 2);
  EXPECT_EQ(read_file(so), good);
  EXPECT_EQ(child_load(folder_), 0);  // and found valid by the next one
  damage([](std::string& b) { b[b.size() - 10] ^= 1; });  // the trailer's checksum
  EXPECT_EQ(child_load(folder_), 2);
  damage([](std::string& b) { b[b.size() / 2] ^= 0x40; });  // a byte of the object
  EXPECT_EQ(child_load(folder_), 2);
  damage([](std::string& b) { b.resize(b.size() - 24); });  // no trailer: an object the cache did not finish
  EXPECT_EQ(child_load(folder_), 2);
  damage([](std::string& b) { b.clear(); });
  fc::LoadInfo info;
  EXPECT_EQ(call(fc::KernelCache(folder_).load(answer_kernel(), kFlags, &info)), 42);  // here too
  EXPECT_TRUE(info.compiled && info.rebuilt);
  EXPECT_EQ(read_file(so), good);
}

/// Expects `load` refused, naming `what` `path` and why, while `path` is writable by others, by its group, and owned
/// by another user (when this process may give it away: root); `path` is this user's, mode 0700, after.
void expect_refused(const std::function<void()>& load, const std::string& what, const std::string& path,
                    const std::string& tail) {
  for (const auto& [mode, why] : std::vector<std::pair<mode_t, std::string>>{
           {0777, "writable by others (mode 0777)"},
           {0702, "writable by others (mode 0702)"},
           {0770, "writable by its group (mode 0770)"}}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    EXPECT_EQ(fx_test::error_of(load), what + " " + path + ": " + why + "; " + tail);
  }
  ASSERT_EQ(chmod(path.c_str(), 0700), 0);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    EXPECT_EQ(fx_test::error_of(load),
              what + " " + path + ": owned by uid 65534, not by this user (uid 0); " + tail);
    ASSERT_EQ(chown(path.c_str(), 0, 0), 0);
  }
}

TEST_F(KernelCacheTrust, FoldersOthersCouldWriteAreRefused) {
  ASSERT_EQ(mkdir(folder_.c_str(), 0700), 0);
  fc::KernelCache cache(folder_);
  expect_refused([&] { cache.load(answer_kernel(), kFlags); }, "kernel cache", folder_, "not loading kernels from it");
  EXPECT_TRUE(listing(folder_).empty());  // nothing written to it
}

TEST_F(KernelCacheTrust, EntriesOthersCouldWriteAreRefused) {
  ASSERT_EQ(child_load(folder_), 1);
  const std::string key = fc::KernelCache::key_of(answer_kernel().source, kFlags), so = folder_ + "/" + key + ".so";
  fc::KernelCache cache(folder_);
  const auto load = [&] { cache.load(answer_kernel(), kFlags); };
  expect_refused(load, "kernel cache entry", so, "not loading it");
  ASSERT_EQ(rename(so.c_str(), (so + ".real").c_str()), 0);
  ASSERT_EQ(symlink((so + ".real").c_str(), so.c_str()), 0);
  EXPECT_EQ(fx_test::error_of(load), "kernel cache entry " + so + ": a symbolic link; not loading it");
  ASSERT_EQ(unlink(so.c_str()), 0);
  ASSERT_EQ(rename((so + ".real").c_str(), so.c_str()), 0);
  fc::LoadInfo info;
  EXPECT_EQ(call(cache.load(answer_kernel(), kFlags, &info)), 42);  // this user's alone again: loaded
  EXPECT_FALSE(info.compiled);
}

// Not a CacheFolder: runs (and must pass) on a machine without a compiler too.
TEST(KernelCacheNoCompiler, LoadThrowsOneLine) {
  ScopedEnv cxx("FXCPP_CXX", "/nonexistent/g++");
  EXPECT_EQ(fc::KernelCache::compiler(), "/nonexistent/g++");
  EXPECT_FALSE(fc::KernelCache::compiler_available());
  EXPECT_EQ(fc::KernelCache::compiler_version(), "");
  const std::string key = fc::KernelCache::key_of(answer_kernel().source, kFlags);
  EXPECT_EQ(fx_test::error_of([] { fc::KernelCache("/nonexistent/kernels").load(answer_kernel(), kFlags); }),
            "kernel " + key + ": no C++ compiler (`/nonexistent/g++ --version` does not run; set FXCPP_CXX or CXX)");
}

TEST_F(KernelCacheErrors, CompileErrorIsTheCompilersFirstErrorLine) {
  const fc::KernelSource broken{"extern \"C\" int answer() {\n  return 42\n}\n", "answer"};
  const std::string key = fc::KernelCache::key_of(broken.source, kFlags);
  const std::string message = fx_test::error_of([&] { fc::KernelCache(folder_).load(broken, kFlags); });
  const std::string where = folder_ + "/" + key + ".cpp:2:";  // the line of the return
  const std::string head = "kernel " + key + ": " + fc::KernelCache::compiler() + " failed: " + where;
  EXPECT_EQ(message.rfind(head, 0), 0u) << message;
  EXPECT_NE(message.find("error: expected ';'"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(listing(folder_), std::vector<std::string>{key + ".cpp"});  // the source kept to read; no temporary left
}

}  // namespace kernel_cache_test
