// Kernel objects in an fxcpp file (SaveOptions::kernel_objects, `fxcpp
// optimize --aot`): beside the graphs' fused-kernel programs, the shared
// objects the system's compiler built from them, one record each
// (extra/fxkernels/N), described by the document's "kernel_objects" list
// (docs/file_format.md):
//
//   {"record": "extra/fxkernels/0", "bytes": 21384, "symbol": "fxk2_...",
//    "source_hash": "<32 hex>", "compiler": "g++ (Debian 12.2.0-14) 12.2.0",
//    "isa": ["avx512f", "avx512bw", ...]}
//
// On load every entry and its record are checked (a malformed one is an
// ImportError naming it) before anything is offered; the objects are
// offered to fxcpp::fused_kernel only from a file this user alone may write.
#include "serialize/document.h"

#include <fx/compiler/fused_kernel.h>

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace fx::serialize_detail {

void kernel_objects_to_json(SaveContext& ctx, json& doc) {
  if (!ctx.options.kernel_objects) return;
  json list = json::array();
  for (const std::string& program : ctx.kernel_programs) {
    compiler::KernelObject o;
    try {
      o = compiler::kernel_object(program);
    } catch (const std::exception& e) {
      throw Error(std::string("fx::save: cannot store kernel objects: ") + e.what());
    }
    const std::string record = kKernelObjectPrefix + std::to_string(ctx.kernel_records.size());
    list.push_back({{"record", record},
                    {"bytes", o.bytes.size()},
                    {"symbol", o.symbol},
                    {"source_hash", o.source_hash},
                    {"compiler", o.compiler},
                    {"isa", o.isa}});
    ctx.report.kernel_object_isa = o.isa;
    ctx.kernel_records.emplace_back(record, std::move(o.bytes));
  }
  ctx.report.kernel_objects = ctx.kernel_records.size();
  doc["kernel_objects"] = std::move(list);
}

void offer_kernel_objects(const json& doc, LoadContext& ctx, const std::string& distrust) {
  const std::string where = ctx.file + ": kernel_objects";
  const json* list = optional_field(doc, "kernel_objects", ctx.file + ": " + kDocumentRecord);
  if (!list) return;
  if (!list->is_array()) bad_type(*list, "a list", where);
  std::vector<compiler::KernelObject> objects;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!e.is_object()) bad_type(e, "an object", at);
    compiler::KernelObject o;
    const std::string record = get_string(e, "record", at);
    if (record.rfind(kKernelObjectPrefix, 0) != 0)
      throw ImportError(at + ": record '" + record + "' is not under " + kKernelObjectPrefix);
    const int64_t bytes = get_int(e, "bytes", at);
    o.symbol = get_string(e, "symbol", at);
    o.source_hash = get_string(e, "source_hash", at);
    o.compiler = get_string(e, "compiler", at);
    const json& isa = get_array(e, "isa", at);
    for (size_t k = 0; k < isa.size(); ++k) o.isa.push_back(as_string(isa[k], at + ": isa[" + std::to_string(k) + "]"));
    o.bytes = ctx.record(record, at);
    if (static_cast<int64_t>(o.bytes.size()) != bytes)
      throw ImportError(at + ": record '" + record + "' holds " + std::to_string(o.bytes.size()) + " bytes, " +
                        std::to_string(bytes) + " expected");
    objects.push_back(std::move(o));
  }
  if (objects.empty()) return;
  const std::string count = std::to_string(objects.size()) + (objects.size() == 1 ? " kernel object" : " kernel objects");
  if (!distrust.empty()) {
    TORCH_WARN(ctx.file, ": ", count, " not loaded (", distrust, "); kernels are made from their programs instead");
    return;
  }
  size_t refused = 0;
  std::string why;
  for (compiler::KernelObject& o : objects) {
    const std::string w = compiler::offer_kernel_object(std::move(o));
    if (!w.empty() && refused++ == 0) why = w;
  }
  if (refused)
    TORCH_WARN(ctx.file, ": ", refused, " of ", count, " not loaded: built for another CPU (", why,
               "); kernels are made from their programs instead");
}

}  // namespace fx::serialize_detail
