// fxcpp inspect MODEL.pt: the imported graph as a table and as generated code;
// with --summary, a torchinfo-style table of parameters per node
// (fx::summarize_model), and of output shapes and MACs too on shapes from
// --input or --shape.
#include "command.h"
#include "model_io.h"

#include <fx/control_flow.h>

#include <fx/passes/model_summary.h>
#include <fx/passes/shape_prop.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace fx::cli {
namespace {

// "1x3x224x224" or "1,3,224,224" → a float tensor of that shape on the meta device.
at::Tensor meta_input(const std::string& spec) {
  std::vector<int64_t> sizes;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find_first_of("x,", pos);
    if (end == std::string::npos) end = spec.size();
    const std::string part = spec.substr(pos, end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9)
      throw Error("--shape expects sizes like 1x3x224x224, got '" + spec + "'");
    sizes.push_back(std::stoll(part));
    pos = end + 1;
  }
  return at::empty(sizes, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
}

// Cuts the middle out of long names: "layer4_2_..._conv3".
std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  const size_t head = (width - 3) / 2;
  return s.substr(0, head) + "..." + s.substr(s.size() - (width - 3 - head));
}

std::string shapes_str(const NodeSummary& s) {
  std::string out;
  for (size_t i = 0; i < s.output_shapes.size(); ++i) {
    out += i ? " " : "";
    out += "[";
    for (size_t d = 0; d < s.output_shapes[i].size(); ++d)
      out += (d ? ", " : "") + std::to_string(s.output_shapes[i][d]);
    out += "]";
  }
  if (!out.empty()) return out;
  auto type = s.node->meta().find("type");  // ShapeProp's Python type of the result
  const bool none = type != s.node->meta().end() && type->second.type() == typeid(std::string) &&
                    std::any_cast<std::string>(type->second) == "NoneType";
  return none ? "None" : "-";
}

// A leaf call without arguments that returns None: what torch.jit.trace
// keeps of a module that returns its input (Identity, Dropout in eval mode),
// whose data flow went around it.
bool traced_pass_through(const NodeSummary& s) {
  return s.node->op() == Opcode::CallModule && s.node->args().empty() && s.node->kwargs().empty() &&
         shapes_str(s) == "None";
}

// "224", "2_000 (2.00 K)": the rounded count only where it says something shorter.
std::string count_text(int64_t n, const char* unit) {
  const std::string exact = std::to_string(n);
  return n < 1000 && n > -1000 ? exact : exact + " (" + format_count(n) + unit + ")";
}

// Without --input / --shape (as torchinfo without input_size): the
// parameters only; output shapes, MACs and FLOPs need shapes.
int print_summary(const std::shared_ptr<GraphModule>& gm, const ModelArgs& args) {
  const bool shapes = args.has("input") || args.has("shape");
  std::vector<c10::IValue> inputs;
  if (args.has("input")) inputs = load_model_inputs(*gm, args.get("input"));
  else if (args.has("shape")) inputs.push_back(meta_input(args.get("shape")));
  if (shapes) {
    try {
      torch::NoGradGuard no_grad;
      ShapeProp(gm).propagate_meta(inputs);
    } catch (const std::exception& e) {
      return report_run_error("inspect", args.model,
                              args.has("input") ? args.get("input") : "--shape " + args.get("shape"), e);
    }
  }
  const ModelSummary s = summarize_model(*gm);
  const std::string rule(shapes ? 123 : 70, '-');
  if (shapes) std::printf("%-32s %-24s %-22s %12s %14s %14s\n", "node", "type", "output shape", "params", "MACs", "FLOPs");
  else std::printf("%-32s %-24s %12s\n", "node", "type", "params");
  std::printf("%s\n", rule.c_str());
  for (const NodeSummary& n : s.nodes) {
    if (n.node->op() == Opcode::Placeholder || n.node->op() == Opcode::Output || n.node->op() == Opcode::GetAttr)
      continue;
    auto num = [](int64_t v) { return v ? std::to_string(v) : std::string("-"); };
    if (shapes)
      std::printf("%-32s %-24s %-22s %12s %14s %14s\n", fit(n.node->name(), 32).c_str(), fit(n.type, 24).c_str(),
                  fit(shapes_str(n), 22).c_str(), num(n.params).c_str(), num(n.macs).c_str(), num(n.flops).c_str());
    else
      std::printf("%-32s %-24s %12s\n", fit(n.node->name(), 32).c_str(), fit(n.type, 24).c_str(),
                  num(n.params).c_str());
  }
  std::printf("%s\n", rule.c_str());
  const auto pass_through = std::count_if(s.nodes.begin(), s.nodes.end(), traced_pass_through);
  if (pass_through > 0)
    std::printf("(%ld module call%s with output None: torch.jit.trace recorded a module that returns its input "
                "(Identity, Dropout in eval mode) as a call without input or output)\n",
                static_cast<long>(pass_through), pass_through == 1 ? "" : "s");
  std::printf("Total params: %s\n", count_text(s.total_params, "").c_str());
  std::printf("Trainable params: %lld\n", static_cast<long long>(s.trainable_params));
  if (shapes) {
    std::printf("Total MACs: %s\n", count_text(s.total_macs, "MAC").c_str());
    std::printf("Total FLOPs: %s\n", count_text(s.total_flops, "FLOP").c_str());
  }
  std::printf("Params + buffers size: %.2f MB\n", static_cast<double>(s.param_bytes) / 1e6);
  return 0;
}

int run_inspect(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(argv, {"input", "shape"}, {"no-code", "graph", "summary"});
  if ((args.has("input") || args.has("shape")) && !args.has("summary"))
    throw Error("--input and --shape go with --summary");
  double import_ms = 0;
  auto gm = import_model(args.model, &import_ms);
  if (args.has("summary")) return print_summary(gm, args);
  Graph& g = gm->graph();
  std::cout << args.model << ": " << gm->class_name() << ", " << g.nodes().size() << " nodes ("
            << g.find_nodes(Opcode::CallModule).size() << " call_module, "
            << g.find_nodes(Opcode::CallFunction).size() << " call_function, "
            << g.find_nodes(Opcode::GetAttr).size() << " get_attr), imported in " << import_ms << " ms\n\n";
  auto show = [&](GraphModule& m) {
    if (args.has("graph")) {
      std::cout << m.graph().str() << "\n";
    } else {
      m.graph().print_tabular(std::cout);
    }
    if (!args.has("no-code")) std::cout << "\n" << m.code() << "\n";
  };
  show(*gm);
  // Branches and loop bodies (run-time control flow), inner ones first.
  for_each_subgraph(*gm, [&](const std::string& path, GraphModule& sub) {
    std::cout << "\n" << path << " (" << sub.class_name() << "), " << sub.graph().nodes().size() << " nodes:\n";
    show(sub);
  });
  return 0;
}

}  // namespace

FX_COMMAND("inspect", "inspect MODEL.pt [--graph] [--no-code] [--summary [--input IN.pt | --shape 1x3x224x224]]",
           "import a TorchScript file; print its graph table and generated code, or a summary", run_inspect);

}  // namespace fx::cli
