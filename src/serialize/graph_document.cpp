// Graph ↔ JSON: nodes with opcode, name, target, args, kwargs, type
// annotation and serializable meta. Every Argument kind has one tagged JSON
// form (docs/file_format.md); loading rebuilds the graph node by node in
// file order, so a reference to a node that is not defined yet is an error.
#include "torchscript/jit_targets.h"
#include "serialize/document.h"

#include <fx/shape_guard.h>
#include <fx/target.h>
#include <fx/tensor_meta.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace fx::serialize_detail {

namespace {

// ---- enum names ------------------------------------------------------------

const std::vector<std::pair<c10::Layout, const char*>>& layouts() {
  static const std::vector<std::pair<c10::Layout, const char*>> v = {
      {c10::kStrided, "strided"},        {c10::kSparse, "sparse_coo"},      {c10::kSparseCsr, "sparse_csr"},
      {c10::kSparseCsc, "sparse_csc"},   {c10::kSparseBsr, "sparse_bsr"},   {c10::kSparseBsc, "sparse_bsc"},
      {c10::kMkldnn, "_mkldnn"}};
  return v;
}

const std::vector<std::pair<c10::MemoryFormat, const char*>>& memory_formats() {
  static const std::vector<std::pair<c10::MemoryFormat, const char*>> v = {
      {c10::MemoryFormat::Contiguous, "contiguous_format"},
      {c10::MemoryFormat::Preserve, "preserve_format"},
      {c10::MemoryFormat::ChannelsLast, "channels_last"},
      {c10::MemoryFormat::ChannelsLast3d, "channels_last_3d"}};
  return v;
}

template <class E>
const char* enum_name(const std::vector<std::pair<E, const char*>>& table, E value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  throw Error("internal: enum value without a name");
}

template <class E>
E enum_from_name(const std::vector<std::pair<E, const char*>>& table, const std::string& name, const char* what,
                 const std::string& where) {
  for (const auto& [e, n] : table)
    if (name == n) return e;
  throw ImportError(where + ": unknown " + what + " '" + name + "'");
}

/// Makes sure a call_function target the importer registers at import time
/// (run-time list constructors, TorchScript-only operators) is registered in
/// this process too: it is registered again from its name. Unknown names
/// stay unknown (node creation reports them).
void known_target(const std::string& target) {
  try {
    check_function_target(target);
  } catch (const TargetError&) {
    import_detail::register_import_target(target);
  }
}

json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double float_from_json(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  bad_type(v, "a number (or \"inf\", \"-inf\", \"nan\")", where);
}

// ---- arguments ------------------------------------------------------------

json constant_to_json(const c10::IValue& v, SaveContext& ctx, const std::string& where) {
  if (v.isTensor()) return {{"tensor", ctx.tensors.add(v.toTensor(), where)}};
  if (v.isTuple() || v.isList()) {
    json items = json::array();
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) items.push_back(constant_to_json(e, ctx, where));
    } else {
      for (const auto& e : v.toListRef()) items.push_back(constant_to_json(e, ctx, where));
    }
    return {{v.isTuple() ? "constant_tuple" : "constant_list", std::move(items)}};
  }
  if (v.isNone()) return nullptr;
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt();
  if (v.isDouble()) return {{"float", float_json(v.toDouble())}};
  if (v.isString()) return v.toStringRef();
  if (is_packed_constant(v)) return {{"packed", packed_to_json(v, ctx, where)}};
  if (is_dynamic_linear_constant(v)) return {{"dynamic_linear", dynamic_linear_to_json(v, ctx, where)}};
  throw Error(where + ": a constant of type " + v.type()->str() + " cannot be saved");
}

c10::IValue constant_from_json(const json& j, LoadContext& ctx, const std::string& where) {
  if (j.is_null()) return c10::IValue();
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1) {
    const std::string& key = j.begin().key();
    const json& value = j.begin().value();
    if (key == "tensor") return ctx.tensors.get(value, where);
    if (key == "float") return float_from_json(value, where);
    if (key == "packed") return packed_from_json(value, ctx, where);
    if (key == "dynamic_linear") return dynamic_linear_from_json(value, ctx, where);
    if (key == "constant_tuple" || key == "constant_list") {
      if (!value.is_array()) bad_type(value, "an array", where + ": " + key);
      std::vector<c10::IValue> items;
      for (const json& e : value) items.push_back(constant_from_json(e, ctx, where));
      if (key == "constant_tuple") return c10::ivalue::Tuple::create(std::move(items));
      // A list: typed when the elements agree (tensors), as the tracer makes them.
      bool tensors = !items.empty();
      for (const auto& e : items) tensors = tensors && e.isTensor();
      if (tensors) {
        c10::List<at::Tensor> l;
        for (const auto& e : items) l.push_back(e.toTensor());
        return l;
      }
      c10::impl::GenericList l(c10::AnyType::get());
      for (auto& e : items) l.push_back(std::move(e));
      return l;
    }
  }
  throw ImportError(where + ": not a constant: " + j.dump().substr(0, 80));
}

json argument_to_json(const Argument& a, SaveContext& ctx, const std::string& where) {
  using K = Argument::Kind;
  auto sequence = [&](const std::vector<Argument>& items) {
    json out = json::array();
    for (const auto& i : items) out.push_back(argument_to_json(i, ctx, where));
    return out;
  };
  switch (a.kind()) {
    case K::None: return nullptr;
    case K::Bool: return a.to_bool();
    case K::Int: return a.to_int();
    case K::Double: return {{"float", float_json(a.to_double())}};
    case K::String: return a.to_string();
    case K::Node: return {{"node", a.to_node()->name()}};
    case K::ScalarType: return {{"dtype", dtype_name(a.to_scalar_type())}};
    case K::Device: return {{"device", a.to_device().str()}};
    case K::Layout: return {{"layout", enum_name(layouts(), a.to_layout())}};
    case K::MemoryFormat: return {{"memory_format", enum_name(memory_formats(), a.to_memory_format())}};
    case K::Constant: return {{"constant", constant_to_json(a.to_constant(), ctx, where)}};
    case K::List: return {{"list", sequence(a.items())}};
    case K::Tuple: return {{"tuple", sequence(a.items())}};
    case K::Slice: return {{"slice", sequence(a.slice_parts())}};
    case K::Ellipsis: return {{"ellipsis", true}};
    case K::Dict: {
      json out = json::array();
      for (const auto& [k, v] : a.dict_items()) out.push_back(json::array({k, argument_to_json(v, ctx, where)}));
      return {{"dict", std::move(out)}};
    }
  }
  throw Error(where + ": internal: unknown argument kind");
}

/// Resolves node names while a graph is being rebuilt.
struct NodeLookup {
  const std::unordered_map<std::string, size_t>* position;  // every node name in the file → index
  std::unordered_map<std::string, Node*> made;
  size_t current = 0;

  Node* find(const std::string& name, const std::string& where) const {
    auto it = made.find(name);
    if (it != made.end()) return it->second;
    auto p = position->find(name);
    if (p != position->end())
      throw ImportError(where + ": refers to node '" + name + "', which is defined later (node " +
                        std::to_string(p->second) + "; node " + std::to_string(current) + " is this one)");
    throw ImportError(where + ": refers to unknown node '" + name + "'");
  }
};

Argument argument_from_json(const json& j, LoadContext& ctx, const NodeLookup& nodes, const std::string& where) {
  if (j.is_null()) return Argument();
  if (j.is_boolean()) return Argument(j.get<bool>());
  if (j.is_number_integer()) return Argument(j.get<int64_t>());
  if (j.is_string()) return Argument(j.get<std::string>());
  if (!j.is_object() || j.size() != 1) bad_type(j, "an argument (null, bool, int, string or a one-key object)", where);
  const std::string& key = j.begin().key();
  const json& value = j.begin().value();
  auto sequence = [&](const char* what) {
    if (!value.is_array()) bad_type(value, "an array", where + ": " + what);
    std::vector<Argument> items;
    items.reserve(value.size());
    for (const json& v : value) items.push_back(argument_from_json(v, ctx, nodes, where));
    return items;
  };
  if (key == "node") return Argument(nodes.find(as_string(value, where + ": node"), where));
  if (key == "float") return Argument(float_from_json(value, where));
  if (key == "dtype") return Argument(dtype_from_name(as_string(value, where + ": dtype"), where));
  if (key == "device") {
    const std::string d = as_string(value, where + ": device");
    try {
      return Argument(c10::Device(d));
    } catch (const c10::Error&) {
      throw ImportError(where + ": unknown device '" + d + "'");
    }
  }
  if (key == "layout") return Argument(enum_from_name(layouts(), as_string(value, where), "layout", where));
  if (key == "memory_format")
    return Argument(enum_from_name(memory_formats(), as_string(value, where), "memory format", where));
  if (key == "constant") return Argument::from_ivalue(constant_from_json(value, ctx, where));
  if (key == "list") return Argument::list(sequence("list"));
  if (key == "tuple") return Argument::tuple(sequence("tuple"));
  if (key == "slice") {
    auto parts = sequence("slice");
    if (parts.size() != 3) throw ImportError(where + ": a slice has 3 parts, not " + std::to_string(parts.size()));
    return Argument::slice(parts[0], parts[1], parts[2]);
  }
  if (key == "ellipsis") return Argument::ellipsis();
  if (key == "dict") {
    if (!value.is_array()) bad_type(value, "an array", where + ": dict");
    Kwargs items;
    for (const json& kv : value) {
      if (!kv.is_array() || kv.size() != 2) bad_type(kv, "a [key, value] pair", where + ": dict");
      items.emplace_back(as_string(kv[0], where + ": dict key"), argument_from_json(kv[1], ctx, nodes, where));
    }
    return Argument::dict(std::move(items));
  }
  throw ImportError(where + ": unknown argument kind '" + key + "'");
}

// ---- meta -----------------------------------------------------------------

json tensor_meta_to_json(const TensorMetadata& m) {
  return {{"shape", m.shape},
          {"dtype", dtype_name(m.dtype)},
          {"requires_grad", m.requires_grad},
          {"stride", m.stride},
          {"memory_format", m.memory_format ? json(enum_name(memory_formats(), *m.memory_format)) : json(nullptr)},
          {"is_quantized", m.is_quantized}};
}

TensorMetadata tensor_meta_from_json(const json& j, const std::string& where) {
  TensorMetadata m;
  for (const json& v : get_array(j, "shape", where)) m.shape.push_back(as_int(v, where + ": shape"));
  m.dtype = dtype_from_name(get_string(j, "dtype", where), where);
  m.requires_grad = get_bool(j, "requires_grad", where);
  for (const json& v : get_array(j, "stride", where)) m.stride.push_back(as_int(v, where + ": stride"));
  const json& f = field(j, "memory_format", where);
  if (!f.is_null()) m.memory_format = enum_from_name(memory_formats(), as_string(f, where), "memory format", where);
  m.is_quantized = get_bool(j, "is_quantized", where);
  return m;
}

/// One meta value as JSON; nullopt when it is not serializable.
std::optional<json> meta_to_json(const std::any& v) {
  if (auto* m = std::any_cast<TensorMetadata>(&v)) return json{{"tensor_meta", tensor_meta_to_json(*m)}};
  if (auto* l = std::any_cast<std::vector<TensorMetadata>>(&v)) {
    json items = json::array();
    for (const auto& m : *l) items.push_back(tensor_meta_to_json(m));
    return json{{"tensor_meta_list", std::move(items)}};
  }
  if (auto* g = std::any_cast<ShapeGuard>(&v)) {
    return json{{"shape_guard", {{"shape", g->shape}, {"dtype", dtype_name(g->dtype)}}}};
  }
  if (auto* s = std::any_cast<std::string>(&v)) return json{{"string", *s}};
  if (auto* b = std::any_cast<bool>(&v)) return json{{"bool", *b}};
  if (auto* i = std::any_cast<int64_t>(&v)) return json{{"int", *i}};
  if (auto* i = std::any_cast<int>(&v)) return json{{"int", *i}};
  if (auto* d = std::any_cast<double>(&v)) return json{{"float", float_json(*d)}};
  return std::nullopt;
}

std::any meta_from_json(const json& j, const std::string& where) {
  if (!j.is_object() || j.size() != 1) bad_type(j, "a meta value (a one-key object)", where);
  const std::string& key = j.begin().key();
  const json& value = j.begin().value();
  if (key == "tensor_meta") return tensor_meta_from_json(value, where);
  if (key == "tensor_meta_list") {
    if (!value.is_array()) bad_type(value, "an array", where);
    std::vector<TensorMetadata> l;
    for (const json& m : value) l.push_back(tensor_meta_from_json(m, where));
    return l;
  }
  if (key == "shape_guard") {
    ShapeGuard g;
    for (const json& v : get_array(value, "shape", where)) {
      g.shape.push_back(as_int(v, where + ": shape_guard shape"));
      if (g.shape.back() < kDynamicDim) {
        throw ImportError(where + ": shape_guard shape has size " + std::to_string(g.shape.back()) +
                          " (sizes are >= 0, or -1 for a dynamic dimension)");
      }
    }
    g.dtype = dtype_from_name(get_string(value, "dtype", where), where);
    return g;
  }
  if (key == "string") return as_string(value, where);
  if (key == "bool") {
    if (!value.is_boolean()) bad_type(value, "a bool", where);
    return value.get<bool>();
  }
  if (key == "int") return as_int(value, where);
  if (key == "float") return float_from_json(value, where);
  throw ImportError(where + ": unknown meta kind '" + key + "'");
}

}  // namespace

json graph_to_json(const Graph& graph, SaveContext& ctx, const std::string& where) {
  json nodes = json::array();
  for (Node* n : graph.nodes()) {
    const std::string nw = where + "node '" + n->name() + "'";
    json args = json::array();
    for (const auto& a : n->args()) args.push_back(argument_to_json(a, ctx, nw));
    json kwargs = json::array();
    for (const auto& [k, v] : n->kwargs()) kwargs.push_back(json::array({k, argument_to_json(v, ctx, nw)}));
    json node = {{"name", n->name()}, {"op", to_string(n->op())}, {"target", n->target()},
                 {"args", std::move(args)}, {"kwargs", std::move(kwargs)}};
    if (!n->type().empty()) node["type"] = n->type();
    if (n->op() == Opcode::CallFunction && n->target() == "fxcpp::fused_kernel" && n->args().size() >= 2 &&
        n->args()[1].kind() == Argument::Kind::String) {
      const std::string& program = n->args()[1].to_string();
      if (std::find(ctx.kernel_programs.begin(), ctx.kernel_programs.end(), program) == ctx.kernel_programs.end())
        ctx.kernel_programs.push_back(program);
    }
    if (ctx.options.keep_meta && !n->meta().empty()) {
      json meta = json::object();
      for (const auto& [key, value] : n->meta()) {
        if (auto j = meta_to_json(value)) {
          meta[key] = std::move(*j);
        } else {
          ++ctx.report.dropped_meta;
          ctx.report.dropped_meta_keys.push_back(n->name() + "." + key);
        }
      }
      if (!meta.empty()) node["meta"] = std::move(meta);
    }
    nodes.push_back(std::move(node));
  }
  return {{"nodes", std::move(nodes)}};
}

std::shared_ptr<Graph> graph_from_json(const json& doc, LoadContext& ctx, const std::string& where) {
  const json& nodes = get_array(doc, "nodes", where);
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string name = get_string(nodes[i], "name", where + ": node " + std::to_string(i));
    if (!position.emplace(name, i).second)
      throw ImportError(where + ": node " + std::to_string(i) + ": the name '" + name + "' is used twice");
  }
  auto graph = std::make_shared<Graph>();
  NodeLookup lookup{&position, {}, 0};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& j = nodes[i];
    const std::string name = get_string(j, "name", where);
    const std::string nw = where + ": node '" + name + "'";
    lookup.current = i;
    const std::string op_name = get_string(j, "op", nw);
    Opcode op;
    try {
      op = opcode_from_string(op_name);
    } catch (const Error&) {
      throw ImportError(nw + ": unknown opcode '" + op_name + "'");
    }
    const std::string target = get_string(j, "target", nw);
    if (op == Opcode::CallFunction) known_target(target);
    ArgList args;
    for (const json& a : get_array(j, "args", nw)) args.push_back(argument_from_json(a, ctx, lookup, nw));
    Kwargs kwargs;
    for (const json& kv : get_array(j, "kwargs", nw)) {
      if (!kv.is_array() || kv.size() != 2) bad_type(kv, "a [name, value] pair", nw + ": kwargs");
      kwargs.emplace_back(as_string(kv[0], nw + ": kwarg name"), argument_from_json(kv[1], ctx, lookup, nw));
    }
    std::optional<std::string> type;
    if (const json* t = optional_field(j, "type", nw)) type = as_string(*t, nw + ": type");
    Node* n;
    try {
      n = graph->create_node(op, target, std::move(args), std::move(kwargs), name, type);
    } catch (const ImportError&) {
      throw;
    } catch (const Error& e) {
      throw ImportError(nw + ": " + e.what());
    }
    if (n->name() != name)
      throw ImportError(nw + ": the name is not usable (it would become '" + n->name() + "')");
    if (const json* meta = optional_field(j, "meta", nw)) {
      if (!meta->is_object()) bad_type(*meta, "an object", nw + ": meta");
      for (const auto& [key, value] : meta->items()) n->meta()[key] = meta_from_json(value, nw + ": meta '" + key + "'");
    }
    lookup.made.emplace(name, n);
  }
  try {
    graph->lint();
  } catch (const Error& e) {
    throw ImportError(where + ": the graph is not valid: " + e.what());
  }
  return graph;
}

}  // namespace fx::serialize_detail
