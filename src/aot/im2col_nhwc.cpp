// im2col and col2im on channels-last images: fxcpp::im2col_nhwc and
// fxcpp::col2im_nhwc, for conv_as_matmul's products (conv_as_matmul.cpp).
//
// ATen's im2col / col2im work on NCHW: on a channels-last activation
// im2col first copies it to NCHW, then writes [N, C*kh*kw, L], which the
// product needs as [N*L, kh*kw*C] (a channels-last weight's order), a third
// copy; col2im likewise needs its columns permuted and gives NCHW, copied
// back to channels-last. On resnet18's small maps at batch 32 those copies
// and ATen's kernels took ~25 ms of a ~320 ms step. Here a row of the
// columns is one output position, and its kh*kw blocks are C contiguous
// channels of one input pixel: im2col is a memcpy per block (zeros in the
// padding), col2im an add of C contiguous values per block into the NHWC
// image.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

namespace fx {
namespace {

/// The geometry of a 2-d convolution's columns.
struct Geometry {
  int64_t n, c, h, w, kh, kw, dh, dw, ph, pw, sh, sw, ho, wo;

  Geometry(int64_t n_, int64_t c_, int64_t h_, int64_t w_, at::IntArrayRef kernel, at::IntArrayRef dilation,
           at::IntArrayRef padding, at::IntArrayRef stride, const char* op)
      : n(n_), c(c_), h(h_), w(w_) {
    TORCH_CHECK(kernel.size() == 2 && dilation.size() == 2 && padding.size() == 2 && stride.size() == 2, op,
                ": kernel_size, dilation, padding and stride take 2 values each");
    kh = kernel[0], kw = kernel[1], dh = dilation[0], dw = dilation[1];
    ph = padding[0], pw = padding[1], sh = stride[0], sw = stride[1];
    TORCH_CHECK(kh > 0 && kw > 0 && dh > 0 && dw > 0 && sh > 0 && sw > 0 && ph >= 0 && pw >= 0, op,
                ": kernel_size, dilation and stride must be positive, padding non-negative");
    ho = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    wo = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    TORCH_CHECK(ho > 0 && wo > 0, op, ": the kernel does not fit the ", h, "x", w, " image");
  }
  int64_t rows() const { return n * ho * wo; }
  int64_t row_size() const { return kh * kw * c; }
};

/// [N, C, H, W] (any layout) -> [N*Ho*Wo, kh*kw*C]: row (n, oh, ow) holds
/// input pixels (oh*sh - ph + i*dh, ow*sw - pw + j*dw), block i*kw + j.
at::Tensor im2col_nhwc(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef dilation,
                       at::IntArrayRef padding, at::IntArrayRef stride) {
  TORCH_CHECK(input.dim() == 4, "fxcpp::im2col_nhwc: expected a 4-d input, got ", input.dim(), " dimensions");
  const at::Tensor x = input.contiguous(c10::MemoryFormat::ChannelsLast);
  const Geometry g(x.size(0), x.size(1), x.size(2), x.size(3), kernel, dilation, padding, stride,
                   "fxcpp::im2col_nhwc");
  at::Tensor cols = at::empty({g.rows(), g.row_size()}, x.options());
  const size_t block = static_cast<size_t>(g.c) * x.element_size();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(cols.data_ptr());
  at::parallel_for(0, g.rows(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / (g.ho * g.wo), oh = r / g.wo % g.ho, ow = r % g.wo;
      char* row = dst + r * g.kh * g.kw * block;
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        for (int64_t j = 0; j < g.kw; ++j, row += block) {
          const int64_t iw = ow * g.sw - g.pw + j * g.dw;
          if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w)
            std::memset(row, 0, block);
          else
            std::memcpy(row, src + ((b * g.h + ih) * g.w + iw) * block, block);
        }
      }
    }
  });
  return cols;
}

/// The adjoint of im2col_nhwc: [N*Ho*Wo, kh*kw*C] -> a channels-last
/// [N, C, H, W] image, each block added to the pixel it was read from.
at::Tensor col2im_nhwc(const at::Tensor& columns, at::IntArrayRef input_size, at::IntArrayRef kernel,
                       at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  TORCH_CHECK(columns.dim() == 2, "fxcpp::col2im_nhwc: expected 2-d columns, got ", columns.dim(), " dimensions");
  TORCH_CHECK(input_size.size() == 2 && kernel.size() == 2 && kernel[0] > 0 && kernel[1] > 0,
              "fxcpp::col2im_nhwc: input_size and kernel_size take 2 values, the kernel's positive");
  TORCH_CHECK(columns.size(1) % (kernel[0] * kernel[1]) == 0, "fxcpp::col2im_nhwc: columns of width ",
              columns.size(1), " are not ", kernel[0], "x", kernel[1], " blocks");
  Geometry g(1, columns.size(1) / (kernel[0] * kernel[1]), input_size[0], input_size[1], kernel, dilation, padding,
             stride, "fxcpp::col2im_nhwc");
  TORCH_CHECK(columns.size(0) % (g.ho * g.wo) == 0, "fxcpp::col2im_nhwc: ", columns.size(0),
              " rows are not whole images of ", g.ho, "x", g.wo, " positions");
  g.n = columns.size(0) / (g.ho * g.wo);
  const at::Tensor cols = columns.contiguous();
  at::Tensor image = at::empty({g.n, g.c, g.h, g.w}, cols.options(), c10::MemoryFormat::ChannelsLast).zero_();
  AT_DISPATCH_FLOATING_TYPES(cols.scalar_type(), "fxcpp::col2im_nhwc", [&] {
    const scalar_t* src = cols.data_ptr<scalar_t>();
    scalar_t* dst = image.data_ptr<scalar_t>();
    at::parallel_for(0, g.n, 1, [&](int64_t begin, int64_t end) {  // images do not overlap
      for (int64_t b = begin; b < end; ++b)
        for (int64_t oh = 0; oh < g.ho; ++oh)
          for (int64_t ow = 0; ow < g.wo; ++ow) {
            const scalar_t* row = src + ((b * g.ho + oh) * g.wo + ow) * g.row_size();
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t ih = oh * g.sh - g.ph + i * g.dh;
              for (int64_t j = 0; j < g.kw; ++j, row += g.c) {
                const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                scalar_t* pixel = dst + ((b * g.h + ih) * g.w + iw) * g.c;
                // By reference: a vector passed by value to a lambda made GCC
                // print its note on the 32-byte alignment ABI of GCC 4.6.
                at::vec::map2([](const auto& a, const auto& v) { return a + v; }, pixel, pixel, row, g.c);
              }
            }
          }
    });
  });
  return image;
}

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("im2col_nhwc(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor",
        &im2col_nhwc);
  m.def(
      "col2im_nhwc(Tensor self, int[2] input_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) "
      "-> Tensor",
      &col2im_nhwc);
}

}  // namespace
}  // namespace fx
