// Dropout keeps a mask for backward: libtorch's CPU dropout (and so the
// joint graph) draws `bernoulli_(empty_like(x), 1 - p)`, a float tensor of
// zeros and ones, scales it by `div(mask, 1 - p)` and multiplies x by it;
// the backward multiplies the gradient by the same scaled mask. functorch's
// min cut saves the float mask: 4 bytes for one bit of information. Here the
// scaling reads the mask through a bool copy instead,
//     to(view(to(mask, bool), uint8), float)
// which is the mask again to the bit (zeros and ones are exact in every
// dtype). The min cut weighs nodes by their bytes, so it saves the bool (a
// quarter of the bytes) and the backward rebuilds the float mask from it;
// for a transformer encoder layer the masks were a third of what the
// forward saved. The detour through uint8 is for speed: ATen converts float
// to bool and uint8 to float with vector instructions, bool to float
// element by element (6x slower), and `ne(mask, 0)` or a division of the
// bool itself are as slow.
#include "aot/bool_masks.h"

#include <fx/tensor_meta.h>

#include <c10/core/ScalarType.h>

#include <unordered_set>
#include <vector>

namespace fx::aot_impl {

size_t read_random_masks_as_bool(Graph& g) {
  static const std::unordered_set<std::string> draws = {"aten::bernoulli_.float", "aten::bernoulli.p"};
  static const std::unordered_set<std::string> scalings = {"aten::div.Scalar", "aten::mul.Scalar"};
  std::vector<Node*> masks;
  for (Node* n : g.nodes()) {
    const TensorMetadata* m = n->op() == Opcode::CallFunction && draws.count(n->target()) ? tensor_meta_of(n) : nullptr;
    if (m != nullptr && c10::isFloatingType(m->dtype)) masks.push_back(n);
  }
  size_t rewritten = 0;
  for (Node* mask : masks) {
    std::vector<Node*> users;
    for (Node* u : mask->users())
      if (scalings.count(u->target()) && u->args().size() == 2 && u->args()[0].is_node() &&
          u->args()[0].to_node() == mask)
        users.push_back(u);
    if (users.empty()) continue;
    const TensorMetadata& float_meta = *tensor_meta_of(mask);
    auto converted = [&](Node* from, const char* op, c10::ScalarType to) {
      Node* n = g.call_function(op, {Argument(from), Argument(to)});
      TensorMetadata m = float_meta;
      m.dtype = to;
      m.requires_grad = false;
      n->meta()["tensor_meta"] = m;
      return n;
    };
    Node* again;
    {
      auto guard = g.inserting_before(mask->next());  // in order (inserting_after(mask) would reverse them)
      Node* as_bool = converted(mask, "aten::to.dtype", c10::ScalarType::Bool);
      Node* as_bytes = converted(as_bool, "aten::view.dtype", c10::ScalarType::Byte);
      again = converted(as_bytes, "aten::to.dtype", float_meta.dtype);
    }
    for (Node* u : users) u->replace_input_with(mask, again);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace fx::aot_impl
