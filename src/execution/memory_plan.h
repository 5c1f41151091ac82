#pragma once
// Internal: the memory planner behind GraphModule::set_memory_planning
// (include/fx/memory_plan.h says what it does and why it is safe).
//
// Invariants:
//  - a thread is inside at most one planned scope at a time (the innermost:
//    a nested GraphModule's scope hides its caller's and restores it);
//  - an arena is handed to a scope only when none of its buffers is alive;
//  - within a scope, buffers are numbered in request order, so when buffer i
//    is requested only buffers < i of its arena can be alive: checking the
//    ones planned to overlap it (Plan::conflicts[i]) is enough.

#include <fx/memory_plan.h>

#include <ATen/core/ivalue.h>

#include <memory>
#include <mutex>
#include <vector>

namespace fx::detail {

struct MemoryPlan;
struct PlanScopeState;

/// Gives the memory the C library holds free back to the system
/// (malloc_trim; nothing elsewhere than glibc): after work whose freed
/// buffers will not be asked for again in those sizes (a recorded forward,
/// a training step's trace).
void release_freed_memory();

/// Plans per input shapes for one GraphModule; thread-safe.
class MemoryPlanner {
  struct Entry;

 public:
  MemoryPlanner();
  ~MemoryPlanner();
  MemoryPlanner(const MemoryPlanner&) = delete;
  MemoryPlanner& operator=(const MemoryPlanner&) = delete;

  /// The allocation scope of one forward (records, replays, or does nothing).
  class Scope {
   public:
    Scope(Scope&&) = delete;
    ~Scope();

   private:
    friend class MemoryPlanner;
    Scope(MemoryPlanner* planner, const std::shared_ptr<const void>& compiled, const std::vector<c10::IValue>& inputs);
    MemoryPlanner* planner_;
    std::unique_ptr<PlanScopeState> state_;
    std::shared_ptr<Entry> entry_;
    PlanScopeState* previous_ = nullptr;
    int uncaught_ = 0;
  };

  /// Opens the scope of a forward of the compiled plan `compiled` (a new one
  /// drops the plans made for the old) on `inputs`.
  std::unique_ptr<Scope> begin(const std::shared_ptr<const void>& compiled, const std::vector<c10::IValue>& inputs);

  /// What the planner did so far.
  MemoryPlanStats stats() const;

 private:
  mutable std::mutex mutex_;
  /// The compiled plan the entries are for: weak, and compared by owner, so
  /// a new plan allocated where a freed one was is still a new plan.
  std::weak_ptr<const void> compiled_;
  std::vector<std::shared_ptr<Entry>> entries_;
  uint64_t replayed_ = 0, fallbacks_ = 0, last_arena_ = 0, last_system_ = 0;
  size_t arenas_ = 0;
  std::shared_ptr<const MemoryPlan> latest_;
};

}  // namespace fx::detail
