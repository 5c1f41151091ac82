// Shared helpers of the model subcommands.
#include "model_io.h"

#include <fx/import.h>
#include <fx/serialize.h>
#include <fx/shape_guard.h>
#include <fx/tensor_file.h>

#include <ATen/Parallel.h>
#include <ATen/ops/cat.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace fx::cli {

namespace {
char* activity_buffer = nullptr;
size_t activity_size = 0;
}  // namespace

void install_activity_buffer(char* buffer, size_t size) {
  activity_buffer = buffer;
  activity_size = size;
}

bool progress_enabled() {
  static const bool progress = ::isatty(STDERR_FILENO) == 1 && std::getenv("FXCPP_NO_PROGRESS") == nullptr;
  return progress;
}

void set_activity(const std::string& what) {
  // Progress for people: on a terminal, each step is a line on stderr
  // ("fxcpp: reading resnet50.pt ..."); quiet when stderr is a file or pipe.
  if (progress_enabled() && !what.empty()) std::cerr << "fxcpp: " << what << " ...\n";
  if (activity_buffer == nullptr || activity_size == 0) return;
  const size_t n = std::min(what.size(), activity_size - 1);
  std::memcpy(activity_buffer, what.data(), n);
  activity_buffer[n] = '\0';
  if (!what.empty() && std::getenv("FXCPP_TEST_CRASH") != nullptr) std::raise(SIGSEGV);
}

bool is_fx_model(const std::string& path) {
  return (path.size() > 3 && path.compare(path.size() - 3, 3, ".fx") == 0) || is_fxcpp_file(path);
}

std::shared_ptr<GraphModule> import_model(const std::string& path, double* import_ms, const c10::IValue* example_value,
                                          bool specialize_shapes, const std::string& example_path) {
  set_activity("reading " + path);
  auto t0 = std::chrono::steady_clock::now();
  // An fxcpp file (fx::save) by extension or content; TorchScript otherwise.
  std::shared_ptr<GraphModule> gm;
  if (is_fx_model(path)) {
    gm = load(path);
  } else {
    const torch::jit::Module module = load_torchscript(path);
    ImportOptions options;
    const torch::jit::Function* forward = module.type()->findMethod("forward");
    if (example_value && forward) {
      // Matched to forward's parameters as the run will be (a saved list may
      // be its one List[Tensor]); inputs that do not match are left to
      // load_model_inputs' message, after the import.
      try {
        options.example_inputs = bind_inputs(*example_value, input_parameters(forward->getSchema()), example_path);
      } catch (const Error&) {
      }
    }
    options.specialize_shapes = specialize_shapes;
    try {
      gm = import_torchscript(module, path, options);
    } catch (const ImportError& e) {
      // More inputs than forward takes: load_model_inputs says so, naming them.
      if (options.example_inputs.empty() || std::string(e.what()).find("example_inputs has") == std::string::npos)
        throw;
      gm = import_torchscript(module, path, ImportOptions{});
    }
  }
  if (import_ms) *import_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return gm;
}

std::pair<std::shared_ptr<GraphModule>, std::vector<c10::IValue>> import_model_with_inputs(
    const std::string& path, const std::string& input_path, bool specialize_shapes) {
  set_activity("reading " + input_path);
  const c10::IValue value = load_value(input_path);
  auto gm = import_model(path, nullptr, &value, specialize_shapes, input_path);
  return {gm, model_inputs(*gm, value, input_path)};
}

std::vector<c10::IValue> load_model_inputs(GraphModule& gm, const std::string& path) {
  set_activity("reading " + path);
  return model_inputs(gm, load_value(path), path);
}

std::vector<c10::IValue> model_inputs(GraphModule& gm, const c10::IValue& value, const std::string& path) {
  std::vector<c10::IValue> inputs = bind_inputs(value, input_parameters(gm.graph()), path);
  auto placeholders = gm.graph().find_nodes(Opcode::Placeholder);
  size_t required = 0;
  for (Node* p : placeholders)
    if (p->args().empty()) ++required;
  if (inputs.size() < required || inputs.size() > placeholders.size()) {
    std::ostringstream os;
    os << path << ": " << inputs.size() << " input" << (inputs.size() == 1 ? "" : "s") << ", but the model takes ";
    if (required == placeholders.size()) os << required;
    else os << required << " to " << placeholders.size();
    os << " (";
    for (size_t i = 0; i < placeholders.size(); ++i) os << (i ? ", " : "") << placeholders[i]->name();
    os << ")";
    throw Error(os.str());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Node* p = placeholders[i];
    auto it = p->meta().find("torchscript_type");
    if (it == p->meta().end()) continue;
    const std::string type = std::any_cast<std::string>(it->second);
    if (type == "Tensor" && !inputs[i].isTensor())
      throw Error(path + ": input " + std::to_string(i) + " (" + p->name() + ") must be a tensor, got " +
                  inputs[i].tagKind());
  }
  return inputs;
}

namespace {

/// A run error split into its root cause and the node it names.
struct ErrorParts {
  std::string cause;  ///< one line, without backtraces
  std::string node;   ///< format_node of the node being executed ("%x : [#users=1] = ..."), or ""
};

ErrorParts split_error(const std::exception& e) {
  std::string msg;
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) msg = c->what_without_backtrace();
  else msg = e.what();
  std::vector<std::string> lines;
  std::istringstream in(msg);
  for (std::string line; std::getline(in, line);) {
    size_t b = line.find_first_not_of(" \t");
    if (b != std::string::npos) lines.push_back(line.substr(b));
  }
  if (lines.empty()) return {"unknown error", ""};
  std::string cause, node;
  for (const auto& l : lines) {
    if (l.rfind("RuntimeError: ", 0) == 0) cause = l.substr(14);
    if (node.empty() && l.rfind("While executing ", 0) == 0) node = l.substr(16);
  }
  if (cause.empty()) {
    for (const auto& l : lines) {
      // ShapeProp's "ShapeProp error for: node=..." (torch.fx's wording) precedes the cause.
      if (l.rfind("While executing", 0) == 0 || l.rfind("The following operation failed", 0) == 0 ||
          l.rfind("ShapeProp error for: ", 0) == 0 ||
          l.find("Could this error message be improved?") != std::string::npos ||
          l.rfind("Traceback", 0) == 0 || l.rfind("Exception raised from", 0) == 0)
        continue;
      cause = l;
      break;
    }
  }
  if (cause.empty()) cause = lines.front();
  // "[enforce fail at inline_container.cc:222] . file not found: x" -> "file not found: x"
  if (cause.rfind("[enforce fail at ", 0) == 0 && cause.find(']') != std::string::npos) {
    cause = cause.substr(cause.find(']') + 1);
    size_t b = cause.find_first_not_of(" .");
    cause = b == std::string::npos ? std::string("internal check failed") : cause.substr(b);
  }
  size_t boilerplate = cause.find("Could this error message be improved?");
  if (boilerplate != std::string::npos) cause = cause.substr(0, boilerplate);
  while (!cause.empty() && (cause.back() == ' ' || cause.back() == '.')) cause.pop_back();
  if (cause.empty()) cause = "unknown error";
  return {cause, node};
}

}  // namespace

bool names_a_node(const std::exception& e) { return !split_error(e).node.empty(); }

std::string one_line_error(const std::exception& e) {
  const ErrorParts p = split_error(e);
  if (p.node.empty()) return p.cause;
  return p.cause + " (while executing " + p.node.substr(0, p.node.find(" : ")) + ")";
}

int report_run_error(const std::string& command, const std::string& model, const std::string& input,
                     const std::exception& e) {
  const ErrorParts p = split_error(e);
  // "%view : [#users=1] = call_method[target=view](args = (%x, 5), kwargs = {})"
  const size_t eq = p.node.find(" = ");
  const std::string op = eq == std::string::npos ? std::string() : p.node.substr(eq + 3, p.node.find(']', eq) + 1 - (eq + 3));
  // Bad input: what forward / run check before any node runs (shape guards,
  // argument counts, missing arguments: a placeholder without a value).
  const bool bad_input = dynamic_cast<const ShapeGuardError*>(&e) != nullptr ||
                         (p.node.empty() && dynamic_cast<const Error*>(&e) != nullptr) ||
                         op.rfind("placeholder[", 0) == 0;
  std::cerr << "fxcpp " << command << ": ";
  if (bad_input) {
    std::cerr << input << ": bad input for " << model << ": " << one_line_error(e) << "\n";
    return kBadInput;
  }
  std::cerr << model << " failed on " << input;
  if (!p.node.empty()) {
    std::string name = p.node.substr(0, p.node.find(" : "));
    if (!name.empty() && name[0] == '%') name.erase(0, 1);
    std::cerr << " at node " << name << (op.empty() ? "" : " (" + op + ")");
  }
  std::cerr << ": " << p.cause << "\n";
  return kRunFailed;
}

std::vector<c10::IValue> batched(const std::vector<c10::IValue>& inputs, int batch) {
  if (batch == 1) return inputs;
  std::vector<c10::IValue> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor()) {
      out.push_back(inputs[i]);
      continue;
    }
    const at::Tensor& t = inputs[i].toTensor();
    if (t.dim() == 0) throw Error("--batch: input " + std::to_string(i) + " is a 0-dim tensor (no dim 0 to repeat)");
    out.emplace_back(at::cat(std::vector<at::Tensor>(static_cast<size_t>(batch), t), 0));
  }
  return out;
}

int set_threads(const ModelArgs& args) {
  constexpr int kMaxThreads = 256;  // more is a typo, not a benchmark (each is an OS thread in two pools)
  const int threads = args.get_int("threads", 1);
  if (threads > kMaxThreads)
    throw Error("--threads " + std::to_string(threads) + ": at most " + std::to_string(kMaxThreads));
  at::set_num_threads(threads);
  // OpenBLAS (libopenblas0-pthread) keeps its own pool, sized to the machine,
  // which at::set_num_threads does not reach: a "1 thread" TorchScript run
  // would use every core in at::mm. Its own setter, when it is the loaded BLAS.
  using SetBlasThreads = void (*)(int);
  if (auto set_blas = reinterpret_cast<SetBlasThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_blas(threads);
  return threads;
}

void describe_value(std::ostream& os, const c10::IValue& v, const std::string& indent) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    os << indent << "tensor " << t.sizes() << " " << t.scalar_type();
    if (t.numel() > 0 && t.is_floating_point()) {
      at::Tensor d = t.detach().to(at::kDouble);
      os << "  min " << d.min().item<double>() << "  max " << d.max().item<double>() << "  mean "
         << d.mean().item<double>();
    }
    os << "\n";
  } else if (v.isTuple()) {
    os << indent << "tuple of " << v.toTupleRef().elements().size() << "\n";
    for (const auto& e : v.toTupleRef().elements()) describe_value(os, e, indent + "  ");
  } else if (v.isList()) {
    os << indent << "list of " << v.toListRef().size() << "\n";
    for (const auto& e : v.toListRef()) describe_value(os, e, indent + "  ");
  } else {
    os << indent << v << "\n";
  }
}

}  // namespace fx::cli
