// fx::load: the file is checked at its boundary (regular file, zip magic,
// a consistent zip directory — libtorch's reader trusts it — and an fxcpp
// document inside) before PyTorchStreamReader opens it; every record read
// (the document, each tensor storage, the TorchScript leaves' records) is
// checked against the zip directory's CRC-32 as it is read; then the document's
// format and version, and the whole module tree is built and linted before
// anything is returned. Every failure is one ImportError line naming the file.
#include "torchscript/file_checks.h"
#include "serialize/document.h"

#include <fx/compiler/kernel_cache.h>
#include <fx/torchscript.h>

#include <torch/csrc/jit/serialization/import.h>

#include <cstring>
#include <functional>
#include <cstdio>
#include <fstream>
#include <istream>
#include <iterator>

namespace fx {

namespace {

using serialize_detail::json;

/// The deepest nesting of [ and { a document may have (deeper input would
/// recurse too deeply while it is converted).
constexpr int kMaxNesting = 256;

/// A PyTorchStreamReader source over bytes in memory.
class MemoryAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryAdapter(const std::string& data) : data_(data) {}
  size_t size() const override { return data_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= data_.size()) return 0;
    n = std::min<size_t>(n, data_.size() - pos);
    std::memcpy(buf, data_.data() + pos, n);
    return n;
  }

 private:
  const std::string& data_;
};

void check_magic(const char* head, size_t n, const std::string& file) {
  if (n < 4 || head[0] != 'P' || head[1] != 'K' || head[2] != 3 || head[3] != 4)
    throw ImportError(file + ": not an fxcpp file (not a zip archive; expected a file written by fx::save)");
}

/// The zip checks of import, with the wording of an fxcpp file; and the document record must be there.
void check_records(const std::vector<import_detail::ZipRecord>& records, const std::string& file) {
  for (const auto& r : records) {
    const size_t slash = r.name.find('/');
    if (slash != std::string::npos && r.name.compare(slash + 1, std::string::npos, serialize_detail::kDocumentRecord) == 0)
      return;
  }
  bool torchscript = false;
  for (const auto& r : records) torchscript = torchscript || r.name.find("/code/") != std::string::npos;
  throw ImportError(file + ": not an fxcpp file (a zip archive without " + serialize_detail::kDocumentRecord +
                    (torchscript ? "; it is a TorchScript file: import it, or `fxcpp convert` it)" : ")"));
}

template <class F>
auto checked_zip(const std::string& file, F&& check) {
  try {
    return check();
  } catch (const ImportError& e) {
    const std::string msg = e.what();
    const std::string prefix = file + ": damaged zip archive";
    throw ImportError(file + ": truncated or damaged zip archive" +
                      (msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : ": " + msg));
  }
}

void check_nesting(const std::string& text, const std::string& file) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        throw ImportError(file + ": " + serialize_detail::kDocumentRecord + " nests deeper than " +
                          std::to_string(kMaxNesting) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

/// Loads the TorchScript module of the file's leaves (files that have any).
using TorchScriptLoader = std::function<torch::jit::Module()>;

std::shared_ptr<GraphModule> load_archive(caffe2::serialize::PyTorchStreamReader& reader, const std::string& file,
                                          const import_detail::CrcCheckedAdapter& adapter,
                                          const std::vector<import_detail::ZipRecord>& records,
                                          const TorchScriptLoader& load_leaves, const std::string& distrust) {
  auto [data, size] = reader.getRecord(serialize_detail::kDocumentRecord);
  const std::string text(static_cast<const char*>(data.get()), size);
  check_nesting(text, file);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw ImportError(file + ": " + serialize_detail::kDocumentRecord + " is not valid JSON (" + e.what() + ")");
  }
  const std::string where = file + ": " + serialize_detail::kDocumentRecord;
  const std::string format = serialize_detail::get_string(doc, "format", where);
  if (format != kFileFormatName)
    throw ImportError(file + ": not an fxcpp file (format '" + format + "', expected '" + kFileFormatName + "')");
  const int64_t version = serialize_detail::get_int(doc, "version", where);
  if (version > kFileFormatVersion)
    throw ImportError(file + ": format version " + std::to_string(version) + " is newer than this build of fxcpp (" +
                      std::to_string(kFileFormatVersion) + "); use a newer fxcpp");
  if (version < 1) throw ImportError(file + ": unknown format version " + std::to_string(version));
  serialize_detail::LoadContext ctx{file, &reader, serialize_detail::TensorSource(doc, reader, file), {}, {}};
  ctx.tensors.read_directly(adapter, records);
  if (const json* ts = serialize_detail::optional_field(doc, "torchscript", where)) {
    if (!ts->is_boolean()) serialize_detail::bad_type(*ts, "a bool", where + ": torchscript");
    if (ts->get<bool>()) ctx.torchscript = load_leaves();
  }
  auto root = serialize_detail::module_from_json(serialize_detail::field(doc, "root", where), "", ctx);
  auto gm = std::dynamic_pointer_cast<GraphModule>(root);
  if (!gm) throw ImportError(file + ": the root module is not a graph_module");
  serialize_detail::offer_kernel_objects(doc, ctx, distrust);  // after the graphs: a malformed file offers nothing
  return gm;
}

/// body(); when it fails after a record did not match its CRC-32, that is the error.
template <class F>
std::shared_ptr<GraphModule> with_crc_check(const import_detail::CrcCheckedAdapter& adapter, F&& body) {
  try {
    return body();
  } catch (...) {
    adapter.throw_if_damaged();
    throw;
  }
}


/// Runs body; every error leaves as one fx::ImportError line naming `file`.
template <class F>
std::shared_ptr<GraphModule> guarded(const std::string& file, F&& body) {
  try {
    return body();
  } catch (const ImportError& e) {
    throw ImportError(import_detail::one_line(e.what()));
  } catch (const Error& e) {
    throw ImportError(file + ": " + import_detail::one_line(e.what()));
  } catch (...) {
    throw ImportError(file + ": " + import_detail::one_line(import_detail::current_exception_text()));
  }
}

}  // namespace

std::shared_ptr<GraphModule> load(const std::string& path) {
  return guarded(path, [&] {
    const uint64_t size = import_detail::check_regular_file(path, kMaxModelFileBytes, "an fxcpp file");
    {
      std::ifstream in(path, std::ios::binary);
      if (!in) throw ImportError(path + ": cannot be opened for reading");
      char head[4] = {0, 0, 0, 0};
      in.read(head, 4);
      check_magic(head, static_cast<size_t>(in.gcount()), path);
    }
    const auto records = checked_zip(path, [&] { return import_detail::check_zip_file(path, size); });
    check_records(records, path);
    // Every record read (the document, each tensor storage) is checked against its CRC-32.
    const auto adapter = import_detail::checked_file_adapter(path, records);
    return with_crc_check(*adapter, [&] {
      caffe2::serialize::PyTorchStreamReader reader(adapter);
      // The leaves with every check of TorchScript import (pickles, storages, tensors).
      return load_archive(reader, path, *adapter, records, [&] { return load_torchscript(path); },
                          compiler::KernelCache::distrust_file(path));
    });
  });
}

std::shared_ptr<GraphModule> load_from_string(const std::string& bytes, const std::string& name) {
  return guarded(name, [&] {
    check_magic(bytes.data(), bytes.size(), name);
    const auto records = checked_zip(name, [&] { return import_detail::check_zip(name, bytes.data(), bytes.size()); });
    check_records(records, name);
    auto checked = [&] {
      return std::make_shared<import_detail::CrcCheckedAdapter>(std::make_shared<MemoryAdapter>(bytes), records, name);
    };
    const auto adapter = checked();
    return with_crc_check(*adapter, [&] {
      caffe2::serialize::PyTorchStreamReader reader(adapter);
      return load_archive(reader, name, *adapter, records, [&] {
        const auto leaves = checked();
        try {
          return torch::jit::load(leaves, c10::Device(c10::kCPU));
        } catch (...) {
          leaves->throw_if_damaged();
          throw ImportError(name + ": cannot load its TorchScript leaves: " + import_detail::current_exception_text());
        }
      }, "read from memory or a stream, not from a file of this user's");
    });
  });
}

std::shared_ptr<GraphModule> load(std::istream& in, const std::string& name) {
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ImportError(name + ": the stream failed while reading");
  return load_from_string(bytes, name);
}

bool is_fxcpp_file(const std::string& path) {
  try {
    const uint64_t size = import_detail::check_regular_file(path, kMaxModelFileBytes, "an fxcpp file");
    std::ifstream in(path, std::ios::binary);
    char head[4] = {0, 0, 0, 0};
    in.read(head, 4);
    check_magic(head, static_cast<size_t>(in.gcount()), path);
    check_records(import_detail::check_zip_file(path, size), path);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace fx
