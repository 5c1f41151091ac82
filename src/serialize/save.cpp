// fx::save: the document and every record are built in memory first (so a
// module or tensor that cannot be saved throws before a byte is written),
// then written through PyTorchStreamWriter; files go to a temporary beside
// the target, renamed over it only once complete.
#include "serialize/document.h"

#include <torch/csrc/jit/serialization/export.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <unistd.h>

namespace fx {

namespace {

using serialize_detail::json;

/// The archive's records, ready to write.
struct Archive {
  serialize_detail::SaveContext ctx;
  std::string document;
};

void build(const GraphModule& gm, const SaveOptions& options, Archive& a) {
  a.ctx.options = options;
  json doc = {{"format", kFileFormatName}, {"version", kFileFormatVersion}, {"producer", "fxcpp"}};
  doc["root"] = serialize_detail::module_to_json(gm, "", a.ctx);
  a.ctx.tensors.to_json(doc);
  serialize_detail::kernel_objects_to_json(a.ctx, doc);
  if (a.ctx.torchscript_leaves) {
    doc["torchscript"] = true;
    // fx::load reads the leaves with the checks of fx::load_torchscript, which wants a forward.
    a.ctx.torchscript_leaves->define("def forward(self):\n  return None\n");
  }
  try {
    a.document = doc.dump();
  } catch (const json::exception& e) {
    throw Error(std::string("the graph cannot be saved: a string in it is not valid UTF-8 (") + e.what() + ")");
  }
}

SaveReport write(Archive& a, const std::function<size_t(const void*, size_t)>& sink) {
  size_t bytes = 0;
  auto counting_sink = [&](const void* data, size_t n) {
    const size_t written = sink(data, n);
    bytes += written;
    return written;
  };
  if (a.ctx.torchscript_leaves) {
    // The TorchScript archive of the leaves, with the document and the storages as extra files.
    torch::jit::ExtraFilesMap extra;
    extra[std::string(serialize_detail::kDocumentRecord).substr(6)] = a.document;
    a.ctx.tensors.add_extra_files(extra);
    for (const auto& [name, bytes] : a.ctx.kernel_records) extra[name.substr(6)] = bytes;
    torch::jit::ExportModule(*a.ctx.torchscript_leaves, counting_sink, extra);
  } else {
    caffe2::serialize::PyTorchStreamWriter writer(counting_sink);
    writer.writeRecord(serialize_detail::kDocumentRecord, a.document.data(), a.document.size());
    a.ctx.tensors.write_records(writer);
    for (const auto& [name, bytes] : a.ctx.kernel_records) writer.writeRecord(name, bytes.data(), bytes.size());
    writer.writeEndOfFile();
  }
  a.ctx.report.storages = a.ctx.tensors.storages();
  a.ctx.report.bytes = bytes;
  return a.ctx.report;
}

SaveReport write_stream(Archive& a, std::ostream& out) {
  SaveReport r = write(a, [&](const void* data, size_t n) -> size_t {
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    return out ? n : 0;
  });
  if (!out) throw ImportError("fx::save: the stream failed while writing");
  return r;
}

}  // namespace

SaveReport save(const GraphModule& gm, std::ostream& out, const SaveOptions& options) {
  Archive a;
  build(gm, options, a);
  return write_stream(a, out);
}

std::string save_to_string(const GraphModule& gm, const SaveOptions& options, SaveReport* report) {
  std::ostringstream out;
  SaveReport r = save(gm, out, options);
  if (report) *report = r;
  return out.str();
}

SaveReport save(const GraphModule& gm, const std::string& path, const SaveOptions& options) {
  // Everything that can fail for the module's sake fails here, before a file exists.
  Archive a;
  build(gm, options, a);
  const std::string tmp = path + ".fxcpp-tmp-" + std::to_string(::getpid());
  SaveReport report;
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ImportError(path + ": cannot be opened for writing (" + std::strerror(errno) + ")");
    report = write_stream(a, out);
    out.close();
    if (!out) throw ImportError(path + ": write failed");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw ImportError(path + ": cannot be written: " + why);
  }
  return report;
}

}  // namespace fx
