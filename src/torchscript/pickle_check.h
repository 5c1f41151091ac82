#pragma once
// A pickle walker run before libtorch's Unpickler sees a pickle: every opcode
// must be one torch writes (a whitelist), every argument must lie inside the
// record, and a simulated stack must never underflow, pop a MARK as a value,
// GET an unset memo slot or end without a value (libtorch's Unpickler does
// not check these and crashes on them). It also collects the storages the
// pickle references (BINPERSID ('storage', torch.XStorage, key, location,
// numel)) so their records can be checked against the sizes they claim.

#include "file_checks.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

// The namespace is still import_detail: these helpers moved from src/import to
// src/torchscript (fxcpp_torchscript) so that fx::load needs no importer; the
// name was kept to limit churn.
namespace fx::import_detail {

/// A storage a pickle references by persistent id.
struct StorageRef {
  std::string key;        ///< the record name under the archive's tensor folder ("0")
  std::string type;       ///< "FloatStorage"
  uint64_t numel = 0;     ///< elements it claims
  uint64_t itemsize = 0;  ///< bytes per element of `type`
};

/// Walks the pickle `data` (record `record` of file `path`). Throws
/// fx::ImportError "PATH: damaged pickle in record 'RECORD' at byte N (...)".
std::vector<StorageRef> check_pickle(const std::string& path, const std::string& record, const char* data, size_t size);

/// The pickle `data` (of record `record` of file `path`) as libtorch 1.13's
/// Unpickler reads it: Python's pickler writes the item of a one-element
/// list as `item APPEND` and the entry of a one-entry dict as `key value
/// SETITEM`, opcodes that Unpickler does not know; they become `MARK item
/// APPENDS` and `MARK key value SETITEMS` (what a batch of several is).
/// `data` itself when there is nothing to rewrite. Throws as check_pickle.
/// (torch.save writes protocol 2: no FRAMEs, whose lengths the inserted
/// MARKs would break; protocol 4's MEMOIZE is refused by check_pickle.)
std::string with_batched_items(const std::string& path, const std::string& record, std::string data);

/// First what libtorch's PyTorchStreamReader checks when it opens an archive
/// (the first record in a folder, a version record with a supported format
/// version: it throws from its constructor and leaks its zip reader), then
/// check_pickle on every "*.pkl" / "*.debug_pkl" record of the archive
/// (`read` inflates deflated ones: torch.jit.save deflates debug_pkl), and
/// each referenced storage against its record: present, and at least
/// numel × itemsize bytes. `read` gives a record's bytes.
void check_pickles(const std::string& path, const std::vector<ZipRecord>& records,
                   const std::function<std::string(const ZipRecord&)>& read);

}  // namespace fx::import_detail
