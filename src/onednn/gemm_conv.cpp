// GemmConv: a float32 convolution as im2col and oneDNN's packed GEMM (see
// gemm_conv.h). The GEMM multiplies the [rows, depth] matrix of receptive
// fields (rows = N·OH·OW output pixels; depth = kh·kw·IC, channels
// innermost, so that each kernel tap copies an NHWC pixel, or a blocked one
// eight channels at a time) by the weights permuted to [OC, kh, kw, IC]; its
// [rows, OC] result is an NHWC output as it is, and a blocked one after a
// copy of eight channels at a time. The bias and residual are summed by the
// GEMM (its C prefilled, beta 1, in the pass that copies the receptive
// fields); the activation runs in the pass that copies the result into a
// blocked output (ReLU, clip, SiLU), or in place after it. A 1×1 kernel of
// stride 1 on an NHWC input needs no im2col: the GEMM reads the input.
#include "onednn/gemm_conv.h"

#include <fx/error.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

namespace fx::onednn::detail {
namespace {

/// Rows per task of a copy of rows of `floats` floats each: at least 8 rows
/// and 16K floats, so that a small copy runs on the calling thread (with two
/// threads, opening a parallel region for less costs more than it saves).
int64_t grain(int64_t floats) { return std::max<int64_t>(8, (int64_t{1} << 14) / std::max<int64_t>(floats, 1)); }

}  // namespace

bool GemmConv::fits(const ConvParams& params, int64_t kh, int64_t kw, at::IntArrayRef out_sizes, Layout in,
                    bool float32) {
  const int64_t pixels = out_sizes[2] * out_sizes[3], rows = out_sizes[0] * pixels;
  const bool one_by_one = kh * kw == 1;
  return float32 && params.groups == 1 && params.dilation == std::vector<int64_t>{1, 1} && pixels <= 64 &&
         (!one_by_one || (at::get_num_threads() > 1 && rows >= 16 && rows <= 64)) &&
         (in == Layout::Nhwc || in == Layout::Blocked) && packed_gemm_available();
}

GemmConv::GemmConv(const at::Tensor& weight, const ConvParams& params, at::IntArrayRef in, at::IntArrayRef out)
    : n_(in[0]), c_(in[1]), h_(in[2]), w_(in[3]), oc_(out[1]), oh_(out[2]), ow_(out[3]), kh_(weight.size(2)),
      kw_(weight.size(3)), stride_(params.stride), padding_(params.padding), rows_(n_ * oh_ * ow_),
      depth_(kh_ * kw_ * c_) {
  if (weight.scalar_type() != at::kFloat || weight.size(0) != oc_ || weight.size(1) != c_)
    throw Error("onednn_conv2d: the GEMM convolution takes float32 weights [" + std::to_string(oc_) + ", " +
                std::to_string(c_) + ", kh, kw], got " + sizes_str(weight.sizes()));
  // The panel GEMM packs its own copy: the permuted weights are only the packed GEMM's.
  if (kh_ * kw_ == 1 && stride_ == std::vector<int64_t>{1, 1} && padding_ == std::vector<int64_t>{0, 0} &&
      PanelGemm::available()) {
    panel_ = std::make_unique<const PanelGemm>(weight.reshape({oc_, c_}));
    return;
  }
  // Made on the kernel's first run: outside ATen's allocator (unplanned_empty).
  weight_ = unplanned_empty({oc_, kh_, kw_, c_}, at::kFloat);
  weight_.copy_(weight.permute({0, 2, 3, 1}));
}

void GemmConv::im2col_row(const float* src, bool blocked, int64_t r, float* row) const {
  const int64_t pixels = oh_ * ow_, blocks = c_ / 8;
  const int64_t n = r / pixels, oy = r % pixels / ow_, ox = r % ow_;
  for (int64_t ky = 0; ky < kh_; ++ky) {
    const int64_t iy = oy * stride_[0] - padding_[0] + ky;
    for (int64_t kx = 0; kx < kw_; ++kx) {
      const int64_t ix = ox * stride_[1] - padding_[1] + kx;
      float* tap = row + (ky * kw_ + kx) * c_;
      if (iy < 0 || iy >= h_ || ix < 0 || ix >= w_) {
        std::memset(tap, 0, c_ * sizeof(float));
      } else if (!blocked) {
        std::memcpy(tap, src + pixel(false, n, 0, iy, ix, h_, w_, c_), c_ * sizeof(float));
      } else {
        for (int64_t b = 0; b < blocks; ++b)
          std::memcpy(tap + b * 8, src + pixel(true, n, b, iy, ix, h_, w_, c_), 8 * sizeof(float));
      }
    }
  }
}

void GemmConv::run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
                   const PostOps& post_ops) const {
  if (rows_ == 0) return;
  check_run_args(dst, blocked_out, bias, oc_, "GEMM");
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  if (panel_) {  // input pixels are output pixels
    const int64_t pixels = oh_ * ow_;
    panel_->run({src, pixels, c_, in_layout == Layout::Blocked},
                {dst.data_ptr<float>(), pixels, oc_, blocked_out}, rows_, b, post_ops);
    if (!activates_by_row(post_ops)) apply_activation_(dst, post_ops);
    return;
  }
  auto gemm = gemms_.get(at::get_num_threads(),
                         [&] { return PackedGemm(weight_.view({oc_, depth_}), rows_, "onednn_conv2d"); });
  // A 1×1 kernel of stride 1 on an NHWC input reads its rows as they are.
  const bool blocked_in = in_layout == Layout::Blocked;
  const bool rows_as_they_are = !blocked_in && kh_ * kw_ == 1 && stride_ == std::vector<int64_t>{1, 1} &&
                                padding_ == std::vector<int64_t>{0, 0};
  float* col = rows_as_they_are ? nullptr : static_cast<float*>(scratchpad(rows_ * depth_ * sizeof(float), 1));
  // The GEMM's [rows, OC] result y: dst itself when it is NHWC, else a
  // scratch matrix whose rows are copied into the blocked dst
  // [N, OC/8, OH, OW, 8] after. Its C is prefilled with the bias and the
  // residual (beta 1), row by row with the receptive fields, in one pass.
  const int64_t pixels = oh_ * ow_, blocks = oc_ / 8;
  float* out = dst.data_ptr<float>();
  float* y = blocked_out ? static_cast<float*>(scratchpad(rows_ * oc_ * sizeof(float), 2)) : out;
  const bool sum = post_ops.sum;
  // Output pixel r's first 8 channels in the blocked dst; block k is k·OH·OW·8 further.
  auto blocked_pixel = [&](int64_t r) {
    return out + pixel(true, r / pixels, 0, r % pixels / ow_, r % ow_, oh_, ow_, oc_);
  };
  at::parallel_for(0, rows_, grain(depth_ + oc_), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (col) im2col_row(src, blocked_in, r, col + r * depth_);
      float* yr = y + r * oc_;
      if (sum && blocked_out) {  // the residual, from dst's blocked layout
        const float* res = blocked_pixel(r);
        for (int64_t k = 0; k < blocks; ++k) std::memcpy(yr + k * 8, res + k * pixels * 8, 8 * sizeof(float));
      }
      if (b && sum) {
        for (int64_t c = 0; c < oc_; ++c) yr[c] += b[c];
      } else if (b) {
        std::memcpy(yr, b, oc_ * sizeof(float));
      }
    }
  });
  gemm->compute(col ? col : src, y, sum || b ? 1.f : 0.f);
  // One pass after the GEMM: the activation, row by row, and the copy into
  // the blocked dst.
  const bool by_row = activates_by_row(post_ops);
  if (!blocked_out && (!by_row || post_ops.activation == Activation::None)) {
    apply_activation_(dst, post_ops);
    return;
  }
  at::parallel_for(0, rows_, grain(oc_), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* yr = y + r * oc_;
      if (by_row) activate_row(yr, oc_, post_ops);
      if (!blocked_out) continue;
      float* o = blocked_pixel(r);
      for (int64_t k = 0; k < blocks; ++k) std::memcpy(o + k * pixels * 8, yr + k * 8, 8 * sizeof(float));
    }
  });
  if (!by_row) apply_activation_(dst, post_ops);
}

}  // namespace fx::onednn::detail
