// Objects of TorchScript classes (torchvision's ImageList ...), kept at import time.
//
// `ImageList(images, sizes)` in scripted code is prim::CreateObject, then a
// call of the class's __init__, which stores the attributes with
// prim::SetAttr. The importer keeps such an object as a Val of its own: its
// attributes are Vals (run-time nodes among them), shared by every name of
// the object, so SetAttr through one name is seen through all; methods are
// inlined like scripted functions. An object never becomes a graph value
// itself (what the graph returns are its tensors), as torch.fx records no
// Python object either. Module state set in forward: see set_attr.
#include "import/importer.h"

#include <torch/csrc/jit/api/function_impl.h>

namespace fx::import_detail {

namespace jit = torch::jit;

void Importer::create_object(const jit::Node* n, Frame& f) {
  Val v;
  v.kind = Val::Kind::Object;
  v.class_type = n->output()->type()->cast<c10::ClassType>();
  if (!v.class_type) fail(n, f, "prim::CreateObject of a " + n->output()->type()->repr_str() + ", not a class");
  v.fields = std::make_shared<std::vector<std::pair<std::string, Val>>>();
  bind(n->output(), v, f);
}

Val Importer::object_val(const c10::IValue& object) {
  const c10::ivalue::Object* key = &object.toObjectRef();
  auto it = objects_.find(key);
  if (it != objects_.end()) return it->second;
  Val v;
  v.kind = Val::Kind::Object;
  v.class_type = object.toObjectRef().type();
  v.fields = std::make_shared<std::vector<std::pair<std::string, Val>>>();
  for (size_t i = 0; i < v.class_type->numAttributes(); ++i) {
    const c10::IValue& slot = object.toObjectRef().getSlot(i);
    v.fields->emplace_back(v.class_type->getAttributeName(i), slot.isObject() ? object_val(slot) : Val::of_constant(slot));
  }
  objects_.emplace(key, v);
  return v;
}

void Importer::set_attr(const jit::Node* n, Frame& f) {
  const Val& obj = value(n->input(0), f, n);
  const std::string name = n->s(jit::attr::name);
  const Val& item = value(n->input(1), f, n);
  if (obj.kind == Val::Kind::Module) {
    // Module state a forward assigns (torchvision's AnchorGenerator caches
    // `self.cell_anchors = [a.to(dtype, device) ...]`; RetinaNet sets
    // `self._has_warned = True`): as torch.fx's symbolic_trace, which runs
    // forward once, the graph is the forward of that first call; later reads
    // in it see the new value (the module itself is not changed). Inside
    // run-time control flow the write would depend on the data: refused.
    if (subgraph_depth_ > 0)
      fail(n, f,
           "changing module state (prim::SetAttr) inside run-time control flow cannot be imported into a graph; pass "
           "the state in as an input and return its new value instead");
    module_attr_writes_[obj.module->path + "." + name] = item;
    return;
  }
  if (obj.kind != Val::Kind::Object) fail(n, f, "attribute '" + name + "' set on a value that is not an object");
  for (auto& field : *obj.fields) {
    if (field.first == name) {
      field.second = item;
      return;
    }
  }
  obj.fields->emplace_back(name, item);
}

bool Importer::get_object_attr(const jit::Node* n, Frame& f) {
  const Val& obj = value(n->input(0), f, n);
  if (obj.kind != Val::Kind::Object) return false;
  const std::string name = n->s(jit::attr::name);
  for (const auto& field : *obj.fields) {
    if (field.first == name) {
      bind(n->output(), field.second, f);
      return true;
    }
  }
  fail(n, f, "object of class " + class_name_of(obj.class_type) + " has no attribute '" + name + "' yet");
}

bool Importer::call_object_method(const jit::Node* n, Frame& f) {
  const Val self = value(n->input(0), f, n);
  if (self.kind != Val::Kind::Object) return false;
  const std::string name = n->s(jit::attr::name);
  jit::Function* fn = self.class_type->findMethod(name);
  if (!fn) fail(n, f, "class " + class_name_of(self.class_type) + " has no method '" + name + "'");
  std::vector<Val> inputs;
  for (const jit::Value* in : n->inputs()) inputs.push_back(value(in, f, n));
  std::vector<Val> outs = call_graph(*jit::toGraphFunction(*fn).graph(), std::move(inputs), name, nullptr, &f, n,
                                     class_name_of(self.class_type) + "." + name);
  for (size_t i = 0; i < n->outputs().size(); ++i) bind(n->outputs()[i], outs.at(i), f);
  return true;
}

}  // namespace fx::import_detail
