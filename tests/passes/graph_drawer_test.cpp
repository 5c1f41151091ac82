// FxGraphDrawer (torch.fx.passes.graph_drawer): the DOT text (nodes, edges,
// labels, colours, clusters), the SVG Graphviz lays out (one <g class="node">
// per node), the self-contained HTML page (no URL, the node data, the heat
// map) and the atomic file writing. The page's behaviour in a browser is
// tested by the ctest entry draw_browser (tests/passes/draw.cmake).
#include "passes_test_util.h"

#include <fx/examples/residual_net.h>
#include <fx/passes/graph_drawer.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace {

using fx::Node;

size_t count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The line of the DOT text that declares node `name`.
std::string node_line(const std::string& dot, const std::string& name) {
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);)
    if (line.find("\"" + name + "\" [label=") != std::string::npos) return line;
  return "<no line for " + name + ">";
}

std::shared_ptr<fx::GraphModule> traced_net() {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  model->eval();
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 8, 8})});
  fx::ShapeProp(gm).propagate({at::randn({1, 3, 8, 8})});
  return gm;
}

size_t edge_count(const fx::Graph& g) {
  size_t e = 0;
  for (Node* n : g.nodes()) e += n->users().size();
  return e;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir() {
  char tmpl[] = "/tmp/fx_draw_test_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

TEST(GraphDrawer, DotHasEveryNodeAndEdge) {
  auto gm = traced_net();
  const std::string dot = fx::FxGraphDrawer(gm, "residual_net").get_dot_graph();
  EXPECT_EQ(dot.rfind("digraph \"residual_net\" {\n", 0), 0u) << dot;
  EXPECT_EQ(count(dot, "\\[label=\""), gm->graph().nodes().size());
  EXPECT_EQ(count(dot, "\" -> \""), edge_count(gm->graph()));
  for (Node* n : gm->graph().nodes())
    for (Node* u : n->users())
      EXPECT_NE(dot.find("\"" + n->name() + "\" -> \"" + u->name() + "\";"), std::string::npos) << n->name();
}

TEST(GraphDrawer, LabelsMirrorTorchFx) {
  auto gm = traced_net();
  const std::string dot = fx::FxGraphDrawer(gm, "net").get_dot_graph();
  // torch.fx's record label: name, op_code, target, num_users, then dtype and shape.
  EXPECT_EQ(node_line(dot, "x"),
            "  \"x\" [label=\"{name=%x|op_code=placeholder\\n|target=x\\n|num_users=1\\n|dtype=torch.float32\\n"
            "|shape=(1, 3, 8, 8)\\n}\", fillcolor=\"AliceBlue\"];");
  EXPECT_EQ(node_line(dot, "block_conv1"),
            "    \"block_conv1\" [label=\"{name=%block_conv1|op_code=call_module\\n|target=block.conv1\\n"
            "|torch::nn::Conv2dImpl\\n|num_users=1\\n|dtype=torch.float32\\n|shape=(1, 16, 4, 4)\\n}\", "
            "fillcolor=\"LemonChiffon1\"];");
  // Args that name nodes are left out (the edges show them); constants stay.
  const std::string pool = node_line(dot, "max_pool2d");
  EXPECT_NE(pool.find("|args=(\\l[2, 2],\\n)\\l"), std::string::npos) << pool;
  EXPECT_EQ(pool.find("%relu"), std::string::npos) << pool;
  EXPECT_NE(node_line(dot, "output").find("fillcolor=\"PowderBlue\""), std::string::npos);
}

TEST(GraphDrawer, ModulesBecomeNestedClusters) {
  auto gm = traced_net();
  const std::string dot = fx::FxGraphDrawer(gm, "net").get_dot_graph();
  EXPECT_EQ(count(dot, "subgraph \"cluster_"), 1u);
  const size_t open = dot.find("subgraph \"cluster_block\" {");
  ASSERT_NE(open, std::string::npos) << dot;
  const size_t close = dot.find("\n  }\n", open);
  const std::string cluster = dot.substr(open, close - open);
  for (const char* name : {"block_conv1", "block_bn1", "block_conv2", "block_bn2"})
    EXPECT_NE(cluster.find("\"" + std::string(name) + "\" [label="), std::string::npos) << name;
  EXPECT_EQ(cluster.find("\"conv1\" [label="), std::string::npos);  // top-level module: no cluster
  EXPECT_EQ(cluster.find("\"add\" [label="), std::string::npos);    // call_function: outside

  fx::GraphDrawerOptions flat;
  flat.cluster_modules = false;
  EXPECT_EQ(count(fx::FxGraphDrawer(gm, "net", flat).get_dot_graph(), "subgraph"), 0u);
}

TEST(GraphDrawer, IgnoreGetattrAndSpecialCharacters) {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* y = g->call_function("aten::add", {x, w});
  Node* s = g->call_function("aten::sum", {y}, {{"dim", fx::Argument::list({0})}, {"keepdim", true}});
  g->output(s);
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::ones({2}));
  auto gm = fx_test::module_of(g, root);
  const std::string dot = fx::FxGraphDrawer(gm, "g{|}<\"x\">").get_dot_graph();
  EXPECT_EQ(count(dot, "\\[label=\""), 5u);
  EXPECT_NE(node_line(dot, "sum_1").find("|kwargs=\\{\\ldim: [0],\\nkeepdim: True,\\n\\}\\l"), std::string::npos)
      << node_line(dot, "sum_1");
  fx::GraphDrawerOptions opts;
  opts.ignore_getattr = true;
  const std::string no_attr = fx::FxGraphDrawer(gm, "g", opts).get_dot_graph();
  EXPECT_EQ(count(no_attr, "\\[label=\""), 4u);
  EXPECT_EQ(no_attr.find("\"w\""), std::string::npos);
  // Graphviz accepts the escaped name and labels.
  const std::string svg = fx::FxGraphDrawer(gm, "g{|}<\"x\">").render_svg();
  EXPECT_EQ(count(svg, "<g id=\"node[0-9]+\" class=\"node\">"), 5u);
}

TEST(GraphDrawer, SvgHasOneGroupPerNode) {
  auto gm = traced_net();
  const std::string svg = fx::FxGraphDrawer(gm, "net").render_svg();
  ASSERT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<g id=\"node[0-9]+\" class=\"node\">"), gm->graph().nodes().size());
  EXPECT_EQ(count(svg, "<g id=\"edge[0-9]+\" class=\"edge\">"), edge_count(gm->graph()));
  EXPECT_EQ(count(svg, "<g id=\"clust[0-9]+\" class=\"cluster\">"), 1u);
  // XML-ish: every opened group is closed; each node's title is its name.
  EXPECT_EQ(count(svg, "<g[ >]"), count(svg, "</g>"));
  for (Node* n : gm->graph().nodes())
    EXPECT_NE(svg.find("class=\"node\">\n<title>" + n->name() + "</title>"), std::string::npos) << n->name();
}

TEST(GraphDrawer, HtmlIsSelfContained) {
  auto gm = traced_net();
  const std::string html = fx::FxGraphDrawer(gm, "net</script>").render_html();
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(count(html, "<g id=\"node[0-9]+\" class=\"node\">"), gm->graph().nodes().size());
  EXPECT_EQ(count(html, "<script"), 2u);
  EXPECT_EQ(count(html, "</script>"), 2u);  // the name's "</script>" is escaped
  EXPECT_NE(html.find("<title>net&lt;/script&gt; - fxcpp graph</title>"), std::string::npos);
  EXPECT_NE(html.find("{\"args\":[],\"inputs\":[],\"kwargs\":{},\"name\":\"x\",\"op\":\"placeholder\","
                      "\"stack_trace\":\"\",\"target\":\"x\",\"tensor_meta\":[{\"dtype\":\"torch.float32\","
                      "\"memory_format\":\"torch.contiguous_format\",\"requires_grad\":false,"
                      "\"shape\":[1,3,8,8],\"stride\":[192,64,8,1]}],\"users\":[\"conv1\"]}"),
            std::string::npos);
  EXPECT_EQ(html.find("fx-legend\">"), std::string::npos);  // no times, no legend
}

TEST(GraphDrawer, NodeTimesMakeAHeatMap) {
  auto gm = traced_net();
  std::unordered_map<const Node*, double> times;
  for (Node* n : gm->graph().nodes()) times[n] = 10;
  Node* conv = gm->graph().find_nodes(fx::Opcode::CallModule, "block.conv1").at(0);
  times[conv] = 1000;
  fx::FxGraphDrawer drawer(gm, "net");
  drawer.set_node_times(times);
  const std::string dot = drawer.get_dot_graph();
  const double total = 10.0 * (gm->graph().nodes().size() - 1) + 1000;
  char share[32];
  std::snprintf(share, sizeof share, "(%.1f%%)", 100000.0 / total);
  EXPECT_NE(node_line(dot, "block_conv1").find("|time=1.000 ms " + std::string(share) + "\\n}\", fillcolor=\"#dc1414\""),
            std::string::npos)
      << node_line(dot, "block_conv1");
  EXPECT_NE(node_line(dot, "x").find("fillcolor=\"#fffefa\""), std::string::npos) << node_line(dot, "x");
  const std::string html = drawer.render_html();
  EXPECT_NE(html.find("<span id=\"fx-legend\">node time: 0 <span class=\"bar\"></span> 1.000 ms (total "),
            std::string::npos);
  EXPECT_NE(html.find("\"time_us\":1000.0"), std::string::npos);
}

TEST(GraphDrawer, WritesByExtensionAtomically) {
  auto gm = traced_net();
  fx::FxGraphDrawer drawer(gm, "net");
  const std::string dir = temp_dir();
  drawer.write(dir + "/g.dot");
  EXPECT_EQ(read_file(dir + "/g.dot"), drawer.get_dot_graph());
  drawer.write(dir + "/g.svg");
  EXPECT_EQ(read_file(dir + "/g.svg"), drawer.render_svg());
  drawer.write(dir + "/g.html");
  EXPECT_EQ(read_file(dir + "/g.html").rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(fx_test::error_of([&] { drawer.write(dir + "/g.png"); }),
            dir + "/g.png: unknown drawing format (expected .dot, .gv, .svg, .html or .htm)");
  EXPECT_EQ(fx_test::error_of([&] { drawer.write(dir + "/missing/g.dot"); }),
            dir + "/missing/g.dot: cannot be opened for writing: No such file or directory");
  fx::draw_graph(gm, dir + "/net.v2.gv");
  EXPECT_EQ(read_file(dir + "/net.v2.gv").rfind("digraph \"net.v2\" {\n", 0), 0u);
  std::remove((dir + "/net.v2.gv").c_str());
  // A failed write leaves the old file and no temporary file.
  EXPECT_EQ(fx_test::error_of([&] { drawer.write(dir); }).find(dir + ": unknown drawing format"), 0u);
  EXPECT_EQ(std::system(("test $(ls " + dir + " | wc -l) -eq 3").c_str()), 0);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
