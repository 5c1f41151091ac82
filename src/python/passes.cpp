// The passes toolkit from Python, each on an fx::GraphModule with the GIL
// released; python/fxcpp/passes.py puts torch.fx's names and signatures on
// them (torch.fx GraphModules in and out).
#include "python/bindings.h"

#include <fx/compiler/fuse_kernels.h>
#include <fx/passes.h>

#include <map>

namespace fx::python {

namespace {

/// A C++ pass PassManager can run, by its torch.fx name.
NamedPass named_pass(const std::string& name) {
  if (name == "cse" || name == "CSEPass") return make_pass(std::make_shared<CSEPass>());
  if (name == "eliminate_dead_code" || name == "dead_code_elimination")
    return make_pass("eliminate_dead_code", [](std::shared_ptr<GraphModule> gm) { return eliminate_dead_code(gm); });
  if (name == "remove_dropout") return make_pass("remove_dropout", remove_dropout);
  if (name == "remove_noops") return make_pass("remove_noops", remove_noops);
  if (name == "normalize_args")
    return make_pass("normalize_args", [](std::shared_ptr<GraphModule> gm) { return normalize_args(gm); });
  throw Error("PassManager: no C++ pass named '" + name +
              "' (cse, eliminate_dead_code, remove_dropout, remove_noops, normalize_args)");
}

py::tuple result(const PassResult& r) { return py::make_tuple(r.graph_module, r.modified); }

}  // namespace

void bind_passes(py::module_& m) {
  m.def("_shape_prop",
        [](const std::shared_ptr<GraphModule>& gm, const py::args& args) {
          std::vector<c10::IValue> inputs = to_ivalues(args);
          c10::IValue out;
          {
            py::gil_scoped_release release;
            out = ShapeProp(gm).propagate(std::move(inputs));
          }
          return to_python(out);
        },
        "fx::ShapeProp(gm).propagate(*args): every node's meta['tensor_meta']; the graph's result.");
  m.def("_fuse_kernels",
        [](const std::shared_ptr<GraphModule>& gm, const py::args& args) {
          std::vector<c10::IValue> inputs = to_ivalues(args);
          compiler::FuseReport r;
          {
            py::gil_scoped_release release;
            if (!inputs.empty()) ShapeProp(gm).propagate(std::move(inputs));
            compiler::fuse_kernels(*gm, {}, &r);
          }
          py::dict d;
          d["groups"] = r.groups;
          d["fused_nodes"] = r.fused_nodes;
          d["kernels"] = r.kernels;
          d["compiled"] = r.compiled;
          d["compile_ms"] = r.compile_ms;
          d["warnings"] = r.warnings;
          py::list programs;
          for (const compiler::FusedGroup& g : r.details) programs.append(g.program);
          d["programs"] = programs;
          return d;
        },
        "fx::ShapeProp(gm).propagate(*args) (when given), then fx::compiler::fuse_kernels(gm) in place: its report.");
  m.def("_fuse_kernels_available", &compiler::can_compile_kernels,
        "Whether fused kernels can be built here (the system's C++ compiler runs).");
  m.def("_kernel_source", &compiler::kernel_source, py::arg("program"),
        "fx::compiler::kernel_source: the C++ a fused kernel's program is compiled from.");
  m.def("_cse",
        [](const std::shared_ptr<GraphModule>& gm) {
          py::gil_scoped_release release;
          return CSEPass()(gm);
        },
        "fx::CSEPass on gm: (module, modified).");
  m.def("_split_const_subgraphs",
        [](const std::shared_ptr<GraphModule>& gm) {
          py::gil_scoped_release release;
          ConstFoldResult r = split_const_subgraphs(gm);
          return std::make_tuple(r.pass_result.graph_module, r.pass_result.modified, r.folded_nodes);
        },
        "fx::split_const_subgraphs: (module, modified, folded node names); the module is folded in place.");
  m.def("_split_module",
        [](const std::shared_ptr<GraphModule>& gm, const std::map<std::string, int64_t>& partitions,
           bool keep_original_order) {
          std::map<std::string, std::string> qualname_map;
          std::shared_ptr<GraphModule> out;
          {
            py::gil_scoped_release release;
            out = split_module(
                gm, gm,
                [&](Node* n) -> int64_t {
                  auto it = partitions.find(n->name());
                  if (it == partitions.end()) throw Error("split_module: no partition for node '" + n->name() + "'");
                  return it->second;
                },
                &qualname_map, keep_original_order);
          }
          return std::make_pair(out, qualname_map);
        },
        py::arg("gm"), py::arg("partitions"), py::arg("keep_original_order") = false,
        "fx::split_module with the partition of each call_* node by name: (module, qualname_map).");
  m.def("_replace_pattern",
        [](GraphModule& gm, const GraphModule& pattern, const GraphModule& replacement) {
          std::vector<Match> matches;
          {
            py::gil_scoped_release release;
            matches = replace_pattern(gm, pattern, replacement);
          }
          // By name: (anchor, [(pattern node, graph node, whether the rewrite erased it)]); literal
          // bindings of pattern placeholders are left out (torch.fx's nodes_map maps nodes to nodes).
          py::list out;
          for (const Match& match : matches) {
            py::list pairs;
            for (const auto& [pattern_node, value] : match.nodes_map)
              if (value.is_node())
                pairs.append(py::make_tuple(pattern_node->name(), value.to_node()->name(), value.to_node()->is_erased()));
            out.append(py::make_tuple(match.anchor ? match.anchor->name() : std::string(), pairs));
          }
          return out;
        },
        "fx::replace_pattern(gm, pattern, replacement) in place: each match replaced as (anchor name, "
        "[(pattern node name, graph node name, erased)]).");
  m.def("_run_passes",
        [](const std::shared_ptr<GraphModule>& gm, const std::vector<std::string>& names, int steps,
           bool run_checks_after_each_pass) {
          std::vector<NamedPass> passes;
          for (const auto& n : names) passes.push_back(named_pass(n));
          PassManager pm(std::move(passes), {}, steps, run_checks_after_each_pass);
          py::gil_scoped_release release;
          return pm(gm);
        },
        py::arg("gm"), py::arg("passes"), py::arg("steps") = 1, py::arg("run_checks_after_each_pass") = false,
        "fx::PassManager over C++ passes named as in torch.fx: (module, modified).");
  py::class_<PassResult>(m, "PassResult", "What a pass returns (torch.fx PassResult)")
      .def_readonly("graph_module", &PassResult::graph_module)
      .def_readonly("modified", &PassResult::modified)
      .def("__iter__", [](const PassResult& r) { return py::iter(result(r)); });
}

}  // namespace fx::python
