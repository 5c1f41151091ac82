// fuse_kernels' knowledge of ATen's operators (lowering.h): for each
// operator it fuses, the arguments it accepts (anything else, an unknown
// keyword, a tensor constant, another dtype, leaves the node to ATen) and
// the program operators it becomes, written as ATen's CPU kernels compute it
// (softmax as max, exp of the difference, sum, product by the reciprocal;
// layer norm's rstd = 1 / sqrt(max(var, 0) + eps), var biased).
#include "compiler/lowering.h"

#include <algorithm>
#include <map>
#include <set>

namespace fx::compiler::detail {

namespace {

/// A target's namespace, name and overload: "aten::add.Tensor" -> aten, add, Tensor; "operator.mul" -> operator, mul.
struct Target {
  std::string ns, base, overload;
};

Target parse_target(const std::string& t) {
  Target r;
  size_t sep = t.find("::");
  if (sep != std::string::npos) {
    r.ns = t.substr(0, sep);
    const std::string rest = t.substr(sep + 2);
    const size_t dot = rest.find('.');
    r.base = rest.substr(0, dot);
    if (dot != std::string::npos) r.overload = rest.substr(dot + 1);
  } else if (t.rfind("operator.", 0) == 0) {
    r.ns = "operator";
    r.base = t.substr(9);
  }
  return r;
}

/// Positional argument i, else keyword `name`, else `fallback`.
Argument arg_of(const Node* n, size_t i, const char* name, Argument fallback = nullptr) {
  if (i < n->args().size()) return n->args()[i];
  for (const auto& [key, value] : n->kwargs())
    if (key == name) return value;
  return fallback;
}

bool only_kwargs(const Node* n, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : n->kwargs()) {
    (void)value;
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) == allowed.end())
      return false;
  }
  return true;
}

bool is_number(const Argument& a) { return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Double; }


/// Emits a node's operators into a program.


/// Whether `dims` (an int or a list of one int) names the last of `rank` dimensions.
bool last_dim(const Argument& dims, size_t rank) {
  std::optional<int64_t> d;
  if (dims.kind() == Argument::Kind::Int) {
    d = dims.to_int();
  } else if (auto list = dims.to_int_list(); list && list->size() == 1) {
    d = (*list)[0];
  }
  return d && rank > 0 && (*d == -1 || *d == static_cast<int64_t>(rank) - 1);
}

const std::set<std::string>& unary_ops() {
  static const std::set<std::string> ops = {"neg",  "abs",  "exp", "log",     "sqrt", "rsqrt", "reciprocal",
                                            "tanh", "erf",  "sigmoid", "relu", "silu"};
  return ops;
}

}  // namespace

const TensorMetadata* float_meta(const Node* n) {
  const TensorMetadata* m = tensor_meta_of(n);
  return m && m->dtype == at::kFloat && !m->is_quantized ? m : nullptr;
}

std::optional<Kind> lower(const Node* n, Builder* b, Operand* out) {
  if (n->op() != Opcode::CallFunction || !float_meta(n)) return {};
  const Target t = parse_target(n->target());
  // A uint8 / bool tensor made float32 (a dropout mask): the kernel reads its bytes.
  if (t.ns == "aten" && t.base == "to" && t.overload == "dtype" && n->args().size() >= 2 && n->args()[0].is_node() &&
      n->args()[1].kind() == Argument::Kind::ScalarType && n->args()[1].to_scalar_type() == at::kFloat &&
      only_kwargs(n, {"non_blocking", "copy", "memory_format"}) && n->args().size() <= 4) {
    const TensorMetadata* m = tensor_meta_of(n->args()[0].to_node());
    if (!m || (m->dtype != at::kByte && m->dtype != at::kBool) || m->shape != float_meta(n)->shape) return {};
    if (b && out) *out = b->of(n->args()[0]);
    return Kind::Pointwise;
  }
  for (const Node* in : n->all_input_nodes())
    if (!float_meta(in)) return {};
  const bool aten = t.ns == "aten";
  auto A = [&](size_t i, const char* name, Argument fallback = nullptr) { return arg_of(n, i, name, fallback); };
  auto set = [&](Operand o) {
    if (out) *out = o;
  };
  const Argument x = A(0, "self");
  if (aten && unary_ops().count(t.base) && n->args().size() == 1 && n->kwargs().empty() && x.is_node()) {
    if (b) set(b->op(t.base, {b->of(x)}));
    return Kind::Pointwise;
  }
  if (t.ns == "operator" && t.base == "neg" && n->args().size() == 1 && x.is_node()) {
    if (b) set(b->op("neg", {b->of(x)}));
    return Kind::Pointwise;
  }
  // Binary arithmetic: aten's (with alpha) and Python's operators.
  static const std::map<std::string, std::string> binary = {
      {"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"div", "div"}, {"truediv", "div"},
      {"maximum", "maximum"}, {"minimum", "minimum"}, {"rsub", "rsub"}};
  if (auto it = binary.find(t.base); it != binary.end() && (aten || (t.ns == "operator" && t.base != "rsub" &&
                                                                     t.base != "maximum" && t.base != "minimum"))) {
    if (aten && t.base == "truediv") return {};
    if (!only_kwargs(n, {"other", "alpha"}) || n->args().size() > 3) return {};
    const Argument y = A(1, "other");
    const Argument alpha = A(2, "alpha", Argument(int64_t{1}));
    if (!(x.is_node() || is_number(x)) || !(y.is_node() || is_number(y)) || !is_number(alpha)) return {};
    if (!x.is_node() && !y.is_node()) return {};
    const bool has_alpha = t.base == "add" || t.base == "sub" || t.base == "rsub";
    if (!has_alpha && alpha.to_double() != 1) return {};
    if (b) {
      Operand a = b->of(x), c = b->of(y);
      if (t.base == "rsub") std::swap(a, c);  // rsub(x, y, alpha) = y - alpha * x
      if (has_alpha && alpha.to_double() != 1) c = b->op("mul", {c, Builder::number(alpha.to_double())});
      set(b->op(it->second == "rsub" ? "sub" : it->second, {a, c}));
    }
    return Kind::Pointwise;
  }
  if (aten && t.base == "gelu" && only_kwargs(n, {"approximate"}) && x.is_node()) {
    const Argument approximate = A(1, "approximate", Argument("none"));
    if (approximate.kind() != Argument::Kind::String) return {};
    const std::string& how = approximate.to_string();
    if (how != "none" && how != "tanh") return {};
    if (b) set(b->op(how == "tanh" ? "gelu_tanh" : "gelu", {b->of(x)}));
    return Kind::Pointwise;
  }
  // Clamps: clamp(x, min, max), clamp_min, clamp_max, hardtanh, relu6 (ATen: maximum with min, then minimum with max).
  if (aten && (t.base == "clamp" || t.base == "clamp_min" || t.base == "clamp_max" || t.base == "hardtanh" ||
               t.base == "relu6") &&
      x.is_node() && (t.overload.empty() || t.overload == "default")) {
    Argument lo = nullptr, hi = nullptr;
    if (t.base == "clamp") {
      lo = A(1, "min");
      hi = A(2, "max");
    } else if (t.base == "clamp_min") {
      lo = A(1, "min");
    } else if (t.base == "clamp_max") {
      hi = A(1, "max");
    } else if (t.base == "hardtanh") {
      lo = A(1, "min_val", Argument(-1.0));
      hi = A(2, "max_val", Argument(1.0));
    } else {
      lo = Argument(0.0);
      hi = Argument(6.0);
    }
    if ((!lo.is_none() && !is_number(lo)) || (!hi.is_none() && !is_number(hi)) || (lo.is_none() && hi.is_none()))
      return {};
    if (b) {
      Operand v = b->of(x);
      if (!lo.is_none()) v = b->op("clamp_min", {v, b->of(lo)});
      if (!hi.is_none()) v = b->op("clamp_max", {v, b->of(hi)});
      set(v);
    }
    return Kind::Pointwise;
  }
  if (aten && (t.base == "pow" || t.base == "square") && x.is_node() && n->kwargs().empty()) {
    const Argument e = t.base == "square" ? Argument(2.0) : A(1, "exponent");
    if (!is_number(e)) return {};
    if (b) set(b->op("pow", {b->of(x), b->of(e)}));
    return Kind::Pointwise;
  }
  // The backward formulas of pointwise operators (training graphs), as ATen's kernels compute them.
  if (aten && (t.base == "gelu_backward" || t.base == "threshold_backward" || t.base == "sigmoid_backward" ||
               t.base == "tanh_backward")) {
    const Argument dy = A(0, "grad_output"), v = A(1, t.base == "gelu_backward" || t.base == "threshold_backward"
                                                           ? "self"
                                                           : "output");
    if (!dy.is_node() || !v.is_node()) return {};
    if (t.base == "gelu_backward") {
      if (!only_kwargs(n, {"approximate"})) return {};
      const Argument how = A(2, "approximate", Argument("none"));
      if (how.kind() != Argument::Kind::String || (how.to_string() != "none" && how.to_string() != "tanh")) return {};
      if (b) set(b->op(how.to_string() == "tanh" ? "gelu_tanh_backward" : "gelu_backward", {b->of(dy), b->of(v)}));
    } else if (t.base == "threshold_backward") {
      const Argument threshold = A(2, "threshold");
      if (!is_number(threshold) || !n->kwargs().empty()) return {};
      if (b) set(b->op("le_select", {b->of(v), b->of(threshold), Builder::number(0), b->of(dy)}));
    } else {
      if (!n->kwargs().empty() || n->args().size() != 2) return {};
      if (b) {
        const Operand g = b->of(dy), y = b->of(v);
        if (t.base == "sigmoid_backward")  // dy * (1 - y) * y
          set(b->op("mul", {b->op("mul", {g, b->op("sub", {Builder::number(1), y})}), y}));
        else  // dy * (1 - y * y)
          set(b->op("mul", {g, b->op("sub", {Builder::number(1), b->op("mul", {y, y})})}));
      }
    }
    return Kind::Pointwise;
  }
  const TensorMetadata* xm = x.is_node() ? float_meta(x.to_node()) : nullptr;
  const size_t rank = xm ? xm->shape.size() : 0;
  // Reductions over the last dimension.
  if (aten && (t.base == "mean" || t.base == "sum" || t.base == "amax") && xm && rank > 0 &&
      only_kwargs(n, {"dim", "keepdim", "dtype"})) {
    if (t.base != "amax" && t.overload != "dim" && t.overload != "dim_IntList") return {};
    if (!last_dim(A(1, "dim"), rank) || !A(3, "dtype").is_none()) return {};
    if (A(2, "keepdim", Argument(false)).kind() != Argument::Kind::Bool) return {};
    if (b) set(b->op(t.base == "amax" ? "max" : t.base, {b->of(x)}));
    return Kind::Reduction;
  }
  if (aten && t.base == "var" && xm && rank > 0 && only_kwargs(n, {"dim", "unbiased", "correction", "keepdim"})) {
    double correction = 1;
    if (t.overload == "dim") {
      const Argument unbiased = A(2, "unbiased", Argument(true));
      if (unbiased.kind() != Argument::Kind::Bool) return {};
      correction = unbiased.to_bool() ? 1 : 0;
    } else if (t.overload == "correction") {
      const Argument c = A(2, "correction");
      if (!c.is_none() && !is_number(c)) return {};
      correction = c.is_none() ? 1 : c.to_double();
    } else {
      return {};
    }
    if (!last_dim(A(1, "dim"), rank) || A(3, "keepdim", Argument(false)).kind() != Argument::Kind::Bool) return {};
    if (b) set(b->op("var", {b->of(x), Builder::number(correction)}));
    return Kind::Reduction;
  }
  // Softmax and log_softmax over the last dimension (ATen's last-dimension kernels' arithmetic).
  const bool softmax = t.base == "softmax" || t.base == "_softmax";
  const bool log_softmax = t.base == "log_softmax" || t.base == "_log_softmax";
  if ((aten || (t.ns == "fxcpp" && t.base == "softmax")) && (softmax || log_softmax) && xm && rank > 0) {
    if (!last_dim(A(1, "dim"), rank)) return {};
    const Argument third = n->args().size() > 2 ? n->args()[2] : Argument(nullptr);
    if (t.base[0] == '_' ? !(third.kind() == Argument::Kind::Bool && !third.to_bool()) : !third.is_none()) return {};
    if (!only_kwargs(n, {"dim", "dtype"}) || !arg_of(n, 99, "dtype").is_none()) return {};
    if (b) {
      const Operand v = b->of(x);
      const Operand m = b->op("max", {v});
      const Operand shifted = b->op("sub", {v, m});
      const Operand e = b->op("exp", {shifted});
      const Operand s = b->op("sum", {e});
      if (softmax)
        set(b->op("mul", {e, b->op("div", {Builder::number(1), s})}));
      else
        set(b->op("sub", {shifted, b->op("log", {s})}));
    }
    return Kind::Composite;
  }
  // Their backward over the last dimension: softmax's y * (dy - sum(dy * y)), log_softmax's dy - exp(y) * sum(dy).
  if (aten && (t.base == "_softmax_backward_data" || t.base == "_log_softmax_backward_data") && n->args().size() == 4 &&
      n->kwargs().empty() && x.is_node()) {
    const Argument y = n->args()[1];
    const TensorMetadata* ym = y.is_node() ? float_meta(y.to_node()) : nullptr;
    if (!ym || ym->shape != float_meta(n)->shape || !last_dim(n->args()[2], ym->shape.size()) ||
        n->args()[3].kind() != Argument::Kind::ScalarType || n->args()[3].to_scalar_type() != at::kFloat)
      return {};
    if (b) {
      const Operand g = b->of(x), out = b->of(y);
      if (t.base == "_softmax_backward_data")
        set(b->op("mul", {out, b->op("sub", {g, b->op("sum", {b->op("mul", {g, out})})})}));
      else
        set(b->op("sub", {g, b->op("mul", {b->op("exp", {out}), b->op("sum", {g})})}));
    }
    return Kind::Composite;
  }
  if ((aten || t.ns == "fxcpp") && t.base == "layer_norm" && xm && rank > 0 &&
      only_kwargs(n, {"weight", "bias", "eps", "cudnn_enable"})) {
    const auto shape = A(1, "normalized_shape").to_int_list();
    if (!shape || shape->size() != 1 || (*shape)[0] != xm->shape.back()) return {};
    const Argument w = A(2, "weight"), bias = A(3, "bias"), eps = A(4, "eps", Argument(1e-5));
    for (const Argument& p : {w, bias}) {
      if (p.is_none()) continue;
      const TensorMetadata* pm = p.is_node() ? float_meta(p.to_node()) : nullptr;
      if (!pm || pm->shape.size() != 1 || pm->shape[0] != xm->shape.back()) return {};
    }
    if (!is_number(eps)) return {};
    if (b) {
      // ATen's layer norm: (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(max(var, 0) + eps), var biased.
      const Operand v = b->of(x);
      const Operand mean = b->op("mean", {v});
      const Operand var = b->op("var", {v, Builder::number(0)});
      const Operand rstd = b->op("rsqrt", {b->op("add", {b->op("maximum", {var, Builder::number(0)}), b->of(eps)})});
      Operand y = b->op("mul", {b->op("sub", {v, mean}), rstd});
      if (!w.is_none()) y = b->op("mul", {y, b->of(w)});
      if (!bias.is_none()) y = b->op("add", {y, b->of(bias)});
      set(y);
    }
    return Kind::Composite;
  }
  return {};
}

std::vector<int64_t> iteration_shape(const Node* n, Kind k) {
  if (k == Kind::Pointwise) return float_meta(n)->shape;
  return float_meta(n->all_input_nodes().front())->shape;
}

}  // namespace fx::compiler::detail
