// ShapeGuard messages: what a mismatching input is told.
#include <fx/shape_guard.h>

#include <fx/argument.h>
#include <fx/node.h>

#include <sstream>

namespace fx {
namespace {

std::string sizes_str(c10::IntArrayRef sizes, bool dynamic_marks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    os << (i ? ", " : "");
    if (dynamic_marks && sizes[i] == kDynamicDim) {
      os << "?";
    } else {
      os << sizes[i];
    }
  }
  os << "]";
  return os.str();
}

}  // namespace

const ShapeGuard* shape_guard_of(const Node& n) {
  const Meta& meta = n.meta();
  auto it = meta.find(kShapeGuardKey);
  if (it == meta.end()) return nullptr;
  const ShapeGuard* g = std::any_cast<ShapeGuard>(&it->second);
  if (g == nullptr) {
    throw Error("node '" + n.name() + "': meta[\"" + kShapeGuardKey + "\"] holds a " +
                c10::demangle(it->second.type().name()) + ", not an fx::ShapeGuard");
  }
  return g;
}

std::string ShapeGuard::shape_str() const { return sizes_str(shape, true); }

void throw_shape_guard_error(const ShapeGuard& guard, const c10::IValue& value, const char* who,
                             const std::string& input) {
  std::string msg = std::string(who) + ": input '" + input + "' was traced with shape " + guard.shape_str() +
                    " (dtype " + python_dtype_repr(guard.dtype) + ") but got ";
  if (!value.isTensor() || !value.toTensor().defined()) {
    msg += value.isTensor() ? "an undefined tensor" : "a value of type " + std::string(value.tagKind());
    throw ShapeGuardError(msg);
  }
  const at::Tensor& t = value.toTensor();
  if (t.scalar_type() != guard.dtype) {
    msg += "dtype " + python_dtype_repr(t.scalar_type());
    ShapeGuard same_dtype = guard;
    same_dtype.dtype = t.scalar_type();
    if (!same_dtype.matches(t)) msg += " and shape " + sizes_str(t.sizes(), false);
    throw ShapeGuardError(msg);
  }
  msg += "shape " + sizes_str(t.sizes(), false);
  if (t.dim() != static_cast<int64_t>(guard.shape.size())) {
    throw ShapeGuardError(msg + "; a graph is traced for one rank, trace it again for this one");
  }
  std::vector<size_t> differ;
  for (size_t i = 0; i < guard.shape.size(); ++i) {
    if (guard.shape[i] != kDynamicDim && guard.shape[i] != t.size(static_cast<int64_t>(i))) differ.push_back(i);
  }
  std::string dims;
  for (size_t i = 0; i < differ.size(); ++i) dims += (i ? ", " : "") + std::to_string(differ[i]);
  throw ShapeGuardError(msg + "; declare dimension" + (differ.size() == 1 ? " " : "s ") + dims +
                        " dynamic (TraceOptions::dynamic_dims) to allow other sizes");
}

}  // namespace fx
