# fxcpp optimize (issue 23): an optimised module written once (fx::save of its
# oneDNN kernels: weights unpacked, attributes kept) and run from the file:
# the same output file, byte for byte, as `run --optimize` in one process
# (both with the linear layer's kernel fixed: below AVX-512 Auto times two
# kernels, and two processes may choose differently);
# under a lower oneDNN ISA (ONEDNN_MAX_CPU_ISA=AVX2: the weights packed again
# for AVX2 kernels, as on a CPU without AVX-512) within 1e-4 of the plain
# model; inspect, draw and bench read the file. Uses fx_cli_one_line of tests.cmake.
set(FX_SAVED_OPT_DIR ${FX_BIN}/cli_saved_optimized)
set(FX_SAVED_OPT ${FX_SAVED_OPT_DIR}/resnet18.opt.fx)
add_test(NAME cli.optimize_resnet18
         COMMAND sh -c "mkdir -p \"$1\" && exec \"$0\" optimize \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" --linear-kernel onednn -o \"$3\""
                 ${FX_CLI} ${FX_SAVED_OPT_DIR} ${FX_MODELS_DIR} ${FX_SAVED_OPT})
set_tests_properties(cli.optimize_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0 FIXTURES_SETUP fx_saved_optimized
                     TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "optimised in [0-9.]+ ms: [0-9]+ -> [0-9]+ nodes;[^\n]*oneDNN: 20 convs, 1 linears[^\n]*\nwrote [^ ]*resnet18.opt.fx \\([0-9]+ bytes, [0-9]+ nodes, [0-9]+ storages\\)\n$")
add_test(NAME cli.optimized_file_same_as_run_optimize
         COMMAND sh -c "\"$0\" run \"$1\" --input \"$2/resnet18.input.pt\" -o \"$3/from_file.pt\" >/dev/null && \"$0\" run \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" --optimize --linear-kernel onednn -o \"$3/in_process.pt\" >/dev/null && cmp \"$3/from_file.pt\" \"$3/in_process.pt\" && echo SAME"
                 ${FX_CLI} ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR})
set_tests_properties(cli.optimized_file_same_as_run_optimize PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "SAME")
add_test(NAME cli.optimized_file_on_avx2
         COMMAND sh -c "\"$0\" run \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" -o \"$3/plain.pt\" >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_VERBOSE=1 \"$0\" run \"$1\" --input \"$2/resnet18.input.pt\" -o \"$3/avx2.pt\" | grep -c 'exec,cpu,convolution,[^,]*avx512' ; ONEDNN_MAX_CPU_ISA=AVX2 ONEDNN_VERBOSE=1 \"$0\" run \"$1\" --input \"$2/resnet18.input.pt\" -o \"$3/avx2.pt\" | grep -c 'exec,cpu,convolution,[^,]*avx2' ; /usr/bin/python3 \"$4\" \"$3/avx2.pt\" \"$3/plain.pt\" 1e-4"
                 ${FX_CLI} ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR} ${FX_SRC}/tests/cli/compare_outputs.py)
# No AVX-512 kernel ran (0 lines), 4 AVX2 convolutions did (the stem and the
# three 1x1 downsamples; of the other 16 of this 64x64 input, layer1's four
# 3x3 ones run as fxcpp's Winograd below AVX-512, gemm_winograd.h, and the
# 3x3 kernels into outputs of at most 8x8 as im2col + oneDNN's packed GEMM,
# gemm_conv.h), and the output is the plain model's.
set_tests_properties(cli.optimized_file_on_avx2 PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "^0\n4\nmax diff [^\n]*\nwithin tolerance\n$")
# A bf16 file (optimised here with --bf16: bf16 kernels where this CPU has
# them) loaded where oneDNN has no bf16 kernels (held at AVX2): packed as
# float32 kernels of the same weights at load, no AVX-512 kernel runs, and
# the output is within bf16's tolerance of the plain model's.
add_test(NAME cli.optimized_bf16_file_on_avx2
         COMMAND sh -c "\"$0\" optimize \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" --bf16 -o \"$3/resnet18.bf16.fx\" >/dev/null 2>&1 && \"$0\" run \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" -o \"$3/plain.bf16.pt\" >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_VERBOSE=1 \"$0\" run \"$3/resnet18.bf16.fx\" --input \"$2/resnet18.input.pt\" -o \"$3/avx2.bf16.pt\" | grep -c 'exec,cpu,convolution,[^,]*avx512' ; /usr/bin/python3 \"$4\" \"$3/avx2.bf16.pt\" \"$3/plain.bf16.pt\" 5e-2"
                 ${FX_CLI} ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.optimized_bf16_file_on_avx2 PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "^0\nmax diff [^\n]*\nwithin tolerance\n$")
add_test(NAME cli.optimized_file_inspect_draw_bench
         COMMAND sh -c "\"$0\" inspect \"$1\" > \"$3/inspect.txt\" && head -1 \"$3/inspect.txt\" && grep -c 'call_function  *onednn_conv2d[_0-9]*  *fxcpp::onednn_conv2d' \"$3/inspect.txt\" && \"$0\" draw \"$1\" -o \"$3/opt.svg\" && \"$0\" bench \"$1\" --input \"$2/resnet18.input.pt\" --iters 1 --warmup 0 --engine fxcpp --engine torchscript"
                 ${FX_CLI} ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR})
set_tests_properties(cli.optimized_file_inspect_draw_bench PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "resnet18.opt.fx: ResNet, [0-9]+ nodes \\(0 call_module[^\n]*\n20\nwrote [^\n]*opt.svg[^\n]*\n.*\nTorchScript +[0-9.]+ .*\\(export\\)\nfxcpp +[0-9.]+ .*\\(load\\)\n")
fx_cli_one_line(optimize_no_output "^fxcpp optimize: -o OUT.fx is required\n$" optimize ${FX_LINEAR})

# The deployment example (examples/deploy): loads and runs the optimised file
# with fxcpp_serialize's libraries only (not the passes, the importer or the tracer), output
# byte for byte `fxcpp run`'s.
add_test(NAME cli.deploy_example
         COMMAND sh -c "\"$0\" \"$1\" \"$2/resnet18.input.pt\" \"$3/deploy.out.pt\" && \"$4\" run \"$1\" --input \"$2/resnet18.input.pt\" -o \"$3/run.out.pt\" >/dev/null && cmp \"$3/deploy.out.pt\" \"$3/run.out.pt\" && echo SAME"
                 $<TARGET_FILE:example_deploy> ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR} ${FX_CLI})
set_tests_properties(cli.deploy_example PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" FAIL_REGULAR_EXPRESSION "libfxcpp_passes;libfxcpp_import;libfxcpp_trace"
                     PASS_REGULAR_EXPRESSION "loaded [^\n]*resnet18.opt.fx in [0-9.]+ ms; first forward [0-9.]+ ms, then [0-9.]+ ms; peak resident memory [0-9.]+ MB\n.*libfxcpp_onednn[^\n]*\n.*wrote [^\n]*deploy.out.pt\nSAME")
# Exported to TorchScript (fxcpp export): Python loads fxcpp's operator library
# (torch.ops.load_library) and the file (torch.jit.load), and computes the C++ output bit for bit.
add_test(NAME cli.optimized_export_runs_in_python
         COMMAND sh -c "\"$0\" export \"$1\" -o \"$3/opt.ts.pt\" >/dev/null && \"$0\" run \"$1\" --input \"$2/resnet18.input.pt\" -o \"$3/cpp.pt\" >/dev/null && /usr/bin/python3 \"$4\" \"$5\" \"$3/opt.ts.pt\" \"$2/resnet18.input.pt\" \"$3/cpp.pt\""
                 ${FX_CLI} ${FX_SAVED_OPT} ${FX_MODELS_DIR} ${FX_SAVED_OPT_DIR} ${FX_SRC}/python/run_exported_optimized.py
                 $<TARGET_FILE:fxcpp_onednn>)
set_tests_properties(cli.optimized_export_runs_in_python PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_saved_optimized"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "same as C\\+\\+: \\(1, 1000\\) torch.float32")
