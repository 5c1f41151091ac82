// torch.fx GraphModule <-> fx::GraphModule in memory. Python
// (python/fxcpp/convert.py) writes and reads the fxcpp document with the
// bridge's target-mapping rules; here the document becomes the module (and
// back) with fx::from_document / fx::to_document: tensors are handed over
// as they are, so parameters are shared between Python torch and fxcpp.
// And the other way in: a TorchScript module (torch.jit.trace's, where
// torch.fx.symbolic_trace fails) through fxcpp's importer, sharing its tensors.
#include "python/bindings.h"

#include <fx/import.h>
#include <fx/serialize.h>

#include <torch/csrc/jit/python/pybind_utils.h>

namespace fx::python {

namespace {

std::shared_ptr<GraphModule> from_document(const std::string& text, const std::vector<at::Tensor>& tensors,
                                           const py::dict& leaves, const std::string& name) {
  Document doc;
  try {
    doc.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ImportError(name + ": the document is not valid JSON (" + e.what() + ")");
  }
  doc.tensors = tensors;
  if (!leaves.empty()) {
    torch::jit::Module holder(c10::QualifiedName("__torch__.fxcpp.TorchScriptLeaves"));
    for (const auto& [attribute, module] : leaves)
      holder.register_module(attribute.cast<std::string>(), module.cast<torch::jit::Module>());
    doc.torchscript = std::move(holder);
  }
  py::gil_scoped_release release;
  return fx::from_document(doc, name);
}

py::tuple to_document(const GraphModule& gm) {
  Document doc;
  std::string text;
  {
    py::gil_scoped_release release;
    doc = fx::to_document(gm);
    text = doc.json.dump();
  }
  py::object leaves = doc.torchscript ? py::cast(*doc.torchscript) : py::none();
  return py::make_tuple(text, doc.tensors, leaves);
}

std::shared_ptr<GraphModule> import_module(const torch::jit::Module& module, const py::sequence& example_inputs) {
  ImportOptions options;
  options.example_inputs = to_ivalues(example_inputs);
  py::gil_scoped_release release;
  return fx::import_torchscript(module, options);
}

}  // namespace

void bind_convert(py::module_& m) {
  m.def("_from_document", &from_document, py::arg("document"), py::arg("tensors"), py::arg("leaves"),
        py::arg("name") = "<torch.fx.GraphModule>",
        "The fx::GraphModule of an fxcpp document (JSON text); tensor i is tensors[i] itself; leaves: "
        "TorchScript leaves by attribute name (torch._C.ScriptModule).");
  m.def("_to_document", &to_document, py::arg("gm"),
        "(document JSON text, tensors, TorchScript leaves module or None) of an fx::GraphModule; the tensors are "
        "the module's own.");
  m.def("_import_torchscript", &import_module, py::arg("module"), py::arg("example_inputs"),
        "fx::import_torchscript of a loaded TorchScript module (torch._C.ScriptModule: a torch.jit.trace / "
        "torch.jit.script result's ._c), its forward's inputs example_inputs (their ranks and dtypes fold); the "
        "GraphModule shares the module's tensors.");
}

}  // namespace fx::python
