#pragma once
// Internal: the pieces fx::save and fx::load share — the tensor table
// (tensors → storage records and back), the JSON accessors that turn a
// malformed document into one error line, and the converters between the
// IR / module tree and the JSON document.

#include "torchscript/file_checks.h"

#include <fx/graph.h>
#include <fx/serialize.h>

#include <ATen/core/Tensor.h>
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/impl/LocalDispatchKeySet.h>

namespace fx::serialize_detail {

using json = nlohmann::json;

/// The document's record name inside the archive. Under extra/, where
/// torch::jit::save puts a module's extra files: a file with TorchScript
/// leaves is at the same time the TorchScript archive of those leaves (see
/// SaveContext::torchscript_leaves), read by one torch::jit::load.
constexpr const char* kDocumentRecord = "extra/fxcpp.json";
/// Storage records: kStoragePrefix + N.
constexpr const char* kStoragePrefix = "extra/fxdata/";

/// Tensors met while saving: each distinct tensor once, each distinct
/// storage once (its bytes become record "data/N").
class TensorTable {
 public:
  /// The index of `t` in the table ("WHERE" names it in errors).
  int64_t add(const at::Tensor& t, const std::string& where);
  /// {"tensors": [...], "storages": [...]}.
  void to_json(json& doc) const;
  /// Writes one record per storage.
  void write_records(caffe2::serialize::PyTorchStreamWriter& writer) const;
  /// Storage i's record name and bytes, for torch::jit::save's extra files.
  void add_extra_files(std::unordered_map<std::string, std::string>& files) const;
  size_t storages() const { return storages_.size(); }
  /// The tensors, by index (fx::to_document hands them over as they are).
  const std::vector<at::Tensor>& tensors() const { return tensors_; }

 private:
  std::unordered_map<const c10::TensorImpl*, int64_t> tensor_ids_;
  std::unordered_map<const c10::StorageImpl*, int64_t> storage_ids_;
  std::vector<at::Tensor> tensors_;  // keeps the tensors alive while saving
  std::vector<c10::Storage> storages_;
  json tensors_json_ = json::array();
};

/// What saving one GraphModule collects besides the document.
struct SaveContext {
  SaveOptions options;
  SaveReport report;
  TensorTable tensors;
  /// The TorchScript leaves of imported models, as attributes "leaf0",
  /// "leaf1" ... of one TorchScript module. When there are any, the file is
  /// that module's torch::jit::save archive with the document and the
  /// storages as extra files: one torch::jit::load reads all leaves (their
  /// classes compiled once, their tensors read as TorchScript reads them).
  std::optional<torch::jit::Module> torchscript_leaves;
  size_t torchscript_leaf_count = 0;
  /// Every module written so far, by the path it was first written at.
  std::unordered_map<const torch::nn::Module*, std::string> module_paths;
  /// The programs of the graphs' fxcpp::fused_kernel nodes, each once, in the order met.
  std::vector<std::string> kernel_programs;
  /// Kernel object records (name, bytes), when SaveOptions::kernel_objects.
  std::vector<std::pair<std::string, std::string>> kernel_records;
};

/// Tensors of a file being loaded, made on first use from their records; or,
/// for a document held in memory (fx::from_document), the live tensors themselves.
class TensorSource {
 public:
  TensorSource(const json& doc, caffe2::serialize::PyTorchStreamReader& reader, std::string file);
  /// Tensor i is live[i] itself (shared, not copied); `live` must outlive this source.
  TensorSource(const std::vector<at::Tensor>& live, std::string file);
  /// Tensor number `index` (as a JSON value; checked), for `where` in errors.
  at::Tensor get(const json& index, const std::string& where);
  /// Large storages (from kDirectReadBytes) are read through `adapter` (the
  /// reader's own, which checks each whole stored record against its CRC-32)
  /// straight into a prefaulted buffer of their own (onednn::detail::prefaulted_buffer)
  /// instead of c10's allocator: one call makes the pages present, not a page
  /// fault per 4 KiB as the bytes arrive. `records`: the archive's directory;
  /// a storage whose record is not a stored one of the document's size is
  /// read as before. Both must outlive this source.
  void read_directly(const import_detail::CrcCheckedAdapter& adapter, const std::vector<import_detail::ZipRecord>& records);
  static constexpr int64_t kDirectReadBytes = int64_t(64) << 10;

 private:
  c10::Storage storage(int64_t index, const std::string& where);
  const json* tensors_ = nullptr;
  const json* storages_ = nullptr;
  caffe2::serialize::PyTorchStreamReader* reader_ = nullptr;
  const import_detail::CrcCheckedAdapter* adapter_ = nullptr;
  std::unordered_map<uint64_t, uint64_t> stored_sizes_;  ///< stored records: data offset -> size
  const std::vector<at::Tensor>* live_ = nullptr;
  std::string file_;
  std::map<int64_t, at::Tensor> made_;
  std::map<int64_t, c10::Storage> storages_made_;
};

/// What loading one file needs.
struct LoadContext {
  std::string file;  ///< the path (or stream name) errors start with
  caffe2::serialize::PyTorchStreamReader* reader;  ///< nullptr for a document in memory
  TensorSource tensors;
  /// Record `name`'s bytes; ImportError naming the file if it is missing.
  std::string record(const std::string& name, const std::string& where);
  /// The module holding the file's TorchScript leaves, if it has any.
  std::optional<torch::jit::Module> torchscript;
  /// Every module built so far, by path ("shared" documents refer to them).
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> modules;
};

// ---- checked JSON access: ImportError "WHERE: ..." on a missing key or wrong type
/// obj[key], which must exist; `obj` must be an object.
const json& field(const json& obj, const char* key, const std::string& where);
/// obj[key] or nullptr when absent.
const json* optional_field(const json& obj, const char* key, const std::string& where);
std::string get_string(const json& obj, const char* key, const std::string& where);
int64_t get_int(const json& obj, const char* key, const std::string& where);
bool get_bool(const json& obj, const char* key, const std::string& where);
/// obj[key], which must be an array.
const json& get_array(const json& obj, const char* key, const std::string& where);
/// Throws ImportError "WHERE: EXPECTED expected, got TYPE".
[[noreturn]] void bad_type(const json& value, const char* expected, const std::string& where);
/// Checks `value` is an integer and returns it.
int64_t as_int(const json& value, const std::string& where);
/// Checks `value` is a string and returns it.
std::string as_string(const json& value, const std::string& where);

// ---- names of enums in the document (torch's spelling without "torch.")
std::string dtype_name(c10::ScalarType t);
c10::ScalarType dtype_from_name(const std::string& name, const std::string& where);

// ---- graphs and modules
/// The graph as {"nodes": [...]}; `where` names the graph's module in errors.
json graph_to_json(const Graph& graph, SaveContext& ctx, const std::string& where);
/// The graph of a document, fully built and linted.
std::shared_ptr<Graph> graph_from_json(const json& doc, LoadContext& ctx, const std::string& where);

/// The module tree under `module` (at qualified name `path`; "" for the root).
json module_to_json(const torch::nn::Module& module, const std::string& path, SaveContext& ctx);
/// The module a module document describes.
std::shared_ptr<torch::nn::Module> module_from_json(const json& doc, const std::string& path, LoadContext& ctx);

// ---- fxcpp's oneDNN kernels (optimised graphs): packed operators as constants
/// Whether `value` is a packed oneDNN operator (fx::onednn::is_packed).
bool is_packed_constant(const c10::IValue& value);
/// The "packed" constant document of a packed operator: its kind, weights
/// and bias (tensor table indices, unpacked), parameters, post-ops, dtypes.
json packed_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where);
/// The packed operator of a "packed" constant document (every key checked,
/// unknown keys refused), packed again for this CPU at its first run.
c10::IValue packed_from_json(const json& doc, LoadContext& ctx, const std::string& where);

// ---- libtorch's packed dynamic linear layers (fx::quantization::quantize_dynamic): dynamic_linear_document.cpp
/// Whether `value` is a LinearPackedParamsBase (quantized::linear_dynamic's packed weights).
bool is_dynamic_linear_constant(const c10::IValue& value);
/// The "dynamic_linear" constant document: the int8 weight's integers, scales,
/// zero points (tensor table indices), per_channel, and the float bias.
json dynamic_linear_to_json(const c10::IValue& packed, SaveContext& ctx, const std::string& where);
/// The packed layer of a "dynamic_linear" document (checked; packed on the onednn engine).
c10::IValue dynamic_linear_from_json(const json& doc, LoadContext& ctx, const std::string& where);

// ---- kernel objects (SaveOptions::kernel_objects): kernel_object_document.cpp
/// Kernel object records: kKernelObjectPrefix + N.
constexpr const char* kKernelObjectPrefix = "extra/fxkernels/";
/// doc["kernel_objects"] and ctx.kernel_records for ctx.kernel_programs (when the options ask for them).
void kernel_objects_to_json(SaveContext& ctx, json& doc);
/// Reads and checks doc["kernel_objects"] (ImportError on a malformed entry or record), then offers them
/// (fx::compiler::offer_kernel_object) when `distrust` is empty; otherwise says in one warning why not.
void offer_kernel_objects(const json& doc, LoadContext& ctx, const std::string& distrust);

/// "module 'a.b'" or "the root module".
std::string module_label(const std::string& path);

/// While alive, aten::uniform_ and aten::normal_ leave their tensor as it
/// is on this thread (skip_init.cpp): a registered layer built from its
/// options, whose tensors load_state then replaces, draws no random weights.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  c10::DispatchKeySet added_before_;  ///< what enclosing guards had added (restored at the end)
};

}  // namespace fx::serialize_detail
