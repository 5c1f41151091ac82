// symbolic_trace errors: control flow on traced values, unrecognizable
// leaves, escaped proxies; a failed trace leaves no state behind.
#include <fx/examples/residual_net.h>
#include <fx/trace.h>

#include "trace_models.h"
#include "trace_test_util.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>

namespace fx {
namespace {

const char* const kMessage = "symbolically traced variables cannot be used as inputs to control flow";

std::string trace_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no TraceError)";
}

TEST(TraceErrors, ControlFlowOnTracedValues) {
  // Seed 003: `a + b if a.sum() > 0 else a * b`.
  auto m = trace_test::AddMulModel();
  std::string msg = trace_error_of([&] { symbolic_trace(m, {at::randn({5}), at::randn({5})}); });
  EXPECT_NE(msg.find(kMessage), std::string::npos) << msg;
  EXPECT_NE(msg.find("aten::item"), std::string::npos) << msg;

  msg = trace_error_of([] {
    Tracer().trace([](std::vector<c10::IValue> a) -> c10::IValue {
      at::Tensor x = a[0].toTensor();
      return (x.sum() > 0).is_nonzero() ? x : -x;
    }, {at::randn({3})});
  });
  EXPECT_NE(msg.find(kMessage), std::string::npos) << msg;
  EXPECT_NE(msg.find("aten::is_nonzero"), std::string::npos) << msg;

  msg = trace_error_of([] {
    Tracer().trace([](std::vector<c10::IValue> a) -> c10::IValue {
      at::Tensor x = a[0].toTensor();
      return at::equal(x, x.abs()) ? x : -x;
    }, {at::randn({3})});
  });
  EXPECT_NE(msg.find("aten::equal"), std::string::npos) << msg;

  msg = trace_error_of([] {
    Tracer().trace([](std::vector<c10::IValue> a) -> c10::IValue {
      at::Tensor x = a[0].toTensor().contiguous();
      return x.data_ptr<float>()[0] > 0 ? x : -x;
    }, {at::randn({3})});
  });
  EXPECT_NE(msg.find(kMessage), std::string::npos) << msg;
}

TEST(TraceErrors, FailedTraceLeavesNoState) {
  auto bad = trace_test::AddMulModel();
  auto net = examples::ResidualNet();
  net->eval();
  at::Tensor x = at::randn({1, 3, 8, 8});
  at::Tensor before = net->forward(x);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(symbolic_trace(bad, {at::randn({5}), at::randn({5})}), TraceError);
    // Eager calls (with autograd) still work and give the same answer ...
    at::Tensor xg = x.clone().requires_grad_(true);
    at::Tensor y = net->forward(xg);
    EXPECT_TRUE(y.equal(before));
    y.sum().backward();
    EXPECT_TRUE(xg.grad().defined());
    EXPECT_FALSE(c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::AutogradPrivateUse1));
    // ... and so does the next trace.
    auto g = Tracer().trace(net.ptr(), {x});
    EXPECT_EQ(g->find_nodes(Opcode::CallModule).size(), 7u);
  }
}

TEST(TraceErrors, LeafTheTracerCannotRecognize) {
  struct ReluLeaf : Tracer {
    bool is_leaf_module(const torch::nn::Module& m, const std::string& q) override {
      return dynamic_cast<const torch::nn::ReLUImpl*>(&m) != nullptr || Tracer::is_leaf_module(m, q);
    }
  };
  auto seq = torch::nn::Sequential(torch::nn::Linear(2, 2), torch::nn::ReLU());
  ReluLeaf tracer;
  std::string msg = trace_error_of([&] { tracer.trace(seq.ptr(), {at::randn({1, 2})}); });
  EXPECT_NE(msg.find("'1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Linear"), std::string::npos) << msg;
}

TEST(TraceErrors, EscapedProxyIsRejected) {
  at::Tensor leaked;
  Tracer().trace([&](std::vector<c10::IValue> a) -> c10::IValue {
    leaked = a[0].toTensor() * 2;
    return leaked;
  }, {at::randn({3})});
  std::string msg = trace_error_of([&] { (void)(leaked + 1); });
  EXPECT_NE(msg.find("outside of symbolic_trace"), std::string::npos) << msg;
  msg = trace_error_of([&] {
    Tracer().trace([&](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() + leaked; },
                   {at::randn({3})});
  });
  EXPECT_NE(msg.find("another or a finished"), std::string::npos) << msg;
}

TEST(TraceErrors, ForwardArgumentsMustBeGiven) {
  struct Scaled : torch::nn::Module {
    at::Tensor forward(const at::Tensor& x, double scale) { return x * scale; }
  };
  auto m = std::make_shared<Scaled>();
  std::string msg = trace_error_of([&] { Tracer().trace(m, {at::randn({2})}); });
  EXPECT_NE(msg.find("forward argument 1 is missing"), std::string::npos) << msg;
  msg = trace_error_of([&] { Tracer().trace(m, {at::randn({2}), 2.0}); });
  EXPECT_NE(msg.find("concrete_args"), std::string::npos) << msg;
  msg = trace_error_of([&] { Tracer().trace(m, {at::randn({2})}, {{5, 2.0}}); });
  EXPECT_NE(msg.find("position 5"), std::string::npos) << msg;
}

TEST(TraceErrors, OperatorErrorsNameTheOperator) {
  try {
    Tracer().trace([](std::vector<c10::IValue> a) -> c10::IValue {
      return at::matmul(a[0].toTensor(), a[0].toTensor());
    }, {at::randn({2, 3})});
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::matmul"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fx
