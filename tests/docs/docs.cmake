# The README and docs/ stay true to the code: every ```cpp block of README.md
# (and every one in docs/*.md that names an example) is an excerpt of an
# example ctest builds and runs, and every relative link leads to a file
# (python/check_readme_snippets.py). Included by the top-level CMakeLists.txt.
add_test(NAME docs.readme_snippets COMMAND /usr/bin/python3 ${FX_SRC}/python/check_readme_snippets.py ${FX_SRC})
set_tests_properties(docs.readme_snippets PROPERTIES TIMEOUT 60)
# docs/benchmarks.md is generated (scripts/bench_docs.py --render, the last step of `make bench`) from
# the saved runs and text parts in docs/bench/: --check fails with a diff when the page and its parts differ.
add_test(NAME docs.benchmarks_render COMMAND /usr/bin/python3 ${FX_SRC}/scripts/bench_docs.py --check)
set_tests_properties(docs.benchmarks_render PROPERTIES TIMEOUT 60)
# bench_ort.py --hold-avx2's copy of ONNX Runtime (scripts/ort_hold_avx2.py), on made-up libraries: the
# one byte patched, any other library refused.
add_test(NAME docs.ort_hold_avx2 COMMAND /usr/bin/python3 ${FX_SRC}/tests/docs/check_ort_hold_avx2.py)
set_tests_properties(docs.ort_hold_avx2 PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "^ort_hold_avx2 ok\n$")
# scripts/compare_layers_ort.py's reading and pairing of ONNX Runtime's and fxcpp's per-node profiles,
# on made-up ones.
add_test(NAME docs.compare_layers_ort COMMAND /usr/bin/python3 ${FX_SRC}/tests/docs/check_compare_layers_ort.py)
set_tests_properties(docs.compare_layers_ort PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "^compare_layers_ort ok\n$")
# bench_ort.py's (and compare_layers_ort.py's) pinning of a 1-thread row's two processes to one CPU.
add_test(NAME docs.bench_ort_pinning COMMAND /usr/bin/python3 ${FX_SRC}/tests/docs/check_bench_ort_pinning.py)
set_tests_properties(docs.bench_ort_pinning PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "^bench_ort_pinning ok\n$")
# bench_optimize.py's bf16 table where the bf16 engine kept float32 kernels (no oneDNN bf16 kernels on the CPU).
add_test(NAME docs.bench_optimize_bf16 COMMAND /usr/bin/python3 ${FX_SRC}/tests/docs/check_bench_optimize_bf16.py)
set_tests_properties(docs.bench_optimize_bf16 PROPERTIES TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "^bench_optimize_bf16 ok\n$")
