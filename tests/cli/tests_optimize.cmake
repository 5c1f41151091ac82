# `fxcpp run --optimize` and `fxcpp bench` (issue 9): the optimised module
# gives the outputs of the plain one (within tolerance: fp32 1e-4, bf16 5e-2
# of max |output|), bench --json has every engine with positive times and
# ratio = time / TorchScript-opt time (structure, not speed), and bad
# arguments are one line and exit status 2.
# Uses fx_cli_one_line of tests.cmake, included before this file (file(GLOB)
# sorts: tests.cmake < tests_optimize.cmake).
set(FX_OPT_DIR ${FX_BIN}/cli_optimize)
set(FX_OPT_MODEL ${FX_MODELS_DIR}/resnet18.pt)
set(FX_OPT_INPUT ${FX_MODELS_DIR}/resnet18.input.pt)

# run and run --optimize [--bf16] on resnet18 (64x64), outputs compared by tests/cli/compare_outputs.py.
foreach(variant "fp32;;1e-4" "bf16;--bf16;5e-2")
  list(GET variant 0 name)
  list(GET variant 1 flag)
  list(GET variant 2 tol)
  add_test(NAME cli.run_optimize_${name}
           COMMAND sh -c "mkdir -p \"$1\" && \"$0\" run \"$2\" -i \"$3\" -o \"$1/plain.${name}.pt\" >/dev/null && \"$0\" run \"$2\" -i \"$3\" -o \"$1/opt.${name}.pt\" --optimize ${flag} && /usr/bin/python3 \"$4\" \"$1/plain.${name}.pt\" \"$1/opt.${name}.pt\" ${tol}"
                   ${FX_CLI} ${FX_OPT_DIR} ${FX_OPT_MODEL} ${FX_OPT_INPUT} ${FX_SRC}/tests/cli/compare_outputs.py)
  set_tests_properties(cli.run_optimize_${name} PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                       ENVIRONMENT "OMP_NUM_THREADS=1"
                       PASS_REGULAR_EXPRESSION "tensor \\[1, 1000\\] Float.*wrote .*opt.${name}.pt.*within tolerance")
endforeach()
# --report: the optimiser's report, one line on stderr.
add_test(NAME cli.run_optimize_report COMMAND ${FX_CLI} run ${FX_OPT_MODEL} -i ${FX_OPT_INPUT} --optimize --report)
set_tests_properties(cli.run_optimize_report PROPERTIES FIXTURES_REQUIRED fx_models_0 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "fxcpp run: optimised in [0-9.]+ ms: [0-9]+ -> [0-9]+ nodes; [0-9]+ modules frozen, [0-9]+ batch norms folded, [0-9]+ no-ops removed; oneDNN: [0-9]+ convs, [0-9]+ linears, [0-9]+ matmuls, [0-9]+ fused post-ops, float32 kernels \\([a-z0-9_]+\\)\n.*tensor \\[1, 1000\\] Float")

# --bf16 where oneDNN has no bf16 kernels (held at AVX2 here, as on an AMD
# EPYC Zen 3): float32 kernels, a one-line warning naming the ISA, exit 0,
# and the outputs of the plain run within float32's tolerance.
add_test(NAME cli.run_optimize_bf16_on_avx2
         COMMAND sh -c "mkdir -p \"$1\" && \"$0\" run \"$2\" -i \"$3\" -o \"$1/plain.avx2.pt\" >/dev/null && \"$0\" run \"$2\" -i \"$3\" -o \"$1/opt.avx2.pt\" --optimize --bf16 --report 2>&1 && /usr/bin/python3 \"$4\" \"$1/plain.avx2.pt\" \"$1/opt.avx2.pt\" 1e-4"
                 ${FX_CLI} ${FX_OPT_DIR} ${FX_OPT_MODEL} ${FX_OPT_INPUT} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_optimize_bf16_on_avx2 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2"
                     PASS_REGULAR_EXPRESSION "^fxcpp run: warning: bf16: oneDNN has no bfloat16 kernels on this CPU \\(ISA avx2; bf16 needs AVX-512\\): float32 kernels\nfxcpp run: optimised in [^\n]*, float32 kernels \\(avx2\\); 1 linears timed, [01] on ATen \\(BLAS\\)\nfxcpp run: linear \\[1, 512\\] -> 1000 \\(1 layer\\): oneDNN [0-9.]+ ms, ATen [0-9.]+ ms: [^\n]+\ntensor \\[1, 1000\\] Float.*within tolerance")

# A torch.jit.trace export (issue 24: traced leaves keep their tensors, not
# their configuration; they freeze from their own forward graphs): every
# leaf frozen, the scripted export's 20 convolutions on oneDNN. The linear
# layer's kernel is fixed (below AVX-512 Auto times oneDNN's against ATen's,
# which either may win on a loaded machine).
add_test(NAME cli.run_optimize_traced
         COMMAND sh -c "mkdir -p \"$1\" && \"$0\" run \"$2\" -i \"$3\" -o \"$1/plain.traced.pt\" >/dev/null && \"$0\" run \"$2\" -i \"$3\" -o \"$1/opt.traced.pt\" --optimize --linear-kernel onednn --report 2>&1 && /usr/bin/python3 \"$4\" \"$1/plain.traced.pt\" \"$1/opt.traced.pt\" 1e-4"
                 ${FX_CLI} ${FX_OPT_DIR} ${FX_MODELS_DIR}/resnet18.trace.pt ${FX_OPT_INPUT} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_optimize_traced PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "52 modules frozen, 20 batch norms folded.*oneDNN: 20 convs, 1 linears.*within tolerance")

# bench --json: structure checked by tests/cli/check_bench_json.py (4 engines; 5 with --bf16;
# with --engine NAME, repeatable: only those, in the usual order; without
# TorchScript-opt the ratio is null, without eager TorchScript the max diff;
# the process's peak resident memory is reported).
foreach(variant "json_fp32;;" "json_bf16;--bf16;--bf16" "engine_opt;--engine fxcpp_opt;--engines fxcpp_opt"
                "engine_ts_opt_fxcpp;--engine fxcpp --engine=torchscript_opt;--engines torchscript_opt,fxcpp"
                "engine_unplanned;--engine fxcpp_opt_unplanned --engine torchscript --engine fxcpp_opt;--engines torchscript,fxcpp_opt,fxcpp_opt_unplanned"
                "engine_direct;--engine fxcpp_opt_direct --engine fxcpp_opt --engine torchscript;--engines torchscript,fxcpp_opt,fxcpp_opt_direct"
                "engine_onednn_linear;--engine fxcpp_opt_onednn_linear --engine fxcpp_opt;--engines fxcpp_opt,fxcpp_opt_onednn_linear")
  list(GET variant 0 name)
  list(GET variant 1 flags)
  list(GET variant 2 check)
  add_test(NAME cli.bench_${name}
           COMMAND sh -c "\"$0\" bench \"$1\" --input \"$2\" --iters 2 --warmup 1 --batch 2 --json ${flags} | /usr/bin/python3 \"$3\" 2 ${check}"
                   ${FX_CLI} ${FX_OPT_MODEL} ${FX_OPT_INPUT} ${FX_SRC}/tests/cli/check_bench_json.py)
  set_tests_properties(cli.bench_${name} PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "^bench json ok\n$")
endforeach()
# The table: the batch repeated along dim 0, TorchScript-opt's own ratio 1, the optimiser's report.
add_test(NAME cli.bench_table COMMAND ${FX_CLI} bench ${FX_OPT_MODEL} --input ${FX_OPT_INPUT} --iters 1 --warmup 0 --batch 3 --threads 2)
set_tests_properties(cli.bench_table PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "inputs \\[3, 3, 64, 64\\] Float, threads 2, BLAS [a-z]+ .*1 timed rounds after 0 warm-up.*\nTorchScript opt +[0-9.]+ +[0-9.]+ +1\\.000 .*\nfxcpp optimized +[0-9.]+ .*fxcpp optimized: optimised in")
# The matmul roofline (a small one: structure only).
add_test(NAME cli.bench_roofline
         COMMAND sh -c "\"$0\" bench --roofline --size 128 --seconds 0.05 --json | /usr/bin/python3 \"$1\" --roofline"
                 ${FX_CLI} ${FX_SRC}/tests/cli/check_bench_json.py)
set_tests_properties(cli.bench_roofline PROPERTIES PASS_REGULAR_EXPRESSION "^bench json ok\n$")
# OpenBLAS's kernel set named beside the BLAS, and a warning where it runs its generic Prescott
# kernels (as OpenBLAS 0.3.21 does on CPUs it does not know; OPENBLAS_CORETYPE forces it here).
add_test(NAME cli.bench_openblas_core
         COMMAND sh -c "OPENBLAS_CORETYPE=Haswell \"$0\" bench --roofline --size 64 --seconds 0.01 2>&1 | head -1; OPENBLAS_CORETYPE=Prescott \"$0\" bench --roofline --size 64 --seconds 0.01 2>&1 | head -2"
                 ${FX_CLI})
set_tests_properties(cli.bench_openblas_core PROPERTIES PASS_REGULAR_EXPRESSION
                     "^matmul roofline: 64x64x64, threads [0-9]+, BLAS openblas \\([^\n]*libblas.so.3, core Haswell\\)\nfxcpp bench: warning: OpenBLAS runs its generic Prescott kernels on this CPU \\(it does not know the model\\): ATen's float32 matmuls are slow. OPENBLAS_CORETYPE=(SkylakeX|Haswell) selects its (AVX-512|AVX2) ones\nmatmul roofline: 64x64x64, threads [0-9]+, BLAS openblas \\([^\n]*, core Prescott\\)\n$")

# Bad arguments: one line, exit status 2.
set(FX_LINEAR ${FX_CORRUPT_DIR}/linear.pt)
set(FX_LINEAR_IN ${FX_CORRUPT_DIR}/linear.input.pt)
fx_cli_one_line(bench_missing_model "no_such.pt: no such file" bench ${FX_BIN}/no_such.pt --input ${FX_LINEAR_IN})
fx_cli_one_line(bench_missing_input "no_such.input.pt: no such file"
                bench ${FX_LINEAR} --input ${FX_BIN}/no_such.input.pt)
fx_cli_one_line(bench_threads_zero "^fxcpp bench: --threads expects a positive integer, got '0'\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --threads 0)
fx_cli_one_line(bench_threads_word "^fxcpp bench: --threads expects a positive integer, got 'two'\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --threads two)
fx_cli_one_line(bench_threads_huge "^fxcpp bench: --threads 100000: at most 256\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --threads 100000)
fx_cli_one_line(bench_no_input "^fxcpp bench: --input IN.pt is required\n$" bench ${FX_LINEAR})
fx_cli_one_line(bench_no_model "^fxcpp bench: no model file given \\(MODEL\\)\n$" bench --input ${FX_LINEAR_IN})
fx_cli_one_line(bench_iters_and_seconds "^fxcpp bench: --iters and --seconds: give one of them\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --iters 2 --seconds 1)
fx_cli_one_line(bench_seconds_zero "^fxcpp bench: --seconds expects a number > 0, got '0'\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --seconds=0)
fx_cli_one_line(bench_roofline_with_model "^fxcpp bench: --roofline takes no MODEL\n$" bench ${FX_LINEAR} --roofline)
fx_cli_one_line(run_bf16_without_optimize "^fxcpp run: --bf16 goes with --optimize\n$"
                run ${FX_LINEAR} --input ${FX_LINEAR_IN} --bf16)
fx_cli_one_line(run_no_winograd_without_optimize "^fxcpp run: --no-winograd goes with --optimize\n$"
                run ${FX_LINEAR} --input ${FX_LINEAR_IN} --no-winograd)

# profile --optimize: the optimised graph's nodes are timed (its oneDNN kernels
# in the per-op table), at the --batch asked; --bf16 needs --optimize.
add_test(NAME cli.profile_optimize COMMAND ${FX_CLI} profile ${FX_OPT_MODEL} -i ${FX_OPT_INPUT} --optimize
         --linear-kernel onednn --batch 2
         --runs 1 --warmup 0 --top 2 --trace ${FX_BIN}/resnet18.opt.trace.json)
set_tests_properties(cli.profile_optimize PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "fxcpp profile: optimised in [^\n]*oneDNN: 20 convs, 1 linears.*fxcpp::onednn_conv2d +20 .*fxcpp::onednn_linear +1 ")
fx_cli_one_line(profile_bf16_without_optimize "--bf16 goes with --optimize"
                profile ${FX_OPT_MODEL} -i ${FX_OPT_INPUT} --bf16)
set_tests_properties(cli.profile_bf16_without_optimize PROPERTIES FIXTURES_REQUIRED "fx_corrupt_files;fx_models_0")

# bench --engine alone: "—" for the ratio and the max diff, the peak memory of that engine alone.
add_test(NAME cli.bench_engine_table
         COMMAND ${FX_CLI} bench ${FX_OPT_MODEL} --input ${FX_OPT_INPUT} --iters 1 --warmup 0 --engine fxcpp_opt)
set_tests_properties(cli.bench_engine_table PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "\nfxcpp optimized +[0-9.]+ +[0-9.]+ +— +[0-9.]+ +— +[0-9.]+  \\(optimize_for_inference\\)\n\nfxcpp optimized: optimised in .*\npeak resident memory of the process: [0-9.]+ MB \\(this engine alone\\)\n$")
fx_cli_one_line(bench_engine_unknown
                "^fxcpp bench: --engine: unknown engine 'tensorrt' \\(valid: torchscript, torchscript_opt, fxcpp, fxcpp_opt, fxcpp_opt_bf16, fxcpp_opt_unplanned, fxcpp_int8, python_int8, fxcpp_opt_direct, fxcpp_opt_onednn_linear, fxcpp_opt_nhwc, fxcpp_int8_7bit, fxcpp_opt_nofuse\\)\n$"
                bench ${FX_LINEAR} --input ${FX_LINEAR_IN} --engine tensorrt)
fx_cli_one_line(bench_engine_roofline "^fxcpp bench: --engine goes with a MODEL, not --roofline\n$"
                bench --roofline --engine fxcpp)

# --linear-kernel aten: every linear layer stays ATen's (BLAS), said in the
# report, outputs those of the plain run; a bad name or the option without
# --optimize is one line and exit 2, before the model is read.
add_test(NAME cli.run_optimize_linear_kernel_aten
         COMMAND sh -c "mkdir -p \"$1\" && \"$0\" run \"$2\" -i \"$3\" -o \"$1/plain.aten.pt\" >/dev/null && \"$0\" run \"$2\" -i \"$3\" -o \"$1/opt.aten.pt\" --optimize --linear-kernel aten --report 2>&1 && /usr/bin/python3 \"$4\" \"$1/plain.aten.pt\" \"$1/opt.aten.pt\" 1e-4"
                 ${FX_CLI} ${FX_OPT_DIR} ${FX_OPT_MODEL} ${FX_OPT_INPUT} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_optimize_linear_kernel_aten PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "fxcpp run: optimised in [^\n]*oneDNN: [0-9]+ convs, 0 linears, [^\n]* kernels \\([a-z0-9_]+\\); 1 linears on ATen \\(BLAS\\)\ntensor \\[1, 1000\\] Float.*within tolerance")
fx_cli_one_line(run_linear_kernel_bad "^fxcpp run: --linear-kernel blas: expected auto, onednn or aten\n$"
                run ${FX_LINEAR} --input ${FX_LINEAR_IN} --optimize --linear-kernel blas)
fx_cli_one_line(run_linear_kernel_without_optimize "^fxcpp run: --linear-kernel goes with --optimize\n$"
                run ${FX_LINEAR} --input ${FX_LINEAR_IN} --linear-kernel onednn)
