// Seed 003, Interpreter::placeholder: how run() binds inputs, what too few or
// too many arguments do, a custom placeholder, partial evaluation with
// initial_env, a profiling interpreter, a custom Tracer's leaf modules, and the
// error for control flow on traced values.
//
//   build/examples/seed003_placeholder
#include <fx/fx.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
  failures += ok ? 0 : 1;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// Times every node (seed 003's MyProfilingInterpreter).
class ProfilingInterpreter : public fx::Interpreter {
 public:
  using fx::Interpreter::Interpreter;
  c10::IValue run_node(fx::Node* n) override {
    auto t0 = std::chrono::steady_clock::now();
    c10::IValue v = fx::Interpreter::run_node(n);
    seconds[n->name()] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return v;
  }
  std::map<std::string, double> seconds;
};

/// Feeds a fixed value to placeholder `y`, whatever the caller passes.
class FixedYInterpreter : public fx::Interpreter {
 public:
  using fx::Interpreter::Interpreter;
  c10::IValue placeholder(const std::string& target, std::vector<c10::IValue>& args,
                          fx::ValueKwargs& kwargs) override {
    if (target == "y") return at::full({1}, 100.0);
    return fx::Interpreter::placeholder(target, args, kwargs);
  }
};

/// Keeps nn::Linear as one call_module node, or traces through it.
class LinearTracer : public fx::Tracer {
 public:
  explicit LinearTracer(bool keep_linear) : keep_linear_(keep_linear) {}
  bool is_leaf_module(const torch::nn::Module& m, const std::string& name) override {
    if (dynamic_cast<const torch::nn::LinearImpl*>(&m)) return keep_linear_;
    return fx::Tracer::is_leaf_module(m, name);
  }

 private:
  bool keep_linear_;
};

struct ComplexModelImpl : torch::nn::Module {
  ComplexModelImpl() : linear(register_module("linear", torch::nn::Linear(4, 3))) {}
  at::Tensor forward(const at::Tensor& x) { return at::relu(linear(x)); }
  torch::nn::Linear linear;
};
TORCH_MODULE(ComplexModel);

}  // namespace

int main() {
  // forward(x, y) = x * 2 + y, with the placeholders named as in the seed.
  fx::Tracer tracer;
  tracer.set_input_names({"x", "y"});
  fx::TraceOptions any_length;  // the profiling run below uses length 256
  any_length.dynamic_dims = {{0, 0, "n"}, {1, 0, "n"}};
  tracer.set_options(any_length);
  auto graph = tracer.trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() * 2 + a[1].toTensor(); },
      {at::ones({1}), at::ones({1})});
  auto gm = fx::to_graph_module(tracer, graph);
  std::cout << gm->graph() << "\n";
  const std::string y_name = "y";

  // run binds the placeholders in order.
  fx::Interpreter interp(gm);
  double r = interp.run({at::full({1}, 3.0), at::full({1}, 4.0)}).toTensor().item<double>();
  check(r == 10.0, "run(3, 4) binds x=3, y=4: 3 * 2 + 4 = " + std::to_string(r));

  // Too few: torch.fx's message, then the node.
  std::string msg = error_of([&] { interp.run({at::full({1}, 3.0)}); });
  std::cout << "  too few: " << msg << "\n";
  check(msg.rfind("Expected positional argument for parameter " + y_name + ", but one was not passed in!", 0) == 0,
        "too few arguments name the missing parameter");

  // Too many: torch.fx ignores extras silently; fxcpp refuses unless asked.
  msg = error_of([&] { interp.run({at::ones({1}), at::ones({1}), at::ones({1})}); });
  std::cout << "  too many: " << msg << "\n";
  check(msg != "<no error>", "too many arguments are an error by default");
  interp.allow_extra_args(true);
  check(interp.run({at::ones({1}), at::ones({1}), at::ones({1})}).toTensor().item<double>() == 3.0,
        "allow_extra_args(true) ignores them, as torch.fx does");

  // A custom placeholder injects a value.
  FixedYInterpreter fixed(gm);
  r = fixed.run({at::full({1}, 1.0), at::full({1}, 0.0)}).toTensor().item<double>();
  check(r == 102.0, "a placeholder override feeds y = 100: 1 * 2 + 100 = " + std::to_string(r));

  // initial_env: a node with a value is not run (partial evaluation).
  fx::Node* mul = gm->graph().find_nodes(fx::Opcode::CallFunction)[0];
  fx::Env env;
  env.set(mul, at::full({1}, 50.0));
  r = fx::Interpreter(gm).run({at::full({1}, 1.0), at::full({1}, 1.0)}, &env).toTensor().item<double>();
  check(r == 51.0, "initial_env pins " + mul->name() + " to 50: 50 + 1 = " + std::to_string(r));

  // A profiling interpreter times every node.
  ProfilingInterpreter prof(gm);
  prof.run({at::randn({256}), at::randn({256})});
  std::cout << "  node            seconds\n";
  for (const auto& [name, s] : prof.seconds) std::cout << "  " << std::setw(14) << std::left << name << s << "\n";
  check(prof.seconds.size() == gm->graph().nodes().size(), "every node was timed");

  // A custom tracer keeps Linear as a leaf, or traces through it.
  auto model = ComplexModel();
  LinearTracer keep(true), through(false);
  auto kept = keep.trace(model.ptr(), {at::randn({2, 4})});
  auto inlined = through.trace(model.ptr(), {at::randn({2, 4})});
  check(kept->find_nodes(fx::Opcode::CallModule, std::string("linear")).size() == 1,
        "is_leaf_module(Linear) = true: one call_module[target=linear]");
  check(inlined->find_nodes(fx::Opcode::CallModule).empty() &&
            inlined->find_nodes(fx::Opcode::GetAttr, std::string("linear.weight")).size() == 1,
        "is_leaf_module(Linear) = false: its aten ops and a get_attr of linear.weight");

  // Control flow on a traced value cannot be captured.
  msg = error_of([] {
    fx::symbolic_trace(
        [](std::vector<c10::IValue> a) -> c10::IValue {
          at::Tensor x = a[0].toTensor();
          if (x.sum().item<double>() > 0) return x * 2;
          return x;
        },
        {at::randn({3})});
  });
  std::cout << "  control flow: " << msg << "\n";
  check(msg.find("symbolically traced variables cannot be used as inputs to control flow") != std::string::npos,
        "if (x.sum() > 0) raises TraceError");
  return failures == 0 ? 0 : 1;
}
