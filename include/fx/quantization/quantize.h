#pragma once
/// \file
/// quantize: int8 post-training quantization in one call — prepare
/// (fuse + observers), calibrate on sample data, convert to the reference
/// quantized graph and lower it to oneDNN's int8 kernels — and
/// load_calibration, the calibration data of a torch.save file.
///
///     auto batches = fx::quantization::load_calibration("calib.pt");
///     fx::quantization::QuantizeReport report;
///     auto int8 = fx::quantization::quantize(gm, batches.front(), batches, {}, &report);
///     std::cout << report.str();   // one line per node: quantized or float, and why

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/lower.h>
#include <fx/quantization/prepare.h>
#include <fx/quantization/qconfig.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// The forward arguments of one calibration run.
using CalibrationBatch = std::vector<c10::IValue>;

/// How quantize() quantizes.
struct QuantizeOptions {
  /// Which observers watch which nodes (default: get_default_qconfig_mapping("onednn")).
  QConfigMapping mapping = get_default_qconfig_mapping("onednn");
  /// Modules kept float, by qualified name ("layer1.0.conv1", covering its
  /// submodules) or by the name of the call_module node calling one: their
  /// qconfig is set to nullptr (QConfigMapping::set_module_name). A name
  /// that is no module of the model, or names a function call, is an fx::Error.
  std::vector<std::string> skip;
  /// Lower the reference graph to oneDNN int8 kernels (lower_to_onednn_int8);
  /// false returns the reference quantized graph (float ops between
  /// quantize / dequantize).
  bool lower = true;
};

/// A calibration batch (or the example inputs) that does not run the float
/// or prepared model: which one, and the cause in one line.
class CalibrationError : public Error {
 public:
  /// `batch`: the batch's index, or kExampleInputs.
  CalibrationError(const std::string& what, size_t batch, std::string cause)
      : Error(what), batch_(batch), cause_(std::move(cause)) {}
  /// The index of the batch that failed, or kExampleInputs.
  size_t batch() const { return batch_; }
  /// Why, one line ("Given groups=1, weight of size ... (at node conv1)").
  const std::string& cause() const { return cause_; }
  /// batch() when the example inputs failed.
  static constexpr size_t kExampleInputs = ~size_t(0);

 private:
  size_t batch_;
  std::string cause_;
};

/// What quantize() did, stage by stage, and per node.
struct QuantizeReport {
  /// prepare(): fusions, observers, per-node decisions.
  PrepareReport prepare;
  /// convert(): per-node quantization of the reference graph.
  ConvertReport convert;
  /// lower_to_onednn_int8() (empty when QuantizeOptions::lower is false).
  LowerReport lower;
  /// Whether the lowering ran.
  bool lowered = false;
  /// Calibration runs made (forward calls on the prepared module).
  size_t calibration_batches = 0;
  /// Calibration samples seen (the sum of dim 0 of each run's first tensor argument).
  int64_t calibration_samples = 0;
  /// Epochs of quantization-aware training instead of calibration (fxcpp quantize --qat), and their samples.
  int64_t trained_epochs = 0, trained_samples = 0;
  /// One entry per computing node of the quantized model: convert()'s verdict,
  /// replaced by the lowering's for the nodes it names (int8 kernel, runs on
  /// quint8, or why it stays float).
  std::vector<NodeQuantization> nodes;
  /// What this CPU changes, one line each: where oneDNN has no int8 dot
  /// products (onednn::has_int8_dot_product: no VNNI / AMX), how many int8
  /// kernels take float paths (8-bit weights: LowerReport::float_kernels) and
  /// may be no faster than float32, or that all run on oneDNN's int8 kernels.
  std::vector<std::string> warnings;
  /// One line per node ("name  target  quantized|float  reason", as
  /// format_report) and a last summary line: "N of M nodes quantized, K int8
  /// kernels, C calibration batches (S samples)" (after quantization-aware
  /// training: "..., quantization-aware training: E epochs (S samples)"; neither
  /// when the report has no calibration: convert_and_lower alone), then "note: W" for each of
  /// `warnings`.
  std::string str() const;
  /// The summary line of str() alone.
  std::string summary() const;
};

/// prepare(gm, options.mapping with options.skip kept float, example_inputs),
/// a forward of the prepared module on every calibration batch (no grad),
/// convert(), and with options.lower lower_to_onednn_int8(): the quantized
/// module, a new GraphModule (`gm` is never changed). The example inputs are
/// run through `gm` first (no grad; not for a model in training mode, which
/// prepare refuses, nor for a prepared one), so that inputs that do not fit
/// are one line. Throws
/// fx::Error for no calibration batches, a model that is already quantized
/// (it computes on quantized tensors), a skip name that names no module,
/// CalibrationError for example inputs or a calibration batch that do not
/// run ("quantize: calibration batch 2 of 4 does not run: <cause>"), and
/// everything prepare / convert / lower refuse (a model in training mode,
/// one already prepared).
std::shared_ptr<GraphModule> quantize(const std::shared_ptr<GraphModule>& gm, const std::vector<c10::IValue>& example_inputs,
                                      const std::vector<CalibrationBatch>& calibration_batches,
                                      const QuantizeOptions& options = {}, QuantizeReport* report = nullptr);

/// quantize()'s last half, for any calibrated or QAT-trained prepared module
/// (eval mode): convert(), and with `lower` lower_to_onednn_int8(), filling
/// `report`'s convert, lower, nodes (prepare's reasons for the nodes left
/// float, the lowering's verdicts) and warnings; `prepared` unchanged.
std::shared_ptr<GraphModule> convert_and_lower(const std::shared_ptr<GraphModule>& prepared, bool lower,
                                               QuantizeReport& report);

/// The calibration data in a torch.save file (written by plain torch.save in
/// Python, read with fx::load_value's checks): a tuple of forward arguments
/// whose tensors hold calibration samples along dim 0 (`torch.save((images,),
/// path)`: one batch), or a list of such tuples (one batch each). With
/// `batch_size` > 0 every batch is cut along dim 0 into batches of at most
/// `batch_size` samples (arguments that are not tensors repeated). Throws
/// fx::Error naming the file and the element for anything else: another
/// top-level value, an empty tuple or list, a list element that is not a
/// tuple, tuples of different lengths, a 0-dim tensor, tensors of one tuple
/// with different dim-0 sizes.
std::vector<CalibrationBatch> load_calibration(const std::string& path, int64_t batch_size = 0);

/// load_calibration's checks and cutting on a value already read (`where`
/// names it in errors).
std::vector<CalibrationBatch> calibration_batches(const c10::IValue& value, const std::string& where,
                                                  int64_t batch_size = 0);

}  // namespace fx::quantization
