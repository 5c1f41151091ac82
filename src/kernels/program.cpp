// Fused kernels' programs: parsing, printing and the analysis that decides
// which values are per row and in which loop over the row each is made
// (see program.h).
#include "kernels/program.h"

#include <fx/error.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace fx::compiler::detail {
namespace {

/// Pointwise operators and their operand counts.
const std::map<std::string, size_t>& pointwise_ops() {
  static const std::map<std::string, size_t> ops = {
      {"add", 2},     {"sub", 2},     {"mul", 2},        {"div", 2},        {"maximum", 2},    {"minimum", 2},
      {"clamp_min", 2}, {"clamp_max", 2}, {"pow", 2},    {"neg", 1},        {"abs", 1},        {"exp", 1},
      {"log", 1},     {"sqrt", 1},    {"rsqrt", 1},      {"reciprocal", 1}, {"tanh", 1},       {"erf", 1},
      {"sigmoid", 1}, {"relu", 1},    {"gelu", 1},       {"gelu_tanh", 1},  {"silu", 1},
      // Backward formulas: gelu's derivative times the gradient, gelu_backward(dy, x); and
      // le_select(c, t, a, b) = c <= t ? a : b (threshold_backward: x <= t ? 0 : dy; NaN picks b).
      {"gelu_backward", 2}, {"gelu_tanh_backward", 2}, {"le_select", 4},
  };
  return ops;
}

const char* kind_name(OutputKind k) {
  switch (k) {
    case OutputKind::Full: return "full";
    case OutputKind::Row: return "row";
    case OutputKind::RowFlat: return "row_flat";
  }
  return "full";
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return parts;
}

[[noreturn]] void bad(const std::string& statement, const std::string& why) {
  throw Error("fused kernel program: '" + statement + "': " + why);
}

/// "%12" -> 12; -1 when `s` is not a value reference.
int value_ref(const std::string& s) {
  if (s.size() < 2 || s[0] != '%') return -1;
  for (size_t i = 1; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
  return std::atoi(s.c_str() + 1);
}

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

bool is_pointwise(const std::string& name, size_t arity) {
  auto it = pointwise_ops().find(name);
  return it != pointwise_ops().end() && it->second == arity;
}

bool is_reduction(const std::string& name) { return name == "sum" || name == "max" || name == "mean" || name == "var"; }

bool Program::reduces() const {
  return std::any_of(ops.begin(), ops.end(), [](const Op& o) { return is_reduction(o.name); });
}

int Program::reduction_levels() const {
  int levels = 0;
  for (const Op& o : ops)
    if (is_reduction(o.name)) levels = std::max(levels, o.level);
  return levels;
}

void analyse(Program& p) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    Op& o = p.ops[i];
    if (o.name == "input") {
      o.row = false;
      o.level = 0;
      continue;
    }
    int level = 0;
    bool any_full = false;
    for (const Operand& a : o.args) {
      if (a.kind != Operand::Kind::Value) continue;
      const Op& in = p.ops[a.value];
      level = std::max(level, in.level);
      any_full = any_full || !in.row;
    }
    if (is_reduction(o.name)) {
      if (!any_full) bad(o.name, "a reduction of a row value (%" + std::to_string(i) + ")");
      o.row = true;
      o.level = level + 1;
    } else {
      // A value of constants alone is computed per element (broadcast).
      bool any_value = false;
      for (const Operand& a : o.args) any_value = any_value || a.kind == Operand::Kind::Value;
      o.row = any_value && !any_full;
      o.level = level;
    }
  }
  for (const auto& [v, kind] : p.outputs) {
    if (v < 0 || v >= static_cast<int>(p.ops.size())) bad("return", "no value %" + std::to_string(v));
    if (p.ops[v].row == (kind == OutputKind::Full))
      bad("return", "%" + std::to_string(v) + " is " + (p.ops[v].row ? "a row value" : "a full value") +
                        ", returned as " + kind_name(kind));
  }
}

Program parse_program(const std::string& text) {
  Program p;
  const std::vector<std::string> statements = split(text, ';');
  if (statements.empty() || statements.back().rfind("return ", 0) != 0)
    bad(text.substr(0, 60), "a program ends with 'return %N full|row|row_flat, ...'");
  // Inputs: "inputs N" first.
  const std::string& first = statements.front();
  if (first.rfind("inputs ", 0) != 0) bad(first, "a program starts with 'inputs N'");
  p.inputs = std::atoi(first.c_str() + 7);
  const std::string count = "inputs " + std::to_string(p.inputs);
  if (p.inputs < 1 || first.compare(0, count.size(), count) != 0) bad(first, "expected 'inputs N' with N >= 1");
  p.input_types.assign(static_cast<size_t>(p.inputs), "f32");
  if (first.size() > count.size()) {
    // "inputs N: t0 t1 ...", one storage type per input.
    if (first.compare(count.size(), 2, ": ") != 0) bad(first, "expected 'inputs N' or 'inputs N: TYPE ...'");
    std::vector<std::string> types = split(first.substr(count.size() + 2), ' ');
    if (types.size() != static_cast<size_t>(p.inputs)) bad(first, "one type per input");
    for (const std::string& t : types)
      if (t != "f32" && t != "u8") bad(first, "input type '" + t + "' is not f32 or u8");
    p.input_types = types;
  }
  for (int i = 0; i < p.inputs; ++i) p.ops.push_back(Op{"input", {}, false, 0});
  for (size_t s = 1; s + 1 < statements.size(); ++s) {
    const std::string& st = statements[s];
    const size_t eq = st.find(" = ");
    if (eq == std::string::npos) bad(st, "expected '%N = op(...)'");
    if (value_ref(st.substr(0, eq)) != static_cast<int>(p.ops.size()))
      bad(st, "values are numbered in order: expected %" + std::to_string(p.ops.size()));
    const std::string call = st.substr(eq + 3);
    const size_t open = call.find('(');
    if (open == std::string::npos || call.back() != ')') bad(st, "expected op(operands)");
    Op o;
    o.name = call.substr(0, open);
    for (const std::string& a : split(call.substr(open + 1, call.size() - open - 2), ',')) {
      Operand operand;
      const int v = value_ref(a);
      if (v >= 0) {
        if (v >= static_cast<int>(p.ops.size())) bad(st, "%" + std::to_string(v) + " is used before it is made");
        operand.value = v;
      } else if (a == "n") {
        operand.kind = Operand::Kind::RowLength;
      } else {
        char* end = nullptr;
        operand.kind = Operand::Kind::Number;
        operand.number = std::strtod(a.c_str(), &end);
        if (a.empty() || *end) bad(st, "operand '" + a + "' is neither %N, n nor a number");
      }
      o.args.push_back(operand);
    }
    const bool ok = o.name == "var" ? o.args.size() == 2 && o.args[1].kind == Operand::Kind::Number
                    : is_reduction(o.name) ? o.args.size() == 1 && o.args[0].kind == Operand::Kind::Value
                                           : is_pointwise(o.name, o.args.size());
    if (!ok) bad(st, "unknown operator or wrong operand count: " + o.name + " of " + std::to_string(o.args.size()));
    p.ops.push_back(std::move(o));
  }
  for (const std::string& out : split(statements.back().substr(7), ',')) {
    const size_t space = out.find(' ');
    const int v = space == std::string::npos ? -1 : value_ref(out.substr(0, space));
    const std::string kind = space == std::string::npos ? "" : out.substr(space + 1);
    if (v < 0 || v >= static_cast<int>(p.ops.size())) bad(statements.back(), "bad output '" + out + "'");
    OutputKind k;
    if (kind == "full")
      k = OutputKind::Full;
    else if (kind == "row")
      k = OutputKind::Row;
    else if (kind == "row_flat")
      k = OutputKind::RowFlat;
    else
      bad(statements.back(), "output kind '" + kind + "' is not full, row or row_flat");
    p.outputs.emplace_back(v, k);
  }
  analyse(p);
  return p;
}

std::string print_program(const Program& p) {
  std::string s = "inputs " + std::to_string(p.inputs);
  if (std::any_of(p.input_types.begin(), p.input_types.end(), [](const std::string& t) { return t != "f32"; })) {
    s += ":";
    for (int i = 0; i < p.inputs; ++i) s += " " + (static_cast<size_t>(i) < p.input_types.size() ? p.input_types[i] : "f32");
  }
  for (size_t i = p.inputs; i < p.ops.size(); ++i) {
    s += "; %" + std::to_string(i) + " = " + p.ops[i].name + "(";
    for (size_t a = 0; a < p.ops[i].args.size(); ++a) {
      const Operand& o = p.ops[i].args[a];
      if (a) s += ", ";
      s += o.kind == Operand::Kind::Value ? "%" + std::to_string(o.value)
           : o.kind == Operand::Kind::RowLength ? std::string("n")
                                                 : number_text(o.number);
    }
    s += ")";
  }
  s += "; return ";
  for (size_t i = 0; i < p.outputs.size(); ++i)
    s += (i ? ", %" : "%") + std::to_string(p.outputs[i].first) + " " + kind_name(p.outputs[i].second);
  return s;
}

}  // namespace fx::compiler::detail
