// PackedGemm: oneDNN's packed sgemm (see packed_gemm.h). Matrices are
// column-major in oneDNN's BLAS interface: y [rows, N] row-major is the
// column-major N x rows matrix W x^T, W [N, K] row-major is the K x N
// matrix W^T (so transa "T", lda K) and x [rows, K] the K x rows x^T
// (transb "N", ldb K). The packed matrix is A: the weights.
#include "onednn/packed_gemm.h"

#include "onednn/context.h"

#include <fx/error.h>
#include <fx/onednn.h>

#include <dnnl_types.h>

#include <new>

namespace dnnl::impl::cpu {
// libdnnl.so.2 (oneDNN 2.6), src/cpu/gemm/gemm_pack.hpp; dim_t is int64_t.
dnnl_status_t sgemm_pack_get_size(const char* identifier, const char* transa, const char* transb, const int64_t* M,
                                  const int64_t* N, const int64_t* K, const int64_t* lda, const int64_t* ldb,
                                  size_t* size, bool* pack);
dnnl_status_t sgemm_pack(const char* identifier, const char* transa, const char* transb, const int64_t* M,
                         const int64_t* N, const int64_t* K, const int64_t* lda, const int64_t* ldb, const float* src,
                         float* dst);
dnnl_status_t sgemm_compute(const char* transa, const char* transb, const int64_t* M, const int64_t* N,
                            const int64_t* K, const float* A, const int64_t* lda, const float* B, const int64_t* ldb,
                            const float* beta, float* C, const int64_t* ldc);
}  // namespace dnnl::impl::cpu

namespace fx::onednn::detail {
namespace {

namespace gemm = dnnl::impl::cpu;

void check(dnnl_status_t status, const char* op, const char* what, int64_t rows, int64_t n, int64_t k) {
  if (status == dnnl_success) return;
  throw Error(std::string(op) + ": oneDNN's " + what + " failed (status " + std::to_string(int(status)) +
              ") for " + std::to_string(rows) + " rows of " + std::to_string(k) + " features into " +
              std::to_string(n));
}

}  // namespace

bool packed_gemm_available() {
  static const bool yes = [] {
    if (has_avx512_core()) return false;
    const int64_t m = 16, n = 4, k = 8;
    size_t size = 0;
    return gemm::sgemm_pack_get_size("A", "T", "N", &m, &n, &k, &k, &k, &size, nullptr) == dnnl_success && size > 0;
  }();
  return yes;
}

PackedGemm::PackedGemm(const at::Tensor& weight, int64_t rows, const char* op)
    : rows_(rows), n_(weight.size(0)), k_(weight.size(1)), op_(op) {
  if (weight.scalar_type() != at::kFloat || weight.dim() != 2 || !weight.is_contiguous())
    throw Error(std::string(op) + ": the packed GEMM takes a contiguous float32 weight [out_features, in_features]");
  size_t size = 0;
  check(gemm::sgemm_pack_get_size("A", "T", "N", &n_, &rows_, &k_, &k_, &k_, &size, nullptr), op_,
        "sgemm_pack_get_size", rows_, n_, k_);
  bytes_ = size;
  buffer_ = aligned_buffer(size);
  check(gemm::sgemm_pack("A", "T", "N", &n_, &rows_, &k_, &k_, &k_, weight.data_ptr<float>(),
                         static_cast<float*>(buffer_.get())),
        op_, "sgemm_pack", rows_, n_, k_);
}

void PackedGemm::compute(const float* x, float* y, float beta) const {
  check(gemm::sgemm_compute("P", "N", &n_, &rows_, &k_, static_cast<const float*>(buffer_.get()), &k_, x, &k_,
                            &beta, y, &n_),
        op_, "sgemm_compute", rows_, n_, k_);
}

}  // namespace fx::onednn::detail
