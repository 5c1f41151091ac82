// fxcpp::im2col_nhwc and fxcpp::col2im_nhwc: ATen's im2col / col2im on
// channels-last images, with the columns in (kh, kw, C) order per position.
#include <fx/aot.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using Ints = std::vector<int64_t>;

/// Calls fxcpp::`name` with `args` (boxed).
at::Tensor call_nhwc_op(const char* name, std::vector<c10::IValue> args) {
  fx::Graph g;
  fx::bernoulli_as_fxcpp(g);  // links the aot layer, which registers the operators
  c10::Dispatcher::singleton().findSchemaOrThrow(name, "").callBoxed(args);
  return args.at(0).toTensor();
}

struct Im2colCase {
  int64_t n, c, h, w;
  Ints kernel, dilation, padding, stride;
};

const std::vector<Im2colCase>& im2col_cases() {
  static const std::vector<Im2colCase> cases = {
      {2, 5, 4, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // resnet's 3x3
      {2, 3, 7, 6, {3, 2}, {1, 1}, {1, 0}, {2, 1}},  // strided, rectangular
      {1, 4, 9, 9, {3, 3}, {2, 2}, {2, 2}, {1, 1}},  // dilated
      {3, 8, 2, 2, {1, 1}, {1, 1}, {0, 0}, {1, 1}},  // 1x1
      {2, 6, 5, 5, {5, 5}, {1, 1}, {0, 0}, {3, 3}},  // no padding
  };
  return cases;
}

TEST(Im2colNhwc, ColumnsAreAtensInKernelMajorOrder) {
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (const Im2colCase& k : im2col_cases()) {
      const at::Tensor x = torch::randn({k.n, k.c, k.h, k.w}, dtype).contiguous(c10::MemoryFormat::ChannelsLast);
      const at::Tensor got = call_nhwc_op("fxcpp::im2col_nhwc", {x, k.kernel, k.dilation, k.padding, k.stride});
      at::Tensor want = at::im2col(x, k.kernel, k.dilation, k.padding, k.stride);  // [N, C*kh*kw, L]
      const int64_t l = want.size(2), kk = k.kernel[0] * k.kernel[1];
      want = want.view({k.n, k.c, kk, l}).permute({0, 3, 2, 1}).reshape({k.n * l, kk * k.c});
      EXPECT_TRUE(torch::equal(got, want)) << k.c << " channels " << k.h << "x" << k.w;
      // An NCHW input gives the same columns.
      EXPECT_TRUE(torch::equal(call_nhwc_op("fxcpp::im2col_nhwc", {x.contiguous(), k.kernel, k.dilation, k.padding, k.stride}), got));
    }
}

TEST(Im2colNhwc, Col2imIsAtensIntoAChannelsLastImage) {
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (const Im2colCase& k : im2col_cases()) {
      const int64_t kk = k.kernel[0] * k.kernel[1];
      const int64_t l = at::im2col(torch::empty({1, 1, k.h, k.w}), k.kernel, k.dilation, k.padding, k.stride).size(2);
      const at::Tensor cols = torch::randn({k.n * l, kk * k.c}, dtype);
      const at::Tensor got =
          call_nhwc_op("fxcpp::col2im_nhwc", {cols, Ints{k.h, k.w}, k.kernel, k.dilation, k.padding, k.stride});
      const at::Tensor want = at::col2im(cols.view({k.n, l, kk, k.c}).permute({0, 3, 2, 1}).reshape({k.n, k.c * kk, l}),
                                         {k.h, k.w}, k.kernel, k.dilation, k.padding, k.stride);
      EXPECT_TRUE(got.is_contiguous(c10::MemoryFormat::ChannelsLast));
      EXPECT_EQ(got.sizes(), want.sizes());
      EXPECT_TRUE(torch::allclose(got, want, 1e-6, 1e-6)) << k.c << " channels " << k.h << "x" << k.w;
    }
}

TEST(Im2colNhwc, BadArgumentsNameTheOperator) {
  auto message = [](const char* name, std::vector<c10::IValue> args) {
    try {
      call_nhwc_op(name, std::move(args));
    } catch (const c10::Error& e) {
      return e.msg();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("fxcpp::im2col_nhwc", {torch::randn({3, 4, 4}), Ints{3, 3}, Ints{1, 1}, Ints{1, 1}, Ints{1, 1}})
                .rfind("fxcpp::im2col_nhwc: expected a 4-d input, got 3 dimensions", 0),
            0u);
  EXPECT_EQ(message("fxcpp::im2col_nhwc", {torch::randn({1, 2, 2, 2}), Ints{5, 5}, Ints{1, 1}, Ints{0, 0}, Ints{1, 1}})
                .rfind("fxcpp::im2col_nhwc: the kernel does not fit the 2x2 image", 0),
            0u);
  EXPECT_EQ(message("fxcpp::col2im_nhwc", {torch::randn({5, 18}), Ints{2, 2}, Ints{3, 3}, Ints{1, 1}, Ints{1, 1}, Ints{1, 1}})
                .rfind("fxcpp::col2im_nhwc: 5 rows are not whole images of 2x2 positions", 0),
            0u);
  EXPECT_EQ(message("fxcpp::col2im_nhwc", {torch::randn({4, 10}), Ints{2, 2}, Ints{3, 3}, Ints{1, 1}, Ints{1, 1}, Ints{1, 1}})
                .rfind("fxcpp::col2im_nhwc: columns of width 10 are not 3x3 blocks", 0),
            0u);
}

}  // namespace
