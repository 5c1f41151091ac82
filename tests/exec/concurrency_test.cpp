// Concurrent forward calls on one GraphModule are safe and give the serial
// results, including the first calls that compile the plan and resolve the
// overloads.
#include "exec_test_util.h"

#include <fx/graph_module.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::module_of;
using fx_test::same;

std::shared_ptr<Graph> make_graph() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* v = x;
  for (int i = 0; i < 20; ++i) {
    v = g->call_function("aten::add", {v, x});
    v = g->call_function(i % 2 ? "aten::mul" : "operator.mul", {v, 0.5});
    v = g->call_method("relu", {v});
  }
  Node* s = g->call_method("sum", {v}, {{"dim", 1}});
  g->output(fx::Argument::tuple({s, g->call_function("operator.getitem", {g->call_function("getattr", {v, "shape"}), 0})}));
  return g;
}

TEST(Concurrency, ConcurrentForwardEqualsSerial) {
  constexpr int kThreads = 4, kCalls = 25;
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < kThreads * kCalls; ++i) inputs.push_back(at::randn({3, 5}));
  std::vector<at::Tensor> serial;
  {
    auto gm = module_of(make_graph());
    for (const auto& in : inputs)
      serial.push_back(gm->forward(std::vector<IValue>{in}).toTupleRef().elements()[0].toTensor());
  }
  auto gm = module_of(make_graph());  // fresh: the first calls race to compile
  std::vector<at::Tensor> parallel(inputs.size());
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      for (int c = 0; c < kCalls; ++c) {
        size_t i = static_cast<size_t>(t * kCalls + c);
        IValue out = gm->forward(std::vector<IValue>{inputs[i]});
        parallel[i] = out.toTupleRef().elements()[0].toTensor();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(at::equal(serial[i], parallel[i])) << i;
}

}  // namespace
