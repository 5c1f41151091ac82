// Inputs saved the ordinary way in Python (plain torch.save: bare lists,
// dicts of named inputs, one-element lists and dicts, which Python pickles
// with APPEND / SETITEM), read by fx::load_value and matched to forward's
// parameters by fx::bind_inputs. Files: python/make_import_cases.py.
#include "../common/error_of.h"
#include "cases.h"

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using fx::testing::case_path;
using fx_test::error_of;

// Imports NAME.pt, binds NAME.input_KIND.pt to its placeholders and checks
// forward's output against NAME.output_KIND.pt; returns the arguments.
std::vector<c10::IValue> run_case(const std::string& name, const std::string& kind) {
  auto gm = fx::import_torchscript(case_path(name + ".pt"));
  const std::string in = case_path(name + ".input_" + kind + ".pt");
  std::vector<c10::IValue> inputs = fx::bind_inputs(fx::load_value(in), fx::input_parameters(gm->graph()), in);
  const auto d = fx::compare_values(gm->forward(inputs), fx::load_value(case_path(name + ".output_" + kind + ".pt")));
  EXPECT_LE(d.max_abs_diff, 1e-6 * std::max(1.0, d.max_abs_expected)) << name << " " << kind;
  return inputs;
}

TEST(InputFiles, NestedListsDictsAndNumbersOfPlainTorchSave) {
  // ([t], {"a": t, "b": 3}, [1.5, True, None, "s", (1, 2)], {"k": [t]}, [[t]], {}, [], {"n": {"m": [t, t]}})
  const c10::IValue v = fx::load_value(case_path("nested_values.pt"));
  ASSERT_TRUE(v.isTuple());
  const std::vector<c10::IValue> e(v.toTupleRef().elements().begin(), v.toTupleRef().elements().end());
  ASSERT_EQ(e.size(), 8u);
  const at::Tensor t = at::arange(3.0);
  ASSERT_EQ(e[0].toListRef().size(), 1u);
  EXPECT_TRUE(e[0].toListRef()[0].toTensor().equal(t));
  auto d = e[1].toGenericDict();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE(d.at("a").toTensor().equal(t));
  EXPECT_EQ(d.at("b").toInt(), 3);
  auto l = e[2].toListRef();
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0].toDouble(), 1.5);
  EXPECT_TRUE(l[1].toBool());
  EXPECT_TRUE(l[2].isNone());
  EXPECT_EQ(l[3].toStringRef(), "s");
  EXPECT_EQ(l[4].toTupleRef().elements().at(1).toInt(), 2);
  EXPECT_TRUE(e[3].toGenericDict().at("k").toListRef().at(0).toTensor().equal(t));
  EXPECT_TRUE(e[4].toListRef().at(0).toListRef().at(0).toTensor().equal(t));
  EXPECT_EQ(e[5].toGenericDict().size(), 0u);
  EXPECT_EQ(e[6].toListRef().size(), 0u);
  EXPECT_EQ(e[7].toGenericDict().at("n").toGenericDict().at("m").toListRef().size(), 2u);
}

TEST(InputFiles, ABareListIsTheListOfAListForward) {
  // torch.save([img], path) for forward(images: List[Tensor], scale: float = 1.0)
  const auto inputs = run_case("list_images", "list");
  ASSERT_EQ(inputs.size(), 1u);
  ASSERT_TRUE(inputs[0].isTensorList());
  EXPECT_EQ(inputs[0].toTensorList().size(), 1u);
}

TEST(InputFiles, ADictIsKeywordArguments) {
  // {"images": [img, img], "scale": 3.0}
  auto inputs = run_case("list_images", "dict");
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_TRUE(inputs[0].isTensorList());
  EXPECT_EQ(inputs[1].toDouble(), 3.0);
  // {"x": x, "scale": 3.0} for forward(x, y=None, scale=2.0): y takes its default.
  inputs = run_case("keywords", "dict");
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_TRUE(inputs[1].isNone());
  // {"y": y, "x": x}: by name, not by order; scale left out at the end.
  inputs = run_case("keywords", "dict_y");
  ASSERT_EQ(inputs.size(), 2u);
}

TEST(InputFiles, ForwardParametersFromTheSchemaAndFromTheGraph) {
  torch::jit::Module m = fx::load_torchscript(case_path("keywords.pt"));
  const auto from_schema = fx::input_parameters(m.get_method("forward").function().getSchema());
  const auto from_graph = fx::input_parameters(fx::import_torchscript(m)->graph());
  for (const auto& params : {from_schema, from_graph}) {
    ASSERT_EQ(params.size(), 3u);
    EXPECT_EQ(params[0].name, "x");
    EXPECT_EQ(params[0].type, "Tensor");
    EXPECT_FALSE(params[0].default_value);
    EXPECT_EQ(params[1].type, "Optional[Tensor]");
    ASSERT_TRUE(params[1].default_value);
    EXPECT_TRUE(params[1].default_value->isNone());
    EXPECT_EQ(params[2].name, "scale");
    EXPECT_EQ(params[2].default_value->toDouble(), 2.0);
  }
}

TEST(InputFiles, WithoutForwardAListIsTheArgumentsAndADictOneArgument) {
  auto inputs = fx::load_inputs(case_path("list_images.input_list.pt"));
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_TRUE(inputs[0].isTensor());
  inputs = fx::load_inputs(case_path("keywords.input_dict_y.pt"));
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_TRUE(inputs[0].isGenericDict());
  // str -> Tensor: typed, as a scripted forward taking Dict[str, Tensor] wants it
  EXPECT_EQ(inputs[0].toGenericDict().valueType()->kind(), c10::TypeKind::TensorType);
}

TEST(InputFiles, DictsThatDoNotMatchForwardSayWhy) {
  const std::vector<fx::InputParameter> params = {
      {"x", "Tensor", std::nullopt}, {"y", "Tensor", std::nullopt}, {"scale", "float", c10::IValue(2.0)}};
  c10::Dict<std::string, at::Tensor> d;
  d.insert("x", at::ones({1}));
  d.insert("z", at::ones({1}));
  d.insert("w", at::ones({1}));
  EXPECT_EQ(error_of([&] { fx::bind_inputs(d, params, "in.pt"); }),
            "in.pt: the inputs are a dict whose 'z', 'w' are not a parameter of forward (x, y, scale)");
  EXPECT_EQ(d.erase("z") + d.erase("w"), 2u);
  EXPECT_EQ(error_of([&] { fx::bind_inputs(d, params, "in.pt"); }),
            "in.pt: the inputs are a dict without 'y', which forward (x, y, scale) needs");
  // A forward taking a dict gets the whole dict.
  const std::vector<fx::InputParameter> takes_dict = {{"features", "Dict[str, Tensor]", std::nullopt}};
  d.insert("z", at::ones({1}));
  const auto inputs = fx::bind_inputs(d, takes_dict, "in.pt");
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].toGenericDict().size(), 2u);
}

}  // namespace
