// Post-training int8 quantization, torch.ao.quantization's FX workflow in C++:
// fuse + prepare (observers), calibrate on sample data, convert to the
// reference quantized graph.
//
// Traces the demo ResidualNet, prepares it with the onednn default mapping
// (histogram observers on activations, per-channel int8 weights), runs a few
// calibration batches, converts, and checks that the reference int8 model
// stays close to the float one. Prints what was quantized and the generated
// code of the reference graph (quantize_per_tensor → dequantize around each
// float op, conv on dequantized int8 weights). Then the same in one call,
// fx::quantization::quantize, lowered to oneDNN's int8 kernels, and with
// 7-bit weights, which those kernels run exactly on CPUs without VNNI.
//
//   build/examples/quantize
#include <fx/examples/residual_net.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/prepare.h>
#include <fx/quantization/quantize.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  namespace q = fx::quantization;
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  model->eval();  // post-training quantization needs inference batch norm
  fx::TraceOptions trace_options;
  trace_options.dynamic_dims = {{0, 0}};  // any batch size
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 32, 32})}, {}, trace_options);

  // 1. fuse + observe: conv+bn(+relu) become one layer, observers go where
  //    the int8 graph will quantize.
  q::PrepareReport report;
  auto prepared = q::prepare(gm, q::get_default_qconfig_mapping("onednn"), {at::randn({1, 3, 32, 32})}, &report);
  std::cout << report.observer_nodes << " observers (" << report.observer_modules << " distinct), fused:\n";
  for (const std::string& f : report.fuse.fused) std::cout << "  " << f << "\n";

  // 2. calibrate: run representative data through the observers.
  {
    at::NoGradGuard no_grad;
    for (int i = 0; i < 8; ++i) prepared->forward({at::randn({4, 3, 32, 32})});
  }

  // 3. convert: the reference quantized graph.
  q::ConvertReport converted;
  auto int8 = q::convert(prepared, &converted);
  std::cout << converted.str() << int8->code();

  at::Tensor x = at::randn({2, 3, 32, 32});
  at::Tensor expected = model->forward(x);
  at::Tensor y = int8->forward(x);
  const double error = (y - expected).abs().max().item<double>() / expected.abs().max().item<double>();
  std::cout << "int8 reference vs float: max error " << error << " of the output range\n";

  // 4. All of it in one call (fx/quantization/quantize.h), lowered to oneDNN's
  //    int8 kernels: u8 activations, s8 weights packed once, requantisation,
  //    bias, ReLU and the residual add fused into each convolution.
  std::vector<q::CalibrationBatch> batches;
  for (int i = 0; i < 8; ++i) batches.push_back({at::randn({4, 3, 32, 32})});
  q::QuantizeReport quantized;
  auto lowered = q::quantize(gm, {at::randn({1, 3, 32, 32})}, batches, {}, &quantized);
  std::cout << quantized.str();
  const at::Tensor z = lowered->forward(x);
  const double lowered_error = (z - expected).abs().max().item<double>() / expected.abs().max().item<double>();
  std::cout << "int8 oneDNN vs float: max error " << lowered_error << " of the output range\n";
  // 5. 7-bit weights ([-64, 63], torch.ao's quant_min / quant_max on the
  //    weight observer): on a CPU without VNNI (AVX2) oneDNN's int8 kernels
  //    sum pairs of products in 16 bits, exact only for such weights, so
  //    8-bit ones compute in float32 there and 7-bit ones run in int8.
  q::QuantizeOptions seven_bit;
  seven_bit.mapping = q::get_default_qconfig_mapping("onednn").with_weight_range(-64, 63);
  q::QuantizeReport quantized7;
  auto lowered7 = q::quantize(gm, {at::randn({1, 3, 32, 32})}, batches, seven_bit, &quantized7);
  const at::Tensor z7 = lowered7->forward(x);
  const double error7 = (z7 - expected).abs().max().item<double>() / expected.abs().max().item<double>();
  std::cout << "7-bit weights: " << quantized7.lower.int8_kernels - quantized7.lower.float_kernels << " of "
            << quantized7.lower.int8_kernels << " kernels in int8 here (8-bit: "
            << quantized.lower.int8_kernels - quantized.lower.float_kernels << "), max error " << error7
            << " of the output range\n";
  if (converted.quantized_weights != 4 || error > 0.1 || quantized.lower.int8_kernels == 0 || lowered_error > 0.1 ||
      quantized7.lower.float_kernels != 0 || error7 > 0.1) {
    std::cerr << "unexpected result\n";
    return 1;
  }
  std::cout << "quantized\n";
  return 0;
}
