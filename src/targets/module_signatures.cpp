// The forward signatures of modules: torch::nn layers by their Python
// forward's parameter names (what torch.fx normalize_module reads with
// inspect.signature), and the ones registered with register_module_signature.
#include "targets/module_signatures.h"

#include <c10/util/Type.h>
#include <torch/nn/module.h>

#include <mutex>
#include <shared_mutex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

namespace fx {
namespace {

using SignatureFn = std::function<std::optional<std::vector<ForwardParameter>>(const torch::nn::Module&)>;

struct SignatureTable {
  std::shared_mutex mutex;
  std::unordered_map<std::type_index, SignatureFn> fns;
};

SignatureTable& table() {
  static SignatureTable t;
  return t;
}

/// Parses "input, hx=None, need_weights=True" (defaults None / True only).
std::vector<ForwardParameter> parse_parameters(const std::string& spec) {
  std::vector<ForwardParameter> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(", ", pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    ForwardParameter p;
    const size_t eq = item.find('=');
    p.name = item.substr(0, eq);
    if (eq != std::string::npos) {
      const std::string value = item.substr(eq + 1);
      p.default_value = value == "True" ? Argument(true) : Argument();
    }
    out.push_back(std::move(p));
    pos = end + 2;
  }
  return out;
}

/// torch.nn layers whose Python forward is not just `forward(self, input)`.
const std::unordered_map<std::string, std::string>& special_forwards() {
  static const std::unordered_map<std::string, std::string> table = {
      {"Bilinear", "input1, input2"},
      {"ConvTranspose1d", "input, output_size=None"},
      {"ConvTranspose2d", "input, output_size=None"},
      {"ConvTranspose3d", "input, output_size=None"},
      {"EmbeddingBag", "input, offsets=None, per_sample_weights=None"},
      {"MaxUnpool1d", "input, indices, output_size=None"},
      {"MaxUnpool2d", "input, indices, output_size=None"},
      {"MaxUnpool3d", "input, indices, output_size=None"},
      {"CosineSimilarity", "x1, x2"},
      {"PairwiseDistance", "x1, x2"},
      {"RNN", "input, hx=None"},
      {"LSTM", "input, hx=None"},
      {"GRU", "input, hx=None"},
      {"RNNCell", "input, hx=None"},
      {"LSTMCell", "input, hx=None"},
      {"GRUCell", "input, hx=None"},
      {"MultiheadAttention",
       "query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True"},
      {"TransformerEncoderLayer", "src, src_mask=None, src_key_padding_mask=None"},
      {"TransformerDecoderLayer",
       "tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None"},
      {"TransformerEncoder", "src, mask=None, src_key_padding_mask=None"},
      {"TransformerDecoder",
       "tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None"},
      {"Transformer",
       "src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None, "
       "tgt_key_padding_mask=None, memory_key_padding_mask=None"},
      {"L1Loss", "input, target"},
      {"MSELoss", "input, target"},
      {"SmoothL1Loss", "input, target"},
      {"HuberLoss", "input, target"},
      {"KLDivLoss", "input, target"},
      {"BCELoss", "input, target"},
      {"BCEWithLogitsLoss", "input, target"},
      {"NLLLoss", "input, target"},
      {"CrossEntropyLoss", "input, target"},
      {"SoftMarginLoss", "input, target"},
      {"HingeEmbeddingLoss", "input, target"},
      {"CosineEmbeddingLoss", "input1, input2, target"},
      {"MarginRankingLoss", "input1, input2, target"},
      {"MultiLabelMarginLoss", "input, target"},
      {"MultiLabelSoftMarginLoss", "input, target"},
      {"TripletMarginLoss", "anchor, positive, negative"},
      {"PoissonNLLLoss", "log_input, target"},
  };
  return table;
}

/// torch.nn layers with `forward(self, input)` that fxcpp can call (the
/// layers src/execution/module_forward.cpp registers).
bool takes_input(const std::string& cls) {
  static const std::unordered_set<std::string> names = {
      "Linear", "Identity", "Flatten", "Unflatten", "Conv1d", "Conv2d", "Conv3d", "Fold", "Unfold",
          "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
          "LayerNorm", "GroupNorm", "LocalResponseNorm", "CrossMapLRN2d", "Embedding", "ReLU", "ReLU6", "RReLU",
          "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "GLU", "SiLU", "Mish", "Sigmoid", "LogSigmoid",
          "Tanh", "Tanhshrink", "Hardtanh", "Hardshrink", "Softshrink", "Softplus", "Softsign", "Threshold",
          "Softmax", "Softmax2d", "Softmin", "LogSoftmax", "Dropout", "Dropout2d", "Dropout3d", "AlphaDropout",
          "FeatureAlphaDropout", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
          "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
          "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
          "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
          "ReplicationPad2d", "ReplicationPad3d", "Upsample", "PixelShuffle", "PixelUnshuffle", "Sequential"};
  return names.count(cls) != 0;
}

/// "torch::nn::LinearImpl" → "Linear"; "" for classes outside torch::nn.
std::string torch_nn_class(const torch::nn::Module& module) {
  const std::string full = c10::demangle(typeid(module).name());
  const std::string prefix = "torch::nn::", suffix = "Impl";
  if (full.rfind(prefix, 0) != 0 || full.size() <= prefix.size() + suffix.size() ||
      full.compare(full.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string cls = full.substr(prefix.size(), full.size() - prefix.size() - suffix.size());
  return cls.find("::") == std::string::npos ? cls : "";
}

}  // namespace

void register_module_signature(std::type_index type, SignatureFn fn) {
  auto& t = table();
  std::unique_lock<std::shared_mutex> lock(t.mutex);
  t.fns[type] = std::move(fn);
}

namespace detail {

std::optional<std::vector<ForwardParameter>> module_forward_signature(const torch::nn::Module& module) {
  {
    auto& t = table();
    std::shared_lock<std::shared_mutex> lock(t.mutex);
    auto it = t.fns.find(typeid(module));
    if (it != t.fns.end()) return it->second(module);
  }
  const std::string cls = torch_nn_class(module);
  if (cls.empty()) return std::nullopt;
  auto special = special_forwards().find(cls);
  if (special != special_forwards().end()) return parse_parameters(special->second);
  if (takes_input(cls)) return parse_parameters("input");
  return std::nullopt;
}

}  // namespace detail
}  // namespace fx
