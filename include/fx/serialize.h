#pragma once
/// \file
/// fx::save / fx::load: a GraphModule in one file (the "fxcpp file").
///
/// Why: a graph traced or rewritten in C++ otherwise dies with the process.
/// torch.fx pickles GraphModules (Python code + pickled modules); fxcpp
/// instead writes a zip with libtorch's own container (the one .pt files
/// use, caffe2::serialize::PyTorchStreamWriter) holding
///  - `extra/fxcpp.json`: a JSON document (format name and version, every
///    graph with its nodes, arguments, type annotations and serializable
///    meta, the module hierarchy), see docs/file_format.md;
///  - `extra/fxdata/N`: one record per tensor storage (storages shared by
///    several tensors are stored once; views come back as views of one storage);
///  - for imported models, their TorchScript leaves: the file is then also the
///    torch::jit::save archive of one module holding all leaves, so one
///    torch::jit::load reads them all.
/// Unlike torch.fx, no Python-like code runs at load time: the document is data,
/// checked completely (zip directory, JSON structure, node references,
/// targets, tensor extents, Graph::lint) before a GraphModule is returned.
///
/// C++ leaf modules (torch::nn::Linear, Conv2d, LSTM ...) are stored by a
/// registry name, their options as JSON and their parameters and buffers;
/// register_serializable_module teaches fxcpp a user's own module type.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

namespace fx {

/// The format version this build writes. It reads every version up to and
/// including this one; a file of a newer version is an fx::ImportError
/// naming both versions (docs/file_format.md, "Compatibility").
constexpr int kFileFormatVersion = 2;

/// The format name stored in every document ("format": "fxcpp").
constexpr const char* kFileFormatName = "fxcpp";

/// How fx::save writes.
struct SaveOptions {
  /// Store node meta (tensor_meta, stack traces, string meta). Off: no meta
  /// at all (smaller files; nothing is counted as dropped).
  bool keep_meta = true;
  /// Store, beside each generated kernel's program (fxcpp::fused_kernel
  /// nodes), the shared object the system's compiler built from it here
  /// (`fxcpp optimize --aot`): the file then runs its kernels where no
  /// compiler does, on a CPU with the instruction sets they were built for
  /// (fx/compiler/fused_kernel.h). Needs a compiler; without one fx::save
  /// throws fx::Error in one line.
  bool kernel_objects = false;
};

/// What fx::save did.
struct SaveReport {
  /// Meta entries left out because their value is not serializable (only
  /// TensorMetadata, lists of TensorMetadata, ShapeGuard, strings and scalars are).
  size_t dropped_meta = 0;
  /// "node.key" of each dropped entry, in graph order.
  std::vector<std::string> dropped_meta_keys;
  /// Storage records written (shared storages count once).
  size_t storages = 0;
  /// Bytes written.
  size_t bytes = 0;
  /// Kernel objects stored (SaveOptions::kernel_objects): one per distinct kernel.
  size_t kernel_objects = 0;
  /// The instruction-set extensions those objects need of a CPU ("avx512f", "fma" ...).
  std::vector<std::string> kernel_object_isa;
};

/// Writes `gm` to `path` atomically: a temporary file in the same directory
/// renamed over `path`, so a failed save leaves no partial file and never
/// clobbers an existing one. Throws fx::Error naming the module, node or
/// tensor that cannot be saved, fx::ImportError when the file cannot be written.
SaveReport save(const GraphModule& gm, const std::string& path, const SaveOptions& options = {});

/// Writes `gm` to a stream (the same bytes as the file).
SaveReport save(const GraphModule& gm, std::ostream& out, const SaveOptions& options = {});

/// The file's bytes in memory.
std::string save_to_string(const GraphModule& gm, const SaveOptions& options = {},
                           SaveReport* report = nullptr);

/// Reads an fxcpp file. Kernel objects it carries (SaveOptions::kernel_objects)
/// are shared objects: loading one runs its code, so they are taken only
/// from a file that belongs to this user and that no one else may write (as
/// the kernel cache's entries), and only where this build generates the
/// same C++ for the kernel on a CPU with the instructions it was built for;
/// otherwise one warning line, and the kernels are compiled from their
/// programs as in a file without objects. Every problem (no such file, not a zip, damaged zip,
/// not an fxcpp file, a newer format version, a malformed document, an
/// unknown node reference or target, a tensor record too small for its
/// tensor ...) is one fx::ImportError line starting with "PATH: ".
std::shared_ptr<GraphModule> load(const std::string& path);

/// Reads an fxcpp file from a stream; `name` stands for the path in errors.
/// Kernel objects are not taken from a stream or from memory (nothing says
/// whose bytes they are): one warning line, and the kernels are compiled.
std::shared_ptr<GraphModule> load(std::istream& in, const std::string& name = "<stream>");

/// Reads an fxcpp file held in memory; `name` stands for the path in errors.
std::shared_ptr<GraphModule> load_from_string(const std::string& bytes, const std::string& name = "<buffer>");

/// An fxcpp document held in memory, its tensors live: what the file holds
/// without the file (the Python extension's torch.fx <-> fxcpp conversion).
struct Document {
  /// The document (docs/file_format.md): "format", "version", "root"; the
  /// "tensors" and "storages" tables are not needed (tensor indices refer to `tensors`).
  nlohmann::json json;
  /// Tensor i of the document: the tensor itself, shared, never copied.
  std::vector<at::Tensor> tensors;
  /// The module whose attributes ("leaf0" ...) are the TorchScript leaves
  /// the document names, when it has any.
  std::optional<torch::jit::Module> torchscript;
};

/// `gm` as an in-memory document: the same JSON fx::save writes (without the
/// storage table), its parameters and buffers the module's own tensors.
/// Throws what fx::save throws for a module that cannot be written.
Document to_document(const GraphModule& gm, const SaveOptions& options = {});

/// The GraphModule a document describes, built and checked as fx::load
/// builds a file's; parameters and buffers are the document's tensors
/// (shared storage: a change to one is seen by the other). `name` stands for
/// the file in errors (fx::ImportError).
std::shared_ptr<GraphModule> from_document(const Document& document, const std::string& name = "<document>");

/// Whether the file at `path` is a zip archive with an fxcpp document (a
/// cheap look at the zip directory; false for anything else, never throws).
bool is_fxcpp_file(const std::string& path);

/// How a module type that is not a graph is stored: its options as JSON
/// (to_json), rebuilt by from_json; parameters and buffers are stored by
/// fxcpp and loaded into the rebuilt module under the same names.
struct SerializableModuleType {
  /// The registry name stored in the file ("torch.nn.Linear").
  std::string name;
  /// The module's options (everything but parameters and buffers).
  std::function<nlohmann::json(const torch::nn::Module&)> to_json;
  /// A new module from those options (parameters of the right shapes).
  std::function<std::shared_ptr<torch::nn::Module>(const nlohmann::json&)> from_json;
};

/// Registers a module type for fx::save / fx::load under `type.name`
/// (registering a type or a name again replaces it). The torch::nn layers
/// symbolic_trace keeps as leaves (Linear, Conv1-3d, ConvTranspose1-3d,
/// BatchNorm1-3d, LayerNorm, GroupNorm, Embedding, LSTM, GRU, RNN) and the
/// common parameter-free layers (ReLU, Dropout, Flatten, Identity, ...) are
/// registered by fxcpp.
void register_serializable_module(std::type_index type, SerializableModuleType entry);

/// Typed convenience: M is the module class (torch::nn::LinearImpl, or a
/// user's struct deriving from torch::nn::Module).
template <class M>
void register_serializable_module(const std::string& name, std::function<nlohmann::json(const M&)> to_json,
                                  std::function<std::shared_ptr<M>(const nlohmann::json&)> from_json) {
  register_serializable_module(
      typeid(M), SerializableModuleType{
                     name, [to_json](const torch::nn::Module& m) { return to_json(dynamic_cast<const M&>(m)); },
                     [from_json](const nlohmann::json& j) -> std::shared_ptr<torch::nn::Module> { return from_json(j); }});
}

/// The registered entry for the dynamic type of `module`, or nullptr. Entries
/// stay valid for the life of the program (a new registration adds one).
const SerializableModuleType* find_serializable_module(const torch::nn::Module& module);

/// The registered entry named `name`, or nullptr.
const SerializableModuleType* find_serializable_module(const std::string& name);

}  // namespace fx
