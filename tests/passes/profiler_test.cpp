// ProfilingInterpreter: node times, and the Chrome trace parsed back —
// one track per run, node spans with the ATen operators inside them (also
// inside a call_module), exact microsecond timestamps, no overlap on a track.
#include <fx/passes/profiler.h>

#include "passes_test_util.h"

#include <nlohmann/json.hpp>
#include <torch/nn/modules/conv.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace {

using fx::Graph;
using fx::Node;
using nlohmann::json;

std::shared_ptr<fx::GraphModule> conv_relu_module() {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1)));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* c = g->call_module("conv", {x});
  Node* r = g->call_function("aten::relu", {c});
  g->output(g->call_function("aten::add.Tensor", {r, c}));
  return std::make_shared<fx::GraphModule>(root, g);
}

json trace_of(fx::ProfilingInterpreter& p) { return json::parse(fx::ProfilingInterpreter::chrome_trace(p.events())); }

TEST(Profiler, TraceNestsOperatorsInsideNodesOnePerRunTrack) {
  auto gm = conv_relu_module();
  fx::ProfilingInterpreter p(gm);
  at::Tensor x = at::randn({1, 2, 5, 5});
  p.profile_run({x}, /*record=*/false);  // warm-up: nothing kept
  EXPECT_TRUE(p.events().empty());
  p.profile_run({x});
  p.profile_run({x});
  EXPECT_EQ(p.runs(), 2);
  EXPECT_EQ(p.node_us().size(), 5u);  // x, conv, relu, add, output

  const json doc = trace_of(p);
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<int, std::vector<json>> nodes_by_run, ops_by_run;
  std::map<int, std::string> track_names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") track_names[e["tid"].get<int>()] = e["args"]["name"];
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    (e["cat"] == "operator" ? ops_by_run : nodes_by_run)[e["tid"].get<int>()].push_back(e);
  }
  EXPECT_EQ(track_names, (std::map<int, std::string>{{1, "run 1"}, {2, "run 2"}}));
  for (int run : {1, 2}) {
    const auto& nodes = nodes_by_run[run];
    ASSERT_EQ(nodes.size(), 5u);
    std::vector<std::string> names;
    for (const auto& n : nodes) names.push_back(n["name"]);
    EXPECT_EQ(names, (std::vector<std::string>{"x", "conv", "relu", "add", "output"}));
    // Node spans follow each other on the track without overlap.
    for (size_t i = 1; i < nodes.size(); ++i)
      EXPECT_GE(nodes[i]["ts"].get<double>(), nodes[i - 1]["ts"].get<double>() + nodes[i - 1]["dur"].get<double>());
    // Every operator lies inside the span of the node that ran it.
    std::map<std::string, std::vector<std::string>> ops_of;
    for (const auto& op : ops_by_run[run]) {
      const std::string node = op["args"]["node"];
      ops_of[node].push_back(op["name"]);
      const json* span = nullptr;
      for (const auto& n : nodes)
        if (n["name"] == node) span = &n;
      ASSERT_NE(span, nullptr) << node;
      EXPECT_GE(op["ts"].get<double>(), (*span)["ts"].get<double>());
      EXPECT_LE(op["ts"].get<double>() + op["dur"].get<double>(),
                (*span)["ts"].get<double>() + (*span)["dur"].get<double>() + 1e-3);
    }
    // The conv module's forward is visible operator by operator.
    ASSERT_FALSE(ops_of["conv"].empty());
    EXPECT_EQ(ops_of["conv"].front(), "aten::conv2d");
    EXPECT_EQ(ops_of["relu"].front(), "aten::relu");
    EXPECT_EQ(ops_of["add"].front(), "aten::add");
  }
  // Operators carry the shapes of their tensor inputs.
  const json& conv_op = ops_by_run[1].front();
  EXPECT_EQ(conv_op["name"], "aten::conv2d");
  EXPECT_EQ(conv_op["args"]["input_shapes"][0], "[1, 2, 5, 5]");
  EXPECT_EQ(conv_op["args"]["input_shapes"][1], "[3, 2, 3, 3]");
}

// The bug of the hand-written writer: six significant digits, so a
// timestamp past a second lost its microseconds and events overlapped.
TEST(Profiler, TimestampsKeepEveryMicrosecond) {
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<fx::ProfilingInterpreter::Event> events = {
      {x, 1234567.891, 1.5, 1, {}, {}},
      {x, 1234569.392, 0.25, 1, "aten::neg", {"[2]"}},
      {x, 98765432.1234567, 3.0, 2, {}, {}},
  };
  const json doc = json::parse(fx::ProfilingInterpreter::chrome_trace(events));
  std::vector<double> ts;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X") ts.push_back(e["ts"].get<double>());
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0], 1234567.891);
  EXPECT_EQ(ts[1], 1234569.392);
  EXPECT_EQ(ts[2], 98765432.123);  // to the nanosecond
}

TEST(Profiler, WriteIsAtomicAndReportsBadPaths) {
  auto gm = conv_relu_module();
  fx::ProfilingInterpreter p(gm);
  p.set_record_ops(false);
  p.profile_run({at::randn({1, 2, 4, 4})});
  for (const auto& e : p.events()) EXPECT_TRUE(e.op.empty());
  const std::string path = ::testing::TempDir() + "fx_profiler_trace.json";
  p.write_chrome_trace(path);
  std::ifstream in(path);
  const json doc = json::parse(in);
  EXPECT_EQ(doc["traceEvents"].size(), 2u + 5u);  // process + track names, 5 nodes
  std::remove(path.c_str());
  EXPECT_THROW(p.write_chrome_trace("/nonexistent-dir/t.json"), fx::Error);
}

TEST(Profiler, ReportKeepsItsColumnsWithLongNames) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* r = g->call_function("aten::relu", {x});
  r->set_name("a_very_long_node_name_from_a_deeply_nested_module_path");
  g->output(r);
  fx::ProfilingInterpreter p(std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g));
  p.profile_run({at::ones({2})});
  const std::string report = p.report();
  EXPECT_NE(report.find("a_very_long_...d_module_path call_function "), std::string::npos) << report;
  // Every row of the node table is as wide as its header.
  std::istringstream lines(report);
  std::string header, row;
  std::getline(lines, header);
  while (std::getline(lines, row) && !row.empty()) EXPECT_EQ(row.size(), header.size()) << row;
}

TEST(Profiler, PlannedModuleRunsOnAMemoryPlanOfItsOwn) {
  auto gm = conv_relu_module();
  at::Tensor x = at::randn({1, 2, 5, 5});
  const at::Tensor expected = gm->forward({x}).toTensor();
  fx::ProfilingInterpreter plain(gm);
  plain.profile_run({x});
  EXPECT_EQ(plain.memory_plan_stats().plans, 0u);  // no planning asked for: none

  gm->set_memory_planning(true);
  fx::ProfilingInterpreter p(gm);
  EXPECT_TRUE(p.profile_run({x}, /*record=*/false).toTensor().equal(expected));  // records the plan
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(p.profile_run({x}).toTensor().equal(expected));
  fx::MemoryPlanStats s = p.memory_plan_stats();
  EXPECT_TRUE(s.active);
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.replayed_forwards, 2u);
  EXPECT_EQ(s.fallbacks, 0u);
  EXPECT_GE(s.planned_buffers, 2u);  // conv's and relu's outputs die inside the run
  EXPECT_EQ(gm->memory_plan_stats().replayed_forwards, 0u);  // the module's own plans are untouched

  gm->set_memory_planning(false);  // off again: the profiler's plan goes with it
  p.profile_run({x});
  EXPECT_EQ(p.memory_plan_stats().plans, 0u);
  EXPECT_EQ(p.runs(), 3);
}

}  // namespace
