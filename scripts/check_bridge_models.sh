#!/bin/sh
# Every torchvision classifier torch.fx.symbolic_trace can trace, through the
# Python -> C++ bridge (issue 28): saved by python/fxcpp_bridge.py, `fxcpp run`
# equal to eager, `run --optimize` within 1e-4, Python -> C++ -> Python keeping
# names, targets and code (python/test_fxcpp_bridge.py symbolic-trace, one
# process per model). ctest runs one model of each family; this runs them all
# (about 30 minutes, some GB of disk in a temporary folder).
#   scripts/check_bridge_models.sh [BUILD_DIR]     (default: build)
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-build}
OUT=$(mktemp -d) || exit 2
trap 'rm -rf "$OUT"' EXIT
names=$(OMP_NUM_THREADS=1 /usr/bin/python3 python/test_fxcpp_bridge.py classifier-names 2>"$OUT/untraced.txt") || exit 2
names=$(echo "$names" | grep -v '^OK$')  # the driver's last line
sed 's/^/skipped: /' "$OUT/untraced.txt"
passed=0 failed=""
for m in $names; do
  if OMP_NUM_THREADS=1 /usr/bin/python3 python/test_fxcpp_bridge.py symbolic-trace "$OUT" "$BUILD/fxcpp" "$m" \
       >"$OUT/log" 2>&1; then
    grep "relative" "$OUT/log"
    passed=$((passed + 1))
  else
    echo "FAILED: $m"; grep -v -i "warn" "$OUT/log" | tail -3
    failed="$failed $m"
  fi
done
echo "$passed passed${failed:+, failed:$failed}"
[ -z "$failed" ]
