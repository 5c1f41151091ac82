// Asserts at import: an if whose one branch only raises, on a run-time
// condition, becomes torch._assert(cond, msg) as torch.fx records it (torch's
// own argument checks left out), and the text of a raised message.
#include "import/importer.h"

#include "import/source_position.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>

namespace fx::import_detail {

namespace jit = torch::jit;

namespace {

// Whether a source position is in torch's own Python code (.../torch/nn/functional.py ...).
bool is_torch_library_source(const std::string& position) {
  return position.find("/torch/") != std::string::npos;
}

}  // namespace

// `assert cond, msg` / torch._assert(cond, msg) on a run-time condition: an If
// whose one branch is empty and whose other branch only builds a message and
// raises. It becomes torch._assert(cond, msg), as torch.fx records it.
bool Importer::try_emit_assert(const jit::Node* n, Frame& f, const Val& cond) {
  if (!n->outputs().empty() || cond.kind != Val::Kind::Symbolic) return false;
  const jit::Block* raising = nullptr;
  bool raise_when_true = false;
  for (size_t b = 0; b < 2; ++b) {
    const jit::Block* block = n->blocks()[b];
    if (block->nodes().begin() == block->nodes().end()) continue;
    if (raising) return false;
    raising = block;
    raise_when_true = b == 0;
  }
  if (!raising) return false;
  const jit::Node* raise = nullptr;
  for (const jit::Node* m : raising->nodes()) {
    if (m->kind() == jit::prim::RaiseException) {
      raise = m;
    } else if (m->hasSideEffects() || !m->blocks().empty() || (m->maybeOperator() && m->schema().is_mutable())) {
      return false;
    }
  }
  if (!raise) return false;
  // Argument checks inside torch's own functions (F.adaptive_avg_pool2d's
  // _list_with_default ...) are not part of the model: torch.fx records the
  // function as one node, and the ATen operator checks its arguments itself.
  // TorchScript's builtin functions (_list_with_default, torch._assert) have
  // no file ("<string>") and are inlined into their callers when scripted:
  // then the function the check ended up in says whose check it is.
  std::string position = source_position(raise);
  const bool builtin = position.empty() || position.rfind("<string>", 0) == 0;
  const bool library = builtin ? f.qualified_name.rfind("__torch__.torch.", 0) == 0 : is_torch_library_source(position);
  if (!options_.keep_torch_checks && library) return true;
  std::string message = message_text(raise->input(0), f);
  Argument condition = cond.symbolic;
  if (raise_when_true) condition = Argument(emit("operator.not_", {condition}, {}, n, f));
  Node* node = emit("torch._assert", {condition, Argument(message)}, {}, n, f);
  (void)node;
  return true;
}

// The text of an exception message for errors and asserts: constants as they
// are, format strings with their placeholders, anything else as "...".
std::string Importer::message_text(const jit::Value* v, Frame& f, int depth) {
  auto it = f.env.find(v);
  if (it != f.env.end() && it->second.kind == Val::Kind::Constant && it->second.constant.isString())
    return it->second.constant.toStringRef();
  if (depth > 8) return "...";
  const jit::Node* p = v->node();
  const std::string kind = p->kind().toQualString();
  if (kind == "aten::add" && p->inputs().size() == 2)
    return message_text(p->input(0), f, depth + 1) + message_text(p->input(1), f, depth + 1);
  if (kind == "aten::format" && !p->inputs().empty()) return message_text(p->input(0), f, depth + 1);
  if (kind == "prim::Constant") {
    auto iv = jit::toIValue(v);
    if (iv && iv->isString()) return iv->toStringRef();
  }
  return "...";
}

}  // namespace fx::import_detail
