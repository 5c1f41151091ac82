#pragma once
// Internal: oneDNN's packed single-precision GEMM, for float32 linear
// layers below AVX-512.
//
// Below avx512_core oneDNN 2.6's matmul is its plain sgemm (gemm:jit), which,
// like OpenBLAS's, copies the weight matrix into its panel layout on every
// call: for a transformer's layer at batch 1 (ViT-B/16: 197 rows, 768 x 3072
// weights) that copy is ~20% of the layer's time. oneDNN also has the packed
// GEMM of MKL's cblas_sgemm_pack / cblas_sgemm_compute (the API its RNN
// primitives are built on): the weights are copied into the panels once and
// each call copies only the activations. libdnnl.so.2 exports it
// (dnnl::impl::cpu::sgemm_pack_get_size / sgemm_pack / sgemm_compute, its
// src/cpu/gemm/gemm_pack.hpp) without a public header; the declarations are
// below, checked by CMake against the library it links (oneDNN 2.6).
//
// Measured on an AMD EPYC Zen 3 (AVX2, 1 thread), the ViT-B/16 layers at 197
// rows: 68-82 GFLOP/s against 57 for oneDNN's matmul and OpenBLAS, where ONNX
// Runtime's MLAS (which prepacks the same way) gives 73.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace fx::onednn::detail {

/// Whether float32 linear layers run on the packed GEMM here: oneDNN's
/// effective ISA is below avx512_core (there its brgemm matmul, which packs
/// its weights, is the faster) and the packed GEMM is available.
bool packed_gemm_available();

/// A linear layer's weight [N, K] packed for inputs of `rows` rows on the
/// number of threads oneDNN has when it is made (the packing fixes how the
/// product is split between threads).
class PackedGemm {
 public:
  /// `weight`: contiguous float32 [N, K]. fx::Error naming `op` if oneDNN refuses.
  PackedGemm(const at::Tensor& weight, int64_t rows, const char* op = "onednn_linear");
  /// y = x W^T + beta y for x [rows, K] and y [rows, N], both contiguous
  /// float32 (beta 1: y holds the bias or residual added, 0: overwritten).
  void compute(const float* x, float* y, float beta) const;
  /// Bytes of the packed copy.
  size_t bytes() const { return bytes_; }

 private:
  int64_t rows_, n_, k_;
  const char* op_;
  size_t bytes_ = 0;
  std::shared_ptr<void> buffer_;  // the packed weights (aligned_buffer)
};

}  // namespace fx::onednn::detail
