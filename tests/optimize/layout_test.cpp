// optimize_for_inference's layout choices are unobservable (issue 24): the
// oneDNN convolutions write channels_last, and every value that reaches a
// layout-sensitive reader (view, reshape, flatten, as_strided, an output, an
// unknown function) has the layout the unoptimised program gave it there.
#include "../passes/passes_test_util.h"

#include <fx/graph.h>
#include <fx/onednn.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/target.h>
#include <fx/trace.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

#include <random>

namespace {

namespace nn = torch::nn;

/// AlexNet / VGG style: features, adaptive_avg_pool2d to 6x6, then
/// x.view({x.size(0), -1}) into the classifier.
struct AlexStyleImpl : nn::Module {
  AlexStyleImpl() {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 8, 3).padding(1)));
    fc = register_module("fc", nn::Linear(8 * 6 * 6, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::relu(conv2(x));
    x = torch::adaptive_avg_pool2d(x, {6, 6});
    x = x.view({x.size(0), -1});
    return fc(x);
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc{nullptr};
};
TORCH_MODULE(AlexStyle);

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-12);
}

TEST(OptimizeLayout, AViewAfterAdaptivePoolingRunsAsEagerly) {
  torch::manual_seed(0);
  AlexStyle net;
  net->eval();
  at::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 24, 24});
  at::Tensor expected = net->forward(x);
  auto gm = fx::symbolic_trace(net.ptr(), {x});
  for (bool with_examples : {true, false}) {
    fx::OptimizeOptions options;
    if (with_examples) options.example_inputs = {x};
    auto opt = fx::optimize_for_inference(gm, options);
    at::Tensor y = opt->forward(x);
    EXPECT_LE(relative_error(y, expected), 1e-4) << with_examples;
    EXPECT_EQ(y.strides(), expected.strides());
    // One copy back to NCHW, before the view.
    size_t restores = 0;
    for (const fx::Node* n : opt->graph().nodes()) restores += n->target() == "fxcpp::restore_layout";
    EXPECT_EQ(restores, 1u) << opt->graph().str();
  }
  // A channels_last input: eager's convolutions write channels_last, the
  // view fails eagerly and optimised alike.
  at::Tensor xl = x.contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_THROW(net->forward(xl), c10::Error);
  auto opt = fx::optimize_for_inference(gm, {});
  EXPECT_THROW(opt->forward(xl), std::exception);
}

/// A registered function whose value depends on the layout: x's elements in memory order.
void register_memory_order() {
  static bool once = [] {
    fx::register_function("layout_test::memory_order", [](std::vector<c10::IValue>& args, fx::ValueKwargs&) {
      const at::Tensor& t = args.at(0).toTensor();
      return c10::IValue(t.as_strided({t.numel()}, {1}).clone());
    });
    return true;
  }();
  (void)once;
}

struct Shape {
  int64_t c, h, w;
};

/// A seeded random graph of convolutions (3x3 and 1x1, stride 1 or 2),
/// ReLU / sigmoid / hardswish, residual adds, cat along channels, mean over
/// H and W, max and adaptive average pooling, with layout-sensitive readers at random points (view, reshape,
/// flatten, as_strided, contiguous, a registered function, a module whose
/// forward views its input, outputs) whose
/// results are outputs, or (contiguous) carry on.
std::shared_ptr<fx::GraphModule> random_conv_graph(uint32_t seed, int64_t batch) {
  register_memory_order();
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  auto root = std::make_shared<nn::Module>("Root");
  {
    // A leaf module whose forward views its input: y.view({batch, -1}).
    auto leaf = std::make_shared<fx::Graph>();
    fx::Node* y = leaf->placeholder("y");
    leaf->output(leaf->call_method("view", {y, fx::Argument::list({batch, -1})}));
    root->register_module("flat", fx_test::module_of(leaf));
  }
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  Shape s{3, 12, 12};
  std::vector<std::pair<fx::Node*, Shape>> values{{x, s}};
  std::vector<fx::Argument> outputs;
  int convs = 0;
  auto ints = [](std::vector<int64_t> v) {
    std::vector<fx::Argument> a(v.begin(), v.end());
    return fx::Argument::list(std::move(a));
  };
  const int steps = 8 + pick(8);
  for (int step = 0; step < steps; ++step) {
    const int kind = pick(10);
    fx::Node* y = nullptr;
    if (kind <= 2 || convs == 0) {  // convolution
      const int64_t out = 4 + 4 * pick(2), k = pick(3) == 0 ? 1 : 3;
      const int64_t stride = s.h >= 6 && pick(4) == 0 ? 2 : 1;
      const std::string w = "w" + std::to_string(convs), b = "b" + std::to_string(convs);
      root->register_parameter(w, at::randn({out, s.c, k, k}) / std::sqrt(double(s.c * k * k)), false);
      root->register_parameter(b, at::randn({out}) * 0.1, false);
      ++convs;
      y = g->call_function("aten::conv2d", {x, g->get_attr(w), g->get_attr(b), ints({stride, stride}),
                                            ints({k / 2, k / 2}), ints({1, 1}), 1});
      s = {out, (s.h + 2 * (k / 2) - k) / stride + 1, (s.w + 2 * (k / 2) - k) / stride + 1};
    } else if (kind == 3) {
      static const char* acts[] = {"aten::relu", "aten::sigmoid", "aten::hardswish"};
      y = g->call_function(acts[pick(3)], {x});
    } else if (kind == 4) {  // residual add with an earlier value of the same shape, else a scalar
      fx::Node* other = nullptr;
      for (auto& [v, vs] : values)
        if (v != x && vs.c == s.c && vs.h == s.h && vs.w == s.w && pick(2)) other = v;
      y = other ? g->call_function("aten::add", {x, other}) : g->call_function("aten::add", {x, 0.5});
    } else if (kind == 5 && s.h >= 4) {
      y = g->call_function("aten::max_pool2d", {x, ints({2, 2}), ints({2, 2})});
      s = {s.c, s.h / 2, s.w / 2};
    } else if (kind == 7) {  // cat with an earlier value of the same spatial size, or mean over H, W
      fx::Node* other = nullptr;
      Shape os{};
      for (auto& [v, vs] : values)
        if (v != x && vs.h == s.h && vs.w == s.w && vs.c <= 8 && pick(2)) other = v, os = vs;
      if (other && s.c <= 8) {
        y = g->call_function("aten::cat", {fx::Argument::list({x, other}), 1});
        s = {s.c + os.c, s.h, s.w};
      } else {
        y = g->call_function("aten::mean", {x, ints({2, 3}), true});
        s = {s.c, 1, 1};
      }
    } else if (kind == 6 && s.h >= 3) {
      const int64_t size = 1 + pick(3);
      y = g->call_function("aten::adaptive_avg_pool2d", {x, ints({size, size})});
      s = {s.c, size, size};
    } else {  // a layout-sensitive reader
      switch (pick(8)) {
        case 7:
          outputs.push_back(g->call_module("flat", {x}));
          break;
        case 0:
          outputs.push_back(g->call_method("view", {x, ints({batch, -1})}));
          break;
        case 1:
          outputs.push_back(g->call_function("aten::reshape", {x, ints({batch, s.c, s.h * s.w})}));
          break;
        case 2:
          outputs.push_back(g->call_function("aten::flatten", {x, 1}));
          break;
        case 3:  // the elements in NCHW order if x is contiguous, in another order if not
          outputs.push_back(g->call_function(
              "aten::as_strided", {x, ints({batch, s.c, s.h, s.w}), ints({s.c * s.h * s.w, s.h * s.w, s.w, 1})}));
          break;
        case 4:
          outputs.push_back(g->call_function("layout_test::memory_order", {x}));
          break;
        case 5:
          outputs.push_back(x);
          break;
        default:  // carries on from a layout-sensitive op
          y = g->call_method("contiguous", {x});
          break;
      }
    }
    if (y) {
      x = y;
      values.emplace_back(x, s);
    }
  }
  outputs.push_back(x);
  g->output(fx::Argument::tuple(std::move(outputs)));
  return fx_test::module_of(g, root);
}

/// The strides of the dimensions of size > 1 (-1 for the others): where the
/// elements are in memory. For a value with dimensions of size 1 eager's
/// own ops disagree on those dimensions' strides (a channels_last
/// [N, C, 1, 1]: conv2d writes strides (C, 1, C, C), relu (C, 1, 1, 1)).
std::vector<int64_t> layout_of(const at::Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < t.dim(); ++d) out.push_back(t.size(d) > 1 ? t.stride(d) : -1);
  return out;
}

// Contiguous inputs: the optimised outputs have the unoptimised ones' sizes
// and strides. channels_last inputs: the same sizes and memory layout (see
// layout_of), and a view that fails eagerly fails optimised.
TEST(OptimizeLayout, RandomConvGraphsKeepValuesSizesAndStrides) {
  at::NoGradGuard no_grad;
  size_t restored = 0, compared = 0, failed = 0, cats = 0, leaves = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    torch::manual_seed(seed);
    const int64_t batch = 2;
    auto gm = random_conv_graph(seed, batch);
    at::Tensor x = at::randn({batch, 3, 12, 12});
    // Contiguous and channels_last inputs; kernels prepared for the example or at the first call.
    for (bool channels_last : {false, true}) {
      at::Tensor input = channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
      std::vector<c10::IValue> expected;
      try {
        expected = gm->forward({input}).toTupleRef().elements().vec();
      } catch (const std::exception&) {
        // A view of a channels_last value fails eagerly: optimised too.
        ASSERT_TRUE(channels_last) << seed;
        auto opt = fx::optimize_for_inference(gm, {});
        EXPECT_THROW(opt->forward({input}), std::exception) << seed;
        ++failed;
        continue;
      }
      fx::OptimizeOptions options;
      if (seed % 2) options.example_inputs = {input};
      fx::OptimizeReport report;
      auto opt = fx::optimize_for_inference(gm, options, &report);
      const auto got = opt->forward({input}).toTupleRef().elements();
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const at::Tensor& a = got[i].toTensor();
        const at::Tensor& e = expected[i].toTensor();
        SCOPED_TRACE("seed " + std::to_string(seed) + (channels_last ? " channels_last" : "") + " output " +
                     std::to_string(i) + "\n" + opt->graph().str());
        ASSERT_EQ(a.sizes(), e.sizes());
        if (channels_last)
          EXPECT_EQ(layout_of(a), layout_of(e));
        else
          EXPECT_EQ(a.strides(), e.strides());
        EXPECT_LE(relative_error(a, e), 1e-4);
        ++compared;
      }
      EXPECT_GT(report.onednn_convs, 0u);
      for (const fx::Node* n : opt->graph().nodes()) {
        restored += n->target() == "fxcpp::restore_layout";
        cats += n->target() == "aten::cat";
        leaves += n->op() == fx::Opcode::CallModule;
      }
    }
  }
  EXPECT_GT(compared, 100u);
  EXPECT_GT(failed, 0u);
  EXPECT_GT(cats, 0u);
  EXPECT_GT(leaves, 0u);
  EXPECT_GT(restored, 40u);
}

TEST(OptimizeLayout, LayoutFreeRegionsAreNotCopied) {
  // conv → relu → max_pool → conv → add → adaptive_avg_pool stays
  // channels_last; only the output is copied back.
  auto root = std::make_shared<nn::Module>("Root");
  root->register_parameter("w1", at::randn({8, 3, 3, 3}), false);
  root->register_parameter("w2", at::randn({8, 8, 1, 1}), false);
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* c1 = g->call_function("aten::conv2d", {x, g->get_attr("w1")});
  fx::Node* p = g->call_function("aten::max_pool2d", {g->call_function("aten::relu", {c1}),
                                                     fx::Argument::list({2, 2})});
  fx::Node* c2 = g->call_function("aten::conv2d", {p, g->get_attr("w2")});
  fx::Node* a = g->call_function("aten::add", {c2, p});
  g->output(g->call_function("aten::adaptive_avg_pool2d", {a, fx::Argument::list({1, 1})}));
  auto gm = fx_test::module_of(g, root);
  fx::OneDnnLowering counts;
  at::NoGradGuard no_grad;
  at::Tensor in = at::randn({1, 3, 10, 10});
  at::Tensor expected = gm->forward(in);
  fx::lower_to_onednn(gm, at::kFloat, &counts);
  EXPECT_EQ(counts.convs, 2u);
  EXPECT_EQ(counts.restored_layouts, 1u);
  const fx::Node* out = gm->graph().output_node();
  const fx::Node* restored = out->args()[0].to_node();
  EXPECT_EQ(restored->target(), "fxcpp::restore_layout");
  EXPECT_EQ(restored->args()[0].to_node()->target(), "fxcpp::adaptive_avg_pool2d");
  EXPECT_EQ(restored->args()[1].to_node()->format_node(),
            "%suggest_memory_format : [#users=1] = call_function[target=fxcpp::suggest_memory_format](args = (%x,), "
            "kwargs = {})");
  at::Tensor y = gm->forward(in);
  EXPECT_EQ(y.strides(), expected.strides());
  EXPECT_LE(relative_error(y, expected), 1e-4);
}

// fxcpp::restore_layout (and the convolutions' conversion of an NCHW input
// to channels_last) copy through a oneDNN reorder for float / bf16 4-d
// tensors and ATen's copy otherwise: values, sizes and the canonical
// strides of the asked format, whatever the source's strides.
TEST(OptimizeLayout, RestoreLayoutCopiesAnyStridesIntoTheFormat) {
  fx::onednn::register_ops();
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::restore_layout", "");
  auto restore = [&](const at::Tensor& t, c10::MemoryFormat f) {
    std::vector<c10::IValue> stack{t, static_cast<int64_t>(f)};
    op.callBoxed(&stack);
    return stack.back().toTensor();
  };
  torch::manual_seed(0);
  const at::Tensor x = at::randn({2, 5, 7, 3});
  const at::Tensor sources[] = {x, x.contiguous(at::MemoryFormat::ChannelsLast), x.to(at::kBFloat16),
                                x.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast),
                                at::randn({2, 5, 14, 3}).slice(2, 0, 14, 2),  // not dense: ATen's copy
                                x.to(at::kDouble), x.permute({1, 0, 2, 3}), at::randn({4, 5})};
  for (const at::Tensor& s : sources)
    for (c10::MemoryFormat f : {c10::MemoryFormat::Contiguous, c10::MemoryFormat::ChannelsLast}) {
      const at::Tensor y = restore(s, f);
      const c10::MemoryFormat want = s.dim() == 4 ? f : c10::MemoryFormat::Contiguous;
      EXPECT_EQ(y.sizes(), s.sizes());
      EXPECT_EQ(y.scalar_type(), s.scalar_type());
      EXPECT_EQ(y.strides(), at::empty(s.sizes(), at::TensorOptions().memory_format(want)).strides())
          << s.strides() << " -> " << f;
      EXPECT_TRUE(y.equal(s)) << s.strides() << " -> " << f;
      EXPECT_NE(y.data_ptr(), s.data_ptr());
    }
}

}  // namespace
