// symbolic_trace on whole models: the traced GraphModule computes what eager
// libtorch computes (outputs and gradients, on fresh inputs of the traced
// shape), with the expected call_module / get_attr structure.
#include <fx/examples/residual_net.h>
#include <fx/trace.h>

#include "trace_models.h"
#include "trace_test_util.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/transformer.h>
#include <torch/nn/modules/transformerlayer.h>

namespace fx {
namespace {

using trace_test::count_calls;
using trace_test::expect_same_as_eager;
using trace_test::sorted;
using trace_test::targets;

template <class M>
std::vector<at::Tensor> params_of(const M& m) {
  return m->parameters();
}

TEST(TraceModels, ResidualNet) {
  auto net = examples::ResidualNet();
  auto gm = symbolic_trace(net, {at::randn({2, 3, 16, 16})});
  EXPECT_EQ(targets(gm->graph(), Opcode::CallModule),
            (std::vector<std::string>{"conv1", "bn1", "block.conv1", "block.bn1", "block.conv2", "block.bn2", "fc"}));
  auto eager = [&](std::vector<c10::IValue> a) -> c10::IValue { return net->forward(a[0].toTensor()); };
  net->eval();
  gm->eval();
  expect_same_as_eager(eager, gm, {at::randn({2, 3, 16, 16})}, params_of(net));
  net->train();  // batch statistics: gradients flow through the batch norms too
  gm->train();
  expect_same_as_eager(eager, gm, {at::randn({2, 3, 16, 16})}, params_of(net));
}

TEST(TraceModels, ResNet18Shaped) {
  auto net = trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10);
  net->eval();
  auto gm = symbolic_trace(net, {at::randn({1, 3, 64, 64})});
  auto mods = targets(gm->graph(), Opcode::CallModule);
  // conv1, bn1, 8 blocks x (2 convs + 2 bns), 3 downsamples x (conv + bn), fc
  EXPECT_EQ(mods.size(), 2u + 8u * 4u + 3u * 2u + 1u);
  EXPECT_EQ(mods[2], "layer1.0.conv1");
  EXPECT_NE(std::find(mods.begin(), mods.end(), "layer2.0.downsample.0"), mods.end());
  EXPECT_NE(std::find(mods.begin(), mods.end(), "layer4.1.bn2"), mods.end());
  EXPECT_EQ(mods.back(), "fc");
  EXPECT_TRUE(targets(gm->graph(), Opcode::GetAttr).empty());
  EXPECT_EQ(count_calls(gm->graph(), "aten::add_.Tensor"), 8u);  // out += identity
  gm->eval();
  expect_same_as_eager([&](std::vector<c10::IValue> a) -> c10::IValue { return net->forward(a[0].toTensor()); }, gm,
                       {at::randn({1, 3, 64, 64})}, params_of(net));
}

TEST(TraceModels, TransformerEncoderLayer) {
  auto layer = torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(16, 2)
                                                      .dim_feedforward(32)
                                                      .dropout(0.0));
  auto gm = symbolic_trace(layer, {at::randn({5, 2, 16})});
  EXPECT_EQ(sorted(targets(gm->graph(), Opcode::CallModule)),
            sorted({"self_attn.out_proj", "linear1", "linear2", "norm1", "norm2"}));
  // MultiheadAttention is traced through: its packed input projection is a get_attr.
  EXPECT_EQ(sorted(targets(gm->graph(), Opcode::GetAttr)),
            sorted({"self_attn.in_proj_weight", "self_attn.in_proj_bias"}));
  expect_same_as_eager(
      [&](std::vector<c10::IValue> a) -> c10::IValue { return layer->forward(a[0].toTensor()); }, gm,
      {at::randn({5, 2, 16})}, params_of(layer));
}

TEST(TraceModels, LstmAsLeafModule) {
  auto net = trace_test::Seq2Vec();
  auto gm = symbolic_trace(net, {at::randn({5, 3, 8})});
  EXPECT_EQ(targets(gm->graph(), Opcode::CallModule), (std::vector<std::string>{"lstm", "head"}));
  Node* lstm = gm->graph().find_nodes(Opcode::CallModule, "lstm")[0];
  EXPECT_EQ(lstm->args().size(), 1u);  // hx omitted: forward creates the zeros itself
  EXPECT_TRUE(targets(gm->graph(), Opcode::GetAttr).empty());
  expect_same_as_eager([&](std::vector<c10::IValue> a) -> c10::IValue { return net->forward(a[0].toTensor()); }, gm,
                       {at::randn({5, 3, 8})}, params_of(net));
}

TEST(TraceModels, LstmRootTracedThrough) {
  auto lstm = torch::nn::LSTM(torch::nn::LSTMOptions(4, 6));
  auto gm = symbolic_trace(lstm, {at::randn({3, 2, 4})});
  EXPECT_EQ(count_calls(gm->graph(), "aten::lstm.input"), 1u);
  EXPECT_EQ(sorted(targets(gm->graph(), Opcode::GetAttr)),
            sorted({"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "_tensor_constant0",
                    "_tensor_constant1"}));
  expect_same_as_eager(
      [&](std::vector<c10::IValue> a) -> c10::IValue { return lstm->forward(a[0].toTensor()); }, gm,
      {at::randn({3, 2, 4})}, params_of(lstm));
}

TEST(TraceModels, Sequential) {
  auto seq = torch::nn::Sequential(torch::nn::Linear(6, 8), torch::nn::ReLU(), torch::nn::Linear(8, 3));
  auto gm = symbolic_trace(seq, {at::randn({4, 6})});
  EXPECT_EQ(targets(gm->graph(), Opcode::CallModule), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(count_calls(gm->graph(), "aten::relu"), 1u);  // parameter-free modules come out as functions
  expect_same_as_eager([&](std::vector<c10::IValue> a) -> c10::IValue { return seq->forward(a[0].toTensor()); }, gm,
                       {at::randn({4, 6})}, params_of(seq));
}

TEST(TraceModels, FreeFunction) {
  at::Tensor w = at::randn({3, 3});
  auto fn = [w](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    at::Tensor y = a[1].toTensor();
    return at::tanh(at::matmul(x, w)) * y.sigmoid() + x.sum(1, /*keepdim=*/true);
  };
  auto gm = symbolic_trace(fn, {at::randn({2, 3}), at::randn({2, 3})});
  EXPECT_EQ(targets(gm->graph(), Opcode::Placeholder), (std::vector<std::string>{"arg0", "arg1"}));
  EXPECT_EQ(targets(gm->graph(), Opcode::GetAttr), (std::vector<std::string>{"_tensor_constant0"}));
  EXPECT_TRUE(gm->fetch_attr("_tensor_constant0").is_same(w));
  expect_same_as_eager(fn, gm, {at::randn({2, 3}), at::randn({2, 3})}, {});
}

// One of each leaf type of the table (and a LayerNorm without parameters,
// which cannot be a leaf).
struct AllLeavesImpl : torch::nn::Module {
  AllLeavesImpl()
      : c1(register_module("c1", torch::nn::Conv1d(torch::nn::Conv1dOptions(2, 4, 3).padding(1).padding_mode(
                                                    torch::kReflect)))),
        bn(register_module("bn", torch::nn::BatchNorm1d(4))),
        ct(register_module("ct", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(4, 3, 2).stride(2)))),
        gn(register_module("gn", torch::nn::GroupNorm(torch::nn::GroupNormOptions(1, 3)))),
        emb(register_module("emb", torch::nn::Embedding(torch::nn::EmbeddingOptions(10, 4).padding_idx(0)))),
        gru(register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(4, 5)))),
        rnn(register_module("rnn", torch::nn::RNN(torch::nn::RNNOptions(4, 5).nonlinearity(torch::kReLU)))),
        c3(register_module("c3", torch::nn::Conv3d(torch::nn::Conv3dOptions(1, 2, 3).padding(torch::kSame)))),
        ln(register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({5}).elementwise_affine(false)))) {}
  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& seq, const at::Tensor& img,
                                                                      const at::Tensor& ids, const at::Tensor& vol) {
    at::Tensor a = bn(c1(seq));
    at::Tensor b = gn(ct(img));
    at::Tensor e = emb(ids).transpose(0, 1);
    at::Tensor g = std::get<0>(gru(e));
    at::Tensor r = std::get<0>(rnn(e));
    return {a, b, ln(g + r), c3(vol)};
  }
  torch::nn::Conv1d c1;
  torch::nn::BatchNorm1d bn;
  torch::nn::ConvTranspose2d ct;
  torch::nn::GroupNorm gn;
  torch::nn::Embedding emb;
  torch::nn::GRU gru;
  torch::nn::RNN rnn;
  torch::nn::Conv3d c3;
  torch::nn::LayerNorm ln;
};
TORCH_MODULE(AllLeaves);

TEST(TraceModels, EveryLeafType) {
  auto m = AllLeaves();
  auto inputs = [] {
    return std::vector<at::Tensor>{at::randn({2, 2, 7}), at::randn({2, 4, 3, 3}), at::randint(0, 10, {2, 6}),
                                   at::randn({2, 1, 4, 4, 4})};
  };
  std::vector<c10::IValue> example;
  for (const at::Tensor& t : inputs()) example.emplace_back(t);
  auto gm = symbolic_trace(m, example);
  EXPECT_EQ(sorted(targets(gm->graph(), Opcode::CallModule)),
            sorted({"c1", "bn", "ct", "gn", "emb", "gru", "rnn", "c3"}));
  EXPECT_EQ(count_calls(gm->graph(), "aten::layer_norm"), 1u);
  EXPECT_TRUE(targets(gm->graph(), Opcode::GetAttr).empty());
  expect_same_as_eager(
      [&](std::vector<c10::IValue> a) -> c10::IValue {
        return m->forward(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor());
      },
      gm, inputs(), params_of(m));
}

TEST(TraceModels, KeywordArgumentsListsAndTupleResultsRunBack) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    auto [values, indices] = at::topk(x, 2);
    std::vector<at::Tensor> parts = x.split(2, 1);
    at::Tensor z = at::zeros_like(x, at::TensorOptions().dtype(at::kDouble));
    at::Tensor s = at::softmax(x, 1, at::kDouble);
    at::Tensor y = x.to(at::kDouble) + z + s;
    y.add_(parts[1].to(at::kDouble).sum(), 0.5);
    return std::make_tuple(y, values, indices, at::cat(parts, 0).mul_(2));
  };
  auto gm = symbolic_trace(fn, {at::randn({3, 4})});
  EXPECT_EQ(count_calls(gm->graph(), "aten::topk"), 1u);
  EXPECT_EQ(count_calls(gm->graph(), "aten::split.Tensor"), 1u);
  EXPECT_EQ(count_calls(gm->graph(), "aten::mul_.Scalar"), 1u);
  Node* zeros = gm->graph().find_nodes(Opcode::CallFunction, "aten::zeros_like")[0];
  ASSERT_EQ(zeros->kwargs().size(), 1u);
  EXPECT_EQ(zeros->kwargs()[0].first, "dtype");
  expect_same_as_eager(fn, gm, {at::randn({3, 4})}, {});
}

TEST(TraceModels, CustomTracerKeepsOrTracesThroughLinear) {
  auto model = trace_test::ComplexModel();
  // The seed's CustomTracer: Linear is a leaf.
  struct LinearLeaf : Tracer {
    bool is_leaf_module(const torch::nn::Module& m, const std::string& q) override {
      if (dynamic_cast<const torch::nn::LinearImpl*>(&m)) return true;
      return Tracer::is_leaf_module(m, q);
    }
  };
  struct TraceThrough : Tracer {
    bool is_leaf_module(const torch::nn::Module& m, const std::string& q) override {
      if (dynamic_cast<const torch::nn::LinearImpl*>(&m)) return false;
      return Tracer::is_leaf_module(m, q);
    }
  };
  auto eager = [&](std::vector<c10::IValue> a) -> c10::IValue { return model->forward(a[0].toTensor()); };
  {
    LinearLeaf tracer;
    auto gm = to_graph_module(tracer, tracer.trace(model.ptr(), {at::randn({1, 10})}));
    EXPECT_EQ(targets(gm->graph(), Opcode::CallModule), (std::vector<std::string>{"linear1", "linear2"}));
    EXPECT_TRUE(targets(gm->graph(), Opcode::GetAttr).empty());
    expect_same_as_eager(eager, gm, {at::randn({1, 10})}, params_of(model));
  }
  {
    TraceThrough tracer;
    auto gm = to_graph_module(tracer, tracer.trace(model.ptr(), {at::randn({1, 10})}));
    EXPECT_TRUE(gm->graph().find_nodes(Opcode::CallModule).empty());
    EXPECT_EQ(sorted(targets(gm->graph(), Opcode::GetAttr)),
              sorted({"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"}));
    EXPECT_EQ(count_calls(gm->graph(), "aten::addmm"), 2u);
    EXPECT_EQ(count_calls(gm->graph(), "aten::t"), 2u);
    expect_same_as_eager(eager, gm, {at::randn({1, 10})}, params_of(model));
  }
}

}  // namespace
}  // namespace fx
