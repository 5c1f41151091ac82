# `fxcpp bench-worker` (issue 24, the fxcpp side of scripts/bench_ort.py):
# its protocol and engines' outputs (tests/cli/check_bench_worker.py, on
# resnet18 64x64 at batch 2), and bad arguments as one line, exit status 2.
# Uses fx_cli_bad_input of tests.cmake (file(GLOB) sorts it first).
add_test(NAME cli.bench_worker
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/cli/check_bench_worker.py ${FX_CLI}
                 ${FX_MODELS_DIR}/resnet18.pt ${FX_MODELS_DIR}/resnet18.input.pt)
set_tests_properties(cli.bench_worker PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "^bench worker ok\n$")
fx_cli_bad_input(bench_worker_unknown_engine
                 "^fxcpp bench-worker: --engine: unknown engine 'fxcpp' \\(valid: torchscript_opt, fxcpp_opt\\)\n$"
                 bench-worker ${FX_MODELS_DIR}/resnet18.pt --input ${FX_MODELS_DIR}/resnet18.input.pt --engine fxcpp)
fx_cli_bad_input(bench_worker_no_input "^fxcpp bench-worker: --input IN.pt is required\n$"
                 bench-worker ${FX_MODELS_DIR}/resnet18.pt)
set_tests_properties(cli.bench_worker_unknown_engine cli.bench_worker_no_input PROPERTIES FIXTURES_REQUIRED fx_models_0)
