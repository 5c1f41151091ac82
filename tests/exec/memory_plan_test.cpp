// GraphModule::set_memory_planning: the first forward per input shapes
// records its buffers, later ones replay them from an arena; outputs and
// anything kept beyond the recorded lifetime are never overwritten.
#include "exec_test_util.h"

#include <fx/graph_module.h>
#include <fx/memory_plan.h>
#include <fx/target.h>

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::module_of;

/// cos(sin(neg(relu(x)))).sum(0): four intermediates (one buffer each, no
/// wrapped scalars), one output.
std::shared_ptr<fx::GraphModule> chain() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {x});
  Node* b = g->call_function("aten::neg", {a});
  Node* c = g->call_function("aten::sin", {b});
  Node* d = g->call_function("aten::cos", {c});
  g->output(g->call_function("aten::sum", {d, fx::Argument::list({0})}));
  return module_of(g);
}

at::Tensor expected(const at::Tensor& x) { return x.relu().neg().sin().cos().sum({0}); }

at::Tensor input(int64_t rows, double seed) { return at::arange(rows * 64, at::kFloat).view({rows, 64}).sin() * seed; }

TEST(MemoryPlan, OffByDefault) {
  auto gm = chain();
  EXPECT_FALSE(gm->memory_planning());
  gm->forward(input(4, 1));
  const auto st = gm->memory_plan_stats();
  EXPECT_FALSE(st.active);
  EXPECT_EQ(st.plans, 0u);
  EXPECT_EQ(st.replayed_forwards, 0u);
}

TEST(MemoryPlan, SteadyStateForwardTakesOnlyItsOutputFromTheSystem) {
  auto gm = chain();
  gm->set_memory_planning(true);
  ASSERT_TRUE(gm->memory_planning());
  for (int i = 0; i < 4; ++i) {
    const at::Tensor x = input(8, 1.0 + i);
    EXPECT_TRUE(at::allclose(gm->forward(x), expected(x))) << "forward " << i;
  }
  const auto st = gm->memory_plan_stats();
  EXPECT_TRUE(st.active);
  EXPECT_EQ(st.plans, 1u);
  EXPECT_EQ(st.planned_buffers, 4u);  // relu, neg, sin, cos
  EXPECT_EQ(st.escaping_buffers, 1u);  // the sum
  EXPECT_EQ(st.replayed_forwards, 3u);
  EXPECT_EQ(st.fallbacks, 0u);
  EXPECT_EQ(st.last_arena_allocations, 4u);
  EXPECT_EQ(st.last_system_allocations, 1u);
  EXPECT_EQ(st.arenas, 1u);
  // Buffers of [8, 64] floats; at most two of them are alive at once.
  const size_t buffer = 8 * 64 * sizeof(float);
  EXPECT_EQ(st.peak_live_bytes, 2 * buffer);
  EXPECT_EQ(st.arena_bytes, 2 * buffer);
}

// Two planned graph modules run one after the other (a training step's
// forward and backward) share one backing, the size of the larger arena,
// where each kept its own before.
TEST(MemoryPlan, GraphsRunOneAfterAnotherShareOneArenasMemory) {
  auto small = chain(), large = chain();
  small->set_memory_planning(true);
  large->set_memory_planning(true);
  const fx::ArenaPoolStats before = fx::arena_pool_stats();
  for (int i = 0; i < 4; ++i) {
    const at::Tensor xs = input(8, 1.0 + i), xl = input(32, 2.0 + i);
    EXPECT_TRUE(at::allclose(small->forward(xs), expected(xs))) << i;
    EXPECT_TRUE(at::allclose(large->forward(xl), expected(xl))) << i;
  }
  const auto ss = small->memory_plan_stats(), sl = large->memory_plan_stats();
  ASSERT_EQ(ss.replayed_forwards, 3u);
  ASSERT_EQ(sl.replayed_forwards, 3u);
  EXPECT_EQ(ss.fallbacks + sl.fallbacks, 0u);
  EXPECT_EQ(sl.arena_bytes, 4 * ss.arena_bytes);
  // One backing between forwards: the large arena's (the small one's was
  // given up when the large forward needed more). Earlier tests of this
  // process may have left backings of their own, no larger than these.
  const fx::ArenaPoolStats after = fx::arena_pool_stats();
  EXPECT_LE(after.idle_backings, std::max<size_t>(before.idle_backings, 1));
  EXPECT_GE(after.idle_bytes, sl.arena_bytes);
  EXPECT_LE(after.idle_bytes - std::min(after.idle_bytes, before.idle_bytes), sl.arena_bytes);
}

// A recording forward allocates every buffer from the system allocator:
// it first frees the pool's idle backings, so that it reuses their memory
// instead of growing the process beside them (a training step's second
// backward, recorded while the forward's backing sat idle, peaked 19 MB
// higher on resnet18). The replays after it take a backing again.
TEST(MemoryPlan, ARecordingForwardFreesTheIdleBackingsFirst) {
  auto first = chain(), second = chain();
  first->set_memory_planning(true);
  second->set_memory_planning(true);
  for (int i = 0; i < 3; ++i) first->forward(input(16, 1.0 + i));
  ASSERT_GE(fx::arena_pool_stats().idle_backings, 1u) << "the replayed forward gave its backing back";
  const at::Tensor x = input(16, 5.0);
  EXPECT_TRUE(at::allclose(second->forward(x), expected(x)));  // recorded
  EXPECT_EQ(fx::arena_pool_stats().idle_backings, 0u);
  EXPECT_TRUE(at::allclose(second->forward(x), expected(x)));  // replayed: takes and gives back a backing
  EXPECT_EQ(second->memory_plan_stats().replayed_forwards, 1u);
  const fx::ArenaPoolStats after = fx::arena_pool_stats();
  EXPECT_EQ(after.idle_backings, 1u);
  EXPECT_EQ(after.idle_bytes, second->memory_plan_stats().arena_bytes);
}

TEST(MemoryPlan, OutputsKeptByTheCallerAreNeverOverwritten) {
  // The output is a view of an intermediate: that buffer escapes the forward.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::neg", {x});
  Node* b = g->call_function("aten::sin", {a});
  g->output(g->call_function("aten::view", {b, fx::Argument::list({-1})}));
  auto gm = module_of(g);
  gm->set_memory_planning(true);
  std::vector<at::Tensor> kept;
  for (int i = 0; i < 4; ++i) kept.push_back(gm->forward(input(2, 1.0 + i)));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(kept[i], input(2, 1.0 + i).neg().sin().view({-1}))) << i;
  const auto st = gm->memory_plan_stats();
  EXPECT_EQ(st.planned_buffers, 1u);
  EXPECT_EQ(st.escaping_buffers, 1u);
  EXPECT_EQ(st.fallbacks, 0u);
}

TEST(MemoryPlan, EachInputShapeHasItsPlan) {
  auto gm = chain();
  gm->set_memory_planning(true);
  for (int64_t rows : {2, 5, 2, 5, 3}) {
    const at::Tensor x = input(rows, 0.5);
    EXPECT_TRUE(at::allclose(gm->forward(x), expected(x))) << rows;
  }
  const auto st = gm->memory_plan_stats();
  EXPECT_EQ(st.plans, 3u);
  EXPECT_EQ(st.replayed_forwards, 2u);
  EXPECT_EQ(st.fallbacks, 0u);
}

TEST(MemoryPlan, AnEditedGraphIsPlannedAgain) {
  auto gm = chain();
  gm->set_memory_planning(true);
  gm->forward(input(4, 1));
  gm->forward(input(4, 1));
  Node* out = gm->graph().output_node();
  Node* neg = nullptr;
  {
    auto guard = gm->graph().inserting_before(out);
    neg = gm->graph().call_function("aten::neg", {out->args()[0]});
  }
  out->set_args({neg});
  const at::Tensor x = input(4, 1);
  EXPECT_TRUE(at::allclose(gm->forward(x), -expected(x)));
  EXPECT_TRUE(at::allclose(gm->forward(x), -expected(x)));
  const auto st = gm->memory_plan_stats();
  EXPECT_EQ(st.plans, 1u);  // the old graph's plan was dropped
  EXPECT_EQ(st.planned_buffers, 5u);
  EXPECT_EQ(st.fallbacks, 0u);
}

// A function that keeps its argument when asked: a buffer that outlives the
// lifetime the plan recorded for it.
std::vector<at::Tensor>& stash() {
  static std::vector<at::Tensor> kept;
  return kept;
}
bool& stashing() {
  static bool on = false;
  return on;
}

TEST(MemoryPlan, ABufferKeptLongerThanRecordedIsNeitherReusedNorOverwritten) {
  fx::register_function("memplantest::maybe_keep", [](std::vector<IValue>& args, fx::ValueKwargs&) -> IValue {
    at::Tensor t = args[0].toTensor();
    if (stashing()) stash().push_back(t);
    return t.neg();
  });
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {x});
  Node* b = g->call_function("memplantest::maybe_keep", {a});  // neg(a)
  Node* c = g->call_function("aten::sin", {b});
  Node* d = g->call_function("aten::cos", {c});
  g->output(g->call_function("aten::sum", {d, fx::Argument::list({0})}));
  auto gm = module_of(g);
  gm->set_memory_planning(true);
  const at::Tensor in = input(16, 1);
  gm->forward(in);  // recorded: relu's buffer dies after maybe_keep
  gm->forward(in);
  ASSERT_EQ(gm->memory_plan_stats().fallbacks, 0u);
  stashing() = true;
  EXPECT_TRUE(at::allclose(gm->forward(in), expected(in)));  // keeps relu(in), which lives in the arena
  stashing() = false;
  auto st = gm->memory_plan_stats();
  EXPECT_GT(st.fallbacks, 0u);  // what was planned over relu's buffer went to the system
  for (int i = 0; i < 3; ++i) {
    const at::Tensor y = input(16, -2.0 - i);
    EXPECT_TRUE(at::allclose(gm->forward(y), expected(y)));
  }
  ASSERT_EQ(stash().size(), 1u);
  EXPECT_TRUE(at::equal(stash()[0], in.relu()));  // not overwritten by the later forwards
  st = gm->memory_plan_stats();
  EXPECT_EQ(st.arenas, 2u);  // the arena holding the kept buffer is not reused while it lives
  stash().clear();
  gm->forward(in);
  EXPECT_EQ(gm->memory_plan_stats().arenas, 2u);  // now both are free: no third one
}

// c10::Allocator::raw_allocate inside a planned forward (fbgemm's weight
// packing and some ATen convolution paths use it) asserts that a DataPtr's
// context is its data, and frees with raw_deleter(): planned buffers are
// such pointers, recorded and replayed alike, and raw_deleter also frees
// what the system allocated outside a planned forward.
TEST(MemoryPlan, RawAllocationsInsideAPlannedForward) {
  fx::register_function("memplantest::raw_scratch", [](std::vector<IValue>& args, fx::ValueKwargs&) -> IValue {
    const at::Tensor t = args[0].toTensor().contiguous();
    c10::Allocator* cpu = c10::GetCPUAllocator();
    const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(float);
    auto* scratch = static_cast<float*>(cpu->raw_allocate(bytes));
    for (int64_t i = 0; i < t.numel(); ++i) scratch[i] = t.data_ptr<float>()[i] * 2;
    at::Tensor out = at::empty_like(t);
    std::copy(scratch, scratch + t.numel(), out.data_ptr<float>());
    cpu->raw_deleter()(scratch);
    return out;
  });
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {x});
  Node* b = g->call_function("memplantest::raw_scratch", {a});
  g->output(g->call_function("aten::sum", {g->call_function("aten::sin", {b}), fx::Argument::list({0})}));
  auto gm = module_of(g);
  gm->set_memory_planning(true);
  for (int i = 0; i < 4; ++i) {  // records, then replays
    const at::Tensor in = input(8, 1.0 + i);
    EXPECT_TRUE(at::allclose(gm->forward(in), (in.relu() * 2).sin().sum({0})));
  }
  const auto st = gm->memory_plan_stats();
  ASSERT_TRUE(st.active);
  EXPECT_EQ(st.plans, 1u);
  EXPECT_GE(st.planned_buffers, 2u);  // relu's output and the scratch buffer
  EXPECT_EQ(st.fallbacks, 0u);
  c10::Allocator* cpu = c10::GetCPUAllocator();  // outside a planned forward: the system's memory
  void* p = cpu->raw_allocate(256);
  ASSERT_NE(p, nullptr);
  cpu->raw_deleter()(p);
}

TEST(MemoryPlan, AFailedFirstForwardPlansNothing) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::mul", {x, 2});
  g->output(g->call_function("aten::view", {a, fx::Argument::list({5})}));
  auto gm = module_of(g);
  gm->set_memory_planning(true);
  EXPECT_THROW(gm->forward(at::ones({6})), fx::Error);
  EXPECT_EQ(gm->memory_plan_stats().plans, 0u);
  EXPECT_TRUE(at::equal(gm->forward(at::ones({5})), at::full({5}, 2.0f)));
  EXPECT_EQ(gm->memory_plan_stats().plans, 1u);
}

TEST(MemoryPlan, ConcurrentForwardsTakeTheirOwnArenas) {
  auto gm = chain();
  gm->set_memory_planning(true);
  gm->forward(input(32, 1));  // the plan
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const at::Tensor x = input(32, 1.0 + t + 0.01 * i);
        if (!at::allclose(gm->forward(x), expected(x))) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const auto st = gm->memory_plan_stats();
  EXPECT_EQ(st.replayed_forwards, 200u);
  EXPECT_EQ(st.fallbacks, 0u);
  EXPECT_GE(st.arenas, 1u);
  EXPECT_LE(st.arenas, 4u);
}

TEST(MemoryPlan, TurningItOffDropsThePlans) {
  auto gm = chain();
  gm->set_memory_planning(true);
  gm->forward(input(4, 1));
  gm->set_memory_planning(false);
  EXPECT_FALSE(gm->memory_plan_stats().active);
  const at::Tensor x = input(4, 3);
  EXPECT_TRUE(at::allclose(gm->forward(x), expected(x)));
}

}  // namespace
