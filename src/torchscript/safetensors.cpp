// safetensors files: load_safetensors, load_safetensors_folder,
// save_safetensors (include/fx/safetensors.h says what is checked and why).
#include "torchscript/file_checks.h"

#include <fx/safetensors.h>
#include <fx/tensor_file.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

namespace fx {

namespace {

using Json = nlohmann::ordered_json;

struct DType {
  const char* name;
  c10::ScalarType type;
  size_t size;
};

constexpr DType kDTypes[] = {{"F64", c10::ScalarType::Double, 8},  {"F32", c10::ScalarType::Float, 4},
                             {"F16", c10::ScalarType::Half, 2},    {"BF16", c10::ScalarType::BFloat16, 2},
                             {"I64", c10::ScalarType::Long, 8},    {"I32", c10::ScalarType::Int, 4},
                             {"I16", c10::ScalarType::Short, 2},   {"I8", c10::ScalarType::Char, 1},
                             {"U8", c10::ScalarType::Byte, 1},     {"BOOL", c10::ScalarType::Bool, 1}};

const DType* dtype_named(const std::string& name) {
  for (const DType& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DType* dtype_of(c10::ScalarType t) {
  for (const DType& d : kDTypes)
    if (t == d.type) return &d;
  return nullptr;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw ImportError(path + ": " + what); }

/// The address ranges of the live mappings (release_mapped_pages advises only inside one).
struct MappedRanges {
  std::mutex mutex;
  std::map<uintptr_t, uintptr_t> ranges;  // begin -> end
};

MappedRanges& mapped_ranges() {
  static MappedRanges* r = new MappedRanges;  // never destroyed: mappings may outlive static destruction
  return *r;
}

/// A read-only view of a file: a private, copy-on-write mapping (writes to a
/// tensor made from it never reach the file).
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, "not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        fail(path, std::string("cannot map: ") + std::strerror(errno));
      }
      data_ = static_cast<uint8_t*>(p);
      std::lock_guard<std::mutex> lock(mapped_ranges().mutex);
      mapped_ranges().ranges[reinterpret_cast<uintptr_t>(data_)] = reinterpret_cast<uintptr_t>(data_) + size_;
    }
    ::close(fd);
  }
  ~Mapping() {
    if (!data_) return;
    {
      std::lock_guard<std::mutex> lock(mapped_ranges().mutex);
      mapped_ranges().ranges.erase(reinterpret_cast<uintptr_t>(data_));
    }
    ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// A non-negative integer of the header, or fail naming `what`.
uint64_t unsigned_of(const Json& v, const std::string& path, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail(path, what + " must be a non-negative integer, not " + v.dump());
}

struct Entry {
  std::string name;
  const DType* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

/// The header's JSON object; a key given twice is refused (JSON parsers
/// disagree on which one wins, so two readers could see two models).
Json parse_header(const std::string& path, const char* begin, const char* end) {
  std::string duplicate;
  std::set<std::string> keys;
  const Json::parser_callback_t on_key = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header;
  try {
    header = Json::parse(begin, end, on_key);
  } catch (const Json::exception& e) {  // its message quotes the input it stopped at
    fail(path, "the header is not valid JSON (" + import_detail::one_line(e.what()) + ")");
  }
  if (!header.is_object()) fail(path, "the header is not a JSON object");
  if (!duplicate.empty()) fail(path, "the header names '" + duplicate + "' twice");
  return header;
}

Entry entry_of(const std::string& path, const std::string& name, const Json& v) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) fail(path, where + " is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail(path, where + " has no " + key);
  Entry e{name, nullptr, {}, 0, 0};
  if (!v["dtype"].is_string()) fail(path, where + ": dtype must be a string, not " + v["dtype"].dump());
  const std::string dtype = v["dtype"].get<std::string>();
  e.dtype = dtype_named(dtype);
  if (!e.dtype)
    fail(path, where + " has dtype " + dtype + "; fxcpp reads F64, F32, F16, BF16, I64, I32, I16, I8, U8 and BOOL");
  const Json& shape = v["shape"];
  if (!shape.is_array()) fail(path, where + ": shape must be a list, not " + shape.dump());
  if (static_cast<int64_t>(shape.size()) > kMaxTensorRank)
    fail(path, where + " has " + std::to_string(shape.size()) + " dimensions, more than " +
                   std::to_string(kMaxTensorRank));
  uint64_t numel = 1;
  for (const Json& d : shape) {
    const uint64_t n = unsigned_of(d, path, where + ": a dimension");
    if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, n, &numel))
      fail(path, where + ": the shape " + shape.dump() + " has too many elements");
    e.shape.push_back(static_cast<int64_t>(n));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(e.dtype->size), &bytes))
    fail(path, where + ": the shape " + shape.dump() + " has too many elements");
  const Json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail(path, where + ": data_offsets must be [begin, end], not " + offsets.dump());
  e.begin = unsigned_of(offsets[0], path, where + ": data_offsets' begin");
  e.end = unsigned_of(offsets[1], path, where + ": data_offsets' end");
  if (e.end < e.begin) fail(path, where + ": data_offsets " + offsets.dump() + " end before they begin");
  if (e.end - e.begin != bytes)
    fail(path, where + ": " + dtype + " " + c10::str(c10::IntArrayRef(e.shape)) + " needs " + std::to_string(bytes) +
                   " bytes, data_offsets " + offsets.dump() + " hold " + std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

const at::Tensor* SafeTensors::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

SafeTensors load_safetensors(const std::string& path) {
  auto mapping = std::make_shared<Mapping>(path);
  const uint64_t size = mapping->size();
  if (size < 8)
    fail(path, "not a safetensors file: " + std::to_string(size) + " bytes, fewer than the 8 of its header's length");
  const uint64_t n = read_le64(mapping->data());
  if (n > kMaxSafetensorsHeaderBytes)
    fail(path, "the header's length (" + std::to_string(n) + " bytes) is over safetensors' limit of " +
                   std::to_string(kMaxSafetensorsHeaderBytes));
  if (n > size - 8)
    fail(path, "the header (" + std::to_string(n) + " bytes) runs past the end of the file (" + std::to_string(size) +
                   " bytes)");
  const char* text = reinterpret_cast<const char*>(mapping->data() + 8);
  const Json header = parse_header(path, text, text + n);
  const uint64_t data_size = size - 8 - n;
  uint8_t* data = mapping->data() + 8 + n;

  SafeTensors out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path, "__metadata__ '" + k + "' is not a string");
        out.metadata.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    entries.push_back(entry_of(path, key, value));
    const Entry& e = entries.back();
    if (e.end > data_size)
      fail(path, "tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
  }
  // No two tensors share a byte: a write into one must not change another.
  std::vector<const Entry*> by_begin;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i)
    if (by_begin[i]->begin < by_begin[i - 1]->end)
      fail(path, "tensors '" + by_begin[i - 1]->name + "' and '" + by_begin[i]->name + "' overlap (bytes [" +
                     std::to_string(by_begin[i - 1]->begin) + ", " + std::to_string(by_begin[i - 1]->end) +
                     ") and [" + std::to_string(by_begin[i]->begin) + ", " + std::to_string(by_begin[i]->end) + "))");

  for (const Entry& e : entries) {
    uint8_t* p = data + e.begin;
    const size_t bytes = e.end - e.begin;
    if (e.dtype->type == c10::ScalarType::Bool)
      for (size_t i = 0; i < bytes; ++i)
        if (p[i] > 1) fail(path, "tensor '" + e.name + "': BOOL byte " + std::to_string(i) + " is neither 0 nor 1");
    const auto options = at::TensorOptions().dtype(e.dtype->type);
    at::Tensor t;
    if (bytes == 0 || reinterpret_cast<uintptr_t>(p) % e.dtype->size != 0) {
      t = at::empty(e.shape, options);  // misaligned for its dtype: copied
      if (bytes) std::memcpy(t.data_ptr(), p, bytes);
    } else {
      t = at::from_blob(p, e.shape, [mapping](void*) {}, options);
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafeTensors load_safetensors_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    if (!fs::exists(single)) fail(folder, "has neither model.safetensors nor model.safetensors.index.json");
    return load_safetensors(single.string());
  }
  const std::string index_path = index.string();
  std::ifstream in(index_path, std::ios::binary);
  if (!in) fail(index_path, "cannot open");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const Json doc = parse_header(index_path, s.data(), s.data() + s.size());
  if (!doc.contains("weight_map") || !doc["weight_map"].is_object()) fail(index_path, "has no weight_map object");
  std::vector<std::string> shards;
  std::unordered_map<std::string, std::string> shard_of;
  for (const auto& [name, file] : doc["weight_map"].items()) {
    if (!file.is_string()) fail(index_path, "weight_map '" + name + "' is not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      fail(index_path, "weight_map '" + name + "' names '" + f + "', not a file of the folder");
    if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
    shard_of[name] = f;
  }
  std::unordered_map<std::string, at::Tensor> loaded;
  SafeTensors out;
  for (const std::string& f : shards) {
    const fs::path p = dir / f;
    if (!fs::exists(p)) fail(index_path, "names shard " + f + ", which is missing");
    SafeTensors shard = load_safetensors(p.string());
    for (auto& [name, t] : shard.tensors) {
      auto it = shard_of.find(name);
      if (it == shard_of.end() || it->second != f)
        fail(p.string(), "holds tensor '" + name + "', which " + index.filename().string() +
                             (it == shard_of.end() ? " does not list" : " gives to " + it->second));
      loaded.emplace(name, std::move(t));
    }
    if (out.metadata.empty()) out.metadata = std::move(shard.metadata);
  }
  for (const auto& [name, file] : doc["weight_map"].items()) {
    auto it = loaded.find(name);
    if (it == loaded.end())
      fail(index_path, "gives tensor '" + name + "' to " + file.get<std::string>() + ", which does not hold it");
    out.tensors.emplace_back(name, it->second);
  }
  return out;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::vector<at::Tensor> contiguous;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second)
      throw Error("save_safetensors: the name '" + name + "' is " +
                  (name == "__metadata__" ? "reserved" : "given twice"));
    if (!t.defined()) throw Error("save_safetensors: tensor '" + name + "' is undefined");
    const DType* d = dtype_of(t.scalar_type());
    if (!d) throw Error("save_safetensors: tensor '" + name + "' has a dtype safetensors has no name for here");
    at::Tensor c = t.detach().cpu().contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * d->size;
    header[name] = {{"dtype", d->name}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".fxcpp-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("save_safetensors: cannot write " + tmp);
    uint8_t len[8];
    uint64_t n = text.size();
    for (uint8_t& b : len) {
      b = static_cast<uint8_t>(n & 0xff);
      n >>= 8;
    }
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const at::Tensor& c : contiguous)
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    if (!out.flush()) throw Error("save_safetensors: cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("save_safetensors: cannot rename " + tmp + " to " + path + ": " + ec.message());
}

size_t release_mapped_pages(const at::Tensor& t) {
#ifndef MADV_PAGEOUT
  constexpr int MADV_PAGEOUT = 21;  // Linux 5.4; older headers lack it
#endif
  if (!t.defined() || !t.has_storage() || t.storage().nbytes() == 0) return 0;
  // A contiguous tensor's own elements (a block of a weight's rows); any other, its whole storage.
  const bool own = t.is_contiguous();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(own ? t.data_ptr() : t.storage().data());
  const uintptr_t end = begin + (own ? t.numel() * t.element_size() : t.storage().nbytes());
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages inside
  if (last <= first) return 0;
  std::lock_guard<std::mutex> lock(mapped_ranges().mutex);  // the mapping cannot go while advised
  const auto& ranges = mapped_ranges().ranges;
  auto it = ranges.upper_bound(begin);
  if (it == ranges.begin()) return 0;
  --it;
  if (begin < it->first || end > it->second) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT) != 0) return 0;
  return last - first;
}

}  // namespace fx
