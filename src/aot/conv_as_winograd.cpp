// conv_as_winograd: a training step's 3x3 convolutions on Winograd kernels.
//
// Winograd's F(4x4, 3x3) needs 2.25x fewer multiplications than the direct
// convolution, and oneDNN has it for training (forward, input gradient,
// weight gradient) on AVX-512 (fx/onednn.h: has_winograd_conv2d,
// fxcpp::winograd_conv2d, fxcpp::winograd_conv2d_backward). ATen never
// picks it: its oneDNN convolutions ask for the direct algorithm. A 4x4
// output tile only pays where there are enough tiles to fill the blocked
// kernels: measured on an AMD EPYC Zen 5 (1 thread, forward and both
// gradients, with the reorders from and to the graph's layout) against
// ATen: 64 channels on 16x16 maps 0.64x at batch 32, 0.69x at batch 2; 128
// channels on 8x8 0.66x at batch 32, 0.80x at batch 8, 0.92x at batch 4; 256
// on 4x4 0.56x at batch 32, 1.02x at batch 16, 1.21x at batch 8; 512 on
// 2x2 far slower than conv_as_matmul's products; and with fewer channels
// than one AVX-512 block, most of the kernel's work is padding: 3 -> 64
// channels on 16x16 maps at batch 8 1.68x, 8 -> 32 1.34x. Hence the rule:
// at least `min_positions` output positions over the batch (N*Ho*Wo), maps
// of at least 4x4, at least 16 input and 16 output channels.
//
// Each rewritten node computes what it replaces in the same layouts, to
// the rounding of another algorithm (~2e-6 of the largest value).
#include <fx/aot.h>
#include <fx/onednn.h>
#include <fx/tensor_meta.h>

#include <optional>
#include <vector>

namespace fx {
namespace {

bool ints_equal(const Argument& a, const std::vector<int64_t>& want) {
  const std::optional<std::vector<int64_t>> v = a.to_int_list(want.size());
  return v && *v == want;
}

/// The padding of a convolution conv_as_winograd takes (nullopt when it
/// does not fit): its arguments from x (index `first`) in
/// aten::convolution's order (x, w, bias, stride, padding, dilation,
/// transposed, output_padding, groups), `out` its output's metadata (or
/// the output gradient's), which must have x's layout when `out_in_x_layout`
/// (fxcpp::winograd_conv2d writes its output in its input's layout; the
/// backward reads a gradient in any layout).
std::optional<std::vector<int64_t>> winograd_padding(const ArgList& a, size_t first, const TensorMetadata* out,
                                                     int64_t min_positions, bool out_in_x_layout) {
  if (!a[first].is_node() || !a[first + 1].is_node() || out == nullptr) return std::nullopt;
  const TensorMetadata* x = tensor_meta_of(a[first].to_node());
  const TensorMetadata* w = tensor_meta_of(a[first + 1].to_node());
  if (x == nullptr || w == nullptr || x->shape.size() != 4 || w->shape.size() != 4 || out->shape.size() != 4)
    return std::nullopt;
  if (x->dtype != c10::ScalarType::Float || w->dtype != c10::ScalarType::Float) return std::nullopt;
  if (!x->memory_format || (out_in_x_layout && out->memory_format != x->memory_format)) return std::nullopt;
  const Argument &transposed = a[first + 6], &groups = a[first + 8];
  if (transposed.kind() != Argument::Kind::Bool || transposed.to_bool()) return std::nullopt;
  if (groups.kind() != Argument::Kind::Int || groups.to_int() != 1) return std::nullopt;
  if (!ints_equal(a[first + 3], {1, 1}) || !ints_equal(a[first + 5], {1, 1})) return std::nullopt;
  const std::optional<std::vector<int64_t>> padding = a[first + 4].to_int_list(2);
  if (!padding || padding->size() != 2) return std::nullopt;
  const int64_t ho = out->shape[2], wo = out->shape[3];
  if (ho < 4 || wo < 4 || out->shape[0] * ho * wo < min_positions) return std::nullopt;
  if (x->shape[1] < 16 || w->shape[0] < 16) return std::nullopt;  // less than one AVX-512 block of channels
  if (!onednn::has_winograd_conv2d(x->shape, w->shape, *padding)) return std::nullopt;
  return padding;
}

Argument int_list(const std::vector<int64_t>& v) { return Argument::list({Argument(v[0]), Argument(v[1])}); }

/// Replaces `old` by a call of `target` with `args` (same meta, same users) and erases it.
void replace(Graph& g, Node* old, const char* target, ArgList args) {
  Node* n;
  {
    auto guard = g.inserting_before(old);
    n = g.call_function(target, std::move(args));
  }
  n->meta() = old->meta();
  old->replace_all_uses_with(n);
  g.erase_node(old);
}

}  // namespace

size_t conv_as_winograd(Graph& g, int64_t min_positions, bool forward) {
  if (min_positions <= 0 || !onednn::has_winograd_kernels()) return 0;
  onednn::register_ops();
  std::vector<std::pair<Node*, std::vector<int64_t>>> forwards, backwards;
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::CallFunction || !n->kwargs().empty()) continue;
    const ArgList& a = n->args();
    if (n->target() == "aten::convolution" && a.size() == 9 && a[2].is_none()) {
      if (!forward) continue;
      if (auto padding = winograd_padding(a, 0, tensor_meta_of(n), min_positions, true))
        forwards.emplace_back(n, *padding);
    } else if (n->target() == "aten::convolution_backward" && a.size() == 11 && a[0].is_node()) {
      // output_mask [input, weight, bias]: no bias gradient.
      if (!a[10].is_sequence() || a[10].items().size() != 3 || a[10].items()[2].kind() != Argument::Kind::Bool ||
          a[10].items()[2].to_bool())
        continue;
      // The gradients come back in the input's and the weight's layouts, as the graph has them.
      bool layouts_fit = true;
      for (Node* u : n->users()) {
        const TensorMetadata* m = tensor_meta_of(u);
        const int64_t i =
            u->args().size() == 2 && u->args()[1].kind() == Argument::Kind::Int ? u->args()[1].to_int() : -1;
        const Argument& like = i == 0 ? a[1] : a[2];
        const TensorMetadata* lm = like.is_node() ? tensor_meta_of(like.to_node()) : nullptr;
        if (u->target() != "operator.getitem" || (i != 0 && i != 1) || m == nullptr || lm == nullptr ||
            !m->memory_format || m->memory_format != lm->memory_format)
          layouts_fit = false;
      }
      if (!layouts_fit) continue;
      if (auto padding = winograd_padding(a, 1, tensor_meta_of(a[0].to_node()), min_positions, false))
        backwards.emplace_back(n, *padding);
    }
  }
  for (auto& [n, padding] : forwards)
    replace(g, n, "fxcpp::winograd_conv2d", {n->args()[0], n->args()[1], int_list(padding)});
  for (auto& [n, padding] : backwards) {
    const ArgList& a = n->args();
    const auto& m = a[10].items();
    replace(g, n, "fxcpp::winograd_conv2d_backward",
            {a[0], a[1], a[2], int_list(padding), Argument::list({m[0], m[1]})});
  }
  return forwards.size() + backwards.size();
}

}  // namespace fx
