// fxcpp launch --nproc N [--master-port P] [--timeout S] -- PROGRAM ARGS...:
// starts N local ranks of PROGRAM on 127.0.0.1, as `torchrun --standalone
// --nproc-per-node N` does: the launcher hosts the c10d TCPStore (port 0: a
// free one, or --master-port), and each rank gets MASTER_ADDR, MASTER_PORT,
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (and OMP_NUM_THREADS=1 if
// unset, as torchrun sets it). When a rank fails, the launcher stops the
// others as torchrun's agent does: SIGTERM at once, SIGKILL to any still
// running --grace seconds later (default 5), so a failed run is over within
// seconds, never waiting for --timeout. Its exit status is the first failing
// rank's. With --max-restarts N (torchrun's flag), a failed group is started
// again with the same command, on a fresh store, at most N times, one line
// on stderr per restart; the exit status is then the last attempt's.
#include "command.h"
#include "distributed_io.h"

#include <fx/error.h>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

extern char** environ;

namespace fx::cli {
namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t interrupted = 0;
void on_signal(int sig) { interrupted = sig; }

/// This very program (/proc/self/exe), or "" if unknown.
std::string self_exe() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
}

/// `program` as execvp finds it; "fxcpp" is this very program (the ranks run
/// the fxcpp that launched them, whatever PATH holds).
std::string resolve(const std::string& program) {
  if (program == "fxcpp" && !self_exe().empty()) return self_exe();
  if (program.find('/') != std::string::npos) return program;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      const size_t colon = p.find(':', start);
      const std::string dir = p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  throw Error("cannot find the program '" + program + "' (not on PATH)");
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return std::string("was killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

/// What `fxcpp launch` starts: the same for every attempt.
struct LaunchPlan {
  std::vector<std::string> program;  ///< the rank's command line
  std::string exe;                   ///< program[0] resolved
  bool own_program = false;          ///< this very fxcpp
  int nproc = 1;
  std::string addr;
  int port = 0;  ///< 0: a free one
  double timeout_s = 300, grace_s = 5;
  bool has_timeout = false;
  int max_restarts = 0;
};

/// One attempt (`restart` 0 the first): hosts a fresh store, starts the
/// ranks and waits for them; at the first failure the others are stopped.
/// Returns the run's exit status (the first failing rank's).
int run_group(LaunchPlan plan, int restart) {
  set_activity("hosting the rendezvous on " + plan.addr);
  distributed::StoreServer store(plan.addr, plan.port, std::chrono::milliseconds(static_cast<int64_t>(plan.timeout_s * 1000)));
  const int actual_port = store.port();
  std::cout.flush();
  std::cerr.flush();
  std::vector<Rank> ranks(static_cast<size_t>(plan.nproc));
  for (int r = 0; r < plan.nproc; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      static const char* replaced[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                       "FXCPP_STORE_HOSTED", "FXCPP_LAUNCHED", "FXCPP_STORE_FILE",
                                       "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"};
      if (std::find(std::begin(replaced), std::end(replaced), key) != std::end(replaced)) continue;
      if (key == "FXCPP_DIST_TIMEOUT" && plan.has_timeout) continue;
      env.push_back(kv);
    }
    env.push_back("MASTER_ADDR=" + plan.addr);
    env.push_back("MASTER_PORT=" + std::to_string(actual_port));
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(plan.nproc));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(plan.nproc));
    env.push_back("FXCPP_STORE_HOSTED=1");
    env.push_back("FXCPP_LAUNCHED=1");
    if (plan.has_timeout) env.push_back("FXCPP_DIST_TIMEOUT=" + std::to_string(static_cast<int64_t>(plan.timeout_s + 0.999)));
    if (!std::getenv("OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");
    env.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart));  // as torchrun's agent
    env.push_back("TORCHELASTIC_MAX_RESTARTS=" + std::to_string(plan.max_restarts));
    // An fxcpp rank runs in-process (no crash guard): its pid is the rank's,
    // and the launcher reports its signal.
    if (plan.own_program) env.push_back("FXCPP_NO_CRASH_GUARD=1");
    std::vector<char*> cargv, cenv;
    for (auto& a : plan.program) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the launcher gone: the rank goes too
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      std::signal(SIGHUP, SIG_DFL);
      ::execve(plan.exe.c_str(), cargv.data(), cenv.data());
      std::fprintf(stderr, "fxcpp launch: cannot run %s: %s\n", plan.exe.c_str(), std::strerror(errno));
      std::_Exit(127);
    }
    ranks[static_cast<size_t>(r)].pid = pid;
    ranks[static_cast<size_t>(r)].running = true;
  }
  set_activity("");

  // Wait for the ranks. At the first failure (or a signal to the launcher)
  // the others get SIGTERM at once, and SIGKILL --grace seconds later.
  int first_failure = -1;
  Clock::time_point kill_at = Clock::time_point::max();
  bool terminated = false, killed = false;
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(plan.grace_s * 1000));
  auto running_ranks = [&] {
    std::vector<size_t> out;
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].running) out.push_back(r);
    return out;
  };
  auto stop_others = [&] {
    terminated = true;
    for (size_t r : running_ranks()) ::kill(ranks[r].pid, SIGTERM);
    kill_at = Clock::now() + grace;
  };
  for (;;) {
    if (running_ranks().empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (ranks[r].pid != pid) continue;
        ranks[r].running = false;
        ranks[r].status = status;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && first_failure < 0 && !terminated) {
          first_failure = static_cast<int>(r);
          // A rank that exited with a status said why itself; a signal needs saying, and so does a restart.
          if (restart < plan.max_restarts)
            std::cerr << "fxcpp launch: rank " << r << " (pid " << pid << ") " << describe_status(status)
                      << "; restarting the group (restart " << restart + 1 << " of " << plan.max_restarts << ")\n";
          else if (WIFSIGNALED(status))
            std::cerr << "fxcpp launch: rank " << r << " (pid " << pid << ") " << describe_status(status)
                      << "; stopping the other ranks\n";
          stop_others();
        }
      }
      continue;
    }
    if (interrupted && !terminated) stop_others();
    if (terminated && !killed && Clock::now() >= kill_at) {
      killed = true;
      const std::vector<size_t> stubborn = running_ranks();
      for (size_t r : stubborn) ::kill(ranks[r].pid, SIGKILL);
      if (!stubborn.empty()) {
        std::cerr << "fxcpp launch: rank" << (stubborn.size() > 1 ? "s " : " ");
        for (size_t i = 0; i < stubborn.size(); ++i) std::cerr << (i ? ", " : "") << stubborn[i];
        std::cerr << " still running " << plan.grace_s << " s after SIGTERM: killed (SIGKILL)\n";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (interrupted) return 128 + static_cast<int>(interrupted);
  if (first_failure >= 0) return exit_code(ranks[static_cast<size_t>(first_failure)].status);
  return 0;
}

int run_launch(const std::vector<std::string>& argv) {
  // Everything after `--` is the rank's command line.
  auto dashes = std::find(argv.begin(), argv.end(), "--");
  std::vector<std::string> own(argv.begin(), dashes);
  std::vector<std::string> program(dashes == argv.end() ? dashes : dashes + 1, argv.end());
  ModelArgs args = parse_dist_args(
      "launch", own,
      {{"nproc", "N", "ranks to start on this machine (WORLD_SIZE)"},
       {"master-port", "PORT", "the rendezvous port (default: a free one)"},
       {"master-addr", "ADDR", "the address the rendezvous listens on and the ranks use (default 127.0.0.1)"},
       {"timeout", "SECONDS", "how long a rank waits for a peer before giving up (FXCPP_DIST_TIMEOUT; default 300)"},
       {"grace", "SECONDS", "after one rank failed, how long the others get to exit on SIGTERM before SIGKILL (default 5)"},
       {"max-restarts", "N", "when a rank fails, stop the others and start the whole group again, at most N times (default 0)"}},
      true);
  if (!args.model.empty()) program.insert(program.begin(), args.model);  // `launch --nproc 2 prog ...` without `--`
  if (program.empty()) throw Error("no program to launch (fxcpp launch --nproc N -- fxcpp pipeline MODEL ...)");
  if (!args.has("nproc")) throw Error("--nproc N is required");
  const int nproc = args.get_int("nproc", 1);
  if (nproc > 1024) throw Error("--nproc " + std::to_string(nproc) + " is more ranks than one machine should run");
  const std::string addr = args.get("master-addr", "127.0.0.1");
  const int port = args.has("master-port") ? args.get_int("master-port", 29500, 1) : 0;
  if (port > 65535) throw Error("--master-port expects a port number (1-65535), got " + std::to_string(port));
  const double timeout_s = args.get_positive("timeout", 300);
  const double grace_s = args.get_positive("grace", 5);
  if (grace_s > 25) throw Error("--grace " + args.get("grace", "") + " is too long: a failed run must be over within 30 s");
  LaunchPlan plan{program, resolve(program[0]), false, nproc, addr, port, timeout_s, grace_s, args.has("timeout"),
                  args.has("max-restarts") ? args.get_int("max-restarts", 0, 0) : 0};
  char real[PATH_MAX];
  plan.own_program = program[0] == "fxcpp" || (::realpath(plan.exe.c_str(), real) && std::string(real) == self_exe());

  distributed::quiet_c10d_logging();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGHUP, on_signal);
  for (int restart = 0;; ++restart) {
    const int status = run_group(plan, restart);
    if (status == 0 || interrupted || restart == plan.max_restarts) return status;
  }
}

}  // namespace

FX_COMMAND("launch", "launch --nproc N [--master-port P] [--timeout S] [--grace S] [--max-restarts N] -- PROGRAM ARGS...",
           "start N local ranks of a distributed command on 127.0.0.1 (as torchrun --standalone)", run_launch);

}  // namespace fx::cli
