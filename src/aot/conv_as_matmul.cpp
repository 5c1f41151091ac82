// Small convolutions of a training step as matrix products.
//
// A 2-d convolution is one GEMM over im2col's columns:
//     cols = im2col(x)                              [N, C*kh*kw, L]
//     y    = cols^T @ W^T                           [N*L, Co]
//     dW   = dY[Co, N*L] @ cols[C*kh*kw, N*L]^T     [Co, C*kh*kw]
//     dX   = col2im(dY[N*L, Co] @ W[Co, C*kh*kw])
// with L = Ho*Wo output positions per image. Where L is small (resnet's last
// stages on small images: 512 channels on 2x2 maps) cols is small too, and
// the products beat oneDNN's kernels, whose blocking wants large maps:
// measured on Zen 4, 1 thread, 512 channels, 3x3 on 2x2, batch 8: weight
// gradient 8.1 ms by aten::convolution_backward against 1.3 ms; the forward
// 3.0 ms (NHWC) / 1.8 ms (NCHW) against 1.4 / 1.5 ms; the input gradient
// 2.1 ms against 1.4 ms. At 16 positions only the weight gradient still
// gains, hence two thresholds.
//
// The rewrites keep every value's layout as the graph had it (the traced
// views after a convolution rely on its strides): a channels-last weight is
// read as [Co, kh*kw*C] (its storage order, no copy) with the columns
// permuted to match, and its gradient comes out channels-last. On
// channels-last activations with such a weight (or a 1x1 one) the columns
// come from fxcpp::im2col_nhwc and input gradients go back through
// fxcpp::col2im_nhwc (im2col_nhwc.cpp): no NCHW copy, no permuted copy.
#include <fx/aot.h>
#include <fx/tensor_meta.h>

#include <optional>
#include <vector>

namespace fx {
namespace {

const TensorMetadata* meta_of(const Argument& a) { return a.is_node() ? tensor_meta_of(a.to_node()) : nullptr; }

/// The getitem users of a tuple node by element.
std::vector<std::vector<Node*>> elements(Node* tuple, size_t n) {
  std::vector<std::vector<Node*>> out(n);
  for (Node* u : tuple->users())
    if (u->target() == "operator.getitem" && u->args().size() == 2 && u->args()[1].kind() == Argument::Kind::Int) {
      const int64_t i = u->args()[1].to_int();
      if (i >= 0 && static_cast<size_t>(i) < n) out[static_cast<size_t>(i)].push_back(u);
    }
  return out;
}

Argument ints(std::vector<int64_t> v) {
  std::vector<Argument> items(v.begin(), v.end());
  return Argument::list(std::move(items));
}

/// A plain 2-d convolution (groups 1, not transposed, float or double) as
/// aten::convolution (x, w, bias, stride, padding, dilation, transposed,
/// output_padding, groups) or aten::convolution_backward (grad_output, x, w,
/// bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
/// output_mask) names it.
struct Conv {
  Argument x, w, stride, padding, dilation;
  int64_t n = 0, c = 0, h = 0, wd = 0, co = 0, kh = 0, kw = 0, ho = 0, wo = 0;
  bool channels_last_weight = false;
  bool channels_last_input = false;

  int64_t positions() const { return ho * wo; }
  int64_t ckk() const { return c * kh * kw; }
  /// The weight matrix's columns are ordered (kh, kw, C), as
  /// fxcpp::im2col_nhwc's are (a channels-last or 1x1 weight).
  bool pixel_major_weight() const { return channels_last_weight || kh * kw == 1; }

  /// From the convolution's arguments starting at x (index `first`), the
  /// output's metadata giving Ho, Wo.
  static std::optional<Conv> of(const ArgList& a, size_t first, const TensorMetadata* out) {
    const TensorMetadata* xm = meta_of(a[first]);
    const TensorMetadata* wm = meta_of(a[first + 1]);
    if (xm == nullptr || wm == nullptr || out == nullptr || xm->shape.size() != 4 || wm->shape.size() != 4 ||
        out->shape.size() != 4)
      return std::nullopt;
    if (xm->dtype != c10::ScalarType::Float && xm->dtype != c10::ScalarType::Double) return std::nullopt;
    const Argument& transposed = a[first + 6];
    const Argument& groups = a[first + 8];
    if (transposed.kind() != Argument::Kind::Bool || transposed.to_bool()) return std::nullopt;
    if (groups.kind() != Argument::Kind::Int || groups.to_int() != 1) return std::nullopt;
    Conv cv;
    cv.x = a[first];
    cv.w = a[first + 1];
    cv.stride = a[first + 3];
    cv.padding = a[first + 4];
    cv.dilation = a[first + 5];
    for (const Argument* l : {&cv.stride, &cv.padding, &cv.dilation}) {
      const std::optional<std::vector<int64_t>> v = l->to_int_list();  // an int (size 1) is not taken
      if (!v || v->size() != 2) return std::nullopt;
    }
    cv.n = xm->shape[0];
    cv.c = xm->shape[1];
    cv.h = xm->shape[2];
    cv.wd = xm->shape[3];
    cv.co = wm->shape[0];
    cv.kh = wm->shape[2];
    cv.kw = wm->shape[3];
    cv.ho = out->shape[2];
    cv.wo = out->shape[3];
    cv.channels_last_weight = cv.kh * cv.kw > 1 && wm->memory_format == c10::MemoryFormat::ChannelsLast;
    cv.channels_last_input = xm->memory_format == c10::MemoryFormat::ChannelsLast;
    return cv;
  }

  /// im2col's columns as [N*L, C*kh*kw] (rows ordered as the weight is stored).
  Node* columns_by_position(Graph& g) const {
    if (channels_last_input && pixel_major_weight())  // no NCHW copy, no permuted copy
      return g.call_function("fxcpp::im2col_nhwc", {x, ints({kh, kw}), dilation, padding, stride});
    Node* cols = g.call_function("aten::im2col", {x, ints({kh, kw}), dilation, padding, stride});
    Node* by_position =
        channels_last_weight
            ? g.call_function("aten::permute", {Argument(g.call_function("aten::view", {Argument(cols),
                                                                                         ints({n, c, kh * kw, positions()})})),
                                                ints({0, 3, 2, 1})})
            : g.call_function("aten::transpose.int", {Argument(cols), 1, 2});
    return g.call_function("aten::reshape", {Argument(by_position), ints({n * positions(), ckk()})});
  }

  /// aten::col2im of products [N*L, C*kh*kw] (columns in the weight's
  /// storage order): an NCHW image.
  Node* image_of_columns(Graph& g, Node* mm) const {
    Node* cols =
        channels_last_weight
            ? g.call_function("aten::reshape",
                              {Argument(g.call_function(
                                   "aten::permute",
                                   {Argument(g.call_function("aten::view", {Argument(mm), ints({n, positions(), kh * kw, c})})),
                                    ints({0, 3, 2, 1})})),
                               ints({n, ckk(), positions()})})
            : g.call_function("aten::transpose.int",
                              {Argument(g.call_function("aten::view", {Argument(mm), ints({n, positions(), ckk()})})), 1, 2});
    return g.call_function("aten::col2im", {Argument(cols), ints({h, wd}), ints({kh, kw}), dilation, padding, stride});
  }

  /// The weight as [Co, C*kh*kw] in its storage order (a view).
  Node* weight_matrix(Graph& g) const {
    Node* w_stored = channels_last_weight ? g.call_function("aten::permute", {w, ints({0, 2, 3, 1})}) : nullptr;
    return g.call_function("aten::reshape", {w_stored ? Argument(w_stored) : w, ints({co, ckk()})});
  }
};

/// `v` in the layout `like` has (its memory_format): a clone when they differ.
Node* in_layout_of(Graph& g, Node* v, const TensorMetadata& like, c10::MemoryFormat v_format) {
  if (*like.memory_format == v_format) return v;
  return g.call_function("aten::clone", {Argument(v)}, {{"memory_format", Argument(*like.memory_format)}});
}

/// Replaces every getitem(tuple, i) by `value` and erases them.
void replace_element(Graph& g, std::vector<Node*>& getitems, Node* value) {
  auto it = getitems.front()->meta().find("tensor_meta");
  if (it != getitems.front()->meta().end()) value->meta()["tensor_meta"] = it->second;
  for (Node* e : getitems) {
    e->replace_all_uses_with(value);
    g.erase_node(e);
  }
  getitems.clear();
}

/// convolution_backward with `mask` (or nothing, erased with its getitems, when nothing is left).
void set_mask(Graph& g, Node* cb, const std::vector<bool>& mask, std::vector<std::vector<Node*>>& outs) {
  if (mask[0] || mask[1] || mask[2]) {
    cb->update_arg(10, Argument::list({Argument(mask[0]), Argument(mask[1]), Argument(mask[2])}));
    return;
  }
  for (auto& e : outs)
    for (Node* u : e)
      if (u->users().empty()) g.erase_node(u);
  if (cb->users().empty()) g.erase_node(cb);
}

struct Backward {
  Node* node;
  Conv conv;
  std::vector<bool> mask;
  std::vector<std::vector<Node*>> outs;
};

std::vector<Backward> convolution_backwards(Graph& g) {
  std::vector<Backward> out;
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::CallFunction || n->target() != "aten::convolution_backward" || n->args().size() != 11) continue;
    const ArgList& a = n->args();
    std::optional<Conv> cv = Conv::of(a, 1, meta_of(a[0]));
    if (!cv || !a[10].is_sequence() || a[10].items().size() != 3) continue;
    std::vector<bool> mask;
    for (const Argument& m : a[10].items()) mask.push_back(m.kind() == Argument::Kind::Bool && m.to_bool());
    out.push_back({n, *cv, mask, elements(n, 3)});
  }
  return out;
}

}  // namespace

size_t conv_weight_grad_as_matmul(Graph& g, int64_t max_positions) {
  if (max_positions <= 0) return 0;
  size_t rewritten = 0;
  for (Backward& b : convolution_backwards(g)) {
    const Conv& cv = b.conv;
    if (!b.mask[1] || b.outs[1].empty() || cv.positions() > max_positions) continue;
    Node* grad_weight;
    {
      auto guard = g.inserting_before(b.node);
      Node* cols = cv.columns_by_position(g);  // [N*L, Ckk]
      Node* go = g.call_function("aten::reshape", {Argument(g.call_function("aten::permute", {b.node->args()[0], ints({1, 0, 2, 3})})),
                                                   ints({cv.co, cv.n * cv.positions()})});
      Node* mm = g.call_function("aten::mm", {Argument(go), Argument(cols)});  // [Co, Ckk]
      grad_weight = cv.channels_last_weight
                        ? g.call_function("aten::permute", {Argument(g.call_function(
                                                                "aten::view", {Argument(mm), ints({cv.co, cv.kh, cv.kw, cv.c})})),
                                                            ints({0, 3, 1, 2})})
                        : g.call_function("aten::view", {Argument(mm), ints({cv.co, cv.c, cv.kh, cv.kw})});
    }
    replace_element(g, b.outs[1], grad_weight);
    b.mask[1] = false;
    set_mask(g, b.node, b.mask, b.outs);
    ++rewritten;
  }
  return rewritten;
}

size_t conv_as_matmul(Graph& g, int64_t max_positions, bool forward) {
  if (max_positions <= 0) return 0;
  size_t rewritten = 0;
  // Forward: y = cols @ W^T (+ bias), [N*L, Co] viewed as NHWC.
  std::vector<Node*> convolutions;
  for (Node* n : g.nodes())
    if (forward && n->op() == Opcode::CallFunction && n->target() == "aten::convolution" && n->args().size() == 9)
      convolutions.push_back(n);
  for (Node* conv : convolutions) {
    const TensorMetadata* out = meta_of(Argument(conv));
    std::optional<Conv> cv = Conv::of(conv->args(), 0, out);
    if (!cv || cv->positions() > max_positions || !out->memory_format) continue;
    Node* y;
    {
      auto guard = g.inserting_before(conv);
      Node* cols = cv->columns_by_position(g);
      Node* wt = g.call_function("aten::t", {Argument(cv->weight_matrix(g))});
      const Argument& bias = conv->args()[2];
      Node* mm = bias.is_none() ? g.call_function("aten::mm", {Argument(cols), Argument(wt)})
                                : g.call_function("aten::addmm", {bias, Argument(cols), Argument(wt)});
      Node* nhwc = g.call_function("aten::permute", {Argument(g.call_function("aten::view", {Argument(mm), ints({cv->n, cv->ho, cv->wo, cv->co})})),
                                                     ints({0, 3, 1, 2})});
      y = in_layout_of(g, nhwc, *out, c10::MemoryFormat::ChannelsLast);
    }
    y->meta()["tensor_meta"] = *out;
    conv->replace_all_uses_with(y);
    g.erase_node(conv);
    ++rewritten;
  }
  // Input gradients: dX = col2im(dY[N*L, Co] @ W).
  for (Backward& b : convolution_backwards(g)) {
    const Conv& cv = b.conv;
    if (!b.mask[0] || b.outs[0].empty() || cv.positions() > max_positions) continue;
    const TensorMetadata* gi_meta = meta_of(Argument(b.outs[0].front()));
    if (gi_meta == nullptr || !gi_meta->memory_format) continue;
    Node* grad_input;
    {
      auto guard = g.inserting_before(b.node);
      Node* go = g.call_function("aten::reshape", {Argument(g.call_function("aten::permute", {b.node->args()[0], ints({0, 2, 3, 1})})),
                                                   ints({cv.n * cv.positions(), cv.co})});
      Node* mm = g.call_function("aten::mm", {Argument(go), Argument(cv.weight_matrix(g))});  // [N*L, Ckk]
      if (cv.pixel_major_weight() && *gi_meta->memory_format == c10::MemoryFormat::ChannelsLast)
        grad_input = g.call_function("fxcpp::col2im_nhwc", {Argument(mm), ints({cv.h, cv.wd}), ints({cv.kh, cv.kw}),
                                                             cv.dilation, cv.padding, cv.stride});
      else
        grad_input = in_layout_of(g, cv.image_of_columns(g, mm), *gi_meta, c10::MemoryFormat::Contiguous);
    }
    replace_element(g, b.outs[0], grad_input);
    b.mask[0] = false;
    set_mask(g, b.node, b.mask, b.outs);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace fx
