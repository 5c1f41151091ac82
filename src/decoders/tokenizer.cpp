// fx::decoders::Tokenizer and TokenStream over SentencePiece's
// SentencePieceProcessor (Debian libsentencepiece-dev), reached through the
// fxcpp_sentencepiece module, which this file opens beside
// libfxcpp_decoders.so (sentencepiece_module.h says why).
#include "decoders/sentencepiece_module.h"
#include "torchscript/file_checks.h"

#include <fx/decoders/tokenizer.h>

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

namespace fx::decoders {

namespace {

namespace module = sentencepiece_module;

// ASan and TSan refuse dlopen's RTLD_DEEPBIND (their interceptors must see
// every call): there the module's protobuf-lite calls may reach libtorch's
// libprotobuf instead (sentencepiece_module.h).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kDeepBind = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

/// The module's functions, opened once (again after a failure).
const module::Api& api() {
  static std::mutex mutex;
  static const module::Api* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return *loaded;
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&api), &self) == 0 || !self.dli_fname)
    throw Error("fx::decoders::Tokenizer: cannot tell which file holds libfxcpp_decoders");
  const std::string path =
      (std::filesystem::path(self.dli_fname).parent_path() / module::kFileName).string();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
  if (!handle) throw Error(path + ": cannot open fxcpp's SentencePiece module (" + import_detail::one_line(::dlerror()) + ")");
  using Entry = const module::Api* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, module::kEntryPoint));
  const module::Api* a = entry ? entry() : nullptr;
  if (!a || a->version != module::kVersion) {
    ::dlclose(handle);
    throw Error(path + ": not the SentencePiece module of this fxcpp (rebuild fxcpp_sentencepiece)");
  }
  loaded = a;  // kept open for the process's life
  return *loaded;
}

/// SentencePiece's status text without the trailing space its CHECK messages end with, on one line.
std::string status_text(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return import_detail::one_line(s);
}

}  // namespace

struct Tokenizer::Impl {
  const module::Api* api = nullptr;
  void* processor = nullptr;
  std::string path;
  int64_t vocab_size = 0;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (processor) api->release(processor);
  }

  /// fx::Error naming `id` and the vocabulary when it is outside it.
  void check_id(int64_t id) const {
    if (id < 0 || id >= vocab_size)
      throw Error(path + ": token id " + std::to_string(id) + " is outside the vocabulary (" +
                  std::to_string(vocab_size) + " pieces: ids 0 to " + std::to_string(vocab_size - 1) + ")");
  }

  /// The byte a byte-fallback piece stands for, -1 for any other id (in the vocabulary).
  int byte_value(int64_t id) const { return api->byte_value(processor, static_cast<int>(id)); }

  /// The text of ids[0, count).
  std::string decode(const std::vector<int64_t>& ids, size_t count) const {
    std::vector<int> narrow;
    narrow.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      check_id(ids[i]);
      narrow.push_back(static_cast<int>(ids[i]));
    }
    std::string text, error;
    if (!api->decode(processor, narrow, &text, &error)) throw Error(path + ": cannot decode (" + status_text(error) + ")");
    return text;
  }
};

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ImportError(path + ": a folder, not a SentencePiece model file (tokenizer.model)");
  auto impl = std::make_shared<Impl>();
  impl->api = &api();
  impl->path = path;
  int code = 0;
  std::string error;
  impl->processor = impl->api->load(path, &code, &error);
  if (!impl->processor) {
    const char* what = code == 5 ? "cannot open the SentencePiece model"  // StatusCode::kNotFound
                       : code == -1 ? "cannot read the SentencePiece model"
                                    : "not a SentencePiece model";
    throw ImportError(path + ": " + what + " (" + status_text(error) + ")");
  }
  impl->vocab_size = impl->api->piece_size(impl->processor);
  return Tokenizer(std::move(impl));
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int> ids;
  std::string error;
  if (!impl_->api->encode(impl_->processor, text, &ids, &error))
    throw Error(impl_->path + ": cannot encode the text (" + status_text(error) + ")");
  std::vector<int64_t> out;
  out.reserve(ids.size() + 1);
  if (add_bos && bos_id() >= 0) out.push_back(bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const { return impl_->decode(ids, ids.size()); }

int64_t Tokenizer::bos_id() const { return impl_->api->bos_id(impl_->processor); }

int64_t Tokenizer::eos_id() const { return impl_->api->eos_id(impl_->processor); }

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_byte(int64_t id) const { return id >= 0 && id < impl_->vocab_size && impl_->byte_value(id) >= 0; }

const std::string& Tokenizer::path() const { return impl_->path; }

TokenStream::TokenStream(const Tokenizer& tokenizer, std::vector<int64_t> prompt_ids)
    : tokenizer_(&tokenizer), ids_(std::move(prompt_ids)) {
  for (const int64_t id : ids_) tokenizer_->impl_->check_id(id);
  emitted_ = stable_text().size();
}

std::string TokenStream::stable_text() const {
  // The trailing byte pieces' last character, when it still lacks bytes: a
  // lead byte among the last three with fewer continuation bytes after it
  // than it announces. Bytes before it decode the same whatever follows (no
  // character spans a lead byte), so the text without it never changes.
  const Tokenizer::Impl& t = *tokenizer_->impl_;
  const size_t end = ids_.size();
  size_t hold = 0;
  for (size_t c = end; c > 0 && end - c < 3; --c) {
    const int b = t.byte_value(ids_[c - 1]);
    if (b < 0) break;                  // not a byte piece
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 1;
    if (need > end - (c - 1)) hold = end - (c - 1);
    break;
  }
  return t.decode(ids_, end - hold);
}

std::string TokenStream::push(int64_t id) {
  tokenizer_->impl_->check_id(id);
  ids_.push_back(id);
  std::string text;
  try {
    text = stable_text();
  } catch (...) {
    ids_.pop_back();
    throw;
  }
  if (text.size() <= emitted_) return "";
  std::string added = text.substr(emitted_);
  emitted_ = text.size();
  return added;
}

std::string TokenStream::flush() {
  const std::string text = tokenizer_->impl_->decode(ids_, ids_.size());
  if (text.size() <= emitted_) return "";
  std::string added = text.substr(emitted_);
  emitted_ = text.size();
  return added;
}

}  // namespace fx::decoders
