// Targets TorchScript import registers while importing, registered again from
// their names alone: a file saved from an imported model names them, and
// the process loading it may never have imported anything.
//
// The run-time list and dict constructors of control flow are named after
// their type with every non-alphanumeric run made one '_'
// ("prim::ListConstruct.Tensor" holds Tensors, "prim::DictConstruct.Dict_str_Tensor"
// is a Dict[str, Tensor]); the type is read back from those words.
#include "torchscript/jit_targets.h"

#include <fx/target.h>

#include <torch/csrc/jit/frontend/script_type_parser.h>

#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fx::import_detail {

namespace {

constexpr const char* kListPrefix = "prim::ListConstruct.";
constexpr const char* kDictPrefix = "prim::DictConstruct.";
/// Longer type names are not tried (the candidates grow with every Tuple).
constexpr size_t kMaxTypeWords = 24;

/// Type annotations whose words, from `pos` on, start with one type: each
/// with the position after it.
std::vector<std::pair<std::string, size_t>> parse_type(const std::vector<std::string>& words, size_t pos);

/// Every way `words[pos...]` starts with a comma-separated run of types.
void parse_types(const std::vector<std::string>& words, size_t pos, const std::string& so_far,
                 std::vector<std::pair<std::string, size_t>>& out) {
  for (const auto& [type, next] : parse_type(words, pos)) {
    const std::string run = so_far.empty() ? type : so_far + ", " + type;
    out.emplace_back(run, next);
    parse_types(words, next, run, out);
  }
}

std::vector<std::pair<std::string, size_t>> parse_type(const std::vector<std::string>& words, size_t pos) {
  std::vector<std::pair<std::string, size_t>> out;
  if (pos >= words.size()) return out;
  const std::string& w = words[pos];
  if (w == "List" || w == "Optional") {
    for (const auto& [inner, next] : parse_type(words, pos + 1)) out.emplace_back(w + "[" + inner + "]", next);
  } else if (w == "Dict") {
    for (const auto& [key, after_key] : parse_type(words, pos + 1))
      for (const auto& [value, next] : parse_type(words, after_key))
        out.emplace_back("Dict[" + key + ", " + value + "]", next);
  } else if (w == "Tuple") {
    out.emplace_back("Tuple[()]", pos + 1);
    std::vector<std::pair<std::string, size_t>> runs;
    parse_types(words, pos + 1, "", runs);
    for (const auto& [run, next] : runs) out.emplace_back("Tuple[" + run + "]", next);
  } else {
    out.emplace_back(w, pos + 1);
  }
  return out;
}

/// The one type whose annotation reads as `words` (a type name of the
/// target), or nullptr when none or several do.
c10::TypePtr type_from_words(const std::string& name, bool list_element) {
  std::vector<std::string> words;
  std::string word;
  for (char c : name + "_") {
    if (c != '_') {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (words.empty() || words.size() > kMaxTypeWords) return nullptr;
  std::set<std::string> found;
  for (const auto& [annotation, next] : parse_type(words, 0)) {
    if (next != words.size()) continue;
    try {
      c10::TypePtr type = torch::jit::ScriptTypeParser().parseType(list_element ? "List[" + annotation + "]" : annotation);
      if (type) found.insert(type->annotation_str());
    } catch (...) {
      // not a type: another reading may be
    }
  }
  if (found.size() != 1) return nullptr;
  return torch::jit::ScriptTypeParser().parseType(*found.begin());
}

}  // namespace

c10::TypePtr construct_target_type(const std::string& target) {
  const bool list = target.rfind(kListPrefix, 0) == 0;
  if (!list && target.rfind(kDictPrefix, 0) != 0) return nullptr;
  c10::TypePtr type =
      type_from_words(target.substr(std::char_traits<char>::length(list ? kListPrefix : kDictPrefix)), list);
  if (type && (list ? type->kind() != c10::TypeKind::ListType : type->kind() != c10::TypeKind::DictType)) return nullptr;
  return type;
}

void register_construct_function(const std::string& target, const c10::TypePtr& type) {
  if (auto list = type->cast<c10::ListType>()) {
    c10::TypePtr element_type = list->getElementType();
    register_function(target, [element_type](std::vector<c10::IValue>& args, ValueKwargs&) -> c10::IValue {
      c10::impl::GenericList out(element_type);
      out.reserve(args.size());
      for (auto& a : args) out.push_back(std::move(a));
      return out;
    });
    return;
  }
  const auto& dict = type->expectRef<c10::DictType>();
  c10::TypePtr key_type = dict.getKeyType(), value_type = dict.getValueType();
  register_function(target, [key_type, value_type](std::vector<c10::IValue>& args, ValueKwargs&) -> c10::IValue {
    c10::impl::GenericDict out(key_type, value_type);
    for (size_t i = 0; i + 1 < args.size(); i += 2) out.insert_or_assign(std::move(args[i]), std::move(args[i + 1]));
    return out;
  });
}

bool register_import_target(const std::string& target) {
  const bool list = target.rfind(kListPrefix, 0) == 0;
  if (!list && target.rfind(kDictPrefix, 0) != 0) return register_jit_target(target);
  c10::TypePtr type = construct_target_type(target);
  if (!type) return false;
  register_construct_function(target, type);
  return true;
}

}  // namespace fx::import_detail
