#pragma once
/// \file
/// FxGraphDrawer: draws a GraphModule's graph as Graphviz DOT text, as SVG
/// (laid out by Graphviz's own library, libgvc) and as one self-contained
/// interactive HTML page (torch.fx `torch.fx.passes.graph_drawer.FxGraphDrawer`).
///
/// Why: a graph of a few hundred nodes is read far faster as a picture than
/// as print_tabular() output; the HTML page adds search, pan/zoom, per-node
/// details (args, kwargs, tensor_meta, source position) and, with profiler
/// times, a heat map of where the time goes.
///
/// How: every node becomes a Graphviz "record" node whose label mirrors
/// torch.fx's (name=%x | op_code=... | target=... | args | kwargs |
/// num_users | dtype | shape), coloured as torch.fx colours it (placeholder
/// AliceBlue, call_module LemonChiffon1, get_attr LightGrey, output
/// PowderBlue, other targets a colour picked by a hash of the target). Edges
/// run from each node to its users. Shapes come from meta["tensor_meta"]:
/// run fx::ShapeProp first (fx/passes/shape_prop.h) to have them.
///
/// Differences from torch.fx (on purpose):
///  - call_module nodes are grouped into nested Graphviz clusters by module
///    path ("layer1" > "layer1.0" > layer1_0_conv1); torch.fx draws a flat graph;
///  - a module's parameters and buffers are not drawn as extra nodes
///    (torch.fx ignore_parameters_and_buffers=True), so the drawing has one
///    Graphviz node per graph node;
///  - tensor labels show dtype and shape only (no stride / requires_grad);
///    long args are cut at 60 characters with "...";
///  - the hash colour uses FNV-1a of the target, not MD5, so the colour of a
///    given target may differ from torch.fx's;
///  - one graph is drawn (torch.fx also draws nested GraphModules separately);
///  - get_dot_graph() returns DOT text (torch.fx returns a pydot.Dot), and
///    render_svg() / render_html() need no Python and no `dot` program.
///
/// Control flow (fx/control_flow.h): a cond / loop call is drawn as one
/// call_module node of the graph drawn; its branches and body are graphs of
/// their own, drawn by a drawer on each (fx::for_each_subgraph gives them
/// with their paths, e.g. one page per "cond_0.true_graph").

#include <fx/graph_module.h>
#include <fx/tensor_meta.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx {

/// What FxGraphDrawer draws (torch.fx's constructor flags).
struct GraphDrawerOptions {
  /// Leave get_attr nodes (and their edges) out (torch.fx ignore_getattr).
  bool ignore_getattr = false;
  /// Leave out args/kwargs that mention other nodes, which the edges already
  /// show (torch.fx skip_node_names_in_args).
  bool skip_node_names_in_args = true;
  /// Group call_module nodes in nested clusters by module path.
  bool cluster_modules = true;
};

/// Draws one GraphModule's graph (torch.fx FxGraphDrawer).
class FxGraphDrawer {
 public:
  /// Draws `module`'s graph; `name` names the DOT graph and the HTML page.
  FxGraphDrawer(std::shared_ptr<GraphModule> module, std::string name, GraphDrawerOptions options = {});

  /// Colours nodes by their share of the total time (a heat map, white →
  /// yellow → red) and adds "time=" to their labels; `node_us` is
  /// microseconds per node, e.g. ProfilingInterpreter::node_us(). Nodes of
  /// other graphs are ignored. An empty map turns the heat map off.
  void set_node_times(std::unordered_map<const Node*, double> node_us);
  /// Fills nodes with the given colours (Graphviz names or "#rrggbb"),
  /// over the heat map and the opcode colours; `legend` (colour → meaning)
  /// is drawn as a key beside the graph. Nodes of other graphs are ignored.
  void set_node_colors(std::unordered_map<const Node*, std::string> colors,
                       std::vector<std::pair<std::string, std::string>> legend = {});

  /// The graph as Graphviz DOT text (torch.fx get_dot_graph().to_string()).
  std::string get_dot_graph() const;
  /// The graph laid out by Graphviz's dot engine, as SVG text: one
  /// `<g class="node">` per drawn node, titled with the node's name. Throws
  /// fx::Error if Graphviz rejects the graph.
  std::string render_svg() const;
  /// One self-contained HTML page (inline SVG, script and style; nothing
  /// fetched from the network): pan (drag) and zoom (mouse wheel), a search
  /// box that highlights and centres a node by name, a side panel with the
  /// clicked node's opcode, target, args, kwargs, tensor_meta and source
  /// position, and with node times a heat-map legend. `#node=NAME` in the
  /// URL selects and centres a node; `#selftest` makes the page click its
  /// first call node, zoom, pan and search, and write what it saw as JSON
  /// into `<pre id="selftest">` (for headless browser tests).
  std::string render_html() const;
  /// Writes get_dot_graph(), render_svg() or render_html() to `path`, by its
  /// extension (.dot / .gv, .svg, .html / .htm), atomically: a temporary
  /// file beside `path` renamed over it, so a failure leaves no partial
  /// file. Throws fx::Error naming the path on an unknown extension or a
  /// failed write.
  void write(const std::string& path) const;

  /// The graph's name.
  const std::string& name() const { return name_; }
  /// The drawn module.
  const GraphModule& module() const { return *module_; }
  /// The times set by set_node_times().
  const std::unordered_map<const Node*, double>& node_times() const { return node_us_; }
  /// The options.
  const GraphDrawerOptions& options() const { return options_; }

 private:
  std::shared_ptr<GraphModule> module_;
  std::string name_;
  GraphDrawerOptions options_;
  std::unordered_map<const Node*, double> node_us_;
  std::unordered_map<const Node*, std::string> colors_;
  std::vector<std::pair<std::string, std::string>> legend_;
};

/// Draws `module`'s graph into `path` (FxGraphDrawer::write: .dot / .gv,
/// .svg, .html / .htm, by the extension), the graph named after the file
/// ("out/resnet18.svg" → "resnet18"). Run ShapeProp first for shapes.
void draw_graph(std::shared_ptr<GraphModule> module, const std::string& path, GraphDrawerOptions options = {});

/// The class name of the module a call_module node calls ("Conv2d" for an
/// imported TorchScript leaf, "torch::nn::Conv2dImpl" for a C++ one); the
/// target itself if `module` has no such submodule.
std::string module_type_name(const GraphModule& module, const Node& node);

/// The shapes in a node's meta["tensor_meta"] (one per tensor, flattened as
/// ShapeProp stores them); empty when the node has none.
std::vector<TensorMetadata> node_tensor_meta(const Node& node);

/// Writes `text` to `path` atomically (a temporary file beside it, renamed
/// over it). Throws fx::Error naming the path if that fails; then `path` is
/// unchanged and no temporary file is left.
void write_text_file_atomically(const std::string& path, const std::string& text);

/// Extra details of a node the HTML page shows, each a title and a text
/// behind a "show" link (a fused kernel's program and C++ source): the
/// layer that knows a target registers them, the drawer below it shows them.
using NodeDetails = std::function<std::vector<std::pair<std::string, std::string>>(const Node& node)>;

/// Registers `details` for call_function nodes of `target` (replacing any
/// earlier registration); thread-safe. Details that throw are shown as the
/// error's text.
void register_node_details(const std::string& target, NodeDetails details);

}  // namespace fx
