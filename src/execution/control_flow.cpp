// CondModule and WhileLoopModule: structured control flow as call_module targets.
#include <fx/control_flow.h>
#include <fx/error.h>

#include <mutex>

namespace fx {

namespace {

/// The branch / body results as the module returns them: None, the value, or a tuple.
c10::IValue pack(std::vector<c10::IValue> values) {
  if (values.empty()) return c10::IValue();
  if (values.size() == 1) return std::move(values[0]);
  return c10::ivalue::Tuple::create(std::move(values));
}

/// The `n` values a graph returned (None for none, a tuple for several).
std::vector<c10::IValue> unpack(c10::IValue value, size_t n, const std::string& what) {
  if (n == 1) return {std::move(value)};
  if (n == 0) return {};
  if (!value.isTuple() || value.toTupleRef().elements().size() != n)
    throw Error(what + " returned " + value.tagKind() + " where a tuple of " + std::to_string(n) +
                " values was expected");
  const auto& elements = value.toTupleRef().elements();
  return std::vector<c10::IValue>(elements.begin(), elements.end());
}

void register_control_flow_forwards() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_module_forward(typeid(CondModule), [](torch::nn::Module& m, std::vector<c10::IValue>& args) {
      return static_cast<CondModule&>(m).forward(std::move(args));
    });
    register_module_forward(typeid(WhileLoopModule), [](torch::nn::Module& m, std::vector<c10::IValue>& args) {
      return static_cast<WhileLoopModule&>(m).forward(std::move(args));
    });
  });
}

}  // namespace

bool predicate_value(const c10::IValue& pred) {
  if (pred.isBool()) return pred.toBool();
  if (pred.isInt()) return pred.toInt() != 0;
  if (pred.isTensor()) {
    const at::Tensor& t = pred.toTensor();
    if (t.defined() && t.numel() == 1) return t.item<bool>();
    throw Error("the condition of an if is a tensor with " + std::to_string(t.defined() ? t.numel() : 0) +
                " elements; it must have exactly one");
  }
  throw Error("the condition of an if is a " + pred.tagKind() + ", not a bool");
}

CondModule::CondModule(std::shared_ptr<GraphModule> true_graph, std::shared_ptr<GraphModule> false_graph,
                       size_t num_results)
    : torch::nn::Module("Cond"),
      true_graph_(std::move(true_graph)),
      false_graph_(std::move(false_graph)),
      num_results_(num_results) {
  if (!true_graph_ || !false_graph_) throw Error("CondModule: a branch is null");
  register_module("true_graph", true_graph_);
  register_module("false_graph", false_graph_);
  register_control_flow_forwards();
}

c10::IValue CondModule::forward(std::vector<c10::IValue> args) {
  if (args.empty()) throw Error("cond: missing the condition argument");
  const bool taken = predicate_value(args[0]);
  args.erase(args.begin());
  GraphModule& branch = taken ? *true_graph_ : *false_graph_;
  return branch.forward(std::move(args));
}

WhileLoopModule::WhileLoopModule(std::shared_ptr<GraphModule> body, size_t num_carried)
    : torch::nn::Module("WhileLoop"), body_(std::move(body)), num_carried_(num_carried) {
  if (!body_) throw Error("WhileLoopModule: the body is null");
  register_module("body", body_);
  register_control_flow_forwards();
}

c10::IValue WhileLoopModule::forward(std::vector<c10::IValue> args) {
  if (args.size() < 2 + num_carried_)
    throw Error("while_loop: expected (trip_count, condition, " + std::to_string(num_carried_) +
                " carried values, operands...), got " + std::to_string(args.size()) + " arguments");
  if (!args[0].isInt()) throw Error("while_loop: the trip count is a " + args[0].tagKind() + ", not an int");
  const int64_t trip_count = args[0].toInt();
  bool condition = predicate_value(args[1]);
  std::vector<c10::IValue> carried(args.begin() + 2, args.begin() + 2 + static_cast<std::ptrdiff_t>(num_carried_));
  const std::vector<c10::IValue> operands(args.begin() + 2 + static_cast<std::ptrdiff_t>(num_carried_), args.end());
  for (int64_t i = 0; i < trip_count && condition; ++i) {
    std::vector<c10::IValue> inputs;
    inputs.reserve(1 + carried.size() + operands.size());
    inputs.emplace_back(i);
    for (auto& c : carried) inputs.push_back(std::move(c));
    inputs.insert(inputs.end(), operands.begin(), operands.end());
    std::vector<c10::IValue> out = unpack(body_->forward(std::move(inputs)), 1 + num_carried_, "while_loop body");
    condition = predicate_value(out[0]);
    for (size_t k = 0; k < num_carried_; ++k) carried[k] = std::move(out[k + 1]);
  }
  return pack(std::move(carried));
}

std::vector<std::pair<std::string, GraphModule*>> control_flow_graphs(const torch::nn::Module& module) {
  if (auto* c = dynamic_cast<const CondModule*>(&module))
    return {{"true_graph", &c->true_graph()}, {"false_graph", &c->false_graph()}};
  if (auto* l = dynamic_cast<const WhileLoopModule*>(&module)) return {{"body", &l->body()}};
  return {};
}

void for_each_subgraph(GraphModule& gm, const std::function<void(const std::string& path, GraphModule& sub)>& fn) {
  for (const auto& item : gm.named_children()) {
    for (const auto& [name, sub] : control_flow_graphs(*item.value())) {
      const std::string path = item.key() + "." + name;
      for_each_subgraph(*sub, [&](const std::string& inner, GraphModule& g) { fn(path + "." + inner, g); });
      fn(path, *sub);
    }
  }
}

}  // namespace fx
