// The fxcpp_sentencepiece module: SentencePiece's processor behind the plain
// functions of decoders/sentencepiece_module.h (why a module: see there).
// Only this file includes SentencePiece's header or links its library.
#include "decoders/sentencepiece_module.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <exception>
#include <memory>

namespace {

using sentencepiece::SentencePieceProcessor;

const SentencePieceProcessor& processor(const void* p) { return *static_cast<const SentencePieceProcessor*>(p); }

void* load(const std::string& path, int* code, std::string* error) {
  try {
    auto p = std::make_unique<SentencePieceProcessor>();
    const auto status = p->Load(path);
    if (status.ok()) return p.release();
    *code = static_cast<int>(status.code());
    *error = status.ToString();
  } catch (const std::exception& e) {  // its file reader throws std::ios_failure on some unreadable files
    *code = -1;
    *error = e.what();
  }
  return nullptr;
}

void release(void* p) { delete static_cast<SentencePieceProcessor*>(p); }

bool encode(const void* p, const std::string& text, std::vector<int>* ids, std::string* error) {
  try {
    const auto status = processor(p).Encode(text, ids);
    if (status.ok()) return true;
    *error = status.ToString();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return false;
}

bool decode(const void* p, const std::vector<int>& ids, std::string* text, std::string* error) {
  try {
    const auto status = processor(p).Decode(ids, text);
    if (status.ok()) return true;
    *error = status.ToString();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return false;
}

int piece_size(const void* p) { return processor(p).GetPieceSize(); }
int bos_id(const void* p) { return processor(p).bos_id(); }
int eos_id(const void* p) { return processor(p).eos_id(); }

int byte_value(const void* p, int id) {
  if (!processor(p).IsByte(id)) return -1;
  const std::string& piece = processor(p).IdToPiece(id);  // <0xE6>
  if (piece.size() != 6) return -1;
  return static_cast<int>(std::strtol(piece.substr(3, 2).c_str(), nullptr, 16));
}

}  // namespace

/// The module's entry point (sentencepiece_module.h's kEntryPoint).
extern "C" __attribute__((visibility("default"))) const fx::decoders::sentencepiece_module::Api*
fx_sentencepiece_module() {
  static const fx::decoders::sentencepiece_module::Api api{fx::decoders::sentencepiece_module::kVersion,
                                                           load, release, encode, decode, piece_size, bos_id,
                                                           eos_id, byte_value};
  return &api;
}
