// torch.save files: reading inputs, writing outputs, comparing results.
#include <fx/tensor_file.h>

#include <fx/graph.h>

#include "file_checks.h"
#include "pickle_check.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/unpickler.h>

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
  std::string pickle, pickle_name;
  import_detail::check_pickles(path, records, [&](const import_detail::ZipRecord& r) {
    std::string bytes;
    if (r.compressed) {
      bytes = import_detail::read_record(path, r, reader);
    } else {
      bytes.assign(data.data() + r.data_offset, static_cast<size_t>(r.size));
      if (import_detail::crc32(bytes.data(), bytes.size()) != r.crc32)
        throw ImportError(path + ": damaged zip archive (record '" + r.name + "' does not match its CRC-32)");
    }
    const size_t slash = r.name.find('/');
    if (pickle_name.empty() && slash != std::string::npos &&
        r.name.compare(slash + 1, std::string::npos, "data.pkl") == 0) {
      pickle_name = r.name;
      pickle = bytes;
    }
    return bytes;
  });
  // Python's pickler writes one-element lists and dicts with APPEND / SETITEM,
  // which libtorch 1.13's Unpickler does not know: rewritten as batches.
  pickle = import_detail::with_batched_items(path, pickle_name, std::move(pickle));
  c10::IValue value;
  try {
    // As torch::jit::pickle_load, with our data.pkl: tensors from data/KEY.
    caffe2::serialize::PyTorchStreamReader archive(
        std::make_unique<caffe2::serialize::MemoryReadAdapter>(data.data(), data.size()));
    size_t at = 0;
    auto read = [&](char* buffer, size_t n) {
      n = std::min(n, pickle.size() - at);
      std::memcpy(buffer, pickle.data() + at, n);
      at += n;
      return n;
    };
    auto read_record = [&](const std::string& key) { return std::get<0>(archive.getRecord("data/" + key)); };
    torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::nullopt);
    unpickler.set_version(archive.version());
    value = unpickler.parse_ivalue();
  } catch (...) {
    throw ImportError(path + ": cannot read a torch.save file: " + import_detail::current_exception_text());
  }
  validate_value(value, path);
  return value;
}

namespace {

// A pickled Python list of tensors is a List[Any]; a scripted forward taking
// List[Tensor] (detection's images) refuses that, while Python passes it:
// give such an input the typed list (and a dict of str to tensors the
// Dict[str, Tensor]).
c10::IValue typed_input(c10::IValue v) {
  auto is_tensor = [](const c10::IValue& x) { return x.isTensor(); };
  if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::AnyType) {
    auto l = v.toListRef();
    if (l.empty() || !std::all_of(l.begin(), l.end(), is_tensor)) return v;
    c10::List<at::Tensor> tensors;
    for (const auto& x : l) tensors.push_back(x.toTensor());
    return tensors;
  }
  if (v.isGenericDict() && v.toGenericDict().keyType()->kind() == c10::TypeKind::AnyType) {
    auto d = v.toGenericDict();
    if (d.empty()) return v;
    for (const auto& kv : d)
      if (!kv.key().isString() || !kv.value().isTensor()) return v;
    c10::Dict<std::string, at::Tensor> typed;
    for (const auto& kv : d) typed.insert(kv.key().toStringRef(), kv.value().toTensor());
    return typed;
  }
  return v;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Every parameter after the first has a default.
bool rest_optional(const std::vector<InputParameter>& params) {
  return std::all_of(params.begin() + 1, params.end(), [](const InputParameter& p) { return p.default_value; });
}

std::string names_of(const std::vector<InputParameter>& params) {
  std::string s;
  for (const auto& p : params) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace

std::vector<InputParameter> input_parameters(const c10::FunctionSchema& forward) {
  std::vector<InputParameter> params;
  const auto& args = forward.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (i == 0 && args[i].name() == "self") continue;
    params.push_back({args[i].name(), args[i].type()->annotation_str(), args[i].default_value()
                                                                             ? std::optional<c10::IValue>(*args[i].default_value())
                                                                             : std::nullopt});
  }
  return params;
}

std::vector<InputParameter> input_parameters(const Graph& graph) {
  std::vector<InputParameter> params;
  for (Node* p : graph.find_nodes(Opcode::Placeholder)) {
    InputParameter param{p->target(), "", std::nullopt};  // forward's own name ("input"), not "input_1"
    auto it = p->meta().find("torchscript_type");
    if (it != p->meta().end() && it->second.type() == typeid(std::string))
      param.type = std::any_cast<std::string>(it->second);
    if (!p->args().empty()) param.default_value = p->args()[0].to_ivalue();
    params.push_back(std::move(param));
  }
  return params;
}

std::vector<c10::IValue> bind_inputs(const c10::IValue& v, const std::vector<InputParameter>& params,
                                     const std::string& path) {
  std::vector<c10::IValue> inputs;
  const bool takes_list = !params.empty() && starts_with(params[0].type, "List[") && rest_optional(params);
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    inputs.assign(e.begin(), e.end());
  } else if (v.isList() && !takes_list) {
    auto l = v.toListRef();
    inputs.assign(l.begin(), l.end());
  } else if (v.isGenericDict() && !params.empty()) {
    auto d = v.toGenericDict();
    std::vector<std::string> unknown;
    std::vector<std::optional<c10::IValue>> by_position(params.size());
    for (const auto& kv : d) {
      auto p = kv.key().isString() ? std::find_if(params.begin(), params.end(),
                                                   [&](const InputParameter& q) { return q.name == kv.key().toStringRef(); })
                                   : params.end();
      if (p == params.end()) unknown.push_back(kv.key().isString() ? "'" + kv.key().toStringRef() + "'" : "a key that is no string");
      else by_position[static_cast<size_t>(p - params.begin())] = kv.value();
    }
    if (unknown.empty()) {
      size_t given = by_position.size();
      while (given > 0 && !by_position[given - 1]) --given;
      for (size_t i = 0; i < params.size(); ++i) {
        if (by_position[i] || params[i].default_value) continue;
        throw Error(path + ": the inputs are a dict without '" + params[i].name + "', which forward (" +
                    names_of(params) + ") needs");
      }
      for (size_t i = 0; i < given; ++i) inputs.push_back(by_position[i] ? *by_position[i] : *params[i].default_value);
    } else if (starts_with(params[0].type, "Dict[") && rest_optional(params)) {
      inputs.push_back(v);
    } else {
      std::string keys;
      for (const auto& k : unknown) keys += (keys.empty() ? "" : ", ") + k;
      throw Error(path + ": the inputs are a dict whose " + keys + (unknown.size() == 1 ? " is" : " are") +
                  " not a parameter of forward (" + names_of(params) + ")");
    }
  } else {
    inputs.push_back(v);
  }
  for (auto& i : inputs) i = typed_input(std::move(i));
  return inputs;
}

std::vector<c10::IValue> load_inputs(const std::string& path) { return bind_inputs(load_value(path), {}, path); }

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
