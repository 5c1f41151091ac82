// Printing: str(graph), format_node, print_tabular and python_code, against
// the text Python torch.fx 1.13 prints for the same graph.
#include <fx/graph.h>

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;

/// Built the same way in Python torch.fx 1.13, this graph prints the texts
/// below (aten targets aside, which Python names torch.ops.aten.add): every opcode,
/// a default value, a kwarg, a builtin, a nested output.
struct Mixed {
  Graph g;
  Node *x, *in, *add, *item, *view, *add1, *weight, *conv, *shape;
  Mixed() {
    x = g.placeholder("x");
    in = g.placeholder("input", Argument(3));
    add = g.call_function("aten::add", {x, in}, {{"alpha", 2}});
    item = g.call_function("operator.getitem", {add, 0});
    view = g.call_method("view", {item, -1, "a"});
    add1 = g.call_function("operator.add", {view, 2.5});
    weight = g.get_attr("layer1.0.weight");
    conv = g.call_module("layer1.0.conv1", {add1, weight});
    shape = g.call_function("getattr", {conv, "shape"});
    g.output(Argument::tuple({conv, shape, Argument::list({add})}));
  }
};

TEST(GraphPrinting, StrMatchesTorchFx) {
  Mixed m;
  EXPECT_EQ(m.g.str(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %input_1 : [#users=1] = placeholder[target=input](default=3)\n"
            "    %add : [#users=2] = call_function[target=aten::add](args = (%x, %input_1), kwargs = {alpha: 2})\n"
            "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%add, 0), kwargs = {})\n"
            "    %view : [#users=1] = call_method[target=view](args = (%getitem, -1, a), kwargs = {})\n"
            "    %add_1 : [#users=1] = call_function[target=operator.add](args = (%view, 2.5), kwargs = {})\n"
            "    %layer1_0_weight : [#users=1] = get_attr[target=layer1.0.weight]\n"
            "    %layer1_0_conv1 : [#users=2] = call_module[target=layer1.0.conv1](args = (%add_1, "
            "%layer1_0_weight), kwargs = {})\n"
            "    %getattr_1 : [#users=1] = call_function[target=getattr](args = (%layer1_0_conv1, shape), kwargs = "
            "{})\n"
            "    return (layer1_0_conv1, getattr_1, [add])");
}

TEST(GraphPrinting, TabularMatchesTorchFx) {
  Mixed m;
  EXPECT_EQ(m.g.tabular(),
            "opcode         name             target            args                                   kwargs\n"
            "-------------  ---------------  ----------------  -------------------------------------  ------------\n"
            "placeholder    x                x                 ()                                     {}\n"
            "placeholder    input_1          input             (3,)                                   {}\n"
            "call_function  add              aten::add         (x, input_1)                           {'alpha': 2}\n"
            "call_function  getitem          operator.getitem  (add, 0)                               {}\n"
            "call_method    view             view              (getitem, -1, 'a')                     {}\n"
            "call_function  add_1            operator.add      (view, 2.5)                            {}\n"
            "get_attr       layer1_0_weight  layer1.0.weight   ()                                     {}\n"
            "call_module    layer1_0_conv1   layer1.0.conv1    (add_1, layer1_0_weight)               {}\n"
            "call_function  getattr_1        getattr           (layer1_0_conv1, 'shape')              {}\n"
            "output         output           output            ((layer1_0_conv1, getattr_1, [add]),)  {}\n");
}

TEST(GraphPrinting, PythonCodeMatchesTorchFx) {
  Mixed m;
  EXPECT_EQ(m.g.python_code("self").src,
            "\n\n\ndef forward(self, x, input = 3):\n"
            "    input_1 = input\n"
            "    add = torch.ops.aten.add(x, input_1, alpha = 2);  x = input_1 = None\n"
            "    getitem = add[0]\n"
            "    view = getitem.view(-1, 'a');  getitem = None\n"
            "    add_1 = view + 2.5;  view = None\n"
            "    layer1_0_weight = getattr(self.layer1, \"0\").weight\n"
            "    layer1_0_conv1 = getattr(self.layer1, \"0\").conv1(add_1, layer1_0_weight);  add_1 = "
            "layer1_0_weight = None\n"
            "    getattr_1 = layer1_0_conv1.shape\n"
            "    return (layer1_0_conv1, getattr_1, [add])\n"
            "    ");
}

TEST(GraphPrinting, IssueExampleLine) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function("aten::add", {x, y});
  g.output(add);
  EXPECT_EQ(add->format_node(), "%add : [#users=1] = call_function[target=aten::add](args = (%x, %y), kwargs = {})");
  EXPECT_NE(g.python_code().src.find("    add = torch.ops.aten.add(x, y);  x = y = None\n    return add\n"),
            std::string::npos);
}

TEST(GraphPrinting, OverloadAndInplaceAndEmptyGraph) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::add.Tensor", {x, x});
  Node* i = g.call_function("operator.iadd", {a, 1});
  g.output(i);
  EXPECT_EQ(g.python_code().src,
            "\n\n\ndef forward(self, x):\n"
            "    add = torch.ops.aten.add.Tensor(x, x);  x = None\n"
            "    add += 1;  iadd = add;  add = None\n"
            "    return iadd\n"
            "    ");
  Graph empty;
  EXPECT_EQ(empty.python_code().src, "\n\n\ndef forward(self):\n    pass\n    ");
}

TEST(ArgumentPrinting, PythonReprAndStr) {
  EXPECT_EQ(fx::python_float_repr(2.0), "2.0");
  EXPECT_EQ(fx::python_float_repr(0.1), "0.1");
  EXPECT_EQ(fx::python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(fx::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(fx::python_float_repr(123456.5), "123456.5");
  EXPECT_EQ(fx::python_float_repr(-0.00012), "-0.00012");
  EXPECT_EQ(fx::python_float_repr(1.0 / 0.0), "inf");
  EXPECT_EQ(Argument(c10::kFloat).repr(), "torch.float32");
  EXPECT_EQ(Argument(c10::Device("cpu")).repr(), "device(type='cpu')");
  EXPECT_EQ(Argument(c10::Device("cpu")).str(), "cpu");
  EXPECT_EQ(Argument("it's").repr(), "\"it's\"");
  EXPECT_EQ(Argument::tuple({1}).repr(), "(1,)");
  EXPECT_EQ(Argument::dict({{"k", true}, {"n", nullptr}}).repr(), "{'k': True, 'n': None}");
  EXPECT_EQ(fx::format_arg(Argument::dict({{"k", "v"}})), "{k: v}");
  EXPECT_EQ(Argument(c10::MemoryFormat::ChannelsLast).repr(), "torch.channels_last");
}

}  // namespace
