#pragma once
// Internal: torch.fx's naming rules (torch.fx.graph._Namespace), in O(1).

#include <fx/node.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace fx::detail {

/// The name torch.fx derives from a target before making it unique:
/// "aten::add.Tensor" → "add", "operator.getitem" → "getitem",
/// "__add__" → "add", "layer1.0.conv1" → "layer1.0.conv1" (sanitised later),
/// camelCase → camel_case.
std::string name_from_target(Opcode op, const std::string& target);

/// torch.fx _snake_case: "pascalCase" → "pascal_case".
std::string snake_case(const std::string& s);

/// The names taken in one graph, by base: "add", "add_1", "add_7" are the
/// base "add" with numbers 0, 1, 7. Numbers handed out in sequence extend a
/// dense range, so checking a fresh name costs one lookup of a short, hot
/// base string however large the graph grows (a set of every name would
/// miss the cache on each check).
class NameTable {
 public:
  /// torch.fx _Namespace.create_name: makes `candidate` a valid, unused
  /// Python identifier (illegal characters become '_', a leading digit gets
  /// a '_', keywords and builtins get a suffix), unique with the suffixes
  /// _1, _2 ... (continuing from the last number given to its base), and
  /// records it as taken.
  std::string create(const std::string& candidate);

 private:
  struct Base {
    bool plain_used = false;     // the base itself, without a number
    bool zero_used = false;      // "<base>_0" (number -1 here): torch.fx keeps a _0 suffix
    int64_t count = 0;           // torch.fx _base_count: where numbering resumes
    int64_t dense_hi = 0;        // numbers 1..dense_hi are all taken
    std::unordered_set<int64_t> sparse;  // taken numbers above dense_hi
    bool taken(int64_t n) const {
      return n == 0 ? plain_used : n < 0 ? zero_used : (n <= dense_hi || sparse.count(n) != 0);
    }
    void take(int64_t n);
  };
  std::string take_from(Base& b, const std::string& base, int64_t num);
  std::unordered_map<std::string, Base> bases_;
  // The last candidate seen, already cleaned and split: chains repeat it.
  std::string last_in_;
  Base* last_base_ = nullptr;
  std::string last_base_name_;
  int64_t last_num_ = 0;
};

}  // namespace fx::detail
