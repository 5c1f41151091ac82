// fxcpp: capture, read, rewrite and run PyTorch graphs from the command line.
#include "command.h"
#include "model_io.h"

#include <torch/version.h>

#include <fx/error.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <new>

namespace fx::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

static int usage(std::ostream& os) {
  os << "usage: fxcpp COMMAND [ARGS...]   (fxcpp COMMAND --help for a command's options)\n\ncommands:\n";
  // Summaries in one column; a usage too long for it puts its summary on the next line.
  constexpr size_t kColumn = 34;
  auto row = [&](const std::string& left, const std::string& summary) {
    os << "  " << left;
    if (left.size() + 2 > kColumn) os << "\n  " << std::string(kColumn - 2, ' ');
    else os << std::string(kColumn - 2 - left.size(), ' ');
    os << summary << "\n";
  };
  for (const Command& c : commands()) row(c.usage, c.summary);
  row("--version", "print fxcpp's and libtorch's versions");
  return kBadInput;
}

// c10 warnings (a model's warnings.warn, libtorch's TORCH_WARN): one line
// each on stderr, "fxcpp COMMAND: warning: ...", instead of glog's two.
struct CommandWarnings : c10::WarningHandler {
  std::string command;
  void process(const c10::SourceLocation& /*where*/, const std::string& msg, const bool /*verbatim*/) override {
    std::cerr << "fxcpp " << command << ": warning: " << msg << "\n";
  }
};

// Runs one command; every exception becomes one line on stderr.
static int run_command(const Command& c, const std::string& name, const std::vector<std::string>& args) {
  static CommandWarnings warnings;
  warnings.command = name;
  c10::Warning::set_warning_handler(&warnings);
  try {
    set_current_command(&c);
    return c.run(args);
  } catch (const HelpRequested& h) {
    std::cout << h.text;
    return 0;
  } catch (const fx::Error& e) {
    std::cerr << "fxcpp " << name << ": " << e.what() << "\n";
    return kBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "fxcpp " << name << ": out of memory\n";
    return kBadInput;
  } catch (const std::exception& e) {
    // libtorch errors (c10::Error) that no command turned into fx::Error: one
    // line without the backtrace, still "bad input" (exit 2).
    std::cerr << "fxcpp " << name << ": " << one_line_error(e) << "\n";
    return kBadInput;
  } catch (...) {
    std::cerr << "fxcpp " << name << ": unknown error\n";
    return kBadInput;
  }
}

// Both processes of the crash guard end without the static destructors of
// libtorch and fxcpp. Since the fork every page is write-protected in both:
// each destructor (deregistering libtorch's ~2000 operators above all) would
// first fault on every page it writes, in the child and then in the parent —
// 0.4 s and 0.3 s of a 1.9 s `fxcpp run OPT.fx` (resnet34; docs/ship.md,
// what a load costs), where `fxcpp --version` (no fork) spends 0.08 s on
// them. Every command's files are closed when it returns (their streams are
// its own); std::cout / std::cerr and C stdio are flushed here. Under
// AddressSanitizer they end with std::exit, so LeakSanitizer still checks
// what a command leaked.
#if defined(__SANITIZE_ADDRESS__)
#define FX_GUARD_KEEPS_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FX_GUARD_KEEPS_EXIT 1
#endif
#endif
[[noreturn]] static void end_process(int rc) {
  std::cout.flush();
  std::cerr.flush();
#ifdef FX_GUARD_KEEPS_EXIT
  std::exit(rc);
#else
  std::fflush(nullptr);
  _exit(rc);
#endif
}

// The crash guard: libtorch's TorchScript parser and unpickler can still die
// from a signal on some damaged files that pass fxcpp's checks. The command
// runs in a child process (forked before libtorch starts any thread); if the
// child dies from a signal, the parent says in one line what it was doing
// (set_activity) and exits 2. FXCPP_NO_CRASH_GUARD=1 runs in-process.
template <typename F>
static int guarded(const std::string& name, F&& body) {
  if (std::getenv("FXCPP_NO_CRASH_GUARD") != nullptr) return body();
  constexpr size_t kSize = 4096;
  void* shared = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return body();
  char* activity = static_cast<char*>(shared);
  activity[0] = '\0';
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return body();
  if (pid == 0) {
    install_activity_buffer(activity, kSize);
    end_process(body());
  }
  signal(SIGINT, SIG_IGN);  // Ctrl-C reaches the child; the parent reports its end
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::cerr << "fxcpp " << name << ": waitpid failed: " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  if (WIFEXITED(status)) end_process(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (sig == SIGINT || sig == SIGTERM || sig == SIGKILL || sig == SIGPIPE || sig == SIGHUP) end_process(128 + sig);
  const std::string what(activity, strnlen(activity, kSize));
  std::cerr << "fxcpp " << name << ": crashed (" << strsignal(sig) << ", signal " << sig << ") while "
            << (what.empty() ? std::string("starting") : what)
            << "; the file is damaged or uses something libtorch cannot read\n";
  end_process(kBadInput);
}

}  // namespace fx::cli

int main(int argc, char** argv) {
  using namespace fx::cli;
  if (argc < 2) return usage(std::cerr);
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(std::cout);
    return 0;
  }
  if (name == "--version" || name == "-V") {
    std::cout << "fxcpp " << FXCPP_VERSION << " (libtorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
              << TORCH_VERSION_PATCH << ")\n";
    return 0;
  }
  auto it = std::find_if(commands().begin(), commands().end(),
                         [&](const Command& c) { return name == c.name; });
  if (it == commands().end()) {
    std::cerr << "fxcpp: unknown command '" << name << "'\n";
    return usage(std::cerr);
  }
  return guarded(name, [&] { return run_command(*it, name, std::vector<std::string>(argv + 2, argv + argc)); });
}
