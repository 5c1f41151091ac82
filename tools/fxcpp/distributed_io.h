#pragma once
// Shared by the distributed subcommands (launch, pipeline, pipeline-plan,
// data-parallel, pingpong): their argument parsing, joining the rendezvous
// of the environment, a model (and its inputs) that every rank imports the
// same way, and reporting an error once.

#include "model_io.h"

#include <fx/distributed.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fx::cli {

/// One option of a distributed subcommand.
struct DistOption {
  const char* name;         ///< "--name" (without dashes)
  const char* value;        ///< its value's name ("N"), nullptr for a switch
  const char* description;  ///< for --help
};

/// Parses `MODEL [--name value | --switch]...` of `fxcpp COMMAND` with CLI11
/// (as parse_model_args, with each option's description in --help); `-i` /
/// `-o` stand for --input / --output.
ModelArgs parse_dist_args(const std::string& command, const std::vector<std::string>& args,
                          const std::vector<DistOption>& options, bool model_optional = false);

/// An error every rank finds the same way (a world size that does not match
/// the stage count): under `fxcpp launch`, only rank 0 reports it.
struct SharedError : Error {
  using Error::Error;
};

/// This process's place in the run.
struct RankInfo {
  std::shared_ptr<distributed::ProcessGroup> group;  ///< null for a single process
  int rank = 0;
  int world = 1;
  bool launched = false;  ///< started by `fxcpp launch` (FXCPP_LAUNCHED=1)
  distributed::RendezvousOptions options;
};

/// The rendezvous of the environment (or a single process when there is
/// none): checks that the world size is `world` (a SharedError naming
/// `why`, e.g. "--stages 2"), then meets the other ranks. --timeout SECONDS
/// overrides FXCPP_DIST_TIMEOUT. Also: c10d's log lines off, and this
/// process dies with its parent (the crash guard, or the launcher).
/// `info` is filled in as far as it got when an error is thrown (so the
/// error is reported by the right rank).
void join_ranks(RankInfo& info, const ModelArgs& args, int world, const std::string& why, const std::string& command);

/// Reports `e` from a rank as one line "fxcpp COMMAND: ..." on stderr, unless
/// it is a SharedError on a rank other than 0 under `fxcpp launch`; returns
/// the exit status (1: the run failed, 2: bad input).
int report_rank_error(const std::string& command, const RankInfo& rank, const std::exception& e);

/// The model and its inputs as rank 0 reads them (import_model_with_inputs,
/// --batch), on every rank: rank 0 publishes its inputs file in the store
/// and the others import with the same example, so all hold the same graph.
/// Then every rank checks that its model's fingerprint is rank 0's.
std::pair<std::shared_ptr<GraphModule>, std::vector<c10::IValue>> import_on_every_rank(const ModelArgs& args,
                                                                                       RankInfo& rank);

/// --refine N (default 2 with --optimize, else 0): `options` measures the
/// stages as they will run (optimised with --optimize) on its example inputs
/// and rebalances N times (SplitOptions::measure).
void refine_on_measured_stages(distributed::SplitOptions& options, const ModelArgs& args, int stages);

/// "1.57 MB", "812 KB", "64 B".
std::string format_bytes(double bytes);

/// The CPU's model name (/proc/cpuinfo), "" if unknown.
std::string cpu_name();

/// A testing hook: with FXCPP_TEST_KILL_RANK=R and FXCPP_TEST_KILL_AT=N in
/// the environment, rank R kills itself with SIGKILL after computing its
/// N-th microbatch (a rank lost mid-run, for the reliability tests); with
/// FXCPP_TEST_READY_FILE=PATH, every rank writes its pid to PATH.RANK after
/// its first microbatch (the tests know then that the ranks run).
void install_kill_hook(const RankInfo& rank, std::function<void(std::function<void(int64_t)>)> install);

}  // namespace fx::cli
