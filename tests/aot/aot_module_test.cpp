// fx::aot_module / aot_function: joint graphs, partitions, and training
// steps equal to eager libtorch.
#include "aot_models.h"

#include <fx/aot.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>

namespace {

torch::nn::Sequential small_convnet() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)),
                               torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
                               torch::nn::Linear(4 * 6 * 6, 5));
}

// A deep copy of `m` (parameters and buffers cloned).
torch::nn::Sequential copy_of(const torch::nn::Sequential& m) {
  return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(m->clone());
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  EXPECT_LE(err, rtol * std::max(scale, 1e-6)) << what << ": max error " << err << " scale " << scale;
}

TEST(AotModule, TrainingStepEqualsEager) {
  torch::manual_seed(0);
  auto eager = small_convnet();
  auto compiled_net = copy_of(eager);
  auto aot = fx::aot_module(compiled_net.ptr());
  at::Tensor x = torch::randn({2, 3, 8, 8});

  at::Tensor ye = eager->forward(x);
  ye.pow(2).sum().backward();
  at::Tensor yc = aot->forward(x);
  yc.pow(2).sum().backward();

  expect_close(yc, ye, 1e-5, "output");
  auto pe = eager->named_parameters(), pc = compiled_net->named_parameters();
  for (const auto& p : pe) {
    ASSERT_TRUE(pc[p.key()].grad().defined()) << p.key();
    expect_close(pc[p.key()].grad(), p.value().grad(), 1e-4, "grad of " + p.key());
  }
  auto be = eager->named_buffers(), bc = compiled_net->named_buffers();
  for (const auto& b : be) expect_close(bc[b.key()], b.value(), 1e-5, "buffer " + b.key());
  // functorch 1.13's default_partition saves 11 values of this network too.
  EXPECT_EQ(aot->graphs().partitioned.saved.size(), 11u);
}

// The trace computes with the parameters themselves, not copies; one that
// the forward writes (under NoGradGuard) is copied first, so the trace never
// writes the caller's tensor: the compiled step doubles it once, as eager.
TEST(AotModule, TraceReadsParametersInPlaceAndCopiesOneItWrites) {
  struct Doubling : torch::nn::Module {
    at::Tensor w = register_parameter("w", torch::full({3}, 1.5));
    at::Tensor forward(const at::Tensor& x) {
      {
        torch::NoGradGuard no_grad;
        w.mul_(2);
      }
      return x * w;
    }
  };
  auto eager = std::make_shared<Doubling>(), compiled = std::make_shared<Doubling>();
  auto aot_module = fx::aot_module(compiled, [compiled](std::vector<c10::IValue> a) -> c10::IValue {
    return compiled->forward(a[0].toTensor());
  });
  const at::Tensor x = torch::ones({3});
  eager->forward(x).sum().backward();
  aot_module->forward(x).sum().backward();
  EXPECT_TRUE(at::equal(compiled->w, eager->w)) << compiled->w;  // 3.0: doubled once
  EXPECT_TRUE(at::equal(compiled->w.grad(), eager->w.grad()));

  // A view of the parameter alive when it is written: the view would read
  // the caller's tensor, not the copy: refused.
  struct ViewThenWrite : torch::nn::Module {
    at::Tensor w = register_parameter("w", torch::ones({2, 2}));
    at::Tensor forward(const at::Tensor& x) {
      at::Tensor row = w.select(0, 0);
      {
        torch::NoGradGuard no_grad;
        w.add_(1);
      }
      return x * row;
    }
  };
  auto vw = std::make_shared<ViewThenWrite>();
  auto bad = fx::aot_module(vw, [vw](std::vector<c10::IValue> a) -> c10::IValue { return vw->forward(a[0].toTensor()); });
  try {
    bad->forward(torch::ones({2}));
    FAIL() << "no error";
  } catch (const fx::TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "make_fx: aten::add_.Scalar writes parameter primals_1 in place while views of it are live; the trace "
              "does not write the caller's tensors");
  }
  EXPECT_TRUE(at::equal(vw->w, torch::ones({2, 2})));
}

// Where every parameter has a .grad (torch::optim's zero_grad() zeroes it), the
// backward adds each gradient into it as the graph computes it, freeing the
// gradient there: the same sums as AccumulateGrad's. Not where autograd must
// see them: autograd.grad, a hook on a parameter, the first step (no .grad).
TEST(AotModule, BackwardAddsGradientsIntoGradAsComputed) {
  torch::manual_seed(0);
  auto eager = small_convnet();
  auto compiled_net = copy_of(eager);
  auto aot = fx::aot_module(compiled_net.ptr());
  torch::optim::SGD se(eager->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD sc(compiled_net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const at::Tensor x = torch::randn({2, 3, 8, 8});
    se.zero_grad();
    sc.zero_grad();
    eager->forward(x).pow(2).sum().backward();
    aot->forward(x).pow(2).sum().backward();
    // Step 0: no .grad yet, autograd takes the gradients over; then in place.
    EXPECT_EQ(aot->num_accumulating_backwards(), static_cast<size_t>(step)) << "step " << step;
    auto pe = eager->named_parameters(), pc = compiled_net->named_parameters();
    for (const auto& p : pe) expect_close(pc[p.key()].grad(), p.value().grad(), 1e-5, "grad of " + p.key());
    se.step();
    sc.step();
  }
  // Gradients accumulate over two backwards, as in eager mode.
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  se.zero_grad();
  sc.zero_grad();
  for (int i = 0; i < 2; ++i) {
    eager->forward(x).sum().backward();
    aot->forward(x).sum().backward();
  }
  EXPECT_EQ(aot->num_accumulating_backwards(), 4u);
  for (const auto& p : eager->named_parameters())
    expect_close(compiled_net->named_parameters()[p.key()].grad(), p.value().grad(), 1e-5, "twice " + p.key());
  // autograd.grad returns gradients and leaves .grad alone.
  const at::Tensor w = compiled_net->named_parameters()["4.weight"];
  const at::Tensor before = w.grad().clone();
  const auto g = torch::autograd::grad({aot->forward(x).sum()}, {w});
  EXPECT_TRUE(g[0].defined());
  EXPECT_TRUE(at::equal(w.grad(), before));
  EXPECT_EQ(aot->num_accumulating_backwards(), 4u);
  // A hook on a parameter sees its gradient: returned to autograd.
  int seen = 0;
  w.register_hook([&seen](const at::Tensor&) { ++seen; });
  aot->forward(x).sum().backward();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(aot->num_accumulating_backwards(), 4u);
}

}  // namespace

namespace {

TEST(AotModule, NewShapesAndModesAreTracedAgain) {
  torch::manual_seed(0);
  auto net = small_convnet();
  auto aot = fx::aot_module(net.ptr());
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  EXPECT_EQ(aot->num_traces(), 1u);
  aot->forward(torch::randn({3, 3, 8, 8})).sum().backward();
  EXPECT_EQ(aot->num_traces(), 2u);
  net->eval();
  at::Tensor x = torch::randn({3, 3, 8, 8});
  at::Tensor y = aot->forward(x);
  EXPECT_EQ(aot->num_traces(), 3u);
  EXPECT_TRUE(y.allclose(net->forward(x), 1e-5, 1e-6)) << "eval mode uses the running statistics";
  // Eval-mode batch norm writes nothing back.
  for (const std::string& t : fx::aot_test::call_targets(*aot->forward_graph())) EXPECT_NE(t, "aten::copy_");
}

TEST(AotModule, UnderNoGradOnlyTheForwardRuns) {
  torch::manual_seed(0);
  auto net = small_convnet();
  auto aot = fx::aot_module(net.ptr());
  at::Tensor x = torch::randn({2, 3, 8, 8});
  torch::NoGradGuard no_grad;
  at::Tensor y = aot->forward(x);
  EXPECT_FALSE(y.requires_grad());
}

TEST(AotFunction, GradientsOfInputs) {
  auto f = fx::aot_function([](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), w = a[1].toTensor();
    return c10::ivalue::Tuple::create({torch::tanh(torch::mm(x, w)), (x * x).sum()});
  });
  torch::manual_seed(0);
  at::Tensor x = torch::randn({3, 4}, torch::requires_grad()), w = torch::randn({4, 2}, torch::requires_grad());
  auto out = f->forward({x, w}).toTuple();
  (out->elements()[0].toTensor().sum() + out->elements()[1].toTensor()).backward();
  at::Tensor x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
  (torch::tanh(torch::mm(x2, w2)).sum() + (x2 * x2).sum()).backward();
  EXPECT_TRUE(x.grad().allclose(x2.grad(), 1e-5, 1e-6));
  EXPECT_TRUE(w.grad().allclose(w2.grad(), 1e-5, 1e-6));
}

TEST(AotFunction, BadInputsAreErrors) {
  auto f = fx::aot_function([](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor().sum().item<float>(); });
  try {
    f->forward({torch::ones({2}, torch::requires_grad())});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "make_fx: aten::_local_scalar_dense reads the value of a traced tensor (data-dependent control flow or "
              "item() cannot be captured in a graph)");
  }
  auto g = fx::aot_function([](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() * 2; });
  try {
    g->forward({c10::IValue(2.0)});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "AotModule::forward: input 0 is a Double: a compiled training graph takes tensors");
  }
  try {
    fx::AotModule(nullptr, nullptr, {}).graphs();
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "AotModule: no graphs yet: they are traced by the first forward");
  }
}

}  // namespace

namespace {

// draw_joint_graph colours the joint graph by its partition, with a key.
TEST(AotDraw, JointGraphColouredByPartition) {
  torch::manual_seed(0);
  auto net = small_convnet();
  auto aot = fx::aot_module(net.ptr(), fx::AotOptions{fx::min_cut_partition()});
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  const fx::PartitionedGraphs& p = aot->graphs().partitioned;
  ASSERT_FALSE(p.recomputed.empty()) << "the batch norm's output is recomputed in backward";
  const std::string path = std::string(::testing::TempDir()) + "joint.dot";
  fx::draw_joint_graph(p, path, "small");
  std::ifstream in(path);
  const std::string dot((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(dot.find("digraph \"small\""), std::string::npos);
  EXPECT_NE(dot.find("\"legend_2\" [label=\"recomputed in backward\", fillcolor=\"#b6d7a8\"]"), std::string::npos) << dot;
  // Every saved value is filled red, every recomputed node green.
  for (const std::string& s : p.saved)
    EXPECT_NE(dot.find("\"" + s + "\" [label="), std::string::npos) << s;
  size_t red = 0, green = 0;
  for (size_t at = dot.find("fillcolor=\"#ea9999\""); at != std::string::npos; at = dot.find("fillcolor=\"#ea9999\"", at + 1)) ++red;
  for (size_t at = dot.find("fillcolor=\"#b6d7a8\""); at != std::string::npos; at = dot.find("fillcolor=\"#b6d7a8\"", at + 1)) ++green;
  EXPECT_EQ(red, p.saved.size() + 1);  // + the key's entry
  EXPECT_EQ(green, p.recomputed.size() + 1);
}

}  // namespace
