// Tensors in the fxcpp file: each storage one record "data/N", each tensor a
// view of one (dtype, sizes, strides, offset, requires_grad), so shared
// storages stay shared and views stay views after load.
#include "serialize/document.h"
#include "onednn/context.h"

#include <fx/tensor_file.h>

#include <c10/core/TensorImpl.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace fx::serialize_detail {

namespace {

std::string record_name(int64_t storage) { return kStoragePrefix + std::to_string(storage); }

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a bool";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "something else";
}

std::vector<int64_t> int_list(const json& obj, const char* key, const std::string& where) {
  const json& a = get_array(obj, key, where);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (const json& v : a) out.push_back(as_int(v, where + ": " + key));
  return out;
}

}  // namespace

// ---- checked JSON access ----------------------------------------------------

void bad_type(const json& value, const char* expected, const std::string& where) {
  throw ImportError(where + ": " + expected + " expected, got " + type_name(value));
}

const json* optional_field(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) bad_type(obj, "an object", where);
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& field(const json& obj, const char* key, const std::string& where) {
  const json* v = optional_field(obj, key, where);
  if (!v) throw ImportError(where + ": missing key '" + key + "'");
  return *v;
}

int64_t as_int(const json& value, const std::string& where) {
  if (!value.is_number_integer()) bad_type(value, "an integer", where);
  return value.get<int64_t>();
}

std::string as_string(const json& value, const std::string& where) {
  if (!value.is_string()) bad_type(value, "a string", where);
  return value.get<std::string>();
}

std::string get_string(const json& obj, const char* key, const std::string& where) {
  return as_string(field(obj, key, where), where + ": " + key);
}

int64_t get_int(const json& obj, const char* key, const std::string& where) {
  return as_int(field(obj, key, where), where + ": " + key);
}

bool get_bool(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_boolean()) bad_type(v, "a bool", where + ": " + key);
  return v.get<bool>();
}

const json& get_array(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_array()) bad_type(v, "an array", where + ": " + key);
  return v;
}

// ---- dtypes -----------------------------------------------------------------

std::string dtype_name(c10::ScalarType t) {
  std::string s = python_dtype_repr(t);
  return s.rfind("torch.", 0) == 0 ? s.substr(6) : s;
}

c10::ScalarType dtype_from_name(const std::string& name, const std::string& where) {
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    auto t = static_cast<c10::ScalarType>(i);
    if (dtype_name(t) == name) return t;
  }
  throw ImportError(where + ": unknown dtype '" + name + "'");
}

// ---- saving -----------------------------------------------------------------

int64_t TensorTable::add(const at::Tensor& t, const std::string& where) {
  if (!t.defined()) throw Error(where + ": an undefined tensor cannot be saved");
  auto found = tensor_ids_.find(t.unsafeGetTensorImpl());
  if (found != tensor_ids_.end()) return found->second;
  if (t.layout() != c10::kStrided || !t.device().is_cpu() || t.is_quantized() || !t.has_storage())
    throw Error(where + ": only dense CPU tensors can be saved (this one is " + t.toString() + ")");
  const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  auto sid = storage_ids_.find(s);
  int64_t storage_index;
  if (sid == storage_ids_.end()) {
    storage_index = static_cast<int64_t>(storages_.size());
    storage_ids_.emplace(s, storage_index);
    storages_.push_back(t.storage());
  } else {
    storage_index = sid->second;
  }
  const int64_t index = static_cast<int64_t>(tensors_.size());
  tensor_ids_.emplace(t.unsafeGetTensorImpl(), index);
  tensors_.push_back(t);
  tensors_json_.push_back({{"storage", storage_index},
                           {"dtype", dtype_name(t.scalar_type())},
                           {"sizes", t.sizes().vec()},
                           {"strides", t.strides().vec()},
                           {"offset", t.storage_offset()},
                           {"requires_grad", t.requires_grad()}});
  return index;
}

void TensorTable::to_json(json& doc) const {
  doc["tensors"] = tensors_json_;
  json storages = json::array();
  for (size_t i = 0; i < storages_.size(); ++i)
    storages.push_back({{"record", record_name(static_cast<int64_t>(i))}, {"nbytes", storages_[i].nbytes()}});
  doc["storages"] = std::move(storages);
}

void TensorTable::write_records(caffe2::serialize::PyTorchStreamWriter& writer) const {
  for (size_t i = 0; i < storages_.size(); ++i)
    writer.writeRecord(record_name(static_cast<int64_t>(i)), storages_[i].data(), storages_[i].nbytes());
}

void TensorTable::add_extra_files(std::unordered_map<std::string, std::string>& files) const {
  const std::string extra = "extra/";
  for (size_t i = 0; i < storages_.size(); ++i)
    files[record_name(static_cast<int64_t>(i)).substr(extra.size())] =
        std::string(static_cast<const char*>(storages_[i].data()), storages_[i].nbytes());
}

// ---- loading ----------------------------------------------------------------

TensorSource::TensorSource(const json& doc, caffe2::serialize::PyTorchStreamReader& reader, std::string file)
    : tensors_(&get_array(doc, "tensors", file)),
      storages_(&get_array(doc, "storages", file)),
      reader_(&reader),
      file_(std::move(file)) {}

TensorSource::TensorSource(const std::vector<at::Tensor>& live, std::string file)
    : live_(&live), file_(std::move(file)) {}

void TensorSource::read_directly(const import_detail::CrcCheckedAdapter& adapter,
                                 const std::vector<import_detail::ZipRecord>& records) {
  adapter_ = &adapter;
  for (const import_detail::ZipRecord& r : records)
    if (!r.compressed) stored_sizes_.emplace(r.data_offset, r.size);
}

c10::Storage TensorSource::storage(int64_t index, const std::string& where) {
  auto it = storages_made_.find(index);
  if (it != storages_made_.end()) return it->second;
  if (index < 0 || index >= static_cast<int64_t>(storages_->size()))
    throw ImportError(where + ": storage " + std::to_string(index) + " does not exist (the file has " +
                      std::to_string(storages_->size()) + ")");
  const std::string label = file_ + ": storage " + std::to_string(index);
  const json& s = (*storages_)[static_cast<size_t>(index)];
  const std::string record = get_string(s, "record", label);
  const int64_t nbytes = get_int(s, "nbytes", label);
  if (!reader_->hasRecord(record)) throw ImportError(label + ": record '" + record + "' is missing");
  if (adapter_ && nbytes >= kDirectReadBytes) {
    const uint64_t offset = reader_->getRecordOffset(record);
    auto stored = stored_sizes_.find(offset);
    if (stored != stored_sizes_.end() && stored->second == static_cast<uint64_t>(nbytes)) {
      std::shared_ptr<void> buffer = onednn::detail::prefaulted_buffer(static_cast<size_t>(nbytes));
      void* bytes = buffer.get();
      // The whole stored record at its data offset: the adapter checks its CRC-32.
      if (adapter_->read(offset, bytes, static_cast<size_t>(nbytes), "storage") != static_cast<size_t>(nbytes)) {
        adapter_->throw_if_damaged();
        throw ImportError(label + ": record '" + record + "' cannot be read (the file changed?)");
      }
      c10::DataPtr data = c10::InefficientStdFunctionContext::makeDataPtr(
          bytes, [buffer = std::move(buffer)](void*) mutable { buffer.reset(); }, c10::Device(c10::kCPU));
      c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr, false);
      storages_made_.emplace(index, storage);
      return storage;
    }
  }
  auto [data, size] = reader_->getRecord(record);
  if (nbytes < 0 || static_cast<uint64_t>(nbytes) != size)
    throw ImportError(label + ": record '" + record + "' has " + std::to_string(size) + " bytes but the document says " +
                      std::to_string(nbytes));
  c10::Storage storage(c10::Storage::use_byte_size_t(), size, std::move(data), nullptr, false);
  storages_made_.emplace(index, storage);
  return storage;
}

at::Tensor TensorSource::get(const json& index_json, const std::string& where) {
  const int64_t index = as_int(index_json, where + ": tensor index");
  if (live_) {
    if (index < 0 || index >= static_cast<int64_t>(live_->size()))
      throw ImportError(where + ": tensor " + std::to_string(index) + " does not exist (the document has " +
                        std::to_string(live_->size()) + ")");
    return (*live_)[static_cast<size_t>(index)];
  }
  auto it = made_.find(index);
  if (it != made_.end()) return it->second;
  if (index < 0 || index >= static_cast<int64_t>(tensors_->size()))
    throw ImportError(where + ": tensor " + std::to_string(index) + " does not exist (the file has " +
                      std::to_string(tensors_->size()) + ")");
  const std::string label = file_ + ": tensor " + std::to_string(index);
  const json& t = (*tensors_)[static_cast<size_t>(index)];
  const c10::ScalarType dtype = dtype_from_name(get_string(t, "dtype", label), label);
  const std::vector<int64_t> sizes = int_list(t, "sizes", label);
  const std::vector<int64_t> strides = int_list(t, "strides", label);
  const int64_t offset = get_int(t, "offset", label);
  const bool requires_grad = get_bool(t, "requires_grad", label);
  if (sizes.size() != strides.size())
    throw ImportError(label + ": " + std::to_string(sizes.size()) + " sizes but " + std::to_string(strides.size()) +
                      " strides");
  if (static_cast<int64_t>(sizes.size()) > kMaxTensorRank)
    throw ImportError(label + ": " + std::to_string(sizes.size()) + " dimensions, more than " +
                      std::to_string(kMaxTensorRank));
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || strides[d] < 0)
      throw ImportError(label + ": negative size or stride in dimension " + std::to_string(d));
  if (offset < 0) throw ImportError(label + ": negative storage offset " + std::to_string(offset));
  c10::Storage s = storage(get_int(t, "storage", label), label);
  at::Tensor out;
  try {
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(s), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                     c10::scalarTypeToTypeMeta(dtype));
    impl->set_sizes_and_strides(sizes, strides, offset);
    out = at::Tensor(std::move(impl));
  } catch (const c10::Error& e) {
    throw ImportError(label + ": impossible sizes / strides (" + e.what_without_backtrace() + ")");
  }
  validate_tensor(out, label);
  if (requires_grad) {
    if (!c10::isFloatingType(dtype) && !c10::isComplexType(dtype))
      throw ImportError(label + ": requires_grad on a tensor of dtype " + dtype_name(dtype));
    out.set_requires_grad(true);
  }
  made_.emplace(index, out);
  return out;
}

std::string LoadContext::record(const std::string& name, const std::string& where) {
  if (!reader || !reader->hasRecord(name)) throw ImportError(where + ": record '" + name + "' is missing");
  auto [data, size] = reader->getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

std::string module_label(const std::string& path) {
  return path.empty() ? std::string("the root module") : "module '" + path + "'";
}

}  // namespace fx::serialize_detail
