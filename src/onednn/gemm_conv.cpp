// GemmConv: a float32 convolution as im2col and oneDNN's packed GEMM (see
// gemm_conv.h). The GEMM multiplies the [rows, depth] matrix of receptive
// fields (rows = N·OH·OW output pixels; depth = kh·kw·IC, channels
// innermost, so that each kernel tap copies an NHWC pixel, or a blocked one
// eight channels at a time) by the weights permuted to [OC, kh, kw, IC]; its
// [rows, OC] result is an NHWC output as it is, and a blocked one after a
// copy of eight channels at a time. The bias and residual are summed by the
// GEMM (its C prefilled, beta 1), the activation runs in place after it.
#include "onednn/gemm_conv.h"

#include <fx/error.h>

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>

#include <cstring>

namespace fx::onednn::detail {

bool GemmConv::fits(const ConvParams& params, int64_t kh, int64_t kw, at::IntArrayRef out_sizes, Layout in,
                    bool float32) {
  return float32 && params.groups == 1 && params.dilation == std::vector<int64_t>{1, 1} && kh * kw > 1 &&
         out_sizes[2] * out_sizes[3] <= 64 && (in == Layout::Nhwc || in == Layout::Blocked) &&
         packed_gemm_available();
}

GemmConv::GemmConv(const at::Tensor& weight, const ConvParams& params, at::IntArrayRef in, at::IntArrayRef out)
    : n_(in[0]), c_(in[1]), h_(in[2]), w_(in[3]), oc_(out[1]), oh_(out[2]), ow_(out[3]), kh_(weight.size(2)),
      kw_(weight.size(3)), stride_(params.stride), padding_(params.padding), rows_(n_ * oh_ * ow_),
      depth_(kh_ * kw_ * c_) {
  if (weight.scalar_type() != at::kFloat || weight.size(0) != oc_ || weight.size(1) != c_)
    throw Error("onednn_conv2d: the GEMM convolution takes float32 weights [" + std::to_string(oc_) + ", " +
                std::to_string(c_) + ", kh, kw], got " + sizes_str(weight.sizes()));
  // Made on the kernel's first run: outside ATen's allocator (unplanned_empty).
  weight_ = unplanned_empty({oc_, kh_, kw_, c_}, at::kFloat);
  weight_.copy_(weight.permute({0, 2, 3, 1}));
}

void GemmConv::im2col(const float* src, Layout in_layout, float* col) const {
  const int64_t pixels = oh_ * ow_, blocks = c_ / 8;
  const bool blocked = in_layout == Layout::Blocked;
  at::parallel_for(0, rows_, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / pixels, oy = r % pixels / ow_, ox = r % ow_;
      float* row = col + r * depth_;
      for (int64_t ky = 0; ky < kh_; ++ky) {
        const int64_t iy = oy * stride_[0] - padding_[0] + ky;
        for (int64_t kx = 0; kx < kw_; ++kx) {
          const int64_t ix = ox * stride_[1] - padding_[1] + kx;
          float* tap = row + (ky * kw_ + kx) * c_;
          if (iy < 0 || iy >= h_ || ix < 0 || ix >= w_) {
            std::memset(tap, 0, c_ * sizeof(float));
          } else if (!blocked) {
            std::memcpy(tap, src + ((n * h_ + iy) * w_ + ix) * c_, c_ * sizeof(float));
          } else {
            for (int64_t b = 0; b < blocks; ++b)
              std::memcpy(tap + b * 8, src + (((n * blocks + b) * h_ + iy) * w_ + ix) * 8, 8 * sizeof(float));
          }
        }
      }
    }
  });
}

void GemmConv::run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
                   const PostOps& post_ops) const {
  if (rows_ == 0) return;
  if (blocked_out ? !dst.is_contiguous() : !dst.is_contiguous(at::MemoryFormat::ChannelsLast))
    throw Error("onednn_conv2d: the GEMM convolution writes a " +
                std::string(blocked_out ? "contiguous blocked" : "channels_last") + " output, got strides " +
                sizes_str(dst.strides()));
  auto gemm = gemms_.get(at::get_num_threads(),
                         [&] { return PackedGemm(weight_.view({oc_, depth_}), rows_, "onednn_conv2d"); });
  float* col = static_cast<float*>(scratchpad(rows_ * depth_ * sizeof(float), 1));
  im2col(src, in_layout, col);

  // The GEMM's [rows, OC] result: dst itself when it is NHWC, else a scratch
  // matrix, [N, OH·OW, OC/8, 8], copied into the blocked dst [N, OC/8, OH, OW, 8] after.
  const int64_t pixels = oh_ * ow_, blocks = oc_ / 8;
  at::Tensor y, dst_rows;  // dst_rows: dst seen as y's shape
  if (blocked_out) {
    y = at::from_blob(scratchpad(rows_ * oc_ * sizeof(float), 2), {n_, pixels, blocks, 8}, dst.options());
    dst_rows = dst.view({n_, blocks, pixels, 8}).permute({0, 2, 1, 3});
  } else {
    y = dst_rows = at::from_blob(dst.data_ptr(), {rows_, oc_}, dst.options());
  }
  float beta = 0;
  const at::Tensor b = bias.defined() ? bias.reshape(blocked_out ? at::IntArrayRef{blocks, 8} : at::IntArrayRef{oc_})
                                      : at::Tensor();
  if (post_ops.sum) {  // dst holds the residual (make_output)
    beta = 1;
    if (blocked_out) y.copy_(dst_rows);
    if (b.defined()) y.add_(b);
  } else if (b.defined()) {
    beta = 1;
    y.copy_(b.expand_as(y));
  }
  gemm->compute(col, y.data_ptr<float>(), beta);
  if (blocked_out) dst_rows.copy_(y);
  apply_activation_(dst, post_ops);
}

}  // namespace fx::onednn::detail
