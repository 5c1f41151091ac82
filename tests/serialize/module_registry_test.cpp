// Every module type fxcpp registers for fx::save comes back with the same
// options (non-default ones set), the same state and the same outputs; a
// user's own module type round-trips through register_serializable_module.
#include "serialize_test_util.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>

namespace fx {
namespace {

namespace nn = torch::nn;
using json = nlohmann::json;

struct Case {
  std::shared_ptr<nn::Module> module;
  at::Tensor input;
};

std::vector<Case> cases() {
  torch::manual_seed(5);
  auto x4 = at::randn({2, 4, 6, 6});
  std::vector<Case> c = {
      {nn::Linear(nn::LinearOptions(4, 3).bias(false)).ptr(), at::randn({2, 4})},
      {nn::Conv1d(nn::Conv1dOptions(4, 2, 3).stride(2).padding(1).dilation(1).groups(2).padding_mode(torch::kReflect)).ptr(),
       at::randn({1, 4, 9})},
      {nn::Conv2d(nn::Conv2dOptions(4, 4, 3).padding(torch::kSame).bias(false)).ptr(), x4},
      {nn::Conv3d(nn::Conv3dOptions(4, 2, {1, 2, 3}).padding(torch::kValid)).ptr(), at::randn({1, 4, 3, 4, 5})},
      {nn::ConvTranspose1d(nn::ConvTranspose1dOptions(4, 2, 3).stride(2).output_padding(1)).ptr(), at::randn({1, 4, 5})},
      {nn::ConvTranspose2d(nn::ConvTranspose2dOptions(4, 3, 2).padding(1).groups(1)).ptr(), x4},
      {nn::ConvTranspose3d(nn::ConvTranspose3dOptions(4, 2, 2)).ptr(), at::randn({1, 4, 2, 3, 3})},
      {nn::BatchNorm1d(nn::BatchNorm1dOptions(4).eps(1e-3).momentum(c10::nullopt)).ptr(), at::randn({3, 4})},
      {nn::BatchNorm2d(nn::BatchNorm2dOptions(4).affine(false)).ptr(), x4},
      {nn::BatchNorm3d(nn::BatchNorm3dOptions(4).track_running_stats(false)).ptr(), at::randn({2, 4, 2, 2, 2})},
      {nn::LayerNorm(nn::LayerNormOptions({6, 6}).eps(1e-4)).ptr(), x4},
      {nn::GroupNorm(nn::GroupNormOptions(2, 4).affine(false)).ptr(), x4},
      {nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(0).max_norm(2.0)).ptr(), at::randint(10, {2, 5})},
      {nn::LSTM(nn::LSTMOptions(4, 5).num_layers(2).bidirectional(true).batch_first(true)).ptr(), at::randn({2, 3, 4})},
      {nn::LSTM(nn::LSTMOptions(4, 5).proj_size(2)).ptr(), at::randn({3, 2, 4})},
      {nn::GRU(nn::GRUOptions(4, 5).bias(false)).ptr(), at::randn({3, 2, 4})},
      {nn::RNN(nn::RNNOptions(4, 5).nonlinearity(torch::kReLU)).ptr(), at::randn({3, 2, 4})},
      {nn::ReLU(nn::ReLUOptions(false)).ptr(), x4},
      {nn::Dropout(nn::DropoutOptions(0.25)).ptr(), x4},
      {nn::Flatten(nn::FlattenOptions().start_dim(2)).ptr(), x4},
      {nn::Softmax(nn::SoftmaxOptions(1)).ptr(), x4},
      {nn::Identity().ptr(), x4},
      {nn::Sigmoid().ptr(), x4},
      {nn::Tanh().ptr(), x4},
      {nn::MaxPool1d(nn::MaxPool1dOptions(3).stride(2).padding(1).ceil_mode(true)).ptr(), at::randn({1, 4, 9})},
      {nn::MaxPool2d(nn::MaxPool2dOptions({3, 2}).stride({2, 1}).padding({1, 0}).dilation({1, 2})).ptr(), x4},
      {nn::MaxPool3d(nn::MaxPool3dOptions(2)).ptr(), at::randn({1, 2, 4, 4, 4})},
      {nn::AvgPool1d(nn::AvgPool1dOptions(2).count_include_pad(false).padding(1)).ptr(), at::randn({1, 4, 9})},
      {nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1).divisor_override(4)).ptr(), x4},
      {nn::AvgPool3d(nn::AvgPool3dOptions({2, 2, 1}).ceil_mode(true)).ptr(), at::randn({1, 2, 3, 4, 5})},
      {nn::AdaptiveAvgPool1d(nn::AdaptiveAvgPool1dOptions(4)).ptr(), at::randn({1, 4, 9})},
      {nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({c10::nullopt, 3})).ptr(), x4},
      {nn::AdaptiveAvgPool3d(nn::AdaptiveAvgPool3dOptions({1, 2, c10::nullopt})).ptr(), at::randn({1, 2, 3, 4, 5})},
  };
  return c;
}

TEST(ModuleRegistry, EveryRegisteredTypeRoundTrips) {
  for (Case& c : cases()) {
    c.module->eval();
    {
      torch::NoGradGuard no_grad;  // non-trivial state: buffers and parameters away from their defaults
      for (auto& b : c.module->buffers())
        if (b.is_floating_point()) b.uniform_(0.5, 1.5);
    }
    const SerializableModuleType* type = find_serializable_module(*c.module);
    ASSERT_NE(type, nullptr) << c.module->name();
    auto g = std::make_shared<Graph>();
    g->output(g->call_module("m", {g->placeholder("x")}));
    auto root = std::make_shared<nn::Module>();
    root->register_module("m", c.module);
    auto gm = std::make_shared<GraphModule>(root, g);
    gm->eval();
    auto loaded = serialize_test::round_trip(*gm);
    auto m = loaded->get_submodule("m");
    EXPECT_EQ(typeid(*m), typeid(*c.module)) << type->name;
    EXPECT_EQ(type->to_json(*m), type->to_json(*c.module)) << type->name;
    EXPECT_FALSE(m->is_training()) << type->name;
    serialize_test::expect_same_module(*gm, *loaded, {c.input});
  }
}

// fx::load builds each layer from its options without drawing random initial
// weights (every tensor is replaced by the saved one): loading consumes no random
// numbers, and layers made after it are initialised as usual.
TEST(ModuleRegistry, LoadingDrawsNoRandomWeights) {
  for (Case& c : cases()) {
    auto g = std::make_shared<Graph>();
    g->output(g->call_module("m", {g->placeholder("x")}));
    auto root = std::make_shared<nn::Module>();
    root->register_module("m", c.module);
    auto gm = std::make_shared<GraphModule>(root, g);
    const std::string bytes = save_to_string(*gm);
    torch::manual_seed(11);
    const at::Tensor expected = torch::rand({4});
    torch::manual_seed(11);
    auto loaded = load_from_string(bytes);
    EXPECT_TRUE(at::equal(torch::rand({4}), expected)) << c.module->name() << " drew random numbers while loading";
    auto a = gm->named_parameters();
    for (const auto& p : loaded->named_parameters()) EXPECT_TRUE(at::equal(p.value(), a[p.key()])) << p.key();
  }
  torch::manual_seed(12);
  nn::Linear fresh(64, 64);
  const double bound = 1.0 / 8.0;  // kaiming_uniform_(a = sqrt(5)): 1 / sqrt(fan_in)
  EXPECT_LE(fresh->weight.abs().max().item<double>(), bound);
  EXPECT_GT(fresh->weight.abs().max().item<double>(), 0.9 * bound);
  EXPECT_GT(fresh->weight.std().item<double>(), 0.5 * bound / std::sqrt(3.0));
}

// Python's torch.nn writes a pooling size as one number (MaxPool2d(3)) and an
// adaptive size as a tuple that may hold None: the registry reads both forms,
// and refuses a list of the wrong length naming the option.
TEST(ModuleRegistry, PoolingOptionsInPythonsForms) {
  const SerializableModuleType* max2 = find_serializable_module("torch.nn.MaxPool2d");
  const SerializableModuleType* adaptive2 = find_serializable_module("torch.nn.AdaptiveAvgPool2d");
  const SerializableModuleType* avg1 = find_serializable_module("torch.nn.AvgPool1d");
  ASSERT_NE(max2, nullptr);
  ASSERT_NE(adaptive2, nullptr);
  ASSERT_NE(avg1, nullptr);
  const json python_form = {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}, {"dilation", 1}, {"ceil_mode", false}};
  auto m = max2->from_json(python_form);
  EXPECT_EQ(max2->to_json(*m), (json{{"kernel_size", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}},
                                     {"dilation", {1, 1}}, {"ceil_mode", false}}));
  auto a = adaptive2->from_json(json{{"output_size", {nullptr, 7}}});
  EXPECT_EQ(adaptive2->to_json(*a), (json{{"output_size", {nullptr, 7}}}));
  EXPECT_EQ(a->as<nn::AdaptiveAvgPool2d>()->forward(at::ones({1, 2, 5, 14})).sizes(), at::IntArrayRef({1, 2, 5, 7}));
  // Python's AvgPool1d has no divisor_override: its options leave it out.
  auto p = avg1->from_json(json{{"kernel_size", {2}}, {"stride", {2}}, {"padding", {0}}, {"ceil_mode", false},
                                {"count_include_pad", true}});
  EXPECT_EQ(p->as<nn::AvgPool1d>()->options.divisor_override(), c10::nullopt);
  EXPECT_EQ(error_of([&] { adaptive2->from_json(json{{"output_size", {1, 2, 3}}}); }),
            "option 'output_size' has 3 values; expected 2");
  json zero_kernel = python_form;
  zero_kernel["kernel_size"] = 0;
  EXPECT_EQ(error_of([&] { max2->from_json(zero_kernel); }), "option 'kernel_size' is 0; expected 1 to 16777216");
}

/// A user's module: y = x * scale + shift, `scale` an option, `shift` a parameter.
struct AffineImpl : nn::Module {
  explicit AffineImpl(double scale, int64_t n) : scale(scale), shift(register_parameter("shift", at::zeros({n}))) {}
  at::Tensor forward(const at::Tensor& x) { return x * scale + shift; }
  double scale;
  at::Tensor shift;
};

TEST(ModuleRegistry, UserTypeWithOptionsAndState) {
  register_module_type<AffineImpl>();
  register_serializable_module<AffineImpl>(
      "test.Affine", [](const AffineImpl& m) { return json{{"scale", m.scale}, {"n", m.shift.size(0)}}; },
      [](const json& j) { return std::make_shared<AffineImpl>(j.at("scale").get<double>(), j.at("n").get<int64_t>()); });
  auto affine = std::make_shared<AffineImpl>(3.0, 4);
  {
    torch::NoGradGuard no_grad;
    affine->shift.copy_(at::arange(4, at::kFloat));
  }
  auto g = std::make_shared<Graph>();
  g->output(g->call_module("affine", {g->placeholder("x")}));
  auto root = std::make_shared<nn::Module>();
  root->register_module("affine", affine);
  auto gm = std::make_shared<GraphModule>(root, g);
  auto loaded = serialize_test::round_trip(*gm);
  auto m = std::dynamic_pointer_cast<AffineImpl>(loaded->get_submodule("affine"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->scale, 3.0);
  EXPECT_TRUE(at::equal(m->shift, affine->shift));
  serialize_test::expect_same_module(*gm, *loaded, {at::randn({2, 4})});
  // Options that make parameters of other shapes than the file's: one line naming the module.
  register_serializable_module<AffineImpl>(
      "test.Affine", [](const AffineImpl& m) { return json{{"scale", m.scale}, {"n", m.shift.size(0)}}; },
      [](const json& j) { return std::make_shared<AffineImpl>(j.at("scale").get<double>(), 2); });
  EXPECT_EQ(serialize_test::error_of([&] { serialize_test::round_trip(*gm); }),
            "mem.fx: module 'affine': parameter 'shift' is Float[4] in the file but the module's options make Float[2]");
}

}  // namespace
}  // namespace fx
