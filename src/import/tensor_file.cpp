// torch.save files: reading inputs, writing outputs, comparing results.
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iterator>
#include <sstream>

namespace fx {

c10::IValue load_value(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path + ": cannot be opened for reading");
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 4 || data[0] != 'P' || data[1] != 'K')
    throw ImportError(path + ": not a torch.save file (not a zip archive)");
  try {
    return torch::jit::pickle_load(data);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw ImportError(path + ": cannot read a torch.save file: " + msg.substr(0, msg.find('\n')));
  } catch (const std::exception& e) {
    std::string msg = e.what();
    throw ImportError(path + ": cannot read a torch.save file: " + msg.substr(0, msg.find('\n')));
  }
}

std::vector<c10::IValue> load_inputs(const std::string& path) {
  c10::IValue v = load_value(path);
  if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    return std::vector<c10::IValue>(e.begin(), e.end());
  }
  if (v.isList()) {
    auto l = v.toListRef();
    return std::vector<c10::IValue>(l.begin(), l.end());
  }
  return {v};
}

void save_value(const std::string& path, const c10::IValue& value) {
  std::vector<char> data = torch::jit::pickle_save(value);
  std::ofstream out(path, std::ios::binary);
  if (!out) throw ImportError(path + ": cannot be opened for writing");
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw ImportError(path + ": write failed");
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
