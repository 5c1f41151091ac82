// Weight gradients of small convolutions as one matrix product.
//
// aten::convolution_backward computes a 2-d convolution's weight gradient
// with oneDNN's backward-weights kernel. Where the output has few positions
// per image (resnet's last stage: 512 channels on 2x2 at 64x64 inputs) that
// kernel is several times slower than the forward convolution of the same
// FLOPs (measured on Zen 4, 1 thread: 8.1 ms against 1.3 ms for the product
// below). The gradient is one GEMM:
//     cols = im2col(x)                         [N, C*kh*kw, L]
//     dW   = dY[Co, N*L] @ cols[C*kh*kw, N*L]^T  viewed as [Co, C, kh, kw]
// with L = Ho*Wo small, so cols is small too (rows ordered (kh, kw, C) for
// a channels-last weight, whose gradient then comes out channels-last). This pass rewrites such
// nodes: their weight gradient comes from aten::im2col, aten::permute,
// aten::reshape and aten::mm, and aten::convolution_backward keeps the
// input and bias gradients (or goes, when nothing else was asked of it).
#include <fx/aot.h>
#include <fx/tensor_meta.h>

#include <vector>

namespace fx {
namespace {

const TensorMetadata* meta_of(const Argument& a) {
  if (!a.is_node()) return nullptr;
  auto it = a.to_node()->meta().find("tensor_meta");
  return it == a.to_node()->meta().end() ? nullptr : std::any_cast<TensorMetadata>(&it->second);
}

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

std::vector<int64_t> int_items(const Argument& a) {
  std::vector<int64_t> out;
  if (!a.is_sequence()) return out;
  for (const Argument& i : a.items()) {
    if (i.kind() != Argument::Kind::Int) return {};
    out.push_back(i.to_int());
  }
  return out;
}

}  // namespace

size_t conv_weight_grad_as_matmul(Graph& g, int64_t max_positions) {
  if (max_positions <= 0) return 0;
  std::vector<Node*> candidates;
  for (Node* n : g.nodes())
    if (n->op() == Opcode::CallFunction && n->target() == "aten::convolution_backward" && n->args().size() == 11)
      candidates.push_back(n);
  size_t rewritten = 0;
  for (Node* cb : candidates) {
    const ArgList& a = cb->args();
    const TensorMetadata* go = meta_of(a[0]);
    const TensorMetadata* w = meta_of(a[2]);
    const std::vector<int64_t> stride = int_items(a[4]), padding = int_items(a[5]), dilation = int_items(a[6]);
    if (go == nullptr || w == nullptr || go->shape.size() != 4 || w->shape.size() != 4 || !a[1].is_node()) continue;
    if (a[7].kind() != Argument::Kind::Bool || a[7].to_bool()) continue;                     // transposed
    if (a[9].kind() != Argument::Kind::Int || a[9].to_int() != 1) continue;                  // groups
    if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2 || !a[10].is_sequence() ||
        a[10].items().size() != 3)
      continue;
    std::vector<bool> mask;
    for (const Argument& m : a[10].items()) mask.push_back(m.kind() == Argument::Kind::Bool && m.to_bool());
    if (!mask[1] || (go->dtype != c10::ScalarType::Float && go->dtype != c10::ScalarType::Double)) continue;
    const int64_t n = go->shape[0], co = go->shape[1], positions = go->shape[2] * go->shape[3];
    if (positions > max_positions) continue;
    const int64_t c = w->shape[1], kh = w->shape[2], kw = w->shape[3], ckk = c * kh * kw;
    // The gradient in the weight's own layout (AccumulateGrad copies one that is not).
    const bool channels_last = kh * kw > 1 && w->memory_format == c10::MemoryFormat::ChannelsLast;
    std::vector<std::vector<Node*>> outs = elements(cb, 3);
    if (outs[1].empty()) continue;

    Node* grad_weight;
    {
      auto guard = g.inserting_before(cb);
      Node* cols = g.call_function("aten::im2col", {a[1], ints({kh, kw}), a[6], a[5], a[4]});
      // cols' rows are (c, i, j); a channels-last weight is stored (i, j, c).
      Node* cols_t = channels_last
                         ? g.call_function("aten::permute", {Argument(g.call_function(
                                                                 "aten::view", {Argument(cols), ints({n, c, kh * kw, positions})})),
                                                             ints({2, 1, 0, 3})})
                         : g.call_function("aten::permute", {Argument(cols), ints({1, 0, 2})});
      Node* cols_m = g.call_function("aten::reshape", {Argument(cols_t), ints({ckk, n * positions})});
      Node* go_t = g.call_function("aten::permute", {a[0], ints({1, 0, 2, 3})});
      Node* go_m = g.call_function("aten::reshape", {Argument(go_t), ints({co, n * positions})});
      Node* cols_mt = g.call_function("aten::t", {Argument(cols_m)});
      Node* mm = g.call_function("aten::mm", {Argument(go_m), Argument(cols_mt)});
      grad_weight = channels_last ? g.call_function("aten::permute", {Argument(g.call_function(
                                                                          "aten::view", {Argument(mm), ints({co, kh, kw, c})})),
                                                                      ints({0, 3, 1, 2})})
                                  : g.call_function("aten::view", {Argument(mm), ints(w->shape)});
    }
    auto it = outs[1][0]->meta().find("tensor_meta");
    if (it != outs[1][0]->meta().end()) grad_weight->meta()["tensor_meta"] = it->second;
    for (Node* e : outs[1]) {
      e->replace_all_uses_with(grad_weight);
      g.erase_node(e);
    }
    if (mask[0] || mask[2]) {
      cb->update_arg(10, Argument::list({Argument(mask[0]), Argument(false), Argument(mask[2])}));
    } else {
      for (size_t i : {size_t{0}, size_t{2}})
        for (Node* u : outs[i])
          if (u->users().empty()) g.erase_node(u);
      if (cb->users().empty()) g.erase_node(cb);
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace fx
