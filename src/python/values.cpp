// Python values <-> fxcpp's: inputs and outputs of forward (c10::IValue,
// through TorchScript's own conversions, so tensors are the same objects),
// and running a GraphModule with the GIL released.
#include "python/bindings.h"

#include <torch/csrc/jit/python/pybind_utils.h>

namespace fx::python {

c10::IValue to_ivalue(py::handle value) {
  if (value.is_none()) return c10::IValue();
  if (THPVariable_Check(value.ptr())) return c10::IValue(THPVariable_Unpack(value.ptr()));
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    const auto seq = py::reinterpret_borrow<py::sequence>(value);
    bool all_tensors = seq.size() > 0;
    for (py::handle item : seq) all_tensors = all_tensors && THPVariable_Check(item.ptr());
    if (py::isinstance<py::list>(value) && all_tensors) {
      c10::List<at::Tensor> list;
      for (py::handle item : seq) list.push_back(THPVariable_Unpack(item.ptr()));
      return c10::IValue(std::move(list));
    }
    std::vector<c10::IValue> items = to_ivalues(seq);
    if (py::isinstance<py::tuple>(value)) return c10::ivalue::Tuple::create(std::move(items));
    c10::impl::GenericList list(c10::AnyType::get());
    for (auto& v : items) list.push_back(std::move(v));
    return c10::IValue(std::move(list));
  }
  return torch::jit::toTypeInferredIValue(value);
}

std::vector<c10::IValue> to_ivalues(const py::sequence& values) {
  std::vector<c10::IValue> out;
  out.reserve(values.size());
  for (py::handle v : values) out.push_back(to_ivalue(v));
  return out;
}

std::vector<c10::IValue> to_ivalues(const py::args& args) { return to_ivalues(py::reinterpret_borrow<py::sequence>(args)); }

py::object to_python(const c10::IValue& value) { return torch::jit::toPyObject(value); }

py::object call(GraphModule& gm, std::vector<c10::IValue> inputs) {
  c10::IValue out;
  {
    py::gil_scoped_release release;
    out = gm.forward(std::move(inputs));
  }
  return to_python(out);
}

}  // namespace fx::python
