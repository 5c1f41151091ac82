// Builtin call_function targets: Python semantics on scalars and sequences,
// the ATen operator when a Tensor is involved, getitem and getattr.
#include "exec_test_util.h"

#include <fx/target.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx_test::error_of;
using fx_test::same;

IValue op(const std::string& name, std::vector<IValue> args) { return fx::call_function("operator." + name, args); }

at::Tensor bools(std::vector<int64_t> v) { return at::tensor(v, at::kLong).to(at::kBool); }

IValue tup(std::vector<IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }

TEST(Builtins, ArithmeticOnPythonNumbers) {
  EXPECT_EQ(op("add", {2, 3}).toInt(), 5);
  EXPECT_DOUBLE_EQ(op("add", {2, 0.5}).toDouble(), 2.5);
  EXPECT_EQ(op("add", {true, true}).toInt(), 2);  // bools are ints
  EXPECT_EQ(op("sub", {2, 5}).toInt(), -3);
  EXPECT_EQ(op("mul", {4, 5}).toInt(), 20);
  EXPECT_DOUBLE_EQ(op("truediv", {7, 2}).toDouble(), 3.5);
  EXPECT_EQ(op("floordiv", {-7, 2}).toInt(), -4);
  EXPECT_DOUBLE_EQ(op("floordiv", {7.5, 2}).toDouble(), 3.0);
  EXPECT_DOUBLE_EQ(op("floordiv", {-7.5, 2}).toDouble(), -4.0);
  EXPECT_EQ(op("mod", {-7, 3}).toInt(), 2);
  EXPECT_EQ(op("mod", {7, -3}).toInt(), -2);
  EXPECT_DOUBLE_EQ(op("mod", {-7.5, 2}).toDouble(), 0.5);
  EXPECT_EQ(op("pow", {2, 10}).toInt(), 1024);
  EXPECT_DOUBLE_EQ(op("pow", {2, -1}).toDouble(), 0.5);
  EXPECT_EQ(op("neg", {3}).toInt(), -3);
  EXPECT_EQ(op("neg", {true}).toInt(), -1);
  EXPECT_EQ(op("abs", {-3}).toInt(), 3);
  EXPECT_EQ(op("invert", {5}).toInt(), -6);
  EXPECT_EQ(op("lshift", {1, 4}).toInt(), 16);
  EXPECT_EQ(op("rshift", {-16, 2}).toInt(), -4);
}

TEST(Builtins, PythonErrorMessages) {
  EXPECT_EQ(error_of([] { op("truediv", {1, 0}); }), "division by zero");
  EXPECT_EQ(error_of([] { op("truediv", {1.0, 0}); }), "float division by zero");
  EXPECT_EQ(error_of([] { op("floordiv", {1, 0}); }), "integer division or modulo by zero");
  EXPECT_EQ(error_of([] { op("add", {1, std::string("a")}); }), "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of([] { op("lt", {c10::List<int64_t>({1}), std::string("a")}); }),
            "'<' not supported between instances of 'List[int]' and 'str'");
  EXPECT_EQ(error_of([] { op("neg", {std::string("a")}); }), "bad operand type for unary -: 'str'");
  EXPECT_EQ(error_of([] { op("lshift", {1, -1}); }), "negative shift count");
}

TEST(Builtins, SequencesAndStrings) {
  EXPECT_EQ(op("add", {std::string("ab"), std::string("c")}).toStringRef(), "abc");
  EXPECT_EQ(op("mul", {std::string("ab"), 2}).toStringRef(), "abab");
  IValue t = op("add", {tup({1, 2}), tup({3})});
  ASSERT_TRUE(t.isTuple());
  EXPECT_EQ(t.toTupleRef().elements().size(), 3u);
  EXPECT_EQ(t.toTupleRef().elements()[2].toInt(), 3);
  IValue l = op("add", {c10::List<int64_t>({1, 2}), c10::List<int64_t>({3})});
  ASSERT_TRUE(l.isIntList());
  EXPECT_EQ(l.toIntVector(), std::vector<int64_t>({1, 2, 3}));
  EXPECT_TRUE(op("contains", {c10::List<int64_t>({1, 2}), 2}).toBool());
  EXPECT_FALSE(op("contains", {tup({1, 2}), 3}).toBool());
  EXPECT_TRUE(op("contains", {std::string("hello"), std::string("ell")}).toBool());
}

TEST(Builtins, Comparisons) {
  EXPECT_TRUE(op("lt", {1, 2.5}).toBool());
  EXPECT_TRUE(op("eq", {1, 1.0}).toBool());
  EXPECT_TRUE(op("eq", {true, 1}).toBool());
  EXPECT_FALSE(op("ne", {3, 3}).toBool());
  EXPECT_TRUE(op("ge", {std::string("b"), std::string("a")}).toBool());
  EXPECT_TRUE(op("eq", {IValue(), IValue()}).toBool());
  EXPECT_FALSE(op("eq", {IValue(), 0}).toBool());
  EXPECT_TRUE(op("eq", {tup({1, 2.0}), tup({1, 2})}).toBool());
  EXPECT_FALSE(op("eq", {tup({1, 2}), tup({1, 3})}).toBool());
}

TEST(Builtins, LogicAndTruth) {
  EXPECT_TRUE(op("and_", {true, true}).isBool());
  EXPECT_FALSE(op("and_", {true, false}).toBool());
  EXPECT_EQ(op("or_", {4, 1}).toInt(), 5);
  EXPECT_EQ(op("xor", {6, 3}).toInt(), 5);
  EXPECT_TRUE(op("not_", {0}).toBool());
  EXPECT_TRUE(op("not_", {std::string()}).toBool());
  EXPECT_FALSE(op("truth", {IValue()}).toBool());
  EXPECT_TRUE(op("not_", {at::zeros({1})}).toBool());
  EXPECT_EQ(error_of([] { op("not_", {at::ones({2})}); }),
            "Boolean value of Tensor with more than one value is ambiguous");
}

TEST(Builtins, TensorOperandsDispatchToATen) {
  at::Tensor t = at::tensor({1.0, 2.0, 4.0});
  EXPECT_TRUE(same(op("add", {t, 1}).toTensor(), t + 1));
  EXPECT_TRUE(same(op("add", {1, t}).toTensor(), t + 1));
  EXPECT_TRUE(same(op("sub", {10, t}).toTensor(), 10 - t));
  EXPECT_TRUE(same(op("mul", {t, t}).toTensor(), t * t));
  EXPECT_TRUE(same(op("truediv", {2, t}).toTensor(), at::tensor({2.0, 1.0, 0.5})));
  EXPECT_TRUE(same(op("floordiv", {t, 2}).toTensor(), at::tensor({0.0, 1.0, 2.0})));
  EXPECT_TRUE(same(op("floordiv", {9, t}).toTensor(), at::tensor({9.0, 4.0, 2.0})));
  EXPECT_TRUE(same(op("mod", {t, 3}).toTensor(), at::tensor({1.0, 2.0, 1.0})));
  EXPECT_TRUE(same(op("mod", {5, t}).toTensor(), at::tensor({0.0, 1.0, 1.0})));
  EXPECT_TRUE(same(op("pow", {t, 2}).toTensor(), t * t));
  EXPECT_TRUE(same(op("pow", {2, t}).toTensor(), at::tensor({2.0, 4.0, 16.0})));
  EXPECT_TRUE(same(op("neg", {t}).toTensor(), -t));
  EXPECT_TRUE(at::equal(op("lt", {t, 2}).toTensor(), bools({1, 0, 0})));
  EXPECT_TRUE(at::equal(op("lt", {2, t}).toTensor(), bools({0, 0, 1})));
  EXPECT_TRUE(at::equal(op("eq", {t, t}).toTensor(), bools({1, 1, 1})));
  at::Tensor i = at::tensor({6, 3}, at::kLong);
  EXPECT_TRUE(at::equal(op("and_", {i, 2}).toTensor(), at::tensor({2, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(op("lshift", {1, i}).toTensor(), at::tensor({64, 8}, at::kLong)));
  EXPECT_TRUE(at::equal(op("invert", {i}).toTensor(), at::tensor({-7, -4}, at::kLong)));
  at::Tensor m = at::eye(2);
  EXPECT_TRUE(same(op("matmul", {m, m}).toTensor(), m));
  EXPECT_TRUE(op("contains", {t, 4}).toBool());
}

TEST(Builtins, InplaceOperatorsModifyTensorsInPlace) {
  at::Tensor t = at::tensor({1.0, 2.0});
  at::Tensor r = op("iadd", {t, 1}).toTensor();
  EXPECT_TRUE(r.is_same(t));
  EXPECT_TRUE(same(t, at::tensor({2.0, 3.0})));
  op("imul", {t, t});
  EXPECT_TRUE(same(t, at::tensor({4.0, 9.0})));
  EXPECT_EQ(op("iadd", {1, 2}).toInt(), 3);  // ints are immutable: a new value
}

TEST(Builtins, GetitemOnTuplesListsDictsAndTensors) {
  IValue t = tup({10, 20, 30});
  EXPECT_EQ(op("getitem", {t, 0}).toInt(), 10);
  EXPECT_EQ(op("getitem", {t, -1}).toInt(), 30);
  EXPECT_EQ(error_of([&] { op("getitem", {t, 3}); }), "tuple index out of range");
  IValue l = c10::List<int64_t>({1, 2});
  EXPECT_EQ(op("getitem", {l, 1}).toInt(), 2);
  EXPECT_EQ(error_of([&] { op("getitem", {l, -3}); }), "list index out of range");
  EXPECT_EQ(error_of([&] { op("getitem", {l, std::string("a")}); }), "list indices must be integers or slices, not str");
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert(std::string("k"), IValue(7));
  EXPECT_EQ(op("getitem", {d, std::string("k")}).toInt(), 7);
  EXPECT_EQ(error_of([&] { op("getitem", {d, std::string("nope")}); }), "'nope'");
  at::Tensor m = at::arange(6, at::kFloat).view({2, 3});
  EXPECT_TRUE(same(op("getitem", {m, 1}).toTensor(), at::tensor({3.0f, 4.0f, 5.0f})));
  EXPECT_EQ(op("getitem", {m, IValue()}).toTensor().sizes(), at::IntArrayRef({1, 2, 3}));
  EXPECT_EQ(op("getitem", {m, tup({1, 2})}).toTensor().item<float>(), 5.0f);
  EXPECT_TRUE(same(op("getitem", {m, at::tensor({1, 0}, at::kLong)}).toTensor(), m.flip(0)));
  EXPECT_EQ(error_of([&] { op("getitem", {m, 2}); }), "index 2 is out of bounds for dimension 0 with size 2");
  EXPECT_EQ(error_of([&] { op("getitem", {3, 0}); }), "'int' object is not subscriptable");
}

TEST(Builtins, SetitemWritesTensorsListsAndDictsInPlace) {
  // x[:, :, pos] = v, gpt-fast's KV cache update as torch.fx records it on a buffer.
  at::Tensor cache = at::zeros({1, 2, 5, 3});
  const IValue all = fx::make_slice_ivalue(IValue(), IValue(), IValue());
  const at::Tensor v = at::arange(12, at::kFloat).view({1, 2, 2, 3});
  EXPECT_TRUE(op("setitem", {cache, tup({all, all, at::tensor({4, 1}, at::kLong)}), v}).isNone());
  EXPECT_TRUE(same(cache.select(2, 4), v.select(2, 0)));
  EXPECT_TRUE(same(cache.select(2, 1), v.select(2, 1)));
  EXPECT_EQ(cache.select(2, 0).abs().sum().item<float>(), 0.0f);
  op("setitem", {cache, 0, 7.5});
  EXPECT_EQ(cache.min().item<float>(), 7.5f);
  c10::List<int64_t> l({1, 2});
  op("setitem", {l, -1, 9});
  EXPECT_EQ(l.get(1), 9);
  EXPECT_EQ(error_of([&] { op("setitem", {l, 2, 0}); }), "list assignment index out of range");
  EXPECT_EQ(error_of([&] { op("setitem", {tup({1}), 0, 2}); }), "'tuple' object does not support item assignment");
  EXPECT_EQ(error_of([&] { op("setitem", {cache, tup({all, all, at::tensor({9}, at::kLong)}), v.narrow(2, 0, 1)}); }),
            "index 9 is out of bounds for dimension 0 with size 5");  // ATen's text, as Python prints it
  // The method forms torch.fx records, and DCE keeps the write whose result nobody reads.
  at::Tensor t = at::zeros({3});
  fx::call_method("__setitem__", {t, 1, 2.0});
  EXPECT_EQ(t[1].item<float>(), 2.0f);
  EXPECT_EQ(fx::call_method("__getitem__", {t, 1}).toTensor().item<float>(), 2.0f);
  fx::Graph g;
  fx::Node* x = g.placeholder("x");
  g.call_method("__setitem__", {x, int64_t{0}, 1.0});
  g.call_function("operator.setitem", {x, int64_t{1}, 1.0});
  g.output(x);
  EXPECT_FALSE(g.eliminate_dead_code());
}

TEST(Builtins, GetattrOnTensors) {
  at::Tensor m = at::zeros({2, 3}, at::kDouble);
  auto get = [&](const std::string& name) { return fx::call_function("getattr", {m, name}); };
  EXPECT_EQ(get("shape").toIntVector(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ(get("dtype").toScalarType(), at::kDouble);
  EXPECT_EQ(get("device").toDevice(), c10::Device(c10::kCPU));
  EXPECT_EQ(get("ndim").toInt(), 2);
  EXPECT_FALSE(get("requires_grad").toBool());
  EXPECT_EQ(get("T").toTensor().sizes(), at::IntArrayRef({3, 2}));
  EXPECT_TRUE(get("grad").isNone());
  EXPECT_EQ(error_of([&] { get("nope"); }), "'Tensor' object has no attribute 'nope'");
  EXPECT_EQ(fx::call_function("getattr", {m, std::string("nope"), 5}).toInt(), 5);  // the default
  // getitem on the shape, as traced code does with x.shape[0].
  EXPECT_EQ(op("getitem", {get("shape"), 0}).toInt(), 2);
}

TEST(Builtins, BuiltinsTakeNoKeywordArguments) {
  EXPECT_THROW(fx::FunctionCall("operator.add", {"alpha"}), fx::TargetError);
  EXPECT_EQ(error_of([] { op("add", {1}); }), "operator.add expected 2 arguments, got 1");
}

}  // namespace
