#pragma once
/// \file
/// fx::decoders::Tokenizer: a SentencePiece model (the `tokenizer.model` of
/// LLaMA-family checkpoints) for text prompts and decoded text, and
/// TokenStream, which turns the ids a decoder generates into text as they
/// come (issue 67). SentencePiece itself stays behind the implementation:
/// this header includes none of it.
///
///     auto tok = fx::decoders::Tokenizer::load("TinyLlama/tokenizer.model");
///     std::vector<int64_t> prompt = tok.encode("The capital of France is");  // BOS first
///     fx::decoders::TokenStream stream(tok, prompt);
///     std::cout << stream.push(next_id);  // " Paris": the space the prompt's last word needs

#include <fx/error.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fx::decoders {

/// A loaded SentencePiece model. Copies share the loaded model (immutable);
/// every method is const and may be called from several threads.
class Tokenizer {
 public:
  /// Reads a SentencePiece model file (`tokenizer.model`). A missing,
  /// unreadable or corrupt file is one fx::ImportError line naming the file
  /// and SentencePiece's status message.
  static Tokenizer load(const std::string& path);

  /// `text` (UTF-8) as token ids, the BOS id first when `add_bos` and the
  /// model has one. With byte fallback, text outside the pieces is encoded
  /// as its bytes.
  std::vector<int64_t> encode(const std::string& text, bool add_bos = true) const;

  /// The text of `ids` as SentencePiece decodes it (BOS / EOS invisible, the
  /// first word's leading space dropped, byte pieces joined into UTF-8 with
  /// U+FFFD for bytes that form no character). An id outside the vocabulary
  /// is one fx::Error line naming it and the vocabulary's size.
  std::string decode(const std::vector<int64_t>& ids) const;

  /// The beginning-of-sequence id, or -1 when the model has none.
  int64_t bos_id() const;
  /// The end-of-sequence id, or -1 when the model has none.
  int64_t eos_id() const;
  /// Pieces in the vocabulary: ids are 0 to vocab_size() - 1.
  int64_t vocab_size() const;
  /// Whether `id` is a byte-fallback piece (`<0xE6>`): one byte of a UTF-8
  /// sequence, which decodes with the byte pieces around it.
  bool is_byte(int64_t id) const;
  /// The file it was loaded from, as given to load().
  const std::string& path() const;

 private:
  friend class TokenStream;
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

/// Streaming detokenization: the text each generated id adds after a
/// prompt. It decodes the whole sequence (prompt and generated ids) and
/// returns what is new, so SentencePiece's spaces come out as they would in
/// one decode: the first generated word after the prompt keeps its leading
/// space. Text is held back while the sequence ends in byte-fallback pieces
/// that are an incomplete UTF-8 character, so a multi-byte character is
/// never split between two pushes; the concatenation of every push() and
/// flush() equals decode(prompt and generated ids) less decode(prompt).
/// The Tokenizer must outlive the stream.
class TokenStream {
 public:
  /// Starts after `prompt_ids` (may be empty); their text is not returned.
  /// An id outside the vocabulary is one fx::Error line.
  explicit TokenStream(const Tokenizer& tokenizer, std::vector<int64_t> prompt_ids = {});

  /// Appends `id`; returns the text it completes ("" while a character is
  /// incomplete). An id outside the vocabulary is one fx::Error line, and
  /// the stream is left as it was.
  std::string push(int64_t id);

  /// The text still held back (an incomplete character at the end decodes
  /// as U+FFFD), once generation has ended; "" when there is none.
  std::string flush();

 private:
  /// The decoded text of ids_ up to where it can no longer change.
  std::string stable_text() const;

  const Tokenizer* tokenizer_;
  std::vector<int64_t> ids_;
  size_t emitted_ = 0;  ///< bytes of stable_text() already returned (or the prompt's)
};

}  // namespace fx::decoders
