// fxcpp::fused_kernel without a compiler: the program's operators one by
// one as ATen operators (see program_aten.h). Slower than the kernel (every
// value is a tensor written and read again, as in the graph before fusion)
// but the same values to rounding, so a saved graph runs anywhere.
#include "kernels/program_aten.h"

#include <fx/error.h>

#include <ATen/ATen.h>

#include <string>
#include <unordered_map>

namespace fx::compiler::detail {

std::vector<at::Tensor> run_program_on_aten(const Program& p, const std::vector<at::Tensor>& inputs,
                                            at::IntArrayRef shape) {
  std::vector<at::Tensor> v(p.ops.size());
  const double row_length = static_cast<double>(shape.back());
  auto operand = [&](const Operand& o) -> at::Tensor {
    switch (o.kind) {
      case Operand::Kind::Value: return v[static_cast<size_t>(o.value)];
      case Operand::Kind::Number: return at::scalar_tensor(o.number, at::kFloat);
      case Operand::Kind::RowLength: return at::scalar_tensor(row_length, at::kFloat);
    }
    return {};
  };
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    if (o.name == "input") {
      v[i] = inputs.at(i).to(at::kFloat).expand(shape);
      continue;
    }
    const std::string& f = o.name;
    const at::Tensor a = operand(o.args.at(0));
    const at::Tensor b = o.args.size() > 1 ? operand(o.args[1]) : at::Tensor();
    at::Tensor r;
    using Unary = at::Tensor (*)(const at::Tensor&);
    static const std::unordered_map<std::string, Unary> unary = {
        {"neg", [](const at::Tensor& t) { return at::neg(t); }},
        {"abs", [](const at::Tensor& t) { return at::abs(t); }},
        {"exp", [](const at::Tensor& t) { return at::exp(t); }},
        {"log", [](const at::Tensor& t) { return at::log(t); }},
        {"sqrt", [](const at::Tensor& t) { return at::sqrt(t); }},
        {"rsqrt", [](const at::Tensor& t) { return at::rsqrt(t); }},
        {"reciprocal", [](const at::Tensor& t) { return at::reciprocal(t); }},
        {"tanh", [](const at::Tensor& t) { return at::tanh(t); }},
        {"erf", [](const at::Tensor& t) { return at::erf(t); }},
        {"sigmoid", [](const at::Tensor& t) { return at::sigmoid(t); }},
        {"relu", [](const at::Tensor& t) { return at::relu(t); }},
        {"gelu", [](const at::Tensor& t) { return at::gelu(t); }},
        {"gelu_tanh", [](const at::Tensor& t) { return at::gelu(t, "tanh"); }},
        {"silu", [](const at::Tensor& t) { return at::silu(t); }},
    };
    if (auto it = unary.find(f); it != unary.end()) r = it->second(a);
    else if (f == "add") r = a + b;
    else if (f == "sub") r = a - b;
    else if (f == "mul") r = a * b;
    else if (f == "div") r = a / b;
    else if (f == "maximum") r = at::maximum(a, b);
    else if (f == "minimum") r = at::minimum(a, b);
    else if (f == "clamp_min") r = at::clamp_min(a, b);
    else if (f == "clamp_max") r = at::clamp_max(a, b);
    else if (f == "pow") r = at::pow(a, b);
    else if (f == "gelu_backward") r = at::gelu_backward(a, b);
    else if (f == "gelu_tanh_backward") r = at::gelu_backward(a, b, "tanh");
    else if (f == "le_select") r = at::where(a <= b, operand(o.args.at(2)), operand(o.args.at(3)));
    else if (f == "sum") r = at::sum(a, {-1}, true);
    else if (f == "max") r = at::amax(a, {-1}, true);
    else if (f == "mean") r = at::mean(a, {-1}, true);
    else if (f == "var") r = at::var(a, at::IntArrayRef{-1}, static_cast<int64_t>(o.args.at(1).number), true);
    else throw Error("fused kernel: no ATen operator for " + f);
    v[i] = std::move(r);
  }
  std::vector<at::Tensor> out;
  for (const auto& [value, kind] : p.outputs) {
    (void)kind;
    out.push_back(v[static_cast<size_t>(value)]);
  }
  return out;
}

}  // namespace fx::compiler::detail
