// The kernels of fx::decoders::linear_weight_only (weight_only_kernels.cpp):
// activations quantized per block of 32 (llama.cpp's Q8_0), then integer dot
// products with the packed int8 / int4 weights (include/fx/decoders/weight_only.h
// gives their layout), for a tile of up to kWeightOnlyTile activation rows at
// a time, so that each weight byte is read once per tile.
//
// Every kernel computes, per output (row r, channel n) and group g,
//   Σ_b∈g d_b · Σ_k∈b raw_k · xq_k
// with `raw` the kernel's integer view of the weight (int8 as stored, or
// +128 for VNNI's unsigned operand; int4 nibbles 0..15), then subtracts
//   Σ_g s_g · (zero_g + offset) · xsum_g,  xsum_g = Σ_b∈g d_b · Σ_k∈b xq_k
// for the zero points (8 for symmetric int4) and the kernel's offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fx::decoders::detail {

/// The instruction sets a weight-only kernel exists for, best last.
enum class WeightOnlyIsa { Scalar, Avx2, Avx512Vnni };

/// Activation rows per pass over the weights.
constexpr int64_t kWeightOnlyTile = 4;

/// "avx512-vnni", "avx2", "scalar".
const char* weight_only_isa_name(WeightOnlyIsa isa);
/// The best kernel this CPU runs (cpuid, once).
WeightOnlyIsa weight_only_best_isa();
/// Whether this CPU can run `isa`'s kernels.
bool weight_only_isa_supported(WeightOnlyIsa isa);

/// What the kernels read of the weight.
struct WeightOnlyView {
  int bits = 8;
  int64_t n = 0, k = 0;
  /// Row r's bytes start at data + r * row_bytes (K or K / 2).
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  /// [n, groups]; zeros may be null (symmetric).
  const float* scales = nullptr;
  const float* zeros = nullptr;
  int64_t groups = 1;
  /// Blocks of 32 per group; 0: one scale per row (per channel, int8).
  int64_t group_blocks = 0;
  /// Block b's group: b >> group_shift (log2 of group_blocks; 62 per channel).
  int group_shift = 62;
};

/// Activation rows quantized per block of 32 along K for one kernel: steps
/// d = max |x| / 127 and values q = round(x / d) in [-127, 127].
struct WeightOnlyActivations {
  int64_t rows = 0, k = 0;
  /// ceil(k / 32), and that rounded up to a multiple of 4 (VNNI: 16) (q's row holds padded_blocks * 32 bytes, zero past k).
  int64_t blocks = 0, padded_blocks = 0;
  /// rows x padded_blocks*32: K's order, or for VNNI's int4 kernel per 4 blocks
  /// the first 16 values of each then the last 16 (the order its nibbles unpack to).
  std::vector<int8_t> q;
  /// rows x padded_blocks: d per block (0 past the end).
  std::vector<float> d;
  /// VNNI (padded_blocks a multiple of 16): rows x padded_blocks, block b's d at
  /// its unit of 16 blocks' lane for it (the order the kernel's sums fold to).
  std::vector<float> lanes;
  /// VNNI: rows x padded_blocks, offset · Σ q per block (int8's +128, symmetric int4's 8), lanes' order.
  std::vector<int32_t> qz;
  /// rows x groups: Σ over the group's blocks of d_b · Σ q (for zero points).
  std::vector<float> xsum;
};

/// Quantizes the `rows` x `k` float rows at `x` for `isa`'s kernel over `w`.
WeightOnlyActivations quantize_activations(WeightOnlyIsa isa, const WeightOnlyView& w, const float* x, int64_t rows,
                                           int64_t k);

/// y[r][n] for r in [r0, r0 + tile) (tile <= kWeightOnlyTile) and n in [n0, n1):
/// y is row-major with n's stride `ldy`; bias (or null) added.
void weight_only_tile(WeightOnlyIsa isa, const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t r0,
                      int64_t tile, int64_t n0, int64_t n1, const float* bias, float* y, int64_t ldy);

/// The prompt kernel (weight_only_gemm.cpp, AVX-512 VNNI only): y[r][n] for
/// every row of `a` and n in [n0, n1), by panels of 16 output channels
/// unpacked once per call into vpdpbusd's broadcast layout. `a` holds the
/// activations in K's order (quantize_activations for WeightOnlyIsa::Avx2);
/// y row-major with n's stride `ldy`; bias (or null) added.
void weight_only_gemm(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t n0, int64_t n1,
                      const float* bias, float* y, int64_t ldy);

/// Activation rows from which linear_weight_only runs weight_only_gemm on a
/// VNNI CPU (below, the decode kernel's tiles of 4 rows).
constexpr int64_t kWeightOnlyGemmMinRows = 16;

/// Panels of 16 output channels weight_only_gemm has computed in this
/// process (tests check that the prompt kernel ran).
size_t weight_only_gemm_panels();

}  // namespace fx::decoders::detail
