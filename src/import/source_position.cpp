// Source positions of TorchScript nodes, from the debug info of a .pt file.
#include "import/source_position.h"

#include <torch/csrc/jit/ir/ir.h>

#include <sstream>

namespace fx::import_detail {
namespace {

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The Python source range a node came from: a loaded .pt's nodes point into
// its serialized code (code/__torch__/...py); its debug info maps that back
// to the original file.
torch::jit::SourceRange original_range(const torch::jit::Node* node) {
  const torch::jit::SourceRange& range = node->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated()) return *original;
  return range;
}

}  // namespace

std::string source_position(const torch::jit::Node* node) {
  auto flc = original_range(node).file_line_col();
  if (!flc) return "";
  std::ostringstream os;
  os << std::get<0>(*flc) << ":" << std::get<1>(*flc) << ":" << std::get<2>(*flc);
  return os.str();
}

std::string source_line(const torch::jit::Node* node) {
  const torch::jit::SourceRange range = original_range(node);
  const auto& source = range.source();
  if (!source || source->size() == 0 || range.start() >= source->size()) return "";
  size_t lineno = source->lineno_for_offset(range.start());
  return trim(source->get_line(lineno).str());
}

namespace {

// The closest node of the same block that has a source position (TorchScript
// records none for some nodes it makes itself, such as prim::SetAttr of
// `self.calls += 1`): the previous ones first, then the next ones.
const torch::jit::Node* nearest_positioned(const torch::jit::Node* node) {
  constexpr int kMaxSteps = 8;
  const torch::jit::Node* p = node;
  for (int i = 0; i < kMaxSteps && p->kind() != torch::jit::prim::Param; ++i) {
    p = p->prev();
    if (!p || p->kind() == torch::jit::prim::Param) break;
    if (!source_position(p).empty()) return p;
  }
  p = node;
  for (int i = 0; i < kMaxSteps; ++i) {
    p = p->next();
    if (!p || p->kind() == torch::jit::prim::Return) break;
    if (!source_position(p).empty()) return p;
  }
  return nullptr;
}

}  // namespace

std::string describe_node(const torch::jit::Node* node) {
  std::ostringstream os;
  os << node->kind().toQualString();
  const torch::jit::Node* positioned = node;
  std::string pos = source_position(node);
  if (pos.empty()) {
    if (const torch::jit::Node* near = nearest_positioned(node)) {
      positioned = near;
      pos = source_position(near);
      os << " near " << pos;
    } else {
      os << " at <no source position in the file>";
    }
  } else {
    os << " at " << pos;
  }
  std::string line = source_line(positioned);
  if (!line.empty()) os << ": `" << line << "`";
  return os.str();
}

std::string stack_trace_entry(const torch::jit::Node* node, const std::string& function_name) {
  auto flc = original_range(node).file_line_col();
  if (!flc) return "";
  std::ostringstream os;
  os << "File \"" << std::get<0>(*flc) << "\", line " << std::get<1>(*flc) << ", in " << function_name;
  std::string line = source_line(node);
  if (!line.empty()) os << "\n    " << line;
  return os.str();
}

}  // namespace fx::import_detail
