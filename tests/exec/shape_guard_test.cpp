// Shape guards on placeholders (meta["shape_guard"]): GraphModule::forward
// and Interpreter check tensor inputs against them before running anything.
#include "exec_test_util.h"

#include <fx/interpreter.h>
#include <fx/shape_guard.h>
#include <fx/tensor_meta.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx::ShapeGuard;
using fx_test::error_of;
using fx_test::module_of;
using fx_test::same;

/// x, y → x + y, with optional guards on x and y.
struct Add {
  explicit Add(std::optional<ShapeGuard> gx, std::optional<ShapeGuard> gy = std::nullopt) {
    if (gx) x->meta()[fx::kShapeGuardKey] = *gx;
    if (gy) y->meta()[fx::kShapeGuardKey] = *gy;
    g->output(g->call_function("aten::add.Tensor", {x, y}));
    gm = module_of(g);
  }
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  std::shared_ptr<fx::GraphModule> gm;
};

const ShapeGuard kBatch1{{1, 3, 4, 4}, at::kFloat};

TEST(ShapeGuard, MatchingInputsRun) {
  Add m(kBatch1);
  at::Tensor x = at::randn({1, 3, 4, 4}), y = at::randn({4});
  EXPECT_TRUE(same(m.gm->forward({x, y}).toTensor(), x + y));
  fx::Interpreter interp(m.gm);
  EXPECT_TRUE(same(interp.run({x, y}).toTensor(), x + y));
}

TEST(ShapeGuard, ForwardNamesTheInputTheTracedAndTheGivenShape) {
  Add m(kBatch1);
  at::Tensor x = at::randn({2, 3, 4, 4}), y = at::randn({4});
  EXPECT_EQ(error_of([&] {
              m.gm->forward({x, y});
            }),
            "forward(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got shape "
            "[2, 3, 4, 4]; declare dimension 0 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
  EXPECT_THROW(m.gm->forward({x, y}), fx::ShapeGuardError);
}

TEST(ShapeGuard, InterpreterRunAndBoxedRunCheckToo) {
  Add m(kBatch1);
  fx::Interpreter interp(m.gm);
  at::Tensor y = at::randn({4});
  EXPECT_EQ(error_of([&] {
              interp.run({at::randn({1, 3, 5, 6}), y});
            }),
            "Interpreter.run(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got shape "
            "[1, 3, 5, 6]; declare dimensions 2, 3 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
  std::vector<IValue> args{at::randn({3, 3, 4, 4}), y};
  EXPECT_EQ(error_of([&] { interp.boxed_run(args); }),
            "Interpreter.boxed_run(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got "
            "shape [3, 3, 4, 4]; declare dimension 0 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
}

TEST(ShapeGuard, DtypeRankAndNonTensorMismatches) {
  Add m(kBatch1);
  at::Tensor y = at::randn({4});
  EXPECT_EQ(error_of([&] {
              m.gm->forward({at::zeros({1, 3, 4, 4}, at::kDouble), y});
            }),
            "forward(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got dtype "
            "torch.float64");
  EXPECT_EQ(error_of([&] {
              m.gm->forward({at::zeros({2, 4}, at::kLong), y});
            }),
            "forward(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got dtype "
            "torch.int64 and shape [2, 4]");
  EXPECT_EQ(error_of([&] {
              m.gm->forward({at::zeros({3, 4, 4}), y});
            }),
            "forward(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got shape [3, 4, 4]; "
            "a graph is traced for one rank, trace it again for this one");
  EXPECT_EQ(error_of([&] {
              m.gm->forward({IValue(3), y});
            }),
            "forward(): input 'x' was traced with shape [1, 3, 4, 4] (dtype torch.float32) but got a value of type "
            "Int");
}

TEST(ShapeGuard, DynamicDimensionsAcceptAnySize) {
  Add m(ShapeGuard{{fx::kDynamicDim, 3}, at::kFloat}, ShapeGuard{{3}, at::kFloat});
  for (int64_t b : {1, 2, 17}) {
    at::Tensor x = at::randn({b, 3}), y = at::randn({3});
    EXPECT_TRUE(same(m.gm->forward({x, y}).toTensor(), x + y));
  }
  EXPECT_EQ(error_of([&] {
              m.gm->forward({at::randn({5, 4}), at::randn({4})});
            }),
            "forward(): input 'x' was traced with shape [?, 3] (dtype torch.float32) but got shape [5, 4]; declare "
            "dimension 1 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
  // The second input is checked as well.
  EXPECT_EQ(error_of([&] {
              m.gm->forward({at::randn({5, 3}), at::randn({1})});
            }),
            "forward(): input 'y' was traced with shape [3] (dtype torch.float32) but got shape [1]; declare "
            "dimension 0 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
}

TEST(ShapeGuard, GraphsWithoutTheKeyAreNotGuarded) {
  // tensor_meta (what ShapeProp writes) is not a guard.
  Add m(std::nullopt);
  m.x->meta()["tensor_meta"] = fx::TensorMetadata::from_tensor(at::zeros({1, 3}));
  for (int64_t b : {1, 4}) {
    at::Tensor x = at::randn({b, 3}), y = at::randn({3});
    EXPECT_TRUE(same(m.gm->forward({x, y}).toTensor(), x + y));
    fx::Interpreter interp(m.gm);
    EXPECT_TRUE(same(interp.run({x, y}).toTensor(), x + y));
  }
}

TEST(ShapeGuard, DefaultValuesAreNotChecked) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x", fx::Argument::from_ivalue(at::ones({2})));
  x->meta()[fx::kShapeGuardKey] = ShapeGuard{{3}, at::kFloat};
  g->output(g->call_function("aten::neg", {x}));
  auto gm = module_of(g);
  EXPECT_TRUE(same(gm->forward(std::vector<IValue>{}).toTensor(), -at::ones({2})));
  fx::Interpreter interp(gm);
  EXPECT_TRUE(same(interp.run({}).toTensor(), -at::ones({2})));
}

TEST(ShapeGuard, AKeyOfAnotherTypeIsAnError) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  x->meta()[fx::kShapeGuardKey] = std::string("[1, 3]");
  g->output(x);
  auto gm = module_of(g);
  EXPECT_NE(error_of([&] {
              gm->forward({at::ones({1})});
            }).find("node 'x': meta[\"shape_guard\"] holds a std::__cxx11::basic_string"),
            std::string::npos);
}

}  // namespace
