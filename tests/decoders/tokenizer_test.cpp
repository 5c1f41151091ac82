// fx::decoders::Tokenizer and TokenStream on the fixture's tokenizer.model
// (make_llama_fixture.py --tokenizer: a byte-fallback BPE model spm_train
// made, and what spm_encode gives for a few texts in expected_text.json).
#include <fx/decoders/tokenizer.h>

#include "fx_paths.h"
#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

namespace {

namespace fs = std::filesystem;
using fx::decoders::Tokenizer;
using fx::decoders::TokenStream;

struct SpmFixture {
  std::string model;
  nlohmann::json expected;
};

const SpmFixture& spm_fixture() {
  static const SpmFixture f = [] {
    const std::string dir = fx_test::llama_fixture("tokenizer", "--tokenizer");
    std::ifstream in(dir + "/expected_text.json");
    return SpmFixture{dir + "/tokenizer.model", nlohmann::json::parse(in)};
  }();
  return f;
}

/// Whether `s` is well-formed UTF-8 (no character cut short).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

std::string tokenizer_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// Streams `generated` after `prompt`, checking that each push is whole UTF-8; returns every push and the flush.
std::string streamed(const Tokenizer& tok, const std::vector<int64_t>& prompt, const std::vector<int64_t>& generated,
                     int* held_back = nullptr) {
  TokenStream stream(tok, prompt);
  std::string text;
  for (const int64_t id : generated) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << "push(" << id << ") returned a cut character";
    if (piece.empty() && held_back) ++*held_back;
    text += piece;
  }
  return text + stream.flush();
}

/// Checks that the stream after `prompt` gives what one decode of prompt and generated ids adds to the prompt's
/// text, where the prompt's text may end before a character its last byte pieces leave incomplete (U+FFFD, once
/// per byte, in the prompt's decode): the stream gives that character. Returns what it gave.
std::string expect_one_decode(const Tokenizer& tok, const std::vector<int64_t>& prompt,
                              const std::vector<int64_t>& generated, int* held_back = nullptr) {
  const std::string text = streamed(tok, prompt, generated, held_back);
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), generated.begin(), generated.end());
  std::string shown;
  for (size_t i = 0; i < ids.size(); ++i) shown += (i == prompt.size() ? " | " : " ") + std::to_string(ids[i]);
  const std::string before = tok.decode(prompt), all = tok.decode(ids);
  EXPECT_LE(text.size(), all.size()) << "ids" << shown;
  if (text.size() > all.size()) return text;
  const std::string head = all.substr(0, all.size() - text.size());
  EXPECT_EQ(all.substr(head.size()), text) << "ids" << shown;
  EXPECT_EQ(before.substr(0, head.size()), head) << "ids" << shown;
  const std::string cut = before.size() >= head.size() ? before.substr(head.size()) : "";
  EXPECT_TRUE(cut.empty() || cut == "\xEF\xBF\xBD" || cut == "\xEF\xBF\xBD\xEF\xBF\xBD" ||
              cut == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD")
      << "the stream held back more of the prompt than a cut character: '" << cut << "', ids" << shown;
  return text;
}

TEST(Tokenizer, LoadsSpmTrainsModel) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  EXPECT_EQ(tok.vocab_size(), 320);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), spm_fixture().expected["eos_id"].get<int64_t>());
  EXPECT_EQ(tok.path(), spm_fixture().model);
}

TEST(Tokenizer, EncodesAsSpmEncodeAndDecodesBack) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  for (const auto& [text, ids] : spm_fixture().expected["encoded"].items()) {
    const std::vector<int64_t> want = ids.get<std::vector<int64_t>>();
    EXPECT_EQ(tok.encode(text), want) << text;
    EXPECT_EQ(tok.encode(text, /*add_bos=*/false), std::vector<int64_t>(want.begin() + 1, want.end())) << text;
    EXPECT_EQ(tok.decode(want), text);
  }
  EXPECT_EQ(tok.encode(""), std::vector<int64_t>{1});
  EXPECT_EQ(tok.decode({}), "");
  EXPECT_EQ(tok.decode({1, tok.eos_id()}), "");  // control pieces are invisible
}

TEST(Tokenizer, ByteFallbackSpellsWhatThePiecesLack) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  int bytes = 0;
  for (const int64_t id : tok.encode("日本", false)) bytes += tok.is_byte(id);
  EXPECT_EQ(bytes, 6);  // two characters of three bytes each
  for (const int64_t id : tok.encode("naïve café", false)) EXPECT_FALSE(tok.is_byte(id)) << id;  // ï and é are pieces
  EXPECT_FALSE(tok.is_byte(-1));
  EXPECT_FALSE(tok.is_byte(320));
}

TEST(TokenStream, EqualsOneDecodeAndNeverCutsACharacter) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  for (const auto& [text, json_ids] : spm_fixture().expected["encoded"].items()) {
    const std::vector<int64_t> ids = json_ids.get<std::vector<int64_t>>();
    for (const size_t split : {size_t{0}, size_t{1}, size_t{4}}) {
      const std::vector<int64_t> prompt(ids.begin(), ids.begin() + split), generated(ids.begin() + split, ids.end());
      int held_back = 0;
      const std::string got = expect_one_decode(tok, prompt, generated, &held_back);
      if (split <= 1) {
        EXPECT_EQ(got, text);  // after nothing or BOS alone: the whole text
      }
      // Each character spelled in bytes is held back for two (or three) of its byte pieces.
      if (text.find("日本") != std::string::npos) {
        EXPECT_GE(held_back, 4) << text;
      }
    }
  }
}

TEST(TokenStream, TheFirstWordAfterThePromptKeepsItsSpace) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  EXPECT_EQ(streamed(tok, tok.encode("The old man"), tok.encode("reads a story", false)), " reads a story");
  // At the start of the text there is no space before it, as in one decode.
  EXPECT_EQ(streamed(tok, {tok.bos_id()}, tok.encode("The cat", false)), "The cat");
  TokenStream stream(tok, tok.encode("The old man"));
  const std::vector<int64_t> word = tok.encode("reads", false);
  EXPECT_EQ(stream.push(word[0]).front(), ' ');
}

TEST(TokenStream, RandomIdsStreamAsOneDecode) {
  // Byte pieces of whole characters, cut characters and stray bytes, among pieces and control ids.
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  std::vector<std::vector<int64_t>> chunks;
  for (const char* text : {"日", "本", "🙂", "語", "é"}) {
    std::vector<int64_t> bytes;
    for (const int64_t id : tok.encode(text, false))
      if (tok.is_byte(id)) bytes.push_back(id);
    if (!bytes.empty()) chunks.push_back(bytes);
  }
  ASSERT_GE(chunks.size(), 3u);
  std::mt19937 rng(1);
  for (int sequence = 0; sequence < 300; ++sequence) {
    std::vector<int64_t> ids;
    const int parts = 1 + static_cast<int>(rng() % 8);
    for (int p = 0; p < parts; ++p) {
      const auto& c = chunks[rng() % chunks.size()];
      switch (rng() % 4) {
        case 0: ids.insert(ids.end(), c.begin(), c.end()); break;
        case 1: ids.insert(ids.end(), c.begin(), c.begin() + 1 + rng() % c.size()); break;  // maybe cut short
        case 2: ids.push_back(c[rng() % c.size()]); break;
        default: ids.push_back(static_cast<int64_t>(rng() % tok.vocab_size())); break;
      }
    }
    const size_t split = rng() % (ids.size() + 1);
    const std::vector<int64_t> prompt(ids.begin(), ids.begin() + split), generated(ids.begin() + split, ids.end());
    expect_one_decode(tok, prompt, generated);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(Tokenizer, BadFilesAreOneImportErrorLine) {
  const fs::path dir = fs::path(FX_BINARY_DIR) / "decoders_fixtures" / ("tokenizer_bad" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string missing = (dir / "missing.model").string();
  EXPECT_THROW(Tokenizer::load(missing), fx::ImportError);
  EXPECT_EQ(tokenizer_error([&] { Tokenizer::load(missing); }),
            missing + ": cannot open the SentencePiece model (Not found: \"" + missing +
                "\": No such file or directory Error #2)");
  const std::string corrupt = (dir / "corrupt.model").string();
  std::ofstream(corrupt) << "not a SentencePiece model\n";
  EXPECT_THROW(Tokenizer::load(corrupt), fx::ImportError);
  EXPECT_EQ(tokenizer_error([&] { Tokenizer::load(corrupt); }),
            corrupt + ": not a SentencePiece model (Internal: ./src/sentencepiece_processor.cc(1101) "
                      "[model_proto->ParseFromArray(serialized.data(), serialized.size())])");
  const std::string truncated = (dir / "truncated.model").string();
  {
    std::ifstream in(spm_fixture().model, std::ios::binary);
    const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << whole.substr(0, whole.size() / 2);
  }
  EXPECT_EQ(tokenizer_error([&] { Tokenizer::load(truncated); }),
            truncated + ": not a SentencePiece model (Internal: ./src/sentencepiece_processor.cc(1101) "
                        "[model_proto->ParseFromArray(serialized.data(), serialized.size())])");
  const std::string empty = (dir / "empty.model").string();
  std::ofstream{empty};
  EXPECT_EQ(tokenizer_error([&] { Tokenizer::load(empty); }),
            empty + ": not a SentencePiece model (Internal: unk is not defined.)");
  EXPECT_EQ(tokenizer_error([&] { Tokenizer::load(dir.string()); }),
            dir.string() + ": a folder, not a SentencePiece model file (tokenizer.model)");
  fs::remove_all(dir);
}

TEST(Tokenizer, IdsOutsideTheVocabularyAreOneLine) {
  const Tokenizer tok = Tokenizer::load(spm_fixture().model);
  const std::string p = spm_fixture().model + ": token id ";
  EXPECT_EQ(tokenizer_error([&] { tok.decode({5, 320}); }), p + "320 is outside the vocabulary (320 pieces: ids 0 to 319)");
  EXPECT_EQ(tokenizer_error([&] { tok.decode({-1}); }), p + "-1 is outside the vocabulary (320 pieces: ids 0 to 319)");
  EXPECT_EQ(tokenizer_error([&] { TokenStream(tok, {1, 999}); }), p + "999 is outside the vocabulary (320 pieces: ids 0 to 319)");
  const std::vector<int64_t> ids = tok.encode("The cat");
  TokenStream stream(tok, {ids[0]});
  EXPECT_EQ(tokenizer_error([&] { stream.push(400); }), p + "400 is outside the vocabulary (320 pieces: ids 0 to 319)");
  std::string text;  // the stream goes on as if the bad id had not been pushed
  for (size_t i = 1; i < ids.size(); ++i) text += stream.push(ids[i]);
  EXPECT_EQ(text + stream.flush(), "The cat");
}

}  // namespace
