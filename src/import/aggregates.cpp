// Lists and dicts the importer knows now, changed in place.
//
// Python's lists and dicts are shared objects: `l = s.copy(); l[0] = 0` changes
// what every name of `l` sees. The importer keeps two kinds of them: constants
// (a c10::List / c10::Dict, every item known: the result of a folded
// `shift_size.copy()`) and import-time aggregates (Val::Kind::List / Dict, a
// shared vector of Vals, some items run-time nodes: `[x, y]`).
//  - A change whose arguments are all known is run now on the constant
//    itself (run_operator folds it: mutable_constant_args);
//  - a change that stores a run-time value into a constant first turns the
//    constant into an aggregate of constants (unfreeze), then
//  - changes of aggregates (append, extend, item assignment, insert, pop,
//    clear) are made on the shared vector (run_mutation).
// A change with a run-time index or key is left to run time, as a node; the
// list then has to be a run-time value too, which it is only in control flow
// (control_flow_import.cpp makes it one): elsewhere that is an ImportError.
#include "import/importer.h"

#include <unordered_set>

namespace fx::import_detail {

namespace jit = torch::jit;

namespace {

const std::unordered_set<std::string>& list_mutations() {
  static const std::unordered_set<std::string> names = {"aten::append", "aten::extend", "aten::_set_item",
                                                        "aten::insert", "aten::pop",    "aten::clear",
                                                        "aten::update"};
  return names;
}

}  // namespace

bool Importer::mutable_constant_args(const jit::Node* n, Frame& f) {
  const c10::FunctionSchema& schema = n->schema();
  for (size_t i = 0; i < n->inputs().size() && i < schema.arguments().size(); ++i) {
    if (!schema.is_mutable({c10::SchemaArgType::input, i})) continue;
    const Val& v = value(n->input(i), f, n);
    if (v.kind != Val::Kind::Constant || !(v.constant.isList() || v.constant.isGenericDict())) return false;
  }
  return true;
}

void Importer::unfreeze(const jit::Value* v, Frame& f) {
  const Val frozen = value(v, f, nullptr);
  if (frozen.kind != Val::Kind::Constant) return;
  Val open;
  if (frozen.constant.isList()) {
    std::vector<Val> items;
    for (const c10::IValue& i : frozen.constant.toListRef()) items.push_back(Val::of_constant(i));
    open = Val::of_list(std::move(items));
  } else if (frozen.constant.isGenericDict()) {
    open.kind = Val::Kind::Dict;
    open.entries = std::make_shared<std::vector<std::pair<Val, Val>>>();
    for (const auto& kv : frozen.constant.toGenericDict())
      open.entries->emplace_back(Val::of_constant(kv.key()), Val::of_constant(kv.value()));
  } else {
    return;
  }
  // Every name of the same object now means the aggregate.
  for (auto& entry : f.env)
    if (entry.second.kind == Val::Kind::Constant && entry.second.constant.is(frozen.constant)) entry.second = open;
}

bool Importer::run_mutation(const jit::Node* n, Frame& f) {
  const std::string& name = n->schema().name();
  if (!list_mutations().count(name) || n->inputs().empty()) return false;
  auto input = [&](size_t i) -> const Val& { return value(n->input(i), f, n); };
  const Val& first = input(0);
  if (first.kind == Val::Kind::Constant && (first.constant.isList() || first.constant.isGenericDict())) {
    if (mutable_constant_args(n, f)) {
      bool all_known = true;
      for (size_t i = 1; i < n->inputs().size(); ++i) all_known = all_known && is_constant(input(i));
      if (all_known) return false;  // run_operator runs it now, on the constant itself
    }
    unfreeze(n->input(0), f);
  }
  Val target = input(0);
  auto index_of = [&](const Val& v, size_t size, bool end_allowed) -> std::optional<size_t> {
    if (v.kind != Val::Kind::Constant || !v.constant.isInt()) return std::nullopt;
    int64_t i = v.constant.toInt();
    const int64_t n_items = static_cast<int64_t>(size);
    if (i < 0) i += n_items;
    if (end_allowed) i = std::max<int64_t>(0, std::min(i, n_items));
    if (i < 0 || i > n_items || (!end_allowed && i == n_items)) fail(n, f, "list index out of range");
    return static_cast<size_t>(i);
  };
  auto result = [&](Val v) {
    if (!n->outputs().empty()) bind(n->output(), std::move(v), f);
    return true;
  };
  if (target.kind == Val::Kind::Dict) {
    auto set = [&](const Val& key, const Val& item) {
      for (auto& kv : *target.entries) {
        if (kv.first.kind == Val::Kind::Constant && kv.first.constant == key.constant) {
          kv.second = item;
          return;
        }
      }
      target.entries->emplace_back(key, item);
    };
    if (name == "aten::_set_item" && n->inputs().size() == 3 && input(1).kind == Val::Kind::Constant) {
      set(input(1), input(2));
      return result(target);
    }
    if (name == "aten::update" && n->inputs().size() == 2) {  // d.update(other)
      const Val& other = input(1);
      if (other.kind == Val::Kind::Dict) {
        const auto entries = *other.entries;
        for (const auto& kv : entries) {
          if (kv.first.kind != Val::Kind::Constant) return false;
          set(kv.first, kv.second);
        }
        return result(target);
      }
      if (other.kind == Val::Kind::Constant && other.constant.isGenericDict()) {
        for (const auto& kv : other.constant.toGenericDict()) set(Val::of_constant(kv.key()), Val::of_constant(kv.value()));
        return result(target);
      }
    }
    return false;
  }
  if (target.kind != Val::Kind::List) return false;
  std::vector<Val>& items = *target.items;
  if (name == "aten::append" && n->inputs().size() == 2) {
    items.push_back(input(1));
    return result(target);
  }
  if (name == "aten::extend" && n->inputs().size() == 2) {
    const Val& other = input(1);
    std::vector<Val> more;
    if (other.kind == Val::Kind::List || other.kind == Val::Kind::Tuple) {
      more = *other.items;
    } else if (other.kind == Val::Kind::Constant && other.constant.isList()) {
      for (const c10::IValue& i : other.constant.toListRef()) more.push_back(Val::of_constant(i));
    } else {
      return false;
    }
    items.insert(items.end(), more.begin(), more.end());
    return result(target);
  }
  if (name == "aten::_set_item" && n->inputs().size() == 3) {
    auto i = index_of(input(1), items.size(), false);
    if (!i) return false;
    items[*i] = input(2);
    return result(target);
  }
  if (name == "aten::insert" && n->inputs().size() == 3) {
    auto i = index_of(input(1), items.size(), true);
    if (!i) return false;
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(*i), input(2));
    return result(target);
  }
  if (name == "aten::pop" && n->inputs().size() <= 2) {
    if (items.empty()) fail(n, f, "pop from empty list");
    auto i = n->inputs().size() == 2 ? index_of(input(1), items.size(), false) : std::optional<size_t>(items.size() - 1);
    if (!i) return false;
    Val item = items[*i];
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(*i));
    return result(item);
  }
  if (name == "aten::clear" && n->inputs().size() == 1) {
    items.clear();
    return result(target);
  }
  return false;
}

}  // namespace fx::import_detail
