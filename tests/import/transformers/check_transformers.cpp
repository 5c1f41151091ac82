// Checks the import of torch.nn's transformer layers (issue 68) on the files
// tests/import/transformers/make_transformers.py writes. For each case NAME:
//  - NAME.expect.txt says "error TEXT": importing must fail with one line that
//    names the module and says what is not supported (never a crash);
//  - else: import with the inputs as example; no call_module of a
//    transformer class (or a run-time conditional) is left, only leaves of
//    Linear / LayerNorm / Dropout / activations; the graph has linears,
//    matmuls and a softmax; its output equals eager's (NAME.output.pt, eval
//    mode) within 1e-5; fx::optimize_for_inference lowers linears to oneDNN
//    and still matches; in train mode (NAME.train.pt, dropout 0) it equals
//    eager's train-mode output. encoder_script is also imported without
//    example inputs: its attentions then stay MultiheadAttention leaves.
// Prints one line per case; exits 1 when a case fails.
//
// usage: check_transformers DIR CASE...
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/optimize.h>
#include <fx/tensor_file.h>
#include <fx/torchscript.h>

#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/script.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr double kTolerance = 1e-5;

bool exists(const std::string& path) { return static_cast<bool>(std::ifstream(path)); }

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<c10::IValue> tuple_items(const c10::IValue& v) {
  if (!v.isTuple()) return {v};
  const auto& e = v.toTupleRef().elements();
  return std::vector<c10::IValue>(e.begin(), e.end());
}

// The short class name of the TorchScript submodule at `path`.
std::string class_at(const torch::jit::Module& root, const std::string& path) {
  torch::jit::Module m = root;
  std::stringstream ss(path);
  std::string atom;
  while (std::getline(ss, atom, '.')) {
    if (!m.hasattr(atom) || !m.attr(atom).isModule()) return "?";
    m = m.attr(atom).toModule();
  }
  std::string name = fx::demangled_type_name(m);
  return name.substr(name.rfind('.') + 1);
}

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void expect(bool ok, const std::string& what) {
  if (!ok) throw Failure(what);
}

double difference(const c10::IValue& actual, const c10::IValue& expected, const std::string& what) {
  fx::Difference d = fx::compare_values(actual, expected);
  std::ostringstream os;
  os << what << " differs from eager's by " << d.max_abs_diff;
  expect(d.max_abs_diff <= kTolerance, os.str());
  return d.max_abs_diff;
}

std::string check_case(const std::string& dir, const std::string& name) {
  const std::string base = dir + "/" + name;
  const std::string expected = first_line(base + ".expect.txt");
  torch::jit::Module module = torch::jit::load(base + ".pt");
  fx::ImportOptions options;
  options.example_inputs = tuple_items(fx::load_value(base + ".input.pt"));
  const std::vector<c10::IValue> inputs = options.example_inputs;

  if (expected.rfind("error ", 0) == 0) {
    try {
      fx::import_torchscript(module, base + ".pt", options);
    } catch (const fx::Error& e) {
      const std::string what = e.what();
      expect(what.find('\n') == std::string::npos, "the error is not one line: " + what);
      expect(what.find("block (TransformerEncoderLayer)") != std::string::npos &&
                 what.find("src_key_padding_mask of dtype Int is not supported") != std::string::npos,
             "unexpected error: " + what);
      return "error as expected: " + what.substr(what.find("module "));
    }
    throw Failure("imported, but eager rejects these inputs (" + expected.substr(6) + ")");
  }

  auto gm = fx::import_torchscript(module, base + ".pt", options);
  static const std::set<std::string> leaves = {"Linear", "NonDynamicallyQuantizableLinear", "LayerNorm", "Dropout",
                                               "ReLU", "GELU"};
  std::map<std::string, int> count;
  for (const fx::Node* n : gm->graph().nodes()) {
    if (n->op() == fx::Opcode::CallModule) {
      const std::string type = class_at(module, n->target());
      expect(leaves.count(type) > 0, "call_module " + n->target() + " (" + type + ") left in the graph");
      ++count[type];
    } else if (n->op() == fx::Opcode::CallFunction) {
      const std::string& t = n->target();
      const std::string base_name = t.substr(0, t.find('.', t.find("::") == std::string::npos ? 0 : t.find("::")));
      ++count[base_name];
    }
  }
  expect(count["aten::linear"] > 0, "no aten::linear (in_proj / out_proj)");
  expect(count["aten::matmul"] + count["aten::bmm"] >= 2, "no attention matmuls");
  expect(count["aten::softmax"] > 0, "no softmax");
  const bool layer = name.rfind("mha_", 0) != 0;
  const int norms = count["LayerNorm"] + count["aten::layer_norm"];
  if (layer) expect(norms >= 2 && count["Linear"] + count["aten::linear"] >= 4, "no layer norms / feed-forward linears");

  const c10::IValue eager = fx::load_value(base + ".output.pt");
  std::ostringstream row;
  {
    at::NoGradGuard no_grad;
    row << "eval " << difference(gm->forward(inputs), eager, "eval output");
  }

  fx::OptimizeOptions o;
  o.example_inputs = inputs;
  o.linear_kernel = fx::LinearKernel::OneDnn;
  fx::OptimizeReport report;
  auto optimized = fx::optimize_for_inference(gm, o, &report);
  expect(report.onednn_linears > 0, "optimize_for_inference lowered no linear to oneDNN");
  {
    at::NoGradGuard no_grad;
    row << ", optimised " << difference(optimized->forward(inputs), eager, "optimised output");
  }
  row << " (" << report.onednn_linears << " oneDNN linears, " << report.onednn_matmuls << " matmuls)";

  if (name == "encoder_script") {
    // Without example inputs the masks' values are not known at import: the
    // layers are written out, each attention stays a MultiheadAttention leaf.
    auto plain = fx::import_torchscript(module, base + ".pt", fx::ImportOptions{});
    int attention = 0;
    for (const fx::Node* n : plain->graph().nodes()) {
      if (n->op() != fx::Opcode::CallModule) continue;
      const std::string type = class_at(module, n->target());
      expect(leaves.count(type) > 0 || type == "MultiheadAttention",
             "without examples: call_module " + n->target() + " (" + type + ") left in the graph");
      attention += type == "MultiheadAttention";
    }
    expect(attention == 2, "without examples: expected the 2 attentions as leaves");
    at::NoGradGuard no_grad;
    row << ", no examples " << difference(plain->forward(inputs), eager, "output imported without examples");
  }
  if (exists(base + ".train.pt")) {
    gm->train();
    row << ", train " << difference(gm->forward(inputs), fx::load_value(base + ".train.pt"), "train-mode output");
    gm->eval();
  }
  row << "; nodes: " << gm->graph().nodes().size() << ", linear " << count["aten::linear"] << "+" << count["Linear"]
      << ", matmul " << count["aten::matmul"] + count["aten::bmm"] << ", layer_norm " << norms << ", dropout "
      << count["Dropout"] + count["aten::dropout"];
  return row.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_transformers DIR CASE...\n";
    return 2;
  }
  at::set_num_threads(1);
  int failed = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i];
    try {
      std::cout << name << ": " << check_case(argv[1], name) << "\n";
    } catch (const std::exception& e) {
      std::cout << name << ": FAILED: " << e.what() << "\n";
      ++failed;
    }
  }
  std::cout << (failed ? std::to_string(failed) + " failed" : std::string("all passed")) << "\n";
  return failed ? 1 : 0;
}
