// The module hierarchy in the document: plain intermediate modules,
// GraphModules (recursively, with their graphs), TorchScript leaves of
// imported models (their TorchScript as a record) and registered C++
// modules (registry name + options + state), control-flow modules (their
// branch / body GraphModules). A module met again (a leaf a branch graph
// shares with the root) is a reference to where it was first written.
// Parameters and buffers point into the tensor table.
#include "torchscript/file_checks.h"
#include "torchscript/leaf_module.h"
#include "serialize/document.h"

#include <fx/control_flow.h>

#include <sstream>

namespace fx::serialize_detail {

namespace {

std::string join(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

json named_tensors(const std::vector<std::pair<std::string, at::Tensor>>& items, const std::string& path,
                   SaveContext& ctx) {
  json out = json::array();
  for (const auto& [name, t] : items) out.push_back(json::array({name, ctx.tensors.add(t, "tensor '" + join(path, name) + "'")}));
  return out;
}

json parameters_json(const torch::nn::Module& m, const std::string& path, SaveContext& ctx, bool recurse) {
  std::vector<std::pair<std::string, at::Tensor>> items;
  for (const auto& p : m.named_parameters(recurse)) items.emplace_back(p.key(), p.value());
  return named_tensors(items, path, ctx);
}

json buffers_json(const torch::nn::Module& m, const std::string& path, SaveContext& ctx, bool recurse) {
  std::vector<std::pair<std::string, at::Tensor>> items;
  for (const auto& b : m.named_buffers(recurse)) items.emplace_back(b.key(), b.value());
  return named_tensors(items, path, ctx);
}

/// Parameters, buffers and children of a plain module or a GraphModule.
void contents_to_json(const torch::nn::Module& m, const std::string& path, SaveContext& ctx, json& out) {
  out["training"] = m.is_training();
  out["parameters"] = parameters_json(m, path, ctx, false);
  out["buffers"] = buffers_json(m, path, ctx, false);
  json children = json::array();
  for (const auto& c : m.named_children())
    children.push_back(json::array({c.key(), module_to_json(*c.value(), join(path, c.key()), ctx)}));
  out["children"] = std::move(children);
}

/// [name, tensor index] pairs of a module document.
std::vector<std::pair<std::string, at::Tensor>> tensors_from_json(const json& doc, const char* key,
                                                                  const std::string& where, LoadContext& ctx) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const json& item : get_array(doc, key, where)) {
    if (!item.is_array() || item.size() != 2) bad_type(item, "a [name, tensor] pair", where + ": " + key);
    std::string name = as_string(item[0], where + ": " + key);
    out.emplace_back(name, ctx.tensors.get(item[1], where + ": " + key + " '" + name + "'"));
  }
  return out;
}

/// A plain module with the document's parameters, buffers and children.
std::shared_ptr<torch::nn::Module> plain_from_json(const json& doc, const std::string& path, LoadContext& ctx,
                                                   const std::string& where) {
  auto m = std::make_shared<torch::nn::Module>();
  m->train(get_bool(doc, "training", where));  // before the children: train() recurses
  try {
    for (auto& [name, t] : tensors_from_json(doc, "parameters", where, ctx))
      m->register_parameter(name, t, t.requires_grad());
    for (auto& [name, t] : tensors_from_json(doc, "buffers", where, ctx)) m->register_buffer(name, t);
  } catch (const c10::Error& e) {
    throw ImportError(where + ": " + e.what_without_backtrace());
  }
  for (const json& item : get_array(doc, "children", where)) {
    if (!item.is_array() || item.size() != 2) bad_type(item, "a [name, module] pair", where + ": children");
    const std::string name = as_string(item[0], where + ": children");
    auto child = module_from_json(item[1], join(path, name), ctx);
    try {
      m->register_module(name, child);
    } catch (const c10::Error& e) {
      throw ImportError(where + ": " + e.what_without_backtrace());
    }
  }
  return m;
}

/// Loads a registered module's saved state into the module its options made.
void load_state(torch::nn::Module& m, const json& doc, const std::string& where, LoadContext& ctx) {
  torch::NoGradGuard no_grad;
  for (const char* key : {"parameters", "buffers"}) {
    const bool params = std::string(key) == "parameters";
    auto saved = tensors_from_json(doc, key, where, ctx);
    auto current = params ? m.named_parameters(true) : m.named_buffers(true);
    if (saved.size() != current.size())
      throw ImportError(where + ": " + std::to_string(saved.size()) + " " + key + " in the file but the module has " +
                        std::to_string(current.size()));
    for (auto& [name, t] : saved) {
      at::Tensor* target = current.find(name);
      if (!target) throw ImportError(where + ": the module has no " + (params ? "parameter" : "buffer") + " '" + name + "'");
      if (target->sizes() != t.sizes() || target->scalar_type() != t.scalar_type()) {
        std::ostringstream os;
        os << where << ": " << (params ? "parameter" : "buffer") << " '" << name << "' is " << t.scalar_type()
           << t.sizes() << " in the file but the module's options make " << target->scalar_type() << target->sizes();
        throw ImportError(os.str());
      }
      target->set_data(t);
      if (params) target->set_requires_grad(t.requires_grad());
    }
  }
}

/// The GraphModule a branch or body document describes (at `path`).
std::shared_ptr<GraphModule> graph_child(const json& doc, const char* key, const std::string& path, LoadContext& ctx,
                                         const std::string& where) {
  auto m = std::dynamic_pointer_cast<GraphModule>(module_from_json(field(doc, key, where), join(path, key), ctx));
  if (!m) throw ImportError(where + ": its " + key + " is not a graph_module");
  return m;
}

/// A count of a control-flow document (num_results, num_carried): not negative.
size_t get_count(const json& doc, const char* key, const std::string& where) {
  const int64_t n = get_int(doc, key, where);
  if (n < 0) throw ImportError(where + ": " + key + " is " + std::to_string(n) + ", it must not be negative");
  return static_cast<size_t>(n);
}

/// Sets a control-flow module's own training flag when its branches already
/// have it (train() recurses, and the branches share leaves with the root).
void restore_training(torch::nn::Module& m, bool training) {
  if (m.is_training() == training) return;
  for (const auto& sub : m.modules(/*include_self=*/false))
    if (sub->is_training() != training) return;
  m.train(training);
}

std::shared_ptr<torch::nn::Module> control_flow_from_json(const json& doc, const std::string& kind,
                                                          const std::string& path, LoadContext& ctx,
                                                          const std::string& where) {
  std::shared_ptr<torch::nn::Module> m;
  try {
    if (kind == "cond") {
      const size_t n = get_count(doc, "num_results", where);
      auto t = graph_child(doc, "true_graph", path, ctx, where);
      auto f = graph_child(doc, "false_graph", path, ctx, where);
      m = std::make_shared<CondModule>(t, f, n);
    } else {
      const size_t n = get_count(doc, "num_carried", where);
      m = std::make_shared<WhileLoopModule>(graph_child(doc, "body", path, ctx, where), n);
    }
  } catch (const ImportError&) {
    throw;
  } catch (const Error& e) {
    throw ImportError(where + ": " + e.what());
  }
  restore_training(*m, get_bool(doc, "training", where));
  return m;
}

std::shared_ptr<torch::nn::Module> build_module(const json& doc, const std::string& path, LoadContext& ctx);

}  // namespace

json module_to_json(const torch::nn::Module& m, const std::string& path, SaveContext& ctx) {
  json out;
  // A module met before (a leaf that branch graphs share with the root) is written once.
  auto [seen, first] = ctx.module_paths.emplace(&m, path);
  if (!first) {
    out["kind"] = "shared";
    out["path"] = seen->second;
    return out;
  }
  if (auto* cond = dynamic_cast<const CondModule*>(&m)) {
    out["kind"] = "cond";
    out["num_results"] = cond->num_results();
    out["training"] = m.is_training();
    out["true_graph"] = module_to_json(cond->true_graph(), join(path, "true_graph"), ctx);
    out["false_graph"] = module_to_json(cond->false_graph(), join(path, "false_graph"), ctx);
    return out;
  }
  if (auto* loop = dynamic_cast<const WhileLoopModule*>(&m)) {
    out["kind"] = "while_loop";
    out["num_carried"] = loop->num_carried();
    out["training"] = m.is_training();
    out["body"] = module_to_json(loop->body(), join(path, "body"), ctx);
    return out;
  }
  if (auto* gm = dynamic_cast<const GraphModule*>(&m)) {
    out["kind"] = "graph_module";
    out["class_name"] = gm->class_name();
    out["graph"] = graph_to_json(gm->graph(), ctx, path.empty() ? std::string() : module_label(path) + ": ");
    if (gm->memory_planning()) out["memory_planning"] = true;  // optional (optimised modules)
    contents_to_json(m, path, ctx, out);
    return out;
  }
  if (auto* leaf = dynamic_cast<const import_detail::JitLeafModule*>(&m)) {
    if (!ctx.torchscript_leaves) ctx.torchscript_leaves.emplace(c10::QualifiedName("__torch__.fxcpp.TorchScriptLeaves"));
    const std::string attribute = "leaf" + std::to_string(ctx.torchscript_leaf_count++);
    ctx.torchscript_leaves->register_module(attribute, leaf->jit_module());
    out["kind"] = "torchscript";
    out["type_name"] = demangled_type_name(leaf->jit_module());
    out["attribute"] = attribute;
    out["training"] = m.is_training();
    return out;
  }
  if (const SerializableModuleType* type = find_serializable_module(m)) {
    out["kind"] = "registered";
    out["type"] = type->name;
    out["options"] = type->to_json(m);
    out["training"] = m.is_training();
    out["parameters"] = parameters_json(m, path, ctx, true);
    out["buffers"] = buffers_json(m, path, ctx, true);
    return out;
  }
  if (typeid(m) == typeid(torch::nn::Module)) {
    out["kind"] = "module";
    contents_to_json(m, path, ctx, out);
    return out;
  }
  throw Error(module_label(path) + " of type " + m.name() +
              " cannot be saved: register its type with fx::register_serializable_module");
}

std::shared_ptr<torch::nn::Module> module_from_json(const json& doc, const std::string& path, LoadContext& ctx) {
  auto m = build_module(doc, path, ctx);
  ctx.modules.emplace(path, m);
  return m;
}

namespace {

std::shared_ptr<torch::nn::Module> build_module(const json& doc, const std::string& path, LoadContext& ctx) {
  const std::string where = ctx.file + ": " + module_label(path);
  const std::string kind = get_string(doc, "kind", where);
  if (kind == "shared") {
    // Only modules complete before this one can be referenced: no cycles.
    const std::string target = get_string(doc, "path", where);
    auto it = ctx.modules.find(target);
    if (it == ctx.modules.end())
      throw ImportError(where + ": refers to " + module_label(target) + ", which is not written before it");
    return it->second;
  }
  if (kind == "cond" || kind == "while_loop") return control_flow_from_json(doc, kind, path, ctx, where);
  if (kind == "module") return plain_from_json(doc, path, ctx, where);
  if (kind == "graph_module") {
    const std::string class_name = get_string(doc, "class_name", where);
    auto graph = graph_from_json(field(doc, "graph", where), ctx, path.empty() ? ctx.file : where);
    auto root = plain_from_json(doc, path, ctx, where);
    bool memory_planning = false;
    if (const json* planning = optional_field(doc, "memory_planning", where)) {
      if (!planning->is_boolean()) bad_type(*planning, "a bool", where + ": memory_planning");
      memory_planning = planning->get<bool>();
    }
    try {
      auto gm = std::make_shared<GraphModule>(root, graph, class_name);
      // The tree as it was saved: GraphModule's constructor, as torch.fx's,
      // puts a new empty module on the path of an attribute the graph reads
      // by get_attr (a linear layer's weight once frozen), where the file
      // holds the module that was there (its type, options, training flag).
      for (const auto& child : root->named_children()) {
        std::shared_ptr<torch::nn::Module> installed;
        for (const auto& mine : gm->named_children())
          if (mine.key() == child.key()) installed = mine.value();
        if (installed && installed != child.value()) gm->replace_module(child.key(), child.value());
      }
      if (memory_planning) gm->set_memory_planning(true);
      return gm;
    } catch (const Error& e) {
      throw ImportError(where + ": " + e.what());
    }
  }
  if (kind == "torchscript") {
    get_string(doc, "type_name", where);  // required (the leaf's class, also what its TorchScript type says)
    const std::string name = get_string(doc, "attribute", where);
    if (!ctx.torchscript) throw ImportError(where + ": a TorchScript leaf, but the file holds no TorchScript");
    c10::IValue v;
    if (ctx.torchscript->hasattr(name)) v = ctx.torchscript->attr(name);
    if (!v.isObject() || !v.toObjectRef().type()->is_module())
      throw ImportError(where + ": the file's TorchScript has no module '" + name + "'");
    import_detail::register_leaf_forward();
    // As import builds it: the leaf with its parameters and buffers mirrored
    // (passes such as freeze_modules and fold_batch_norm read them).
    auto leaf = import_detail::build_module_tree(
        torch::jit::Module(v.toObject()), path,
        [&](const torch::jit::Module&, const std::string&, const std::string& qualified) { return qualified == path; });
    leaf->train(get_bool(doc, "training", where));
    return leaf;
  }
  if (kind == "registered") {
    const std::string name = get_string(doc, "type", where);
    const SerializableModuleType* type = find_serializable_module(name);
    if (!type)
      throw ImportError(where + ": module type '" + name +
                        "' is not registered (fx::register_serializable_module) in this program");
    std::shared_ptr<torch::nn::Module> m;
    try {
      SkipInitGuard skip_init;  // load_state replaces every tensor the options make
      m = type->from_json(field(doc, "options", where));
    } catch (const Error&) {
      throw;
    } catch (...) {
      throw ImportError(where + ": cannot rebuild a " + name + " from its options: " +
                        import_detail::current_exception_text());
    }
    if (!m) throw ImportError(where + ": the registry entry of " + name + " made no module");
    m->train(get_bool(doc, "training", where));
    load_state(*m, doc, where, ctx);
    return m;
  }
  throw ImportError(where + ": unknown module kind '" + kind + "'");
}

}  // namespace

}  // namespace fx::serialize_detail
