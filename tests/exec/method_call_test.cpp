// MethodCall: Tensor methods resolve to the ATen operator of that name with
// self first; size/dim/to/float ... are built in.
#include "exec_test_util.h"

#include <fx/target.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx_test::error_of;
using fx_test::same;

IValue method(const std::string& name, std::vector<IValue> args, fx::ValueKwargs kwargs = {}) {
  return fx::call_method(name, std::move(args), std::move(kwargs));
}

TEST(MethodCall, OperatorsWithSelfFirst) {
  at::Tensor x = at::arange(6, at::kFloat);
  EXPECT_EQ(method("view", {x, 2, 3}).toTensor().sizes(), at::IntArrayRef({2, 3}));
  EXPECT_EQ(method("view", {x, -1}).toTensor().sizes(), at::IntArrayRef({6}));  // view(6), not view(dtype)
  EXPECT_EQ(method("view", {x, c10::List<int64_t>({3, 2})}).toTensor().sizes(), at::IntArrayRef({3, 2}));
  at::Tensor m = x.view({2, 3});
  EXPECT_TRUE(same(method("mean", {m}).toTensor(), at::scalar_tensor(2.5)));
  EXPECT_TRUE(same(method("mean", {m, 1}).toTensor(), at::tensor({1.0f, 4.0f})));
  at::Tensor k = method("mean", {m}, {{"dim", c10::List<int64_t>({0})}, {"keepdim", true}}).toTensor();
  EXPECT_EQ(k.sizes(), at::IntArrayRef({1, 3}));
  EXPECT_EQ(method("permute", {m, 1, 0}).toTensor().sizes(), at::IntArrayRef({3, 2}));
  EXPECT_EQ(method("transpose", {m, 0, 1}).toTensor().sizes(), at::IntArrayRef({3, 2}));
  EXPECT_TRUE(same(method("softmax", {m, 1}).toTensor(), m.softmax(1)));
  EXPECT_EQ(method("sum", {m}, {{"dtype", at::kDouble}}).toTensor().scalar_type(), at::kDouble);
}

TEST(MethodCall, InplaceMethodsModifySelf) {
  at::Tensor x = at::ones({2});
  at::Tensor r = method("add_", {x, 2}).toTensor();
  EXPECT_TRUE(r.is_same(x));
  EXPECT_TRUE(same(x, at::full({2}, 3.0f)));
}

TEST(MethodCall, BuiltinMethods) {
  at::Tensor m = at::zeros({2, 3});
  EXPECT_EQ(method("size", {m}).toIntVector(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ(method("size", {m, 1}).toInt(), 3);
  EXPECT_EQ(method("size", {m}, {{"dim", -1}}).toInt(), 3);
  EXPECT_EQ(method("dim", {m}).toInt(), 2);
  EXPECT_EQ(method("numel", {m}).toInt(), 6);
  EXPECT_EQ(method("stride", {m}).toIntVector(), std::vector<int64_t>({3, 1}));
  EXPECT_TRUE(method("is_contiguous", {m}).toBool());
  EXPECT_DOUBLE_EQ(method("item", {at::full({1}, 2.5)}).toDouble(), 2.5);
  EXPECT_EQ(method("double", {m}).toTensor().scalar_type(), at::kDouble);
  EXPECT_EQ(method("long", {m}).toTensor().scalar_type(), at::kLong);
  EXPECT_EQ(method("to", {m, at::kHalf}).toTensor().scalar_type(), at::kHalf);
  EXPECT_EQ(method("to", {m, std::string("cpu")}).toTensor().device(), c10::Device(c10::kCPU));
  EXPECT_EQ(method("to", {m, at::zeros({1}, at::kInt)}).toTensor().scalar_type(), at::kInt);
  EXPECT_EQ(method("to", {m}, {{"dtype", at::kDouble}}).toTensor().scalar_type(), at::kDouble);
  EXPECT_TRUE(method("to", {m, at::kFloat}).toTensor().is_same(m));  // no copy when nothing changes
}

TEST(MethodCall, Errors) {
  try {
    fx::MethodCall bad("frobnicate", {});
    FAIL() << "no error";
  } catch (const fx::TargetError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("unknown call_method target 'frobnicate': Tensor has no method of that name "
                                          "(no operator aten::frobnicate)",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_EQ(error_of([] { method("view", {3, 1}); }), "call_method view: self must be a Tensor, got int");
  EXPECT_EQ(error_of([] { method("size", {at::ones({1}), std::string("x")}); }),
            "Tensor.size() got unsupported arguments (Tensor, str)");
  std::string msg = error_of([] { method("view", {at::ones({1}), std::string("x")}); });
  EXPECT_EQ(msg.rfind("call_method view: no overload of aten::view matches the arguments (Tensor, str); candidates:", 0),
            0u)
      << msg;
}

}  // namespace
