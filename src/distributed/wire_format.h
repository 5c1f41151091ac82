#pragma once
// Internal: the wire format of fx::distributed's messages (process_group.cpp
// sends and receives them): how a structured value (tensors, tuples, lists,
// numbers, bools, strings, None) becomes int64 header words plus one piece
// per tensor, and back.
#include <fx/distributed/process_group.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fx::distributed::wire {

// ---- the wire format -----------------------------------------------------
// A message is piece 0, a header of kHeaderWords int64 words; piece 1, the
// rest of the value's encoding if it does not fit; then one piece per tensor
// with data. Gloo matches sends and receives by (peer, tag): the tag is the
// message's number between the two ranks (19 bits, wrapping) and the piece.

inline constexpr int64_t kMagic = 0x46584350;  // "FXCP"
inline constexpr int64_t kVersion = 1;
inline constexpr int64_t kHeaderWords = 64;
inline constexpr int64_t kFixedWords = 9;  // magic, version, kind, id, count, encoding words, tensors, text words, flags
inline constexpr int64_t kInlineWords = kHeaderWords - kFixedWords;
inline constexpr int kPieceBits = 12;
inline constexpr int64_t kMaxPieces = (int64_t{1} << kPieceBits) - 3;  // tensors per message (pieces 2 .. 4094)
inline constexpr int64_t kProbePiece = (int64_t{1} << kPieceBits) - 1;  // never sent: a receive that only a closed link ends
inline constexpr uint64_t kSeqMask = (uint64_t{1} << 19) - 1;

inline int tag_of(uint64_t seq, int64_t piece) {
  return static_cast<int>(((seq & kSeqMask) << kPieceBits) | static_cast<uint64_t>(piece));
}

enum Code : int64_t { kNone = 0, kTensor = 1, kTuple = 2, kList = 3, kInt = 4, kDouble = 5, kBool = 6, kString = 7 };
enum ListKind : int64_t { kGenericList = 0, kTensorList = 1, kIntList = 2, kDoubleList = 3, kBoolList = 4 };

/// Appends the encoding of a string (its length, then 8 bytes a word).
void encode_string(const std::string& s, std::vector<int64_t>& words);

/// Appends the encoding of `v` to `words` and its tensors (dense, CPU,
/// detached; copied contiguous when they are not dense) to `tensors`.
/// Throws DistributedError for values that cannot be sent.
void encode(const c10::IValue& v, std::vector<int64_t>& words, std::vector<at::Tensor>& tensors);

/// Reads a value back from header words: each tensor is allocated (empty,
/// with the sent sizes and strides) and appended to `buffers`, where its
/// data is then received. Throws DistributedError naming what is malformed.
struct Decoder {
  const int64_t* p;
  const int64_t* end;
  std::vector<at::Tensor>* buffers;  ///< where each tensor's data arrives, in order

  /// The next word.
  int64_t next();
  /// The next word as a count in [0, max].
  int64_t count(int64_t max = std::numeric_limits<int32_t>::max());
  /// A string (encode_string's form).
  std::string string();
  /// A whole value.
  c10::IValue value();
};

/// `t`'s elements as one flat view of its storage (t is dense).
inline at::Tensor flat_view(const at::Tensor& t) { return t.as_strided({t.numel()}, {1}, t.storage_offset()); }

}  // namespace fx::distributed::wire
