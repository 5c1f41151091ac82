// fxcpp draw MODEL.pt [-o OUT.dot|OUT.svg|OUT.html] [--input IN.pt] [--profile IN.pt]:
// draws an imported model's graph (fx::FxGraphDrawer, laid out by Graphviz).
// --input runs ShapeProp so nodes show their shapes; --profile times every
// node on those inputs and colours the nodes as a heat map.
#include "command.h"
#include "model_io.h"

#include <fx/aot.h>
#include <fx/passes/graph_drawer.h>
#include <fx/passes/profiler.h>
#include <fx/passes/shape_prop.h>

#include <sys/stat.h>

#include <iostream>

namespace fx::cli {
namespace {

bool ends_with(const std::string& s, const std::string& ext) {
  return s.size() > ext.size() && s.compare(s.size() - ext.size(), ext.size(), ext) == 0;
}

// Checked before any work: a known extension, in an existing directory.
void check_drawing_path(const std::string& path) {
  if (!(ends_with(path, ".dot") || ends_with(path, ".gv") || ends_with(path, ".svg") || ends_with(path, ".html") ||
        ends_with(path, ".htm")))
    throw Error(path + ": unknown drawing format (expected .dot, .gv, .svg, .html or .htm)");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(path + ": no such directory '" + dir + "'");
}

// "models/resnet18.pt" → "resnet18".
std::string stem(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

// --training: the joint forward+backward graph of one training step,
// coloured by the partition (fx::draw_joint_graph).
int draw_training(const std::shared_ptr<GraphModule>& gm, const ModelArgs& args, const std::string& out) {
  if (!args.has("input")) throw Error("--training needs --input IN.pt (the shapes to trace the training step with)");
  const std::string which = args.get("partition", "min-cut");
  AotOptions options;
  if (which == "default") options.partition_fn = default_partition;
  else if (which == "functorch-min-cut") options.partition_fn = min_cut_rematerialization_partition;
  else if (which == "min-cut") options.partition_fn = min_cut_partition();
  else throw Error("--partition " + which + ": expected default, functorch-min-cut or min-cut");
  std::vector<c10::IValue> inputs = load_model_inputs(*gm, args.get("input"));
  std::shared_ptr<AotModule> aot;
  set_activity("tracing the training step of " + args.model + " on " + args.get("input"));
  try {
    gm->train();
    aot = aot_module(gm, options);
    aot->forward(inputs);
  } catch (const std::exception& e) {
    return report_run_error("draw", args.model, args.get("input"), e);
  }
  const PartitionedGraphs& p = aot->graphs().partitioned;
  set_activity("drawing " + out);
  draw_joint_graph(p, out, stem(args.model));
  const size_t recomputed = p.recomputed.size();
  std::cout << "wrote " << out << ": joint graph of " << p.joint->graph().nodes().size() << " nodes, " << which
            << " partition: " << p.saved.size() << " saved values (" << p.activation_bytes / 1000 << " kB of activations), "
            << recomputed << " nodes recomputed in backward\n";
  return 0;
}

int run_draw(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv.back() == "-o") throw Error("-o needs a value");
  std::vector<std::string> args_in;  // -o is --output
  for (const std::string& a : argv) args_in.push_back(a == "-o" ? "--output" : a);
  ModelArgs args = parse_model_args(args_in, {"output", "input", "profile", "runs", "partition"}, {"training"});
  const std::string out = args.get("output", stem(args.model) + ".html");
  check_drawing_path(out);
  const int runs = args.get_int("runs", 3);

  auto gm = import_model(args.model);
  if (args.has("training")) return draw_training(gm, args, out);
  if (args.has("partition")) throw Error("--partition draws a training graph: add --training");
  FxGraphDrawer drawer(gm, stem(args.model));
  const std::string shapes_from = args.get("input", args.get("profile"));
  if (!shapes_from.empty()) {
    std::vector<c10::IValue> inputs = load_model_inputs(*gm, shapes_from);
    set_activity("running " + args.model + " on " + shapes_from);
    try {
      torch::NoGradGuard no_grad;
      ShapeProp(gm).propagate_meta(inputs);
      if (args.has("profile")) {
        std::vector<c10::IValue> timed =
            args.get("profile") == shapes_from ? inputs : load_model_inputs(*gm, args.get("profile"));
        ProfilingInterpreter interp(gm);
        interp.profile_run(timed, /*record=*/false);
        for (int i = 0; i < runs; ++i) interp.profile_run(timed);
        drawer.set_node_times(interp.node_us());
      }
    } catch (const std::exception& e) {
      return report_run_error("draw", args.model, shapes_from, e);
    }
  }
  set_activity("drawing " + out);
  drawer.write(out);
  size_t edges = 0;
  for (Node* n : gm->graph().nodes()) edges += n->users().size();
  std::cout << "wrote " << out << ": " << gm->graph().nodes().size() << " nodes, " << edges << " edges"
            << (shapes_from.empty() ? "" : ", shapes from " + shapes_from)
            << (args.has("profile") ? ", times of " + std::to_string(runs) + " runs" : "") << "\n";
  return 0;
}

}  // namespace

FX_COMMAND("draw",
           "draw MODEL.pt [-o OUT.dot|OUT.svg|OUT.html] [--input IN.pt] [--profile IN.pt] [--runs N]\n"
           "       draw MODEL.pt --training --input IN.pt [--partition min-cut|functorch-min-cut|default] [-o OUT]",
           "draw the graph (Graphviz): DOT, SVG or an interactive HTML page; --training: the joint forward+backward "
           "graph of a training step, coloured by its partition",
           run_draw);

}  // namespace fx::cli
