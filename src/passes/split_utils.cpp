// split_by_tags and the attribute helpers (torch.fx passes/split_utils.py).
#include <fx/passes/split_utils.h>

#include <unordered_map>
#include <unordered_set>

namespace fx {

namespace {

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> atoms;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    atoms.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return atoms;
}

std::shared_ptr<torch::nn::Module> child(const torch::nn::Module& m, const std::string& name) {
  auto children = m.named_children();
  auto* c = children.find(name);
  return c ? *c : nullptr;
}

/// What lives at a dotted name: a module, or a tensor (parameter or buffer).
struct Attr {
  std::shared_ptr<torch::nn::Module> module;
  at::Tensor tensor;
  bool is_parameter = false;
  bool found = false;
};

Attr find_attr(const torch::nn::Module& from, const std::string& name) {
  Attr a;
  auto atoms = split_dots(name);
  const torch::nn::Module* m = &from;
  std::shared_ptr<torch::nn::Module> holder;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    holder = child(*m, atoms[i]);
    if (!holder) return a;
    m = holder.get();
  }
  const std::string& leaf = atoms.back();
  if (auto c = child(*m, leaf)) {
    a.module = c;
    a.found = true;
    return a;
  }
  auto params = m->named_parameters(/*recurse=*/false);
  if (auto* p = params.find(leaf)) {
    a.tensor = *p;
    a.is_parameter = true;
    a.found = true;
    return a;
  }
  auto buffers = m->named_buffers(/*recurse=*/false);
  if (auto* b = buffers.find(leaf)) {
    a.tensor = *b;
    a.found = true;
  }
  return a;
}

}  // namespace

std::string get_tag(const Node* node) {
  const Meta& meta = node->meta();
  auto it = meta.find("tag");
  if (it == meta.end()) return "";
  if (const auto* s = std::any_cast<std::string>(&it->second)) return *s;
  return "";
}

void set_tag(Node* node, std::string tag) { node->meta()["tag"] = std::move(tag); }

bool has_attr_recursive(const torch::nn::Module& from, const std::string& qualified_name) {
  return find_attr(from, qualified_name).found;
}

void copy_attr_recursive(const torch::nn::Module& from, const std::string& from_name, torch::nn::Module& to,
                         const std::string& to_name) {
  Attr a = find_attr(from, from_name);
  if (!a.found) throw Error("Node target " + from_name + " not found!");
  auto atoms = split_dots(to_name);
  torch::nn::Module* m = &to;
  for (size_t i = 0; i + 1 < atoms.size(); ++i) {
    auto c = child(*m, atoms[i]);
    if (!c) {
      c = std::make_shared<torch::nn::Module>("Module");
      m->register_module(atoms[i], c);
    }
    m = c.get();
  }
  const std::string& leaf = atoms.back();
  if (a.module) {
    if (child(*m, leaf)) {
      m->replace_module(leaf, a.module);
    } else {
      m->register_module(leaf, a.module);
    }
    return;
  }
  if (find_attr(*m, leaf).found) return;  // already there (shared by several nodes)
  if (a.is_parameter) {
    m->register_parameter(leaf, a.tensor, a.tensor.requires_grad());
  } else {
    m->register_buffer(leaf, a.tensor);
  }
}

namespace {

/// torch.fx split_utils.Component.
struct Component {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  size_t order = 0;
  std::string name;
  std::vector<Node*> input_placeholders;
  std::vector<Node*> orig_inputs;
  std::unordered_map<const Node*, size_t> input_index;  // orig input -> index in orig_inputs
  std::vector<Node*> orig_outputs;
  std::unordered_map<const Node*, Node*> getattr_maps;
};

}  // namespace

std::shared_ptr<GraphModule> split_by_tags(const std::shared_ptr<GraphModule>& gm, const std::vector<std::string>& tags,
                                           const TagFn& tag_of) {
  if (!gm) throw Error("split_by_tags: graph module is null");
  const Graph& graph = gm->graph();
  const TagFn read_tag = tag_of ? tag_of : TagFn(get_tag);

  std::vector<Component> components(tags.size());
  std::unordered_map<std::string, size_t> tag_to_component;
  for (size_t i = 0; i < tags.size(); ++i) {
    if (!tag_to_component.emplace(tags[i], i).second)
      throw Error("split_by_tags: tag '" + tags[i] + "' appears twice in tags");
    components[i].order = i;
    components[i].name = tags[i];
  }

  const size_t max_id = graph.max_node_id();
  std::vector<Node*> node_remapping(max_id, nullptr);  // original node -> copy in its component
  std::vector<int64_t> node_to_component(max_id, -1);
  std::vector<Node*> used_in_main;  // ordered set
  std::vector<uint8_t> in_used_in_main(max_id, 0);
  auto mark_used_in_main = [&](Node* x) {
    if (!in_used_in_main[x->id()]) {
      in_used_in_main[x->id()] = 1;
      used_in_main.push_back(x);
    }
  };

  // Validate first (tags, order) so that errors come before any work.
  Node* output_node = nullptr;
  for (Node* node : graph.nodes()) {
    if (node->op() == Opcode::Output) {
      if (output_node) throw Error("split_by_tags: Multiple output nodes in graph!");
      output_node = node;
      continue;
    }
    if (node->op() == Opcode::Placeholder || node->op() == Opcode::GetAttr) continue;
    const std::string tag = read_tag(node);
    if (tag.empty()) throw Error("split_by_tags: node " + node->format_node() + " has no tag");
    auto it = tag_to_component.find(tag);
    if (it == tag_to_component.end())
      throw Error("split_by_tags: node " + node->format_node() + " has tag '" + tag + "', which is not in tags");
    size_t mx = 0;
    for (Node* x : node->all_input_nodes()) {
      if (x->op() == Opcode::Placeholder || x->op() == Opcode::GetAttr) continue;
      if (node_to_component[x->id()] < 0)
        throw Error("split_by_tags: node " + node->format_node() + " uses " + x->name() +
                    ", which is not before it in the graph");
      mx = std::max(mx, static_cast<size_t>(node_to_component[x->id()]));
    }
    if (it->second < mx)
      throw Error("split_by_tags: node " + node->format_node() + " has tag '" + tag + "' but its input comes from tag '" +
                  tags[mx] + "', which is later in tags");
    node_to_component[node->id()] = static_cast<int64_t>(it->second);
  }
  if (!output_node) throw Error("split_by_tags: Graph had no output node!");

  auto main_g = std::make_shared<Graph>();
  std::unordered_map<const Node*, Argument> main_remapping;

  for (Node* node : graph.nodes()) {
    if (node->op() == Opcode::Output) continue;
    if (node->op() == Opcode::Placeholder) {
      main_remapping[node] = main_g->placeholder(node->name());
      continue;
    }
    if (node->op() == Opcode::GetAttr) continue;
    Component& comp = components[static_cast<size_t>(node_to_component[node->id()])];
    auto remap = [&](Node* x) -> Argument {
      if (x->op() == Opcode::GetAttr) {
        auto it = comp.getattr_maps.find(x);
        if (it == comp.getattr_maps.end()) it = comp.getattr_maps.emplace(x, comp.graph->get_attr(x->target())).first;
        return it->second;
      }
      if (x->op() != Opcode::Placeholder && node_to_component[x->id()] == static_cast<int64_t>(comp.order))
        return node_remapping[x->id()];
      auto it = comp.input_index.find(x);
      if (it == comp.input_index.end()) {
        it = comp.input_index.emplace(x, comp.orig_inputs.size()).first;
        comp.orig_inputs.push_back(x);
        comp.input_placeholders.push_back(comp.graph->placeholder(x->name()));
        mark_used_in_main(x);
      }
      return comp.input_placeholders[it->second];
    };
    Node* n = comp.graph->node_copy(node, remap);
    node_remapping[node->id()] = n;
  }

  std::vector<Node*> output_get_attrs;
  const Argument out_arg = output_node->args().empty() ? Argument() : output_node->args()[0];
  for_each_node(out_arg, [&](Node* x) {
    if (x->op() == Opcode::GetAttr) {
      if (!main_remapping.count(x)) {
        main_remapping[x] = main_g->get_attr(x->name());
        output_get_attrs.push_back(x);
      }
    } else {
      mark_used_in_main(x);
    }
  });
  for (Node* n : used_in_main)
    if (n->op() != Opcode::Placeholder)
      components[static_cast<size_t>(node_to_component[n->id()])].orig_outputs.push_back(n);

  auto main_root = std::make_shared<torch::nn::Module>("HolderModule");
  for (Component& comp : components) {
    std::vector<Argument> outs;
    for (Node* o : comp.orig_outputs) outs.push_back(node_remapping[o->id()]);
    comp.graph->output(outs.size() == 1 ? outs[0] : Argument::tuple(outs));
    auto sub = std::make_shared<GraphModule>(gm, comp.graph);  // lift_subgraph_as_module
    main_root->register_module(comp.name, sub);
    ArgList args;
    for (Node* x : comp.orig_inputs) args.push_back(main_remapping.at(x));
    Node* main_node = main_g->call_module(comp.name, std::move(args));
    if (outs.size() == 1) {
      main_remapping[comp.orig_outputs[0]] = main_node;
    } else {
      for (size_t i = 0; i < comp.orig_outputs.size(); ++i)
        main_remapping[comp.orig_outputs[i]] =
            main_g->call_function("operator.getitem", {main_node, static_cast<int64_t>(i)});
    }
  }
  main_g->output(map_arg(out_arg, [&](Node* x) { return main_remapping.at(x); }));
  for (Node* x : output_get_attrs) copy_attr_recursive(*gm, x->target(), *main_root, x->name());
  return std::make_shared<GraphModule>(main_root, main_g);
}

}  // namespace fx
