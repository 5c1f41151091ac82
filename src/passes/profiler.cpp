// ProfilingInterpreter: per-node times, a report and a Chrome trace with
// the ATen operators of each node (RecordFunction callbacks).
#include <fx/passes/profiler.h>

#include "execution/memory_plan.h"

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

namespace fx {

/// The RecordFunction side: while a node runs under profile_run, every
/// operator the dispatcher calls on this thread becomes an Event.
struct OpRecorder {
  static thread_local ProfilingInterpreter* profiler;
  static thread_local Node* node;

  struct Context : at::ObserverContext {
    explicit Context(size_t i) : index(i) {}
    size_t index;
  };

  static std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
    ProfilingInterpreter* p = profiler;
    if (!p || !node) return nullptr;
    ProfilingInterpreter::Event e{node, 0, 0, p->runs_, fn.name(), {}};
    for (const c10::IValue& v : fn.inputs()) {
      if (v.isTensor() && v.toTensor().defined()) {
        std::ostringstream os;
        os << v.toTensor().sizes();
        e.input_shapes.push_back(os.str());
      } else {
        e.input_shapes.emplace_back();
      }
    }
    e.start_us = std::chrono::duration<double, std::micro>(ProfilingInterpreter::Clock::now() - p->origin_).count();
    p->events_.push_back(std::move(e));
    return std::make_unique<Context>(p->events_.size() - 1);
  }

  static void end(const at::RecordFunction&, at::ObserverContext* ctx) {
    ProfilingInterpreter* p = profiler;
    if (!p || !ctx) return;
    auto& e = p->events_.at(static_cast<Context*>(ctx)->index);
    e.dur_us = std::chrono::duration<double, std::micro>(ProfilingInterpreter::Clock::now() - p->origin_).count() -
               e.start_us;
  }
};

thread_local ProfilingInterpreter* OpRecorder::profiler = nullptr;
thread_local Node* OpRecorder::node = nullptr;

ProfilingInterpreter::~ProfilingInterpreter() {
  if (ops_callback_) at::removeCallback(ops_callback_);
}

c10::IValue ProfilingInterpreter::profile_run(std::vector<c10::IValue> args, bool record) {
  struct Recording {
    ProfilingInterpreter& p;
    Recording(ProfilingInterpreter& self, bool record) : p(self) {
      p.record_ = record;
      if (!record) return;
      ++p.runs_;
      if (p.record_ops_) {
        p.ops_callback_ = at::addThreadLocalCallback(at::RecordFunctionCallback(OpRecorder::start, OpRecorder::end)
                                                         .needsInputs(true)
                                                         .scopes({at::RecordScope::FUNCTION}));
        OpRecorder::profiler = &p;
      }
    }
    ~Recording() {
      p.record_ = false;
      if (p.ops_callback_) at::removeCallback(p.ops_callback_);
      p.ops_callback_ = 0;
      OpRecorder::profiler = nullptr;
      OpRecorder::node = nullptr;
    }
  } recording(*this, record);
  if (!module().memory_planning()) {
    planner_.reset();
    return run(std::move(args));
  }
  if (!planner_) planner_ = std::make_shared<detail::MemoryPlanner>();
  // The run's buffers come from the plan, as the forward's do. A planner's
  // plans belong to one compiled forward (its key); here to the planner itself.
  auto scope = planner_->begin(planner_, args);
  return run(std::move(args));
}

MemoryPlanStats ProfilingInterpreter::memory_plan_stats() const {
  return planner_ ? planner_->stats() : MemoryPlanStats{};
}

c10::IValue ProfilingInterpreter::run_node(Node* n) {
  if (!record_) return Interpreter::run_node(n);
  const size_t index = events_.size();
  events_.push_back({n, 0, 0, runs_, {}, {}});
  OpRecorder::node = n;
  auto t0 = Clock::now();
  c10::IValue v;
  try {
    v = Interpreter::run_node(n);
  } catch (...) {
    OpRecorder::node = nullptr;
    throw;
  }
  auto t1 = Clock::now();
  OpRecorder::node = nullptr;
  const double dur = std::chrono::duration<double, std::micro>(t1 - t0).count();
  node_us_[n] += dur;
  events_[index].start_us = std::chrono::duration<double, std::micro>(t0 - origin_).count();
  events_[index].dur_us = dur;
  return v;
}

void ProfilingInterpreter::reset() {
  node_us_.clear();
  events_.clear();
  runs_ = 0;
}

std::string ProfilingInterpreter::op_type(const Node* n) const {
  switch (n->op()) {
    case Opcode::CallModule:
      try {
        return module().get_submodule(n->target())->name();
      } catch (const std::exception&) {
        return n->target();
      }
    case Opcode::CallFunction: {
      const std::string& t = n->target();
      size_t ns = t.find("::");
      size_t dot = ns == std::string::npos ? std::string::npos : t.find('.', ns);
      return dot == std::string::npos ? t : t.substr(0, dot);
    }
    case Opcode::CallMethod: return "Tensor." + n->target();
    default: return to_string(n->op());
  }
}

namespace {
/// `s` in at most `width` characters: long names lose their middle
/// ("layer4_1_downsample_0" → "layer4...sample_0"), so columns stay aligned.
std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  const size_t head = (width - 3) / 2, tail = width - 3 - head;
  return s.substr(0, head) + "..." + s.substr(s.size() - tail);
}
}  // namespace

std::string ProfilingInterpreter::report(size_t top) const {
  const int runs = std::max(runs_, 1);
  double total = 0;
  for (const auto& kv : node_us_) total += kv.second;
  std::vector<std::pair<const Node*, double>> nodes(node_us_.begin(), node_us_.end());
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first->id() < b.first->id();
  });
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-14s %-30s %10s %7s\n", "node", "opcode", "target", "ms/run", "share");
  out += line;
  for (size_t i = 0; i < top && i < nodes.size(); ++i) {
    const Node* n = nodes[i].first;
    std::snprintf(line, sizeof line, "%-28s %-14s %-30s %10.3f %6.1f%%\n", fit(n->name(), 28).c_str(),
                  to_string(n->op()), fit(n->target(), 30).c_str(), nodes[i].second / 1e3 / runs, total > 0 ? 100.0 * nodes[i].second / total : 0.0);
    out += line;
  }
  std::map<std::string, std::pair<int, double>> by_type;
  for (const auto& kv : nodes) {
    auto& e = by_type[op_type(kv.first)];
    e.first += 1;
    e.second += kv.second;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> types(by_type.begin(), by_type.end());
  std::sort(types.begin(), types.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::snprintf(line, sizeof line, "\n%-30s %6s %10s %7s\n", "op type", "nodes", "ms/run", "share");
  out += line;
  for (const auto& t : types) {
    std::snprintf(line, sizeof line, "%-30s %6d %10.3f %6.1f%%\n", fit(t.first, 30).c_str(), t.second.first,
                  t.second.second / 1e3 / runs, total > 0 ? 100.0 * t.second.second / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-30s %6zu %10.3f %6.1f%%\n", "total", nodes.size(), total / 1e3 / runs, 100.0);
  out += line;
  return out;
}

namespace {
/// Microseconds to the nanosecond (Chrome's unit is the microsecond).
double ns_precision(double us) { return std::round(us * 1000.0) / 1000.0; }
}  // namespace

std::string ProfilingInterpreter::chrome_trace(const std::vector<Event>& events) {
  using nlohmann::json;
  json trace = json::array();
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "fxcpp"}}}});
  int last_run = 0;
  for (const Event& e : events) {
    if (e.run != last_run) {  // one track per run
      last_run = e.run;
      trace.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", 1},
                       {"tid", e.run},
                       {"args", {{"name", "run " + std::to_string(e.run)}}}});
    }
    json ev = {{"ph", "X"}, {"ts", ns_precision(e.start_us)}, {"dur", ns_precision(e.dur_us)}, {"pid", 1}, {"tid", e.run}};
    if (e.op.empty()) {
      ev["name"] = e.node->name();
      ev["cat"] = to_string(e.node->op());
      ev["args"] = {{"target", e.node->target()}};
    } else {
      ev["name"] = e.op;
      ev["cat"] = "operator";
      ev["args"] = {{"node", e.node->name()}, {"input_shapes", e.input_shapes}};
    }
    trace.push_back(std::move(ev));
  }
  json doc = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

void ProfilingInterpreter::write_chrome_trace(const std::string& path) const {
  const std::string text = chrome_trace(events_);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error(path + ": cannot be opened for writing");
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot be written");
  }
}

}  // namespace fx
