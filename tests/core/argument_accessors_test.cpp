// Argument::to_int_list and tensor_meta_of: the IR's accessors the lowering,
// leaf-module and training passes read int lists and tensor metadata with.
#include <fx/argument.h>
#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace {

using fx::Argument;
using Ints = std::vector<int64_t>;

TEST(ArgumentToIntList, ListsAndTuplesOfIntsAsTheyAre) {
  EXPECT_EQ(Argument::list({1, 2}).to_int_list(), Ints({1, 2}));
  EXPECT_EQ(Argument::tuple({3, 4, 5}).to_int_list(), Ints({3, 4, 5}));
  EXPECT_EQ(Argument::list({}).to_int_list(), Ints());
  // Whatever expand_to: only a single int and a one-item list are expanded.
  EXPECT_EQ(Argument::list({1, 2}).to_int_list(2), Ints({1, 2}));
  EXPECT_EQ(Argument::list({1, 2, 3}).to_int_list(2), Ints({1, 2, 3}));
  EXPECT_EQ(Argument::list({}).to_int_list(2), Ints());
}

TEST(ArgumentToIntList, SingleIntAndOneItemListExpandToTheRank) {
  EXPECT_EQ(Argument(2).to_int_list(), Ints({2}));
  EXPECT_EQ(Argument(2).to_int_list(2), Ints({2, 2}));   // stride=2 of a conv2d
  EXPECT_EQ(Argument(int64_t{7}).to_int_list(3), Ints({7, 7, 7}));
  EXPECT_EQ(Argument::list({2}).to_int_list(), Ints({2}));
  EXPECT_EQ(Argument::list({2}).to_int_list(2), Ints({2, 2}));  // stride=[2]
  EXPECT_EQ(Argument::tuple({0}).to_int_list(2), Ints({0, 0}));
}

TEST(ArgumentToIntList, AnythingElseIsNullopt) {
  fx::Graph g;
  fx::Node* x = g.placeholder("x");
  EXPECT_EQ(Argument().to_int_list(), std::nullopt);
  EXPECT_EQ(Argument(x).to_int_list(2), std::nullopt);
  EXPECT_EQ(Argument(2.0).to_int_list(2), std::nullopt);
  EXPECT_EQ(Argument(true).to_int_list(), std::nullopt);
  EXPECT_EQ(Argument("same").to_int_list(2), std::nullopt);
  EXPECT_EQ(Argument::list({1, x}).to_int_list(), std::nullopt);  // a size node among the ints
  EXPECT_EQ(Argument::list({1, 2.5}).to_int_list(), std::nullopt);
  EXPECT_EQ(Argument::list({Argument::list({1})}).to_int_list(2), std::nullopt);
  EXPECT_EQ(Argument::dict({{"k", 1}}).to_int_list(), std::nullopt);
}

TEST(TensorMetaOf, TheNodesTensorMetadataOrNullptr) {
  fx::Graph g;
  fx::Node* x = g.placeholder("x");
  fx::Node* y = g.placeholder("y");
  fx::Node* z = g.placeholder("z");
  EXPECT_EQ(fx::tensor_meta_of(x), nullptr);
  const fx::TensorMetadata m = fx::TensorMetadata::from_tensor(at::zeros({2, 3}));
  x->meta()["tensor_meta"] = m;
  const fx::TensorMetadata* got = fx::tensor_meta_of(x);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, m);
  EXPECT_EQ(got->shape, Ints({2, 3}));
  // A tuple value's list of metadata, or anything else under the key: nullptr.
  y->meta()["tensor_meta"] = std::vector<fx::TensorMetadata>{m, m};
  EXPECT_EQ(fx::tensor_meta_of(y), nullptr);
  z->meta()["tensor_meta"] = 1;
  EXPECT_EQ(fx::tensor_meta_of(z), nullptr);
}

}  // namespace
