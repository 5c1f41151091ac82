// Bad input for fx::load and unsavable modules for fx::save: each one
// fx::Error line naming the file (or module) and the problem, never a crash,
// never a partial or clobbered file.
#include "serialize_test_util.h"

#include "../trace/trace_models.h"

#include <fx/import.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/trace.h>

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

namespace fx {
namespace {

using json = nlohmann::json;
using serialize_test::archive;
using serialize_test::document_of;
using serialize_test::error_of;
using serialize_test::record_extents;
using serialize_test::with_flipped_byte;

/// The document of a small saved graph (x + w, w a [2] float tensor).
json small_document() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  g->output(g->call_function("aten::add", {x, w}));
  auto root = std::make_shared<torch::nn::Module>();
  root->register_buffer("w", at::ones({2}));
  auto gm = std::make_shared<GraphModule>(root, g);
  return document_of(save_to_string(*gm));
}

/// Loads a file made of `doc` and a 8-byte storage record data/0.
std::string load_error(const json& doc, const std::string& storage = std::string(8, '\0')) {
  const std::string bytes = archive({{"extra/fxcpp.json", doc.dump()}, {"extra/fxdata/0", storage}});
  return error_of([&] { load_from_string(bytes, "bad.fx"); });
}

json& node(json& doc, size_t i) { return doc["root"]["graph"]["nodes"][i]; }

TEST(SerializeErrors, NotAZipTruncatedAndNotFxcpp) {
  EXPECT_EQ(error_of([] { load_from_string("hello, world", "hello.fx"); }),
            "hello.fx: not an fxcpp file (not a zip archive; expected a file written by fx::save)");
  trace_test::ComplexModel m;
  const std::string good = save_to_string(*symbolic_trace(m, {at::randn({2, 10})}));
  EXPECT_EQ(error_of([&] { load_from_string(good.substr(0, good.size() / 2), "half.fx"); }),
            "half.fx: truncated or damaged zip archive (no end of central directory record; the file is truncated)");
  EXPECT_EQ(error_of([] { load_from_string(archive({{"data.pkl", "x"}}), "other.zip"); }),
            "other.zip: not an fxcpp file (a zip archive without extra/fxcpp.json)");
  torch::jit::Module jit("__torch__.M");
  jit.define("def forward(self, x):\n  return x\n");
  std::ostringstream pt;
  jit.save(pt);
  EXPECT_EQ(error_of([&] { load_from_string(pt.str(), "model.pt"); }),
            "model.pt: not an fxcpp file (a zip archive without extra/fxcpp.json; it is a TorchScript file: import it, or "
            "`fxcpp convert` it)");
  EXPECT_EQ(error_of([] { load("/nonexistent/dir/m.fx"); }), "/nonexistent/dir/m.fx: no such file");
}

TEST(SerializeErrors, DocumentThatIsNotAnFxGraph) {
  EXPECT_EQ(error_of([] { load_from_string(archive({{"extra/fxcpp.json", "{\"format\": "}}), "j.fx"); }).substr(0, 42),
            "j.fx: extra/fxcpp.json is not valid JSON (");
  EXPECT_EQ(load_error(json{{"format", "onnx"}, {"version", 1}}), "bad.fx: not an fxcpp file (format 'onnx', expected 'fxcpp')");
  EXPECT_EQ(load_error(json{{"format", "fxcpp"}}), "bad.fx: extra/fxcpp.json: missing key 'version'");
  EXPECT_EQ(load_error(json{{"format", "fxcpp"}, {"version", "1"}}),
            "bad.fx: extra/fxcpp.json: version: an integer expected, got a string");
  json doc = small_document();
  doc["root"]["graph"]["nodes"] = 5;
  EXPECT_EQ(load_error(doc), "bad.fx: nodes: an array expected, got an integer");
  doc = small_document();
  node(doc, 2).erase("args");
  EXPECT_EQ(load_error(doc), "bad.fx: node 'add': missing key 'args'");
  doc = small_document();
  doc["root"].erase("kind");
  EXPECT_EQ(load_error(doc), "bad.fx: the root module: missing key 'kind'");
  std::string deep(1000, '[');
  EXPECT_EQ(error_of([&] { load_from_string(archive({{"extra/fxcpp.json", deep}}), "deep.fx"); }),
            "deep.fx: extra/fxcpp.json nests deeper than 256 levels");
}

TEST(SerializeErrors, FutureVersion) {
  json doc = small_document();
  doc["version"] = kFileFormatVersion + 1;
  EXPECT_EQ(load_error(doc), "bad.fx: format version 3 is newer than this build of fxcpp (2); use a newer fxcpp");
}

TEST(SerializeErrors, BadNodes) {
  json doc = small_document();
  node(doc, 2)["args"][1] = {{"node", "nope"}};
  EXPECT_EQ(load_error(doc), "bad.fx: node 'add': refers to unknown node 'nope'");
  doc = small_document();
  node(doc, 1)["op"] = "get_attr";
  node(doc, 0)["args"] = json::array({{{"node", "add"}}});
  EXPECT_EQ(load_error(doc), "bad.fx: node 'x': refers to node 'add', which is defined later (node 2; node 0 is this one)");
  doc = small_document();
  node(doc, 2)["op"] = "call_everything";
  EXPECT_EQ(load_error(doc), "bad.fx: node 'add': unknown opcode 'call_everything'");
  doc = small_document();
  node(doc, 2)["target"] = "aten::addd";
  EXPECT_EQ(load_error(doc),
            "bad.fx: node 'add': unknown call_function target 'aten::addd'; did you mean aten::add, aten::add_, "
            "aten::addr? (targets are dispatcher operators like aten::add, builtins like operator.getitem, or "
            "functions registered with fx::register_function)");
  doc = small_document();
  node(doc, 1)["target"] = "missing";
  EXPECT_EQ(load_error(doc),
            "bad.fx: the root module: Node %w : [#users=1] = get_attr[target=missing] referenced target missing but "
            "that target was not found in root (torch::nn::Module has no submodule, parameter or buffer 'missing')");
  doc = small_document();
  node(doc, 2)["name"] = "x";
  EXPECT_EQ(load_error(doc), "bad.fx: node 2: the name 'x' is used twice");
  doc = small_document();
  node(doc, 2)["args"][1] = {{"dtype", "float99"}};
  EXPECT_EQ(load_error(doc), "bad.fx: node 'add': unknown dtype 'float99'");
  doc = small_document();
  node(doc, 2)["args"][1] = {{"frobnicate", 1}};
  EXPECT_EQ(load_error(doc), "bad.fx: node 'add': unknown argument kind 'frobnicate'");
}

TEST(SerializeErrors, TensorRecordsThatDisagree) {
  json doc = small_document();
  doc["tensors"][0]["sizes"] = {100};
  doc["storages"][0]["nbytes"] = 16;
  EXPECT_EQ(load_error(doc, std::string(16, '\0')), "bad.fx: tensor 0 needs 400 bytes of storage but has 16");
  doc = small_document();
  EXPECT_EQ(load_error(doc, std::string(4, '\0')),
            "bad.fx: storage 0: record 'extra/fxdata/0' has 4 bytes but the document says 8");
  doc = small_document();
  doc["tensors"][0]["strides"] = {1, 1};
  EXPECT_EQ(load_error(doc), "bad.fx: tensor 0: 1 sizes but 2 strides");
  doc = small_document();
  doc["root"]["buffers"][0][1] = 7;
  EXPECT_EQ(load_error(doc), "bad.fx: the root module: buffers 'w': tensor 7 does not exist (the file has 1)");
  doc = small_document();
  doc["storages"][0]["record"] = "extra/fxdata/9";
  EXPECT_EQ(load_error(doc), "bad.fx: storage 0: record 'extra/fxdata/9' is missing");
}

// A weight changed on disk or in transfer: every record fx::load reads (the
// document, each tensor storage, a TorchScript leaf's storages) is checked
// against the zip directory's CRC-32 before a tensor is built; the saved
// model loads as it was only when no byte changed.
TEST(SerializeErrors, ChangedByteInATensorRecordIsRefused) {
  torch::manual_seed(0);
  trace_test::ComplexModel m;
  const std::string good = save_to_string(*symbolic_trace(m, {at::randn({2, 10})}));
  int storages = 0;
  for (const auto& [name, begin, end] : record_extents(good)) {
    if (name.rfind("extra/fxdata/", 0) != 0 && name != "extra/fxcpp.json") continue;
    if (name != "extra/fxcpp.json") ++storages;
    EXPECT_EQ(error_of([&] { load_from_string(with_flipped_byte(good, name), "flipped.fx"); }),
              "flipped.fx: damaged zip archive (record 'archive/" + name + "' does not match its CRC-32)");
  }
  EXPECT_GE(storages, 4);
  // From a file too, and the unchanged file still loads.
  const std::string path = ::testing::TempDir() + "/flipped_weight.fx";
  {
    std::ofstream(path, std::ios::binary) << with_flipped_byte(good, "extra/fxdata/0");
  }
  EXPECT_EQ(error_of([&] { load(path); }),
            path + ": damaged zip archive (record 'archive/extra/fxdata/0' does not match its CRC-32)");
  EXPECT_NO_THROW(load_from_string(good, "good.fx"));
  std::remove(path.c_str());
}

// Storages from 64 KiB (TensorSource::kDirectReadBytes) are read straight
// into a buffer of their own, its pages made present in one call rather than
// faulted in page by page (docs/ship.md, what a load costs), and checked
// against the zip directory's CRC-32 as every record is: from a file and
// from bytes in memory the values are the saved ones, one changed byte is the
// same one-line error, and a record of another size than the document says
// is the same error as for a small storage.
TEST(SerializeErrors, LargeTensorRecordsAreReadWholeAndChecked) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function("aten::add", {x, g->get_attr("w")}));
  auto root = std::make_shared<torch::nn::Module>();
  const at::Tensor w = at::arange(int64_t(1) << 20, at::kFloat);  // 4 MiB
  root->register_buffer("w", w);
  const std::string good = save_to_string(*std::make_shared<GraphModule>(root, g));
  const std::string path = ::testing::TempDir() + "/large_weight.fx";
  {
    std::ofstream(path, std::ios::binary) << good;
  }
  for (const auto& loaded : {load(path), load_from_string(good, "large.fx")}) {
    const at::Tensor back = loaded->named_buffers()["w"];
    EXPECT_TRUE(at::equal(back, w));
    // A mapping of its own (page-aligned), not c10's allocator (64-byte aligned).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(back.data_ptr()) % 4096, 0u);
    EXPECT_NE(back.storage().data_ptr().get_deleter(), c10::GetCPUAllocator()->raw_deleter());
    EXPECT_TRUE(at::equal(loaded->forward({at::ones({1})}).toTensor(), w + 1));
  }
  for (double where : {0.0, 0.5, 1.0}) {
    {
      std::ofstream(path, std::ios::binary) << with_flipped_byte(good, "extra/fxdata/0", where);
    }
    EXPECT_EQ(error_of([&] { load(path); }),
              path + ": damaged zip archive (record 'archive/extra/fxdata/0' does not match its CRC-32)");
    EXPECT_EQ(error_of([&] { load_from_string(with_flipped_byte(good, "extra/fxdata/0", where), "flipped.fx"); }),
              "flipped.fx: damaged zip archive (record 'archive/extra/fxdata/0' does not match its CRC-32)");
  }
  json doc = document_of(good);
  doc["storages"][0]["nbytes"] = (int64_t(4) << 20) + 4;
  EXPECT_EQ(error_of([&] { load_from_string(serialize_test::with_document(good, doc.dump()), "sizes.fx"); }),
            "sizes.fx: storage 0: record 'extra/fxdata/0' has 4194304 bytes but the document says 4194308");
  std::remove(path.c_str());
}

TEST(SerializeErrors, ChangedByteInATorchScriptLeafsStorageIsRefused) {
  auto gm = import_torchscript(serialize_test::scripted_model_with_leaf());
  const std::string good = save_to_string(*gm);
  std::string leaf_record;
  for (const auto& [name, begin, end] : record_extents(good))
    if (name.rfind("data/", 0) == 0 && end - begin == 12) leaf_record = name;  // the leaf's [3] float parameter
  ASSERT_FALSE(leaf_record.empty());
  const std::string path = ::testing::TempDir() + "/flipped_leaf.fx";
  {
    std::ofstream(path, std::ios::binary) << with_flipped_byte(good, leaf_record);
  }
  EXPECT_EQ(error_of([&] { load(path); }),
            path + ": damaged zip archive (record 'archive/" + leaf_record + "' does not match its CRC-32)");
  EXPECT_EQ(error_of([&] { load_from_string(with_flipped_byte(good, leaf_record), "leaf.fx"); }),
            "leaf.fx: damaged zip archive (record 'archive/" + leaf_record + "' does not match its CRC-32)");
  std::remove(path.c_str());
}

/// A saved optimised module: conv(3->8, 3x3) + relu, then linear(8->4) (fx::optimize_for_inference).
std::string saved_optimized_module() {
  torch::manual_seed(0);
  auto net = std::make_shared<torch::nn::Sequential>(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)), torch::nn::ReLU(),
      torch::nn::AdaptiveAvgPool2d(1), torch::nn::Flatten(), torch::nn::Linear(8, 4));
  (*net)->eval();
  auto gm = symbolic_trace(net->ptr(), {at::randn({1, 3, 8, 8})});
  OptimizeOptions options;
  options.example_inputs = {at::randn({1, 3, 8, 8})};
  return save_to_string(*optimize_for_inference(gm, options));
}

/// Every "packed" constant of the document's nodes, in order.
std::vector<json*> packed_constants(json& doc) {
  std::vector<json*> out;
  for (json& n : doc["root"]["graph"]["nodes"])
    for (json& a : n["args"])
      if (a.is_object() && a.contains("constant") && a["constant"].is_object() && a["constant"].contains("packed"))
        out.push_back(&a["constant"]["packed"]);
  return out;
}

// A damaged or hand-edited packed operator of an optimised file: one error
// naming the file, the node and what is wrong, before any kernel is made.
TEST(SerializeErrors, BadPackedOperators) {
  const std::string good = saved_optimized_module();
  const json doc = serialize_test::document_of(good);
  json copy = doc;
  const json other_bias = (*packed_constants(copy).at(1))["bias"];
  auto error_with = [&](const std::function<void(json&)>& edit) {
    json d = doc;
    auto packed = packed_constants(d);
    EXPECT_EQ(packed.size(), 2u);
    edit(*packed.at(0));
    return error_of([&] { load_from_string(serialize_test::with_document(good, d.dump()), "opt.fx"); });
  };
  EXPECT_NO_THROW(load_from_string(good, "opt.fx"));
  EXPECT_EQ(error_with([](json& p) { p["tile"] = 8; }),
            "opt.fx: node 'onednn_conv2d': packed operator: unknown attribute 'tile' of conv2d");
  EXPECT_EQ(error_with([](json& p) { p["op"] = "conv3d"; }),
            "opt.fx: node 'onednn_conv2d': packed operator: unknown op 'conv3d' (expected conv2d, linear, qconv2d or qlinear)");
  EXPECT_EQ(error_with([](json& p) { p["activation"] = "swish"; }),
            "opt.fx: node 'onednn_conv2d': packed operator: unknown activation 'swish'");
  EXPECT_EQ(error_with([](json& p) { p["groups"] = 3; }),
            "opt.fx: node 'onednn_conv2d': packed operator: onednn_conv2d: groups must be >= 1 and divide the 8 "
            "output channels, got 3");
  EXPECT_EQ(error_with([](json& p) { p["stride"] = {1}; }),
            "opt.fx: node 'onednn_conv2d': packed operator: stride must have 2 integers, got 1");
  EXPECT_EQ(error_with([](json& p) { p["dtype"] = "int8"; }),
            "opt.fx: node 'onednn_conv2d': packed operator: onednn_conv2d: dtype must be float32 or bfloat16, "
            "not Char");
  EXPECT_EQ(error_with([](json& p) { p.erase("sum"); }), "opt.fx: node 'onednn_conv2d': packed operator: missing key 'sum'");
  // The bias of another operator (4 elements for 8 output channels).
  EXPECT_EQ(error_with([&](json& p) { p["bias"] = other_bias; }),
            "opt.fx: node 'onednn_conv2d': packed operator: onednn_conv2d: the bias must have 8 elements");
}

struct Unknown : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x; }
};

TEST(SerializeErrors, UnsavableAndUnregisteredModules) {
  register_module_type<Unknown>();
  auto g = std::make_shared<Graph>();
  g->output(g->call_module("inner.odd", {g->placeholder("x")}));
  auto root = std::make_shared<torch::nn::Module>();
  auto inner = std::make_shared<torch::nn::Module>();
  inner->register_module("odd", std::make_shared<Unknown>());
  root->register_module("inner", inner);
  auto gm = std::make_shared<GraphModule>(root, g);
  const std::string msg = "module 'inner.odd' of type fx::(anonymous namespace)::Unknown cannot be saved: register "
                          "its type with fx::register_serializable_module";
  EXPECT_EQ(error_of([&] { save_to_string(*gm); }), msg);
  // A failed save leaves an existing file alone and no temporary behind.
  const std::string path = ::testing::TempDir() + "fxcpp_keep.fx";
  { std::ofstream(path) << "precious"; }
  EXPECT_EQ(error_of([&] { save(*gm, path); }), msg);
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "precious");
  std::remove(path.c_str());
  EXPECT_EQ(error_of([&] { save(*gm, "/nonexistent/dir/out.fx"); }), msg);

  // A registered type not registered in the loading program.
  register_serializable_module<Unknown>(
      "test.Unknown", [](const Unknown&) { return json::object(); },
      [](const json&) { return std::make_shared<Unknown>(); });
  const std::string bytes = save_to_string(*gm);
  EXPECT_NE(load_from_string(bytes), nullptr);
  json doc = document_of(bytes);
  ASSERT_EQ(doc["root"]["children"][0][1]["children"][0][1]["type"], "test.Unknown");
  doc["root"]["children"][0][1]["children"][0][1]["type"] = "test.Gone";
  EXPECT_EQ(load_error(doc),
            "bad.fx: module 'inner.odd': module type 'test.Gone' is not registered "
            "(fx::register_serializable_module) in this program");
  // Nothing saveable to an unwritable place: no file, one line.
  trace_test::ComplexModel m;
  auto ok = symbolic_trace(m, {at::randn({2, 10})});
  EXPECT_EQ(error_of([&] { save(*ok, "/nonexistent/dir/out.fx"); }),
            "/nonexistent/dir/out.fx: cannot be opened for writing (No such file or directory)");
}

}  // namespace
}  // namespace fx
