#pragma once
// The small TorchScript files of the importer tests, generated once per build
// directory by python/make_import_cases.py (Debian's python3 with torch).

#include "fx_paths.h"

#include <cstdlib>
#include <string>

namespace fx::testing {

/// The directory holding the generated cases (NAME.pt, NAME.input.pt,
/// NAME.output.pt); generates them on first use. Safe when several test
/// processes start at once (flock), regenerated when the script changes.
inline const std::string& cases_dir() {
  static const std::string dir = [] {
    const std::string d = std::string(FX_BINARY_DIR) + "/import_cases";
    const std::string script = std::string(FX_SOURCE_DIR) + "/python/make_import_cases.py";
    const std::string stamp = d + "/.done";
    const std::string cmd = "mkdir -p '" + d + "' && flock '" + d + "/.lock' sh -c \"[ '" + stamp + "' -nt '" +
                            script + "' ] || (/usr/bin/python3 '" + script + "' '" + d + "' >/dev/null && touch '" +
                            stamp + "')\"";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return d;
  }();
  return dir;
}

/// The path of case file `name` ("simple.pt").
inline std::string case_path(const std::string& name) { return cases_dir() + "/" + name; }

}  // namespace fx::testing
