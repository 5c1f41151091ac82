// The registry of module forwards, with every common torch::nn layer known.
#include <fx/graph_module.h>

#include <torch/nn/functional.h>
#include <torch/nn/modules.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace fx {

namespace {

struct ForwardTable {
  std::shared_mutex mutex;
  std::unordered_map<std::type_index, const ModuleForward*> forwards;
  // Replaced forwards stay alive: compiled plans may still point at them.
  std::vector<std::unique_ptr<ModuleForward>> storage;
};

ForwardTable& table() {
  static ForwardTable t;
  return t;
}

void set_forward(std::type_index type, ModuleForward fn) {
  auto& t = table();
  std::unique_lock<std::shared_mutex> lock(t.mutex);
  t.storage.push_back(std::make_unique<ModuleForward>(std::move(fn)));
  t.forwards[type] = t.storage.back().get();
}

/// Sequential: each child's registered forward, in order, on the previous result.
c10::IValue sequential_forward(torch::nn::Module& m, std::vector<c10::IValue>& args) {
  std::vector<c10::IValue> current = std::move(args);
  for (const auto& child : m.children()) {
    const ModuleForward* f = find_module_forward(*child);
    if (!f) throw std::runtime_error("Sequential: no forward registered for child module " + child->name());
    c10::IValue out = (*f)(*child, current);
    current.clear();
    current.push_back(std::move(out));
  }
  if (current.size() != 1) throw std::runtime_error("Sequential: expected exactly one input, got " + std::to_string(current.size()));
  return std::move(current[0]);
}

c10::IValue functional_forward(torch::nn::Module& m, std::vector<c10::IValue>& args) {
  if (args.size() != 1 || !args[0].isTensor()) throw std::runtime_error("Functional: expected one Tensor argument");
  return dynamic_cast<torch::nn::FunctionalImpl&>(m).forward(args[0].toTensor());
}

c10::IValue graph_module_forward(torch::nn::Module& m, std::vector<c10::IValue>& args) {
  return dynamic_cast<GraphModule&>(m).forward(std::move(args));
}

template <class M>
void add_layer() {
  set_forward(typeid(M), make_module_forward<M>());
}

void register_builtin_forwards() {
  using namespace torch::nn;
  // Linear layers and shape helpers.
  add_layer<LinearImpl>();
  add_layer<BilinearImpl>();
  add_layer<IdentityImpl>();
  add_layer<FlattenImpl>();
  add_layer<UnflattenImpl>();
  // Convolutions.
  add_layer<Conv1dImpl>();
  add_layer<Conv2dImpl>();
  add_layer<Conv3dImpl>();
  add_layer<ConvTranspose1dImpl>();
  add_layer<ConvTranspose2dImpl>();
  add_layer<ConvTranspose3dImpl>();
  add_layer<FoldImpl>();
  add_layer<UnfoldImpl>();
  // Normalization.
  add_layer<BatchNorm1dImpl>();
  add_layer<BatchNorm2dImpl>();
  add_layer<BatchNorm3dImpl>();
  add_layer<InstanceNorm1dImpl>();
  add_layer<InstanceNorm2dImpl>();
  add_layer<InstanceNorm3dImpl>();
  add_layer<LayerNormImpl>();
  add_layer<GroupNormImpl>();
  add_layer<LocalResponseNormImpl>();
  add_layer<CrossMapLRN2dImpl>();
  // Embeddings.
  add_layer<EmbeddingImpl>();
  add_layer<EmbeddingBagImpl>();
  // Activations.
  add_layer<ReLUImpl>();
  add_layer<ReLU6Impl>();
  add_layer<RReLUImpl>();
  add_layer<LeakyReLUImpl>();
  add_layer<PReLUImpl>();
  add_layer<ELUImpl>();
  add_layer<SELUImpl>();
  add_layer<CELUImpl>();
  add_layer<GELUImpl>();
  add_layer<GLUImpl>();
  add_layer<SiLUImpl>();
  add_layer<MishImpl>();
  add_layer<SigmoidImpl>();
  add_layer<LogSigmoidImpl>();
  add_layer<TanhImpl>();
  add_layer<TanhshrinkImpl>();
  add_layer<HardtanhImpl>();
  add_layer<HardshrinkImpl>();
  add_layer<SoftshrinkImpl>();
  add_layer<SoftplusImpl>();
  add_layer<SoftsignImpl>();
  add_layer<ThresholdImpl>();
  add_layer<SoftmaxImpl>();
  add_layer<Softmax2dImpl>();
  add_layer<SoftminImpl>();
  add_layer<LogSoftmaxImpl>();
  // Dropout.
  add_layer<DropoutImpl>();
  add_layer<Dropout2dImpl>();
  add_layer<Dropout3dImpl>();
  add_layer<AlphaDropoutImpl>();
  add_layer<FeatureAlphaDropoutImpl>();
  // Pooling.
  add_layer<MaxPool1dImpl>();
  add_layer<MaxPool2dImpl>();
  add_layer<MaxPool3dImpl>();
  add_layer<AvgPool1dImpl>();
  add_layer<AvgPool2dImpl>();
  add_layer<AvgPool3dImpl>();
  add_layer<AdaptiveAvgPool1dImpl>();
  add_layer<AdaptiveAvgPool2dImpl>();
  add_layer<AdaptiveAvgPool3dImpl>();
  add_layer<AdaptiveMaxPool1dImpl>();
  add_layer<AdaptiveMaxPool2dImpl>();
  add_layer<AdaptiveMaxPool3dImpl>();
  add_layer<LPPool1dImpl>();
  add_layer<LPPool2dImpl>();
  add_layer<MaxUnpool1dImpl>();
  add_layer<MaxUnpool2dImpl>();
  add_layer<MaxUnpool3dImpl>();
  // Padding, resampling.
  add_layer<ZeroPad2dImpl>();
  add_layer<ConstantPad1dImpl>();
  add_layer<ConstantPad2dImpl>();
  add_layer<ConstantPad3dImpl>();
  add_layer<ReflectionPad1dImpl>();
  add_layer<ReflectionPad2dImpl>();
  add_layer<ReflectionPad3dImpl>();
  add_layer<ReplicationPad1dImpl>();
  add_layer<ReplicationPad2dImpl>();
  add_layer<ReplicationPad3dImpl>();
  add_layer<UpsampleImpl>();
  add_layer<PixelShuffleImpl>();
  add_layer<PixelUnshuffleImpl>();
  // Distances.
  add_layer<CosineSimilarityImpl>();
  add_layer<PairwiseDistanceImpl>();
  // Recurrent layers and attention.
  add_layer<RNNImpl>();
  add_layer<LSTMImpl>();
  add_layer<GRUImpl>();
  add_layer<RNNCellImpl>();
  add_layer<LSTMCellImpl>();
  add_layer<GRUCellImpl>();
  add_layer<MultiheadAttentionImpl>();
  add_layer<TransformerEncoderLayerImpl>();
  add_layer<TransformerDecoderLayerImpl>();
  add_layer<TransformerEncoderImpl>();
  add_layer<TransformerDecoderImpl>();
  add_layer<TransformerImpl>();
  // Losses.
  add_layer<L1LossImpl>();
  add_layer<MSELossImpl>();
  add_layer<SmoothL1LossImpl>();
  add_layer<HuberLossImpl>();
  add_layer<KLDivLossImpl>();
  add_layer<BCELossImpl>();
  add_layer<BCEWithLogitsLossImpl>();
  add_layer<NLLLossImpl>();
  add_layer<CrossEntropyLossImpl>();
  add_layer<SoftMarginLossImpl>();
  add_layer<HingeEmbeddingLossImpl>();
  add_layer<CosineEmbeddingLossImpl>();
  add_layer<MarginRankingLossImpl>();
  add_layer<MultiLabelMarginLossImpl>();
  add_layer<MultiLabelSoftMarginLossImpl>();
  add_layer<TripletMarginLossImpl>();
  add_layer<PoissonNLLLossImpl>();
  // Containers and fxcpp's own module.
  set_forward(typeid(SequentialImpl), sequential_forward);
  set_forward(typeid(FunctionalImpl), functional_forward);
  set_forward(typeid(GraphModule), graph_module_forward);
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, register_builtin_forwards);
}

}  // namespace

void register_module_forward(std::type_index type, ModuleForward fn) {
  if (!fn) throw std::invalid_argument("register_module_forward: empty function");
  ensure_builtins();
  set_forward(type, std::move(fn));
}

const ModuleForward* find_module_forward(const torch::nn::Module& module) {
  ensure_builtins();
  auto& t = table();
  std::shared_lock<std::shared_mutex> lock(t.mutex);
  auto it = t.forwards.find(std::type_index(typeid(module)));
  return it == t.forwards.end() ? nullptr : it->second;
}

}  // namespace fx
