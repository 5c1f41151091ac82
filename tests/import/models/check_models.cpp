// Checks fxcpp's TorchScript import on torchvision models exported by
// python/export_models.py against Python torch.fx and eager PyTorch:
//  (a) structure: the (opcode, target) sequence equals Python
//      symbolic_trace's (targets mapped to ATen names, overloads ignored);
//  (b) numbers: GraphModule::forward and Interpreter::run equal the eager
//      output (max abs diff <= 1e-4 * max abs output);
//  (c) models torch.fx cannot trace import and match all the same.
// Prints one coverage table row per model and writes it to DIR/NAME.row.
//
// usage: check_models DIR MODEL...
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/tensor_file.h>

#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string strip_overload(const std::string& target) {
  size_t ns = target.find("::");
  if (ns == std::string::npos) return target;
  size_t dot = target.find('.', ns);
  return dot == std::string::npos ? target : target.substr(0, dot);
}

std::string strip_inplace(const std::string& s) {
  return !s.empty() && s.back() == '_' && s.rfind("call_function aten::", 0) == 0 ? s.substr(0, s.size() - 1) : s;
}

struct FxReference {
  bool ok = false;
  double trace_ms = 0;
  std::string error;
  std::vector<std::string> nodes;  // "opcode target"
};

FxReference read_reference(const std::string& path) {
  FxReference r;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": missing (run python/export_models.py)");
  std::string line;
  std::getline(in, line);
  if (line.rfind("ok ", 0) == 0) {
    r.ok = true;
    r.trace_ms = std::stod(line.substr(3));
    while (std::getline(in, line))
      if (!line.empty()) r.nodes.push_back(line);
  } else {
    r.error = line.size() > 6 ? line.substr(6) : line;
  }
  return r;
}

// "yes", "yes (in-place as out-of-place)" or "no: first difference ...".
std::string compare_structure(const std::vector<std::string>& ours, const std::vector<std::string>& fx, bool& ok) {
  ok = true;
  if (ours == fx) return "yes";
  auto normalise = [](std::vector<std::string> v) {
    for (auto& s : v) s = strip_inplace(s);
    return v;
  };
  if (normalise(ours) == normalise(fx)) return "yes (in-place ops)";
  ok = false;
  size_t i = 0;
  while (i < ours.size() && i < fx.size() && strip_inplace(ours[i]) == strip_inplace(fx[i])) ++i;
  std::ostringstream os;
  os << "NO: node " << i << " is '" << (i < ours.size() ? ours[i] : "<end>") << "', torch.fx has '"
     << (i < fx.size() ? fx[i] : "<end>") << "' (" << ours.size() << " vs " << fx.size() << " nodes)";
  return os.str();
}

bool check(const std::string& dir, const std::string& name) {
  const std::string base = dir + "/" + name;
  std::ostringstream row;
  bool ok = true;
  try {
    auto t0 = Clock::now();
    torch::jit::Module module = fx::load_torchscript(base + ".pt");
    double load_ms = ms_since(t0);
    t0 = Clock::now();
    auto gm = fx::import_torchscript(module);
    double import_ms = ms_since(t0);
    for (int i = 0; i < 2; ++i) {  // best of three, as the Python side measures
      t0 = Clock::now();
      fx::import_torchscript(module);
      import_ms = std::min(import_ms, ms_since(t0));
    }
    gm->graph().lint();

    std::vector<std::string> ours;
    for (fx::Node* n : gm->graph().nodes())
      ours.push_back(std::string(fx::to_string(n->op())) + " " +
                     (n->op() == fx::Opcode::CallFunction ? strip_overload(n->target()) : n->target()));
    FxReference ref = read_reference(base + ".fx.txt");
    std::string structure;
    if (ref.ok) {
      bool same = false;
      structure = compare_structure(ours, ref.nodes, same);
      ok = ok && same;
    } else {
      structure = "n/a (torch.fx: " + ref.error.substr(0, ref.error.find('.')) + ")";
    }

    auto inputs = fx::load_inputs(base + ".input.pt");
    c10::IValue expected = fx::load_value(base + ".output.pt");
    torch::NoGradGuard no_grad;
    auto d = fx::compare_values(gm->forward(inputs), expected);
    auto di = fx::compare_values(fx::Interpreter(gm).run(inputs), expected);
    double diff = std::max(d.max_abs_diff, di.max_abs_diff);
    bool close = diff <= 1e-4 * d.max_abs_expected;
    ok = ok && close;

    char nums[160];
    std::snprintf(nums, sizeof nums, "| %-20s | %5zu | %9.3g%s | %8.1f | %8.1f | %s |", name.c_str(),
                  gm->graph().nodes().size(), diff, close ? "" : " FAIL", import_ms, load_ms,
                  ref.ok ? (std::to_string(static_cast<int>(ref.trace_ms + 0.5)) + " ms").c_str() : "-");
    row << nums << " " << structure << " |";
  } catch (const std::exception& e) {
    std::string what = e.what();
    row << "| " << name << " | FAILED: " << what.substr(0, what.find('\n')) << " |";
    ok = false;
  }
  std::cout << row.str() << std::endl;
  std::ofstream(base + ".row") << row.str() << "\n";
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_models DIR MODEL...\n";
    return 2;
  }
  at::set_num_threads(1);
  std::cout << "| model                | nodes | max diff  | import ms | load ms | fx trace | structure = torch.fx |\n"
            << "|----------------------|-------|-----------|-----------|---------|----------|----------------------|\n";
  bool ok = true;
  for (int i = 2; i < argc; ++i) ok = check(argv[1], argv[i]) && ok;
  return ok ? 0 : 1;
}
