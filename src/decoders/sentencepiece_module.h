#pragma once
// What the fxcpp_sentencepiece module (src/sentencepiece_module/) gives
// fxcpp_decoders: SentencePiece's processor behind plain functions.
//
// Debian's libsentencepiece.so.0 holds its own protobuf-lite (3.14) and
// exports its symbols, the same names as libtorch's libprotobuf.so.32
// (3.21): linked into a program with libtorch, one library's calls reach the
// other's code and the program crashes while loading. So only this module
// links it, and fx::decoders::Tokenizer opens the module with dlopen,
// RTLD_LOCAL | RTLD_DEEPBIND: neither library's symbols reach the other's
// callers. Both sides share the process's libstdc++, so std::string and
// std::vector cross; exceptions do not (every function catches its own).

#include <string>
#include <vector>

namespace fx::decoders::sentencepiece_module {

/// The module's functions. None throws: those that can fail return false
/// (load: null) with SentencePiece's status text in `error`.
struct Api {
  /// kVersion of the module's build; fxcpp_decoders refuses another.
  int version;
  /// A SentencePieceProcessor with `path` loaded, or null: `code` is
  /// SentencePiece's status code (5: not found), -1 for an exception.
  void* (*load)(const std::string& path, int* code, std::string* error);
  void (*release)(void* processor);
  bool (*encode)(const void* processor, const std::string& text, std::vector<int>* ids, std::string* error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string* text, std::string* error);
  int (*piece_size)(const void* processor);
  int (*bos_id)(const void* processor);
  int (*eos_id)(const void* processor);
  /// The byte a byte-fallback piece (`<0xE6>`) stands for; -1 for any other piece.
  int (*byte_value)(const void* processor, int id);
};

constexpr int kVersion = 1;
/// The module's file name, beside libfxcpp_decoders.so.
constexpr const char* kFileName = "libfxcpp_sentencepiece.so";
/// The one symbol the module exports: `const Api* fx_sentencepiece_module()`.
constexpr const char* kEntryPoint = "fx_sentencepiece_module";

}  // namespace fx::decoders::sentencepiece_module
