// The operators TorchScript's interpreter runs itself, as builtin targets:
// aten::warn, prim::RaiseException, aten::format, prim::isinstance,
// aten::__is__ / __isnot__, prim::TupleIndex / TupleSlice,
// prim::Uninitialized, prim::unchecked_cast — their values, their errors,
// and graphs holding them under GraphModule::forward and the Interpreter.
#include "exec_test_util.h"

#include "../common/captured_warnings.h"

#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/target.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx_test::error_of;

IValue call(const std::string& target, std::vector<IValue> args) { return fx::call_function(target, std::move(args)); }

IValue tup(std::vector<IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }

IValue strs(std::vector<std::string> v) { return c10::List<std::string>(v); }

using fx_test::CapturedWarnings;

TEST(ScriptBuiltins, WarnReportsTheMessageOncePerCall) {
  CapturedWarnings w;
  EXPECT_TRUE(call("aten::warn", {std::string("careful"), 2}).isNone());
  EXPECT_TRUE(call("aten::warn", {std::string("again")}).isNone());
  EXPECT_EQ(w.messages, (std::vector<std::string>{"careful", "again"}));
  EXPECT_EQ(error_of([] { call("aten::warn", {1}); }), "aten::warn: message must be a str, got int");
  EXPECT_EQ(error_of([] { call("aten::warn", {}); }), "aten::warn expected 1 to 2 arguments, got 0");
  EXPECT_EQ(error_of([] { call("aten::warn", {std::string("x"), 2.5}); }),
            "aten::warn: stacklevel must be an int, got float");
}

TEST(ScriptBuiltins, RaiseExceptionSaysWhatTorchScriptSays) {
  EXPECT_EQ(error_of([] { call("prim::RaiseException", {std::string("bad k 2"), std::string("builtins.ValueError")}); }),
            "builtins.ValueError: bad k 2");
  // No class (assert statements): TorchScript reports a RuntimeError.
  EXPECT_EQ(error_of([] { call("prim::RaiseException", {std::string("AssertionError: neg"), IValue()}); }),
            "RuntimeError: AssertionError: neg");
  EXPECT_EQ(error_of([] { call("prim::RaiseException", {std::string("plain")}); }), "RuntimeError: plain");
  EXPECT_EQ(error_of([] { call("prim::RaiseException", {3}); }), "prim::RaiseException: msg must be a str, got int");
}

TEST(ScriptBuiltins, WarnAndRaiseAreImpureTheRestPure) {
  EXPECT_TRUE(fx::is_impure_function("aten::warn"));
  EXPECT_TRUE(fx::is_impure_function("prim::RaiseException"));
  for (const char* pure : {"aten::format", "prim::isinstance", "aten::__is__", "aten::__isnot__", "prim::TupleIndex",
                           "prim::TupleSlice", "prim::Uninitialized", "prim::unchecked_cast"})
    EXPECT_FALSE(fx::is_impure_function(pure)) << pure;
}

TEST(ScriptBuiltins, FormatPrintsLikeTorchScript) {
  EXPECT_EQ(call("aten::format", {std::string("{} rows, k={}, scale {}"), 2, 7, 0.5}).toStringRef(),
            "2 rows, k=7, scale 0.5");
  EXPECT_EQ(call("aten::format", {std::string("{}|{}|{}|{}"), c10::List<int64_t>({1, 2}), tup({1, std::string("a")}),
                                  IValue(), true})
                .toStringRef(),
            "[1, 2]|(1, a)|None|True");
  EXPECT_EQ(call("aten::format", {std::string("no placeholders"), 1}).toStringRef(), "no placeholders");  // extras ignored
  EXPECT_EQ(call("aten::format", {std::string("{:d} stays")}).toStringRef(), "{:d} stays");  // only {} is replaced
  EXPECT_EQ(error_of([] { call("aten::format", {std::string("a{}b{}"), 1}); }),
            "Too few arguments for format string: a{}b{}");
  EXPECT_EQ(error_of([] { call("aten::format", {1}); }), "aten::format: the format string must be a str, got int");
}

TEST(ScriptBuiltins, IsinstanceByTypeAnnotation) {
  EXPECT_TRUE(call("prim::isinstance", {1, strs({"int"})}).toBool());
  EXPECT_FALSE(call("prim::isinstance", {1, strs({"float", "str"})}).toBool());
  EXPECT_TRUE(call("prim::isinstance", {std::string("s"), strs({"float", "str"})}).toBool());
  EXPECT_TRUE(call("prim::isinstance", {c10::List<int64_t>({1}), strs({"List[float]", "List[int]"})}).toBool());
  EXPECT_FALSE(call("prim::isinstance", {c10::List<int64_t>({1}), std::string("List[float]")}).toBool());
  EXPECT_TRUE(call("prim::isinstance", {at::ones({2}), std::string("Tensor")}).toBool());
  EXPECT_TRUE(call("prim::isinstance", {IValue(), std::string("Optional[Tensor]")}).toBool());
  EXPECT_TRUE(call("prim::isinstance", {tup({1, std::string("a")}), std::string("Tuple[int, str]")}).toBool());
  EXPECT_FALSE(call("prim::isinstance", {tup({1, 2}), std::string("Tuple[int, str]")}).toBool());
  EXPECT_EQ(error_of([] { call("prim::isinstance", {1, std::string("Frob[int")}); }).rfind(
                "prim::isinstance: unknown type 'Frob[int' (", 0),
            0u);
  EXPECT_EQ(error_of([] { call("prim::isinstance", {1, 2}); }),
            "prim::isinstance: the types must be a str or a list of str, got int");
}

TEST(ScriptBuiltins, IsComparesIdentity) {
  at::Tensor t = at::ones({2});
  EXPECT_TRUE(call("aten::__is__", {IValue(), IValue()}).toBool());
  EXPECT_FALSE(call("aten::__is__", {t, IValue()}).toBool());
  EXPECT_TRUE(call("aten::__isnot__", {t, IValue()}).toBool());
  EXPECT_TRUE(call("aten::__is__", {t, t}).toBool());
  EXPECT_FALSE(call("aten::__is__", {t, t.clone()}).toBool());  // equal values, another tensor
  EXPECT_TRUE(call("aten::__is__", {3, 3}).toBool());
  EXPECT_FALSE(call("aten::__isnot__", {3, 3}).toBool());
}

TEST(ScriptBuiltins, TupleIndexAndSlice) {
  IValue t = tup({1, std::string("a"), 2.5});
  EXPECT_EQ(call("prim::TupleIndex", {t, 1}).toStringRef(), "a");
  EXPECT_DOUBLE_EQ(call("prim::TupleIndex", {t, -1}).toDouble(), 2.5);
  EXPECT_EQ(error_of([&] { call("prim::TupleIndex", {t, 3}); }), "Tuple list index out of range");
  EXPECT_EQ(error_of([&] { call("prim::TupleIndex", {t, -4}); }), "Tuple list index out of range");
  EXPECT_EQ(error_of([] { call("prim::TupleIndex", {c10::List<int64_t>({1}), 0}); }),
            "prim::TupleIndex: expected a tuple, got List[int]");
  EXPECT_EQ(error_of([&] { call("prim::TupleIndex", {t, 0.5}); }), "prim::TupleIndex: the index must be an int, got float");
  IValue four = tup({1, 2, 3, 4});
  EXPECT_EQ(call("prim::TupleSlice", {four, 1, 3}), tup({2, 3}));
  EXPECT_EQ(call("prim::TupleSlice", {four, -2, 10}), tup({3, 4}));
  EXPECT_EQ(call("prim::TupleSlice", {four, 3, 1}), tup({}));
}

TEST(ScriptBuiltins, UninitializedAndUncheckedCast) {
  EXPECT_TRUE(call("prim::Uninitialized", {}).isNone());
  at::Tensor t = at::ones({2});
  EXPECT_TRUE(call("prim::unchecked_cast", {t}).toTensor().is_same(t));
  EXPECT_EQ(error_of([] { call("prim::Uninitialized", {1}); }), "prim::Uninitialized expected 0 arguments, got 1");
}

// A graph as the importer writes it for a scripted googlenet: warn, a
// message formatted at run time, and a raise; forward and the Interpreter
// run it alike, and the raise names its node.
TEST(ScriptBuiltins, GraphWithInterpreterOpsRuns) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* n = g->placeholder("n");
  g->call_function("aten::warn", {std::string("Scripted model"), 2});
  fx::Node* msg = g->call_function("aten::format", {std::string("n={}"), n});
  fx::Node* add = g->call_function("aten::add", {x, 1});
  g->output(fx::Argument::tuple({add, msg}));
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  CapturedWarnings w;
  IValue out = gm->forward({at::zeros({2}), 5});
  EXPECT_TRUE(out.toTupleRef().elements()[0].toTensor().equal(at::ones({2})));
  EXPECT_EQ(out.toTupleRef().elements()[1].toStringRef(), "n=5");
  IValue again = fx::Interpreter(gm).run({at::zeros({2}), 6});
  EXPECT_EQ(again.toTupleRef().elements()[1].toStringRef(), "n=6");
  EXPECT_EQ(w.messages, (std::vector<std::string>{"Scripted model", "Scripted model"}));
  EXPECT_TRUE(g->eliminate_dead_code() == false);  // the unused warn stays

  auto r = std::make_shared<fx::Graph>();
  fx::Node* y = r->placeholder("y");
  r->call_function("prim::RaiseException", {std::string("bad y"), std::string("builtins.ValueError")});
  r->output(y);
  auto rm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), r);
  const std::string forward_error = error_of([&] { rm->forward({at::zeros({1})}); });
  EXPECT_EQ(forward_error.substr(0, forward_error.find('\n')), "builtins.ValueError: bad y") << forward_error;
  EXPECT_NE(forward_error.find("While executing %raise_exception : [#users=0] = call_function[target=prim::RaiseException]"),
            std::string::npos)
      << forward_error;
  EXPECT_EQ(error_of([&] { fx::Interpreter(rm).run({at::zeros({1})}); }), forward_error);
}

}  // namespace
