// Helpers of the distributed subcommands (see distributed_io.h).
#include "distributed_io.h"

#include "args.h"

#include <fx/error.h>

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace fx::cli {

ModelArgs parse_dist_args(const std::string& command, const std::vector<std::string>& args,
                          const std::vector<DistOption>& options, bool model_optional) {
  const Command* c = nullptr;
  for (const Command& k : commands())
    if (command == k.name) c = &k;
  std::vector<OptionSpec> specs;
  for (const DistOption& o : options) {
    const std::string name = o.name;
    specs.push_back({name, name == "input" ? "-i" : name == "output" ? "-o" : "", o.value ? o.value : "", o.description});
  }
  return parse_options(args, c, "fxcpp " + command, "the model file (or a directory of stage files)", specs,
                       model_optional);
}

void join_ranks(RankInfo& info, const ModelArgs& args, int world, const std::string& why, const std::string& command) {
  distributed::quiet_c10d_logging();
  const char* launched = std::getenv("FXCPP_LAUNCHED");
  info.launched = launched && std::string(launched) == "1";
  // Die with the parent when it is the crash guard of main.cpp (this process
  // is its child) or the launcher: a rank whose parent was killed must not
  // live on, holding its peers. (A rank started by a shell outlives it.)
  if ((info.launched || std::getenv("FXCPP_NO_CRASH_GUARD") == nullptr) && ::prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 &&
      ::getppid() == 1)
    std::_Exit(128 + SIGKILL);
  if (!distributed::rendezvous_env_present()) {
    if (world != 1)
      throw Error(why + " needs " + std::to_string(world) + " ranks: start them with `fxcpp launch --nproc " +
                  std::to_string(world) + " -- fxcpp " + command +
                  " ...`, or set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for each (see docs/distributed.md)");
    return;
  }
  info.options = distributed::rendezvous_from_env();
  info.rank = info.options.rank;
  info.world = info.options.world_size;
  if (args.has("timeout")) info.options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.get_positive("timeout", 300) * 1000));
  if (info.world != world)
    throw SharedError("WORLD_SIZE is " + std::to_string(info.world) + " but " + why + " needs " + std::to_string(world) +
                      " ranks (one per stage)");
  if (info.world > 1) {
    set_activity("joining the rendezvous at " + info.options.master_addr + ":" + std::to_string(info.options.master_port) +
                 " as rank " + std::to_string(info.rank) + " of " + std::to_string(info.world));
    info.group = distributed::ProcessGroup::create(info.options);
  }
}

int report_rank_error(const std::string& command, const RankInfo& rank, const std::exception& e) {
  if (dynamic_cast<const HelpRequested*>(&e)) return 0;
  const bool distributed = dynamic_cast<const distributed::DistributedError*>(&e) != nullptr;
  // Every rank has the same command line: an error before the rendezvous
  // (arguments, the world size) is everybody's, and rank 0 says it.
  const char* launched_env = std::getenv("FXCPP_LAUNCHED");
  const bool launched = rank.launched || (launched_env && std::string(launched_env) == "1");
  const char* rank_env = std::getenv("RANK");
  const int r = rank.group ? rank.rank : (rank_env ? std::atoi(rank_env) : rank.rank);
  const bool shared = dynamic_cast<const SharedError*>(&e) != nullptr || (!rank.group && !distributed);
  if (shared && launched && r != 0) {
    // Rank 0 says it and exits. This rank waits for the launcher to stop it
    // then: exiting first would make the launcher stop rank 0 (torchrun's
    // agent too) before rank 0 has written the line, and the run would end
    // saying nothing. Bounded, should rank 0 not fail after all.
    for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return kBadInput;
  }
  std::string msg = dynamic_cast<const Error*>(&e) ? std::string(e.what()) : one_line_error(e);
  const size_t nl = msg.find('\n');
  if (nl != std::string::npos) msg.resize(nl);
  std::cerr << "fxcpp " << command << ": " << msg << "\n";
  return distributed ? kRunFailed : kBadInput;
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": no such file (--input)");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

std::pair<std::shared_ptr<GraphModule>, std::vector<c10::IValue>> import_on_every_rank(const ModelArgs& args,
                                                                                       RankInfo& rank) {
  if (!args.has("input")) throw SharedError("--input IN.pt is required");
  const int batch = args.get_int("batch", 1);
  std::pair<std::shared_ptr<GraphModule>, std::vector<c10::IValue>> out;
  const bool specialize = args.has("specialize-shapes");
  if (rank.rank == 0) {
    if (rank.group) rank.group->set("input", read_file(args.get("input")));
    out = import_model_with_inputs(args.model, args.get("input"), specialize);
  } else {
    // The inputs file of rank 0, so that this rank imports with the same
    // example inputs (TorchScript conditions on them fold the same way).
    const std::string bytes = rank.group->get("input", "rank 0's inputs file");
    char path[] = "/tmp/fxcpp-rank-input-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) throw Error("cannot make a temporary file for rank 0's inputs");
    const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    ::close(fd);
    try {
      if (!ok) throw Error("cannot write rank 0's inputs to " + std::string(path));
      out = import_model_with_inputs(args.model, path, specialize);
    } catch (...) {
      ::unlink(path);
      throw;
    }
    ::unlink(path);
  }
  out.second = batched(out.second, batch);
  if (rank.group) {
    set_activity("comparing the model with rank 0's");
    const std::string mine = distributed::model_fingerprint(*out.first);
    if (rank.rank == 0) {
      rank.group->set("model", mine);
      for (int r = 1; r < rank.world; ++r) {
        const std::string verdict = rank.group->get("model/" + std::to_string(r), "rank " + std::to_string(r) + "'s model");
        if (verdict != "ok") throw Error(verdict);
      }
    } else {
      const std::string theirs = rank.group->get("model", "rank 0's model");
      const std::string verdict =
          theirs == mine ? "ok"
                         : "rank " + std::to_string(rank.rank) + ": " + args.model +
                               " is not the model rank 0 has (their fingerprints differ: another file, or other weights)";
      rank.group->set("model/" + std::to_string(rank.rank), verdict);
      if (verdict != "ok") throw SharedError(verdict);
    }
  }
  return out;
}

void refine_on_measured_stages(distributed::SplitOptions& options, const ModelArgs& args, int stages) {
  const bool optimize = args.has("optimize");
  options.refine_rounds = args.get_int("refine", optimize ? 2 : 0, 0);
  if (options.refine_rounds == 0 || stages < 2) return;
  const std::vector<c10::IValue> example = options.example_inputs;
  options.measure = [example, optimize](const std::vector<distributed::PipelineStage>& split) {
    set_activity(std::string("timing the stages") + (optimize ? " optimised" : "") + " to rebalance them");
    std::vector<distributed::PipelineStage> run = split;
    if (optimize)
      for (auto& s : run) s = distributed::optimize_stage(s);
    return distributed::time_stages(run, example, 3);
  };
}

std::string format_bytes(double bytes) {
  char buf[64];
  if (bytes >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3) std::snprintf(buf, sizeof buf, "%.1f KB", bytes / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

void install_kill_hook(const RankInfo& rank, std::function<void(std::function<void(int64_t)>)> install) {
  const char* r = std::getenv("FXCPP_TEST_KILL_RANK");
  const char* at = std::getenv("FXCPP_TEST_KILL_AT");
  const char* ready = std::getenv("FXCPP_TEST_READY_FILE");
  const bool kill = r && at && std::atoi(r) == rank.rank;
  if (!kill && !ready) return;
  const int64_t n = kill ? std::atoll(at) : INT64_MAX;
  const std::string ready_file = ready ? std::string(ready) + "." + std::to_string(rank.rank) : std::string();
  install([n, ready_file, marked = false](int64_t done) mutable {
    if (!ready_file.empty() && !marked) {
      marked = true;
      std::ofstream(ready_file) << ::getpid() << "\n";
    }
    if (done >= n) ::kill(::getpid(), SIGKILL);
  });
}

}  // namespace fx::cli
