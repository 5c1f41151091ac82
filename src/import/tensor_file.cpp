// torch.save files: reading inputs, writing outputs, comparing results.
#include <fx/tensor_file.h>

#include "file_checks.h"
#include "pickle_check.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fx {

namespace {

std::string sizes_text(c10::IntArrayRef v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void validate_in(const c10::IValue& v, const std::string& where, const std::string& name, int depth) {
  if (depth > 100) throw ImportError(where + ": values nested more than 100 deep");
  auto child = [&](const std::string& part) { return name.empty() ? part : name + "." + part; };
  if (v.isTensor()) {
    validate_tensor(v.toTensor(), where + ": " + (name.empty() ? std::string("the tensor") : "tensor " + name));
  } else if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    for (size_t i = 0; i < e.size(); ++i) validate_in(e[i], where, child(std::to_string(i)), depth + 1);
  } else if (v.isList()) {
    auto l = v.toListRef();
    for (size_t i = 0; i < l.size(); ++i) validate_in(l[i], where, child(std::to_string(i)), depth + 1);
  } else if (v.isGenericDict()) {
    size_t i = 0;
    for (const auto& kv : v.toGenericDict()) {
      const std::string key = kv.key().isString() ? "'" + kv.key().toStringRef() + "'" : std::to_string(i);
      validate_in(kv.key(), where, child(key), depth + 1);
      validate_in(kv.value(), where, child(key), depth + 1);
      ++i;
    }
  } else if (v.isObject()) {
    const auto& obj = v.toObjectRef();
    for (size_t i = 0; i < obj.slots().size(); ++i) {
      validate_in(obj.getSlot(i), where, child(obj.type()->getAttributeName(i)), depth + 1);
    }
  }
}

}  // namespace

void validate_tensor(const at::Tensor& t, const std::string& where) {
  if (!t.defined()) return;
  if (t.layout() != at::kStrided) {
    std::ostringstream os;
    os << where << " has layout " << t.layout() << "; only dense (strided) tensors can be used";
    throw ImportError(os.str());
  }
  if (!t.device().is_cpu()) throw ImportError(where + " is on device " + t.device().str() + ", not the CPU");
  const int64_t dim = t.dim();
  if (dim > kMaxTensorRank)
    throw ImportError(where + " has " + std::to_string(dim) + " dimensions (at most " +
                      std::to_string(kMaxTensorRank) + ")");
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  for (int64_t i = 0; i < dim; ++i) {
    if (sizes[i] < 0) throw ImportError(where + " has a negative size: " + sizes_text(sizes));
    if (strides[i] < 0) throw ImportError(where + " has a negative stride: " + sizes_text(strides));
  }
  const int64_t offset = t.storage_offset();
  if (offset < 0) throw ImportError(where + " has a negative storage offset " + std::to_string(offset));
  // Element count and the last element's index, with overflow checks.
  int64_t numel = 1;
  int64_t last = offset;
  for (int64_t i = 0; i < dim; ++i) {
    if (__builtin_mul_overflow(numel, sizes[i], &numel))
      throw ImportError(where + " has too many elements: sizes " + sizes_text(sizes));
  }
  if (numel == 0) return;  // as torch: an empty tensor needs no storage
  const int64_t item = static_cast<int64_t>(t.dtype().itemsize());
  int64_t needed = 0;
  for (int64_t i = 0; i < dim; ++i) {
    int64_t span = 0;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) || __builtin_add_overflow(last, span, &last))
      throw ImportError(where + " spans more memory than can be addressed: sizes " + sizes_text(sizes) +
                        ", strides " + sizes_text(strides));
  }
  if (__builtin_add_overflow(last, int64_t{1}, &needed) || __builtin_mul_overflow(needed, item, &needed))
    throw ImportError(where + " spans more memory than can be addressed: sizes " + sizes_text(sizes) + ", strides " +
                      sizes_text(strides));
  const int64_t have = t.has_storage() ? static_cast<int64_t>(t.storage().nbytes()) : 0;
  if (needed > have || (have > 0 && t.storage().data() == nullptr))
    throw ImportError(where + " needs " + std::to_string(needed) + " bytes of storage but has " +
                      std::to_string(have));
}

void validate_value(const c10::IValue& value, const std::string& where) { validate_in(value, where, "", 0); }

c10::IValue load_value(const std::string& path) {
  const uint64_t size = import_detail::check_regular_file(path, kMaxTensorFileBytes, "a torch.save file");
  std::vector<char> data = import_detail::read_file(path, size);
  if (data.size() < 4 || data[0] != 'P' || data[1] != 'K')
    throw ImportError(path + ": not a torch.save file (not a zip archive)");
  const auto records = import_detail::check_zip(path, data.data(), data.size());
  bool has_pickle = false;
  for (const auto& r : records) {
    const size_t slash = r.name.find('/');
    if (slash != std::string::npos && r.name.compare(slash + 1, std::string::npos, "data.pkl") == 0) has_pickle = true;
  }
  if (!has_pickle) throw ImportError(path + ": not a torch.save file (no data.pkl record in the zip archive)");
  std::shared_ptr<void> reader;
  import_detail::check_pickles(path, records, [&](const import_detail::ZipRecord& r) {
    if (r.compressed) return import_detail::read_record(path, r, reader);
    std::string bytes(data.data() + r.data_offset, static_cast<size_t>(r.size));
    if (import_detail::crc32(bytes.data(), bytes.size()) != r.crc32)
      throw ImportError(path + ": damaged zip archive (record '" + r.name + "' does not match its CRC-32)");
    return bytes;
  });
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(data);
  } catch (...) {
    const std::string why = import_detail::current_exception_text();
    // Python's torch.save of a one-element list or dict writes APPEND / SETITEM,
    // which libtorch 1.13's unpickler does not know.
    if (why.find("Unknown opcode for unpickling at 0x61") != std::string::npos ||
        why.find("Unknown opcode for unpickling at 0x73") != std::string::npos)
      throw ImportError(path + ": cannot read a torch.save file: it holds a one-element list or a dict, which "
                               "libtorch cannot unpickle; save the inputs as a tuple: torch.save((x,), path)");
    throw ImportError(path + ": cannot read a torch.save file: " + why);
  }
  validate_value(value, path);
  return value;
}

namespace {

// A pickled Python list of tensors is a List[Any]; a scripted forward taking
// List[Tensor] (detection's images) refuses that, while Python passes it:
// give such an input the typed list.
c10::IValue typed_input(c10::IValue v) {
  if (!v.isList() || v.toList().elementType()->kind() != c10::TypeKind::AnyType) return v;
  auto l = v.toListRef();
  if (l.empty() || !std::all_of(l.begin(), l.end(), [](const c10::IValue& x) { return x.isTensor(); })) return v;
  c10::List<at::Tensor> tensors;
  for (const auto& x : l) tensors.push_back(x.toTensor());
  return tensors;
}

}  // namespace

std::vector<c10::IValue> load_inputs(const std::string& path) {
  c10::IValue v = load_value(path);
  std::vector<c10::IValue> inputs;
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    inputs.assign(e.begin(), e.end());
  } else if (v.isList()) {
    auto l = v.toListRef();
    inputs.assign(l.begin(), l.end());
  } else {
    inputs.push_back(v);
  }
  for (auto& i : inputs) i = typed_input(std::move(i));
  return inputs;
}

void save_value(const std::string& path, const c10::IValue& value) {
  std::vector<char> data = torch::jit::pickle_save(value);
  // Written next to the target, then renamed over it: a failed write never
  // leaves a partial file or clobbers an existing one.
  const std::string tmp = path + ".fxcpp-tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ImportError(path + ": cannot be opened for writing");
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw ImportError(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw ImportError(path + ": cannot be written: " + why);
  }
}

namespace {

void compare(const c10::IValue& a, const c10::IValue& b, const std::string& where, Difference& d) {
  if (b.isTensor()) {
    if (!a.isTensor()) throw Error(where + ": expected a tensor, got " + a.tagKind());
    at::Tensor x = a.toTensor(), y = b.toTensor();
    if (x.sizes() != y.sizes()) {
      std::ostringstream os;
      os << where << ": shape " << x.sizes() << " differs from the expected " << y.sizes();
      throw Error(os.str());
    }
    if (x.scalar_type() != y.scalar_type())
      throw Error(where + ": dtype " + std::string(c10::toString(x.scalar_type())) + " differs from the expected " +
                  c10::toString(y.scalar_type()));
    if (y.numel() == 0) return;
    if (y.is_floating_point()) {
      d.max_abs_diff = std::max(d.max_abs_diff, (x.detach() - y).abs().max().item<double>());
      d.max_abs_expected = std::max(d.max_abs_expected, y.abs().max().item<double>());
    } else if (!x.equal(y)) {
      d.max_abs_diff = std::max(d.max_abs_diff, (x.to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>());
    }
    return;
  }
  if (b.isTuple() || b.isList()) {
    std::vector<c10::IValue> xs, ys;
    auto items = [](const c10::IValue& v) {
      if (v.isTuple()) {
        const auto& e = v.toTupleRef().elements();
        return std::vector<c10::IValue>(e.begin(), e.end());
      }
      auto l = v.toListRef();
      return std::vector<c10::IValue>(l.begin(), l.end());
    };
    if (!a.isTuple() && !a.isList()) throw Error(where + ": expected a sequence, got " + a.tagKind());
    xs = items(a);
    ys = items(b);
    if (xs.size() != ys.size())
      throw Error(where + ": " + std::to_string(xs.size()) + " items, expected " + std::to_string(ys.size()));
    for (size_t i = 0; i < xs.size(); ++i) compare(xs[i], ys[i], where + "[" + std::to_string(i) + "]", d);
    return;
  }
  if (b.isGenericDict()) {
    if (!a.isGenericDict()) throw Error(where + ": expected a dict, got " + a.tagKind());
    auto da = a.toGenericDict();
    if (da.size() != b.toGenericDict().size())
      throw Error(where + ": " + std::to_string(da.size()) + " keys, expected " +
                  std::to_string(b.toGenericDict().size()));
    for (const auto& kv : b.toGenericDict()) {
      auto it = da.find(kv.key());
      if (it == da.end()) throw Error(where + ": missing key");
      compare(it->value(), kv.value(), where + "[key]", d);
    }
    return;
  }
  if (b.isDouble() && (a.isDouble() || a.isInt())) {
    d.max_abs_diff = std::max(d.max_abs_diff, std::abs(a.toScalar().toDouble() - b.toDouble()));
    d.max_abs_expected = std::max(d.max_abs_expected, std::abs(b.toDouble()));
    return;
  }
  if (!(a == b)) throw Error(where + ": value differs from the expected one");
}

}  // namespace

Difference compare_values(const c10::IValue& actual, const c10::IValue& expected) {
  Difference d;
  compare(actual, expected, "output", d);
  return d;
}

}  // namespace fx
