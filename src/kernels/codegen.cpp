// The code generator (codegen.h): a program becomes one C++ function.
//
// Per work item (a row, or a piece of a row when nothing reduces) the kernel
// runs one loop over the row per level of reductions, then a last loop that
// computes and stores the full outputs. Each loop recomputes the full values
// it needs from the inputs (re-read from cache, never written to memory);
// row values live in registers as broadcast vectors between the loops. The
// loops run whole vectors, then one tail with partial loads and stores;
// reductions of the tail take its lanes alone. Variance is Welford's (per
// lane, combined with Chan's formula), as ATen computes it. Every pointwise
// operator is written as ATen's vectorised CPU kernel writes it, so a fused
// chain rounds as the unfused one does, up to the order of floating-point
// sums.
#include "kernels/codegen.h"

#include "onednn/cpu_capability.h"

#include <fx/error.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace fx::compiler::detail {
namespace {

/// The generator's version: part of every symbol, so a changed generator never loads an old kernel.
constexpr const char* kGeneratorVersion = "fxk2";

/// A 64-bit FNV-1a hash, hex.
std::string fnv_hex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The generated source spells out KernelArgs's members from the same list.
#define FX_STRINGIFY_(...) #__VA_ARGS__
#define FX_STRINGIFY(...) FX_STRINGIFY_(__VA_ARGS__)

/// The runtime the kernels share: the argument struct, loads and stores by
/// stride (1: vector, 0: broadcast, else gathered), horizontal reductions
/// and Welford's accumulator.
const char* kPrelude = R"(#include <ATen/cpu/vec/vec.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

namespace {
using V = at::vec::Vectorized<float>;
constexpr int64_t VS = V::size();
struct Args {
  )" FX_STRINGIFY(FX_KERNEL_ARGS_MEMBERS) R"(
};
inline V ld(const float* p, int64_t s) {
  if (s == 1) return V::loadu(p);
  if (s == 0) return V(*p);
  alignas(64) float b[VS];
  for (int64_t k = 0; k < VS; ++k) b[k] = p[k * s];
  return V::loadu(b);
}
inline V ldn(const float* p, int64_t s, int64_t n) {
  if (s == 0) return V(*p);
  alignas(64) float b[VS] = {};
  for (int64_t k = 0; k < n; ++k) b[k] = p[k * s];
  return V::loadu(b);
}
inline V ld(const uint8_t* p, int64_t s) {
  alignas(64) float b[VS];
  if (s == 1) {
    for (int64_t k = 0; k < VS; ++k) b[k] = p[k];
  } else {
    for (int64_t k = 0; k < VS; ++k) b[k] = p[k * s];
  }
  return V::loadu(b);
}
inline V ldn(const uint8_t* p, int64_t s, int64_t n) {
  alignas(64) float b[VS] = {};
  for (int64_t k = 0; k < n; ++k) b[k] = p[k * s];
  return V::loadu(b);
}
inline void st(float* p, int64_t s, const V& v) {
  if (s == 1) {
    v.store(p);
    return;
  }
  alignas(64) float b[VS];
  v.store(b);
  for (int64_t k = 0; k < VS; ++k) p[k * s] = b[k];
}
inline void stn(float* p, int64_t s, const V& v, int64_t n) {
  alignas(64) float b[VS];
  v.store(b);
  for (int64_t k = 0; k < n; ++k) p[k * s] = b[k];
}
inline float lane0(const V& v) {
  alignas(64) float b[VS];
  v.store(b);
  return b[0];
}
inline float hsum(const V& v) {
  alignas(64) float b[VS];
  v.store(b);
  float s = 0.f;
  for (int64_t k = 0; k < VS; ++k) s += b[k];
  return s;
}
inline float nanmax(float a, float b) { return (a != a || a > b) ? a : b; }
inline float hmax(const V& v) {
  alignas(64) float b[VS];
  v.store(b);
  float m = b[0];
  for (int64_t k = 1; k < VS; ++k) m = nanmax(m, b[k]);
  return m;
}
inline V masked(const V& identity, const V& x, int64_t n) { return V::set(identity, x, n); }
struct Welford {
  V mean = V(0.f), m2 = V(0.f);
  float n = 0.f;
  float tmean = 0.f, tm2 = 0.f, tn = 0.f;
  void add(const V& x) {
    n += 1.f;
    const V d = x - mean;
    mean = mean + d * V(1.f / n);
    m2 = m2 + d * (x - mean);
  }
  void add_tail(const V& x, int64_t cnt) {
    alignas(64) float b[VS];
    x.store(b);
    for (int64_t k = 0; k < cnt; ++k) {
      tn += 1.f;
      const float d = b[k] - tmean;
      tmean += d / tn;
      tm2 += d * (b[k] - tmean);
    }
  }
  static void combine(float& n, float& mean, float& m2, float nb, float meanb, float m2b) {
    if (nb == 0.f) return;
    const float total = n + nb, d = meanb - mean;
    mean += d * (nb / total);
    m2 += m2b + d * d * (n * nb / total);
    n = total;
  }
  void finish(float& out_mean, float& out_m2, float& out_n) const {
    alignas(64) float mb[VS], qb[VS];
    mean.store(mb);
    m2.store(qb);
    float cn = 0.f, cmean = 0.f, cm2 = 0.f;
    for (int64_t k = 0; k < VS; ++k) combine(cn, cmean, cm2, n, mb[k], qb[k]);
    combine(cn, cmean, cm2, tn, tmean, tm2);
    out_mean = cmean;
    out_m2 = cm2;
    out_n = cn;
  }
};
}  // namespace
)";

/// A float literal in hexadecimal (exact).
std::string float_literal(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return buf;
}

/// A broadcast vector of the float `v` (exact; NaN and infinities by name).
std::string hexfloat(double v) {
  const float f = static_cast<float>(v);
  if (f != f) return "V(std::numeric_limits<float>::quiet_NaN())";
  if (f == std::numeric_limits<float>::infinity()) return "V(std::numeric_limits<float>::infinity())";
  if (f == -std::numeric_limits<float>::infinity()) return "V(-std::numeric_limits<float>::infinity())";
  return "V(" + float_literal(f) + ")";
}

class Generator {
 public:
  Generator(const Program& p, std::string symbol) : p_(p), symbol_(std::move(symbol)) {
  }

  std::string run(const std::string& program_text) {
    const int n_in = p_.inputs, n_ops = n_in + static_cast<int>(p_.outputs.size());
    o_ << "// fxcpp fused kernel " << symbol_ << " (generated by fxcpp " << kGeneratorVersion << ")\n// "
       << program_text << "\n"
       << kPrelude << "\nextern \"C\" void " << symbol_ << "(const Args* a, int64_t begin, int64_t end) {\n"
       << "  const int64_t nd = a->ndim, inner = a->sizes[nd - 1];\n"
       << "  const V vn(static_cast<float>(inner));\n  (void)vn;\n";
    for (int k = 0; k < n_ops; ++k) o_ << "  const int64_t s" << k << " = a->strides[" << k << " * nd + nd - 1];\n";
    plan_row_buffers();
    for (const auto& [v, loop] : kept_in_)
      o_ << "  std::unique_ptr<float[]> b" << v << "(new float[inner + VS]);  // kept by loop " << loop << "\n";
    o_ << "  for (int64_t w = begin; w < end; ++w) {\n"
       << "    const int64_t row = w / a->chunks, lo = (w % a->chunks) * a->chunk;\n"
       << "    const int64_t hi = lo + a->chunk < inner ? lo + a->chunk : inner;\n"
       << "    (void)lo;\n    (void)hi;\n";
    for (int k = 0; k < n_ops; ++k) o_ << "    int64_t o" << k << " = 0;\n";
    o_ << "    for (int64_t d = nd - 2, r = row; d >= 0; --d) {\n"
       << "      const int64_t i = r % a->sizes[d];\n      r /= a->sizes[d];\n";
    for (int k = 0; k < n_ops; ++k) o_ << "      o" << k << " += i * a->strides[" << k << " * nd + d];\n";
    o_ << "    }\n";
    for (int k = 0; k < n_in; ++k) {
      const char* type = input_type(k) == "u8" ? "uint8_t" : "float";
      o_ << "    const " << type << "* p" << k << " = reinterpret_cast<const " << type << "*>(a->data[" << k << "]) + o"
         << k << ";\n";
    }
    for (size_t k = 0; k < p_.outputs.size(); ++k)
      o_ << "    float* q" << k << " = reinterpret_cast<float*>(a->data[" << n_in + k << "]) + o" << n_in + k << ";\n";
    const int levels = p_.reduction_levels();
    for (int level = 1; level <= levels; ++level) {
      reduction_loop(level);
      row_values(level);
    }
    final_loop();
    for (size_t k = 0; k < p_.outputs.size(); ++k)
      if (p_.outputs[k].second != OutputKind::Full) o_ << "    q" << k << "[0] = lane0(r" << p_.outputs[k].first << ");\n";
    o_ << "  }\n}\n";
    return o_.str();
  }

 private:
  const std::string& input_type(int k) const {
    static const std::string f32 = "f32";
    return static_cast<size_t>(k) < p_.input_types.size() ? p_.input_types[k] : f32;
  }

  std::string operand(const Operand& a) const {
    switch (a.kind) {
      case Operand::Kind::Value: return (p_.ops[a.value].row ? "r" : "v") + std::to_string(a.value);
      case Operand::Kind::RowLength: return "vn";
      case Operand::Kind::Number: break;
    }
    return hexfloat(a.number);
  }

  /// The vector expression of op i (its operands already named).
  std::string expression(int i) const {
    const Op& o = p_.ops[i];
    const std::string A = operand(o.args[0]);
    const std::string B = o.args.size() > 1 ? operand(o.args[1]) : "";
    const std::string& f = o.name;
    if (f == "le_select")
      return "V::blendv(" + operand(o.args[3]) + ", " + operand(o.args[2]) + ", " + A + " <= " + B + ")";
    if (f == "gelu_backward")  // ATen's GeluBackwardKernelImpl: dy * (cdf + x * pdf)
      return A + " * (V(0.5f) * (V(1.f) + (" + B + " * V(static_cast<float>(M_SQRT1_2))).erf()) + " + B +
             " * (V(static_cast<float>(M_2_SQRTPI * M_SQRT1_2 * 0.5)) * (" + B + " * " + B + " * V(-0.5f)).exp()))";
    if (f == "gelu_tanh_backward") {
      // ATen's: left' = 0.5 (1 + tanh(u)), right' = 0.5 x (1 - tanh(u)^2) beta (1 + 3 kappa x^2), u = beta (x + kappa x^3).
      const std::string beta = "V(static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5))", kappa = "V(0.044715f)";
      const std::string t = "(" + beta + " * (" + B + " + " + kappa + " * (" + B + " * (" + B + " * " + B + ")))).tanh()";
      return "[&] { const V th = " + t + "; return " + A + " * (V(0.5f) * (V(1.f) + th) + V(0.5f) * " + B +
             " * (V(1.f) - th * th) * (" + beta + " * (V(1.f) + V(3.f) * " + kappa + " * (" + B + " * " + B +
             "))));}()";
    }
    if (f == "add") return A + " + " + B;
    if (f == "sub") return A + " - " + B;
    if (f == "mul") return A + " * " + B;
    if (f == "div") return A + " / " + B;
    if (f == "maximum" || f == "minimum" || f == "clamp_min" || f == "clamp_max")
      return "at::vec::" + f + "(" + A + ", " + B + ")";
    if (f == "pow") {
      // ATen's pow(Tensor, Scalar) kernel: these exponents by multiplication and roots.
      if (o.args[1].kind == Operand::Kind::Number) {
        const double e = o.args[1].number;
        if (e == 1) return A;
        if (e == 2) return A + " * " + A;
        if (e == 3) return A + " * " + A + " * " + A;
        if (e == 0.5) return A + ".sqrt()";
        if (e == -0.5) return A + ".rsqrt()";
        if (e == -1) return A + ".reciprocal()";
        if (e == -2) return "(" + A + " * " + A + ").reciprocal()";
      }
      return A + ".pow(" + B + ")";
    }
    if (f == "neg" || f == "abs" || f == "exp" || f == "log" || f == "sqrt" || f == "rsqrt" || f == "reciprocal" ||
        f == "tanh" || f == "erf")
      return A + "." + f + "()";
    if (f == "sigmoid") return "((V(0.f) - " + A + ").exp() + V(1.f)).reciprocal()";
    if (f == "relu") return "at::vec::clamp_min(" + A + ", V(0.f))";
    if (f == "gelu") return A + " * V(0.5f) * (V(1.f) + (" + A + " * V(static_cast<float>(M_SQRT1_2))).erf())";
    if (f == "gelu_tanh")
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2 / pi) (x + 0.044715 x^3): one exp where ATen's
      // formula takes a tanh (three times the time), and no cancellation in 1 + tanh(u) for negative x (so
      // within 1e-6 of the exact value where ATen's own is 1e-5 off; docs/compiler.md).
      return A + " / (V(1.f) + (V(static_cast<float>(-M_SQRT2 * M_2_SQRTPI)) * (" + A + " + V(0.044715f) * (" + A +
             " * " + A + " * " + A + "))).exp())";
    if (f == "silu") return A + " / (V(1.f) + " + A + ".neg().exp())";
    throw Error("fused kernel: no code for operator " + f);
  }

  /// The full values `roots` need in loop `loop`, in order (inputs included; a value kept in a row
  /// buffer by an earlier loop is read from it, its operands not needed).
  std::vector<int> needed(const std::vector<int>& roots, int loop) const {
    std::set<int> seen;
    std::vector<int> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      if (p_.ops[v].row || !seen.insert(v).second) continue;
      if (kept_in_.count(v) && kept_in_.at(v) < loop) continue;
      for (const Operand& a : p_.ops[v].args)
        if (a.kind == Operand::Kind::Value) stack.push_back(a.value);
    }
    return {seen.begin(), seen.end()};
  }

  /// Operators worth keeping a row of (a transcendental function: recomputing it costs more than
  /// re-reading it from cache).
  static bool expensive(const std::string& f) {
    return f == "exp" || f == "log" || f == "tanh" || f == "erf" || f == "sigmoid" || f == "silu" || f == "gelu" ||
           f == "gelu_tanh" || f == "pow" || f == "gelu_backward" || f == "gelu_tanh_backward";
  }

  /// The roots of loop `loop` (1 .. levels: reductions' operands; levels + 1: full outputs).
  std::vector<int> roots_of(int loop) const {
    std::vector<int> roots;
    if (loop > p_.reduction_levels()) {
      for (const auto& [v, kind] : p_.outputs)
        if (kind == OutputKind::Full) roots.push_back(v);
    } else {
      for (const Op& o : p_.ops)
        if (is_reduction(o.name) && o.level == loop) roots.push_back(o.args[0].value);
    }
    return roots;
  }

  /// Which expensive full values a reduction's loop computes that a later loop needs again: kept in a
  /// row buffer (softmax's exp(x - max), read again to scale it, as ATen's kernel keeps it in its output).
  void plan_row_buffers() {
    const int loops = p_.reduction_levels() + 1;
    if (loops == 1) return;
    std::vector<std::set<int>> uses(loops + 1);
    for (int l = 1; l <= loops; ++l) {
      const std::vector<int> n = needed(roots_of(l), l);
      uses[l] = std::set<int>(n.begin(), n.end());
    }
    for (int l = 1; l < loops; ++l)
      for (int v : uses[l]) {
        if (kept_in_.count(v) || p_.ops[v].name == "input" || !expensive(p_.ops[v].name)) continue;
        for (int later = l + 1; later <= loops; ++later)
          if (uses[later].count(v)) kept_in_[v] = l;
      }
  }

  /// One loop body: the full values in `values`, then `tail` (accumulations or stores).
  void body(const std::vector<int>& values, bool tail, const std::string& indent,
            const std::function<void(bool)>& finish) {
    for (int v : values) {
      const std::string buffer = "b" + std::to_string(v) + ".get() + i";
      if (kept_in_.count(v) && kept_in_.at(v) < loop_) {
        o_ << indent << "const V v" << v << " = " << (tail ? "V::loadu(" + buffer + ", cnt)" : "V::loadu(" + buffer + ")")
           << ";\n";
        continue;
      }
      if (p_.ops[v].name == "input")
        o_ << indent << "const V v" << v << " = "
           << (tail ? "ldn(p" + std::to_string(v) + " + i * s" + std::to_string(v) + ", s" + std::to_string(v) + ", cnt)"
                    : "ld(p" + std::to_string(v) + " + i * s" + std::to_string(v) + ", s" + std::to_string(v) + ")")
           << ";\n";
      else
        o_ << indent << "const V v" << v << " = " << expression(v) << ";\n";
      if (kept_in_.count(v) && kept_in_.at(v) == loop_)
        o_ << indent << "v" << v << ".store(" << buffer << (tail ? ", cnt);\n" : ");\n");
    }
    finish(tail);
  }

  /// A loop over [from, to): whole vectors, then the tail.
  void loop(const std::string& from, const std::string& to, const std::vector<int>& values,
            const std::function<void(bool)>& finish) {
    o_ << "    {\n    int64_t i = " << from << ";\n"
       << "    for (; i + VS <= " << to << "; i += VS) {\n";
    body(values, false, "      ", finish);
    o_ << "    }\n    if (i < " << to << ") {\n      const int64_t cnt = " << to << " - i;\n      (void)cnt;\n";
    body(values, true, "      ", finish);
    o_ << "    }\n    }\n";
  }

  void reduction_loop(int level) {
    std::vector<int> reductions, roots;
    for (size_t i = 0; i < p_.ops.size(); ++i) {
      const Op& o = p_.ops[i];
      if (!is_reduction(o.name) || o.level != level) continue;
      // A mean computed by its operand's var's accumulator needs no loop of its own.
      reductions.push_back(static_cast<int>(i));
      roots.push_back(o.args[0].value);
    }
    std::set<int> welfords;     // operands accumulated by Welford in this loop
    std::set<int> by_welford;   // the reductions read from them (var; a mean is sum / n, as ATen's, inf rows included)
    for (int r : reductions) {
      const Op& o = p_.ops[r];
      const int x = o.args[0].value;
      if (o.name == "var") {
        by_welford.insert(r);
        if (welfords.insert(x).second) o_ << "    Welford w" << x << ";\n";
      } else {
        o_ << "    V acc" << r << "(" << (o.name == "max" ? "-std::numeric_limits<float>::infinity()" : "0.f") << ");\n";
      }
    }
    loop_ = level;
    loop("0", "inner", needed(roots, level), [&](bool tail) {
      std::set<int> added;
      for (int r : reductions) {
        const Op& o = p_.ops[r];
        const int x = o.args[0].value;
        const std::string X = "v" + std::to_string(x);
        if (by_welford.count(r)) {
          if (added.insert(x).second)
            o_ << "      w" << x << (tail ? ".add_tail(" + X + ", cnt);\n" : ".add(" + X + ");\n");
        } else if (o.name == "max") {
          o_ << "      acc" << r << " = at::vec::maximum(acc" << r << ", "
             << (tail ? "masked(V(-std::numeric_limits<float>::infinity()), " + X + ", cnt)" : X) << ");\n";
        } else {
          o_ << "      acc" << r << " = acc" << r << " + " << (tail ? "masked(V(0.f), " + X + ", cnt)" : X) << ";\n";
        }
      }
    });
    for (int x : welfords)
      o_ << "    float mean" << x << ", m2" << x << ", n" << x << ";\n    w" << x << ".finish(mean" << x << ", m2" << x
         << ", n" << x << ");\n    (void)mean" << x << ";\n";
    for (int r : reductions) {
      const Op& o = p_.ops[r];
      const int x = o.args[0].value;
      o_ << "    const V r" << r << "(";
      if (o.name == "var")  // ATen: m2 / max(0, n - correction)
        o_ << "m2" << x << " / std::max(0.f, n" << x << " - " << float_literal(o.args[1].number) << ")";
      else if (o.name == "max")
        o_ << "hmax(acc" << r << ")";
      else if (o.name == "mean")
        o_ << "hsum(acc" << r << ") / static_cast<float>(inner)";
      else
        o_ << "hsum(acc" << r << ")";
      o_ << ");\n";
    }
  }

  void row_values(int level) {
    for (size_t i = 0; i < p_.ops.size(); ++i) {
      const Op& o = p_.ops[i];
      if (o.row && !is_reduction(o.name) && o.level == level)
        o_ << "    const V r" << i << " = " << expression(static_cast<int>(i)) << ";\n";
    }
  }

  void final_loop() {
    std::vector<int> roots;
    for (const auto& [v, kind] : p_.outputs)
      if (kind == OutputKind::Full) roots.push_back(v);
    if (roots.empty()) return;
    const bool whole_rows = p_.reduces();
    loop_ = p_.reduction_levels() + 1;
    loop(whole_rows ? "0" : "lo", whole_rows ? "inner" : "hi", needed(roots, loop_), [&](bool tail) {
      for (size_t k = 0; k < p_.outputs.size(); ++k) {
        if (p_.outputs[k].second != OutputKind::Full) continue;
        const std::string q = "q" + std::to_string(k), s = "s" + std::to_string(p_.inputs + k);
        o_ << "      " << (tail ? "stn(" : "st(") << q << " + i * " << s << ", " << s << ", v" << p_.outputs[k].first
           << (tail ? ", cnt);\n" : ");\n");
      }
    });
  }

  const Program& p_;
  std::string symbol_;
  std::map<int, int> kept_in_;  // value -> the loop that stores its row buffer
  int loop_ = 0;                // the loop being written
  std::ostringstream o_;
};

}  // namespace

GeneratedKernel generate_kernel(const std::string& program_text) {
  const Program p = parse_program(program_text);
  GeneratedKernel k;
  k.symbol = std::string(kGeneratorVersion) + "_" + fnv_hex(program_text);
  k.source = Generator(p, k.symbol).run(program_text);
  return k;
}

int64_t kernel_vector_width() {
  switch (fx::detail::aten_cpu_capability()) {
    case fx::detail::CpuCapability::Avx512: return 16;
    case fx::detail::CpuCapability::Avx2: return 8;
    case fx::detail::CpuCapability::Default: break;
  }
  return 8;  // vec_base's Vectorized<float>: 32 bytes
}

const std::vector<std::string>& kernel_isa() {
  static const std::vector<std::string> isa = []() -> std::vector<std::string> {
    switch (fx::detail::aten_cpu_capability()) {  // kernel_flags' -m options, spelled as the kernel names them
      case fx::detail::CpuCapability::Avx512: return {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", "f16c"};
      case fx::detail::CpuCapability::Avx2: return {"avx2", "fma", "f16c"};
      case fx::detail::CpuCapability::Default: break;
    }
    return {};
  }();
  return isa;
}

const std::vector<std::string>& kernel_flags() {
  static const std::vector<std::string> flags = [] {
    // -ffp-contract=off: no a * b + c made one FMA across what were separate operators, so a chain of
    // exact operations (dropout's mask * x + residual) rounds as ATen's unfused operators do, to the bit.
    std::vector<std::string> f = {"-O3", "-std=c++17", "-shared", "-fPIC", "-w", "-ffp-contract=off"};
    switch (fx::detail::aten_cpu_capability()) {
      case fx::detail::CpuCapability::Avx512:
        f.insert(f.end(), {"-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-mf16c",
                           "-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512"});
        break;
      case fx::detail::CpuCapability::Avx2:
        f.insert(f.end(), {"-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"});
        break;
      case fx::detail::CpuCapability::Default:
        f.insert(f.end(), {"-DCPU_CAPABILITY=DEFAULT"});
        break;
    }
    std::string path = FX_TORCH_INCLUDE_PATH;
    for (size_t start = 0; start <= path.size();) {
      const size_t end = std::min(path.find(':', start), path.size());
      if (end > start) f.push_back("-I" + path.substr(start, end - start));
      start = end + 1;
    }
    f.insert(f.end(), {"-Wl,--no-as-needed", "-lsleef"});
    return f;
  }();
  return flags;
}

}  // namespace fx::compiler::detail
