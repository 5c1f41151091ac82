// lower_to_onednn: conv2d / linear (+ residual sum + activation) → packed oneDNN ops; max_pool2d and
// adaptive_avg_pool2d → oneDNN pooling; softmax and layer_norm → oneDNN's.
#include <fx/optimize/lower_to_onednn.h>

#include <fx/graph.h>
#include <fx/onednn.h>
#include <fx/tensor_meta.h>

#include "optimize/buffer_reuse.h"
#include "optimize/keep_layouts.h"
#include "optimize/layer_folding.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx {
namespace {

using passes_detail::is_get_attr;
using passes_detail::NodeOrder;
using passes_detail::aten_op_name;

/// Linear layers of fewer floating-point operations than this are not
/// timed: they take oneDNN's kernel. Both kernels run them in a few
/// microseconds, where a measurement is mostly the timer and the caches, so
/// two optimisations of one model chose differently (a pipeline's stages
/// and the whole model optimised then computed different bits: AMD EPYC
/// Zen 3, a [2, 16] -> 10 head), for a difference of microseconds.
constexpr double kTimedLinearFlops = double(1 << 18);

/// 2 * rows * in * out of a linear layer with input `input_sizes`.
double linear_flops(const std::vector<int64_t>& input_sizes, const at::Tensor& w) {
  double rows = 1;
  for (size_t i = 0; i + 1 < input_sizes.size(); ++i) rows *= static_cast<double>(input_sizes[i]);
  return 2 * rows * static_cast<double>(w.size(0)) * static_cast<double>(w.size(1));
}

/// onednn::time_linear's answer for this layer's shape, measured once per
/// process for each input shape, weight size, bias, post-ops and thread
/// count: every later optimisation in the process (the stages of a
/// pipeline, then the whole model for its check) makes the same choice
/// and so computes the same bits.
onednn::LinearTiming linear_timing(const at::Tensor& w, const c10::optional<at::Tensor>& b,
                                   const onednn::PostOps& post, const std::vector<int64_t>& input_sizes) {
  onednn::PostOps computed = post;
  computed.residual_inplace = false;  // where the sum is written does not change the timing's question
  std::ostringstream key;
  key << c10::IntArrayRef(input_sizes) << w.sizes() << b.has_value() << computed.str() << " threads "
      << at::get_num_threads();
  static std::mutex mutex;
  static std::unordered_map<std::string, onednn::LinearTiming> timings;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = timings.find(key.str());
    if (found != timings.end()) return found->second;
  }
  const onednn::LinearTiming t = onednn::time_linear(w, b, post, input_sizes);  // not under the lock: ~40 ms
  std::lock_guard<std::mutex> lock(mutex);
  return timings.emplace(key.str(), t).first->second;  // a concurrent first measurement wins
}

class Lowering {
 public:
  Lowering(GraphModule& gm, c10::ScalarType dtype, bool winograd, LinearKernel linear, OneDnnLowering& counts)
      : gm_(gm), dtype_(dtype), winograd_(winograd), linear_(linear), counts_(counts), order_(gm.graph()) {
    // Below AVX-512 (and for float32 kernels only) the faster linear kernel depends on the shape.
    if (linear_ == LinearKernel::Auto && (onednn::has_avx512_core() || dtype_ != at::kFloat))
      linear_ = LinearKernel::OneDnn;
    // On more than one thread a BLAS with threads of its own competes with
    // OpenMP's (onednn::blas_has_own_threads): its timings say little, and
    // in a model each switch between the pools costs the cores' time.
    if (linear_ == LinearKernel::Auto && at::get_num_threads() > 1 && onednn::blas_has_own_threads()) {
      linear_ = LinearKernel::OneDnn;
      counts_.linear_note = "linears on oneDNN untimed: " + std::to_string(at::get_num_threads()) +
                            " threads, and the BLAS's own would compete with OpenMP's";
    }
  }

  /// Whether lower() erased `n` (fused into an earlier node).
  bool erased(const Node* n) const { return erased_.count(n) > 0; }

  /// Lowers `n` if it is a conv2d / linear of constants or a batched
  /// matmul of two activations; true if it did.
  bool lower(Node* n) {
    const std::string name = aten_op_name(n);
    if (name == "matmul" || name == "bmm") return lower_matmul(n);
    const bool conv = name == "conv2d";
    if (!conv && name != "linear") return false;
    const ArgList& a = n->args();
    if (a.size() < 2 || !a[0].is_node() || !is_get_attr(a[1]) || !n->kwargs().empty()) return false;
    if (a.size() > 2 && !a[2].is_none() && !is_get_attr(a[2])) return false;
    at::Tensor w = gm_.fetch_attr(a[1].to_node()->target());
    c10::optional<at::Tensor> b;
    if (a.size() > 2 && !a[2].is_none()) b = gm_.fetch_attr(a[2].to_node()->target());
    if (w.scalar_type() != at::kFloat || w.dim() != (conv ? 4 : 2)) return false;
    onednn::ConvParams params;
    params.winograd = winograd_;
    if (conv) {
      if (a.size() > 4 && a[4].kind() == Argument::Kind::String) return false;  // padding="same"
      // stride, padding, dilation: an int or [v] stands for {v, v}, as ATen's conv2d reads it.
      std::vector<int64_t>* lists[] = {&params.stride, &params.padding, &params.dilation};
      for (size_t i = 3; i < std::min<size_t>(a.size(), 6); ++i) {
        std::optional<std::vector<int64_t>> v = a[i].to_int_list(2);
        if (!v) return false;
        *lists[i - 3] = std::move(*v);
      }
      if (a.size() > 6) params.groups = a[6].to_int();
    }

    // What follows: a residual sum, then an activation.
    onednn::PostOps post;
    std::vector<Node*> chain{n};
    Node* residual = residual_of(n);
    if (residual) {
      post.sum = true;
      chain.push_back(*n->users().begin());
    }
    if (Node* act = activation_after(chain.back(), post)) chain.push_back(act);
    Node* last = chain.back();
    if (residual) post.residual_inplace = order_.may_overwrite(residual, chain[1]);
    if (!conv && aten_runs_linear(n, w, b, post)) {
      counts_.aten_linears++;
      return false;  // aten::linear and what follows it stay
    }

    c10::IValue packed = conv ? onednn::pack_conv2d(w, b, params, post, dtype_) : onednn::pack_linear(w, b, post, dtype_);
    ArgList args{a[0], Argument::from_ivalue(packed)};
    if (residual) args.push_back(residual);
    replace(last, conv ? "fxcpp::onednn_conv2d" : "fxcpp::onednn_linear", std::move(args));
    for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) erase(*it);
    (conv ? counts_.convs : counts_.linears)++;
    counts_.fused_post_ops += chain.size() - 1;
    return true;
  }

 private:
  /// Whether ATen's kernel runs the linear layer `n` (LinearKernel; Auto
  /// times the two kernels once per process for each shape, weight size,
  /// post-ops and thread count: linear_timing()).
  bool aten_runs_linear(const Node* n, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                        const onednn::PostOps& post) {
    if (linear_ != LinearKernel::Auto) return linear_ == LinearKernel::Aten;
    const TensorMetadata* m = tensor_meta_of(n->args()[0].to_node());
    if (!m || m->dtype != at::kFloat || m->shape.empty()) return false;
    if (linear_flops(m->shape, w) < kTimedLinearFlops) return false;
    LinearChoice c;
    c.node = n->name();
    c.input_sizes = m->shape;
    c.out_features = w.size(0);
    c.timing = linear_timing(w, b, post, m->shape);
    c.aten = c.timing.aten_ms * 1.05 < c.timing.onednn_ms;
    counts_.linear_choices.push_back(c);
    return c.aten;
  }

  /// matmul(a, b) of two float activations of one rank (3 or 4) with equal
  /// batch sizes (known from tensor_meta) → fxcpp::onednn_matmul.
  bool lower_matmul(Node* n) {
    const ArgList& a = n->args();
    if (a.size() != 2 || !n->kwargs().empty() || !a[0].is_node() || !a[1].is_node()) return false;
    const TensorMetadata* ma = tensor_meta_of(a[0].to_node());
    const TensorMetadata* mb = tensor_meta_of(a[1].to_node());
    if (!ma || !mb || ma->dtype != at::kFloat || mb->dtype != at::kFloat) return false;
    const size_t r = ma->shape.size();
    if (r < 3 || r > 4 || mb->shape.size() != r) return false;
    if (!std::equal(ma->shape.begin(), ma->shape.end() - 2, mb->shape.begin())) return false;
    Node* t = transpose_after(n, static_cast<int64_t>(r));
    if (!t) {
      replace(n, "fxcpp::onednn_matmul", {a[0], a[1]});
    } else {
      Node* lowered = replace(t, "fxcpp::onednn_matmul", {a[0], a[1], true});
      // The transposed result is now contiguous: so says its metadata.
      if (const TensorMetadata* m = tensor_meta_of(lowered))
        lowered->meta()["tensor_meta"] = TensorMetadata::from_tensor(
            at::empty(m->shape, at::TensorOptions().dtype(m->dtype).device(at::kMeta)), m->requires_grad);
      erase(n);
    }
    counts_.matmuls++;
    return true;
  }

  /// The transpose(-3, -2) that is the only user of the rank-`rank` matmul
  /// `n`, when everything that reads it is a flatten / reshape, whose values
  /// do not depend on strides (attention's (p @ v).transpose(1, 2).flatten(2)):
  /// onednn_matmul then writes the transposed result contiguous, and the
  /// flatten that copied it is a view. Else nullptr.
  Node* transpose_after(Node* n, int64_t rank) {
    if (n->users().size() != 1) return nullptr;
    Node* t = *n->users().begin();
    const ArgList& a = t->args();
    if (aten_op_name(t) != "transpose" || a.size() != 3 || !t->kwargs().empty() || !a[0].is_node() ||
        a[0].to_node() != n || a[1].kind() != Argument::Kind::Int || a[2].kind() != Argument::Kind::Int ||
        t->users().empty())
      return nullptr;
    auto dim = [rank](int64_t d) { return d < 0 ? d + rank : d; };
    const int64_t d0 = dim(a[1].to_int()), d1 = dim(a[2].to_int());
    if (std::min(d0, d1) != rank - 3 || std::max(d0, d1) != rank - 2) return nullptr;
    for (const Node* u : t->users()) {
      const std::string name = aten_op_name(u);
      if (name != "flatten" && name != "reshape") return nullptr;
      if (u->args().empty() || !u->args()[0].is_node() || u->args()[0].to_node() != t) return nullptr;
      for (size_t i = 1; i < u->args().size(); ++i)
        if (u->args()[i].is_node() && u->args()[i].to_node() == t) return nullptr;
    }
    return t;
  }

 public:
  /// Pooling, softmax and layer norm → their fxcpp:: operators (each hands
  /// inputs oneDNN cannot take back to ATen); true if `n` was one. Run
  /// after lower() has seen every node: the residual sums decided their
  /// in-place use with the ATen ops, known to make fresh tensors.
  bool lower_op(Node* n) {
    const std::string name = aten_op_name(n);
    if (name == "max_pool2d") return lower_max_pool(n);
    if (name == "adaptive_avg_pool2d") return lower_adaptive_avg_pool(n);
    if (name == "softmax") return lower_softmax(n);
    if (name == "layer_norm") return lower_layer_norm(n);
    return false;
  }

 private:
  /// max_pool2d(x, kernel, stride, padding, dilation 1, ceil_mode False)
  /// with literal parameters → fxcpp::max_pool2d.
  bool lower_max_pool(Node* n) {
    const ArgList& a = n->args();
    if (a.size() < 2 || a.size() > 6 || !a[0].is_node() || !n->kwargs().empty()) return false;
    // kernel, stride, padding, dilation (defaults: [] = the kernel's, 0, 1); an int or [v] is {v, v}.
    std::vector<int64_t> ints[4] = {{}, {}, {0, 0}, {1, 1}};
    for (size_t i = 1; i < std::min<size_t>(a.size(), 5); ++i) {
      std::optional<std::vector<int64_t>> v = a[i].to_int_list(2);
      if (!v) return false;
      ints[i - 1] = std::move(*v);
    }
    if (ints[3] != std::vector<int64_t>{1, 1}) return false;
    if (a.size() > 5 && !(a[5].kind() == Argument::Kind::Bool && !a[5].to_bool())) return false;
    ArgList args{a[0], passes_detail::int_list_argument(ints[0]), passes_detail::int_list_argument(ints[1]),
                 passes_detail::int_list_argument(ints[2])};
    replace(n, "fxcpp::max_pool2d", std::move(args));
    return true;
  }

  /// adaptive_avg_pool2d(x, output_size) with a literal output size →
  /// fxcpp::adaptive_avg_pool2d (oneDNN's average pooling when the output
  /// size divides the input's, ATen's otherwise).
  bool lower_adaptive_avg_pool(Node* n) {
    const ArgList& a = n->args();
    if (a.size() != 2 || !a[0].is_node() || !n->kwargs().empty()) return false;
    const std::optional<std::vector<int64_t>> size = a[1].to_int_list(2);  // an int or [v] is {v, v}
    if (!size) return false;
    replace(n, "fxcpp::adaptive_avg_pool2d", {a[0], passes_detail::int_list_argument(*size)});
    return true;
  }

  /// softmax(x, dim[, None]) with a literal dim → fxcpp::softmax (oneDNN's
  /// over a contiguous float tensor's last dim, ATen's otherwise).
  bool lower_softmax(Node* n) {
    const ArgList& a = n->args();
    if (a.size() < 2 || a.size() > 3 || !a[0].is_node() || !n->kwargs().empty() ||
        a[1].kind() != Argument::Kind::Int || (a.size() == 3 && !a[2].is_none()))
      return false;
    replace(n, "fxcpp::softmax", {a[0], a[1]});
    return true;
  }

  /// layer_norm(x, normalized_shape, weight, bias, eps[, cudnn_enable]) with
  /// a literal shape and eps → fxcpp::layer_norm (oneDNN's over a contiguous
  /// float tensor's last dim, ATen's otherwise).
  bool lower_layer_norm(Node* n) {
    const ArgList& a = n->args();
    if (a.size() < 2 || a.size() > 6 || !a[0].is_node() || !n->kwargs().empty() || !a[1].to_int_list()) return false;
    ArgList args{a[0], a[1], a.size() > 2 ? a[2] : Argument(), a.size() > 3 ? a[3] : Argument()};
    if (a.size() > 4) {
      if (a[4].kind() == Argument::Kind::Double) args.push_back(a[4]);
      else if (a[4].kind() == Argument::Kind::Int) args.push_back(static_cast<double>(a[4].to_int()));  // float eps
      else return false;
    }
    replace(n, "fxcpp::layer_norm", std::move(args));
    return true;
  }

  /// Replaces `n` by a call of `target` with `args`, which computes the
  /// same, and erases `n`; returns the call (with n's meta).
  Node* replace(Node* n, const std::string& target, ArgList args) {
    Node* lowered = nullptr;
    {
      InsertPoint at = gm_.graph().inserting_before(n);
      lowered = gm_.graph().call_function(target, std::move(args));
    }
    lowered->meta() = n->meta();
    order_.place(lowered, n);
    n->replace_all_uses_with(lowered);
    erase(n);
    return lowered;
  }

  /// Erases `n` (unused by now), remembering it for erased().
  void erase(Node* n) {
    erased_.insert(n);
    gm_.graph().erase_node(n);
  }

  /// The other operand of add(n, r) / add(r, n) / add_ when n's only user is
  /// that add, alpha is 1 and both have the same known shape; else nullptr.
  Node* residual_of(Node* n) {
    if (n->users().size() != 1) return nullptr;
    Node* u = *n->users().begin();
    const std::string name = aten_op_name(u);
    if (name != "add" && name != "add_") return nullptr;
    const ArgList& a = u->args();
    if (a.size() < 2 || a.size() > 3 || !a[0].is_node() || !a[1].is_node()) return nullptr;
    if (a.size() == 3 && !(a[2].kind() == Argument::Kind::Int && a[2].to_int() == 1)) return nullptr;
    for (const auto& [k, v] : u->kwargs())
      if (k != "alpha" || v.kind() != Argument::Kind::Int || v.to_int() != 1) return nullptr;
    Node* r = a[0].to_node() == n ? a[1].to_node() : a[0].to_node();
    if (r == n) return nullptr;
    // add_(r, n) writes into r: only when nothing reads r afterwards.
    if (name == "add_" && a[0].to_node() == r && !order_.dead_after(r, u)) return nullptr;
    const TensorMetadata* mn = tensor_meta_of(n);
    const TensorMetadata* mr = tensor_meta_of(r);
    if (!mn || !mr || mn->shape != mr->shape || mr->dtype != at::kFloat) return nullptr;
    return r;
  }

  /// The activation applied to n (its only user) that oneDNN can fuse, recorded in `post`.
  Node* activation_after(Node* n, onednn::PostOps& post) {
    if (n->users().size() != 1) return nullptr;
    Node* u = *n->users().begin();
    std::string name = aten_op_name(u);
    if (name.empty() || u->args().empty() || !u->args()[0].is_node() || u->args()[0].to_node() != n) return nullptr;
    if (name.back() == '_') name.pop_back();
    std::vector<double> scalars;
    for (size_t i = 1; i < u->args().size(); ++i) {
      const Argument& s = u->args()[i];
      if (s.kind() != Argument::Kind::Int && s.kind() != Argument::Kind::Double) return nullptr;
      scalars.push_back(s.to_double());
    }
    std::string approximate = "none";
    for (const auto& [k, v] : u->kwargs()) {
      if (k != "approximate" || v.kind() != Argument::Kind::String) return nullptr;
      approximate = v.to_string();
    }
    if (name != "hardtanh" && !scalars.empty()) return nullptr;
    return onednn::activation_from_aten(name, scalars, approximate, post) ? u : nullptr;
  }

  GraphModule& gm_;
  c10::ScalarType dtype_;
  bool winograd_;
  LinearKernel linear_;
  OneDnnLowering& counts_;
  NodeOrder order_;
  std::unordered_set<const Node*> erased_;
};

/// A packed oneDNN kernel (conv / linear): those take bf16 from each other.
bool is_packed(const Node* n) {
  return n->op() == Opcode::CallFunction &&
         (n->target() == "fxcpp::onednn_conv2d" || n->target() == "fxcpp::onednn_linear");
}

/// bf16 kernels hand bf16 only to other oneDNN kernels; every other
/// consumer (ATen ops, the output) gets float32, as the graph had.
void keep_float_at_boundaries(Graph& g) {
  for (Node* n : g.nodes()) {
    if (!is_packed(n)) continue;
    bool all_packed = true;
    for (Node* u : n->users()) all_packed &= is_packed(u);
    if (!all_packed) onednn::set_output_dtype(n->args()[1].to_constant(), c10::ScalarType::Float);
  }
}

}  // namespace

std::string linear_kernel_name(LinearKernel k) {
  switch (k) {
    case LinearKernel::Auto: return "auto";
    case LinearKernel::OneDnn: return "onednn";
    case LinearKernel::Aten: return "aten";
  }
  return "auto";
}

LinearKernel linear_kernel_from_name(const std::string& name) {
  for (LinearKernel k : {LinearKernel::Auto, LinearKernel::OneDnn, LinearKernel::Aten})
    if (linear_kernel_name(k) == name) return k;
  throw Error("linear kernel '" + name + "': expected auto, onednn or aten");
}

PassResult lower_to_onednn(std::shared_ptr<GraphModule> gm, c10::ScalarType dtype, OneDnnLowering* counts,
                           bool winograd, LinearKernel linear) {
  if (!gm) throw PassError("lower_to_onednn: no module given");
  if (dtype != c10::ScalarType::Float && dtype != c10::ScalarType::BFloat16)
    throw PassError(std::string("lower_to_onednn: dtype must be torch.float32 or torch.bfloat16, not ") +
                    c10::toString(dtype));
  onednn::register_ops();
  Graph& g = gm->graph();
  g.lint();
  OneDnnLowering local;
  OneDnnLowering& done = counts ? *counts : local;
  // bf16 asked for where oneDNN has no bf16 kernels (AVX2): float32 kernels,
  // made now rather than failing in the first forward.
  if (dtype == c10::ScalarType::BFloat16 && !onednn::has_bf16_kernels()) dtype = c10::ScalarType::Float;
  done.dtype = dtype;
  Lowering lowering(*gm, dtype, winograd, linear, done);
  std::vector<Node*> order = g.nodes().to_vector();
  bool modified = false;
  for (Node* n : order) {
    if (lowering.erased(n)) continue;
    modified |= lowering.lower(n);
  }
  for (Node* n : g.nodes().to_vector()) modified |= lowering.lower_op(n);
  // Values leaving the channels_last convolutions' regions get the layout
  // the unoptimised program gave them (before the bf16 boundaries: a copy
  // is a float consumer).
  if (modified) done.restored_layouts += passes_detail::keep_layouts(g);
  if (modified && dtype == c10::ScalarType::BFloat16) keep_float_at_boundaries(g);
  if (modified) {
    g.eliminate_dead_code();
    g.lint();
  }
  return PassResult{gm, modified};
}

}  // namespace fx
