#pragma once
// Checks at the file boundary, before libtorch sees a byte: the path is a
// regular file of bounded size, the zip archive's directory is consistent
// (every record lies inside the file, sizes are plausible), and libtorch's
// error texts are turned into one line naming the file.

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

// The namespace is still import_detail: these helpers moved from src/import to
// src/torchscript (fxcpp_torchscript) so that fx::load needs no importer; the
// name was kept to limit churn.
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

/// CRC-32 (zip's polynomial) of `n` bytes (libdeflate's: PCLMUL folding where the CPU has it).
uint32_t crc32(const char* data, size_t n);

/// A PyTorchStreamReader source that checks every stored record it hands out
/// against the CRC-32 of the (checked) zip directory, as the record is read:
/// libtorch's zip reader is built without CRC checks, and a changed byte in a
/// weight would otherwise load as a silently different model. miniz reads a
/// stored record in one read of exactly its extent, so the check is one pass
/// over bytes just read, with no second read of the file. A read whose bytes
/// do not match returns nothing, so the reader fails at that record;
/// throw_if_damaged() then throws the reason ("PATH: damaged zip archive
/// (record 'NAME' does not match its CRC-32)"). Other reads (headers, the
/// directory, deflated records, which read_record checks) pass through.
class CrcCheckedAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  /// Reads through `inner`; `records` come from check_zip / check_zip_file of
  /// the same bytes; `path` starts the error text.
  CrcCheckedAdapter(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> inner,
                    const std::vector<ZipRecord>& records, std::string path);
  size_t size() const override;
  size_t read(uint64_t pos, void* buf, size_t n, const char* what) const override;
  /// Throws fx::ImportError naming the file and the first record whose bytes
  /// did not match its CRC-32, if any read so far did not.
  void throw_if_damaged() const;

 private:
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> inner_;
  std::unordered_map<uint64_t, ZipRecord> stored_;  ///< stored records by data offset
  std::string path_;
  mutable std::string damage_;  ///< the first mismatch's error text
};

/// A CrcCheckedAdapter over the file `path` (already checked: `records` is its directory).
std::shared_ptr<CrcCheckedAdapter> checked_file_adapter(const std::string& path, const std::vector<ZipRecord>& records);

/// libtorch's message without backtrace, "[enforce fail at ...]" prefixes,
/// "Could this error message be improved?" boilerplate and
/// "Exception raised from" lines, on one line. A TorchScript error keeps
/// every line of its reason (up to an overload list), the first
/// `File "...", line N` position and that position's first source line.
std::string clean_torch_message(const std::string& message);

/// clean_torch_message of the current exception (call inside a catch block):
/// c10::Error without backtrace, std::bad_alloc as "out of memory".
std::string current_exception_text();

/// `text` on one line: control characters shown escaped (\n, \x01), as a
/// name or a parser's message read from a damaged file may hold them.
std::string one_line(const std::string& text);

}  // namespace fx::import_detail
