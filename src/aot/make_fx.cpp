// fx::make_fx: trace a function at the ATen level, below autograd.
#include "aot/make_fx_session.h"

#include <fx/aot.h>
#include <fx/error.h>
#include <fx/meta_kernels.h>

#include <c10/util/Exception.h>

namespace fx {

std::shared_ptr<GraphModule> make_fx(const AotFunction& fn, const std::vector<c10::IValue>& example_inputs,
                                     const MakeFxOptions& options) {
  if (!options.input_names.empty() && options.input_names.size() != example_inputs.size())
    throw TraceError("make_fx: " + std::to_string(options.input_names.size()) + " input names for " +
                     std::to_string(example_inputs.size()) + " inputs");
  aot_impl::MakeFxSession session;
  // On meta values the operators run their Meta kernels: fxcpp's C++ shape
  // functions for those libtorch 1.13 has only in Python (conv, batch norm
  // and their backward ...).
  for (const c10::IValue& v : example_inputs)
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_meta()) {
      register_meta_shape_functions();
      break;
    }
  std::vector<c10::IValue> args;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const c10::IValue& v = example_inputs[i];
    if (!v.isTensor() || !v.toTensor().defined())
      throw TraceError("make_fx: example input " + std::to_string(i) + " is a " + v.tagKind() +
                       ": the inputs of a traced function are tensors");
    const std::string name =
        options.input_names.empty() ? "args_" + std::to_string(i + 1) : options.input_names[i];
    args.emplace_back(session.add_input(v.toTensor(), name, v.toTensor().requires_grad()));
  }
  c10::IValue result;
  try {
    aot_impl::RecordingScope scope(&session);
    result = fn(std::move(args));
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw TraceError(std::string("make_fx: the traced function failed: ") + e.what_without_backtrace());
  }
  return session.finish(session.output_argument(result, "output"));
}

}  // namespace fx
