// fx::Node, fx::Graph and fx::GraphModule seen from Python, with torch.fx's
// names: node.name / op / target / args / kwargs / users / meta, graph.nodes,
// str(graph), gm.graph, gm.code, gm(x). Node objects keep their graph alive.
#include "python/bindings.h"

#include <fx/graph.h>
#include <fx/node.h>
#include <fx/tensor_meta.h>

#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

namespace fx::python {

namespace {

/// `n` as a Python object that keeps `owner` (its graph, or a node of it) alive.
py::object wrap(Node* n, py::handle owner) {
  py::object obj = py::cast(n, py::return_value_policy::reference);
  py::detail::keep_alive_impl(obj, owner);
  return obj;
}

py::object borrowed(PyObject* o) { return py::reinterpret_borrow<py::object>(o); }

/// An argument as torch.fx holds it: Nodes, numbers, strings, torch.dtype / device / layout / memory format,
/// tuples, lists, dicts, slices, Ellipsis; other constants (tensors) as Python values.
py::object argument(const Argument& a, py::handle owner) {
  switch (a.kind()) {
    case Argument::Kind::None: return py::none();
    case Argument::Kind::Bool: return py::bool_(a.to_bool());
    case Argument::Kind::Int: return py::int_(a.to_int());
    case Argument::Kind::Double: return py::float_(a.to_double());
    case Argument::Kind::String: return py::str(a.to_string());
    case Argument::Kind::Node: return wrap(a.to_node(), owner);
    case Argument::Kind::ScalarType: return borrowed(reinterpret_cast<PyObject*>(torch::getTHPDtype(a.to_scalar_type())));
    case Argument::Kind::Device: return py::reinterpret_steal<py::object>(THPDevice_New(a.to_device()));
    case Argument::Kind::Layout: return borrowed(reinterpret_cast<PyObject*>(torch::getTHPLayout(a.to_layout())));
    case Argument::Kind::MemoryFormat: return borrowed(torch::utils::getTHPMemoryFormat(a.to_memory_format()));
    case Argument::Kind::Constant: return to_python(a.to_constant());
    case Argument::Kind::List: {
      py::list out;
      for (const auto& x : a.items()) out.append(argument(x, owner));
      return std::move(out);
    }
    case Argument::Kind::Tuple: {
      py::list out;
      for (const auto& x : a.items()) out.append(argument(x, owner));
      return py::tuple(out);
    }
    case Argument::Kind::Dict: {
      py::dict out;
      for (const auto& [k, v] : a.dict_items()) out[py::str(k)] = argument(v, owner);
      return std::move(out);
    }
    case Argument::Kind::Slice: {
      const auto& p = a.slice_parts();
      return py::reinterpret_steal<py::object>(
          PySlice_New(argument(p[0], owner).ptr(), argument(p[1], owner).ptr(), argument(p[2], owner).ptr()));
    }
    case Argument::Kind::Ellipsis: return py::ellipsis();
  }
  return py::none();
}

/// torch.fx.passes.shape_prop.TensorMetadata of `m`.
py::object tensor_metadata(const TensorMetadata& m) {
  static py::object* cls = nullptr;
  if (!cls) cls = new py::object(py::module_::import("torch.fx.passes.shape_prop").attr("TensorMetadata"));
  py::object memory_format = m.memory_format ? borrowed(torch::utils::getTHPMemoryFormat(*m.memory_format)) : py::none();
  py::object size = py::module_::import("torch").attr("Size")(py::tuple(py::cast(m.shape)));
  return (*cls)(size, borrowed(reinterpret_cast<PyObject*>(torch::getTHPDtype(m.dtype))), m.requires_grad,
                py::tuple(py::cast(m.stride)), memory_format, m.is_quantized, py::dict());
}

/// The meta values Python can read: tensor_meta (one or a tuple), strings, bools, ints, floats.
py::dict meta(const Node& n) {
  py::dict out;
  for (const auto& [key, value] : n.meta()) {
    if (auto* m = std::any_cast<TensorMetadata>(&value)) {
      out[py::str(key)] = tensor_metadata(*m);
    } else if (auto* l = std::any_cast<std::vector<TensorMetadata>>(&value)) {
      py::list items;
      for (const auto& x : *l) items.append(tensor_metadata(x));
      out[py::str(key)] = py::tuple(items);
    } else if (auto* s = std::any_cast<std::string>(&value)) {
      out[py::str(key)] = py::str(*s);
    } else if (auto* b = std::any_cast<bool>(&value)) {
      out[py::str(key)] = py::bool_(*b);
    } else if (auto* i = std::any_cast<int64_t>(&value)) {
      out[py::str(key)] = py::int_(*i);
    } else if (auto* d = std::any_cast<double>(&value)) {
      out[py::str(key)] = py::float_(*d);
    }
  }
  return out;
}

py::list nodes_of(const std::vector<Node*>& nodes, py::handle owner) {
  py::list out;
  for (Node* n : nodes) out.append(wrap(n, owner));
  return out;
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<Node, std::unique_ptr<Node, py::nodelete>>(m, "Node", "A node of an fxcpp graph (torch.fx.Node's fields, read-only)")
      .def_property_readonly("name", &Node::name)
      .def_property_readonly("op", [](const Node& n) { return std::string(to_string(n.op())); })
      .def_property_readonly("target", &Node::target)
      .def_property_readonly("type", &Node::type)
      .def_property_readonly("args",
                             [](py::object self) {
                               py::list out;
                               for (const auto& a : self.cast<Node&>().args()) out.append(argument(a, self));
                               return py::tuple(out);
                             })
      .def_property_readonly("kwargs",
                             [](py::object self) {
                               py::dict out;
                               for (const auto& [k, v] : self.cast<Node&>().kwargs()) out[py::str(k)] = argument(v, self);
                               return out;
                             })
      .def_property_readonly("users",
                             [](py::object self) { return nodes_of(self.cast<Node&>().users().to_vector(), self); })
      .def_property_readonly("all_input_nodes",
                             [](py::object self) { return nodes_of(self.cast<Node&>().all_input_nodes(), self); })
      .def_property_readonly("meta", &meta, "The node's meta that Python can read (tensor_meta, strings, numbers), a copy")
      .def("format_node", &Node::format_node)
      .def("__repr__", &Node::name);

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", "An fxcpp graph (torch.fx.Graph's reading API)")
      .def_property_readonly("nodes",
                             [](py::object self) {
                               std::vector<Node*> nodes;
                               for (Node* n : self.cast<Graph&>().nodes()) nodes.push_back(n);
                               return nodes_of(nodes, self);
                             })
      .def("__len__", [](const Graph& g) { return g.nodes().size(); })
      .def("__str__", &Graph::str)
      .def("lint", &Graph::lint)
      .def("python_code", [](const Graph& g, const std::string& root) { return g.python_code(root).src; },
           py::arg("root_module") = "self")
      .def("print_tabular", [](const Graph& g) { py::print(g.tabular()); });

  py::class_<GraphModule, std::shared_ptr<GraphModule>>(
      m, "GraphModule", "An fxcpp GraphModule: gm(x) runs fxcpp's compiled forward (the GIL released)")
      .def("__call__", [](GraphModule& gm, const py::args& args) { return call(gm, to_ivalues(args)); })
      .def("forward", [](GraphModule& gm, const py::args& args) { return call(gm, to_ivalues(args)); })
      .def_property_readonly("graph", &GraphModule::graph_ptr)
      .def_property_readonly("code", &GraphModule::code)
      .def_property_readonly("class_name", &GraphModule::class_name)
      .def_property_readonly("training", [](const GraphModule& gm) { return gm.is_training(); })
      .def("print_readable", [](GraphModule& gm) { py::print(gm.print_readable()); })
      .def("recompile", &GraphModule::recompile)
      .def("named_parameters",
           [](const GraphModule& gm) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& p : gm.named_parameters()) out.emplace_back(p.key(), p.value());
             return out;
           })
      .def("named_buffers",
           [](const GraphModule& gm) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& b : gm.named_buffers()) out.emplace_back(b.key(), b.value());
             return out;
           })
      .def("__repr__", [](GraphModule& gm) { return "fxcpp." + gm.class_name() + "(\n" + gm.code() + ")"; });
}

}  // namespace fx::python
