#pragma once
// The damaged / inconsistent files of the reliability tests, generated once
// per build directory by python/make_corrupt_files.py (Debian's python3 with torch).

#include "fx_paths.h"

#include <cstdlib>
#include <string>

namespace fx::testing {

/// The directory holding the generated files; generates them on first use
/// (flock: safe when several test processes start at once; regenerated when
/// the script changes).
inline const std::string& corrupt_dir() {
  static const std::string dir = [] {
    const std::string d = std::string(FX_BINARY_DIR) + "/corrupt_files";
    const std::string script = std::string(FX_SOURCE_DIR) + "/python/make_corrupt_files.py";
    const std::string stamp = d + "/.done";
    const std::string cmd = "mkdir -p '" + d + "' && flock '" + d + "/.lock' sh -c \"[ '" + stamp + "' -nt '" + script +
                            "' ] || (/usr/bin/python3 '" + script + "' '" + d + "' >/dev/null && touch '" + stamp +
                            "')\"";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return d;
  }();
  return dir;
}

/// The path of generated file `name` ("short_storage.pt").
inline std::string corrupt_path(const std::string& name) { return corrupt_dir() + "/" + name; }

}  // namespace fx::testing
