// A main() for the fuzz targets in normal (gcc, libFuzzer-less) builds: the
// regression runs of ctest. Runs LLVMFuzzerTestOneInput on every regular
// file of the given folders (the seed corpus, the crash reproducers of
// tests/corpus/<target>/), then a bounded mutation run with a fixed seed:
// byte changes, bit flips, inserted and deleted ranges, truncations and
// splices of those files.
//
//   <target>_regress [-mutations=N] [-seed=S] [-timeout=SECONDS] DIR_OR_FILE...
//
// A finding aborts inside the target (fuzz_target.h) or is a signal; the
// input is then written to "<target>-crash-<what>" in the working folder
// (a file to copy into tests/corpus/<target>/) and the program dies of the
// signal, so the ctest entry fails. Each input has -timeout seconds (default
// 20): a hang is a finding too.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input under test, for the signal handler.
const std::string* g_current = nullptr;
char g_crash_path[512] = "crash";

void save_and_die(int sig) {
  if (g_current) {
    const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t unused = ::write(fd, g_current->data(), g_current->size());
      (void)unused;
      ::close(fd);
    }
    const char msg[] = "fxcpp fuzz driver: input saved as ";
    ssize_t unused = ::write(2, msg, sizeof msg - 1);
    unused = ::write(2, g_crash_path, std::strlen(g_crash_path));
    unused = ::write(2, "\n", 1);
    (void)unused;
  }
  ::signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
  ::raise(sig == SIGALRM ? SIGABRT : sig);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Regular files of `arg` (a file, or a folder's files, sorted; dot files skipped).
void collect(const std::string& arg, std::vector<std::string>& out) {
  struct stat st;
  if (::stat(arg.c_str(), &st) != 0) return;  // a reproducer folder need not exist yet
  if (S_ISREG(st.st_mode)) {
    out.push_back(arg);
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  std::vector<std::string> files;
  if (DIR* d = ::opendir(arg.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string p = arg + "/" + e->d_name;
      if (e->d_name[0] != '.' && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(p);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  out.insert(out.end(), files.begin(), files.end());
}

void run(const std::string& input, const std::string& crash_name, unsigned timeout) {
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s", crash_name.c_str());
  g_current = &input;
  ::alarm(timeout);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  ::alarm(0);
  g_current = nullptr;
}

// One mutant of `data` (not empty); `other` is a second file for splices.
std::string mutate(std::string data, const std::string& other, std::mt19937& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int k = 0; k < edits && !data.empty(); ++k) {
    switch (pick(7)) {
      case 0:  // a random byte
        data[pick(data.size())] = static_cast<char>(rng() & 0xFF);
        break;
      case 1:  // a flipped bit
        data[pick(data.size())] ^= static_cast<char>(1 << pick(8));
        break;
      case 2: {  // an interesting value (0, 0xFF, 0x7F, 0x80) over 1-4 bytes
        static const char values[] = {0, '\xFF', 0x7F, '\x80'};
        const size_t at = pick(data.size()), n = std::min<size_t>(1 + pick(4), data.size() - at);
        std::fill_n(data.begin() + static_cast<long>(at), n, values[pick(4)]);
        break;
      }
      case 3: {  // random bytes inserted
        std::string ins(1 + pick(16), '\0');
        for (char& c : ins) c = static_cast<char>(rng() & 0xFF);
        data.insert(pick(data.size() + 1), ins);
        break;
      }
      case 4: {  // a range deleted
        const size_t at = pick(data.size());
        data.erase(at, 1 + pick(std::min<size_t>(64, data.size() - at)));
        break;
      }
      case 5:  // truncated
        data.resize(pick(data.size()));
        break;
      default: {  // a piece of another file copied over
        if (other.empty()) break;
        const size_t from = pick(other.size()), n = 1 + pick(std::min<size_t>(256, other.size() - from));
        const size_t at = pick(data.size());
        data.replace(at, std::min(n, data.size() - at), other, from, n);
        break;
      }
    }
  }
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  unsigned seed = 12, timeout = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-mutations=", 0) == 0)
      mutations = std::atol(a.c_str() + 11);
    else if (a.rfind("-seed=", 0) == 0)
      seed = static_cast<unsigned>(std::strtoul(a.c_str() + 6, nullptr, 10));
    else if (a.rfind("-timeout=", 0) == 0)
      timeout = static_cast<unsigned>(std::strtoul(a.c_str() + 9, nullptr, 10));
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: %s [-mutations=N] [-seed=S] [-timeout=SECONDS] DIR_OR_FILE...\n", argv[0]);
      return 2;
    } else
      collect(a, files);
  }
  std::string name = argv[0];
  name = name.substr(name.rfind('/') + 1);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGALRM}) ::signal(sig, save_and_die);

  std::vector<std::string> inputs;
  for (const std::string& f : files) {
    inputs.push_back(read_all(f));
    run(inputs.back(), name + "-crash-" + f.substr(f.rfind('/') + 1), timeout);
  }
  std::printf("%s: %zu files ran\n", name.c_str(), files.size());
  inputs.erase(std::remove_if(inputs.begin(), inputs.end(), [](const std::string& s) { return s.empty(); }),
               inputs.end());
  if (mutations > 0 && inputs.empty()) {
    std::fprintf(stderr, "%s: no non-empty file to mutate\n", name.c_str());
    return 1;
  }
  std::mt19937 rng(seed);
  for (long i = 0; i < mutations; ++i) {
    const std::string& base = inputs[rng() % inputs.size()];
    const std::string& other = inputs[rng() % inputs.size()];
    run(mutate(base, other, rng), name + "-crash-seed" + std::to_string(seed) + "-mutant" + std::to_string(i),
        timeout);
  }
  std::printf("%s: %ld mutants (seed %u) ran, no finding\n", name.c_str(), mutations, seed);
  return 0;
}
