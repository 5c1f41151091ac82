// fx::save / fx::load keep the shape guards symbolic_trace records on
// placeholders (meta["shape_guard"]), dynamic dimensions included.
#include "serialize_test_util.h"

#include <fx/shape_guard.h>
#include <fx/trace.h>

namespace fx {
namespace {

using serialize_test::error_of;
using serialize_test::round_trip;

c10::IValue flatten_rows(std::vector<c10::IValue> a) {
  at::Tensor x = a[0].toTensor();
  return x.view({x.size(0), -1}).relu();
}

TEST(SaveLoadShapeGuards, GuardsSurviveARoundTrip) {
  auto gm = symbolic_trace(flatten_rows, {at::randn({2, 3, 4})});
  auto loaded = round_trip(*gm);
  const ShapeGuard* guard = shape_guard_of(*loaded->graph().find_nodes(Opcode::Placeholder).at(0));
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(*guard, (ShapeGuard{{2, 3, 4}, at::kFloat}));
  EXPECT_EQ(error_of([&] {
              loaded->forward({at::randn({3, 3, 4})});
            }),
            "forward(): input 'x' was traced with shape [2, 3, 4] (dtype torch.float32) but got shape [3, 3, 4]; "
            "declare dimension 0 dynamic (TraceOptions::dynamic_dims) to allow other sizes");
}

TEST(SaveLoadShapeGuards, DynamicDimensionsSurviveARoundTrip) {
  TraceOptions o;
  o.dynamic_dims = {{0, 0}};
  auto gm = symbolic_trace(flatten_rows, {at::randn({2, 3, 4})}, {}, o);
  auto loaded = round_trip(*gm);
  const ShapeGuard* guard = shape_guard_of(*loaded->graph().find_nodes(Opcode::Placeholder).at(0));
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(guard->shape, (std::vector<int64_t>{kDynamicDim, 3, 4}));
  for (int64_t b : {1, 5}) {
    at::Tensor x = at::randn({b, 3, 4});
    EXPECT_TRUE(at::equal(loaded->forward({x}).toTensor(), flatten_rows({x}).toTensor())) << "batch " << b;
  }
}

TEST(SaveLoadShapeGuards, WithoutMetaNoGuardIsSaved) {
  auto gm = symbolic_trace(flatten_rows, {at::randn({2, 3, 4})});
  SaveOptions options;
  options.keep_meta = false;
  auto loaded = load_from_string(save_to_string(*gm, options), "mem.fx");
  EXPECT_EQ(shape_guard_of(*loaded->graph().find_nodes(Opcode::Placeholder).at(0)), nullptr);
  // Unguarded, the specialised view computes with the traced batch size.
  EXPECT_EQ(loaded->forward({at::randn({3, 3, 4})}).toTensor().sizes(), (c10::IntArrayRef{2, 18}));
}

}  // namespace
}  // namespace fx
