// The pickle walker of pickle_check.h: a whitelist of opcodes and a
// simulated stack, so malformed pickles are an fx::ImportError before
// libtorch's Unpickler (which trusts the stack) runs.
#include "pickle_check.h"

#include <fx/error.h>

#include <caffe2/serialize/versions.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <unordered_map>

namespace fx::import_detail {
namespace {

// What the walker knows of a stack entry: enough to read a storage's
// persistent id; anything else is Other.
struct Value {
  enum Kind { Mark, Str, Int, Tuple, Global, Other } kind = Other;
  std::string s;  // Str; Global: "module.name"
  int64_t i = 0;
  std::vector<std::shared_ptr<const Value>> items;  // Tuple
};
using V = std::shared_ptr<const Value>;

V make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

const std::unordered_map<std::string, uint64_t>& storage_itemsizes() {
  static const std::unordered_map<std::string, uint64_t> m = {
      {"FloatStorage", 4},       {"DoubleStorage", 8},       {"HalfStorage", 2},   {"BFloat16Storage", 2},
      {"LongStorage", 8},        {"IntStorage", 4},          {"ShortStorage", 2},  {"CharStorage", 1},
      {"ByteStorage", 1},        {"BoolStorage", 1},         {"ComplexFloatStorage", 8},
      {"ComplexDoubleStorage", 16}, {"QInt8Storage", 1},     {"QUInt8Storage", 1}, {"QInt32Storage", 4},
      {"QUInt4x2Storage", 1},    {"QUInt2x4Storage", 1},     {"UntypedStorage", 1}};
  return m;
}

// An edit of a pickle's bytes: at `at`, `erase` bytes replaced by `insert`.
struct Edit {
  size_t at = 0, erase = 0;
  std::string insert;
};

class Walker {
 public:
  /// With `edits`, also records how to write every APPEND / SETITEM as
  /// MARK ... APPENDS / SETITEMS.
  Walker(const std::string& path, const std::string& record, const char* data, size_t size,
         std::vector<Edit>* edits = nullptr)
      : path_(path), record_(record), p_(reinterpret_cast<const unsigned char*>(data)), size_(size), edits_(edits) {}

  std::vector<StorageRef> run() {
    while (true) {
      if (at_ >= size_) fail("ends without STOP");
      op_at_ = at_;
      const unsigned char op = p_[at_++];
      switch (op) {
        case 0x80: take(1); break;                       // PROTO
        case 0x95: take(8); break;                       // FRAME
        case '(': push(make(Value::Mark)); break;        // MARK
        case '.':                                        // STOP
          if (stack_.empty() || stack_.back()->kind == Value::Mark) fail("STOP without a value");
          return std::move(storages_);
        case 'N': case 0x88: case 0x89: push(make(Value::Other)); break;  // NONE NEWTRUE NEWFALSE
        case 'J': push_int(le(take(4), 4, true)); break;                 // BININT
        case 'K': push_int(le(take(1), 1, false)); break;                // BININT1
        case 'M': push_int(le(take(2), 2, false)); break;                // BININT2
        case 0x8a: {                                                      // LONG1
          const size_t n = le(take(1), 1, false);
          const unsigned char* b = take(n);
          push_int(n > 0 && n <= 8 ? le(b, n, true) : 0);
          break;
        }
        case 'G': take(8); push(make(Value::Other)); break;  // BINFLOAT
        case 'X': push_str(take_len(4)); break;              // BINUNICODE
        case 0x8c: push_str(take_len(1)); break;             // SHORT_BINUNICODE
        case 'B': take_len(4); push(make(Value::Other)); break;  // BINBYTES
        case 'C': take_len(1); push(make(Value::Other)); break;  // SHORT_BINBYTES
        case 'c': {                                               // GLOBAL
          auto v = std::make_shared<Value>();
          v->kind = Value::Global;
          const std::string module = line();
          v->s = module + "." + line();
          push(v);
          break;
        }
        case ')': push(make(Value::Tuple)); break;  // EMPTY_TUPLE
        case 0x85: case 0x86: case 0x87: {           // TUPLE1..3
          auto t = std::make_shared<Value>();
          t->kind = Value::Tuple;
          t->items.resize(op - 0x84);
          size_t start = op_at_;
          for (size_t k = t->items.size(); k-- > 0;) t->items[k] = pop(&start);
          push(t, start);
          break;
        }
        case 't': {  // TUPLE
          auto t = std::make_shared<Value>();
          t->kind = Value::Tuple;
          size_t start = 0;
          t->items = pop_to_mark(&start);
          push(t, start);
          break;
        }
        case ']': case '}': push(make(Value::Other)); break;  // EMPTY_LIST EMPTY_DICT
        case 'l': {  // LIST
          size_t start = 0;
          pop_to_mark(&start);
          push(make(Value::Other), start);
          break;
        }
        case 'd': {  // DICT
          size_t start = 0;
          if (pop_to_mark(&start).size() % 2) fail("DICT with an odd number of items");
          push(make(Value::Other), start);
          break;
        }
        case 'a': {  // APPEND: MARK before the item, APPENDS
          size_t item = op_at_;
          pop(&item);
          top();
          batch(item, 'e');
          break;
        }
        case 'e': pop_to_mark(); top(); break;  // APPENDS
        case 's': {  // SETITEM: MARK before the key, SETITEMS
          size_t key = op_at_;
          pop(&key);
          pop(&key);
          top();
          batch(key, 'u');
          break;
        }
        case 'u':                               // SETITEMS
          if (pop_to_mark().size() % 2) fail("SETITEMS with an odd number of items");
          top();
          break;
        case 'q': memo_[le(take(1), 1, false)] = top(); break;  // BINPUT
        case 'r': memo_[le(take(4), 4, false)] = top(); break;  // LONG_BINPUT
        case 'h': get(le(take(1), 1, false)); break;            // BINGET
        case 'j': get(le(take(4), 4, false)); break;            // LONG_BINGET
        case 'Q': {  // BINPERSID
          size_t start = op_at_;
          persistent_id(pop(&start));
          push(make(Value::Other), start);
          break;
        }
        case 'R': case 0x81: {  // REDUCE NEWOBJ
          size_t start = op_at_;
          pop(&start);
          pop(&start);
          push(make(Value::Other), start);
          break;
        }
        case 'b': pop(); top(); break;                                       // BUILD
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("opcode ") + hex + " is not one torch writes");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ImportError(path_ + ": damaged pickle in record '" + record_ + "' at byte " + std::to_string(op_at_) +
                      " (" + what + ")");
  }
  const unsigned char* take(size_t n) {
    if (n > size_ - at_) fail("an argument runs past the end of the record");
    const unsigned char* b = p_ + at_;
    at_ += n;
    return b;
  }
  static int64_t le(const unsigned char* b, size_t n, bool is_signed) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(b[k]) << (8 * k);
    if (is_signed && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(v);
  }
  std::string take_len(size_t len_bytes) {
    const uint64_t n = static_cast<uint64_t>(le(take(len_bytes), len_bytes, false));
    if (n > size_ - at_) fail("a string of " + std::to_string(n) + " bytes runs past the end of the record");
    const unsigned char* b = take(static_cast<size_t>(n));
    return std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(n));
  }
  std::string line() {
    std::string s;
    while (true) {
      if (at_ >= size_) fail("GLOBAL runs past the end of the record");
      const char c = static_cast<char>(p_[at_++]);
      if (c == '\n') return s;
      if (s.size() >= 1024) fail("GLOBAL name too long");
      s.push_back(c);
    }
  }
  // `start`: the byte of the first opcode that built the value (a MARK
  // inserted there puts the MARK right below it).
  void push(V v) { push(std::move(v), op_at_); }
  void push(V v, size_t start) {
    if (stack_.size() >= kMaxStack) fail("stack deeper than " + std::to_string(kMaxStack));
    stack_.push_back(std::move(v));
    starts_.push_back(start);
  }
  void batch(size_t mark_at, char op) {
    if (!edits_) return;
    edits_->push_back({mark_at, 0, "("});
    edits_->push_back({op_at_, 1, std::string(1, op)});
  }
  void push_int(int64_t i) {
    auto v = std::make_shared<Value>();
    v->kind = Value::Int;
    v->i = i;
    push(v);
  }
  void push_str(std::string s) {
    auto v = std::make_shared<Value>();
    v->kind = Value::Str;
    v->s = std::move(s);
    push(v);
  }
  V top() {
    if (stack_.empty() || stack_.back()->kind == Value::Mark) fail("stack underflow");
    return stack_.back();
  }
  // `start`, if given, becomes the earlier of itself and the value's start.
  V pop(size_t* start = nullptr) {
    V v = top();
    if (start) *start = std::min(*start, starts_.back());
    stack_.pop_back();
    starts_.pop_back();
    return v;
  }
  std::vector<V> pop_to_mark(size_t* start = nullptr) {
    size_t m = stack_.size();
    while (m > 0 && stack_[m - 1]->kind != Value::Mark) --m;
    if (m == 0) fail("no MARK to pop to");
    std::vector<V> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    if (start) *start = starts_[m - 1];
    stack_.resize(m - 1);
    starts_.resize(m - 1);
    return items;
  }
  void get(int64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) fail("GET of memo slot " + std::to_string(idx) + " that was never PUT");
    push(it->second);
  }
  // ('storage', torch.FloatStorage, key, location, numel)
  void persistent_id(const V& pid) {
    if (pid->kind != Value::Tuple) fail("a persistent id that is not a tuple");
    const auto& t = pid->items;
    if (t.size() != 5 || t[0]->kind != Value::Str || t[0]->s != "storage") fail("a persistent id that is not a storage");
    if (t[1]->kind != Value::Global || t[2]->kind != Value::Str || t[4]->kind != Value::Int)
      fail("a malformed storage persistent id");
    StorageRef r;
    r.key = t[2]->s;
    const std::string& g = t[1]->s;
    r.type = g.rfind("torch.", 0) == 0 ? g.substr(6) : g;
    auto it = storage_itemsizes().find(r.type);
    if (it == storage_itemsizes().end()) fail("unknown storage type " + g);
    if (t[4]->i < 0) fail("storage '" + r.key + "' with a negative size");
    r.numel = static_cast<uint64_t>(t[4]->i);
    r.itemsize = it->second;
    if (r.key.empty() || r.key.find('/') != std::string::npos || r.key.find("..") != std::string::npos)
      fail("storage key '" + r.key + "' is not a record name");
    storages_.push_back(std::move(r));
  }

  static constexpr size_t kMaxStack = 1 << 20;
  const std::string& path_;
  const std::string& record_;
  const unsigned char* p_;
  size_t size_;
  size_t at_ = 0, op_at_ = 0;
  std::vector<V> stack_;
  std::vector<size_t> starts_;  // parallel to stack_
  std::vector<Edit>* edits_;
  std::unordered_map<int64_t, V> memo_;
  std::vector<StorageRef> storages_;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<StorageRef> check_pickle(const std::string& path, const std::string& record, const char* data,
                                     size_t size) {
  return Walker(path, record, data, size).run();
}

std::string with_batched_items(const std::string& path, const std::string& record, std::string data) {
  std::vector<Edit> edits;
  Walker(path, record, data.data(), data.size(), &edits).run();
  if (edits.empty()) return data;
  // By position; at one position, in the order recorded (the MARKs of
  // nested items all go there, the outermost first).
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at < b.at; });
  std::string out;
  out.reserve(data.size() + edits.size());
  size_t at = 0;
  for (const Edit& e : edits) {
    out.append(data, at, e.at - at);
    out += e.insert;
    at = e.at + e.erase;
  }
  out.append(data, at, std::string::npos);
  return out;
}

void check_pickles(const std::string& path, const std::vector<ZipRecord>& records,
                   const std::function<std::string(const ZipRecord&)>& read) {
  std::unordered_map<std::string, const ZipRecord*> by_name;
  for (const ZipRecord& r : records) by_name[r.name] = &r;
  // What libtorch's PyTorchStreamReader::init checks, first: it throws from
  // its constructor and so never frees its zip reader (a leak per bad file,
  // found by LeakSanitizer on the fuzz regression runs).
  const size_t folder_end = records.empty() ? std::string::npos : records.front().name.find('/');
  if (folder_end == std::string::npos)
    throw ImportError(path + ": not a PyTorch archive (the first record is not in a folder)");
  const std::string folder = records.front().name.substr(0, folder_end + 1);
  auto version = by_name.find(folder + ".data/version");
  if (version == by_name.end()) version = by_name.find(folder + "version");
  if (version == by_name.end()) throw ImportError(path + ": not a PyTorch archive (no record '" + folder + "version')");
  std::string text = read(*version->second);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const bool digits = !text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoull(text) < caffe2::serialize::kMinSupportedFileFormatVersion ||
      std::stoull(text) > caffe2::serialize::kMaxSupportedFileFormatVersion)
    throw ImportError(path + ": unsupported PyTorch archive (record '" + version->first + "' is not a format version from " +
                      std::to_string(caffe2::serialize::kMinSupportedFileFormatVersion) + " to " +
                      std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion) + ")");
  for (const ZipRecord& r : records) {
    if (!ends_with(r.name, ".pkl") && !ends_with(r.name, "debug_pkl")) continue;
    const std::string bytes = read(r);
    const std::vector<StorageRef> storages = check_pickle(path, r.name, bytes.data(), bytes.size());
    if (storages.empty()) continue;
    // "arch/data.pkl" -> tensors in "arch/data/KEY"; "arch/constants.pkl" -> "arch/constants/KEY".
    const std::string folder = r.name.substr(0, r.name.size() - 4) + "/";
    const size_t slash = r.name.find('/');
    const std::string shared = slash == std::string::npos ? ".data/" : r.name.substr(0, slash) + "/.data/";
    for (const StorageRef& s : storages) {
      auto it = by_name.find(folder + s.key);
      if (it == by_name.end()) it = by_name.find(shared + s.key);
      if (it == by_name.end())
        throw ImportError(path + ": storage '" + s.key + "' of record '" + r.name + "' has no record '" + folder +
                          s.key + "'");
      uint64_t need = 0;
      if (__builtin_mul_overflow(s.numel, s.itemsize, &need) || need > it->second->size)
        throw ImportError(path + ": storage '" + s.key + "' (" + s.type + " of " + std::to_string(s.numel) +
                          " elements) needs " + (need ? std::to_string(need) : std::string("more")) +
                          " bytes but its record '" + it->second->name + "' has " +
                          std::to_string(it->second->size));
    }
  }
}

}  // namespace fx::import_detail
