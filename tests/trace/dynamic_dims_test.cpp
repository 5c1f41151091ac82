// symbolic_trace specialises shapes: the guards it records (meta
// ["shape_guard"]) and TraceOptions::dynamic_dims, which replaces integer
// arguments that follow a dimension with aten::size.int arithmetic.
#include <fx/interpreter.h>
#include <fx/trace.h>

#include "../common/error_of.h"
#include "trace_test_util.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

namespace fx {
namespace {

using fx_test::error_of;
using trace_test::count_calls;

/// The issue's model: the batch size goes into a view and an arange.
struct BatchNetImpl : torch::nn::Module {
  BatchNetImpl() : fc(register_module("fc", torch::nn::Linear(48, 5))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = fc(x.view({x.size(0), -1}));
    return h + torch::arange(x.size(0), x.options()).unsqueeze(1);
  }
  torch::nn::Linear fc;
};

/// x.size(0) in view, reshape, flatten, expand, arange and narrow.
struct ShapeCodeNetImpl : torch::nn::Module {
  ShapeCodeNetImpl()
      : fc(register_module("fc", torch::nn::Linear(12, 4))), bias(register_parameter("bias", torch::randn({4}))) {}
  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0);
    at::Tensor flat = torch::flatten(x, 1);                         // [b, 12]
    at::Tensor h = fc(flat.reshape({b, 3, 4}).view({b, -1}));       // [b, 4]
    at::Tensor twice = flat.view({b * 2, 6}).sum(1).view({b, 2});   // 2b rows
    at::Tensor ramp = torch::arange(b, x.options()).unsqueeze(1);   // [b, 1]
    at::Tensor head = h.narrow(0, 0, b - 1);                        // all but the last row
    at::Tensor padded = at::cat({head, h.narrow(0, b - 1, 1)}, 0);  // [b, 4] again
    return padded + bias.expand({b, 4}) + ramp + twice.sum(1, true);
  }
  torch::nn::Linear fc;
  at::Tensor bias;
};

template <class M>
std::shared_ptr<M> eval_model(int seed) {
  torch::manual_seed(seed);
  auto m = std::make_shared<M>();
  m->eval();
  return m;
}

TraceOptions batch_dynamic() {
  TraceOptions o;
  o.dynamic_dims = {{0, 0}};
  return o;
}

/// A traced function of one tensor.
TracedFunction unary(std::function<at::Tensor(const at::Tensor&)> f) {
  return [f](std::vector<c10::IValue> a) -> c10::IValue { return f(a[0].toTensor()); };
}

/// The error symbolic_trace(fn) gives on a [2, 3] example with `options`.
std::string trace_error(const TracedFunction& fn, const TraceOptions& options = batch_dynamic()) {
  return error_of([&] { symbolic_trace(fn, {at::randn({2, 3})}, {}, options); });
}

TEST(ShapeGuards, TracedAtBatch1RunAtBatch2IsAnErrorNotWrongNumbers) {
  auto m = eval_model<BatchNetImpl>(0);
  auto gm = symbolic_trace(m, {at::randn({1, 3, 4, 4})});
  const std::string expected =
      "input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got shape [2, 3, 4, 4]; declare "
      "dimension 0 dynamic (TraceOptions::dynamic_dims) to allow other sizes";
  at::Tensor x2 = at::randn({2, 3, 4, 4});
  EXPECT_EQ(error_of([&] { gm->forward({x2}); }), "forward(): " + expected);
  Interpreter interp(gm);
  EXPECT_EQ(error_of([&] { interp.run({x2}); }), "Interpreter.run(): " + expected);
  // At the traced shape it runs and matches eager.
  at::Tensor x1 = at::randn({1, 3, 4, 4});
  EXPECT_TRUE(at::allclose(gm->forward({x1}).toTensor(), m->forward(x1)));
  // The guard is in the placeholder's meta.
  const ShapeGuard* guard = shape_guard_of(*gm->graph().find_nodes(Opcode::Placeholder).at(0));
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(*guard, (ShapeGuard{{1, 3, 4, 4}, at::kFloat}));
}

TEST(ShapeGuards, CanBeTurnedOff) {
  auto row_sums = unary([](const at::Tensor& x) { return x.view({x.size(0), -1}).sum(1); });
  TraceOptions o;
  o.shape_guards = false;
  auto gm = symbolic_trace(row_sums, {at::randn({1, 3, 4})}, {}, o);
  EXPECT_EQ(shape_guard_of(*gm->graph().find_nodes(Opcode::Placeholder).at(0)), nullptr);
  // Without a guard, the specialised graph computes with the traced batch
  // size: one row sum where eager gives two.
  at::Tensor x = at::randn({2, 3, 4});
  EXPECT_EQ(gm->forward({x}).toTensor().sizes(), (c10::IntArrayRef{1}));
  EXPECT_EQ(row_sums({x}).toTensor().sizes(), (c10::IntArrayRef{2}));
}

TEST(DynamicDims, TheIssueModelRunsAtEveryBatchSize) {
  auto m = eval_model<BatchNetImpl>(0);
  auto gm = symbolic_trace(m, {at::randn({2, 3, 4, 4})}, {}, batch_dynamic());
  EXPECT_EQ(gm->code(),
            "\n\n\ndef forward(self, x):\n"
            "    size = torch.ops.aten.size.int(x, 0)\n"
            "    view = torch.ops.aten.view(x, [size, -1]);  x = None\n"
            "    fc = self.fc(view);  view = None\n"
            "    arange = torch.ops.aten.arange(size, dtype = torch.float32, layout = torch.strided, "
            "device = device(type='cpu'));  size = None\n"
            "    unsqueeze = torch.ops.aten.unsqueeze(arange, 1);  arange = None\n"
            "    add = torch.ops.aten.add.Tensor(fc, unsqueeze);  fc = unsqueeze = None\n"
            "    return add\n    ");
  Interpreter interp(gm);
  for (int64_t b : {1, 2, 3, 17}) {
    at::Tensor x = at::randn({b, 3, 4, 4});
    const at::Tensor expected = m->forward(x);
    EXPECT_TRUE(at::allclose(gm->forward({x}).toTensor(), expected)) << "batch " << b;
    EXPECT_TRUE(at::allclose(interp.run({x}).toTensor(), expected)) << "batch " << b;
  }
  // The guard accepts any batch size, and nothing else.
  EXPECT_EQ(error_of([&] {
              gm->forward({at::randn({5, 3, 4, 5})});
            }),
            "forward(): input 'x' was traced with shape [?, 3, 4, 4] (dtype torch.float32) but got shape [5, 3, 4, "
            "5]; declare dimension 3 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
}

TEST(DynamicDims, ViewReshapeFlattenExpandArangeNarrowMatchEager) {
  auto m = eval_model<ShapeCodeNetImpl>(1);
  auto gm = symbolic_trace(m, {at::randn({2, 3, 4})}, {}, batch_dynamic());
  const Graph& g = gm->graph();
  // One size node; b * 2 and b - 1 are arithmetic nodes on it.
  EXPECT_EQ(count_calls(g, "aten::size.int"), 1u);
  EXPECT_EQ(count_calls(g, "operator.mul"), 1u);
  EXPECT_EQ(count_calls(g, "operator.sub"), 1u);
  for (int64_t b : {1, 3, 17}) {
    at::Tensor x = at::randn({b, 3, 4});
    EXPECT_TRUE(at::allclose(gm->forward({x}).toTensor(), m->forward(x))) << "batch " << b;
  }
}

TEST(DynamicDims, TensorLiteralsStayConstants) {
  auto fn = unary([](const at::Tensor& x) { return x.view({x.size(0), -1}) + torch::tensor({1.f, 2.f, 3.f}); });
  auto gm = symbolic_trace(fn, {at::randn({2, 3})}, {}, batch_dynamic());
  EXPECT_EQ(gm->graph().find_nodes(Opcode::GetAttr).size(), 1u);
  for (int64_t b : {1, 4}) {
    at::Tensor x = at::randn({b, 3});
    EXPECT_TRUE(at::equal(gm->forward({x}).toTensor(), fn({x}).toTensor())) << "batch " << b;
  }
}

TEST(DynamicDims, SeveralDimensionsAddUp) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), y = a[1].toTensor();
    return at::cat({x, y}, 0).view({x.size(0) + y.size(0), -1}) + torch::arange(2 * x.size(0) + 3).sum();
  };
  TraceOptions o;
  o.dynamic_dims = {{0, 0}, {1, -2}};
  auto gm = symbolic_trace(fn, {at::randn({2, 3}), at::randn({4, 3})}, {}, o);
  EXPECT_EQ(count_calls(gm->graph(), "aten::size.int"), 2u);
  for (auto [bx, by] : {std::pair<int64_t, int64_t>{1, 1}, {5, 2}, {3, 9}}) {
    at::Tensor x = at::randn({bx, 3}), y = at::randn({by, 3});
    EXPECT_TRUE(at::allclose(gm->forward({x, y}).toTensor(), fn({x, y}).toTensor())) << bx << ", " << by;
  }
}

TEST(DynamicDims, NamedDimensionsShareOneSize) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), mask = a[1].toTensor();
    return (x * mask.unsqueeze(1)).view({x.size(0), -1});
  };
  TraceOptions o;
  o.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}};
  auto gm = symbolic_trace(fn, {at::randn({2, 3}), at::ones({2})}, {}, o);
  EXPECT_EQ(count_calls(gm->graph(), "aten::size.int"), 1u);
  for (int64_t b : {1, 5}) {
    at::Tensor x = at::randn({b, 3}), mask = at::randn({b});
    EXPECT_TRUE(at::equal(gm->forward({x, mask}).toTensor(), fn({x, mask}).toTensor())) << "batch " << b;
  }
  // Unnamed, they are probed one at a time, and x * mask fails to broadcast.
  o.dynamic_dims = {{0, 0}, {1, 0}};
  EXPECT_EQ(error_of([&] { symbolic_trace(fn, {at::randn({2, 3}), at::ones({2})}, {}, o); }),
            "TraceOptions::dynamic_dims: tracing at input 0 dimension 0 = 3 failed: The size of tensor a (3) must "
            "match the size of tensor b (2) at non-singleton dimension 0 (fxcpp: while tracing aten::mul.Tensor on "
            "zero-filled values (it has no meta kernel))");
  o.dynamic_dims = {{0, 0, "batch"}, {0, 1, "batch"}};
  EXPECT_EQ(error_of([&] { symbolic_trace(fn, {at::randn({2, 3}), at::ones({2})}, {}, o); }),
            "TraceOptions::dynamic_dims: 'batch' is 2 in input 0 dimension 0 but 3 in input 0 dimension 1; "
            "dimensions sharing a name must have the same size");
}

TEST(DynamicDims, AProductOfTwoDynamicSizesIsAnError) {
  auto fn = unary([](const at::Tensor& x) { return x.reshape({x.size(0) * x.size(1)}); });
  TraceOptions o;
  o.dynamic_dims = {{0, 0}, {0, 1}};
  EXPECT_EQ(trace_error(fn, o),
            "TraceOptions::dynamic_dims: argument 1 of node %reshape (aten::reshape) is 6 at input 0 dimension 0 = "
            "2, input 0 dimension 1 = 3 but 12 at input 0 dimension 0 = 3, input 0 dimension 1 = 4: not an affine "
            "function of the dynamic sizes (a product of two of them?)");
}

TEST(DynamicDims, ANonAffineSizeIsAnErrorNamingTheNodeAndTheValues) {
  auto half = unary([](const at::Tensor& x) { return x.narrow(0, 0, x.size(0) / 2); });
  EXPECT_EQ(trace_error(half),
            "TraceOptions::dynamic_dims: argument 3 of node %narrow (aten::narrow) is 1 at input 0 dimension 0 = 2 "
            "but 2 at input 0 dimension 0 = 4: it is 1 at input 0 dimension 0 = 3, not an affine function a*s + b "
            "of the dynamic sizes");
  auto scale = unary([](const at::Tensor& x) { return x * (1.0 / x.size(0)); });
  EXPECT_EQ(trace_error(scale),
            "TraceOptions::dynamic_dims: argument 1 of node %mul (aten::mul.Scalar) is 0.5 at input 0 dimension 0 = "
            "2 but 0.3333333333333333 at input 0 dimension 0 = 3: only integer arguments can follow a dynamic "
            "dimension (as a*s + b)");
}

TEST(DynamicDims, ControlFlowOnTheSizeIsAnError) {
  auto branchy = unary([](const at::Tensor& x) { return x.size(0) > 2 ? x.relu() : x.neg(); });
  EXPECT_EQ(trace_error(branchy),
            "TraceOptions::dynamic_dims: node %neg (aten::neg) is aten::relu in the graph traced at input 0 "
            "dimension 0 = 3: the traced code takes another path for other sizes");
}

TEST(DynamicDims, BadDeclarationsAreErrors) {
  auto id = unary([](const at::Tensor& x) { return x + 1; });
  TraceOptions o;
  o.dynamic_dims = {{1, 0}};
  EXPECT_EQ(trace_error(id, o),
            "TraceOptions::dynamic_dims: input 1 dimension 0: example input 1 does not exist (1 example inputs)");
  o.dynamic_dims = {{0, 2}};
  EXPECT_EQ(trace_error(id, o), "TraceOptions::dynamic_dims: input 0 dimension 2: the example input has 2 dimensions");
  o.dynamic_dims = {{0, 1}, {0, -1}};
  EXPECT_EQ(trace_error(id, o), "TraceOptions::dynamic_dims: input 0 dimension -1 is declared twice");
}

}  // namespace
}  // namespace fx
