// The torch::nn C++ leaf layers of a traced graph, inlined as the ATen
// operator their forward calls with their options (what libtorch's
// torch/nn/functional code does), reading parameters from the TorchScript
// mirror of the module.
#include "serialize/export_internal.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace fx::export_detail {

namespace jit = torch::jit;

namespace {

/// Emits the operators of one leaf call.
struct LeafEmitter {
  jit::Graph& g;
  jit::Value* module;
  const std::vector<jit::Value*>& inputs;
  std::string& why;

  /// module.<name>, or None when the module has no such tensor (bias=false).
  jit::Value* tensor(const std::string& name) {
    auto cls = module->type()->expect<c10::ClassType>();
    if (!cls->hasAttribute(name)) return g.insertConstant(c10::IValue());
    return g.insertGetAttr(module, name);
  }

  jit::Value* input(size_t arity) {
    if (inputs.size() != arity) {
      why = "the leaf module takes " + std::to_string(arity) + " input(s), the node passes " +
            std::to_string(inputs.size());
      return nullptr;
    }
    return inputs[0];
  }

  template <class T>
  jit::Value* constant(const T& v) {
    return g.insertConstant(c10::IValue(v));
  }

  jit::Value* op(const std::string& name, const std::vector<jit::NamedValue>& args) {
    return insert_op(g, name, args, why);
  }

  jit::Value* linear(const torch::nn::LinearImpl&) {
    jit::Value* x = input(1);
    return x ? op("aten::linear", {x, tensor("weight"), tensor("bias")}) : nullptr;
  }

  template <size_t D, class M>
  jit::Value* conv(const M& m) {
    const auto& o = m.options;
    jit::Value* x = input(1);
    if (x == nullptr) return nullptr;
    if (!c10::get_if<torch::enumtype::kZeros>(&o.padding_mode())) {
      why = "Conv" + std::to_string(D) + "d with a padding_mode other than zeros is not exported";
      return nullptr;
    }
    jit::Value* padding = nullptr;
    if (c10::get_if<torch::enumtype::kValid>(&o.padding()))
      padding = constant(std::string("valid"));
    else if (c10::get_if<torch::enumtype::kSame>(&o.padding()))
      padding = constant(std::string("same"));
    else
      padding = constant(*c10::get<torch::ExpandingArray<D>>(o.padding()));
    return op("aten::conv" + std::to_string(D) + "d",
              {x, tensor("weight"), tensor("bias"), constant(*o.stride()), padding,
               constant(*o.dilation()), constant(o.groups())});
  }

  template <size_t D, class M>
  jit::Value* conv_transpose(const M& m) {
    const auto& o = m.options;
    if (inputs.size() != 1) {
      why = "ConvTranspose" + std::to_string(D) + "d with an output_size argument is not exported";
      return nullptr;
    }
    if (!c10::get_if<torch::enumtype::kZeros>(&o.padding_mode())) {
      why = "ConvTranspose" + std::to_string(D) + "d with a padding_mode other than zeros is not exported";
      return nullptr;
    }
    auto padding = *c10::get<torch::ExpandingArray<D>>(o.padding());
    return op("aten::conv_transpose" + std::to_string(D) + "d",
              {inputs[0], tensor("weight"), tensor("bias"), constant(*o.stride()), constant(padding),
               constant(*o.output_padding()), constant(o.groups()), constant(*o.dilation())});
  }

  template <class M>
  jit::Value* batch_norm(const M& m) {
    const auto& o = m.options;
    jit::Value* x = input(1);
    if (x == nullptr) return nullptr;
    double momentum = o.momentum().value_or(0.0);
    if (m.is_training() && o.track_running_stats() && m.num_batches_tracked.defined()) {
      if (!o.momentum()) {
        why = "a BatchNorm in training mode with momentum=None (a cumulative average) is not exported";
        return nullptr;
      }
      // BatchNormImplBase::forward counts the batches it has seen.
      if (op("aten::add_", {tensor("num_batches_tracked"), constant(int64_t{1})}) == nullptr) return nullptr;
    }
    return op("aten::batch_norm", {x, tensor("weight"), tensor("bias"), tensor("running_mean"), tensor("running_var"),
                                   constant(m.is_training() || !o.track_running_stats()), constant(momentum),
                                   constant(o.eps()), constant(true)});
  }

  jit::Value* layer_norm(const torch::nn::LayerNormImpl& m) {
    jit::Value* x = input(1);
    return x ? op("aten::layer_norm", {x, constant(m.options.normalized_shape()), tensor("weight"), tensor("bias"),
                                       constant(m.options.eps()), constant(true)})
             : nullptr;
  }

  jit::Value* group_norm(const torch::nn::GroupNormImpl& m) {
    jit::Value* x = input(1);
    return x ? op("aten::group_norm", {x, constant(m.options.num_groups()), tensor("weight"), tensor("bias"),
                                       constant(m.options.eps()), constant(true)})
             : nullptr;
  }

  jit::Value* embedding(const torch::nn::EmbeddingImpl& m) {
    const auto& o = m.options;
    jit::Value* x = input(1);
    if (x == nullptr) return nullptr;
    if (o.max_norm()) {
      why = "an Embedding with max_norm (which renormalizes its weight in place) is not exported";
      return nullptr;
    }
    return op("aten::embedding", {tensor("weight"), x, constant(o.padding_idx().value_or(-1)),
                                  constant(o.scale_grad_by_freq()), constant(o.sparse())});
  }
};

template <class M, class F>
bool try_leaf(const torch::nn::Module& module, F&& f, jit::Value*& out) {
  if (auto* m = dynamic_cast<const M*>(&module)) {
    out = f(*m);
    return true;
  }
  return false;
}

}  // namespace

jit::Value* emit_nn_leaf(const torch::nn::Module& module, jit::Graph& graph, jit::Value* module_value,
                         const std::vector<jit::Value*>& inputs, std::string& why) {
  namespace nn = torch::nn;
  LeafEmitter e{graph, module_value, inputs, why};
  jit::Value* out = nullptr;
  bool known = try_leaf<nn::LinearImpl>(module, [&](const auto& m) { return e.linear(m); }, out) ||
               try_leaf<nn::Conv1dImpl>(module, [&](const auto& m) { return e.conv<1>(m); }, out) ||
               try_leaf<nn::Conv2dImpl>(module, [&](const auto& m) { return e.conv<2>(m); }, out) ||
               try_leaf<nn::Conv3dImpl>(module, [&](const auto& m) { return e.conv<3>(m); }, out) ||
               try_leaf<nn::ConvTranspose1dImpl>(module, [&](const auto& m) { return e.conv_transpose<1>(m); }, out) ||
               try_leaf<nn::ConvTranspose2dImpl>(module, [&](const auto& m) { return e.conv_transpose<2>(m); }, out) ||
               try_leaf<nn::ConvTranspose3dImpl>(module, [&](const auto& m) { return e.conv_transpose<3>(m); }, out) ||
               try_leaf<nn::BatchNorm1dImpl>(module, [&](const auto& m) { return e.batch_norm(m); }, out) ||
               try_leaf<nn::BatchNorm2dImpl>(module, [&](const auto& m) { return e.batch_norm(m); }, out) ||
               try_leaf<nn::BatchNorm3dImpl>(module, [&](const auto& m) { return e.batch_norm(m); }, out) ||
               try_leaf<nn::LayerNormImpl>(module, [&](const auto& m) { return e.layer_norm(m); }, out) ||
               try_leaf<nn::GroupNormImpl>(module, [&](const auto& m) { return e.group_norm(m); }, out) ||
               try_leaf<nn::EmbeddingImpl>(module, [&](const auto& m) { return e.embedding(m); }, out);
  std::string type = module.name();  // "torch::nn::LSTMImpl"
  if (type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0) type.resize(type.size() - 4);
  if (!known)
    why = "the C++ module " + type +
          " has no TorchScript form (exported leaves: Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, "
          "BatchNorm1d/2d/3d, LayerNorm, GroupNorm, Embedding, TorchScript leaves, GraphModules)";
  return out;
}

}  // namespace fx::export_detail
