// FxGraphDrawer::render_html: one self-contained interactive page (see
// fx/passes/graph_drawer.h). The Graphviz SVG is inlined; the node details
// travel as JSON in a <script type="application/json"> block; the script
// and style are inline. Nothing is fetched from the network.
#include <fx/passes/graph_drawer.h>

#include "graph_drawer_detail.h"

#include <nlohmann/json.hpp>

#include <mutex>
#include <regex>

namespace fx {

using namespace drawer_detail;

namespace {

struct DetailsRegistry {
  std::mutex mutex;
  std::unordered_map<std::string, NodeDetails> by_target;
};

DetailsRegistry& details_registry() {
  static auto* r = new DetailsRegistry;  // never destroyed: libraries may register at exit-time teardown
  return *r;
}

nlohmann::json node_details(const Node& n) {
  nlohmann::json out = nlohmann::json::array();
  if (n.op() != Opcode::CallFunction) return out;
  NodeDetails fn;
  {
    DetailsRegistry& r = details_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.by_target.find(n.target());
    if (it == r.by_target.end()) return out;
    fn = it->second;
  }
  try {
    for (auto& [title, text] : fn(n)) out.push_back({title, text});
  } catch (const std::exception& e) {
    out.push_back({"details", std::string("(not available: ") + e.what() + ")"});
  }
  return out;
}

const char* memory_format_name(const std::optional<c10::MemoryFormat>& f) {
  if (!f) return "None";
  if (*f == c10::MemoryFormat::Contiguous) return "torch.contiguous_format";
  if (*f == c10::MemoryFormat::ChannelsLast) return "torch.channels_last";
  return "torch.channels_last_3d";
}

nlohmann::json node_json(const FxGraphDrawer& d, const Node& n, const TimeRange& times) {
  nlohmann::json j;
  j["name"] = n.name();
  j["op"] = to_string(n.op());
  j["target"] = n.target();
  if (n.op() == Opcode::CallModule) j["module_type"] = module_type_name(d.module(), n);
  nlohmann::json args = nlohmann::json::array();
  for (const auto& a : n.args()) args.push_back(format_arg(a));
  j["args"] = args;
  nlohmann::json kwargs = nlohmann::json::object();
  for (const auto& kv : n.kwargs()) kwargs[kv.first] = format_arg(kv.second);
  j["kwargs"] = kwargs;
  nlohmann::json metas = nlohmann::json::array();
  for (const TensorMetadata& m : node_tensor_meta(n))
    metas.push_back({{"dtype", python_dtype_repr(m.dtype)},
                     {"shape", m.shape},
                     {"stride", m.stride},
                     {"requires_grad", m.requires_grad},
                     {"memory_format", memory_format_name(m.memory_format)}});
  j["tensor_meta"] = metas;
  j["stack_trace"] = n.stack_trace();
  if (nlohmann::json details = node_details(n); !details.empty()) j["details"] = std::move(details);
  nlohmann::json inputs = nlohmann::json::array(), users = nlohmann::json::array();
  for (Node* i : n.all_input_nodes()) inputs.push_back(i->name());
  for (Node* u : n.users()) users.push_back(u->name());
  j["inputs"] = inputs;
  j["users"] = users;
  auto t = d.node_times().find(&n);
  if (t != d.node_times().end() && times.total_us > 0) {
    j["time_us"] = t->second;
    j["time_share"] = t->second / times.total_us;
  }
  return j;
}

// The Graphviz SVG without its XML prologue and namespace declarations
// (inline SVG in HTML needs neither, and they are the only URLs in it).
std::string inline_svg(const std::string& svg) {
  size_t start = svg.find("<svg");
  std::string s = start == std::string::npos ? svg : svg.substr(start);
  static const std::regex xmlns(R"( xmlns(:\w+)?="[^"]*")");
  return std::regex_replace(s, xmlns, "");
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* const kStyle = R"CSS(
html, body { margin: 0; height: 100%; font: 13px/1.4 Helvetica, Arial, sans-serif; color: #222; }
body { display: flex; flex-direction: column; }
#fx-bar { display: flex; gap: 12px; align-items: center; padding: 6px 10px; background: #f3f3f3; border-bottom: 1px solid #ccc; }
#fx-bar h1 { font-size: 15px; margin: 0; }
#fx-search { width: 260px; padding: 3px 6px; }
#fx-search-status { color: #666; }
#fx-main { flex: 1; display: flex; min-height: 0; }
#fx-viewport { flex: 1; overflow: hidden; cursor: grab; background: #fff; position: relative; }
#fx-viewport.dragging { cursor: grabbing; }
#fx-viewport > svg { width: 100%; height: 100%; display: block; }
#fx-panel { width: 360px; overflow: auto; border-left: 1px solid #ccc; padding: 8px 12px; background: #fafafa; }
#fx-panel h2 { font-size: 14px; margin: 4px 0 8px; word-break: break-all; }
#fx-panel table { border-collapse: collapse; width: 100%; }
#fx-panel td { vertical-align: top; padding: 2px 4px; border-bottom: 1px solid #e6e6e6; word-break: break-all; }
#fx-panel td.k { color: #666; white-space: nowrap; width: 90px; }
#fx-panel pre { margin: 0; white-space: pre-wrap; font-size: 12px; }
#fx-panel a { cursor: pointer; color: #1a5fb4; }
g.node { cursor: pointer; }
g.node.fx-hl polygon, g.node.fx-hl path { stroke: #d0021b; stroke-width: 4px; }
g.node.fx-selected polygon, g.node.fx-selected path { stroke: #1a5fb4; stroke-width: 4px; }
#fx-legend { display: flex; align-items: center; gap: 6px; }
#fx-legend .bar { width: 160px; height: 12px; border: 1px solid #999;
  background: linear-gradient(to right, #ffffff, #ffdc00, #dc1414); }
)CSS";

const char* const kScript = R"JS(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('fx-data').textContent);
  var byName = {};
  data.nodes.forEach(function (n) { byName[n.name] = n; });
  var viewport = document.getElementById('fx-viewport');
  var svg = viewport.querySelector('svg');
  var panel = document.getElementById('fx-panel');
  var groups = {};
  svg.querySelectorAll('g.node').forEach(function (g) {
    var t = g.querySelector('title');
    if (t) groups[t.textContent] = g;
  });
  svg.removeAttribute('width');
  svg.removeAttribute('height');
  var box = svg.viewBox.baseVal;
  var full = { x: box.x, y: box.y, w: box.width, h: box.height };
  var view = { x: full.x, y: full.y, w: full.w, h: full.h };
  function apply() { svg.setAttribute('viewBox', view.x + ' ' + view.y + ' ' + view.w + ' ' + view.h); }
  function toSvg(cx, cy) {
    var p = svg.createSVGPoint();
    p.x = cx; p.y = cy;
    return p.matrixTransform(svg.getScreenCTM().inverse());
  }
  function zoom(factor, cx, cy) {
    var p = toSvg(cx, cy);
    var w = Math.min(Math.max(view.w * factor, full.w / 200), full.w * 4);
    var f = w / view.w;
    view.x = p.x - (p.x - view.x) * f;
    view.y = p.y - (p.y - view.y) * f;
    view.w *= f; view.h *= f;
    apply();
  }
  viewport.addEventListener('wheel', function (e) {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.2 : 1 / 1.2, e.clientX, e.clientY);
  }, { passive: false });
  var drag = null;
  viewport.addEventListener('mousedown', function (e) {
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, scale: 1 / svg.getScreenCTM().a, moved: false };
    viewport.classList.add('dragging');
  });
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    view.x = drag.vx - dx * drag.scale;
    view.y = drag.vy - dy * drag.scale;
    apply();
  });
  window.addEventListener('mouseup', function () {
    viewport.classList.remove('dragging');
    setTimeout(function () { drag = null; }, 0);
  });

  function centre(name) {
    var g = groups[name];
    if (!g) return;
    var r = g.getBoundingClientRect();
    var c = toSvg(r.left + r.width / 2, r.top + r.height / 2);
    // Zoomed out below life size: show the node at 1 unit = 1 pixel.
    if (svg.getScreenCTM().a < 0.8) { view.w = viewport.clientWidth; view.h = viewport.clientHeight; }
    view.x = c.x - view.w / 2;
    view.y = c.y - view.h / 2;
    apply();
  }
  function text(tag, s, cls) {
    var e = document.createElement(tag);
    e.textContent = s;
    if (cls) e.className = cls;
    return e;
  }
  function row(table, key, value) {
    var tr = document.createElement('tr');
    tr.appendChild(text('td', key, 'k'));
    var td = document.createElement('td');
    if (value instanceof Node) td.appendChild(value); else td.appendChild(text('pre', value));
    tr.appendChild(td);
    table.appendChild(tr);
  }
  function shown(s) {
    var span = document.createElement('span');
    var a = text('a', 'show (' + s.split('\n').length + ' lines)');
    a.className = 'fx-show';
    var pre = text('pre', s);
    pre.style.display = 'none';
    a.addEventListener('click', function () {
      var open = pre.style.display === 'none';
      pre.style.display = open ? 'block' : 'none';
      a.textContent = (open ? 'hide' : 'show') + ' (' + s.split('\n').length + ' lines)';
    });
    span.appendChild(a);
    span.appendChild(pre);
    return span;
  }
  function links(names) {
    var span = document.createElement('span');
    names.forEach(function (name, i) {
      if (i) span.appendChild(document.createTextNode(', '));
      var a = text('a', name);
      a.addEventListener('click', function () { select(name, true); });
      span.appendChild(a);
    });
    if (!names.length) span.textContent = '-';
    return span;
  }
  function select(name, scroll) {
    var n = byName[name];
    if (!n) return false;
    svg.querySelectorAll('g.node.fx-selected').forEach(function (g) { g.classList.remove('fx-selected'); });
    if (groups[name]) groups[name].classList.add('fx-selected');
    if (scroll) centre(name);
    panel.textContent = '';
    panel.appendChild(text('h2', '%' + n.name));
    panel.firstChild.id = 'fx-panel-title';
    var t = document.createElement('table');
    row(t, 'opcode', n.op);
    row(t, 'target', n.target);
    if (n.module_type) row(t, 'module', n.module_type);
    row(t, 'args', '(' + n.args.join(', ') + (n.args.length === 1 ? ',)' : ')'));
    var kw = Object.keys(n.kwargs).map(function (k) { return k + ': ' + n.kwargs[k]; });
    row(t, 'kwargs', '{' + kw.join(', ') + '}');
    if (n.tensor_meta.length) {
      row(t, 'tensor_meta', n.tensor_meta.map(function (m) {
        return 'dtype=' + m.dtype + '\nshape=(' + m.shape.join(', ') + ')\nstride=(' + m.stride.join(', ') +
               ')\nrequires_grad=' + m.requires_grad + '\nmemory_format=' + m.memory_format;
      }).join('\n\n'));
    } else {
      row(t, 'tensor_meta', '-');
    }
    row(t, 'inputs', links(n.inputs));
    row(t, 'users', links(n.users));
    if (n.time_us !== undefined)
      row(t, 'time', (n.time_us / 1000).toFixed(3) + ' ms (' + (100 * n.time_share).toFixed(1) + ' %)');
    row(t, 'source', n.stack_trace || '-');
    (n.details || []).forEach(function (d) { row(t, d[0], shown(d[1])); });
    panel.appendChild(t);
    return true;
  }
  Object.keys(groups).forEach(function (name) {
    groups[name].addEventListener('click', function (e) {
      if (drag && drag.moved) return;
      e.stopPropagation();
      select(name, false);
    });
  });

  var input = document.getElementById('fx-search');
  var status = document.getElementById('fx-search-status');
  function search(q) {
    svg.querySelectorAll('g.node.fx-hl').forEach(function (g) { g.classList.remove('fx-hl'); });
    if (!q) { status.textContent = ''; return null; }
    var names = Object.keys(groups);
    var hits = names.filter(function (k) { return k.indexOf(q) >= 0; });
    var best = groups[q] ? q : hits[0];
    hits.forEach(function (k) { groups[k].classList.add('fx-hl'); });
    status.textContent = hits.length + ' match' + (hits.length === 1 ? '' : 'es');
    if (best) { centre(best); select(best, false); }
    return best || null;
  }
  input.addEventListener('input', function () { search(input.value.trim()); });
  input.addEventListener('keydown', function (e) { if (e.key === 'Enter') search(input.value.trim()); });
  document.getElementById('fx-fit').addEventListener('click', function () {
    view = { x: full.x, y: full.y, w: full.w, h: full.h }; apply();
  });
  apply();

  var hash = decodeURIComponent(location.hash.slice(1));
  if (hash.indexOf('node=') === 0) select(hash.slice(5), true);
  if (hash === 'selftest') {
    var result = { svg_nodes: svg.querySelectorAll('g.node').length, data_nodes: data.nodes.length,
                   clusters: svg.querySelectorAll('g.cluster').length, panel_before: panel.textContent };
    var first = data.nodes.filter(function (n) { return n.op.indexOf('call_') === 0; })[0] || data.nodes[0];
    var g = groups[first.name];
    var r = g.getBoundingClientRect();
    g.dispatchEvent(new MouseEvent('click', { bubbles: true, clientX: r.left + 2, clientY: r.top + 2 }));
    result.clicked = first.name;
    result.clicked_op = first.op;
    result.clicked_target = first.target;
    var title = document.getElementById('fx-panel-title');
    result.panel_title = title ? title.textContent : '';
    result.panel_text = panel.innerText;
    var w0 = view.w;
    var vr = viewport.getBoundingClientRect();
    viewport.dispatchEvent(new WheelEvent('wheel', { deltaY: -100, bubbles: true, cancelable: true,
                                                     clientX: vr.left + vr.width / 2, clientY: vr.top + vr.height / 2 }));
    result.zoomed_in = view.w < w0;
    var x0 = view.x, cx = vr.left + 10, cy = vr.top + 10;
    viewport.dispatchEvent(new MouseEvent('mousedown', { bubbles: true, clientX: cx, clientY: cy }));
    window.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: cx + 50, clientY: cy }));
    window.dispatchEvent(new MouseEvent('mouseup', { bubbles: true, clientX: cx + 50, clientY: cy }));
    result.panned = view.x < x0;  // dragging right shows what is left of the view
    var last = data.nodes[data.nodes.length - 1].name;
    result.search_hit = search(last);
    result.highlighted = svg.querySelectorAll('g.node.fx-hl').length;
    result.legend = !!document.getElementById('fx-legend');
    var timed = data.nodes.filter(function (n) { return n.time_us !== undefined; });
    result.hottest = timed.length ? timed.reduce(function (a, b) { return b.time_us > a.time_us ? b : a; }).name : null;
    var detailed = data.nodes.filter(function (n) { return n.details && n.details.length; })[0];
    if (detailed) {
      select(detailed.name, true);
      var all = panel.querySelectorAll('a.fx-show'), link = all[all.length - 1];
      var hidden = link.nextSibling.offsetParent === null;
      link.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      result.details_node = detailed.name;
      result.details_hidden_before = hidden;
      result.details_shown = link.nextSibling.offsetParent !== null ? link.nextSibling.textContent : null;
    }
    document.getElementById('selftest').textContent = JSON.stringify(result);
  }
})();
)JS";

}  // namespace

void register_node_details(const std::string& target, NodeDetails details) {
  DetailsRegistry& r = details_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.by_target[target] = std::move(details);
}

std::string FxGraphDrawer::render_html() const {
  const TimeRange times = time_range(*this);
  nlohmann::json doc;
  doc["name"] = name_;
  doc["nodes"] = nlohmann::json::array();
  for (const Node* n : drawn_nodes(*this)) doc["nodes"].push_back(node_json(*this, *n, times));
  std::string json = doc.dump();
  // "</script>" inside a string must not end the block: "<\/" is the same JSON.
  for (size_t p = json.find("</"); p != std::string::npos; p = json.find("</", p + 3)) json.replace(p, 2, "<\\/");

  const std::string title = html_escape(name_);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + title +
                     " - fxcpp graph</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<div id=\"fx-bar\"><h1>" +
                     title + "</h1><span>" + std::to_string(doc["nodes"].size()) +
                     " nodes</span><input id=\"fx-search\" type=\"search\" placeholder=\"search a node by name\">"
                     "<span id=\"fx-search-status\"></span><button id=\"fx-fit\">fit</button>";
  if (times.max_us > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "<span id=\"fx-legend\">node time: 0 <span class=\"bar\"></span> %.3f ms (total %.3f ms)</span>",
                  times.max_us / 1e3, times.total_us / 1e3);
    html += buf;
  }
  html += "</div>\n<div id=\"fx-main\"><div id=\"fx-viewport\">\n" + inline_svg(render_svg()) +
          "</div>\n<div id=\"fx-panel\"><p>Click a node to see its details.</p></div></div>\n"
          "<pre id=\"selftest\" hidden></pre>\n<script type=\"application/json\" id=\"fx-data\">" +
          json + "</script>\n<script>" + kScript + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace fx
