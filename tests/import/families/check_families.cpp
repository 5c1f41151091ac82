// Checks fxcpp's TorchScript import on the model families of issue 14
// (segmentation, detection, video, quantized, sequence models, classifiers
// with auxiliary outputs, scripted control flow), exported by
// python/export_families.py as NAME.MODE.pt with their inputs and eager
// outputs. For each case NAME.MODE: load and import the file (after loading
// torchvision's operators when NAME.MODE.case.txt names the library), run
// GraphModule::forward on the inputs and compare the whole output structure
// with eager PyTorch's: the same kinds (tuple / list / dict / None / int ...)
// with the same lengths and keys in the same order, ints and integer tensors
// exact, floating tensors within 1e-4 * max(1, max |expected|) each.
// Writes the coverage table row to DIR/NAME.MODE.row and prints it: nodes of
// all graphs (the root's and its sub-GraphModules'), the number of
// sub-GraphModules, the largest abs difference of the floating tensors, the
// best of three import_torchscript times of the loaded module, and the
// outcome (the error's first line, absolute paths shortened to file names).
//
// EXPECTED lists every case's outcome today, one line a case:
//   NAME MODE pass
//   NAME MODE fail PART OF THE ERROR TEXT ... ANOTHER PART
// (the parts, split at " ... ", must occur in the error text in that order;
// file paths, which differ between checkouts, are left out that way).
// The program exits 1 when an outcome differs (a failure, a case that now
// passes — update the file —, a failure with another error, a case missing
// from the file), so the test asserts today's behaviour precisely.
//
// usage: check_families EXPECTED DIR CASE...   (CASE: NAME.MODE, or NAME for all
//        the modes EXPECTED lists for it)
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/load_library.h>
#include <fx/tensor_file.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------
// Whole-structure comparison.

constexpr double kTolerance = 1e-4;  // times max(1, max |expected|), per tensor

struct Mismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<c10::IValue> items(const c10::IValue& v) {
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    return std::vector<c10::IValue>(e.begin(), e.end());
  }
  auto l = v.toListRef();
  return std::vector<c10::IValue>(l.begin(), l.end());
}

// Raises Mismatch naming the position ("output[1][0]['boxes']") at the first
// difference; returns the largest abs difference of the floating tensors.
double compare(const c10::IValue& a, const c10::IValue& b, const std::string& where) {
  auto differ = [&](const std::string& what) { throw Mismatch(where + ": " + what); };
  if (b.isTensor()) {
    if (!a.isTensor()) differ(std::string("a ") + a.tagKind() + ", expected a Tensor");
    at::Tensor x = a.toTensor(), y = b.toTensor();
    if (x.sizes() != y.sizes()) {
      std::ostringstream os;
      os << "shape " << x.sizes() << ", expected " << y.sizes();
      differ(os.str());
    }
    if (x.scalar_type() != y.scalar_type())
      differ(std::string("dtype ") + c10::toString(x.scalar_type()) + ", expected " + c10::toString(y.scalar_type()));
    if (y.numel() == 0) return 0;
    if (y.is_quantized()) {
      x = x.dequantize();
      y = y.dequantize();
    }
    if (!y.is_floating_point()) {
      if (!x.equal(y)) differ("values differ (exact comparison)");
      return 0;
    }
    const double diff = (x.detach().to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>();
    const double scale = std::max(1.0, y.abs().max().item<double>());
    if (!(diff <= kTolerance * scale)) {
      char text[120];
      std::snprintf(text, sizeof text, "max abs diff %.3g over the tolerance %.3g", diff, kTolerance * scale);
      differ(text);
    }
    return diff;
  }
  if (b.isTuple() || b.isList()) {
    const char* kind = b.isTuple() ? "tuple" : "list";
    if (b.isTuple() ? !a.isTuple() : !a.isList()) differ(std::string("a ") + a.tagKind() + ", expected a " + kind);
    auto xs = items(a), ys = items(b);
    if (xs.size() != ys.size())
      differ(std::string(kind) + " of " + std::to_string(xs.size()) + ", expected " + std::to_string(ys.size()));
    double diff = 0;
    for (size_t i = 0; i < ys.size(); ++i)
      diff = std::max(diff, compare(xs[i], ys[i], where + "[" + std::to_string(i) + "]"));
    return diff;
  }
  if (b.isGenericDict()) {
    if (!a.isGenericDict()) differ(std::string("a ") + a.tagKind() + ", expected a dict");
    auto da = a.toGenericDict(), db = b.toGenericDict();
    std::vector<c10::IValue> ka, kb;
    for (const auto& kv : da) ka.push_back(kv.key());
    for (const auto& kv : db) kb.push_back(kv.key());
    auto names = [](const std::vector<c10::IValue>& keys) {
      std::ostringstream os;
      for (const auto& k : keys) os << (os.tellp() ? ", " : "") << k;
      return "{" + os.str() + "}";
    };
    if (ka.size() != kb.size() || !std::equal(ka.begin(), ka.end(), kb.begin(), [](const auto& x, const auto& y) {
          return x == y;
        }))
      differ("keys " + names(ka) + ", expected " + names(kb));
    double diff = 0;
    for (const auto& kv : db) {
      std::ostringstream key;
      key << kv.key();
      diff = std::max(diff, compare(da.at(kv.key()), kv.value(), where + "[" + key.str() + "]"));
    }
    return diff;
  }
  if (b.isDouble()) {
    if (!a.isDouble()) differ(std::string("a ") + a.tagKind() + ", expected a float");
    const double diff = std::abs(a.toDouble() - b.toDouble());
    if (!(diff <= kTolerance * std::max(1.0, std::abs(b.toDouble())))) differ("float differs");
    return diff;
  }
  if (a.tagKind() != b.tagKind()) differ(std::string("a ") + a.tagKind() + ", expected a " + b.tagKind());
  if (!(a == b)) {
    std::ostringstream os;
    os << a << ", expected " << b;
    differ(os.str());
  }
  return 0;
}

// ---------------------------------------------------------------------------

struct Expectation {
  bool pass = true;
  std::string error;  // a substring of the error text, when !pass
};

std::map<std::string, Expectation> read_expectations(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  std::map<std::string, Expectation> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string name, mode, outcome;
    is >> name >> mode >> outcome;
    Expectation e;
    e.pass = outcome == "pass";
    std::getline(is >> std::ws, e.error);
    if ((outcome != "pass" && outcome != "fail") || (outcome == "fail") == e.error.empty())
      throw std::runtime_error(path + ":" + std::to_string(number) +
                               ": expected 'NAME MODE pass' or 'NAME MODE fail ERROR-SUBSTRING'");
    out[name + "." + mode] = e;
  }
  return out;
}

// Whether the parts of `pattern` separated by " ... " occur in `text` in order.
bool matches(const std::string& text, const std::string& pattern) {
  size_t at = 0, from = 0;
  while (true) {
    const size_t end = pattern.find(" ... ", from);
    const std::string part = pattern.substr(from, end == std::string::npos ? std::string::npos : end - from);
    at = text.find(part, at);
    if (at == std::string::npos) return false;
    at += part.size();
    if (end == std::string::npos) return true;
    from = end + 5;
  }
}

// The expectation line for an outcome: the error's first line with file
// paths ("/usr/lib/.../functional.py:3859:7", "DIR/x.pt") left out as " ... ".
std::string expectation_line(const std::string& name_mode, const std::string& error) {
  std::string line = name_mode;
  if (line.rfind('.') != std::string::npos) line[line.rfind('.')] = ' ';
  if (error.empty()) return line + " pass";
  const std::string first = error.substr(0, error.find('\n'));
  std::string pattern;
  size_t i = 0;
  while (i < first.size()) {
    const bool starts_path = first[i] == '/' && (i == 0 || first[i - 1] == ' ');
    if (!starts_path) {
      pattern += first[i++];
      continue;
    }
    while (i < first.size() && first[i] != ' ') ++i;  // the path and its ":LINE:COL:"
    while (!pattern.empty() && pattern.back() == ' ') pattern.pop_back();
    if (pattern.empty()) {
      ++i;  // a leading path: the text starts after it
    } else {
      pattern += " ...";
    }
  }
  while (pattern.size() >= 4 && pattern.compare(pattern.size() - 4, 4, " ...") == 0) pattern.resize(pattern.size() - 4);
  return line + " fail " + pattern;
}

// `text` with each absolute path shortened to its file name
// ("/usr/lib/python3/.../functional.py:3859:7:" -> "functional.py:3859:7:").
std::string short_paths(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '/' && (i == 0 || text[i - 1] == ' ')) {
      const size_t end = std::min(text.find(' ', i), text.size());
      const size_t name = text.rfind('/', end - 1) + 1;
      out += text.substr(name, end - name);
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
}

struct CaseSettings {
  std::string library;  // torchvision's operators (detection's torchvision::nms)
  std::string qengine;  // the quantized engine the weights were packed for
};

CaseSettings read_settings(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": missing (run python/export_families.py)");
  CaseSettings s;
  std::string key, value;
  while (in >> key && std::getline(in >> std::ws, value)) {
    if (key == "library") s.library = value;
    if (key == "qengine") s.qengine = value;
  }
  return s;
}

void apply(const CaseSettings& s) {
  if (!s.library.empty()) fx::load_library(s.library);
  if (s.qengine == "qnnpack") at::globalContext().setQEngine(at::QEngine::QNNPACK);
  if (s.qengine == "fbgemm") at::globalContext().setQEngine(at::QEngine::FBGEMM);
  if (s.qengine == "onednn") at::globalContext().setQEngine(at::QEngine::ONEDNN);
}

// Returns the error text ("" when the case passes) and writes the row.
std::string check(const std::string& dir, const std::string& name_mode) {
  const std::string base = dir + "/" + name_mode;
  const size_t dot = name_mode.rfind('.');
  const std::string name = name_mode.substr(0, dot);
  const std::string mode = dot == std::string::npos ? "?" : name_mode.substr(dot + 1);
  size_t nodes = 0, subgraphs = 0;
  double import_ms = -1, diff = -1;
  std::string error;
  try {
    apply(read_settings(base + ".case.txt"));
    torch::jit::Module module = fx::load_torchscript(base + ".pt");
    const std::vector<c10::IValue> inputs = fx::load_inputs(base + ".input.pt");
    // As `fxcpp run` imports: with its inputs as examples, so conditions on
    // their rank and dtype fold (shape-dependent ones stay control flow).
    fx::ImportOptions options;
    options.example_inputs = inputs;
    auto t0 = Clock::now();
    auto gm = fx::import_torchscript(module, options);
    import_ms = ms_since(t0);
    for (int i = 0; i < 2; ++i) {  // best of three
      t0 = Clock::now();
      fx::import_torchscript(module, options);
      import_ms = std::min(import_ms, ms_since(t0));
    }
    // Nodes of every graph: the root's and its sub-GraphModules' (control flow).
    for (const auto& m : gm->modules(/*include_self=*/true)) {
      if (auto* sub = dynamic_cast<fx::GraphModule*>(m.get())) {
        sub->graph().lint();
        nodes += sub->graph().nodes().size();
        if (sub != gm.get()) ++subgraphs;
      }
    }
    const c10::IValue expected = fx::load_value(base + ".output.pt");
    torch::NoGradGuard no_grad;
    diff = compare(gm->forward(inputs), expected, "output");
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "(an exception without text)";
  }
  char diff_text[32] = "-", ms_text[32] = "-";
  if (diff >= 0) std::snprintf(diff_text, sizeof diff_text, "%.3g", diff);
  if (import_ms >= 0) std::snprintf(ms_text, sizeof ms_text, "%.1f", import_ms);
  const bool imported = import_ms >= 0;
  std::string row = "| " + name + " | " + mode + " | " + (imported ? std::to_string(nodes) : "-") + " | " +
                    (imported ? std::to_string(subgraphs) : "-") + " | " + diff_text + " | " + ms_text + " |";
  std::string first_line = short_paths(error.substr(0, error.find('\n')));
  std::replace(first_line.begin(), first_line.end(), '|', '/');
  row += error.empty() ? " pass |" : " FAIL: " + first_line + " |";
  std::cout << row << std::endl;
  std::ofstream(base + ".row") << row << "\n";
  return error;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: check_families EXPECTED DIR NAME[.MODE]...\n";
    return 2;
  }
  at::set_num_threads(1);
  std::map<std::string, Expectation> expected;
  try {
    expected = read_expectations(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  std::cout << "| model | mode | nodes | subgraphs | max diff | import ms | status |\n"
            << "|-------|------|-------|-----------|----------|-----------|--------|\n";
  // NAME stands for every NAME.MODE that EXPECTED lists.
  std::vector<std::string> cases;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t before = cases.size();
    for (const auto& e : expected)
      if (e.first == arg || e.first.rfind(arg + ".", 0) == 0) cases.push_back(e.first);
    if (cases.size() == before) cases.push_back(arg);  // not listed: an unexpected outcome below
  }
  std::vector<std::string> unexpected, suggestions;
  for (const std::string& case_name : cases) {
    const std::string error = check(argv[2], case_name);
    auto it = expected.find(case_name);
    if (it == expected.end()) {
      unexpected.push_back(case_name + ": not in " + std::string(argv[1]) + " (outcome: " +
                           (error.empty() ? "pass" : "fail " + error.substr(0, error.find('\n'))) + ")");
    } else if (it->second.pass && !error.empty()) {
      unexpected.push_back(case_name + ": expected to pass, failed: " + error);
    } else if (!it->second.pass && error.empty()) {
      unexpected.push_back(case_name + ": passes now; expected.txt says it fails with '" + it->second.error +
                           "' (update it to 'pass')");
    } else if (!it->second.pass && !matches(error, it->second.error)) {
      unexpected.push_back(case_name + ": fails with another error than '" + it->second.error + "': " + error);
    } else {
      continue;
    }
    suggestions.push_back(expectation_line(case_name, error));
  }
  for (const auto& u : unexpected) std::cout << "UNEXPECTED " << u << "\n";
  if (!suggestions.empty()) {
    std::cout << "The lines of " << argv[1] << " for today's outcomes:\n";
    for (const auto& s : suggestions) std::cout << s << "\n";
  }
  return unexpected.empty() ? 0 : 1;
}
