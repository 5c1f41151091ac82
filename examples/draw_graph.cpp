// Drawing a graph: DOT, SVG and an interactive HTML page (torch.fx FxGraphDrawer).
//
// Traces the demo ResidualNet, records every value's shape with ShapeProp
// (on the meta device: no data computed), times every node with the
// profiling interpreter, and writes the drawing three ways into OUT_DIR
// (default /tmp/fx_draw_graph): residual_net.dot (Graphviz text), .svg (laid out by
// Graphviz's library) and .html (one self-contained page: pan/zoom, search,
// click a node for its details, nodes coloured by time). Then it checks the
// files and prints the model summary (parameters and MACs).
//
//   build/examples/draw_graph [OUT_DIR]
#include <fx/examples/residual_net.h>
#include <fx/passes/graph_drawer.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/profiler.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  model->eval();
  at::Tensor x = at::randn({1, 3, 32, 32});
  auto gm = fx::symbolic_trace(model, {x});

  fx::ShapeProp(gm).propagate_meta({x});  // shapes for the labels
  fx::ProfilingInterpreter profiler(gm);  // times for the heat map
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) profiler.profile_run({x});

  fx::FxGraphDrawer drawer(gm, "residual_net");
  drawer.set_node_times(profiler.node_us());

  // One fixed directory (rewritten on every run, not a new one each time).
  const std::string dir = argc > 1 ? argv[1] : "/tmp/fx_draw_graph";
  ::mkdir(dir.c_str(), 0755);
  const size_t nodes = gm->graph().nodes().size();
  for (const char* ext : {".dot", ".svg", ".html"}) {
    const std::string path = dir + "/residual_net" + ext;
    drawer.write(path);
    const std::string text = read(path);
    // Every node is drawn once: a DOT statement, an SVG group, a node record.
    const size_t drawn = std::string(ext) == ".dot" ? occurrences(text, " [label=\"{name=%")
                                                    : occurrences(text, "class=\"node\">");
    std::cout << "wrote " << path << " (" << text.size() << " bytes, " << drawn << " of " << nodes
              << " nodes drawn)\n";
    if (drawn != nodes) {
      std::cerr << path << ": expected " << nodes << " nodes\n";
      return 1;
    }
    if (text.find("http://") != std::string::npos && std::string(ext) == ".html") {
      std::cerr << path << ": the page must not refer to the network\n";
      return 1;
    }
  }

  const fx::ModelSummary s = fx::summarize_model(*gm);
  // conv1 432 + 3 batch norms 96 + block convs 4608 + fc 170 (tests/passes/model_summary_test.cpp).
  if (s.total_params != 5306) {
    std::cerr << "expected 5306 parameters, counted " << s.total_params << "\n";
    return 1;
  }
  std::cout << "\nparameters " << s.total_params << " (" << fx::format_count(s.total_params) << "), "
            << fx::format_count(s.total_macs) << "MAC per 32x32 image\n"
            << "open " << dir << "/residual_net.html in a browser: drag to pan, wheel to zoom, click a node\n";
  return 0;
}
