// ProfilingInterpreter: per-node times, a report and a Chrome trace.
#include <fx/passes/profiler.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

namespace fx {

c10::IValue ProfilingInterpreter::profile_run(std::vector<c10::IValue> args, bool record) {
  record_ = record;
  if (record) ++runs_;
  c10::IValue out = run(std::move(args));
  record_ = false;
  return out;
}

c10::IValue ProfilingInterpreter::run_node(Node* n) {
  auto t0 = Clock::now();
  c10::IValue v = Interpreter::run_node(n);
  auto t1 = Clock::now();
  if (record_) {
    double dur = std::chrono::duration<double, std::micro>(t1 - t0).count();
    node_us_[n] += dur;
    events_.push_back({n, std::chrono::duration<double, std::micro>(t0 - origin_).count(), dur, runs_});
  }
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
    std::snprintf(line, sizeof line, "%-28s %-14s %-30s %10.3f %6.1f%%\n", n->name().c_str(), to_string(n->op()),
                  n->target().c_str(), nodes[i].second / 1e3 / runs, total > 0 ? 100.0 * nodes[i].second / total : 0.0);
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
    std::snprintf(line, sizeof line, "%-30s %6d %10.3f %6.1f%%\n", t.first.c_str(), t.second.first,
                  t.second.second / 1e3 / runs, total > 0 ? 100.0 * t.second.second / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-30s %6zu %10.3f %6.1f%%\n", "total", nodes.size(), total / 1e3 / runs, 100.0);
  out += line;
  return out;
}

namespace {
std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}
}  // namespace

void ProfilingInterpreter::write_chrome_trace(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot be opened for writing");
  out << "{\"traceEvents\":[\n";
  bool first = true;
  for (const auto& e : events_) {
    out << (first ? "" : ",\n") << "{\"name\":\"" << json_escape(e.node->name()) << "\",\"cat\":\""
        << to_string(e.node->op()) << "\",\"ph\":\"X\",\"ts\":" << e.start_us << ",\"dur\":" << e.dur_us
        << ",\"pid\":1,\"tid\":1,\"args\":{\"target\":\"" << json_escape(e.node->target()) << "\",\"run\":" << e.run
        << "}}";
    first = false;
  }
  out << "\n],\"displayTimeUnit\":\"ms\"}\n";
  if (!out) throw Error(path + ": write failed");
}

}  // namespace fx
