// python_code(): the forward function torch.fx generates for a graph.
#include <fx/graph.h>

#include "targets/registry.h"

#include <cctype>
#include <unordered_map>

namespace fx {
namespace {

/// torch.fx magic_methods: operator builtins printed as Python operators.
const std::unordered_map<std::string, std::string>& magic_methods() {
  static const std::unordered_map<std::string, std::string> m = {
      {"add", "{} + {}"},  {"sub", "{} - {}"},   {"mul", "{} * {}"},      {"floordiv", "{} // {}"},
      {"truediv", "{} / {}"}, {"div", "{} / {}"}, {"mod", "{} % {}"},     {"pow", "{} ** {}"},
      {"lshift", "{} << {}"}, {"rshift", "{} >> {}"}, {"and_", "{} & {}"}, {"or_", "{} | {}"},
      {"xor", "{} ^ {}"},  {"getitem", "{}[{}]"}, {"matmul", "{} @ {}"},  {"eq", "{} == {}"},
      {"ne", "{} != {}"},  {"lt", "{} < {}"},     {"gt", "{} > {}"},      {"le", "{} <= {}"},
      {"ge", "{} >= {}"},  {"pos", "+{}"},        {"neg", "-{}"},         {"invert", "~{}"}};
  return m;
}

/// torch.fx inplace_methods.
const std::unordered_map<std::string, std::string>& inplace_methods() {
  static const std::unordered_map<std::string, std::string> m = {
      {"iadd", "{} += {}"}, {"iand", "{} &= {}"}, {"ifloordiv", "{} //= {}"}, {"ilshift", "{} <<= {}"},
      {"imod", "{} %= {}"}, {"imul", "{} *= {}"}, {"imatmul", "{} @= {}"},    {"ior", "{} |= {}"},
      {"ipow", "{} **= {}"}, {"irshift", "{} >>= {}"}, {"isub", "{} -= {}"}, {"itruediv", "{} /= {}"},
      {"ixor", "{} ^= {}"}, {"setitem", "{}[{}] = {}"}};
  return m;
}

std::string fill(const std::string& pattern, const ArgList& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      out += next < args.size() ? args[next++].repr() : "None";
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

/// torch.fx _format_target: "self" + "layer1.0.conv1" → getattr(self.layer1, "0").conv1
std::string format_target(const std::string& base, const std::string& target) {
  std::string r = base;
  size_t start = 0;
  while (start <= target.size()) {
    size_t dot = target.find('.', start);
    std::string e = target.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    r = is_identifier(e) ? r + "." + e : "getattr(" + r + ", \"" + e + "\")";
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return r;
}

/// torch.fx _format_args: "x, y, alpha = 2".
std::string format_call_args(const ArgList& args, const Kwargs& kwargs, size_t skip = 0) {
  std::string s;
  for (size_t i = skip; i < args.size(); ++i) s += (s.empty() ? "" : ", ") + args[i].repr();
  for (const auto& kv : kwargs) s += (s.empty() ? "" : ", ") + kv.first + " = " + kv.second.repr();
  return s;
}

/// The Python expression that names a call_function target.
std::string global_name(const std::string& target) {
  if (auto ref = detail::parse_operator_name(target)) {
    std::string ns = ref->name.substr(0, ref->name.find("::"));
    std::string op = ref->name.substr(ref->name.find("::") + 2);
    return "torch.ops." + ns + "." + op + (ref->has_overload ? "." + ref->overload : "");
  }
  return target;
}

}  // namespace

namespace {

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

/// torch.fx append_stacktrace_summary: "# <context>, File: <file>:<line>, code: <code>".
std::string stacktrace_summary(const std::string& trace) {
  std::vector<std::string> lines;
  const std::string t = strip(trace);
  size_t start = 0;
  while (true) {
    size_t nl = t.find('\n', start);
    lines.push_back(t.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  size_t idx = 0;
  std::string context;
  for (; idx < lines.size(); ++idx) {
    std::string line = strip(lines[idx]);
    if (line.rfind("File ", 0) == 0) break;
    context += (context.empty() ? "" : ", ") + line;
  }
  std::vector<std::string> summary;
  if (idx > 0) summary.push_back(context);
  if (idx + 1 < lines.size()) {
    // ^File "(.+)", line (\d+), in (.+)$
    const std::string line = strip(lines[idx]);
    const size_t q = line.find("\", line ");
    const size_t in = q == std::string::npos ? q : line.find(", in ", q + 8);
    if (line.rfind("File \"", 0) == 0 && q != std::string::npos && q > 6 && in != std::string::npos &&
        in > q + 8 && in + 5 < line.size()) {
      const std::string lineno = line.substr(q + 8, in - q - 8);
      if (lineno.find_first_not_of("0123456789") == std::string::npos)
        summary.push_back("File: " + line.substr(6, q - 6) + ":" + lineno);
    }
    summary.push_back("code: " + strip(lines[idx + 1]));
  }
  std::string out;
  for (const auto& s : summary) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

PythonCode Graph::python_code(const std::string& root_module, bool verbose) const {
  // For every node, the values whose last use it is (torch.fx user_to_last_uses).
  std::unordered_map<const Node*, std::vector<Node*>> last_uses;
  {
    std::vector<bool> seen(next_id_, false);
    for (Node* user : nodes().reversed()) {
      for_each_node(user->args(), user->kwargs(), [&](Node* n) {
        if (!seen[n->id()]) {
          seen[n->id()] = true;
          last_uses[user].push_back(n);
        }
      });
    }
  }
  std::vector<std::string> free_vars;
  std::string body;
  std::string return_annotation;
  std::optional<std::string> prev_stacktrace;  // None until the first node that has or lacks one
  for (Node* node : nodes()) {
    if (verbose && node->op() != Opcode::Placeholder && node->op() != Opcode::Output) {
      const std::string trace = node->stack_trace();
      if (!trace.empty()) {
        if (trace != prev_stacktrace) {
          prev_stacktrace = trace;
          body += "\n# " + stacktrace_summary(trace) + "\n";
        }
      } else if (prev_stacktrace != std::string()) {
        prev_stacktrace = std::string();
        body += "\n# No stacktrace found for following nodes \n";
      }
    }
    // torch.fx emit_node: `name : type = ...` when the node has a type.
    std::string typed;
    if (!node->type().empty()) typed = node->name() + " : " + node->type();
    const std::string& name = node->type().empty() ? node->name() : typed;
    const ArgList& args = node->args();
    switch (node->op()) {
      case Opcode::Placeholder: {
        free_vars.push_back(node->target() + (node->type().empty() ? "" : " : " + node->type()) +
                            (args.empty() ? "" : " = " + args[0].repr()));
        if (node->target() != node->name()) body += node->name() + " = " + node->target() + "\n";
        continue;  // placeholders free nothing
      }
      case Opcode::CallMethod:
        body += name + " = " + format_target(args.empty() ? "None" : args[0].repr(), node->target()) + "(" +
                format_call_args(args, node->kwargs(), 1) + ")";
        break;
      case Opcode::CallFunction: {
        const std::string& t = node->target();
        const std::string op = t.rfind("operator.", 0) == 0 ? t.substr(9) : std::string();
        auto magic = magic_methods().find(op);
        auto inplace = inplace_methods().find(op);
        if (!op.empty() && magic != magic_methods().end() && node->kwargs().empty()) {
          body += name + " = " + fill(magic->second, args);
        } else if (!op.empty() && inplace != inplace_methods().end() && node->kwargs().empty()) {
          body += fill(inplace->second, args) + ";  " + name + " = " + (args.empty() ? "None" : args[0].repr());
        } else if (t == "getattr" && args.size() == 2 && args[1].kind() == Argument::Kind::String &&
                   is_identifier(args[1].to_string())) {
          body += name + " = " + format_target(args[0].repr(), args[1].to_string());
        } else {
          body += name + " = " + global_name(t) + "(" + format_call_args(args, node->kwargs()) + ")";
        }
        break;
      }
      case Opcode::CallModule:
        body += name + " = " + format_target(root_module, node->target()) + "(" +
                format_call_args(args, node->kwargs()) + ")";
        break;
      case Opcode::GetAttr: body += name + " = " + format_target(root_module, node->target()); break;
      case Opcode::Output:
        if (!node->type().empty()) return_annotation = " -> " + node->type();
        body += "return " + (args.empty() ? std::string("None") : args[0].repr()) + "\n";
        continue;
    }
    auto it = last_uses.find(node);
    if (it != last_uses.end()) {
      body += ";  ";
      for (Node* n : it->second) body += n->name() + " = ";
      body += "None";
    }
    body += "\n";
  }
  if (body.empty()) body = "pass\n";
  std::string params = "self";
  for (const auto& v : free_vars) params += ", " + v;
  std::string code;
  size_t start = 0;
  while (true) {  // indent every line, as torch.fx does (the last, empty one too)
    size_t nl = body.find('\n', start);
    code += "    " + body.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (nl == std::string::npos) break;
    code += "\n";
    start = nl + 1;
  }
  return PythonCode{"\n\n\ndef forward(" + params + ")" + return_annotation + ":\n" + code};
}

}  // namespace fx
