// fx::load_safetensors / load_safetensors_folder / save_safetensors: the
// format Hugging Face checkpoints come in, every bad file one line.
#include <fx/safetensors.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// A fresh folder under the build's temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("fxcpp_safetensors_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// A file of the 8-byte length `header_length` (the header's own by default), `header` and `data`.
std::string write_raw(const fs::path& path, const std::string& header, const std::string& data,
                      int64_t header_length = -1) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header_length < 0 ? header.size() : static_cast<uint64_t>(header_length);
  for (int i = 0; i < 8; ++i, n >>= 8) out.put(static_cast<char>(n & 0xff));
  out << header << data;
  return path.string();
}

std::string load_error(const std::string& path) {
  try {
    fx::load_safetensors(path);
  } catch (const fx::ImportError& e) {
    return e.what();
  }
  return "no error";
}

std::string folder_error(const fs::path& dir) {
  try {
    fx::load_safetensors_folder(dir.string());
  } catch (const fx::ImportError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, EveryDtypeRoundTripsWithItsShapeOrderAndMetadata) {
  const fs::path dir = fresh_dir("round_trip");
  torch::manual_seed(0);
  const std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"model.embed.weight", torch::randn({5, 3})},
      {"f64", torch::randn({2, 2}, torch::kDouble)},
      {"f16", torch::randn({3}).to(torch::kHalf)},
      {"bf16", torch::randn({2, 3}).to(torch::kBFloat16)},
      {"i64", torch::arange(6, torch::kLong).view({3, 2})},
      {"i32", torch::tensor({-1, 2, 3}, torch::kInt)},
      {"i16", torch::tensor({7}, torch::kShort)},
      {"i8", torch::tensor({-8, 9}, torch::kChar)},
      {"u8", torch::tensor({200, 1}, torch::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5)},
      {"empty", torch::zeros({0, 4})},
      {"transposed", torch::randn({3, 4}).t()},  // written as its contiguous copy
  };
  const std::string path = (dir / "model.safetensors").string();
  fx::save_safetensors(path, tensors, {{"format", "pt"}, {"note", "fxcpp test"}});
  const fx::SafeTensors loaded = fx::load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].first);
    EXPECT_EQ(loaded.tensors[i].first, tensors[i].first);
    const at::Tensor& got = loaded.tensors[i].second;
    EXPECT_EQ(got.scalar_type(), tensors[i].second.scalar_type());
    EXPECT_EQ(got.sizes(), tensors[i].second.sizes());
    EXPECT_TRUE(at::equal(got, tensors[i].second));
  }
  EXPECT_EQ(loaded.metadata, (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"note", "fxcpp test"}}));
  ASSERT_NE(loaded.find("bf16"), nullptr);
  EXPECT_EQ(loaded.find("missing"), nullptr);
  // The header is padded to 8 bytes, as the Python library writes it.
  std::ifstream in(path, std::ios::binary);
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  EXPECT_EQ(len[0] % 8, 0);
}

// Tensors map the file copy-on-write: a write changes the tensor, never the file.
/// Kilobytes of the process's resident memory in the mapping holding `p` (/proc/self/smaps), or -1.
int64_t resident_kb_of_mapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const std::string first = line.substr(0, line.find(' '));
    unsigned long begin = 0, end = 0;
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos &&
        std::sscanf(first.c_str(), "%lx-%lx", &begin, &end) == 2) {  // a mapping's header line
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4));
  }
  return -1;
}

// release_mapped_pages (quantize_weight_only gives a packed layer's float pages back): a tensor of a
// loaded file stops being resident and keeps its values (read again from the file), a page a write
// made private keeps the written value, and memory that is not a file's mapping is left alone.
TEST(Safetensors, ReleasedPagesLeaveResidentMemoryNotTheValues) {
  const fs::path dir = fresh_dir("release");
  const std::string path = (dir / "w.safetensors").string();
  torch::manual_seed(0);
  const at::Tensor big = torch::randn({2048, 1024});  // 8 MB
  fx::save_safetensors(path, {{"big", big}, {"small", torch::ones({3})}});
  fx::SafeTensors st = fx::load_safetensors(path);
  const at::Tensor& w = *st.find("big");
  EXPECT_TRUE(at::equal(w, big));  // every page read
  const int64_t before = resident_kb_of_mapping(w.data_ptr());
  ASSERT_GE(before, 8000);
  w[5][7] = 42.0f;  // one page made private by the write
  const size_t released = fx::release_mapped_pages(w);
  EXPECT_GE(released, (size_t{8} << 20) - 8192);
  EXPECT_LE(released, size_t{8} << 20);
  EXPECT_LT(resident_kb_of_mapping(w.data_ptr()), before - 7000);
  EXPECT_EQ(w[5][7].item<float>(), 42.0f);
  w[5][7] = big[5][7];
  EXPECT_TRUE(at::equal(w, big));
  // Not a file's mapping: nothing advised, nothing changed.
  const at::Tensor heap = big.clone();
  EXPECT_EQ(fx::release_mapped_pages(heap), 0u);
  EXPECT_EQ(fx::release_mapped_pages(at::Tensor()), 0u);
  EXPECT_TRUE(at::equal(heap, big));
}

TEST(Safetensors, WritingALoadedTensorLeavesTheFile) {
  const fs::path dir = fresh_dir("cow");
  const std::string path = (dir / "w.safetensors").string();
  fx::save_safetensors(path, {{"w", torch::ones({4})}});
  {
    fx::SafeTensors a = fx::load_safetensors(path);
    a.tensors[0].second.mul_(3);
    EXPECT_TRUE(at::equal(a.tensors[0].second, torch::full({4}, 3.0)));
  }
  EXPECT_TRUE(at::equal(fx::load_safetensors(path).tensors[0].second, torch::ones({4})));
}

// A header whose length is not a multiple of 8 (older writers): an F32
// tensor's data is then misaligned, and is copied.
TEST(Safetensors, MisalignedDataIsCopied) {
  const fs::path dir = fresh_dir("misaligned");
  float values[3] = {1.5f, -2.0f, 3.25f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  ASSERT_NE(header.size() % 4, 0u);
  const fx::SafeTensors t = fx::load_safetensors(write_raw(dir / "m.safetensors", header, data));
  EXPECT_TRUE(at::equal(t.tensors[0].second, torch::tensor({1.5f, -2.0f, 3.25f})));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.tensors[0].second.data_ptr()) % 4, 0u);
}

TEST(Safetensors, BadFilesAreOneLineNamingTheFileAndTheTensor) {
  const fs::path dir = fresh_dir("bad");
  auto f = [&](const std::string& name) { return (dir / name).string(); };
  const std::string eight(8, '\0');
  {
    std::ofstream(f("short"), std::ios::binary) << "abcde";
    EXPECT_EQ(load_error(f("short")),
              f("short") + ": not a safetensors file: 5 bytes, fewer than the 8 of its header's length");
  }
  EXPECT_EQ(load_error(write_raw(f("past_end"), "{}", "", 1000)),
            f("past_end") + ": the header (1000 bytes) runs past the end of the file (10 bytes)");
  EXPECT_EQ(load_error(write_raw(f("huge"), "{}", "", int64_t{1} << 40)),
            f("huge") + ": the header's length (1099511627776 bytes) is over safetensors' limit of 100000000");
  EXPECT_EQ(load_error(write_raw(f("array"), "[1,2]", "")), f("array") + ": the header is not a JSON object");
  EXPECT_EQ(load_error(write_raw(f("twice"), R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xy")),
            f("twice") + ": the header names 'a' twice");
  EXPECT_EQ(load_error(write_raw(f("dtype"), R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "x")),
            f("dtype") + ": tensor 'w' has dtype F8_E4M3; fxcpp reads F64, F32, F16, BF16, I64, I32, I16, I8, U8 and BOOL");
  EXPECT_EQ(load_error(write_raw(f("bytes"), R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, 'x'))),
            f("bytes") + ": tensor 'w': F32 [2, 3] needs 24 bytes, data_offsets [0,20] hold 20");
  EXPECT_EQ(load_error(write_raw(f("outside"), R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})", eight)),
            f("outside") + ": tensor 'w': data_offsets [4, 12] run past the end of the data (8 bytes)");
  EXPECT_EQ(load_error(write_raw(f("overlap"), R"({"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", eight)),
            f("overlap") + ": tensors 'a' and 'b' overlap (bytes [0, 6) and [4, 8))");
  EXPECT_EQ(load_error(write_raw(f("negative"), R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", "")),
            f("negative") + ": tensor 'w': a dimension must be a non-negative integer, not -1");
  EXPECT_EQ(load_error(write_raw(f("bool"), R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x02", 2))),
            f("bool") + ": tensor 'm': BOOL byte 1 is neither 0 nor 1");
  EXPECT_EQ(load_error(write_raw(f("overflow"), R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "")),
            f("overflow") + ": tensor 'w': the shape [4294967296,4294967296] has too many elements");
  EXPECT_EQ(load_error(write_raw(f("nooffsets"), R"({"w":{"dtype":"U8","shape":[1]}})", "x")),
            f("nooffsets") + ": tensor 'w' has no data_offsets");
  EXPECT_EQ(load_error(f("absent")), f("absent") + ": cannot open: No such file or directory");
  EXPECT_EQ(load_error(dir.string()), dir.string() + ": not a regular file");
  EXPECT_NE(load_error(write_raw(f("json"), "{\"w\":", "")).find(f("json") + ": the header is not valid JSON ("),
            std::string::npos);
}

TEST(Safetensors, ShardedFoldersAsHuggingFaceWritesThem) {
  const fs::path dir = fresh_dir("sharded");
  const at::Tensor a = torch::randn({2, 2}), b = torch::randn({3}), c = torch::randn({1, 4});
  fx::save_safetensors((dir / "model-00001-of-00002.safetensors").string(), {{"a", a}, {"b", b}});
  fx::save_safetensors((dir / "model-00002-of-00002.safetensors").string(), {{"c", c}});
  const std::string index = R"({"metadata":{"total_size":44},"weight_map":{"c":"model-00002-of-00002.safetensors",)"
                            R"("a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors"}})";
  std::ofstream(dir / "model.safetensors.index.json") << index;
  const fx::SafeTensors t = fx::load_safetensors_folder(dir.string());
  ASSERT_EQ(t.tensors.size(), 3u);
  EXPECT_EQ(t.tensors[0].first, "c");  // the index's order
  EXPECT_TRUE(at::equal(*t.find("a"), a));
  EXPECT_TRUE(at::equal(*t.find("b"), b));
  EXPECT_TRUE(at::equal(*t.find("c"), c));

  const std::string index_path = (dir / "model.safetensors.index.json").string();
  fs::rename(dir / "model-00002-of-00002.safetensors", dir / "moved.safetensors");
  EXPECT_EQ(folder_error(dir), index_path + ": names shard model-00002-of-00002.safetensors, which is missing");
  fs::rename(dir / "moved.safetensors", dir / "model-00002-of-00002.safetensors");

  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})";
  EXPECT_EQ(folder_error(dir), (dir / "model-00001-of-00002.safetensors").string() +
                                   ": holds tensor 'b', which model.safetensors.index.json does not list");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})";
  EXPECT_EQ(folder_error(dir),
            index_path + ": weight_map 'a' names '../model-00001-of-00002.safetensors', not a file of the folder");

  const fs::path single = fresh_dir("single");
  fx::save_safetensors((single / "model.safetensors").string(), {{"w", a}});
  EXPECT_TRUE(at::equal(*fx::load_safetensors_folder(single.string()).find("w"), a));
  const fs::path none = fresh_dir("none");
  EXPECT_EQ(folder_error(none), none.string() + ": has neither model.safetensors nor model.safetensors.index.json");
}

}  // namespace
