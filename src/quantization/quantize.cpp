// quantize(): prepare, calibrate, convert, lower in one call; load_calibration().
#include <fx/quantization/quantize.h>

#include "quantization/common.h"

#include <fx/error.h>
#include <fx/onednn.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <map>
#include <set>
#include <sstream>

namespace fx::quantization {

namespace {

/// One line of an error raised by a calibration forward: the root cause
/// (a "RuntimeError: ..." line, else the first line that is not torch.fx's
/// context), without backtraces, and the node it names.
std::string one_line(const std::exception& e) {
  std::string msg;
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) msg = c->what_without_backtrace();
  else msg = e.what();
  std::istringstream in(msg);
  std::string cause, node, first;
  for (std::string line; std::getline(in, line);) {
    const size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    line = line.substr(b);
    if (first.empty()) first = line;
    if (line.rfind("RuntimeError: ", 0) == 0 && cause.empty()) cause = line.substr(14);
    if (line.rfind("While executing ", 0) == 0 && node.empty()) node = line.substr(16, line.find(" : ") - 16);
  }
  if (cause.empty()) {
    std::istringstream again(msg);
    for (std::string line; std::getline(again, line);) {
      const size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos) continue;
      line = line.substr(b);
      if (line.rfind("While executing", 0) == 0 || line.rfind("The following operation failed", 0) == 0 ||
          line.rfind("Traceback", 0) == 0 || line.rfind("Exception raised from", 0) == 0)
        continue;
      cause = line;
      break;
    }
  }
  if (cause.empty()) cause = first.empty() ? "unknown error" : first;
  while (!cause.empty() && (cause.back() == ' ' || cause.back() == '.')) cause.pop_back();
  if (!node.empty()) {
    if (node[0] == '%') node.erase(0, 1);
    cause += " (at node " + node + ")";
  }
  return cause;
}

/// The mapping with every skip name kept float; checks each name.
QConfigMapping with_skips(const GraphModule& gm, const QuantizeOptions& options) {
  QConfigMapping mapping = options.mapping;
  if (options.skip.empty()) return mapping;
  std::set<std::string> modules;
  for (const auto& item : const_cast<GraphModule&>(gm).named_modules("", /*include_self=*/false))
    modules.insert(item.key());
  std::map<std::string, const Node*> by_name;
  for (const Node* n : gm.graph().nodes()) by_name[n->name()] = n;
  for (const std::string& name : options.skip) {
    if (modules.count(name)) {
      mapping.set_module_name(name, nullptr);
      continue;
    }
    auto it = by_name.find(name);
    if (it != by_name.end() && it->second->op() == Opcode::CallModule) {
      mapping.set_module_name(it->second->target(), nullptr);
      continue;
    }
    if (it != by_name.end())
      throw Error("quantize: skip '" + name + "': node '" + name + "' is a " + to_string(it->second->op()) + " (" +
                  it->second->target() + "), not a module; only modules can be kept float by name");
    throw Error("quantize: skip '" + name + "' names no module or node of the model");
  }
  return mapping;
}

/// dim 0 of the first tensor argument, or 0.
int64_t samples_of(const CalibrationBatch& batch) {
  for (const c10::IValue& v : batch)
    if (v.isTensor() && v.toTensor().dim() > 0) return v.toTensor().size(0);
  return 0;
}

std::string kind_of(const c10::IValue& v) {
  if (v.isTensor()) return "a tensor";
  if (v.isTuple()) return "a tuple";
  if (v.isList()) return "a list";
  if (v.isGenericDict()) return "a dict";
  if (v.isNone()) return "None";
  return std::string("a ") + v.tagKind();
}

/// The forward arguments of one tuple, checked: tensors hold samples along dim 0, all the same number.
CalibrationBatch checked_tuple(const c10::IValue& tuple, const std::string& where) {
  const auto& items = tuple.toTupleRef().elements();
  if (items.empty()) throw Error(where + " is an empty tuple: it must hold the forward arguments");
  int64_t samples = -1;
  size_t first = 0;
  CalibrationBatch batch;
  for (size_t i = 0; i < items.size(); ++i) {
    const c10::IValue& v = items[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.dim() == 0)
        throw Error(where + ", argument " + std::to_string(i) +
                    ": a 0-dim tensor (calibration samples go along dim 0)");
      if (samples < 0) {
        samples = t.size(0);
        first = i;
      } else if (t.size(0) != samples) {
        throw Error(where + ", argument " + std::to_string(i) + ": " + std::to_string(t.size(0)) +
                    " samples along dim 0, argument " + std::to_string(first) + " has " + std::to_string(samples));
      }
      if (t.size(0) == 0) throw Error(where + ", argument " + std::to_string(i) + ": no samples (dim 0 is 0)");
    }
    batch.push_back(v);
  }
  return batch;
}

}  // namespace

std::string QuantizeReport::summary() const {
  size_t quantized = 0;
  for (const NodeQuantization& n : nodes) quantized += n.quantized ? 1 : 0;
  std::ostringstream os;
  os << quantized << " of " << nodes.size() << " nodes quantized, " << lower.int8_kernels << " int8 kernels"
     << (lowered ? "" : " (not lowered: reference graph)");
  if (trained_epochs > 0)
    os << ", quantization-aware training: " << trained_epochs << " epoch" << (trained_epochs == 1 ? "" : "s") << " ("
       << trained_samples << " samples)";
  else if (calibration_batches > 0)
    os << ", " << calibration_batches << " calibration batch" << (calibration_batches == 1 ? "" : "es") << " ("
       << calibration_samples << " samples)";
  return os.str();
}

std::string QuantizeReport::str() const {
  std::string s = format_report(nodes) + summary() + "\n";
  for (const std::string& w : warnings) s += "note: " + w + "\n";
  return s;
}

std::shared_ptr<GraphModule> quantize(const std::shared_ptr<GraphModule>& gm, const std::vector<c10::IValue>& example_inputs,
                                      const std::vector<CalibrationBatch>& calibration_batches,
                                      const QuantizeOptions& options, QuantizeReport* report) {
  if (!gm) throw Error("quantize: no module");
  if (calibration_batches.empty())
    throw Error("quantize: no calibration batches: int8 scales are measured on sample data");
  QuantizeReport local;
  QuantizeReport& r = report ? *report : local;
  r = QuantizeReport{};
  if (const Node* n = detail::quantized_node(*gm))
    throw Error("quantize: the model is already quantized (node '" + n->name() + "' calls " + n->target() + ")");
  const QConfigMapping mapping = with_skips(*gm, options);
  // Not for a training-mode or prepared module: a forward would change its
  // batch-norm statistics or observers; prepare() refuses both.
  if (std::string which; !detail::any_training(*gm, &which) && !detail::has_observers(*gm)) {
    at::NoGradGuard no_grad;
    try {
      gm->forward(example_inputs);
    } catch (const std::exception& e) {
      const std::string cause = one_line(e);
      throw CalibrationError("quantize: the example inputs do not run the model: " + cause,
                             CalibrationError::kExampleInputs, cause);
    }
  }
  auto prepared = prepare(gm, mapping, example_inputs, &r.prepare);
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < calibration_batches.size(); ++i) {
      try {
        prepared->forward(calibration_batches[i]);
      } catch (const std::exception& e) {
        const std::string cause = one_line(e);
        throw CalibrationError("quantize: calibration batch " + std::to_string(i) + " of " +
                                   std::to_string(calibration_batches.size()) + " does not run: " + cause,
                               i, cause);
      }
      ++r.calibration_batches;
      r.calibration_samples += samples_of(calibration_batches[i]);
    }
  }
  return convert_and_lower(prepared, options.lower, r);
}

std::shared_ptr<GraphModule> convert_and_lower(const std::shared_ptr<GraphModule>& prepared, bool lower,
                                               QuantizeReport& r) {
  auto reference = convert(prepared, &r.convert);
  r.nodes = r.convert.nodes;
  {
    // A node convert() left float says only that; prepare() knew why ("qconfig is None", no pattern ...).
    std::map<std::string, const NodeQuantization*> prepared_why;
    for (const NodeQuantization& n : r.prepare.nodes) prepared_why[n.node] = &n;
    for (NodeQuantization& n : r.nodes) {
      auto it = prepared_why.find(n.node);
      if (!n.quantized && it != prepared_why.end() && !it->second->quantized && !it->second->reason.empty())
        n.reason = it->second->reason;
    }
  }
  if (!lower) return reference;
  auto lowered = lower_to_onednn_int8(reference, &r.lower);
  r.lowered = true;
  if (r.lower.int8_kernels > 0 && !onednn::has_int8_dot_product()) {
    const std::string k = std::to_string(r.lower.int8_kernels);
    if (r.lower.float_kernels > 0)
      r.warnings.push_back("int8 without VNNI: oneDNN ISA " + onednn::cpu_isa() +
                           " has no int8 dot products, and its 16-bit int8 sums would saturate with 8-bit weights: " +
                           std::to_string(r.lower.float_kernels) + " of " + k +
                           " int8 kernels compute in float32, and int8 may be no faster than float32 here (7-bit "
                           "weights run on oneDNN's int8 kernels: with_weight_range(-64, 63), fxcpp quantize "
                           "--weight-bits 7)");
    else
      r.warnings.push_back("int8 without VNNI: oneDNN ISA " + onednn::cpu_isa() + " has no int8 dot products: all " +
                           k + " int8 kernels run on oneDNN's int8 kernels (7-bit weights or depthwise "
                           "convolutions: their 16-bit sums cannot saturate)");
  }
  std::map<std::string, const NodeQuantization*> by_name;
  for (const NodeQuantization& n : r.lower.nodes) by_name[n.node] = &n;
  for (NodeQuantization& n : r.nodes) {
    auto it = by_name.find(n.node);
    if (it == by_name.end()) continue;
    n.quantized = it->second->quantized;
    n.reason = it->second->reason;
  }
  return lowered;
}

std::vector<CalibrationBatch> calibration_batches(const c10::IValue& value, const std::string& where,
                                                  int64_t batch_size) {
  const char* hint = " (torch.save((x, ...), path): a tuple of forward arguments whose tensors hold samples along "
                     "dim 0, or a list of such tuples)";
  std::vector<CalibrationBatch> whole;
  if (value.isTuple()) {
    whole.push_back(checked_tuple(value, where));
  } else if (value.isList()) {
    const auto& items = value.toListRef();
    if (items.empty()) throw Error(where + ": an empty list: no calibration batches");
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string at = where + ": element " + std::to_string(i);
      if (!items[i].isTuple()) throw Error(at + " is " + kind_of(items[i]) + ", not a tuple of forward arguments");
      whole.push_back(checked_tuple(items[i], at));
      if (whole.back().size() != whole.front().size())
        throw Error(at + " has " + std::to_string(whole.back().size()) + " arguments, element 0 has " +
                    std::to_string(whole.front().size()));
    }
  } else {
    throw Error(where + ": " + kind_of(value) + ", not calibration data" + hint);
  }
  if (batch_size <= 0) return whole;
  std::vector<CalibrationBatch> out;
  for (const CalibrationBatch& b : whole) {
    const int64_t n = samples_of(b);
    if (n == 0) {
      out.push_back(b);
      continue;
    }
    for (int64_t start = 0; start < n; start += batch_size) {
      const int64_t len = std::min(batch_size, n - start);
      CalibrationBatch piece;
      for (const c10::IValue& v : b)
        piece.push_back(v.isTensor() ? c10::IValue(v.toTensor().narrow(0, start, len)) : v);
      out.push_back(std::move(piece));
    }
  }
  return out;
}

std::vector<CalibrationBatch> load_calibration(const std::string& path, int64_t batch_size) {
  return calibration_batches(load_value(path), path, batch_size);
}

}  // namespace fx::quantization
