// keep_last_logits (include/fx/decoders/passes.h): the language-model head
// of a decoder graph applied to the last position only.
//
// generate() reads the logits of the last position of each forward; a
// prompt's forward computes all T of them (the convention's [B, T, V]), and
// the head is the largest product of a step (TinyLlama: 32000 x 2048, 16% of
// a prompt's multiply-adds). Hugging Face's num_logits_to_keep and
// llama.cpp's prompt processing (logits of the last token only) skip the
// rest; so does this pass, by slicing the head's input to its last position
// (aten::slice(x, 1, -1)): the graph returns [B, 1, V] for any T, the logits
// generate() uses, to the bit (the head is row-wise). A graph for which all
// positions are wanted (teacher forcing, perplexity) keeps its head whole.
#include <fx/decoders/passes.h>

#include <fx/tensor_meta.h>

#include <cstdint>
#include <limits>

namespace fx::decoders {

namespace {

/// A projection computing each position from that position only: the head's kinds.
bool is_rowwise_projection(const Node* n) {
  if (n->op() == Opcode::CallModule) return true;
  if (n->op() != Opcode::CallFunction) return false;
  const std::string& t = n->target();
  return t == "aten::linear" || t == "fxcpp::linear_weight_only" || t == "fxcpp::onednn_linear" ||
         t == "fxcpp::onednn_qlinear" || t == "aten::matmul";
}

}  // namespace

size_t keep_last_logits(GraphModule& gm) {
  Graph& g = gm.graph();
  Node* out = g.output_node();
  if (!out || out->args().size() != 1 || !out->args()[0].is_node()) return 0;
  Node* head = out->args()[0].to_node();
  if (!is_rowwise_projection(head) || head->args().empty() || !head->args()[0].is_node()) return 0;
  Node* x = head->args()[0].to_node();
  const TensorMetadata* xm = tensor_meta_of(x);
  const TensorMetadata* hm = tensor_meta_of(head);
  if (!xm || !hm || xm->shape.size() != 3 || hm->shape.size() != 3) return 0;
  if (x->op() == Opcode::CallFunction && x->target() == "aten::slice.Tensor") return 0;  // done already
  Node* last;
  {
    auto guard = g.inserting_before(head);
    last = g.call_function("aten::slice.Tensor",
                           {Argument(x), Argument(int64_t{1}), Argument(int64_t{-1}),
                            Argument(std::numeric_limits<int64_t>::max()), Argument(int64_t{1})});
  }
  TensorMetadata lm = *xm, hmeta = *hm;
  lm.shape[1] = hmeta.shape[1] = 1;
  lm.stride.clear();
  hmeta.stride.clear();
  last->meta()["tensor_meta"] = lm;
  head->update_arg(0, Argument(last));
  head->meta()["tensor_meta"] = hmeta;
  g.lint();
  gm.recompile();
  return 1;
}

}  // namespace fx::decoders
