#pragma once
/// \file
/// ProfilingInterpreter: an Interpreter that times every node (the
/// profiling interpreter of torch.fx's documentation and seed 003), with a
/// report by node and by op type and a Chrome trace (chrome://tracing,
/// ui.perfetto.dev).
///
/// The trace has one track per timed run; on it, each node is a span, and
/// inside each span the ATen operators the node ran (libtorch's
/// RecordFunction callbacks, so also the operators inside a call_module and
/// the ones an operator calls in turn), with their input shapes. Times are
/// microseconds with nanosecond digits, written by nlohmann-json: exact
/// however long the profile runs.

#include <fx/interpreter.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx {
namespace detail {
class MemoryPlanner;
}  // namespace detail

/// Times run_node for every node; runs accumulate until reset().
class ProfilingInterpreter : public Interpreter {
 public:
  /// One node run, or one ATen operator inside it, for the Chrome trace.
  struct Event {
    Node* node;       ///< the node (for an operator: the node that ran it)
    double start_us;  ///< since the profiler was made
    double dur_us;
    int run;          ///< which timed run (1, 2, ...)
    /// For an operator: its name ("aten::conv2d"); empty for the node itself.
    std::string op;
    /// For an operator: the shapes of its tensor inputs ("[1, 3, 224, 224]"; "" for non-tensors).
    std::vector<std::string> input_shapes;
  };

  using Interpreter::Interpreter;
  ~ProfilingInterpreter() override;

  /// Runs and times every node; with `record` false (a warm-up) nothing is kept.
  c10::IValue profile_run(std::vector<c10::IValue> args, bool record = true);
  /// Times the node, then returns its value.
  c10::IValue run_node(Node* n) override;

  /// Total microseconds spent in each node over all recorded runs.
  const std::unordered_map<const Node*, double>& node_us() const { return node_us_; }
  /// Every recorded node run and operator, in the order they started.
  const std::vector<Event>& events() const { return events_; }
  /// Record the ATen operators inside each node too (default true).
  void set_record_ops(bool on) { record_ops_ = on; }
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
  /// Writes the recorded runs as a Chrome trace JSON file (written to a
  /// temporary file, then renamed); throws fx::Error if it cannot be written.
  void write_chrome_trace(const std::string& path) const;
  /// The Chrome trace JSON of `events` (what write_chrome_trace writes).
  static std::string chrome_trace(const std::vector<Event>& events);
  /// What the profiler's memory plan did so far (all runs, warm-ups too);
  /// `active` false when the module plans no memory.
  MemoryPlanStats memory_plan_stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::unordered_map<const Node*, double> node_us_;
  std::vector<Event> events_;
  Clock::time_point origin_ = Clock::now();
  int runs_ = 0;
  bool record_ = false;
  bool record_ops_ = true;
  uint64_t ops_callback_ = 0;  // at::CallbackHandle while recording operators
  /// The plan of the runs while module().memory_planning().
  std::shared_ptr<detail::MemoryPlanner> planner_;
  friend struct OpRecorder;
};

}  // namespace fx
