// Seed 002, Interpreter::boxed_run: the caller hands over its input vector,
// the interpreter clears it before running, so each input can be freed as soon
// as its last user has run. Also: what a failing node's error looks like.
//
//   build/examples/seed002_boxed_run
#include <fx/fx.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iostream>

namespace {

/// Records, after every node, how many references the input's storage has.
class WatchingInterpreter : public fx::Interpreter {
 public:
  WatchingInterpreter(std::shared_ptr<fx::GraphModule> gm, c10::weak_intrusive_ptr<c10::StorageImpl> input)
      : fx::Interpreter(std::move(gm)), input_(std::move(input)) {}
  c10::IValue run_node(fx::Node* n) override {
    c10::IValue v = fx::Interpreter::run_node(n);
    std::cout << "    after " << n->name() << ": input storage alive = " << (input_.expired() ? "no" : "yes") << "\n";
    if (input_.expired() && freed_after_.empty()) freed_after_ = n->name();
    return v;
  }
  std::string freed_after_;

 private:
  c10::weak_intrusive_ptr<c10::StorageImpl> input_;
};

}  // namespace

int main() {
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
    failures += ok ? 0 : 1;
  };

  // forward(x) = (relu(x) * 2).sum(): x is dead once relu has run.
  auto gm = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return (at::relu(a[0].toTensor()) * 2).sum(); },
      {at::randn({1024})});
  std::cout << gm->graph().tabular();

  std::vector<c10::IValue> inputs{at::randn({1024})};
  const double expected = (at::relu(inputs[0].toTensor()) * 2).sum().item<double>();
  WatchingInterpreter interp(gm, inputs[0].toTensor().storage().getWeakStorageImpl());
  c10::IValue out = interp.boxed_run(inputs);  // `inputs` is ours no more
  check(inputs.empty(), "boxed_run cleared the caller's vector");
  check(!interp.freed_after_.empty(), "the input was freed during the run, after node " + interp.freed_after_);
  check(std::abs(out.toTensor().item<double>() - expected) < 1e-4, "the result equals eager");

  // A node that fails says which node it was: x + y traced on [4] + [4], run on [4] + [3]
  // (the length declared dynamic, one size "n" for both, so that the inputs pass the shape guards).
  fx::TraceOptions any_size;
  any_size.dynamic_dims = {{0, 0, "n"}, {1, 0, "n"}};
  auto add = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() + a[1].toTensor(); },
      {at::randn({4}), at::randn({4})}, {}, any_size);
  std::vector<c10::IValue> mismatched{at::randn({4}), at::randn({3})};
  try {
    fx::Interpreter(add).boxed_run(mismatched);
    check(false, "a shape mismatch fails");
  } catch (const fx::Error& e) {
    std::string msg = e.what();
    std::cout << "  error: " << msg << "\n";
    check(msg.find("While executing %") != std::string::npos, "the error names the node it happened in");
  }
  return failures == 0 ? 0 : 1;
}
