#pragma once
/// \file
/// safetensors files (Hugging Face's checkpoint format) read and written by
/// fxcpp itself: a decoder's weights as users have them (`model.safetensors`,
/// or `model.safetensors.index.json` and its shards).
///
/// The format: 8 bytes, the header's length N (unsigned, little-endian);
/// N bytes of JSON, an object naming each tensor's `dtype`, `shape` and
/// `data_offsets` [begin, end) into the bytes that follow, and optionally
/// `__metadata__` (strings); then the data.
///
/// Untrusted files: before any tensor is made, load_safetensors checks that
/// the file is a regular file, that the header fits in it (and in
/// safetensors' own 100 MB limit), that it is a JSON object of well-formed
/// entries, that every dtype is one fxcpp reads, that every shape's bytes
/// (overflow-checked) are exactly its data_offsets' span, that every span
/// lies inside the data, and that no two spans overlap. Every problem is one
/// fx::ImportError line naming the file and the tensor; nothing past a check
/// is ever read.
///
/// Tensors share a private, copy-on-write mapping of the file (no copy; the
/// file is never written): a tensor whose data is not aligned to its element
/// size is copied instead.

#include <fx/error.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fx {

/// The largest header load_safetensors reads (safetensors' own limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// The tensors of a safetensors file or checkpoint folder, in the order the
/// file's header lists them (a folder: its shards in the index's order).
struct SafeTensors {
  /// (name, tensor) pairs.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  /// The header's `__metadata__` (key, value) pairs, in the file's order.
  std::vector<std::pair<std::string, std::string>> metadata;
  /// The tensor named `name`, or nullptr.
  const at::Tensor* find(const std::string& name) const;
};

/// Reads the safetensors file at `path`. Throws fx::ImportError, one line
/// naming the file (and the tensor), when a check above fails.
SafeTensors load_safetensors(const std::string& path);

/// Reads a checkpoint folder as Hugging Face writes it: `model.safetensors`,
/// or `model.safetensors.index.json` and the shards its `weight_map` names
/// (each shard must exist, hold exactly the tensors the index gives it, and
/// no tensor may be in two shards). Throws fx::ImportError naming the file.
SafeTensors load_safetensors_folder(const std::string& folder);

/// Hands the memory of `t`'s pages back to the system when `t`'s storage
/// lies in a file load_safetensors mapped (madvise MADV_PAGEOUT over the
/// whole pages inside the elements of a contiguous `t` — a block of a
/// weight's rows releases that block — or inside the storage of any other): the values stay, read from the file again if `t` is used
/// (pages a write made private are kept, or swapped). Meant for weights
/// whose use is over, e.g. packed by quantize_weight_only: the mapping is
/// one per file and lives as long as any of its tensors, so the pages of a
/// layer read once would otherwise stay resident. Returns the bytes advised:
/// 0 for a tensor in any other memory, or on a kernel without MADV_PAGEOUT (5.4).
size_t release_mapped_pages(const at::Tensor& t);

/// Writes `tensors` (each as a contiguous copy, dtypes as load_safetensors
/// reads them) and `metadata` to `path` in the safetensors format, the
/// header padded with spaces to a multiple of 8 bytes (as the Python
/// library writes it), through a temporary file renamed into place.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace fx
