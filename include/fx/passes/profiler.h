#pragma once
/// \file
/// ProfilingInterpreter: an Interpreter that times every node (the
/// profiling interpreter of torch.fx's documentation and seed 003), with a
/// report by node and by op type and a Chrome trace (chrome://tracing,
/// ui.perfetto.dev).

#include <fx/interpreter.h>

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx {

/// Times run_node for every node; runs accumulate until reset().
class ProfilingInterpreter : public Interpreter {
 public:
  /// One node run, for the Chrome trace.
  struct Event {
    Node* node;
    double start_us;  ///< since the profiler was made
    double dur_us;
    int run;          ///< which timed run (1, 2, ...)
  };

  using Interpreter::Interpreter;

  /// Runs and times every node; with `record` false (a warm-up) nothing is kept.
  c10::IValue profile_run(std::vector<c10::IValue> args, bool record = true);
  /// Times the node, then returns its value.
  c10::IValue run_node(Node* n) override;

  /// Total microseconds spent in each node over all recorded runs.
  const std::unordered_map<const Node*, double>& node_us() const { return node_us_; }
  /// Every recorded node run, in order.
  const std::vector<Event>& events() const { return events_; }
  /// How many runs were recorded.
  int runs() const { return runs_; }
  /// Forgets every recorded run.
  void reset();

  /// The op type a node is counted under: "aten::conv2d" for
  /// "aten::conv2d.default", the module's class name for call_module nodes,
  /// the opcode otherwise.
  std::string op_type(const Node* n) const;
  /// Text tables: the `top` slowest nodes (ms per run and share of the total)
  /// and the time per op type.
  std::string report(size_t top = 20) const;
  /// Writes the recorded runs as a Chrome trace JSON file; throws fx::Error
  /// if the file cannot be written.
  void write_chrome_trace(const std::string& path) const;

 private:
  using Clock = std::chrono::steady_clock;
  std::unordered_map<const Node*, double> node_us_;
  std::vector<Event> events_;
  Clock::time_point origin_ = Clock::now();
  int runs_ = 0;
  bool record_ = false;
};

}  // namespace fx
