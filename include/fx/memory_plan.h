#pragma once
/// \file
/// A static memory plan for GraphModule::forward (record once, then replay).
///
/// With GraphModule::set_memory_planning(true), the first forward for a given
/// set of input shapes records every tensor buffer the forward's thread asks
/// the CPU allocator for: its size, and when it is freed. From that record a
/// plan places every buffer that dies inside the forward at an offset of one
/// arena (greedy by size: buffers whose lifetimes do not overlap share
/// memory; TFLite's and PyTorch static runtime's scheme). Later forwards with
/// those shapes take their buffers from an arena at the planned offsets: the
/// steady-state forward asks the system allocator only for what leaves it
/// (its outputs), and its peak memory is the arena's size.
///
/// Safety does not rest on the forward behaving as recorded: before a planned
/// buffer is handed out, every buffer planned to overlap it must be dead, and
/// the request must fit; otherwise the request goes to the system allocator
/// (counted in MemoryPlanStats::fallbacks). An arena is reused only once all
/// its buffers were freed, so outputs, and anything a caller keeps, are never
/// overwritten. Concurrent forwards each take their own arena.
///
/// An arena's memory (its backing) comes from one process-wide pool when a
/// forward starts on it and goes back when that forward ends with none of
/// its buffers alive: graph modules that run one after another (a training
/// step's forward and backward graphs) share one region the size of the
/// larger arena, as eager's allocator reuses for the backward what the
/// forward freed (arena_pool_stats()).
///
/// Mechanism: the first planner installs a CPU allocator (c10::SetCPUAllocator)
/// that delegates to the previous one except inside a planned forward on the
/// calling thread; other threads (intra-op workers) and other code are served
/// as before. Planning is off when another allocator with a higher priority
/// has been installed (MemoryPlanStats::active is false).

#include <cstddef>
#include <cstdint>

namespace fx {

/// What a GraphModule's memory plan did (GraphModule::memory_plan_stats()).
struct MemoryPlanStats {
  /// Planning is on and fxcpp's allocator is the process's CPU allocator.
  bool active = false;
  /// Input shapes with a finished plan.
  size_t plans = 0;
  /// The latest plan: buffers placed in the arena, per forward.
  size_t planned_buffers = 0;
  /// The latest plan: buffers left to the system allocator, per forward
  /// (they outlive the forward: outputs, and what the forward stores).
  size_t escaping_buffers = 0;
  /// The latest plan: bytes of one arena.
  size_t arena_bytes = 0;
  /// The latest plan: the most bytes of planned buffers live at once in the
  /// recorded forward (a lower bound for arena_bytes).
  size_t peak_live_bytes = 0;
  /// Arenas made so far, all plans (one per concurrent forward).
  size_t arenas = 0;
  /// Forwards run on a plan (replayed), all plans.
  uint64_t replayed_forwards = 0;
  /// Requests of replayed forwards the plan could not serve (larger than
  /// planned, an overlapping buffer still alive, past the recorded count),
  /// all plans. 0 when every forward does what the recorded one did.
  uint64_t fallbacks = 0;
  /// The latest replayed forward: buffers from its arena, and from the system
  /// allocator (its escaping buffers plus its fallbacks).
  uint64_t last_arena_allocations = 0, last_system_allocations = 0;
};

/// The process-wide pool of arena memory between forwards.
struct ArenaPoolStats {
  /// Backings no forward is running on now, and their bytes.
  size_t idle_backings = 0;
  size_t idle_bytes = 0;
};

/// What the pool of arena memory holds now.
ArenaPoolStats arena_pool_stats();

}  // namespace fx
