// torch.fx's naming rules: unique, valid identifiers in O(1) per name.
#include "ir/names.h"

#include "targets/registry.h"

#include <cctype>

namespace fx::detail {
namespace {

/// Names a node may not take: Python keywords, builtins and the globals that
/// generated code imports (torch.fx _is_illegal_name).
bool is_illegal_name(const std::string& name) {
  static const std::unordered_set<std::string> illegal = {
      // keyword.kwlist
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
      "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
      "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
      // builtins
      "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BlockingIOError", "BrokenPipeError",
      "BufferError", "BytesWarning", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
      "ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning", "EOFError", "Ellipsis",
      "EnvironmentError", "Exception", "FileExistsError", "FileNotFoundError", "FloatingPointError",
      "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError",
      "IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError",
      "MemoryError", "ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplemented",
      "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning", "PermissionError",
      "ProcessLookupError", "RecursionError", "ReferenceError", "ResourceWarning", "RuntimeError",
      "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError",
      "SystemExit", "TabError", "TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
      "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning",
      "ValueError", "Warning", "ZeroDivisionError", "__build_class__", "__debug__", "__doc__", "__import__",
      "__loader__", "__name__", "__package__", "__spec__", "abs", "aiter", "all", "anext", "any", "ascii", "bin",
      "bool", "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile", "complex",
      "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec", "exit", "filter",
      "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help", "hex", "id", "input", "int",
      "isinstance", "issubclass", "iter", "len", "license", "list", "locals", "map", "max", "memoryview", "min",
      "next", "object", "oct", "open", "ord", "pow", "print", "property", "quit", "range", "repr", "reversed",
      "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "vars",
      "zip",
      // torch.fx custom builtins
      "inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"};
  return illegal.count(name) != 0;
}

}  // namespace

std::string snake_case(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 4);
  bool prev_lower = false;
  for (char c : s) {
    const bool upper = std::isupper(static_cast<unsigned char>(c));
    if (prev_lower && upper) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    prev_lower = std::islower(static_cast<unsigned char>(c));
  }
  return out;
}

std::string name_from_target(Opcode op, const std::string& target) {
  std::string s = target;
  if (op == Opcode::CallFunction) {
    if (auto ref = parse_operator_name(target)) {
      s = ref->name.substr(ref->name.rfind("::") + 2);  // "aten::add.Tensor" → "add"
    } else if (target.find('.') != std::string::npos) {
      s = target.substr(target.rfind('.') + 1);  // "operator.getitem" → "getitem", "torch._assert" → "_assert"
    }
  }
  if (s.size() > 4 && s.compare(0, 2, "__") == 0 && s.compare(s.size() - 2, 2, "__") == 0)
    s = s.substr(2, s.size() - 4);
  return snake_case(s);
}

void NameTable::Base::take(int64_t n) {
  if (n < 0) {
    zero_used = true;
  } else if (n == 0) {
    plain_used = true;
  } else if (n == dense_hi + 1) {
    ++dense_hi;
    while (!sparse.empty() && sparse.erase(dense_hi + 1)) ++dense_hi;
  } else if (n > dense_hi) {
    sparse.insert(n);
  }
}

std::string NameTable::create(const std::string& in) {
  if (last_base_ && in == last_in_) return take_from(*last_base_, last_base_name_, last_num_);
  std::string candidate = in;
  for (char& c : candidate)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (candidate.empty()) candidate = "_unnamed";
  if (std::isdigit(static_cast<unsigned char>(candidate[0]))) candidate = "_" + candidate;

  // Split a numeric suffix: "add_3" → base "add", num 3 (torch.fx's (.*)_(\d+)$).
  std::string base = candidate;
  int64_t num = 0;
  size_t us = candidate.rfind('_');
  if (us != std::string::npos && us > 0 && us + 1 < candidate.size() && candidate.size() - us - 1 <= 18) {
    bool digits = true;
    for (size_t i = us + 1; i < candidate.size(); ++i)
      digits = digits && std::isdigit(static_cast<unsigned char>(candidate[i]));
    if (digits) {
      base = candidate.substr(0, us);
      num = std::stoll(candidate.substr(us + 1));
      if (num == 0) num = -1;  // "submod_0" stays "submod_0" (torch.fx), distinct from "submod"
    }
  }
  Base& b = bases_[base];
  last_in_ = in;
  last_base_ = &b;  // map nodes never move
  last_base_name_ = base;
  last_num_ = num;
  return take_from(b, base, num);
}

std::string NameTable::take_from(Base& b, const std::string& base, int64_t num) {
  // Only plain names can be keywords or builtins: none of those ends in _<digits>.
  auto taken = [&](int64_t n) { return b.taken(n) || (n == 0 && is_illegal_name(base)); };
  int64_t counter = num > 0 ? num : b.count;
  while (taken(num)) num = ++counter;
  b.take(num);
  b.count = counter;
  return num == 0 ? base : base + "_" + std::to_string(num < 0 ? 0 : num);
}

}  // namespace fx::detail
