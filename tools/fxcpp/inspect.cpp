// fxcpp inspect MODEL.pt: the imported graph as a table and as generated code;
// with --summary, a torchinfo-style table of output shapes, parameters and
// MACs per node (fx::summarize_model) on shapes from --input or --shape.
#include "command.h"
#include "model_io.h"

#include <fx/control_flow.h>

#include <fx/passes/model_summary.h>
#include <fx/passes/shape_prop.h>

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
  return out.empty() ? "-" : out;
}

int print_summary(const std::shared_ptr<GraphModule>& gm, const ModelArgs& args) {
  std::vector<c10::IValue> inputs;
  if (args.has("input")) inputs = load_model_inputs(*gm, args.get("input"));
  else if (args.has("shape")) inputs.push_back(meta_input(args.get("shape")));
  else throw Error("--summary needs the input shapes: --input IN.pt or --shape 1x3x224x224");
  try {
    torch::NoGradGuard no_grad;
    ShapeProp(gm).propagate_meta(inputs);
  } catch (const std::exception& e) {
    return report_run_error("inspect", args.model,
                            args.has("input") ? args.get("input") : "--shape " + args.get("shape"), e);
  }
  const ModelSummary s = summarize_model(*gm);
  const std::string rule(123, '-');
  std::printf("%-32s %-24s %-22s %12s %14s %14s\n", "node", "type", "output shape", "params", "MACs", "FLOPs");
  std::printf("%s\n", rule.c_str());
  for (const NodeSummary& n : s.nodes) {
    if (n.node->op() == Opcode::Placeholder || n.node->op() == Opcode::Output || n.node->op() == Opcode::GetAttr)
      continue;
    auto num = [](int64_t v) { return v ? std::to_string(v) : std::string("-"); };
    std::printf("%-32s %-24s %-22s %12s %14s %14s\n", fit(n.node->name(), 32).c_str(), fit(n.type, 24).c_str(),
                fit(shapes_str(n), 22).c_str(), num(n.params).c_str(), num(n.macs).c_str(), num(n.flops).c_str());
  }
  std::printf("%s\n", rule.c_str());
  std::printf("Total params: %lld (%s)\n", static_cast<long long>(s.total_params), format_count(s.total_params).c_str());
  std::printf("Trainable params: %lld\n", static_cast<long long>(s.trainable_params));
  std::printf("Total MACs: %lld (%sMAC)\n", static_cast<long long>(s.total_macs), format_count(s.total_macs).c_str());
  std::printf("Total FLOPs: %lld (%sFLOP)\n", static_cast<long long>(s.total_flops),
              format_count(s.total_flops).c_str());
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

FX_COMMAND("inspect", "inspect MODEL.pt [--graph] [--no-code] [--summary --input IN.pt | --shape 1x3x224x224]",
           "import a TorchScript file; print its graph table and generated code, or a summary", run_inspect);

}  // namespace fx::cli
