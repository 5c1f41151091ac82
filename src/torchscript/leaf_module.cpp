// Mirrors of TorchScript modules as torch::nn::Modules (leaves call the scripted forward).
#include "torchscript/leaf_module.h"

#include <fx/graph_module.h>
#include <fx/module_attributes.h>
#include <fx/normalize.h>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <cctype>
#include <mutex>

namespace fx::import_detail {

std::string short_type_name(const std::string& type_name) {
  size_t dot = type_name.rfind('.');
  return dot == std::string::npos ? type_name : type_name.substr(dot + 1);
}

bool is_forward_method(const std::string& method) {
  if (method == "forward") return true;
  const std::string prefix = "forward__";
  if (method.size() <= prefix.size() || method.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < method.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(method[i]))) return false;
  return true;
}

JitLeafModule::JitLeafModule(torch::jit::Module module, const std::string& type_name)
    : torch::nn::Module(short_type_name(type_name)), module_(std::move(module)), type_name_(type_name) {
  if (torch::jit::Function* f = module_.type()->findMethod("forward")) {
    forwards_.push_back(f);
    return;
  }
  for (int i = 0;; ++i) {
    torch::jit::Function* f = module_.type()->findMethod("forward__" + std::to_string(i));
    if (!f) break;
    forwards_.push_back(f);
  }
}

namespace {

// Whether `args` (self first) fit `schema`: each given argument's type, the
// rest with defaults.
bool accepts(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  const auto& formals = schema.arguments();
  if (args.size() > formals.size()) return false;
  for (size_t i = 1; i < formals.size(); ++i) {
    if (i >= args.size()) {
      if (!formals[i].default_value()) return false;
      continue;
    }
    if (!args[i].type()->isSubtypeOf(*formals[i].type())) return false;
  }
  return true;
}

}  // namespace

c10::IValue JitLeafModule::forward(std::vector<c10::IValue> args) {
  if (forwards_.empty())
    throw Error("leaf module " + short_type_name(type_name_) + " (" + type_name_ +
                ") has no forward method: torch.jit.trace keeps forward only for the submodules the traced call "
                "ran, so this one cannot be called; script the model (torch.jit.script) or trace a call that uses it");
  args.insert(args.begin(), module_._ivalue());
  // The scripted forward runs as eager PyTorch runs the module: without
  // TorchScript's graph optimizer. With it, the profiling executor rewrites
  // the graph after its first calls (in grad mode, dropout becomes a
  // differentiable aten::native_dropout, which draws other masks), and its
  // state belongs to the class's compiled method, shared by every instance:
  // a second fxcpp module holding the same class, or a make_fx trace of it,
  // then computed something else than the first call did (issue 66).
  torch::jit::GraphOptimizerEnabledGuard eager_semantics(false);
  if (forwards_.size() == 1) return (*forwards_[0])(std::move(args));
  for (torch::jit::Function* f : forwards_)
    if (accepts(f->getSchema(), args)) return (*f)(std::move(args));
  std::string types;
  for (size_t i = 1; i < args.size(); ++i) types += (i > 1 ? ", " : "") + args[i].type()->repr_str();
  throw Error("leaf module " + short_type_name(type_name_) + ": no forward overload accepts (" + types + ")");
}

namespace {

/// (1, 1) → [1, 1]: module_attributes spells tuples of ints as int lists.
c10::IValue int_tuple_as_list(const c10::IValue& value) {
  std::vector<int64_t> ints;
  for (const auto& e : value.toTupleRef().elements()) {
    if (!e.isInt()) return value;
    ints.push_back(e.toInt());
  }
  return c10::IValue(ints);
}

/// The value of a constant input of a traced call: a prim::Constant, or a
/// prim::ListConstruct of int constants (stride = [2, 2]); nullopt otherwise.
std::optional<c10::IValue> traced_constant(const torch::jit::Value* v) {
  if (auto c = torch::jit::toIValue(v)) return c;
  if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<int64_t> ints;
  for (const torch::jit::Value* item : v->node()->inputs()) {
    auto c = torch::jit::toIValue(item);
    if (!c || !c->isInt()) return std::nullopt;
    ints.push_back(c->toInt());
  }
  return c10::IValue(ints);
}

/// torch.jit.trace keeps a layer's tensors but not its configuration
/// (Conv2d's stride, BatchNorm's eps ...): its forward is the one ATen call
/// the layer made, with that configuration as constant arguments. When the
/// forward is exactly one call on the layer's input, each constant argument
/// the attributes lack is added under its schema name, which is the Python
/// attribute's (aten::_convolution's stride / padding / dilation / groups,
/// aten::batch_norm's momentum / eps, aten::max_pool2d's kernel_size ...).
/// A convolution called on the input itself pads with zeros (another
/// padding_mode pads first: two calls), and a batch norm reading running
/// statistics tracks them. Anything else adds nothing.
void add_traced_call_attributes(const JitLeafModule& leaf, ModuleAttributes& out) {
  if (leaf.forwards().size() != 1) return;
  auto* graph_fn = dynamic_cast<torch::jit::GraphFunction*>(leaf.forwards()[0]);
  if (!graph_fn) return;
  const torch::jit::Graph& g = *graph_fn->graph();
  if (g.inputs().size() != 2 || g.outputs().size() != 1) return;
  const torch::jit::Node* call = nullptr;
  for (const torch::jit::Node* n : g.nodes()) {
    const c10::Symbol k = n->kind();
    if (k == c10::prim::Constant || k == c10::prim::ListConstruct || k == c10::prim::GetAttr) continue;
    if (call || !n->maybeSchema()) return;
    call = n;
  }
  if (!call || call->inputs().empty() || call->input(0) != g.inputs()[1] || call->outputs().size() != 1 ||
      g.outputs()[0] != call->output())
    return;
  const auto& arguments = call->schema().arguments();
  for (size_t i = 1; i < call->inputs().size() && i < arguments.size(); ++i) {
    if (auto value = traced_constant(call->input(i))) out.attributes.emplace(arguments[i].name(), std::move(*value));
  }
  const std::string op = call->kind().toQualString();
  if (op == "aten::_convolution" || op == "aten::conv2d") out.attributes.emplace("padding_mode", std::string("zeros"));
  if (op == "aten::batch_norm" && call->inputs().size() > 3)
    out.attributes.emplace("track_running_stats", !torch::jit::toIValue(call->input(3)).has_value());
}

}  // namespace

void register_leaf_forward() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_module_forward(typeid(JitLeafModule), [](torch::nn::Module& m, std::vector<c10::IValue>& args) {
      return static_cast<JitLeafModule&>(m).forward(std::move(args));
    });
    // torch.nn layers' configuration (stride, eps ...) for freeze_modules.
    register_module_attributes(typeid(JitLeafModule), [](const torch::nn::Module& m) {
      const auto& leaf = static_cast<const JitLeafModule&>(m);
      const std::string type_name = demangled_type_name(leaf.jit_module());
      if (type_name.rfind("__torch__.torch.nn.modules.", 0) != 0) return std::optional<ModuleAttributes>();
      ModuleAttributes out;
      out.type = short_type_name(type_name);
      const auto& type = leaf.jit_module().type();
      const auto& object = leaf.jit_module()._ivalue();
      for (size_t i = 0; i < type->numAttributes(); ++i) {
        c10::IValue value = object->getSlot(i);
        if (value.isTensor() || value.isObject()) continue;
        if (value.isTuple()) value = int_tuple_as_list(value);
        out.attributes.emplace(type->getAttributeName(i), std::move(value));
      }
      // __constants__ (stride, padding_mode ...) are class constants in TorchScript.
      for (size_t i = 0; i < type->numConstants(); ++i) {
        c10::IValue value = type->getConstant(i);
        if (value.isTuple()) value = int_tuple_as_list(value);
        out.attributes.emplace(type->getConstantName(i), std::move(value));
      }
      add_traced_call_attributes(leaf, out);  // what torch.jit.trace did not keep
      return std::optional<ModuleAttributes>(std::move(out));
    });
    // torch.fx normalize_module knows torch.nn classes only: so do we.
    register_module_signature(typeid(JitLeafModule), [](const torch::nn::Module& m) {
      const auto& leaf = static_cast<const JitLeafModule&>(m);
      if (demangled_type_name(leaf.jit_module()).rfind("__torch__.torch.nn.modules.", 0) != 0)
        return std::optional<std::vector<ForwardParameter>>();
      if (leaf.forwards().size() != 1) return std::optional<std::vector<ForwardParameter>>();
      std::vector<ForwardParameter> params;
      const auto& arguments = leaf.forwards()[0]->getSchema().arguments();
      for (size_t i = 1; i < arguments.size(); ++i) {  // without self
        ForwardParameter p;
        p.name = arguments[i].name();
        if (arguments[i].default_value()) p.default_value = Argument::from_ivalue(*arguments[i].default_value());
        p.kwarg_only = arguments[i].kwarg_only();
        params.push_back(std::move(p));
      }
      return std::optional<std::vector<ForwardParameter>>(std::move(params));
    });
  });
}

namespace {

void mirror_attributes(const torch::jit::Module& module, const std::string& qualified_name,
                       const LeafPredicate& is_leaf, torch::nn::Module& mirror) {
  const auto& type = module.type();
  const auto& object = module._ivalue();
  for (size_t i = 0; i < type->numAttributes(); ++i) {
    const std::string name = type->getAttributeName(i);
    const c10::IValue& value = object->getSlot(i);
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (!t.defined()) continue;
      if (type->is_parameter(i)) {
        mirror.register_parameter(name, t, t.requires_grad());
      } else {
        mirror.register_buffer(name, t);
      }
    } else if (value.isObject() && value.toObjectRef().type()->is_module()) {
      torch::jit::Module child(value.toObject());
      std::string child_name = qualified_name.empty() ? name : qualified_name + "." + name;
      mirror.register_module(name, build_module_tree(child, child_name, is_leaf));
    }
  }
}

}  // namespace

void JitLeafModule::train(bool on) {
  torch::nn::Module::train(on);
  module_.train(on);
}

std::shared_ptr<torch::nn::Module> build_module_tree(const torch::jit::Module& module,
                                                     const std::string& qualified_name,
                                                     const LeafPredicate& is_leaf) {
  const std::string type_name = demangled_type_name(module);
  std::shared_ptr<torch::nn::Module> mirror;
  if (!qualified_name.empty() && is_leaf(module, type_name, qualified_name)) {
    mirror = std::make_shared<JitLeafModule>(module, type_name);
  } else {
    mirror = std::make_shared<torch::nn::Module>(short_type_name(type_name));
  }
  mirror_attributes(module, qualified_name, is_leaf, *mirror);
  // A mirror starts in the TorchScript module's mode.
  if (!module.is_training()) mirror->eval();
  return mirror;
}

}  // namespace fx::import_detail
