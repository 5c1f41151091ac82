// FxGraphDrawer: DOT text and Graphviz-rendered SVG (see fx/passes/graph_drawer.h).
#include <fx/error.h>
#include <fx/passes/graph_drawer.h>

#include "graph_drawer_detail.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace fx {

namespace drawer_detail {

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string heat_color(double share) {
  share = std::clamp(share, 0.0, 1.0);
  // white (255,255,255) → yellow (255,220,0) → red (220,20,20)
  int r, g, b;
  if (share < 0.5) {
    double t = share / 0.5;
    r = 255;
    g = static_cast<int>(std::lround(255 - 35 * t));
    b = static_cast<int>(std::lround(255 - 255 * t));
  } else {
    double t = (share - 0.5) / 0.5;
    r = static_cast<int>(std::lround(255 - 35 * t));
    g = static_cast<int>(std::lround(220 - 200 * t));
    b = static_cast<int>(std::lround(20 * t));
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

TimeRange time_range(const FxGraphDrawer& drawer) {
  TimeRange r;
  for (const Node* n : drawn_nodes(drawer)) {
    auto it = drawer.node_times().find(n);
    if (it == drawer.node_times().end()) continue;
    r.total_us += it->second;
    r.max_us = std::max(r.max_us, it->second);
  }
  return r;
}

std::vector<const Node*> drawn_nodes(const FxGraphDrawer& drawer) {
  std::vector<const Node*> out;
  for (Node* n : drawer.module().graph().nodes())
    if (!(drawer.options().ignore_getattr && n->op() == Opcode::GetAttr)) out.push_back(n);
  return out;
}

}  // namespace drawer_detail

using namespace drawer_detail;

namespace {

// torch.fx _COLOR_MAP and _HASH_COLOR_MAP.
const char* opcode_color(Opcode op) {
  switch (op) {
    case Opcode::Placeholder: return "AliceBlue";
    case Opcode::CallModule: return "LemonChiffon1";
    case Opcode::GetAttr: return "LightGrey";
    case Opcode::Output: return "PowderBlue";
    default: return nullptr;
  }
}

const char* const kHashColors[] = {"CadetBlue1",     "Coral",         "DarkOliveGreen1", "DarkSeaGreen1",
                                   "GhostWhite",     "Khaki1",        "LavenderBlush1",  "LightSkyBlue",
                                   "MistyRose1",     "MistyRose2",    "PaleTurquoise2",  "PeachPuff1",
                                   "Salmon",         "Thistle1",      "Thistle3",        "Wheat1"};

std::string hash_color(const std::string& target) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : target) h = (h ^ c) * 16777619u;
  return kHashColors[h % (sizeof kHashColors / sizeof kHashColors[0])];
}

// Escapes text for a field of a Graphviz record label (written between
// double quotes as is: the label's own escapes, \n \l \{, must reach Graphviz).
std::string record_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '{' || c == '}' || c == '|' || c == '<' || c == '>' || c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string dot_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string cut(const std::string& s, size_t max = 60) { return s.size() <= max ? s : s.substr(0, max - 3) + "..."; }

bool mentions_node(const Argument& a) {
  bool found = false;
  for_each_node(a, [&](Node*) { found = true; });
  return found;
}

// torch.fx _get_str_for_args_kwargs: "|args=(\l1,\n2,\n)\l".
std::string args_field(const FxGraphDrawer& d, const Node& n) {
  std::vector<std::string> args, kwargs;
  for (const auto& a : n.args())
    if (!(d.options().skip_node_names_in_args && mentions_node(a))) args.push_back(cut(format_arg(a)));
  for (const auto& kv : n.kwargs())
    if (!(d.options().skip_node_names_in_args && mentions_node(kv.second)))
      kwargs.push_back(cut(kv.first + ": " + format_arg(kv.second)));
  std::string out;
  auto field = [&](const char* prefix, const std::vector<std::string>& items, const char* suffix) {
    if (items.empty()) return;
    out += prefix;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ",\\n" : "") + record_escape(items[i]);
    out += suffix;
  };
  field("|args=(\\l", args, ",\\n)\\l");
  field("|kwargs=\\{\\l", kwargs, ",\\n\\}\\l");
  return out;
}

std::string node_label(const FxGraphDrawer& d, const Node& n, double total_us) {
  std::string label = "{name=%" + n.name() + "|op_code=" + to_string(n.op()) + "\\n";
  if (n.op() == Opcode::CallModule) {
    label += "|target=" + record_escape(n.target()) + "\\n|" + record_escape(module_type_name(d.module(), n)) + "\\n";
  } else {
    label += "|target=" + record_escape(n.target()) + "\\n" + args_field(d, n);
  }
  label += "|num_users=" + std::to_string(n.users().size()) + "\\n";
  for (const TensorMetadata& m : node_tensor_meta(n))
    label += "|dtype=" + python_dtype_repr(m.dtype) + "\\n|shape=" + shape_repr(m.shape) + "\\n";
  auto t = d.node_times().find(&n);
  if (t != d.node_times().end() && total_us > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "|time=%.3f ms (%.1f%%)\\n", t->second / 1e3, 100.0 * t->second / total_us);
    label += buf;
  }
  return label + "}";
}

// Module paths as a tree of clusters: "layer1" holds "layer1.0", which holds
// the node layer1_0_conv1 (target "layer1.0.conv1").
struct Cluster {
  std::map<std::string, Cluster> children;  // by full path
  std::vector<const Node*> nodes;
};

void emit_cluster(std::ostringstream& os, const std::string& path, const Cluster& c,
                  const std::map<const Node*, std::string>& lines, const std::string& indent) {
  os << indent << "subgraph " << dot_quoted("cluster_" + path) << " {\n"
     << indent << "  label=" << dot_quoted(path) << "; style=\"rounded,dashed\"; color=\"#7f7f7f\"; fontcolor=\"#555555\";\n";
  for (const auto& kv : c.children) emit_cluster(os, kv.first, kv.second, lines, indent + "  ");
  for (const Node* n : c.nodes) os << indent << "  " << lines.at(n);
  os << indent << "}\n";
}

std::mutex& graphviz_mutex() {
  static std::mutex m;
  return m;
}

std::string* graphviz_errors = nullptr;  // guarded by graphviz_mutex()

int collect_graphviz_error(char* msg) {
  if (graphviz_errors && msg) *graphviz_errors += msg;
  return 0;
}

}  // namespace

std::string module_type_name(const GraphModule& module, const Node& node) {
  try {
    return module.get_submodule(node.target())->name();
  } catch (const std::exception&) {
    return node.target();
  }
}

std::vector<TensorMetadata> node_tensor_meta(const Node& node) {
  auto it = node.meta().find("tensor_meta");
  if (it == node.meta().end()) return {};
  if (const auto* m = std::any_cast<TensorMetadata>(&it->second)) return {*m};
  if (const auto* ms = std::any_cast<std::vector<TensorMetadata>>(&it->second)) return *ms;
  return {};
}

FxGraphDrawer::FxGraphDrawer(std::shared_ptr<GraphModule> module, std::string name, GraphDrawerOptions options)
    : module_(std::move(module)), name_(std::move(name)), options_(options) {
  if (!module_) throw Error("FxGraphDrawer: no module given");
}

namespace {
/// Nodes above which the layout is capped (get_dot_graph).
constexpr size_t kLargeGraph = 300;
}  // namespace

void FxGraphDrawer::set_node_times(std::unordered_map<const Node*, double> node_us) { node_us_ = std::move(node_us); }

void FxGraphDrawer::set_node_colors(std::unordered_map<const Node*, std::string> colors,
                                    std::vector<std::pair<std::string, std::string>> legend) {
  colors_ = std::move(colors);
  legend_ = std::move(legend);
}

std::string FxGraphDrawer::get_dot_graph() const {
  const TimeRange times = time_range(*this);
  std::vector<const Node*> nodes = drawn_nodes(*this);
  std::map<const Node*, std::string> lines;
  for (const Node* n : nodes) {
    std::string fill;
    auto t = node_us_.find(n);
    auto c = colors_.find(n);
    if (c != colors_.end()) fill = c->second;
    else if (times.max_us > 0 && t != node_us_.end()) fill = heat_color(t->second / times.max_us);
    else if (const char* c = opcode_color(n->op())) fill = c;
    else fill = hash_color(n->target());
    lines[n] = dot_quoted(n->name()) + " [label=\"" + node_label(*this, *n, times.total_us) + "\", fillcolor=" + dot_quoted(fill) +
               "];\n";
  }
  std::ostringstream os;
  os << "digraph " << dot_quoted(name_) << " {\n"
     << "  rankdir=\"TB\";\n"
     // Large graphs (a joint forward+backward graph has ~1,000 nodes): cap
     // Graphviz's crossing minimisation and network simplex, whose full runs
     // take minutes there, for a layout in seconds.
     << (nodes.size() > kLargeGraph ? "  mclimit=0.05; nslimit=2; nslimit1=2; remincross=false; searchsize=10;\n" : "")
     << "  node [shape=\"record\", style=\"filled,rounded\", fontcolor=\"#000000\", fontname=\"Helvetica\", "
        "fontsize=10];\n"
     << "  edge [color=\"#555555\"];\n";
  if (!legend_.empty()) {
    os << "  subgraph \"cluster_legend\" {\n    label=\"key\"; style=\"rounded\"; color=\"#7f7f7f\";\n";
    for (size_t i = 0; i < legend_.size(); ++i)
      os << "    " << dot_quoted("legend_" + std::to_string(i)) << " [label=" << dot_quoted(legend_[i].second)
         << ", fillcolor=" << dot_quoted(legend_[i].first) << "];\n";
    os << "  }\n";
  }
  Cluster root;
  for (const Node* n : nodes) {
    if (!options_.cluster_modules || n->op() != Opcode::CallModule) {
      root.nodes.push_back(n);
      continue;
    }
    Cluster* c = &root;
    const std::string& t = n->target();
    for (size_t dot = t.find('.'); dot != std::string::npos; dot = t.find('.', dot + 1))
      c = &c->children[t.substr(0, dot)];
    c->nodes.push_back(n);
  }
  for (const auto& kv : root.children) emit_cluster(os, kv.first, kv.second, lines, "  ");
  for (const Node* n : root.nodes) os << "  " << lines.at(n);
  for (const Node* n : nodes)
    for (Node* u : n->users()) os << "  " << dot_quoted(n->name()) << " -> " << dot_quoted(u->name()) << ";\n";
  os << "}\n";
  return os.str();
}

std::string FxGraphDrawer::render_svg() const {
  const std::string dot = get_dot_graph();
  std::lock_guard<std::mutex> lock(graphviz_mutex());
  std::string errors;
  graphviz_errors = &errors;
  // Graphviz reports through a process-wide callback: collect its messages
  // for the exception (nothing on stderr), then put the old settings back.
  struct Restore {
    agerrlevel_t level = agseterr(AGERR);
    agusererrf handler = agseterrf(collect_graphviz_error);
    ~Restore() {
      agseterrf(handler);
      agseterr(level);
      graphviz_errors = nullptr;
    }
  } restore;

  // One Graphviz context for the process (used under graphviz_mutex): its
  // pango plugin keeps font names of a freed context in a cache, and a second
  // context read them after free (ASan: heap-use-after-free in textspan_size).
  static GVC_t* const context = gvContext();
  if (!context) throw Error("graph " + name_ + ": Graphviz context could not be created");
  struct Borrowed {
    GVC_t* c;
    GVC_t* get() const { return c; }
  } gvc{context};
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> g(agmemread(dot.c_str()), agclose);
  auto fail = [&](const std::string& what) {
    std::string why = errors;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    std::replace(why.begin(), why.end(), '\n', ' ');
    return Error("graph " + name_ + ": Graphviz " + what + (why.empty() ? "" : ": " + why));
  };
  if (!g) throw fail("could not read the DOT text");
  if (gvLayout(gvc.get(), g.get(), "dot") != 0) throw fail("layout failed");
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gvc.get(), g.get(), "svg", &data, &length);
  std::string svg = rc == 0 && data ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc.get(), g.get());
  if (rc != 0 || svg.empty()) throw fail("SVG rendering failed");
  return svg;
}

void FxGraphDrawer::write(const std::string& path) const {
  auto ends_with = [&](const char* ext) {
    const size_t n = std::strlen(ext);
    return path.size() > n && path.compare(path.size() - n, n, ext) == 0;
  };
  std::string text;
  if (ends_with(".dot") || ends_with(".gv")) text = get_dot_graph();
  else if (ends_with(".svg")) text = render_svg();
  else if (ends_with(".html") || ends_with(".htm")) text = render_html();
  else throw Error(path + ": unknown drawing format (expected .dot, .gv, .svg, .html or .htm)");
  write_text_file_atomically(path, text);
}

void draw_graph(std::shared_ptr<GraphModule> module, const std::string& path, GraphDrawerOptions options) {
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  FxGraphDrawer(std::move(module), name, options).write(path);
}

void write_text_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".fxcpp-tmp-" + std::to_string(::getpid());
  bool ok;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot be opened for writing: " + std::strerror(errno));
    out << text;
    out.flush();
    ok = static_cast<bool>(out);
  }
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = ok ? std::strerror(errno) : "write failed";
    std::remove(tmp.c_str());
    throw Error(path + ": cannot be written: " + why);
  }
}

}  // namespace fx
