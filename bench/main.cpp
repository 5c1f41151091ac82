// fx_bench: every benchmark of fxcpp in one program (see scripts/bench_table.py).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
