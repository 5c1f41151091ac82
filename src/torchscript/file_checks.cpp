// File-boundary checks: regular files of bounded size, zip directories that
// are consistent, libtorch messages cut to one useful line.
#include "file_checks.h"

#include <fx/error.h>

#include <c10/util/Exception.h>
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>

#include <libdeflate.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>
#include <tuple>
#include <sys/stat.h>
#include <unordered_set>

namespace fx::import_detail {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Reads n bytes at offset off of the archive; throws when they are not all there.
using ReadAt = std::function<std::string(uint64_t off, size_t n)>;

uint64_t le(const std::string& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

[[noreturn]] void damaged(const std::string& path, const std::string& what) {
  throw ImportError(path + ": damaged zip archive (" + what + ")");
}

std::vector<ZipRecord> parse_zip(const std::string& path, uint64_t size, const ReadAt& read) {
  constexpr uint64_t kEocd = 22, kMaxComment = 0xFFFF;
  if (size < kEocd) damaged(path, "too short for a zip archive: " + std::to_string(size) + " bytes");
  // The end-of-central-directory record: in the last 22 + 64 KiB.
  const uint64_t tail_start = size > kEocd + kMaxComment ? size - kEocd - kMaxComment : 0;
  const std::string tail = read(tail_start, static_cast<size_t>(size - tail_start));
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - kEocd + 1; i-- > 0;) {
    if (le(tail, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) damaged(path, "no end of central directory record; the file is truncated");
  uint64_t entries = le(tail, eocd + 10, 2);
  uint64_t cd_size = le(tail, eocd + 12, 4);
  uint64_t cd_offset = le(tail, eocd + 16, 4);
  const uint64_t eocd_pos = tail_start + eocd;
  // zip64: a locator right before the classic record points to the zip64
  // record. libtorch's zip reader (miniz) then takes the zip64 values even
  // where the classic record has its own, so both must agree (a zip64
  // central directory offset of 2^64-1 made it read before the buffer).
  bool zip64 = false;
  if (eocd_pos >= 20) {
    const std::string loc = read(eocd_pos - 20, 20);
    if (le(loc, 0, 4) == 0x07064b50) {
      const uint64_t z64 = le(loc, 8, 8);
      if (z64 > eocd_pos || eocd_pos - z64 < 56) damaged(path, "zip64 end of central directory out of range");
      const std::string rec = read(z64, 56);
      if (le(rec, 0, 4) != 0x06064b50) damaged(path, "bad zip64 end of central directory signature");
      const uint64_t entries64 = le(rec, 32, 8), size64 = le(rec, 40, 8), offset64 = le(rec, 48, 8);
      if ((entries != 0xFFFF && entries != entries64) || (cd_size != 0xFFFFFFFF && cd_size != size64) ||
          (cd_offset != 0xFFFFFFFF && cd_offset != offset64))
        damaged(path, "the zip64 end of central directory disagrees with the classic one");
      entries = entries64;
      cd_size = size64;
      cd_offset = offset64;
      zip64 = true;
    }
  }
  if (!zip64 && (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF))
    damaged(path, "zip64 locator missing");
  if (cd_offset > eocd_pos || cd_size > eocd_pos - cd_offset)
    damaged(path, "central directory at " + std::to_string(cd_offset) + " (+" + std::to_string(cd_size) +
                      " bytes) lies outside the file");
  if (entries > cd_size / 46) damaged(path, std::to_string(entries) + " entries do not fit the central directory");
  const std::string cd = read(cd_offset, static_cast<size_t>(cd_size));
  std::vector<ZipRecord> records;
  records.reserve(static_cast<size_t>(entries));
  struct Extent {
    uint64_t begin, end;  ///< local header to the end of the data
    size_t index;         ///< in records
  };
  std::vector<Extent> extents;
  std::unordered_set<std::string> names;
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    const std::string entry = "entry " + std::to_string(e);
    if (cd.size() - p < 46 || le(cd, p, 4) != 0x02014b50) damaged(path, entry + ": bad central directory header");
    const uint64_t flags = le(cd, p + 8, 2), method = le(cd, p + 10, 2);
    uint64_t csize = le(cd, p + 20, 4), usize = le(cd, p + 24, 4), lho = le(cd, p + 42, 4);
    const size_t nlen = le(cd, p + 28, 2), xlen = le(cd, p + 30, 2), clen = le(cd, p + 32, 2);
    if (cd.size() - p - 46 < nlen + xlen + clen) damaged(path, entry + ": header runs past the central directory");
    ZipRecord r;
    r.name = cd.substr(p + 46, nlen);
    const std::string rec = "record '" + r.name + "'";
    if (r.name.empty() || std::any_of(r.name.begin(), r.name.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      damaged(path, entry + ": a name that is empty or has control characters");
    if (!names.insert(r.name).second) damaged(path, rec + " appears twice");
    // zip64 extra field: the 64-bit values of the fields that are 0xFFFFFFFF, in this order.
    size_t x = p + 46 + nlen;
    const size_t xend = x + xlen;
    while (xend - x >= 4) {
      const uint64_t id = le(cd, x, 2), len = le(cd, x + 2, 2);
      if (xend - x - 4 < len) damaged(path, rec + ": bad extra field");
      if (id == 0x0001) {
        size_t q = x + 4;
        auto next = [&](uint64_t& field) {
          if (field != 0xFFFFFFFF) return;
          if (q + 8 > x + 4 + len) damaged(path, rec + ": short zip64 extra field");
          field = le(cd, q, 8);
          q += 8;
        };
        next(usize);
        next(csize);
        next(lho);
      }
      x += 4 + len;
    }
    if (flags & 0x1) damaged(path, rec + " is encrypted");
    // libtorch's zip reader (miniz) "extracts" an entry it takes for a
    // directory (MS-DOS attribute 0x10, or a name ending in '/') by reading
    // nothing and reporting success: the record's buffer stays uninitialised.
    if ((le(cd, p + 38, 4) & 0x10) != 0 || r.name.back() == '/') damaged(path, rec + " is marked as a directory");
    if (method == 0) {
      if (csize != usize)
        damaged(path,
                rec + ": stored size " + std::to_string(csize) + " differs from its size " + std::to_string(usize));
    } else if (method == 8) {  // deflate (TorchScript code): at most 1032:1
      if (usize / 1032 > csize + 1)
        damaged(path, rec + ": " + std::to_string(usize) + " bytes cannot come from " + std::to_string(csize) +
                          " compressed bytes");
    } else {
      damaged(path, rec + " uses compression method " + std::to_string(method) +
                        "; only stored and deflate records can be read");
    }
    if (lho > cd_offset || cd_offset - lho < 30) damaged(path, rec + ": local header outside the file");
    const std::string local = read(lho, 30);
    if (le(local, 0, 4) != 0x04034b50) damaged(path, rec + ": bad local header signature");
    const uint64_t data = lho + 30 + le(local, 26, 2) + le(local, 28, 2);
    if (data > cd_offset || csize > cd_offset - data)
      damaged(path, rec + " (" + std::to_string(csize) + " bytes at " + std::to_string(data) +
                        ") runs past the end of the data; the file is truncated or damaged");
    r.data_offset = data;
    r.size = usize;
    r.compressed = method != 0;
    r.crc32 = static_cast<uint32_t>(le(cd, p + 16, 4));
    extents.push_back({lho, data + csize, records.size()});
    records.push_back(std::move(r));
    p += 46 + nlen + xlen + clen;
  }
  // No two records may share bytes (a directory entry pointing into another
  // record would give that record's bytes under a second name and CRC).
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].begin < extents[i - 1].end)
      damaged(path, "record '" + records[extents[i].index].name + "' overlaps record '" +
                        records[extents[i - 1].index].name + "'");
  return records;
}

}  // namespace

uint64_t check_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw ImportError(path + ": no such file");
    throw ImportError(path + ": cannot be read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw ImportError(path + ": is a directory, not " + what);
  if (!S_ISREG(st.st_mode))
    throw ImportError(path + ": is " + file_kind(st.st_mode) + ", not " + what + " (a regular file)");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw ImportError(path + ": is " + std::to_string(size) + " bytes, more than the limit of " +
                      std::to_string(max_bytes) + " bytes for " + what);
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw ImportError(path + ": cannot be opened for reading: " + std::strerror(errno));
  return size;
}

std::vector<char> read_file(const std::string& path, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path + ": cannot be opened for reading");
  std::vector<char> data;
  try {
    data.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    throw ImportError(path + ": out of memory reading " + std::to_string(size) + " bytes");
  }
  in.read(data.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) throw ImportError(path + ": read failed (the file changed?)");
  return data;
}

std::vector<ZipRecord> check_zip(const std::string& path, const char* data, uint64_t size) {
  return parse_zip(path, size, [&](uint64_t off, size_t n) {
    if (off > size || n > size - off) damaged(path, "offset " + std::to_string(off) + " lies outside the file");
    return std::string(data + off, n);
  });
}

std::vector<ZipRecord> check_zip_file(const std::string& path, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path + ": cannot be opened for reading");
  return parse_zip(path, size, [&](uint64_t off, size_t n) {
    if (off > size || n > size - off) damaged(path, "offset " + std::to_string(off) + " lies outside the file");
    std::string buf(n, '\0');
    in.clear();
    in.seekg(static_cast<std::streamoff>(off));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n) throw ImportError(path + ": read failed (the file changed?)");
    return buf;
  });
}

uint32_t crc32(const char* data, size_t n) {
  return libdeflate_crc32(0, data, n);
}

CrcCheckedAdapter::CrcCheckedAdapter(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> inner,
                                     const std::vector<ZipRecord>& records, std::string path)
    : inner_(std::move(inner)), path_(std::move(path)) {
  for (const ZipRecord& r : records)
    if (!r.compressed && r.size > 0) stored_.emplace(r.data_offset, r);
}

size_t CrcCheckedAdapter::size() const { return inner_->size(); }

size_t CrcCheckedAdapter::read(uint64_t pos, void* buf, size_t n, const char* what) const {
  auto it = stored_.find(pos);
  if (it == stored_.end() || it->second.size != n) return inner_->read(pos, buf, n, what);
  // A whole stored record: read in pieces that stay in cache, each CRC'd right
  // after it is read (one pass over the record from memory, not two).
  constexpr size_t kPiece = size_t(256) << 10;
  auto* out = static_cast<char*>(buf);
  uint32_t crc = 0;
  size_t got = 0;
  while (got < n) {
    const size_t want = std::min(kPiece, n - got);
    const size_t piece = inner_->read(pos + got, out + got, want, what);
    crc = libdeflate_crc32(crc, out + got, piece);
    got += piece;
    if (piece != want) break;
  }
  if (got == n && crc == it->second.crc32) return got;
  if (damage_.empty())
    damage_ = path_ + ": damaged zip archive (record '" + it->second.name + "' does not match its CRC-32)";
  return 0;
}

void CrcCheckedAdapter::throw_if_damaged() const {
  if (!damage_.empty()) throw ImportError(damage_);
}

std::shared_ptr<CrcCheckedAdapter> checked_file_adapter(const std::string& path, const std::vector<ZipRecord>& records) {
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> file;
  try {
    file = std::make_shared<caffe2::serialize::FileAdapter>(path);
  } catch (...) {
    throw ImportError(path + ": cannot be opened for reading: " + current_exception_text());
  }
  return std::make_shared<CrcCheckedAdapter>(std::move(file), records, path);
}

namespace {

std::string read_record_bytes(const std::string& path, const ZipRecord& r, std::shared_ptr<void>& reader_cache) {
  if (!r.compressed) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes(static_cast<size_t>(r.size), '\0');
    in.seekg(static_cast<std::streamoff>(r.data_offset));
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in || static_cast<uint64_t>(in.gcount()) != r.size) throw ImportError(path + ": read failed (the file changed?)");
    return bytes;
  }
  try {
    if (!reader_cache) reader_cache = std::make_shared<caffe2::serialize::PyTorchStreamReader>(path);
    auto& reader = *std::static_pointer_cast<caffe2::serialize::PyTorchStreamReader>(reader_cache);
    // getRecord takes names under the archive's folder ("code/x.py.debug_pkl").
    const size_t slash = r.name.find('/');
    at::DataPtr data;
    size_t size = 0;
    std::tie(data, size) = reader.getRecord(r.name.substr(slash + 1));
    return std::string(static_cast<const char*>(data.get()), size);
  } catch (const ImportError&) {
    throw;
  } catch (...) {
    throw ImportError(path + ": record '" + r.name + "' cannot be read: " + current_exception_text());
  }
}

}  // namespace

std::string read_record(const std::string& path, const ZipRecord& r, std::shared_ptr<void>& reader_cache) {
  std::string bytes = read_record_bytes(path, r, reader_cache);
  if (bytes.size() != r.size || crc32(bytes.data(), bytes.size()) != r.crc32)
    throw ImportError(path + ": damaged zip archive (record '" + r.name + "' does not match its CRC-32)");
  return bytes;
}

std::string clean_torch_message(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  std::string position, source, reason;
  size_t lines_before_position = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    line = line.substr(b);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.rfind("Exception raised from", 0) == 0 || line.rfind("frame #", 0) == 0) break;
    if (line.find("Could this error message be improved?") != std::string::npos) continue;
    // TorchScript: 'File "code/x.py", line 14' (also after "Serialized"), then
    // source lines, then a "~~~~ <--- HERE" marker under the culprit.
    const size_t file = line.find("File \"");
    if (file != std::string::npos && line.find("\", line ", file) != std::string::npos) {
      if (position.empty()) {
        position = line.substr(file);
        lines_before_position = lines.size();
      }
      continue;
    }
    if (line.find("<--- HERE") != std::string::npos || line.find_first_not_of("~^") == std::string::npos) {
      if (source.empty() && !lines.empty() && !position.empty()) source = lines.back();
      continue;
    }
    lines.push_back(line);
  }
  std::string out = lines.empty() ? std::string("unknown error") : lines.front();
  // A TorchScript error's further sentences before its source position:
  // "Unknown builtin op: torchvision::nms." + "Could not find any similar
  // ops to torchvision::nms. This op may not exist ..." (not an overload list).
  for (size_t i = 1; i < lines_before_position; ++i) {
    if (lines[i] == "The following variants are available:") break;
    if (lines[i].find_first_not_of(":. ") != std::string::npos) out += " " + lines[i];
  }
  // "[enforce fail at inline_container.cc:222] . file not found: x/data.pkl" -> "file not found: x/data.pkl"
  if (out.rfind("[enforce fail at ", 0) == 0) {
    size_t close = out.find(']');
    if (close != std::string::npos) {
      out = out.substr(close + 1);
      size_t b = out.find_first_not_of(" .");
      out = b == std::string::npos ? std::string("internal check failed") : out.substr(b);
    }
  }
  // "isTuple() INTERNAL ASSERT FAILED at "x.h":1949, please report a bug to PyTorch. Expected Tuple but got Int"
  // -> "libtorch internal check isTuple() failed: Expected Tuple but got Int" (a damaged file, not a bug to report)
  const size_t assert_at = out.find(" INTERNAL ASSERT FAILED at ");
  const size_t report_at = out.find("please report a bug to PyTorch.");
  if (assert_at != std::string::npos && report_at != std::string::npos && report_at > assert_at) {
    std::string rest = out.substr(report_at + std::strlen("please report a bug to PyTorch."));
    const size_t b = rest.find_first_not_of(' ');
    rest = b == std::string::npos ? std::string() : rest.substr(b);
    out = "libtorch internal check " + out.substr(0, assert_at) + " failed" + (rest.empty() ? "" : ": " + rest);
  }
  if (out.find("Could this error message be improved?") != std::string::npos)
    out = out.substr(0, out.find("Could this error message be improved?"));
  if (out.size() > 5 && out.compare(out.size() - 5, 5, "here:") == 0) out.resize(out.size() - 5);
  while (!out.empty() && (out.back() == ' ' || out.back() == '.' || out.back() == ':')) out.pop_back();
  // "Arguments for call are not valid." + variants: the first variant's reason.
  for (size_t i = 0; i + 2 < lines.size(); ++i) {
    if (lines[i] == "The following variants are available:") {
      const std::string& schema = lines[i + 1];
      reason = schema.substr(0, schema.find('(')) + ": " + lines[i + 2];
      while (!reason.empty() && reason.back() == '.') reason.pop_back();
      break;
    }
  }
  if (!reason.empty()) out += " (" + reason + ")";
  if (out.empty()) out = lines.empty() ? std::string("unknown error") : lines.front();
  if (!position.empty()) out += " at " + position + (source.empty() ? "" : ": " + source);
  return out;
}

std::string current_exception_text() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return clean_torch_message(e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return "out of memory (a size in the file is too large)";
  } catch (const std::exception& e) {
    return clean_torch_message(e.what());
  } catch (...) {
    return "unknown error";
  }
}

std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else out += c;
  }
  return out;
}

}  // namespace fx::import_detail
