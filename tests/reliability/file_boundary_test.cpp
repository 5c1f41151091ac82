// The file boundary (issue #12, items 4-8): inconsistent tensors, damaged zip
// archives and files that are not regular files give one fx::ImportError
// line naming the file (and the tensor); nothing reaches a kernel or hangs.
// torch.load / torch::pickle_load accept the inconsistent tensors below and
// the kernels then read past their storage: fxcpp is stricter on purpose.
#include "corrupt_files.h"

#include <fx/import.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using fx::testing::corrupt_path;

template <typename F>
std::string import_error_of(F&& f) {
  try {
    f();
  } catch (const fx::ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no fx::ImportError";
  return "";
}

std::string load_error(const std::string& path) {
  return import_error_of([&] { fx::load_value(path); });
}

std::string model_error(const std::string& path) {
  return import_error_of([&] { fx::import_torchscript(path); });
}

TEST(FileBoundary, GoodFileLoads) {
  auto v = fx::load_inputs(corrupt_path("good.input.pt"));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(at::equal(v[0].toTensor(), at::ones({2, 3})));
  EXPECT_TRUE(at::equal(v[1].toTensor(), at::arange(4.0)));
}

// libtorch's own loader accepts the file; the tensor claims 400 bytes on 16.
TEST(FileBoundary, PickleLoadAcceptsShortStorageFxDoesNot) {
  std::ifstream in(corrupt_path("short_storage.pt"), std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor t = torch::jit::pickle_load(data).toTupleRef().elements()[0].toTensor();
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(t.storage().nbytes(), 16u);
  const std::string p = corrupt_path("short_storage.pt");
  EXPECT_EQ(load_error(p), p + ": tensor 0 needs 400 bytes of storage but has 16");
}

TEST(FileBoundary, InconsistentTensors) {
  auto p = corrupt_path;
  EXPECT_EQ(load_error(p("empty_storage.pt")),
            p("empty_storage.pt") + ": the tensor needs 12 bytes of storage but has 0");
  EXPECT_EQ(load_error(p("offset_past_end.pt")),
            p("offset_past_end.pt") + ": tensor 0 needs 20 bytes of storage but has 16");
  // libtorch's unpickler checks the element count itself (its text, one line).
  EXPECT_EQ(load_error(p("negative_size.pt")),
            p("negative_size.pt") + ": cannot read a torch.save file: numel: integer multiplication overflow");
  EXPECT_EQ(load_error(p("huge_size.pt")),
            p("huge_size.pt") + ": cannot read a torch.save file: numel: integer multiplication overflow");
  EXPECT_EQ(load_error(p("huge_numel.pt")),
            p("huge_numel.pt") + ": tensor 0 needs 17179869184 bytes of storage but has 16");
  EXPECT_EQ(load_error(p("rank70.pt")), p("rank70.pt") + ": tensor 0 has 70 dimensions (at most 64)");
  EXPECT_EQ(load_error(p("nested.pt")), p("nested.pt") + ": tensor 1.1 needs 12 bytes of storage but has 8");
}

TEST(FileBoundary, ValidateTensorDirectly) {
  at::Tensor ok = at::ones({2, 3}).t();  // non-contiguous views of a whole storage are fine
  EXPECT_NO_THROW(fx::validate_tensor(ok, "x"));
  EXPECT_NO_THROW(fx::validate_tensor(at::ones({4}).narrow(0, 3, 1), "x"));
  EXPECT_NO_THROW(fx::validate_tensor(at::Tensor(), "x"));
  EXPECT_NO_THROW(fx::validate_tensor(at::empty({0, 5}), "x"));
  at::Tensor expanded = at::ones({1}).expand({1000});  // stride 0 needs one element
  EXPECT_NO_THROW(fx::validate_tensor(expanded, "x"));
  at::Tensor bad = at::ones({4});
  const std::vector<int64_t> sizes{3, 3}, strides{3, 1};
  bad.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  EXPECT_EQ(import_error_of([&] { fx::validate_tensor(bad, "t"); }), "t needs 36 bytes of storage but has 16");
  at::Tensor sparse = at::ones({2, 2}).to_sparse();
  EXPECT_EQ(import_error_of([&] { fx::validate_tensor(sparse, "s"); }),
            "s has layout Sparse; only dense (strided) tensors can be used");
}

TEST(FileBoundary, DamagedZipArchives) {
  auto p = corrupt_path;
  EXPECT_EQ(
      load_error(p("truncated.input.pt")),
      p("truncated.input.pt") + ": damaged zip archive (no end of central directory record; the file is truncated)");
  const std::string past = load_error(p("record_past_end.pt"));
  EXPECT_NE(
      past.find(p("record_past_end.pt") + ": damaged zip archive (record 'good.input/data/0' (2147483647 bytes at "),
      std::string::npos)
      << past;
  EXPECT_NE(past.find(") runs past the end of the data; the file is truncated or damaged)"), std::string::npos) << past;
  EXPECT_EQ(load_error(p("no_pickle.zip")),
            p("no_pickle.zip") + ": not a torch.save file (no data.pkl record in the zip archive)");
}

// A version record libtorch's PyTorchStreamReader refuses from its
// constructor, leaking its zip reader each time (LeakSanitizer, fuzz.load_value
// under make check-sanitize): refused first.
TEST(FileBoundary, ArchiveVersion) {
  auto p = corrupt_path;
  for (const char* name : {"bad_version.pt", "version_garbage.pt"})
    EXPECT_EQ(load_error(p(name)), p(name) + ": unsupported PyTorch archive (record 'good.input/version' is not a "
                                             "format version from 1 to 10)");
}

// Pickles libtorch's Unpickler would run with an empty stack or an unset memo
// slot (undefined behaviour there): refused by the walker first.
TEST(FileBoundary, MalformedPickles) {
  auto p = corrupt_path;
  EXPECT_EQ(load_error(p("pickle_underflow.pt")),
            p("pickle_underflow.pt") + ": damaged pickle in record 'good.input/data.pkl' at byte 2 (stack underflow)");
  EXPECT_EQ(load_error(p("pickle_bad_get.pt")),
            p("pickle_bad_get.pt") +
                ": damaged pickle in record 'good.input/data.pkl' at byte 2 (GET of memo slot 5 that was never PUT)");
  EXPECT_EQ(load_error(p("pickle_opcode.pt")),
            p("pickle_opcode.pt") +
                ": damaged pickle in record 'good.input/data.pkl' at byte 2 (opcode 0x49 is not one torch writes)");
}

TEST(FileBoundary, NotRegularFiles) {
  const std::string dir = FX_BINARY_DIR;
  EXPECT_EQ(load_error(dir), dir + ": is a directory, not a torch.save file");
  EXPECT_EQ(model_error(dir), dir + ": is a directory, not a TorchScript file");
  EXPECT_EQ(load_error("/dev/zero"), "/dev/zero: is a character device, not a torch.save file (a regular file)");
  EXPECT_EQ(model_error("/dev/zero"), "/dev/zero: is a character device, not a TorchScript file (a regular file)");
  const std::string fifo = corrupt_path("input.fifo");
  EXPECT_EQ(load_error(fifo), fifo + ": is a FIFO, not a torch.save file (a regular file)");
  EXPECT_EQ(load_error(dir + "/no_such_file.pt"), dir + "/no_such_file.pt: no such file");
}

TEST(FileBoundary, HugeFileIsRefusedUnread) {
  // A sparse file of 5 GiB: refused from its size, nothing is read.
  const std::string big = std::string(FX_BINARY_DIR) + "/reliability_huge.pt";
  ASSERT_EQ(truncate(big.c_str(), 0) == 0 || errno == ENOENT, true);
  { std::ofstream(big, std::ios::binary) << "PK"; }
  ASSERT_EQ(truncate(big.c_str(), int64_t{5} << 30), 0);
  EXPECT_EQ(load_error(big),
            big + ": is 5368709120 bytes, more than the limit of 4294967296 bytes for a torch.save file");
  std::remove(big.c_str());
}

TEST(FileBoundary, ModelParameterWithShortStorage) {
  const std::string p = corrupt_path("short_weight.pt");
  // torch::jit::load would size the storage from the pickle (48 bytes) over a
  // 16-byte record and read past it: refused from the record sizes.
  EXPECT_EQ(model_error(p),
            p + ": storage '0' (FloatStorage of 12 elements) needs 48 bytes but its record 'linear/data/0' has 16");
  // The good model imports and runs.
  auto gm = fx::import_torchscript(corrupt_path("linear.pt"));
  auto in = fx::load_inputs(corrupt_path("linear.input.pt"));
  at::Tensor out = gm->forward(in).toTensor();
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3}));
}

// TorchScript compile errors keep what is useful on one line: the reason,
// the first overload's complaint, the file position and the source line.
TEST(FileBoundary, TorchScriptErrorTexts) {
  auto p = corrupt_path;
  EXPECT_EQ(model_error(p("bad_code.pt")),
            p("bad_code.pt") +
                ": cannot load TorchScript: Arguments for call are not valid (aten::linear: Keyword "
                "argument frob unknown) at File \"code/__torch__/torch/nn/modules/linear.py\", line 14: "
                "return torch.linear(input, weight, bias, frob=1)");
  EXPECT_EQ(model_error(p("syntax_error.pt")), p("syntax_error.pt") +
                                                   ": cannot load TorchScript: expected ) but found 'eof' at File "
                                                   "\"code/__torch__/torch/nn/modules/linear.py\", line 15");
  // debug_pkl records are walked before libtorch sees them (inflated when
  // deflated, as torch.jit.save writes them).
  EXPECT_EQ(model_error(p("bad_debug_pkl.pt")),
            p("bad_debug_pkl.pt") +
                ": damaged pickle in record "
                "'linear/code/__torch__/torch/nn/modules/linear.py.debug_pkl' at byte 2 (opcode "
                "0x67 is not one torch writes)");
  // A well-formed pickle of the wrong value: libtorch reads it lazily while
  // the graph is built (source positions); the error still names the file,
  // on one line, without "please report a bug to PyTorch".
  EXPECT_EQ(model_error(p("bad_debug_pkl_deflated.pt")),
            p("bad_debug_pkl_deflated.pt") +
                ": cannot import TorchScript: libtorch internal check isTuple() failed: Expected Tuple but got Int");
}

TEST(FileBoundary, ModelNotAZipOrDamaged) {
  const std::string input = corrupt_path("good.input.pt");
  EXPECT_EQ(model_error(input),
            input +
                ": not a TorchScript file (a zip archive without TorchScript code; torch.save files need "
                "torch.jit.script/trace and .save): no code/ record");
  const std::string trunc = corrupt_path("truncated.input.pt");
  EXPECT_EQ(model_error(trunc), trunc +
                                    ": truncated or damaged zip archive (no end of central directory record; "
                                    "the file is truncated)");
}

}  // namespace
