// fx::to_document / fx::from_document: the fxcpp document without the file.
// The same converters as fx::save / fx::load (module_to_json,
// module_from_json), with tensors handed over as they are instead of
// written to and read from storage records.
#include "serialize/document.h"

namespace fx {

Document to_document(const GraphModule& gm, const SaveOptions& options) {
  serialize_detail::SaveContext ctx;
  ctx.options = options;
  Document out;
  out.json = {{"format", kFileFormatName}, {"version", kFileFormatVersion}, {"producer", "fxcpp"}};
  out.json["root"] = serialize_detail::module_to_json(gm, "", ctx);
  out.tensors = ctx.tensors.tensors();
  if (ctx.torchscript_leaves) {
    out.json["torchscript"] = true;
    out.torchscript = std::move(ctx.torchscript_leaves);
  }
  return out;
}

std::shared_ptr<GraphModule> from_document(const Document& document, const std::string& name) {
  const serialize_detail::json& doc = document.json;
  const std::string where = name + ": document";
  const std::string format = serialize_detail::get_string(doc, "format", where);
  if (format != kFileFormatName)
    throw ImportError(name + ": not an fxcpp document (format '" + format + "', expected '" + kFileFormatName + "')");
  const int64_t version = serialize_detail::get_int(doc, "version", where);
  if (version < 1 || version > kFileFormatVersion)
    throw ImportError(name + ": document version " + std::to_string(version) + " is not one this build reads (1.." +
                      std::to_string(kFileFormatVersion) + ")");
  serialize_detail::LoadContext ctx{name, nullptr, serialize_detail::TensorSource(document.tensors, name), {}, {}};
  ctx.torchscript = document.torchscript;
  auto root = serialize_detail::module_from_json(serialize_detail::field(doc, "root", where), "", ctx);
  auto gm = std::dynamic_pointer_cast<GraphModule>(root);
  if (!gm) throw ImportError(name + ": the root module is not a graph_module");
  return gm;
}

}  // namespace fx
