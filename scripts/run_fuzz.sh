#!/bin/bash
# Runs every libFuzzer program of a FXCPP_FUZZ build (make fuzz) for SECONDS
# each and prints executions and findings per target.
#   scripts/run_fuzz.sh BUILD_DIR SECONDS [TARGET...]
#   FUZZ_RUNS=N scripts/run_fuzz.sh ...   also stop after N executions
#                                         (libFuzzer -runs; whichever comes first)
# BUILD_DIR/fuzz/<name>_fuzz        the program
# BUILD_DIR/fuzz/<name>.dirs        its seed folders (+ tests/corpus/<name>)
# BUILD_DIR/fuzz/corpus/<name>/     the growing corpus (kept between runs)
# BUILD_DIR/fuzz/findings/<name>/   crash-*, timeout-*, oom-*, leak-* inputs (the
#                                   findings: copy one into tests/corpus/<name>/
#                                   once fixed) and slow-unit-* (> 20 s wall
#                                   clock, not counted: a loaded machine)
# BUILD_DIR/fuzz/<name>.log         libFuzzer's output
# Options: -max_len 32768 (the largest seed is ~20 KB), -timeout 20 s per
# input, -rss_limit_mb 4096. ASan's leak check is off while fuzzing
# (libtorch's lazily filled caches look like leaks of one input); leaks are
# checked by make check-sanitize.
set -u
build=$1
seconds=${2:-60}
shift 2 || true
fuzz=$build/fuzz
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for d in "$fuzz"/*.dirs; do names+=("$(basename "$d" .dirs)"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1
status=0
printf '%-12s %10s %12s %8s %9s\n' target seconds executions exec/s findings
for name in "${names[@]}"; do
  mkdir -p "$fuzz/corpus/$name" "$fuzz/findings/$name"
  mapfile -t dirs < "$fuzz/$name.dirs"
  existing=()
  for d in "${dirs[@]}"; do [ -d "$d" ] && existing+=("$d"); done
  "$fuzz/${name}_fuzz" -max_total_time="$seconds" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -max_len=32768 -timeout=20 -report_slow_units=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$fuzz/findings/$name/" \
    "$fuzz/corpus/$name" "${existing[@]}" > "$fuzz/$name.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fuzz/$name.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$fuzz/$name.log" | tail -1)
  found=$(find "$fuzz/findings/$name" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  printf '%-12s %10s %12s %8s %9s\n' "$name" "$seconds" "${execs:-?}" "${rate:-?}" "$found"
  if [ $rc -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    grep -m3 -E "ERROR|fxcpp fuzz finding|SUMMARY|Test unit written" "$fuzz/$name.log" | sed 's/^/  /'
  fi
done
exit $status
