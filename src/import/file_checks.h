#pragma once
// Checks at the file boundary, before libtorch sees a byte: the path is a
// regular file of bounded size, the zip archive's directory is consistent
// (every record lies inside the file, sizes are plausible), and libtorch's
// error texts are turned into one line naming the file.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fx::import_detail {

/// One record of a zip archive, as its central directory describes it.
struct ZipRecord {
  std::string name;
  uint64_t data_offset = 0;  ///< where the (stored) bytes start
  uint64_t size = 0;         ///< uncompressed size
  bool compressed = false;   ///< deflate (TorchScript writes its code so)
  uint32_t crc32 = 0;        ///< CRC-32 of the uncompressed bytes
};

/// Throws fx::ImportError unless `path` names a readable regular file of at
/// most `max_bytes` bytes ("no such file", "is a directory", "is not a
/// regular file (a character device)", "is N bytes, more than the limit of
/// M"). Returns the file's size.
uint64_t check_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what);

/// Reads the whole file (after check_regular_file). Throws fx::ImportError.
std::vector<char> read_file(const std::string& path, uint64_t size);

/// Parses and checks the zip directory of `data` (a whole file in memory):
/// end-of-central-directory record (zip64 included), every entry's header,
/// name, local header, extent; stored or deflate records only (a deflate
/// record may not claim more than 1032 bytes per compressed byte). Throws
/// fx::ImportError "PATH: damaged zip archive (...)" on the first problem.
std::vector<ZipRecord> check_zip(const std::string& path, const char* data, uint64_t size);

/// The same for a file on disk, reading only the directory and headers.
std::vector<ZipRecord> check_zip_file(const std::string& path, uint64_t size);

/// The bytes of record `r` of the checked archive `path` (stored records are
/// read directly; deflated ones through libtorch's zip reader, created once
/// in `reader_cache`), checked against the record's CRC-32 (libtorch's zip
/// reader is built without CRC checks and inflates damaged data to garbage).
/// Throws fx::ImportError.
std::string read_record(const std::string& path, const ZipRecord& r, std::shared_ptr<void>& reader_cache);

/// CRC-32 (zip's polynomial) of `n` bytes.
uint32_t crc32(const char* data, size_t n);

/// libtorch's message without backtrace, "[enforce fail at ...]" prefixes,
/// "Could this error message be improved?" boilerplate and
/// "Exception raised from" lines, on one line. A TorchScript error keeps
/// every line of its reason (up to an overload list), the first
/// `File "...", line N` position and that position's first source line.
std::string clean_torch_message(const std::string& message);

/// clean_torch_message of the current exception (call inside a catch block):
/// c10::Error without backtrace, std::bad_alloc as "out of memory".
std::string current_exception_text();

}  // namespace fx::import_detail
