// Every crash reproducer in tests/corpus/<fuzz target>/ loads or gives one
// fx::Error line naming the file (see tests/corpus/README.md), through both
// loaders: regression tests for the crashes the mutation and fuzz runs
// found. (The ctest entries fuzz.<target> run them through their target too.)
#include "fx_paths.h"

#include <fx/import.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include "../common/error_of.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace {

const std::string kCorpus = std::string(FX_SOURCE_DIR) + "/tests/corpus";

// Regular files of `dir` (dot files left out).
void regular_files(const std::string& dir, std::vector<std::string>& out) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string p = dir + "/" + e->d_name;
      struct stat st;
      if (e->d_name[0] != '.' && stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(p);
    }
    closedir(d);
  }
}

// The reproducers: the files in every tests/corpus/<target>/ folder.
std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  if (DIR* d = opendir(kCorpus.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') regular_files(kCorpus + "/" + e->d_name, out);
    closedir(d);
  }
  return out;
}

TEST(Corpus, EveryReproducerIsAnErrorOrLoads) {
  const auto files = corpus_files();
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    for (int as_model = 0; as_model < 2; ++as_model) {
      try {
        if (as_model)
          fx::import_torchscript(f);
        else
          fx::load_value(f);
      } catch (const fx::Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        EXPECT_EQ(msg.rfind(f + ": ", 0), 0u) << msg;
      } catch (const std::exception& e) {
        ADD_FAILURE() << f << ": escaped as " << e.what();
      }
    }
  }
}

// The two reproducers: a damaged deflate stream that libtorch's zip reader
// (built without CRC checks) inflated to garbage for its Unpickler / lexer.
std::string import_error(const std::string& name) {
  const std::string f = kCorpus + "/import/" + name;
  try {
    fx::import_torchscript(f);
  } catch (const fx::ImportError& e) {
    return e.what();
  }
  return "imported";
}

TEST(Corpus, DamagedDeflateStreams) {
  const std::string dir = kCorpus + "/import/";
  EXPECT_EQ(import_error("debug_pkl_stack_underflow.pt"),
            dir + "debug_pkl_stack_underflow.pt: damaged zip archive (record "
                  "'linear/code/__torch__/torch/nn/modules/linear.py.debug_pkl' does not match its CRC-32)");
  EXPECT_EQ(import_error("code_inflates_to_garbage.pt"),
            dir + "code_inflates_to_garbage.pt: damaged zip archive (record "
                  "'linear/code/__torch__/torch/nn/modules/linear.py' does not match its CRC-32)");
}

// Found by fuzz/import_fuzz.cpp in its first minute: one bit flipped in a
// stored (not deflated) code record; libtorch's type parser crashed on the
// source (SIGSEGV in ScriptTypeParser::parseClassConstant). Now every
// non-storage record's CRC-32 is checked first.
TEST(Corpus, StoredCodeBitFlip) {
  EXPECT_EQ(import_error("stored_code_bit_flip.pt"),
            kCorpus + "/import/stored_code_bit_flip.pt: damaged zip archive (record "
                      "'linear/code/__torch__/torch/nn/modules/linear.py' does not match its CRC-32)");
}

// Found by fuzz/load_value_fuzz.cpp (libFuzzer, ~177,000 executions): the
// zip64 record's central directory offset 2^64-1 beside a classic record
// saying 466. fxcpp read the classic one; libtorch's miniz takes the zip64
// one and read before its buffer (ASan heap-buffer-overflow in
// mz_zip_reader_init). Now both records must agree.
TEST(Corpus, Zip64RecordDisagreesWithClassic) {
  const std::string f = kCorpus + "/load_value/zip64_offset_disagrees.pt";
  EXPECT_EQ(fx_test::error_of([&] { fx::load_value(f); }), f + ": damaged zip archive (the zip64 end of central directory disagrees with the classic one)");
}

// Found by the fx::load regression driver (1M mutants, seed 7, mutant
// 968031): a newline inside a buffer name of a BatchNorm's state made the
// error two lines. Names from a damaged file are shown escaped.
TEST(Corpus, ControlCharactersInNamesStayOnOneLine) {
  const std::string f = kCorpus + "/fx_load/newline_in_buffer_name.fx";
  EXPECT_EQ(fx_test::error_of([&] { fx::load(f); }), f + ": module '1': the module has no buffer 'runn\\ng_mean'");
}

// Found by the fx::load regression driver (1M mutants, seed 7, mutant
// 160736): a Conv2d whose groups option is 0 — libtorch's constructor divides
// by it (SIGFPE). Size options of loaded modules are checked first.
TEST(Corpus, ModuleOptionsAreCheckedBeforeLibtorchSeesThem) {
  const std::string f = kCorpus + "/fx_load/conv_groups_zero.fx";
  EXPECT_EQ(fx_test::error_of([&] { fx::load(f); }), f + ": option 'groups' is 0; expected 1 to 16777216");
}

// Found by the fx::load regression driver once it checked that a loaded file
// holds no record differing from its CRC-32 (issue 27; seed 12, mutant 590):
// the directory entry of extra/fxdata/4 pointed at offset 0, so that storage
// was read from the first 8 bytes of the document, under the storage's own
// CRC, which fxcpp's check (keyed by the data's offset) never compared. No two
// records may share bytes.
TEST(Corpus, RecordsMayNotOverlap) {
  const std::string f = kCorpus + "/fx_load/record_points_into_another.fx";
  EXPECT_EQ(fx_test::error_of([&] { fx::load(f); }),
            f + ": truncated or damaged zip archive (record 'archive/extra/fxdata/4' overlaps record "
                "'archive/extra/fxcpp.json')");
}

// Found by the fx::load regression driver on the optimised seeds (seed 23,
// mutant 69741): one byte of a packed weight changed, and the directory entry's
// external attributes given the MS-DOS directory bit. libtorch's zip reader
// (miniz) "extracts" a directory by reading nothing and reporting success, so
// the weight came back as uninitialised memory, unchecked. Such entries are
// refused with the zip directory.
TEST(Corpus, RecordsMarkedAsDirectoriesAreRefused) {
  const std::string f = kCorpus + "/fx_load/record_marked_as_directory.fx";
  EXPECT_EQ(fx_test::error_of([&] { fx::load(f); }),
            f + ": truncated or damaged zip archive (record 'archive/extra/fxdata/0' is marked as a directory)");
}

}  // namespace
