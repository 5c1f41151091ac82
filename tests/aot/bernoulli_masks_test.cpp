// fxcpp::bernoulli_ and bernoulli_as_fxcpp: dropout's masks drawn in bulk
// are ATen's masks to the bit, and leave the generator where ATen leaves it.
#include <fx/aot.h>
#include <fx/graph.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

at::Tensor& fxcpp_bernoulli(at::Tensor& self, double p) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::bernoulli_", "").typed<at::Tensor&(at::Tensor&, double)>();
  return op.call(self, p);
}

/// Draws `before` uniform numbers (so the engine is mid-state), then a mask
/// of `like`'s shape and layout with `draw_mask`, then 5 more numbers.
std::pair<at::Tensor, at::Tensor> masks_from_seed(uint64_t seed, int64_t before, const at::Tensor& like, double p,
                                                  bool fxcpp) {
  torch::manual_seed(seed);
  if (before > 0) torch::rand({before});
  at::Tensor mask = at::empty_like(like);
  if (fxcpp)
    fxcpp_bernoulli(mask, p);
  else
    mask.bernoulli_(p);
  return {mask, torch::rand({5})};
}

void expect_as_aten(const at::Tensor& like, double p, uint64_t seed, int64_t before) {
  auto [want, want_after] = masks_from_seed(seed, before, like, p, false);
  auto [got, got_after] = masks_from_seed(seed, before, like, p, true);
  const std::string what = "numel " + std::to_string(like.numel()) + " " + std::string(c10::toString(like.scalar_type())) +
                           " p " + std::to_string(p) + " after " + std::to_string(before);
  ASSERT_EQ(got.strides(), want.strides()) << what;
  EXPECT_TRUE(torch::equal(got, want)) << what;
  EXPECT_TRUE(torch::equal(got_after, want_after)) << what << ": the generator is left elsewhere";
}

TEST(FxcppBernoulli, SameMasksAndGeneratorStateAsAten) {
  // Sizes around the engine's 624-word turnover (2 words per element).
  for (int64_t n : {1, 5, 311, 312, 313, 623, 624, 625, 1249, 2049, 70001})
    for (int64_t before : {0, 1, 300, 623})
      expect_as_aten(torch::empty({n}), 0.9, 7 + static_cast<uint64_t>(n), before);
  for (double p : {0.0, 0.1, 0.5, 1.0}) expect_as_aten(torch::empty({3000}), p, 11, 17);
  for (auto dtype : {torch::kDouble, torch::kBool, torch::kBFloat16, torch::kUInt8})
    expect_as_aten(torch::empty({4097}, dtype), 0.75, 3, 5);
}

TEST(FxcppBernoulli, ChannelsLastAndStridedViewsAsAten) {
  expect_as_aten(torch::empty({2, 3, 5, 7}).contiguous(c10::MemoryFormat::ChannelsLast), 0.9, 1, 3);
  expect_as_aten(torch::empty({40, 30}).t(), 0.9, 2, 0);  // dense, transposed: memory order
  // Not dense: ATen's kernel draws for it.
  at::Tensor base = torch::zeros({10, 20});
  torch::manual_seed(5);
  at::Tensor a = base.clone();
  at::Tensor av = a.slice(1, 0, 20, 2);
  av.bernoulli_(0.3);
  torch::manual_seed(5);
  at::Tensor b = base.clone();
  at::Tensor bv = b.slice(1, 0, 20, 2);
  fxcpp_bernoulli(bv, 0.3);
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(FxcppBernoulli, ProbabilityOutsideTheUnitIntervalIsAtensError) {
  at::Tensor t = torch::empty({4});
  auto message = [&](bool fxcpp) {
    try {
      if (fxcpp)
        fxcpp_bernoulli(t, 1.5);
      else
        t.bernoulli_(1.5);
    } catch (const c10::Error& e) {
      return e.msg();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(true), message(false));
  EXPECT_NE(message(true).find("bernoulli_ expects p to be in [0, 1], but got p=1.5"), std::string::npos);
}

TEST(FxcppBernoulli, PassReplacesDefaultGeneratorDraws) {
  fx::Graph g;
  fx::Node* x = g.placeholder("x");
  fx::Node* like = g.call_function("aten::empty_like", {fx::Argument(x)});
  fx::Node* draw = g.call_function("aten::bernoulli_.float", {fx::Argument(like), fx::Argument(0.9)});
  fx::Node* with_none = g.call_function("aten::bernoulli_.float", {fx::Argument(like), fx::Argument(0.5)},
                                        {{"generator", fx::Argument()}});
  fx::Node* tensor_p = g.call_function("aten::bernoulli_.Tensor", {fx::Argument(like), fx::Argument(x)});
  g.output(fx::Argument::list({fx::Argument(draw), fx::Argument(with_none), fx::Argument(tensor_p)}));
  EXPECT_EQ(fx::bernoulli_as_fxcpp(g), 2u);
  size_t fast = 0, aten = 0;
  for (fx::Node* n : g.nodes()) {
    fast += n->target() == "fxcpp::bernoulli_";
    aten += n->target().rfind("aten::bernoulli_", 0) == 0;
  }
  EXPECT_EQ(fast, 2u);
  EXPECT_EQ(aten, 1u);  // p a tensor: left to ATen
  g.lint();
}

}  // namespace
