#pragma once
/// \file
/// Values in torch.save files: what `fxcpp run` reads as inputs and writes as
/// outputs, and what tests compare against PyTorch's eager results.
///
/// Untrusted files: load_value checks, before libtorch parses anything, that
/// the path is a regular file of at most kMaxTensorFileBytes, that its zip
/// directory is consistent (every record inside the file, plausible sizes)
/// and that its pickle is well formed (opcode whitelist, simulated stack and
/// memo, every storage's record large enough); after parsing, every tensor
/// goes through validate_tensor, so no tensor whose sizes / strides / offset
/// need more storage than it has reaches a kernel. Every problem is one
/// fx::ImportError line naming the file (and the tensor).

#include <fx/error.h>

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace fx {

/// The largest input / tensor file load_value reads (it reads the whole file
/// into memory): 4 GiB.
constexpr uint64_t kMaxTensorFileBytes = uint64_t{4} << 30;

/// The most dimensions a loaded tensor may have (as PyTorch's own limit for
/// many kernels).
constexpr int64_t kMaxTensorRank = 64;

/// Checks that a tensor read from a file is safe to hand to a kernel: dense
/// (strided) layout on the CPU, at most kMaxTensorRank dimensions,
/// non-negative sizes, strides and storage offset, an element count that does
/// not overflow, and a storage at least as large as its sizes, strides,
/// offset and dtype need. Throws fx::ImportError "WHERE needs 400 bytes of
/// storage but has 16" (`where` names file and tensor: "in.pt: tensor 0").
void validate_tensor(const at::Tensor& tensor, const std::string& where);

/// validate_tensor on every tensor in `value`, through tuples, lists, dicts
/// and objects; the tensor at position i of a top-level tuple is named
/// "WHERE: tensor i", nested ones "tensor i.j", a lone tensor "WHERE: the tensor".
void validate_value(const c10::IValue& value, const std::string& where);

/// Reads a file written by torch.save (or save_value): a tensor, or a tuple /
/// list of values. Throws fx::ImportError naming the file when it cannot, or
/// when the file or a tensor in it fails the checks above.
c10::IValue load_value(const std::string& path);

/// The forward inputs in a torch.save file: a tuple or list is the argument
/// list, anything else one argument. An argument that is a list of tensors is
/// a List[Tensor] (as Python passes it to a scripted forward), not List[Any].
std::vector<c10::IValue> load_inputs(const std::string& path);

/// Writes `value` so that torch.load in Python reads it back; atomically (a
/// temporary file beside `path`, renamed over it), so a failure never leaves
/// a partial file or clobbers an existing one.
void save_value(const std::string& path, const c10::IValue& value);

/// The largest absolute difference between the tensors of `a` and `b`
/// (matched through tuples, lists and dicts) and the largest absolute value
/// in `b`. Throws fx::Error when the structure, shapes or dtypes differ.
struct Difference {
  double max_abs_diff = 0;
  double max_abs_expected = 0;
};
/// Compares `actual` with `expected` (see Difference).
Difference compare_values(const c10::IValue& actual, const c10::IValue& expected);

}  // namespace fx
