"""Writes a goldens file the C++ tests read with tests/common/golden_string.h."""
import json
import os


def write_goldens(path, goldens):
    """Writes {key: string} as sorted, indented JSON and says so."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)} ({len(goldens)} goldens)")
