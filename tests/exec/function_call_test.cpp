// FunctionCall: dispatcher operators by name, overload choice, kwargs,
// defaults, out= overloads, Python-style arguments, registered functions.
#include "exec_test_util.h"

#include <fx/target.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace {

using c10::IValue;
using fx_test::error_of;
using fx_test::same;

IValue call(const fx::FunctionCall& f, std::vector<IValue> args, std::vector<IValue> kwargs = {}) {
  return f.call(args, kwargs);
}

TEST(FunctionCall, ChoosesTheOverloadFromTheArgumentKinds) {
  at::Tensor x = at::tensor({1.0, 2.0}), y = at::tensor({10.0, 20.0});
  fx::FunctionCall add("aten::add", {});
  EXPECT_TRUE(same(call(add, {x, y}).toTensor(), at::tensor({11.0, 22.0})));     // add.Tensor
  EXPECT_TRUE(same(call(add, {x, 5}).toTensor(), at::tensor({6.0, 7.0})));       // add.Scalar
  EXPECT_TRUE(same(call(add, {x, 0.5}).toTensor(), at::tensor({1.5, 2.5})));     // add.Scalar (float)
  // alpha is keyword-only in add.Tensor: passing it positionally matches nothing, as in Python.
  EXPECT_THROW(call(add, {x, y, 2}), fx::TargetError);
}

TEST(FunctionCall, KeywordArgumentsGoToTheirSchemaPositionsAndDefaultsFillTheRest) {
  at::Tensor x = at::tensor({1.0, 2.0}), y = at::tensor({10.0, 20.0});
  fx::FunctionCall add("aten::add", {"alpha"});
  EXPECT_TRUE(same(call(add, {x, y}, {3}).toTensor(), at::tensor({31.0, 62.0})));

  at::Tensor m = at::arange(6, at::kFloat).view({2, 3});
  fx::FunctionCall sum("aten::sum", {"dim", "keepdim"});
  at::Tensor s = call(sum, {m}, {c10::List<int64_t>({1}), true}).toTensor();
  EXPECT_EQ(s.sizes(), at::IntArrayRef({2, 1}));
  EXPECT_TRUE(same(s, at::tensor({3.0f, 12.0f}).view({2, 1})));
  // A positional parameter passed by keyword.
  fx::FunctionCall sub("aten::sub", {"other"});
  EXPECT_TRUE(same(call(sub, {y}, {x}).toTensor(), at::tensor({9.0, 18.0})));
  // One-shot form with name/value kwargs.
  IValue r = fx::call_function("aten::div", {at::tensor({7.0, -7.0}), 2}, {{"rounding_mode", std::string("floor")}});
  EXPECT_TRUE(same(r.toTensor(), at::tensor({3.0, -4.0})));
}

TEST(FunctionCall, ExplicitOverloadIsUsedAsGiven) {
  at::Tensor x = at::tensor({1.0, 2.0}), y = at::tensor({10.0, 20.0});
  fx::FunctionCall add_tensor("aten::add.Tensor", {});
  EXPECT_TRUE(same(call(add_tensor, {x, y}).toTensor(), at::tensor({11.0, 22.0})));
  // A Python number for a Tensor parameter becomes a wrapped 0-dim tensor.
  EXPECT_TRUE(same(call(add_tensor, {x, 2}).toTensor(), at::tensor({3.0, 4.0})));
  EXPECT_EQ(call(add_tensor, {x, 2}).toTensor().scalar_type(), at::kDouble);

  fx::FunctionCall add_scalar("aten::add.Scalar", {});
  EXPECT_EQ(error_of([&] { call(add_scalar, {x, y}); }),
            "aten::add.Scalar: no overload of aten::add matches the arguments (Tensor, Tensor); candidates:\n"
            "  aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
}

TEST(FunctionCall, UnknownTargetsFailAtConstructionNamingTheClosestNames) {
  try {
    fx::FunctionCall f("aten::addd", {});
    FAIL() << "no error";
  } catch (const fx::TargetError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown call_function target 'aten::addd'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("aten::add"), std::string::npos) << msg;
  }
  EXPECT_THROW(fx::FunctionCall("aten::add.NoSuchOverload", {}), fx::TargetError);
}

TEST(FunctionCall, NoMatchingOverloadNamesTheTargetTheArgumentTypesAndTheCandidates) {
  at::Tensor x = at::ones({2});
  fx::FunctionCall add("aten::add", {"alpha"});
  try {
    call(add, {x, std::string("s")}, {2});
    FAIL() << "no error";
  } catch (const fx::TargetError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("aten::add: no overload of aten::add matches the arguments (Tensor, str, alpha=int); candidates:\n", 0),
              0u)
        << msg;
    EXPECT_NE(msg.find("  aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), std::string::npos);
    EXPECT_EQ(msg.find("add.out"), std::string::npos) << "out= overloads are not candidates without out=";
  }
}

TEST(FunctionCall, OutOverloadIsChosenOnlyWhenOutIsGiven) {
  at::Tensor x = at::tensor({1.0, 2.0}), y = at::tensor({10.0, 20.0});
  at::Tensor out = at::zeros({2}, at::kDouble);
  fx::FunctionCall add("aten::add", {"out"});
  at::Tensor r = call(add, {x, y}, {out}).toTensor();
  EXPECT_TRUE(r.is_same(out));
  EXPECT_TRUE(same(out, at::tensor({11.0, 22.0})));
  // Without out=, the functional overload allocates a new tensor.
  fx::FunctionCall plain("aten::add", {});
  EXPECT_FALSE(call(plain, {x, y}).toTensor().is_same(out));
}

TEST(FunctionCall, PythonStyleArgumentsAreConverted) {
  at::Tensor x = at::arange(6, at::kFloat);
  // Varargs ints packed into the int[] parameter: x.view(3, 2).
  EXPECT_EQ(call(fx::FunctionCall("aten::view", {}), {x, 3, 2}).toTensor().sizes(), at::IntArrayRef({3, 2}));
  // A tuple of ints for int[].
  IValue shape = c10::ivalue::Tuple::create({IValue(2), IValue(3)});
  EXPECT_EQ(call(fx::FunctionCall("aten::reshape", {}), {x, shape}).toTensor().sizes(), at::IntArrayRef({2, 3}));
  // One int broadcast to int[2]: max_pool2d(x, 2).
  at::Tensor img = at::arange(16, at::kFloat).view({1, 1, 4, 4});
  at::Tensor pooled = call(fx::FunctionCall("aten::max_pool2d", {}), {img, 2}).toTensor();
  EXPECT_TRUE(same(pooled, at::tensor({5.0f, 7.0f, 13.0f, 15.0f}).view({1, 1, 2, 2})));
  // An int for int[1]? (mean over dim 1).
  at::Tensor m = at::arange(6, at::kFloat).view({2, 3});
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::mean", {}), {m, 1}).toTensor(), at::tensor({1.0f, 4.0f})));
  // A tuple of tensors for Tensor[]; an int for a float parameter.
  IValue parts = c10::ivalue::Tuple::create({IValue(at::ones({1})), IValue(at::zeros({2}))});
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::cat", {}), {parts}).toTensor(), at::tensor({1.0f, 0.0f, 0.0f})));
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::dropout", {}), {at::tensor({-2.0f}), 0, false}).toTensor(),
                   at::tensor({-2.0f})));
}

TEST(FunctionCall, SeveralResultsComeBackAsATuple) {
  at::Tensor m = at::tensor({1.0, 5.0, 3.0, 2.0}).view({2, 2});
  IValue r = call(fx::FunctionCall("aten::max", {}), {m, 1});
  ASSERT_TRUE(r.isTuple());
  const auto& e = r.toTupleRef().elements();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_TRUE(same(e[0].toTensor(), at::tensor({5.0, 3.0})));
  EXPECT_TRUE(at::equal(e[1].toTensor(), at::tensor({1, 0}, at::kLong)));
}

TEST(FunctionCall, TypedSignaturesGiveEagerResults) {
  at::Tensor a = at::randn({3}), b = at::randn({3});
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::relu", {}), {a}).toTensor(), at::relu(a)));
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::mul", {}), {a, b}).toTensor(), a * b));
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::sub", {"alpha"}), {a, b}, {3}).toTensor(), at::sub(a, b, 3)));
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::mul", {}), {a, 4}).toTensor(), a * 4));
  EXPECT_TRUE(same(call(fx::FunctionCall("aten::add", {}), {a, 1.5, 2}).toTensor(), at::add(a, 1.5, 2)));
  // call_refs reads values in place and leaves them alone.
  fx::FunctionCall add("aten::add", {});
  IValue va(a), vb(b);
  const IValue* refs[] = {&va, &vb};
  EXPECT_TRUE(same(add.call_refs(refs, {}).toTensor(), a + b));
  EXPECT_TRUE(va.toTensor().is_same(a));
}

TEST(FunctionCall, ConcurrentFirstCallsResolveSafely) {
  fx::FunctionCall mul("aten::mul", {});
  at::Tensor x = at::arange(4, at::kFloat);
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::vector<at::Tensor> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      std::vector<IValue> args{x, t % 2 == 0 ? IValue(at::full({4}, float(t))) : IValue(int64_t(t))}, kw;
      results[t] = mul.call(args, kw).toTensor();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(same(results[t], x * t)) << t;
}

TEST(FunctionCall, RegisteredFunctionsGetTheirKeywordArgumentsByName) {
  fx::register_function("exectest::scale", [](std::vector<IValue>& args, fx::ValueKwargs& kwargs) -> IValue {
    double factor = 1.0;
    for (auto& kv : kwargs)
      if (kv.first == "factor") factor = kv.second.toDouble();
    return args.at(0).toTensor() * factor;
  });
  fx::FunctionCall scale("exectest::scale", {"factor"});
  EXPECT_TRUE(same(call(scale, {at::ones({2})}, {2.5}).toTensor(), at::full({2}, 2.5f)));
  EXPECT_TRUE(same(fx::call_function("exectest::scale", {at::ones({1})}).toTensor(), at::ones({1})));
}

}  // namespace
