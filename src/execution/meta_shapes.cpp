// C++ shape functions registered as Meta kernels for the ATen operators that
// libtorch 1.13's C++ build runs only on real data (Python registers most of
// them in torch/_meta_registrations.py, which C++ programs never load).
//
// Each computes the result's sizes, dtype and strides exactly as the CPU
// kernel lays them out (memory formats included: tests/passes/
// shape_prop_test.cpp compares every one against a real run), and reads no
// data: in ShapeProp's meta mode, leaf modules run on meta inputs with their
// real parameters, which these kernels only look at.
#include <fx/meta_kernels.h>

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <mutex>

namespace fx {

namespace {

using at::Tensor;

/// input.suggest_memory_format(), but only channels_last for 4-d inputs.
bool suggests_channels_last(const Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
}

std::vector<int64_t> expand_param(at::IntArrayRef p, size_t n, int64_t fill) {
  if (p.empty()) return std::vector<int64_t>(n, fill);
  if (p.size() == 1) return std::vector<int64_t>(n, p[0]);
  return p.vec();
}

/// aten::convolution: the output of every CPU backend (mkldnn, thnn, slow
/// dilated/transposed, 1-d convolutions viewed as 2-d).
Tensor convolution_meta(const Tensor& input, const Tensor& weight, const c10::optional<Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                        at::IntArrayRef output_padding, int64_t groups) {
  (void)bias;
  const int64_t dim = input.dim();
  TORCH_CHECK(dim >= 3 && weight.dim() == dim, "convolution: expected input and weight of the same rank (3-d to 5-d), got ",
              input.sizes(), " and ", weight.sizes());
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  const size_t k = static_cast<size_t>(dim - 2);
  const auto s = expand_param(stride, k, 1);
  const auto p = expand_param(padding, k, 0);
  const auto d = expand_param(dilation, k, 1);
  const auto op = expand_param(output_padding, k, 0);
  std::vector<int64_t> shape{input.size(0)};
  if (transposed) {
    TORCH_CHECK(input.size(1) == weight.size(0), "Given transposed=1, weight of size ", weight.sizes(),
                ", expected input", input.sizes(), " to have ", weight.size(0), " channels, but got ", input.size(1),
                " channels instead");
    shape.push_back(weight.size(1) * groups);
  } else {
    TORCH_CHECK(input.size(1) == weight.size(1) * groups, "Given groups=", groups, ", weight of size ",
                weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(1) * groups,
                " channels, but got ", input.size(1), " channels instead");
    shape.push_back(weight.size(0));
  }
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = input.size(static_cast<int64_t>(i) + 2), kw = weight.size(static_cast<int64_t>(i) + 2);
    const int64_t out = transposed ? (in - 1) * s[i] - 2 * p[i] + d[i] * (kw - 1) + op[i] + 1
                                   : (in + 2 * p[i] - d[i] * (kw - 1) - 1) / s[i] + 1;
    TORCH_CHECK(out > 0, "convolution: output size is too small (", out, ") for input ", input.sizes(),
                " and weight ", weight.sizes());
    shape.push_back(out);
  }
  // CPU backends (mkldnn, thnn, slow dilated; float and double alike) give a
  // channels_last result for 2-d convolutions whose input or weight suggests
  // it; transposed and 1-d/3-d convolutions are contiguous (checked against
  // every backend by ShapePropMeta.ConvolutionMatchesCpu).
  const bool channels_last =
      !transposed && dim == 4 && (suggests_channels_last(input) || suggests_channels_last(weight));
  return at::empty(shape, input.options().memory_format(channels_last ? at::MemoryFormat::ChannelsLast
                                                                      : at::MemoryFormat::Contiguous));
}

/// aten::native_batch_norm (also what layer_norm, group_norm and
/// instance_norm reach on meta tensors): output laid out as the input
/// suggests; save_mean / save_invstd are [C] when training, [0] otherwise.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_meta(const Tensor& input, const c10::optional<Tensor>& weight,
                                                          const c10::optional<Tensor>& bias,
                                                          const c10::optional<Tensor>& running_mean,
                                                          const c10::optional<Tensor>& running_var, bool training,
                                                          double momentum, double eps) {
  (void)weight, (void)bias, (void)momentum, (void)eps;
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected at least 2-d input, got ", input.sizes());
  const int64_t c = input.size(1);
  auto check = [&](const c10::optional<Tensor>& t, const char* what) {
    if (t && t->defined())
      TORCH_CHECK(t->numel() == c, "batch_norm: ", what, " should contain ", c, " elements not ", t->numel());
  };
  check(weight, "weight");
  check(bias, "bias");
  check(running_mean, "running_mean");
  check(running_var, "running_var");
  Tensor out = at::empty_like(input, input.suggest_memory_format());
  const bool stats = training || !(running_mean && running_mean->defined());
  const auto opts = input.options();
  return {out, at::empty({stats ? c : 0}, opts), at::empty({stats ? c : 0}, opts)};
}

/// aten::relu: clamp_min(self, 0) on the CPU, a structured op with a Meta kernel.
Tensor relu_meta(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min(self, 0);
}

std::vector<int64_t> pooled_shape(const Tensor& self, at::IntArrayRef output_size, int64_t spatial) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == spatial, "adaptive_avg_pool", spatial,
              "d: output_size must be ", spatial, "-d");
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, "adaptive_avg_pool", spatial, "d(): Expected ",
              spatial + 1, "D or ", spatial + 2, "D tensor, but got ", self.sizes());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - spatial);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  return shape;
}

/// aten::_adaptive_avg_pool2d: laid out as the input suggests (4-d).
Tensor adaptive_avg_pool2d_meta(const Tensor& self, c10::SymIntArrayRef output_size) {
  auto shape = pooled_shape(self, c10::asIntArrayRefSlow(output_size), 2);
  return at::empty(shape, self.options().memory_format(self.dim() == 4 ? self.suggest_memory_format()
                                                                       : at::MemoryFormat::Contiguous));
}

/// aten::_adaptive_avg_pool3d: contiguous.
Tensor adaptive_avg_pool3d_meta(const Tensor& self, at::IntArrayRef output_size) {
  return at::empty(pooled_shape(self, output_size, 3), self.options());
}

/// aten::hardtanh (relu6): CPU allocates empty_like(self).
Tensor hardtanh_meta(const Tensor& self, const at::Scalar& min_val, const at::Scalar& max_val) {
  (void)min_val, (void)max_val;
  return at::empty_like(self);
}

/// aten::hardswish: a unary TensorIterator op.
Tensor hardswish_meta(const Tensor& self) {
  Tensor result;
  auto iter = at::TensorIterator::unary_op(result, self);
  return iter.output();
}

/// aten::index_select (embedding): contiguous, index.numel() along dim.
Tensor index_select_meta(const Tensor& self, int64_t dim, const Tensor& index) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[c10::maybe_wrap_dim(dim, self.dim())] = index.numel();
  return at::empty(shape, self.options());
}

/// aten::channel_shuffle (shufflenet): laid out as the input suggests.
Tensor channel_shuffle_meta(const Tensor& self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0 && self.size(1) % groups == 0, "Number of channels must be divisible by groups. Got ",
              self.size(1), " channels and ", groups, " groups.");
  return at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
}

// ---- backward operators (what make_fx records on meta values) --------------

/// aten::convolution_backward: grad_input and grad_weight channels_last when
/// the forward's output is (a 2-d convolution whose input or weight suggests
/// it), else contiguous; grad_bias [C_out];
/// undefined where output_mask is false, as the CPU kernels return.
std::tuple<Tensor, Tensor, Tensor> convolution_backward_meta(const Tensor& grad_output, const Tensor& input,
                                                             const Tensor& weight, at::OptionalIntArrayRef bias_sizes,
                                                             at::IntArrayRef stride, at::IntArrayRef padding,
                                                             at::IntArrayRef dilation, bool transposed,
                                                             at::IntArrayRef output_padding, int64_t groups,
                                                             std::array<bool, 3> output_mask) {
  (void)stride, (void)padding, (void)dilation, (void)output_padding, (void)groups;
  TORCH_CHECK(grad_output.dim() == input.dim(), "convolution_backward: grad_output ", grad_output.sizes(),
              " and input ", input.sizes(), " differ in rank");
  // Both gradients in the layout the forward's output has (convolution_meta's
  // rule): the CPU backends compute them in it.
  const bool channels_last =
      !transposed && input.dim() == 4 && (suggests_channels_last(input) || suggests_channels_last(weight));
  const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  Tensor gi, gw, gb;
  if (output_mask[0]) gi = at::empty(input.sizes(), input.options().memory_format(format));
  if (output_mask[1]) gw = at::empty(weight.sizes(), weight.options().memory_format(format));
  if (output_mask[2]) {
    const int64_t c = bias_sizes && !bias_sizes->empty() ? (*bias_sizes)[0] : grad_output.size(1);
    gb = at::empty({c}, grad_output.options());
  }
  return {gi, gw, gb};
}

/// aten::native_batch_norm_backward: grad_input laid out as the input
/// suggests, grad_weight and grad_bias [C]; undefined where masked out.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward_meta(
    const Tensor& grad_out, const Tensor& input, const c10::optional<Tensor>& weight,
    const c10::optional<Tensor>& running_mean, const c10::optional<Tensor>& running_var,
    const c10::optional<Tensor>& save_mean, const c10::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  (void)weight, (void)running_mean, (void)running_var, (void)save_mean, (void)save_invstd, (void)train, (void)eps;
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "batch_norm_backward: grad_out ", grad_out.sizes(), " and input ",
              input.sizes(), " differ");
  const int64_t c = input.size(1);
  Tensor gi, gw, gb;
  if (output_mask[0]) gi = at::empty_like(input, input.suggest_memory_format());
  if (output_mask[1]) gw = at::empty({c}, input.options());
  if (output_mask[2]) gb = at::empty({c}, input.options());
  return {gi, gw, gb};
}

/// aten::_adaptive_avg_pool2d_backward: the input's shape, laid out as it suggests.
Tensor adaptive_avg_pool2d_backward_meta(const Tensor& grad_output, const Tensor& self) {
  (void)grad_output;
  return at::empty_like(self, self.suggest_memory_format());
}

/// aten::hardswish_backward (and hardtanh_backward's tensors): a binary TensorIterator op.
Tensor hardswish_backward_meta(const Tensor& grad_output, const Tensor& self) {
  Tensor result;
  auto iter = at::TensorIterator::borrowing_binary_op(result, grad_output, self);
  return iter.output();
}

/// aten::hardtanh_backward: as hardswish_backward (the bounds do not shape the result).
Tensor hardtanh_backward_meta(const Tensor& grad_output, const Tensor& self, const at::Scalar& min_val,
                              const at::Scalar& max_val) {
  (void)min_val, (void)max_val;
  return hardswish_backward_meta(grad_output, self);
}

/// Registers `fn` for aten::<name> on the Meta key unless a Meta kernel exists.
template <class Fn>
void add(torch::Library& lib, std::vector<std::string>& done, const char* name, const char* overload, Fn fn) {
  auto op = c10::Dispatcher::singleton().findSchema({std::string("aten::") + name, overload});
  if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::Meta)) return;
  try {
    lib.impl(name, torch::CppFunction::makeFromUnboxedFunction(fn));
  } catch (const c10::Error&) {
    return;  // another libtorch's schema (SymInt[] vs int[]): that operator keeps falling back
  }
  done.push_back(std::string("aten::") + name + (overload[0] ? std::string(".") + overload : std::string()));
}

}  // namespace

const std::vector<std::string>& register_meta_shape_functions() {
  static const std::vector<std::string> registered = [] {
    std::vector<std::string> done;
    // Lives as long as the process: the kernels may be called at any time
    // (a static, so that LeakSanitizer sees it reachable, not leaked).
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    add(*lib, done, "convolution", "", TORCH_FN(convolution_meta));
    add(*lib, done, "native_batch_norm", "", TORCH_FN(native_batch_norm_meta));
    add(*lib, done, "relu", "", TORCH_FN(relu_meta));
    add(*lib, done, "_adaptive_avg_pool2d", "", TORCH_FN(adaptive_avg_pool2d_meta));
    add(*lib, done, "_adaptive_avg_pool3d", "", TORCH_FN(adaptive_avg_pool3d_meta));
    add(*lib, done, "hardtanh", "", TORCH_FN(hardtanh_meta));
    add(*lib, done, "hardswish", "", TORCH_FN(hardswish_meta));
    add(*lib, done, "index_select", "", TORCH_FN(index_select_meta));
    add(*lib, done, "channel_shuffle", "", TORCH_FN(channel_shuffle_meta));
    add(*lib, done, "convolution_backward", "", TORCH_FN(convolution_backward_meta));
    add(*lib, done, "native_batch_norm_backward", "", TORCH_FN(native_batch_norm_backward_meta));
    add(*lib, done, "_adaptive_avg_pool2d_backward", "", TORCH_FN(adaptive_avg_pool2d_backward_meta));
    add(*lib, done, "hardtanh_backward", "", TORCH_FN(hardtanh_backward_meta));
    add(*lib, done, "hardswish_backward", "", TORCH_FN(hardswish_backward_meta));
    return done;
  }();
  return registered;
}

}  // namespace fx
