// The builtin call_function targets (see builtins.h).
#include "targets/builtins.h"
#include "targets/builtin_values.h"

#include "targets/schema_match.h"

#include <fx/argument.h>
#include <fx/error.h>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <cmath>
#include <unordered_map>

namespace fx::detail {
namespace builtins {

bool to_num(const c10::IValue& v, Num& out) {
  if (v.isInt()) {
    out = {false, v.toInt(), 0};
  } else if (v.isBool()) {
    out = {false, v.toBool() ? 1 : 0, 0};
  } else if (v.isDouble()) {
    out = {true, 0, v.toDouble()};
  } else {
    return false;
  }
  return true;
}

c10::IValue num_value(const Num& n) { return n.is_double ? c10::IValue(n.d) : c10::IValue(n.i); }

[[noreturn]] void unsupported(const char* op, const c10::IValue& a, const c10::IValue& b) {
  throw Error(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" +
              type_name(b) + "'");
}

void expect_args(const char* name, Args args, size_t n) {
  if (args.size() != n)
    throw Error(std::string(name) + " expected " + std::to_string(n) + " arguments, got " +
                std::to_string(args.size()));
}

std::vector<c10::IValue> items_of(const c10::IValue& v) {
  if (v.isTuple()) return v.toTupleRef().elements().vec();
  std::vector<c10::IValue> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e);
  return out;
}

c10::IValue make_list_like(const c10::IValue& like, std::vector<c10::IValue> items) {
  c10::impl::GenericList out(like.toList().elementType());
  out.reserve(items.size());
  for (auto& e : items) out.push_back(std::move(e));
  return out;
}

}  // namespace builtins

namespace {

using namespace builtins;

// ---- Python numbers --------------------------------------------------------





[[noreturn]] void bad_unary(const char* op, const c10::IValue& a) {
  throw Error(std::string("bad operand type for unary ") + op + ": '" + type_name(a) + "'");
}


int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0) throw Error("integer division or modulo by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) throw Error("integer division or modulo by zero");
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double py_fmod(double a, double b) {
  if (b == 0) throw Error("float modulo");
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double py_ffloordiv(double a, double b) {
  if (b == 0) throw Error("float floor division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div != 0) {
    double fl = std::floor(div);
    if (div - fl > 0.5) fl += 1.0;
    return fl;
  }
  return std::copysign(0.0, a / b);
}

// ---- sequences --------------------------------------------------------------



c10::IValue repeat_seq(const c10::IValue& seq, int64_t n) {
  if (seq.isString()) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.toStringRef();
    return out;
  }
  auto items = items_of(seq);
  std::vector<c10::IValue> out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  if (seq.isTuple()) return c10::ivalue::Tuple::create(std::move(out));
  return make_list_like(seq, std::move(out));
}

bool is_seq(const c10::IValue& v) { return v.isTuple() || v.isList() || v.isString(); }

// ---- arithmetic ---------------------------------------------------------------

c10::IValue op_add(Args a) {
  expect_args("operator.add", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor()) return y.isTensor() ? at::add(x.toTensor(), y.toTensor()) : at::add(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("+", x, y);
    return at::add(y.toTensor(), x.toScalar());
  }
  Num p, q;
  if (to_num(x, p) && to_num(y, q)) {
    if (p.is_double || q.is_double) return p.as_double() + q.as_double();
    return p.i + q.i;
  }
  if (x.isString() && y.isString()) return x.toStringRef() + y.toStringRef();
  if (x.isTuple() && y.isTuple()) {
    auto items = items_of(x);
    auto more = items_of(y);
    items.insert(items.end(), more.begin(), more.end());
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (x.isList() && y.isList()) {
    auto items = items_of(x);
    auto more = items_of(y);
    items.insert(items.end(), more.begin(), more.end());
    if (*x.toList().elementType() == *y.toList().elementType()) return make_list_like(x, std::move(items));
    c10::impl::GenericList out(c10::AnyType::get());
    for (auto& e : items) out.push_back(std::move(e));
    return out;
  }
  unsupported("+", x, y);
}

c10::IValue op_sub(Args a) {
  expect_args("operator.sub", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor()) return y.isTensor() ? at::sub(x.toTensor(), y.toTensor()) : at::sub(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("-", x, y);
    return at::rsub(y.toTensor(), x.toScalar());
  }
  Num p, q;
  if (!to_num(x, p) || !to_num(y, q)) unsupported("-", x, y);
  if (p.is_double || q.is_double) return p.as_double() - q.as_double();
  return p.i - q.i;
}

c10::IValue op_mul(Args a) {
  expect_args("operator.mul", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor()) return y.isTensor() ? at::mul(x.toTensor(), y.toTensor()) : at::mul(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("*", x, y);
    return at::mul(y.toTensor(), x.toScalar());
  }
  Num p, q;
  bool xn = to_num(x, p), yn = to_num(y, q);
  if (xn && yn) {
    if (p.is_double || q.is_double) return p.as_double() * q.as_double();
    return p.i * q.i;
  }
  if (is_seq(x) && yn && !q.is_double) return repeat_seq(x, q.i);
  if (is_seq(y) && xn && !p.is_double) return repeat_seq(y, p.i);
  unsupported("*", x, y);
}

c10::IValue op_truediv(Args a) {
  expect_args("operator.truediv", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor()) return y.isTensor() ? at::div(x.toTensor(), y.toTensor()) : at::div(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("/", x, y);
    return at::mul(at::reciprocal(y.toTensor()), x.toScalar());  // torch's Tensor.__rtruediv__
  }
  Num p, q;
  if (!to_num(x, p) || !to_num(y, q)) unsupported("/", x, y);
  if (q.as_double() == 0) throw Error(p.is_double || q.is_double ? "float division by zero" : "division by zero");
  return p.as_double() / q.as_double();
}

c10::IValue op_floordiv(Args a) {
  expect_args("operator.floordiv", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor())
    return y.isTensor() ? at::floor_divide(x.toTensor(), y.toTensor()) : at::floor_divide(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("//", x, y);
    at::Tensor lhs = at::scalar_to_tensor(x.toScalar(), y.toTensor().device());
    lhs.unsafeGetTensorImpl()->set_wrapped_number(true);
    return at::floor_divide(lhs, y.toTensor());
  }
  Num p, q;
  if (!to_num(x, p) || !to_num(y, q)) unsupported("//", x, y);
  if (p.is_double || q.is_double) return py_ffloordiv(p.as_double(), q.as_double());
  return py_floordiv(p.i, q.i);
}

c10::IValue op_mod(Args a) {
  expect_args("operator.mod", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor())
    return y.isTensor() ? at::remainder(x.toTensor(), y.toTensor()) : at::remainder(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("%", x, y);
    return at::remainder(x.toScalar(), y.toTensor());
  }
  Num p, q;
  if (!to_num(x, p) || !to_num(y, q)) unsupported("%", x, y);
  if (p.is_double || q.is_double) return py_fmod(p.as_double(), q.as_double());
  return py_mod(p.i, q.i);
}

c10::IValue op_pow(Args a) {
  expect_args("operator.pow", a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  if (x.isTensor()) return y.isTensor() ? at::pow(x.toTensor(), y.toTensor()) : at::pow(x.toTensor(), y.toScalar());
  if (y.isTensor()) {
    Num n;
    if (!to_num(x, n)) unsupported("** or pow()", x, y);
    return at::pow(x.toScalar(), y.toTensor());
  }
  Num p, q;
  if (!to_num(x, p) || !to_num(y, q)) unsupported("** or pow()", x, y);
  if (!p.is_double && !q.is_double && q.i >= 0) {
    int64_t result = 1, base = p.i;
    for (int64_t e = q.i; e > 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return result;
  }
  if (p.as_double() == 0 && q.as_double() < 0) throw Error("0.0 cannot be raised to a negative power");
  return std::pow(p.as_double(), q.as_double());
}

c10::IValue op_matmul(Args a) {
  expect_args("operator.matmul", a, 2);
  if (!a[0]->isTensor() || !a[1]->isTensor()) unsupported("@", *a[0], *a[1]);
  return at::matmul(a[0]->toTensor(), a[1]->toTensor());
}

c10::IValue op_neg(Args a) {
  expect_args("operator.neg", a, 1);
  if (a[0]->isTensor()) return at::neg(a[0]->toTensor());
  Num n;
  if (!to_num(*a[0], n)) bad_unary("-", *a[0]);
  return n.is_double ? c10::IValue(-n.d) : c10::IValue(-n.i);
}

c10::IValue op_pos(Args a) {
  expect_args("operator.pos", a, 1);
  if (a[0]->isTensor()) return at::positive(a[0]->toTensor());
  Num n;
  if (!to_num(*a[0], n)) bad_unary("+", *a[0]);
  return num_value(n);
}

c10::IValue op_abs(Args a) {
  expect_args("operator.abs", a, 1);
  if (a[0]->isTensor()) return at::abs(a[0]->toTensor());
  Num n;
  if (!to_num(*a[0], n)) throw Error("bad operand type for abs(): '" + type_name(*a[0]) + "'");
  return n.is_double ? c10::IValue(std::fabs(n.d)) : c10::IValue(n.i < 0 ? -n.i : n.i);
}

c10::IValue op_invert(Args a) {
  expect_args("operator.invert", a, 1);
  if (a[0]->isTensor()) return at::bitwise_not(a[0]->toTensor());
  Num n;
  if (!to_num(*a[0], n) || n.is_double) bad_unary("~", *a[0]);
  return ~n.i;
}

// ---- comparisons ---------------------------------------------------------------

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

const char* cmp_symbol(Cmp c) {
  switch (c) {
    case Cmp::Eq:
      return "==";
    case Cmp::Ne:
      return "!=";
    case Cmp::Lt:
      return "<";
    case Cmp::Le:
      return "<=";
    case Cmp::Gt:
      return ">";
    case Cmp::Ge:
      return ">=";
  }
  return "?";
}

/// The comparison with its operands swapped (a < b  ==  b > a).
Cmp mirrored(Cmp c) {
  switch (c) {
    case Cmp::Lt:
      return Cmp::Gt;
    case Cmp::Le:
      return Cmp::Ge;
    case Cmp::Gt:
      return Cmp::Lt;
    case Cmp::Ge:
      return Cmp::Le;
    default:
      return c;
  }
}

at::Tensor tensor_cmp(Cmp c, const at::Tensor& t, const c10::IValue& other) {
  if (other.isTensor()) {
    const at::Tensor& o = other.toTensor();
    switch (c) {
      case Cmp::Eq:
        return at::eq(t, o);
      case Cmp::Ne:
        return at::ne(t, o);
      case Cmp::Lt:
        return at::lt(t, o);
      case Cmp::Le:
        return at::le(t, o);
      case Cmp::Gt:
        return at::gt(t, o);
      case Cmp::Ge:
        return at::ge(t, o);
    }
  }
  at::Scalar s = other.toScalar();
  switch (c) {
    case Cmp::Eq:
      return at::eq(t, s);
    case Cmp::Ne:
      return at::ne(t, s);
    case Cmp::Lt:
      return at::lt(t, s);
    case Cmp::Le:
      return at::le(t, s);
    case Cmp::Gt:
      return at::gt(t, s);
    case Cmp::Ge:
      return at::ge(t, s);
  }
  return {};
}

template <class T>
bool ordered(Cmp c, const T& x, const T& y) {
  switch (c) {
    case Cmp::Eq:
      return x == y;
    case Cmp::Ne:
      return x != y;
    case Cmp::Lt:
      return x < y;
    case Cmp::Le:
      return x <= y;
    case Cmp::Gt:
      return x > y;
    case Cmp::Ge:
      return x >= y;
  }
  return false;
}

c10::IValue compare(Cmp c, const char* name, Args a) {
  expect_args(name, a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  Num p, q;
  bool xn = to_num(x, p), yn = to_num(y, q);
  if (x.isTensor() && (y.isTensor() || yn)) return tensor_cmp(c, x.toTensor(), y);
  if (y.isTensor() && xn) return tensor_cmp(mirrored(c), y.toTensor(), x);
  if (xn && yn) {
    if (p.is_double || q.is_double) return ordered(c, p.as_double(), q.as_double());
    return ordered(c, p.i, q.i);
  }
  if (x.isString() && y.isString()) return ordered(c, x.toStringRef(), y.toStringRef());
  if (c == Cmp::Eq || c == Cmp::Ne) {
    bool same = false;
    if (x.isNone() || y.isNone()) {
      same = x.isNone() && y.isNone();
    } else if ((x.isList() || x.isTuple()) && (y.isList() || y.isTuple())) {
      if (x.isTuple() == y.isTuple()) {
        auto xs = items_of(x), ys = items_of(y);
        same = xs.size() == ys.size();
        for (size_t i = 0; same && i < xs.size(); ++i) {
          const c10::IValue* pair[2] = {&xs[i], &ys[i]};
          same = python_truth(compare(Cmp::Eq, name, Args(pair, 2)));
        }
      }
    } else if (x.isDevice() && y.isDevice()) {
      same = x.toDevice() == y.toDevice();
    } else if (x.isTensor() || y.isTensor()) {
      same = x.isTensor() && y.isTensor() && x.toTensor().is_same(y.toTensor());
    } else {
      same = x == y;
    }
    return c == Cmp::Eq ? same : !same;
  }
  throw Error(std::string("'") + cmp_symbol(c) + "' not supported between instances of '" + type_name(x) +
              "' and '" + type_name(y) + "'");
}

c10::IValue op_eq(Args a) { return compare(Cmp::Eq, "operator.eq", a); }
c10::IValue op_ne(Args a) { return compare(Cmp::Ne, "operator.ne", a); }
c10::IValue op_lt(Args a) { return compare(Cmp::Lt, "operator.lt", a); }
c10::IValue op_le(Args a) { return compare(Cmp::Le, "operator.le", a); }
c10::IValue op_gt(Args a) { return compare(Cmp::Gt, "operator.gt", a); }
c10::IValue op_ge(Args a) { return compare(Cmp::Ge, "operator.ge", a); }

// ---- bitwise / logic -------------------------------------------------------------

enum class Bit { And, Or, Xor, Lshift, Rshift };

c10::IValue bitwise(Bit b, const char* name, const char* sym, Args a) {
  expect_args(name, a, 2);
  const c10::IValue &x = *a[0], &y = *a[1];
  auto on_tensor = [b](const at::Tensor& t, const c10::IValue& o) -> at::Tensor {
    if (o.isTensor()) {
      switch (b) {
        case Bit::And:
          return at::bitwise_and(t, o.toTensor());
        case Bit::Or:
          return at::bitwise_or(t, o.toTensor());
        case Bit::Xor:
          return at::bitwise_xor(t, o.toTensor());
        case Bit::Lshift:
          return at::bitwise_left_shift(t, o.toTensor());
        case Bit::Rshift:
          return at::bitwise_right_shift(t, o.toTensor());
      }
    }
    switch (b) {
      case Bit::And:
        return at::bitwise_and(t, o.toScalar());
      case Bit::Or:
        return at::bitwise_or(t, o.toScalar());
      case Bit::Xor:
        return at::bitwise_xor(t, o.toScalar());
      case Bit::Lshift:
        return at::bitwise_left_shift(t, o.toScalar());
      case Bit::Rshift:
        return at::bitwise_right_shift(t, o.toScalar());
    }
    return {};
  };
  Num p, q;
  bool xn = to_num(x, p) && !p.is_double, yn = to_num(y, q) && !q.is_double;
  if (x.isTensor() && (y.isTensor() || yn)) return on_tensor(x.toTensor(), y);
  if (y.isTensor() && xn) {
    if (b == Bit::Lshift) return at::bitwise_left_shift(x.toScalar(), y.toTensor());
    if (b == Bit::Rshift) return at::bitwise_right_shift(x.toScalar(), y.toTensor());
    return on_tensor(y.toTensor(), x);  // commutative
  }
  if (!xn || !yn) unsupported(sym, x, y);
  bool both_bool = x.isBool() && y.isBool();
  switch (b) {
    case Bit::And:
      return both_bool ? c10::IValue(bool(p.i & q.i)) : c10::IValue(p.i & q.i);
    case Bit::Or:
      return both_bool ? c10::IValue(bool(p.i | q.i)) : c10::IValue(p.i | q.i);
    case Bit::Xor:
      return both_bool ? c10::IValue(bool(p.i ^ q.i)) : c10::IValue(p.i ^ q.i);
    case Bit::Lshift:
      if (q.i < 0) throw Error("negative shift count");
      return q.i >= 64 ? int64_t(0) : int64_t(uint64_t(p.i) << q.i);
    case Bit::Rshift:
      if (q.i < 0) throw Error("negative shift count");
      return q.i >= 64 ? int64_t(p.i < 0 ? -1 : 0) : int64_t(p.i >> q.i);
  }
  return {};
}

c10::IValue op_and(Args a) { return bitwise(Bit::And, "operator.and_", "&", a); }
c10::IValue op_or(Args a) { return bitwise(Bit::Or, "operator.or_", "|", a); }
c10::IValue op_xor(Args a) { return bitwise(Bit::Xor, "operator.xor", "^", a); }
c10::IValue op_lshift(Args a) { return bitwise(Bit::Lshift, "operator.lshift", "<<", a); }
c10::IValue op_rshift(Args a) { return bitwise(Bit::Rshift, "operator.rshift", ">>", a); }

c10::IValue op_not(Args a) {
  expect_args("operator.not_", a, 1);
  return !python_truth(*a[0]);
}

c10::IValue op_truth(Args a) {
  expect_args("operator.truth", a, 1);
  return python_truth(*a[0]);
}

c10::IValue op_contains(Args a) {
  expect_args("operator.contains", a, 2);
  const c10::IValue &seq = *a[0], &x = *a[1];
  if (seq.isTensor()) {  // torch's Tensor.__contains__
    const at::Tensor& t = seq.toTensor();
    at::Tensor eq = x.isTensor() ? at::eq(t, x.toTensor()) : at::eq(t, x.toScalar());
    return eq.any().item<bool>();
  }
  if (seq.isString()) {
    if (!x.isString()) throw Error("'in <string>' requires string as left operand, not " + type_name(x));
    return seq.toStringRef().find(x.toStringRef()) != std::string::npos;
  }
  if (seq.isGenericDict()) return seq.toGenericDict().contains(x);
  if (seq.isList() || seq.isTuple()) {
    for (const auto& e : items_of(seq)) {
      const c10::IValue* pair[2] = {&e, &x};
      if (python_truth(compare(Cmp::Eq, "operator.contains", Args(pair, 2)))) return true;
    }
    return false;
  }
  throw Error("argument of type '" + type_name(seq) + "' is not iterable");
}

/// operator.iadd etc.: in place on tensors (t += x), as the plain op otherwise.
template <c10::IValue (*Plain)(Args), at::Tensor& (at::Tensor::*InplaceT)(const at::Tensor&, const at::Scalar&) const,
          at::Tensor& (at::Tensor::*InplaceS)(const at::Scalar&, const at::Scalar&) const>
c10::IValue inplace_alpha(Args a) {
  if (a.size() == 2 && a[0]->isTensor() && (a[1]->isTensor() || a[1]->isScalar())) {
    at::Tensor t = a[0]->toTensor();
    if (a[1]->isTensor()) return (t.*InplaceT)(a[1]->toTensor(), 1);
    return (t.*InplaceS)(a[1]->toScalar(), 1);
  }
  return Plain(a);
}

c10::IValue op_imul(Args a) {
  if (a.size() == 2 && a[0]->isTensor() && (a[1]->isTensor() || a[1]->isScalar())) {
    at::Tensor t = a[0]->toTensor();
    return a[1]->isTensor() ? t.mul_(a[1]->toTensor()) : t.mul_(a[1]->toScalar());
  }
  return op_mul(a);
}

c10::IValue op_itruediv(Args a) {
  if (a.size() == 2 && a[0]->isTensor() && (a[1]->isTensor() || a[1]->isScalar())) {
    at::Tensor t = a[0]->toTensor();
    return a[1]->isTensor() ? t.div_(a[1]->toTensor()) : t.div_(a[1]->toScalar());
  }
  return op_truediv(a);
}

const std::unordered_map<std::string, BuiltinFn>& builtin_table() {
  static const std::unordered_map<std::string, BuiltinFn> table = [] {
    std::unordered_map<std::string, BuiltinFn> t = {
      {"operator.getitem", op_getitem},
      {"operator.setitem", op_setitem},
      {"operator.add", op_add},
      {"operator.sub", op_sub},
      {"operator.mul", op_mul},
      {"operator.truediv", op_truediv},
      {"operator.floordiv", op_floordiv},
      {"operator.mod", op_mod},
      {"operator.pow", op_pow},
      {"operator.neg", op_neg},
      {"operator.pos", op_pos},
      {"operator.abs", op_abs},
      {"operator.eq", op_eq},
      {"operator.ne", op_ne},
      {"operator.lt", op_lt},
      {"operator.le", op_le},
      {"operator.gt", op_gt},
      {"operator.ge", op_ge},
      {"operator.and_", op_and},
      {"operator.or_", op_or},
      {"operator.xor", op_xor},
      {"operator.not_", op_not},
      {"operator.invert", op_invert},
      {"operator.matmul", op_matmul},
      {"operator.iadd", inplace_alpha<op_add, &at::Tensor::add_, &at::Tensor::add_>},
      {"operator.isub", inplace_alpha<op_sub, &at::Tensor::sub_, &at::Tensor::sub_>},
      {"operator.imul", op_imul},
      {"operator.itruediv", op_itruediv},
      {"operator.lshift", op_lshift},
      {"operator.rshift", op_rshift},
      {"operator.contains", op_contains},
      {"operator.truth", op_truth},
      {"getattr", op_getattr},
    };
    for (const ScriptBuiltin& b : script_builtins()) t.emplace(b.name, b.fn);
    return t;
  }();
  return table;
}

}  // namespace

bool python_truth(const c10::IValue& v) {
  if (v.isNone()) return false;
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt() != 0;
  if (v.isDouble()) return v.toDouble() != 0;
  if (v.isString()) return !v.toStringRef().empty();
  if (v.isTuple()) return !v.toTupleRef().elements().empty();
  if (v.isList()) return !v.toListRef().empty();
  if (v.isGenericDict()) return !v.toGenericDict().empty();
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.numel() != 1) throw Error("Boolean value of Tensor with more than one value is ambiguous");
    return t.is_nonzero();
  }
  return true;
}

BuiltinFn find_builtin(const std::string& name) {
  const auto& t = builtin_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace fx::detail
