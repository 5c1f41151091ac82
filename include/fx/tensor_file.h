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
#include <optional>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace c10 {
struct FunctionSchema;
}  // namespace c10

namespace fx {

class Graph;

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

/// A parameter of forward, as bind_inputs matches an inputs file to it.
struct InputParameter {
  std::string name;                          ///< "images"
  std::string type;                          ///< TorchScript annotation ("Tensor", "List[Tensor]"); "" if unknown
  std::optional<c10::IValue> default_value;  ///< what it is when not given
};

/// forward's parameters (self left out) from its TorchScript schema.
std::vector<InputParameter> input_parameters(const c10::FunctionSchema& forward);

/// The parameters of a graph: its placeholders, with their
/// meta["torchscript_type"] and default values.
std::vector<InputParameter> input_parameters(const Graph& graph);

/// forward's arguments from the value of the inputs file `path`, matched to
/// `params` as Python would call forward with what was saved:
///  - a tuple: its items, in order (`torch.save((x, y), path)`, and
///    `torch.save(([img],), path)` for a detection model's List[Tensor]);
///  - a list: the list as the one argument when forward's first parameter
///    is a list and every other one has a default (`torch.save([img], path)`
///    for images: List[Tensor]); otherwise its items, in order;
///  - a dict whose keys are all parameter names: keyword arguments (a
///    parameter left out before a given one takes its default; a required
///    one left out is an fx::Error naming it); otherwise, when the first
///    parameter is a dict, the dict as the one argument; otherwise an
///    fx::Error naming the keys that are no parameter;
///  - anything else: the one argument.
/// With `params` empty (unknown), a dict is one argument. A list of tensors
/// becomes a List[Tensor] (as Python passes it to a scripted forward), a
/// dict of str to tensors a Dict[str, Tensor], not List[Any] / Dict[Any, Any].
std::vector<c10::IValue> bind_inputs(const c10::IValue& value, const std::vector<InputParameter>& params,
                                     const std::string& path);

/// The forward inputs in a torch.save file, without knowing forward:
/// bind_inputs(load_value(path), {}, path).
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
