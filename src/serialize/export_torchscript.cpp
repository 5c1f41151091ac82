// fx::to_torchscript / fx::export_torchscript: the module tree of a
// GraphModule as TorchScript modules, each graph as a forward method.
#include "serialize/export_internal.h"

#include "torchscript/leaf_module.h"

#include <fx/control_flow.h>

#include <torch/csrc/jit/api/compilation_unit.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace fx {

namespace {

namespace jit = torch::jit;

/// A class name TorchScript accepts: "torch::nn::LinearImpl" → "Linear".
std::string class_identifier(const std::string& name) {
  std::string s = name.substr(name.rfind("::") == std::string::npos ? 0 : name.rfind("::") + 2);
  if (s.size() > 4 && s.compare(s.size() - 4, 4, "Impl") == 0) s.resize(s.size() - 4);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

/// Builds the TorchScript modules of one export in one compilation unit.
class ModuleExporter {
 public:
  jit::Module export_graph_module(GraphModule& gm) {
    jit::Module m = new_module(gm.class_name(), gm.is_training());
    mirror(gm, m);
    std::shared_ptr<jit::Graph> graph = export_detail::build_forward_graph(gm, m);
    jit::Function* fn = cu_->create_function(c10::QualifiedName(*m.type()->name(), "forward"), graph);
    m.type()->addMethod(fn);
    return m;
  }

 private:
  jit::Module new_module(const std::string& class_name, bool training) {
    jit::Module m(c10::QualifiedName("__torch__.fxcpp." + class_identifier(class_name)), cu_, /*shouldMangle=*/true);
    m.register_attribute("training", c10::BoolType::get(), training);
    return m;
  }

  /// Registers src's own parameters, buffers and submodules on dst, under
  /// the same names (undefined tensors, which TorchScript cannot hold, are left out).
  void mirror(const torch::nn::Module& src, jit::Module& dst) {
    for (const auto& p : src.named_parameters(/*recurse=*/false))
      if (p.value().defined()) dst.register_parameter(p.key(), p.value(), /*is_buffer=*/false);
    for (const auto& b : src.named_buffers(/*recurse=*/false))
      if (b.value().defined()) dst.register_buffer(b.key(), b.value());
    for (const auto& c : src.named_children()) dst.register_module(c.key(), convert(*c.value()));
  }

  jit::Module convert(torch::nn::Module& module) {
    // Control flow: its graphs are inlined as prim::If / prim::Loop blocks of
    // the caller's forward; only their attributes and submodules are mirrored.
    auto graphs = control_flow_graphs(module);
    if (!graphs.empty()) {
      jit::Module out = new_module(module.name(), module.is_training());
      for (const auto& [name, sub] : graphs) {
        jit::Module g = new_module(sub->class_name(), sub->is_training());
        mirror(*sub, g);
        out.register_module(name, g);
      }
      return out;
    }
    if (auto* gm = dynamic_cast<GraphModule*>(&module)) return export_graph_module(*gm);
    if (auto* leaf = dynamic_cast<import_detail::JitLeafModule*>(&module)) return leaf->jit_module();
    jit::Module out = new_module(module.name(), module.is_training());
    mirror(module, out);
    return out;
  }

  std::shared_ptr<jit::CompilationUnit> cu_ = std::make_shared<jit::CompilationUnit>();
};

std::string first_line_of(const std::string& text) {
  size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

torch::jit::Module to_torchscript(GraphModule& gm) {
  try {
    return ModuleExporter().export_graph_module(gm);
  } catch (const ExportError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExportError("cannot export " + gm.class_name() + " to TorchScript: " + first_line_of(e.what()));
  }
}

void export_torchscript(GraphModule& gm, const std::string& path) {
  torch::jit::Module module = to_torchscript(gm);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    throw ExportError("cannot write " + path + ": " + why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    try {
      module.save(out);  // streamed: no copy of the archive in memory
    } catch (const std::exception& e) {
      out.close();
      fail(first_line_of(e.what()));
    }
    out.close();
    if (!out) fail(std::strerror(errno ? errno : EIO));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(std::strerror(errno));
}

}  // namespace fx
