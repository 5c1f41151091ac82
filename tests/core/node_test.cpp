// Node: use lists, argument edits, replace_all_uses_with, moving nodes.
#include <fx/error.h>
#include <fx/graph.h>

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;

std::vector<std::string> names(const std::vector<Node*>& nodes) {
  std::vector<std::string> out;
  for (Node* n : nodes) out.push_back(n->name());
  return out;
}
std::vector<std::string> user_names(const Node* n) { return names(n->users().to_vector()); }
std::vector<std::string> node_names(const Graph& g) { return names(g.nodes().to_vector()); }

TEST(Node, UsersAreInsertionOrderedAndDistinct) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::add", {x, x});
  Node* m = g.call_function("aten::mul", {x, a}, {{"other2", x}});
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"add", "mul"}));
  EXPECT_EQ(x->users().size(), 2u);
  EXPECT_TRUE(x->users().contains(m));
  EXPECT_FALSE(a->users().contains(x));
  EXPECT_EQ(names(m->all_input_nodes()), (std::vector<std::string>{"x", "add"}));
  EXPECT_EQ(names(a->all_input_nodes()), (std::vector<std::string>{"x"}));
}

TEST(Node, EditsKeepUseListsRight) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function("aten::add", {x, x});
  a->update_arg(1, y);
  EXPECT_EQ(user_names(y), (std::vector<std::string>{"add"}));
  a->update_arg(0, y);
  EXPECT_TRUE(x->users().empty());
  a->update_kwarg("alpha", 2);
  EXPECT_EQ(fx::format_kwargs(a->kwargs()), "{alpha: 2}");
  a->update_kwarg("alpha", 3);
  EXPECT_EQ(fx::format_kwargs(a->kwargs()), "{alpha: 3}");
  a->insert_arg(0, x);
  EXPECT_EQ(fx::format_args(a->args()), "(%x, %y, %y)");
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"add"}));
  a->set_kwargs({{"other", Argument::list({x, y})}});
  a->set_args({});
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"add"}));
  EXPECT_EQ(user_names(y), (std::vector<std::string>{"add"}));
  a->replace_input_with(x, y);
  EXPECT_TRUE(x->users().empty());
  EXPECT_EQ(fx::format_kwargs(a->kwargs()), "{other: [%y, %y]}");
  EXPECT_THROW(a->update_arg(5, x), fx::Error);
  EXPECT_THROW(a->insert_arg(2, x), fx::Error);
  g.output(a);
  g.lint();
}

TEST(Node, EditsBumpTheGraphVersion) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::relu", {x});
  uint64_t v = g.version();
  a->update_kwarg("inplace", true);
  EXPECT_GT(g.version(), v);
  v = g.version();
  x->append(a);  // already there: still an edit request, the order is unchanged
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "relu"}));
}

TEST(Node, ReplaceAllUsesWithReroutesUsersButNeverTheReplacementItself) {
  // Seed 001: insert mul(add, 2) after add and reroute add's users.
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("aten::add", {x, x});
  Node* out = g.output(add);
  Node* mul;
  {
    auto guard = g.inserting_after(add);
    mul = g.call_function("aten::mul", {add, 2});
  }
  std::vector<Node*> changed = add->replace_all_uses_with(mul);
  EXPECT_EQ(names(changed), (std::vector<std::string>{"output"}));
  EXPECT_EQ(out->args()[0].to_node(), mul);
  EXPECT_EQ(mul->args()[0].to_node(), add);  // no self-reference
  EXPECT_EQ(user_names(add), (std::vector<std::string>{"mul"}));
  g.lint();
  EXPECT_THROW(add->replace_all_uses_with(add), fx::Error);
}

TEST(Node, ReplaceAllUsesWithCallbackAndMeta) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function("aten::neg", {x});
  Node* b = g.call_function("aten::relu", {x});
  a->meta()["tag"] = std::string("from x");
  auto changed = x->replace_all_uses_with(y, [&](Node* user) { return user != b; });
  EXPECT_EQ(names(changed), (std::vector<std::string>{"neg"}));
  EXPECT_EQ(user_names(x), (std::vector<std::string>{"relu"}));
  x->meta()["k"] = 1;
  y->meta()["k"] = 2;
  EXPECT_THROW(x->replace_all_uses_with(y, nullptr, true), fx::Error);
  Node* z = g.placeholder("z");
  x->replace_all_uses_with(z, nullptr, true);
  EXPECT_EQ(std::any_cast<int>(z->meta().at("k")), 1);
}

TEST(Node, AppendAndPrependMoveNodes) {
  // Seed 001 says Node.append does not exist; torch.fx has it.
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::relu", {x});
  Node* b = g.call_function("aten::neg", {x});
  Node* c = g.call_function("aten::sin", {x});
  x->append(c);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "sin", "relu", "neg"}));
  b->prepend(c);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "relu", "sin", "neg"}));
  a->prepend(a);
  EXPECT_EQ(a->prev(), x);
  EXPECT_EQ(a->next(), c);
  EXPECT_EQ(x->prev(), nullptr);
  EXPECT_EQ(b->next(), nullptr);
  Graph other;
  Node* o = other.placeholder("o");
  EXPECT_THROW(x->append(o), fx::Error);
}

TEST(Node, KwargsAreReadOnlyViews) {
  // Seed 000: node.kwargs['k'] = v must not compile; the API returns const views.
  static_assert(std::is_const_v<std::remove_reference_t<decltype(std::declval<Node&>().kwargs())>>);
  static_assert(std::is_const_v<std::remove_reference_t<decltype(std::declval<Node&>().args())>>);
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function("aten::relu", {x});
  r->update_kwarg("inplace", true);
  EXPECT_EQ(r->format_node(), "%relu : [#users=0] = call_function[target=aten::relu](args = (%x,), kwargs = {inplace: True})");
}

TEST(Node, ArgumentsFromAnotherGraphOrErasedNodesAreRefused) {
  Graph g, other;
  Node* x = g.placeholder("x");
  Node* foreign = other.placeholder("f");
  Node* a = g.call_function("aten::neg", {x});
  const std::string before = g.str();
  EXPECT_THROW(g.call_function("aten::add", {x, foreign}), fx::Error);
  EXPECT_THROW(a->update_arg(0, foreign), fx::Error);
  EXPECT_EQ(g.str(), before);  // nothing half-done
  Node* dead = g.call_function("aten::sin", {x});
  g.erase_node(dead);
  EXPECT_TRUE(dead->is_erased());
  try {
    a->update_arg(0, dead);
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "Node sin was erased from the graph and cannot be used");
  }
  EXPECT_EQ(g.str(), before);
}

TEST(Node, IsImpure) {
  Graph g;
  Node* x = g.placeholder("x");
  EXPECT_TRUE(x->is_impure());
  EXPECT_FALSE(g.call_function("aten::add", {x, x})->is_impure());
  EXPECT_TRUE(g.call_function("aten::add_", {x, x})->is_impure());
  EXPECT_TRUE(g.call_function("aten::copy_", {x, x})->is_impure());
  EXPECT_FALSE(g.call_function("aten::add.Tensor", {x, x})->is_impure());
  EXPECT_TRUE(g.call_function("aten::add.out", {x, x})->is_impure());
  // div has an out variant called out_mode: still pure without an overload.
  EXPECT_FALSE(g.call_function("aten::div", {x, x})->is_impure());
  // x += y writes x (torch.fx counts it as pure).
  EXPECT_TRUE(g.call_function("operator.iadd", {x, x})->is_impure());
  EXPECT_FALSE(g.call_function("operator.add", {x, x})->is_impure());
  // In-place methods write their self argument.
  EXPECT_TRUE(g.call_method("add_", {x, 1})->is_impure());
  EXPECT_FALSE(g.call_method("add", {x, 1})->is_impure());
  EXPECT_FALSE(g.call_method("size", {x})->is_impure());
  EXPECT_TRUE(g.call_module("fc", {x})->is_impure());
  EXPECT_FALSE(g.get_attr("w")->is_impure());
  EXPECT_TRUE(g.output(x)->is_impure());
}

}  // namespace
