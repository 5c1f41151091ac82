// The memory planner of GraphModule::forward: record the first forward's
// buffers, place them in one arena by lifetime, replay (memory_plan.h).
#include "execution/memory_plan.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

// Under AddressSanitizer the arena's free parts are poisoned, so a read or
// write through a dead planned buffer is reported as it would be for
// malloc; elsewhere the header's ASAN_(UN)POISON_MEMORY_REGION do nothing.
#include <sanitizer/asan_interface.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace fx::detail {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
/// Offsets in the arena are multiples of this (c10's own CPU alignment).
constexpr size_t kAlignment = 64;
/// Input shapes planned per module; further shapes run unplanned.
constexpr size_t kMaxPlans = 8;

size_t aligned(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }



}  // namespace

/// Where the buffers of one forward go: offsets in an arena, and which
/// earlier buffers each one overlaps there.
struct MemoryPlan {
  std::vector<size_t> size;      // by request index: the recorded bytes
  std::vector<int64_t> offset;   // by request index: -1 for an escaping buffer
  std::vector<std::vector<uint32_t>> conflicts;  // planned j < i whose region overlaps i's
  size_t arena_bytes = 0, planned = 0, escaping = 0, peak_live = 0;
};

namespace {

// ---- recording -------------------------------------------------------------

/// The requests of a recorded forward, and when each buffer died.
struct Recording {
  struct Event {
    size_t size;
    uint64_t allocated;
    uint64_t freed = kNever;  // kNever: still alive when the forward ended
  };
  std::mutex mutex;
  uint64_t clock = 0;
  bool closed = false;
  std::vector<Event> events;
};

/// A recorded buffer: the system's buffer, and who to tell when it dies.
struct RecordedBuffer {
  c10::DataPtr buffer;
  std::shared_ptr<Recording> recording;
  size_t index;
};

void delete_recorded(void* context) {
  auto* b = static_cast<RecordedBuffer*>(context);
  {
    std::lock_guard<std::mutex> lock(b->recording->mutex);
    if (!b->recording->closed) b->recording->events[b->index].freed = b->recording->clock++;
  }
  delete b;  // frees the system buffer
}

/// Greedy by size: the largest buffer first, each at the lowest offset free
/// of every placed buffer whose lifetime overlaps its own.
std::shared_ptr<const MemoryPlan> make_plan(const std::vector<Recording::Event>& events) {
  auto plan = std::make_shared<MemoryPlan>();
  const size_t n = events.size();
  plan->size.resize(n);
  plan->offset.assign(n, -1);
  plan->conflicts.resize(n);
  std::vector<uint32_t> order;
  for (size_t i = 0; i < n; ++i) {
    plan->size[i] = events[i].size;
    if (events[i].freed == kNever) {
      ++plan->escaping;
    } else {
      order.push_back(static_cast<uint32_t>(i));
    }
  }
  plan->planned = order.size();
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return events[a].size > events[b].size; });
  auto lifetimes_overlap = [&](uint32_t a, uint32_t b) {
    return events[a].allocated < events[b].freed && events[b].allocated < events[a].freed;
  };
  std::vector<uint32_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of the placed buffers alive with this one
  for (uint32_t i : order) {
    busy.clear();
    for (uint32_t j : placed)
      if (lifetimes_overlap(i, j))
        busy.emplace_back(static_cast<size_t>(plan->offset[j]), static_cast<size_t>(plan->offset[j]) + aligned(events[j].size));
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    const size_t need = aligned(events[i].size);
    for (const auto& [begin, end] : busy) {
      if (begin >= offset + need) break;  // the gap before this one fits
      offset = std::max(offset, end);
    }
    plan->offset[i] = static_cast<int64_t>(offset);
    plan->arena_bytes = std::max(plan->arena_bytes, offset + need);
    placed.push_back(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (plan->offset[i] < 0) continue;
    const size_t begin = static_cast<size_t>(plan->offset[i]), end = begin + aligned(events[i].size);
    for (size_t j = 0; j < i; ++j) {
      if (plan->offset[j] < 0) continue;
      const size_t jb = static_cast<size_t>(plan->offset[j]), je = jb + aligned(events[j].size);
      if (jb < end && begin < je) plan->conflicts[i].push_back(static_cast<uint32_t>(j));
    }
  }
  // The most planned bytes alive at once in the recorded forward.
  std::vector<std::pair<uint64_t, int64_t>> changes;
  for (size_t i = 0; i < n; ++i) {
    if (plan->offset[i] < 0) continue;
    changes.emplace_back(events[i].allocated, static_cast<int64_t>(aligned(events[i].size)));
    changes.emplace_back(events[i].freed, -static_cast<int64_t>(aligned(events[i].size)));
  }
  std::sort(changes.begin(), changes.end());
  int64_t live = 0;
  for (const auto& c : changes) {
    live += c.second;
    plan->peak_live = std::max(plan->peak_live, static_cast<size_t>(std::max<int64_t>(live, 0)));
  }
  return plan;
}

}  // namespace

// ---- arenas ------------------------------------------------------------------

namespace {

/// The memory arenas run in. An arena takes a backing from this process-wide
/// pool when a forward starts on it and gives it back when the forward ends
/// with none of its buffers alive, so graphs that run one after another share
/// one region: a training step's forward, then its backward, then the next
/// step's, as eager's allocator reuses for the backward what the forward
/// freed. With one arena kept per graph, resnet18's step (batch 8) held the
/// forward's 12 MB arena through the backward and the backward's through the
/// next forward. An arena whose buffers outlive its forward keeps its backing
/// until it runs again (or dies).
class BackingPool {
 public:
  struct Backing {
    c10::DataPtr data;
    size_t bytes = 0;
  };
  static BackingPool& instance() {
    static auto* pool = new BackingPool;  // never destroyed: arenas may die at exit
    return *pool;
  }
  /// A backing of at least `bytes`: the smallest idle one that fits, else a new one.
  Backing take(size_t bytes, c10::Allocator& system) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (it->bytes >= bytes && (best == idle_.end() || it->bytes < best->bytes)) best = it;
      if (best != idle_.end()) {
        Backing b = std::move(*best);
        idle_.erase(best);
        return b;
      }
      // None fits: the largest idle one is too small for what now runs; drop it
      // rather than keep it beside the new one.
      auto largest = std::max_element(idle_.begin(), idle_.end(),
                                      [](const Backing& a, const Backing& b) { return a.bytes < b.bytes; });
      if (largest != idle_.end()) idle_.erase(largest);
    }
    return Backing{system.allocate(bytes), bytes};
  }
  /// Frees the idle backings: a recording forward, which allocates every
  /// buffer from the system allocator, may then reuse their memory instead
  /// of growing the process beside them (the next replay takes a new one).
  void drop_idle() {
    std::vector<Backing> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(idle_);
    }
  }
  ArenaPoolStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    ArenaPoolStats st;
    st.idle_backings = idle_.size();
    for (const Backing& b : idle_) st.idle_bytes += b.bytes;
    return st;
  }
  void give(Backing b) {
    if (!b.data) return;
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(b));
    if (idle_.size() > kMaxIdle) {  // the smallest goes
      auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                       [](const Backing& a, const Backing& b) { return a.bytes < b.bytes; });
      idle_.erase(smallest);
    }
  }

 private:
  /// Idle backings kept: one per thread running planned graphs at once, roughly.
  static constexpr size_t kMaxIdle = 4;
  std::mutex mutex_;
  std::vector<Backing> idle_;
};

}  // namespace

struct Arena;

/// The context of a buffer handed out of an arena.
struct ArenaBuffer {
  Arena* arena;
  uint32_t index;
};

/// One forward's worth of planned buffers. Counted: one reference for the
/// pool it belongs to, one per live buffer; the last one deletes it. Its
/// memory (backing) comes from BackingPool while it runs a forward.
struct Arena {
  Arena(std::shared_ptr<const MemoryPlan> p, c10::Allocator& s)
      : plan(std::move(p)),
        system(&s),
        live(new std::atomic<uint8_t>[plan->size.size()]),
        buffers(new ArenaBuffer[plan->size.size()]) {
    for (size_t i = 0; i < plan->size.size(); ++i) {
      live[i].store(0, std::memory_order_relaxed);
      buffers[i] = ArenaBuffer{this, static_cast<uint32_t>(i)};
    }
  }
  ~Arena() { give_back(); }
  /// Takes a backing from the pool unless it has one (at a forward's start).
  void take_backing() {
    if (backing.data) return;
    backing = BackingPool::instance().take(plan->arena_bytes, *system);
    ASAN_POISON_MEMORY_REGION(backing.data.get(), plan->arena_bytes);
  }
  /// Returns the backing to the pool (none of its buffers may be alive).
  void give_back() {
    if (!backing.data) return;
    ASAN_UNPOISON_MEMORY_REGION(backing.data.get(), plan->arena_bytes);
    BackingPool::instance().give(std::move(backing));
    backing = BackingPool::Backing{};
  }
  /// Where planned buffer i lives.
  char* data(uint32_t i) const { return static_cast<char*>(backing.data.get()) + plan->offset[i]; }
  std::shared_ptr<const MemoryPlan> plan;
  c10::Allocator* system;
  BackingPool::Backing backing;
  std::unique_ptr<std::atomic<uint8_t>[]> live;
  std::unique_ptr<ArenaBuffer[]> buffers;
  std::atomic<int64_t> refs{1};
};

namespace {

void release(Arena* arena) {
  if (arena->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete arena;
}

void delete_arena_buffer(void* context) {
  auto* b = static_cast<ArenaBuffer*>(context);
  ASAN_POISON_MEMORY_REGION(b->arena->data(b->index), b->arena->plan->size[b->index]);
  b->arena->live[b->index].store(0, std::memory_order_release);
  release(b->arena);
}

/// The live buffers a planned forward handed out, by their data pointer.
/// c10::Allocator::raw_allocate (fbgemm's weight packing, some ATen
/// convolution paths) asserts that a DataPtr's context is its data and frees
/// the pointer with raw_deleter(): so every planned buffer's context is its
/// data, and delete_planned finds what the pointer is here (at most one live
/// buffer has a given address: an arena hands out a region only when every
/// buffer overlapping it is dead).
struct PlannedPointers {
  struct Owner {
    void* context;            // RecordedBuffer* or ArenaBuffer*
    c10::DeleterFnPtr free;   // delete_recorded or delete_arena_buffer
  };
  std::mutex mutex;
  std::unordered_map<void*, Owner> live;
  c10::DeleterFnPtr system_raw_deleter = nullptr;  // for pointers that are not planned
};

PlannedPointers& planned_pointers() {
  static auto* p = new PlannedPointers;  // never destroyed: buffers may die at exit
  return *p;
}

/// The deleter of every planned buffer (its context is its data), and the
/// planning allocator's raw_deleter(): a planned buffer goes back to its
/// arena or recording, any other pointer to the system allocator.
void delete_planned(void* data) {
  PlannedPointers& p = planned_pointers();
  PlannedPointers::Owner owner{nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.live.find(data);
    if (it != p.live.end()) {
      owner = it->second;
      p.live.erase(it);
    }
  }
  if (owner.free) owner.free(owner.context);
  else if (data != nullptr && p.system_raw_deleter) p.system_raw_deleter(data);
}

/// A DataPtr over planned `data` whose context is `data` (see PlannedPointers).
c10::DataPtr planned_data_ptr(void* data, void* context, c10::DeleterFnPtr free) {
  {
    PlannedPointers& p = planned_pointers();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.live[data] = {context, free};
  }
  return c10::DataPtr(data, data, &delete_planned, c10::Device(c10::DeviceType::CPU));
}

}  // namespace

// ---- the scope of one forward ---------------------------------------------------

struct PlanScopeState {
  enum class Mode { Off, Record, Replay } mode = Mode::Off;
  std::shared_ptr<Recording> recording;
  Arena* arena = nullptr;
  uint32_t next = 0;
  uint64_t arena_allocations = 0, system_allocations = 0, fallbacks = 0;

  c10::DataPtr allocate(size_t n, c10::Allocator& system) {
    if (mode == Mode::Record) {
      auto* b = new RecordedBuffer{system.allocate(n), recording, 0};
      void* data = b->buffer.get();
      {
        std::lock_guard<std::mutex> lock(recording->mutex);
        b->index = recording->events.size();
        recording->events.push_back({n, recording->clock++});
      }
      return planned_data_ptr(data, b, &delete_recorded);
    }
    if (mode == Mode::Replay) {
      const uint32_t i = next++;
      const MemoryPlan& plan = *arena->plan;
      if (i < plan.size.size() && plan.offset[i] >= 0 && n <= plan.size[i]) {
        bool free = true;
        for (uint32_t j : plan.conflicts[i])
          if (arena->live[j].load(std::memory_order_acquire) != 0) {
            free = false;
            break;
          }
        if (free) {
          arena->live[i].store(1, std::memory_order_relaxed);
          arena->refs.fetch_add(1, std::memory_order_relaxed);
          ++arena_allocations;
          void* data = arena->data(i);
          ASAN_UNPOISON_MEMORY_REGION(data, n);
          return planned_data_ptr(data, &arena->buffers[i], &delete_arena_buffer);
        }
      }
      if (!(i < plan.size.size() && plan.offset[i] < 0)) ++fallbacks;  // not an escaping buffer of the plan
      ++system_allocations;
    }
    return system.allocate(n);
  }
};

namespace {

thread_local PlanScopeState* current_scope = nullptr;

/// The process's CPU allocator once a planner exists: the previous one,
/// except for requests of a planned forward on this thread.
class PlanningAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    PlanScopeState* s = current_scope;
    if (s == nullptr || n == 0) return system_->allocate(n);
    return s->allocate(n, *system_);
  }
  /// delete_planned: planned buffers back to their plan, others to the system's raw deleter.
  c10::DeleterFnPtr raw_deleter() const override { return &delete_planned; }

  static PlanningAllocator& instance() {
    static PlanningAllocator a;
    return a;
  }
  /// Installs it (once); true if it is the CPU allocator.
  bool install() {
    std::call_once(once_, [this] {
      system_ = c10::GetCPUAllocator();
      planned_pointers().system_raw_deleter = system_->raw_deleter();
      c10::SetCPUAllocator(this, /*priority=*/1);
    });
    return c10::GetCPUAllocator() == this;
  }
  c10::Allocator& system() const { return *system_; }

 private:
  std::once_flag once_;
  c10::Allocator* system_ = nullptr;
};

/// The input shapes a plan is for (sizes, dtypes, contiguity; scalars' values).
std::vector<int64_t> shape_key(const std::vector<c10::IValue>& inputs) {
  std::vector<int64_t> key;
  auto add_tensor = [&](const at::Tensor& t) {
    key.push_back(t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1);
    if (!t.defined()) return;
    key.push_back(t.dim());
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
    key.push_back(t.is_contiguous() ? 1 : 0);
  };
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      key.push_back(1);
      add_tensor(v.toTensor());
    } else if (v.isInt()) {
      key.insert(key.end(), {2, v.toInt()});
    } else if (v.isBool()) {
      key.insert(key.end(), {3, v.toBool() ? 1 : 0});
    } else if (v.isDouble()) {
      int64_t bits = 0;
      const double d = v.toDouble();
      std::memcpy(&bits, &d, sizeof bits);
      key.insert(key.end(), {4, bits});
    } else if (v.isTensorList()) {
      key.insert(key.end(), {5, static_cast<int64_t>(v.toTensorList().size())});
      for (const at::Tensor& t : v.toTensorList()) add_tensor(t);
    } else if (v.isIntList()) {
      key.push_back(6);
      for (int64_t x : v.toIntList()) key.push_back(x);
    } else {
      key.push_back(7);  // other kinds: the plan's checks keep a different sequence safe
    }
  }
  return key;
}

}  // namespace

void release_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

struct MemoryPlanner::Entry {
  enum class State { Recording, Ready } state = State::Recording;
  std::vector<int64_t> key;
  std::shared_ptr<const MemoryPlan> plan;
  std::vector<Arena*> idle;  // arenas not in a forward (some may still have live buffers)
  ~Entry() {
    for (Arena* a : idle) release(a);
  }
};

MemoryPlanner::MemoryPlanner() { PlanningAllocator::instance().install(); }
MemoryPlanner::~MemoryPlanner() = default;

std::unique_ptr<MemoryPlanner::Scope> MemoryPlanner::begin(const std::shared_ptr<const void>& compiled,
                                                           const std::vector<c10::IValue>& inputs) {
  return std::unique_ptr<Scope>(new Scope(this, compiled, inputs));
}

MemoryPlanner::Scope::Scope(MemoryPlanner* planner, const std::shared_ptr<const void>& compiled,
                            const std::vector<c10::IValue>& inputs)
    : planner_(planner), state_(std::make_unique<PlanScopeState>()) {
  auto& allocator = PlanningAllocator::instance();
  if (allocator.install()) {
    auto key = shape_key(inputs);
    std::lock_guard<std::mutex> lock(planner->mutex_);
    const bool same_plan = !planner->compiled_.owner_before(compiled) && !compiled.owner_before(planner->compiled_);
    if (!same_plan) {  // the graph changed: its sequence of buffers too
      planner->entries_.clear();
      planner->compiled_ = compiled;
    }
    std::shared_ptr<Entry> entry;
    for (const auto& e : planner->entries_)
      if (e->key == key) entry = e;
    if (!entry && planner->entries_.size() < kMaxPlans) {
      entry = std::make_shared<Entry>();
      entry->key = std::move(key);
      planner->entries_.push_back(entry);
      state_->mode = PlanScopeState::Mode::Record;
      state_->recording = std::make_shared<Recording>();
      BackingPool::instance().drop_idle();
    } else if (entry && entry->state == Entry::State::Ready) {
      for (auto it = entry->idle.begin(); it != entry->idle.end(); ++it)
        if ((*it)->refs.load(std::memory_order_acquire) == 1) {  // no buffer of it alive
          state_->arena = *it;
          entry->idle.erase(it);
          break;
        }
      if (!state_->arena) {
        state_->arena = new Arena(entry->plan, allocator.system());
        ++planner->arenas_;
      }
      state_->arena->take_backing();
      state_->mode = PlanScopeState::Mode::Replay;
    }  // else: recorded by another forward now, or too many shapes: unplanned
    entry_ = std::move(entry);
  }
  previous_ = current_scope;
  current_scope = state_.get();  // also when unplanned: hides an enclosing forward's scope
  uncaught_ = std::uncaught_exceptions();
}

MemoryPlanner::Scope::~Scope() {
  current_scope = previous_;
  PlanScopeState& s = *state_;
  std::lock_guard<std::mutex> lock(planner_->mutex_);
  if (s.mode == PlanScopeState::Mode::Record) {
    std::vector<Recording::Event> events;
    {
      std::lock_guard<std::mutex> rlock(s.recording->mutex);
      s.recording->closed = true;
      events = s.recording->events;
    }
    auto& entries = planner_->entries_;
    auto it = std::find(entries.begin(), entries.end(), entry_);
    if (std::uncaught_exceptions() > uncaught_) {  // a failed forward plans nothing
      if (it != entries.end()) entries.erase(it);
    } else if (it != entries.end()) {
      entry_->plan = make_plan(events);
      entry_->state = Entry::State::Ready;
      planner_->latest_ = entry_->plan;
      // The plan's arena serves these buffers from now on: what the recording
      // freed them into would stay in glibc's heap beside it for good.
      release_freed_memory();
    }
  } else if (s.mode == PlanScopeState::Mode::Replay) {
    // Nothing of it alive: the next graph to run may have its memory.
    if (s.arena->refs.load(std::memory_order_acquire) == 1) s.arena->give_back();
    entry_->idle.push_back(s.arena);
    ++planner_->replayed_;
    planner_->fallbacks_ += s.fallbacks;
    planner_->last_arena_ = s.arena_allocations;
    planner_->last_system_ = s.system_allocations;
  }
}

MemoryPlanStats MemoryPlanner::stats() const {
  MemoryPlanStats st;
  st.active = c10::GetCPUAllocator() == &PlanningAllocator::instance();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : entries_) st.plans += e->state == Entry::State::Ready ? 1 : 0;
  if (latest_) {
    st.planned_buffers = latest_->planned;
    st.escaping_buffers = latest_->escaping;
    st.arena_bytes = latest_->arena_bytes;
    st.peak_live_bytes = latest_->peak_live;
  }
  st.arenas = arenas_;
  st.replayed_forwards = replayed_;
  st.fallbacks = fallbacks_;
  st.last_arena_allocations = last_arena_;
  st.last_system_allocations = last_system_;
  return st;
}

}  // namespace fx::detail

namespace fx {

ArenaPoolStats arena_pool_stats() { return detail::BackingPool::instance().stats(); }

}  // namespace fx
