#pragma once
// Reading tests/passes/goldens/foldnorm.json (written by
// python/goldens/foldnorm_goldens.py) for the constant folding and
// normalization differential tests: a minimal JSON reader (no JSON library
// is a dependency of fxcpp) and the canonical form both sides compare.

#include "fx_paths.h"

#include <fx/argument.h>
#include <fx/node.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fx_test {

/// A parsed JSON value; str() prints it canonically (for comparisons).
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  double num = 0;
  std::string s;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;

  const Json& operator[](const std::string& k) const {
    auto it = obj.find(k);
    if (it == obj.end()) throw std::runtime_error("golden has no key '" + k + "'");
    return it->second;
  }
  const Json& operator[](size_t i) const { return arr.at(i); }
  size_t size() const { return kind == Kind::Array ? arr.size() : obj.size(); }

  /// Canonical text: numbers as %.9g, so 2 and 2.0 print the same.
  std::string str() const {
    switch (kind) {
      case Kind::Null: return "null";
      case Kind::Bool: return b ? "true" : "false";
      case Kind::Number: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", num);
        return buf;
      }
      case Kind::String: return "\"" + s + "\"";
      case Kind::Array: {
        std::string out = "[";
        for (size_t i = 0; i < arr.size(); ++i) out += (i ? ", " : "") + arr[i].str();
        return out + "]";
      }
      case Kind::Object: {
        std::string out = "{";
        bool first = true;
        for (const auto& kv : obj) {
          out += (first ? "" : ", ") + std::string("\"") + kv.first + "\": " + kv.second.str();
          first = false;
        }
        return out + "}";
      }
    }
    return "";
  }
  std::vector<double> numbers() const {
    std::vector<double> out;
    for (const auto& v : arr) out.push_back(v.num);
    return out;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : t_(std::move(text)) {}
  Json parse() {
    Json v = value();
    ws();
    if (i_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("golden JSON: " + what + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(const char* lit) {
    size_t n = std::char_traits<char>::length(lit);
    if (t_.compare(i_, n, lit) != 0) return false;
    i_ += n;
    return true;
  }
  std::string string() {
    if (t_[i_++] != '"') fail("expected a string");
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (c == '\\') {
        char e = t_[i_++];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += c;
      }
    }
    ++i_;
    return out;
  }
  Json value() {
    ws();
    Json v;
    if (i_ >= t_.size()) fail("unexpected end");
    char c = t_[i_];
    if (c == '{') {
      v.kind = Json::Kind::Object;
      ++i_;
      ws();
      if (t_[i_] == '}') return ++i_, v;
      for (;;) {
        ws();
        std::string k = string();
        ws();
        if (t_[i_++] != ':') fail("expected ':'");
        v.obj[k] = value();
        ws();
        if (t_[i_] == ',') { ++i_; continue; }
        if (t_[i_++] != '}') fail("expected '}'");
        return v;
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::Array;
      ++i_;
      ws();
      if (t_[i_] == ']') return ++i_, v;
      for (;;) {
        v.arr.push_back(value());
        ws();
        if (t_[i_] == ',') { ++i_; continue; }
        if (t_[i_++] != ']') fail("expected ']'");
        return v;
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::String;
      v.s = string();
      return v;
    }
    if (eat("null")) return v;
    if (eat("true")) { v.kind = Json::Kind::Bool; v.b = true; return v; }
    if (eat("false")) { v.kind = Json::Kind::Bool; return v; }
    size_t end = 0;
    v.kind = Json::Kind::Number;
    v.num = std::stod(t_.substr(i_, 40), &end);
    if (end == 0) fail("bad value");
    i_ += end;
    return v;
  }
  std::string t_;
  size_t i_ = 0;
};

/// The goldens, parsed once.
inline const Json& foldnorm_goldens() {
  static const Json j = [] {
    std::ifstream f(std::string(FX_SOURCE_DIR) + "/tests/passes/goldens/foldnorm.json");
    if (!f) throw std::runtime_error("cannot open tests/passes/goldens/foldnorm.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return JsonParser(ss.str()).parse();
  }();
  return j;
}

/// An fxcpp Argument in the goldens' form: nodes as "%name" (or what
/// `rename` says), lists and tuples as arrays, numbers, bools, null.
inline Json to_json(const fx::Argument& a, const std::map<const fx::Node*, std::string>& rename = {}) {
  Json j;
  switch (a.kind()) {
    case fx::Argument::Kind::None: return j;
    case fx::Argument::Kind::Bool: j.kind = Json::Kind::Bool; j.b = a.to_bool(); return j;
    case fx::Argument::Kind::Int:
    case fx::Argument::Kind::Double: j.kind = Json::Kind::Number; j.num = a.to_double(); return j;
    case fx::Argument::Kind::Node: {
      j.kind = Json::Kind::String;
      auto it = rename.find(a.to_node());
      j.s = it != rename.end() ? it->second : "%" + a.to_node()->name();
      return j;
    }
    case fx::Argument::Kind::List:
    case fx::Argument::Kind::Tuple:
      j.kind = Json::Kind::Array;
      for (const auto& x : a.items()) j.arr.push_back(to_json(x, rename));
      return j;
    default: j.kind = Json::Kind::String; j.s = a.str(); return j;
  }
}

/// A Json array of strings / values.
inline Json json_array(std::vector<Json> items) {
  Json j;
  j.kind = Json::Kind::Array;
  j.arr = std::move(items);
  return j;
}
inline Json json_string(std::string s) {
  Json j;
  j.kind = Json::Kind::String;
  j.s = std::move(s);
  return j;
}

}  // namespace fx_test
