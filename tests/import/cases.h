#pragma once
// The small TorchScript files of the importer tests, generated once per build
// directory by python/make_import_cases.py (Debian's python3 with torch).

#include "fx_paths.h"

#include <cstdlib>
#include <string>

namespace fx::testing {

/// Runs python/SCRIPT into FX_BINARY_DIR/SUBDIR unless it ran since the script
/// last changed; the directory, or "" when the script failed. Safe when
/// several test processes start at once (flock).
inline std::string generate_cases(const std::string& script_name, const std::string& subdir) {
  const std::string d = std::string(FX_BINARY_DIR) + "/" + subdir;
  const std::string script = std::string(FX_SOURCE_DIR) + "/python/" + script_name;
  const std::string stamp = d + "/.done";
  const std::string cmd = "mkdir -p '" + d + "' && flock '" + d + "/.lock' sh -c \"[ '" + stamp + "' -nt '" +
                          script + "' ] || (/usr/bin/python3 '" + script + "' '" + d + "' >/dev/null && touch '" +
                          stamp + "')\"";
  if (std::system(cmd.c_str()) != 0) return std::string();
  return d;
}

/// The directory holding the generated cases (NAME.pt, NAME.input.pt,
/// NAME.output.pt) of python/make_import_cases.py; generated on first use.
inline const std::string& cases_dir() {
  static const std::string dir = generate_cases("make_import_cases.py", "import_cases");
  return dir;
}

/// The cases of python/make_control_flow_cases.py (run-time control flow).
inline const std::string& control_flow_cases_dir() {
  static const std::string dir = generate_cases("make_control_flow_cases.py", "control_flow_cases");
  return dir;
}

/// The path of case file `name` ("simple.pt").
inline std::string case_path(const std::string& name) { return cases_dir() + "/" + name; }

}  // namespace fx::testing
