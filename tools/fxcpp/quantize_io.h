#pragma once
// Shared by fxcpp quantize, run --quantize and bench --engine fxcpp_int8:
// calibration data checked against a model, and the one call that quantizes
// (fx::quantization::quantize).

#include <fx/graph_module.h>
#include <fx/quantization/quantize.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::cli {

/// The first calibration batch as one tuple value: import_model's example
/// inputs, so that a TorchScript model imports for their ranks and dtypes.
c10::IValue calibration_example(const std::vector<fx::quantization::CalibrationBatch>& batches);

/// Checks every calibration batch of the file `path` against the model's
/// parameters as `--input` files are checked (model_inputs: their number,
/// tensor or not); fx::Error naming the file and, for a list, the element.
void check_calibration(GraphModule& gm, const std::vector<fx::quantization::CalibrationBatch>& batches,
                       const std::string& path);

/// fx::quantization::quantize of `gm` on `batches` (the first one its example
/// inputs), keeping `skip` float; `report` gets what it did. A batch that
/// does not run is an fx::Error naming `where` (the calibration file) and the batch.
/// `weight_bits` 7 quantizes the weights to [-64, 63] (with_weight_range),
/// 8 to [-128, 127].
std::shared_ptr<GraphModule> quantize_model(const std::shared_ptr<GraphModule>& gm,
                                            const std::vector<fx::quantization::CalibrationBatch>& batches,
                                            const std::vector<std::string>& skip,
                                            fx::quantization::QuantizeReport* report, const std::string& where,
                                            bool lower = true, int weight_bits = 8);

struct ModelArgs;

/// --weight-bits B: 8 (the default: torch.ao's qint8 weights) or 7 (weights
/// in [-64, 63], exact on oneDNN's int8 kernels without VNNI); fx::Error for
/// any other value. Passed to QConfigMapping::with_weight_bits.
int weight_bits_arg(const ModelArgs& args);

/// fxcpp quantize --qat: MODEL imported, prepared with prepare_qat (onednn's
/// default QAT qconfig) and trained with cross-entropy on --train DATA.pt
/// (torch.save((inputs, labels))) for --epochs of shuffled --batch batches
/// (--optimizer, --lr, --momentum; batch norm frozen from epoch
/// --freeze-bn-after on), one line per epoch on stdout; returned in eval mode,
/// ready for convert; `report` gets prepare's report and the epochs and
/// samples trained. fx::Error (one line) for bad data or labels.
std::shared_ptr<GraphModule> qat_train(const ModelArgs& args, fx::quantization::QuantizeReport& report);

/// fxcpp quantize --weight-only int8|int4 CHECKPOINT -o OUT.fx (quantize_weight_only.cpp): a decoder
/// checkpoint captured, its linear layers' weights quantized, saved; exit status 0.
int run_weight_only_quantize(const ModelArgs& args);

}  // namespace fx::cli
