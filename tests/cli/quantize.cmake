# fxcpp quantize (issue 22) on the digits CNN of python/digits_fixture.py (fixture
# fx_digits, tests/quantization/digits.cmake): the per-node report, OUT.fx written
# and run by `fxcpp run` to the same output as `run --quantize` in one process,
# run --quantize calibrated on its input, bench's int8 engines, and every refused
# input one line, exit 2.
set(FX_DIGITS ${FX_MODELS_DIR}/digits)
set(FX_QUANT_CLI_DIR ${FX_BIN}/cli_quantize)
add_test(NAME cli.quantize_digits
         COMMAND sh -c "mkdir -p \"$2\" && exec \"$0\" quantize \"$1/digits.script.pt\" --calibration \"$1/digits.calib.pt\" -o \"$2/digits.int8.fx\" --report"
                 ${FX_CLI} ${FX_DIGITS} ${FX_QUANT_CLI_DIR})
set_tests_properties(cli.quantize_digits PROPERTIES FIXTURES_REQUIRED fx_digits FIXTURES_SETUP fx_digits_int8
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "^conv1  conv1  quantized  int8 oneDNN convolution \\(relu\\)\nconv2  conv2  quantized  int8 oneDNN convolution \\(relu\\)\n[^\n]*\n[^\n]*\nfc  fc  quantized  int8 oneDNN linear\n5 of 5 nodes quantized, 3 int8 kernels, 4 calibration batches \\(256 samples\\)\n(note: int8 without VNNI[^\n]*\nnote: int8 against float32 here: [^\n]*\n)?wrote [^\n]*digits.int8.fx \\([0-9]+ bytes, [0-9]+ nodes, [0-9]+ storages\\)\n$")
add_test(NAME cli.quantized_file_same_as_run_quantize
         COMMAND sh -c "\"$0\" run \"$2/digits.int8.fx\" --input \"$1/digits.input.pt\" -o \"$2/from_file.pt\" >/dev/null && \"$0\" run \"$1/digits.script.pt\" --input \"$1/digits.input.pt\" --quantize --calibration \"$1/digits.calib.pt\" -o \"$2/in_process.pt\" >/dev/null && cmp \"$2/from_file.pt\" \"$2/in_process.pt\" && echo SAME"
                 ${FX_CLI} ${FX_DIGITS} ${FX_QUANT_CLI_DIR})
set_tests_properties(cli.quantized_file_same_as_run_quantize PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_digits_int8"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "SAME")
add_test(NAME cli.run_quantize_on_its_input
         COMMAND ${FX_CLI} run ${FX_DIGITS}/digits.trace.pt --input ${FX_DIGITS}/digits.input.pt --quantize --report)
set_tests_properties(cli.run_quantize_on_its_input PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "^fxcpp run: --quantize without --calibration: calibrated on the input itself\nfxcpp run: 5 of 5 nodes quantized, 3 int8 kernels, 1 calibration batch \\(64 samples\\)\ntensor \\[64, 10\\] Float")
add_test(NAME cli.bench_int8_engines
         COMMAND ${FX_CLI} bench ${FX_DIGITS}/digits.script.pt --input ${FX_DIGITS}/digits.input.pt
                 --calibration ${FX_DIGITS}/digits.calib.pt --int8-torchscript ${FX_DIGITS}/digits.int8.pt
                 --engine torchscript --engine fxcpp_int8 --engine python_int8 --iters 2 --warmup 0)
set_tests_properties(cli.bench_int8_engines PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "\nTorchScript +[0-9.]+ [^\n]*\\(load\\)\nfxcpp int8 +[0-9.]+ [^\n]* [0-9.]+e-0[0-9] [^\n]*\\(quantize, 4 calibration batches\\)\nPython int8 \\(TS\\) +[0-9.]+ [^\n]*\\(load\\)\n")

# Refused inputs: one line, exit 2, the input files unchanged.
function(fx_cli_quantize_refuses name expect)
  add_test(NAME cli.${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); s=$?; printf '%s\\n' \"$out\"; n=$(printf '%s\\n' \"$out\" | wc -l); [ $s -eq 2 ] && [ $n -eq 1 ] || echo \"fx-cli-bad: exit status $s, $n lines\""
                   ${FX_CLI} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                       FIXTURES_REQUIRED fx_digits TIMEOUT 60 ENVIRONMENT "OMP_NUM_THREADS=1")
endfunction()
fx_cli_quantize_refuses(quantize_missing_calibration "^fxcpp quantize: [^\n]*/digits/missing.pt: no such file\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/missing.pt)
fx_cli_quantize_refuses(quantize_no_calibration "^fxcpp quantize: --calibration DATA.pt is required\n$"
                        quantize ${FX_DIGITS}/digits.script.pt)
fx_cli_quantize_refuses(quantize_calibration_arity
                        "^fxcpp quantize: [^\n]*/bad_arity.pt: 2 inputs, but the model takes 1 \\(x\\)\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/bad_arity.pt)
fx_cli_quantize_refuses(quantize_calibration_shape
                        "^fxcpp quantize: [^\n]*/bad_shape.pt: calibration batch 0 of 1 does not run on the model: Given groups=1, weight of size \\[16, 1, 3, 3\\], expected input\\[8, 3, 8, 8\\] to have 1 channels, but got 3 channels instead \\(at node conv1\\)\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/bad_shape.pt)
fx_cli_quantize_refuses(quantize_calibration_element
                        "^fxcpp quantize: [^\n]*/bad_element.pt: element 1 is a tensor, not a tuple of forward arguments\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/bad_element.pt)
fx_cli_quantize_refuses(quantize_corrupt_calibration
                        "^fxcpp quantize: [^\n]*/corrupt.pt: damaged zip archive \\(no end of central directory record; the file is truncated\\)\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/corrupt.pt)
fx_cli_quantize_refuses(quantize_skip_unknown "^fxcpp quantize: skip 'conv7' names no module or node of the model\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/digits.calib.pt --skip conv7)
fx_cli_quantize_refuses(quantize_training_mode
                        "^fxcpp quantize: prepare: module 'conv1' is in training mode; call eval\\(\\) first: post-training quantization needs inference batch norm and dropout\n$"
                        quantize ${FX_DIGITS}/digits.train.pt --calibration ${FX_DIGITS}/digits.calib.pt)
fx_cli_quantize_refuses(run_calibration_without_quantize "^fxcpp run: --calibration goes with --quantize\n$"
                        run ${FX_DIGITS}/digits.script.pt --input ${FX_DIGITS}/digits.input.pt
                        --calibration ${FX_DIGITS}/digits.calib.pt)
fx_cli_quantize_refuses(bench_python_int8_without_file
                        "^fxcpp bench: --engine python_int8 needs --int8-torchscript FILE \\(python/quantize_baseline.py\\)\n$"
                        bench ${FX_DIGITS}/digits.script.pt --input ${FX_DIGITS}/digits.input.pt --engine python_int8)

# On a CPU without VNNI (oneDNN limited to AVX2: its u8s8 kernels without
# vpdpbusd saturate), the saved int8 model still computes the same classes:
# no AVX-512 kernel ran, no int8 convolution either (its two convolutions,
# not depthwise, compute in float32: their outputs of at most 8x8 pixels as
# im2col + oneDNN's packed GEMM, gemm_conv.h, which ONEDNN_VERBOSE does not
# list, so no oneDNN convolution ran at all), output within 2% of the native
# one's range (one output quantum of these logits is ~1%).
add_test(NAME cli.quantized_file_on_avx2
         COMMAND sh -c "\"$0\" run \"$2/digits.int8.fx\" --input \"$1/digits.input.pt\" -o \"$2/native.pt\" >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 ONEDNN_VERBOSE=1 \"$0\" run \"$2/digits.int8.fx\" --input \"$1/digits.input.pt\" -o \"$2/avx2.pt\" > \"$2/avx2.log\"; grep -c 'exec,cpu,convolution,[^,]*avx512' \"$2/avx2.log\"; grep -c 'exec,cpu,convolution,.*src_u8' \"$2/avx2.log\"; grep -c 'exec,cpu,convolution' \"$2/avx2.log\"; /usr/bin/python3 \"$3\" \"$2/avx2.pt\" \"$2/native.pt\" 2e-2"
                 ${FX_CLI} ${FX_DIGITS} ${FX_QUANT_CLI_DIR} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.quantized_file_on_avx2 PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_digits_int8"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "^0\n0\n0\nmax diff [^\n]*\nwithin tolerance\n$")
# Quantized where oneDNN has no int8 dot products (held at AVX2): the note
# that says so, then int8 timed against the float model optimised, side by
# side, and which is faster here.
add_test(NAME cli.quantize_digits_on_avx2
         COMMAND sh -c "mkdir -p \"$2\" && exec \"$0\" quantize \"$1/digits.script.pt\" --calibration \"$1/digits.calib.pt\" -o \"$2/digits.avx2.int8.fx\""
                 ${FX_CLI} ${FX_DIGITS} ${FX_QUANT_CLI_DIR})
set_tests_properties(cli.quantize_digits_on_avx2 PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2"
                     PASS_REGULAR_EXPRESSION
                     "\nnote: int8 without VNNI: oneDNN ISA avx2 has no int8 dot products, and its 16-bit int8 sums would saturate with 8-bit weights: 3 of 3 int8 kernels compute in float32, [^\n]*\nnote: int8 against float32 here: [0-9.]+ ms against [0-9.]+ ms per forward of the first calibration batch \\(float32 optimised by fxcpp\\): int8 is [0-9.]+x (slower|faster)\nwrote [^\n]*digits.avx2.int8.fx")
# --weight-bits 7 held at AVX2: the note says every kernel runs on oneDNN's int8 kernels, and
# running the file held at AVX2 runs int8 convolutions (ONEDNN_VERBOSE: src_u8; the 8-bit file
# of cli.quantized_file_on_avx2 runs none), within 2% of the output's range of the file run
# natively (one quantum of these logits is ~1%).
add_test(NAME cli.quantize_digits_7bit_on_avx2
         COMMAND sh -c "mkdir -p \"$2\" && ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 \"$0\" quantize \"$1/digits.script.pt\" --calibration \"$1/digits.calib.pt\" --weight-bits 7 -o \"$2/digits.7bit.fx\" && \"$0\" run \"$2/digits.7bit.fx\" --input \"$1/digits.input.pt\" -o \"$2/native7.pt\" >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_VERBOSE=1 \"$0\" run \"$2/digits.7bit.fx\" --input \"$1/digits.input.pt\" -o \"$2/avx2_7.pt\" > \"$2/avx2_7.log\"; grep -c 'exec,cpu,convolution,[^,]*avx512' \"$2/avx2_7.log\"; grep -c 'exec,cpu,convolution,.*src_u8' \"$2/avx2_7.log\"; /usr/bin/python3 \"$3\" \"$2/avx2_7.pt\" \"$2/native7.pt\" 2e-2"
                 ${FX_CLI} ${FX_DIGITS} ${FX_QUANT_CLI_DIR} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.quantize_digits_7bit_on_avx2 PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "\nnote: int8 without VNNI: oneDNN ISA avx2 has no int8 dot products: all 3 int8 kernels run on oneDNN's int8 kernels \\(7-bit weights or depthwise convolutions: their 16-bit sums cannot saturate\\)\nnote: int8 against float32 here: [^\n]*\nwrote [^\n]*digits.7bit.fx [^\n]*\n0\n2\nmax diff [^\n]*\nwithin tolerance\n$")
fx_cli_quantize_refuses(quantize_weight_bits "^fxcpp quantize: --weight-bits takes 7 or 8, got '6'\n$"
                        quantize ${FX_DIGITS}/digits.script.pt --calibration ${FX_DIGITS}/digits.calib.pt --weight-bits 6)
fx_cli_quantize_refuses(quantize_quantized_model
                        "^fxcpp quantize: the model is already quantized \\(node 'quantize_per_tensor' calls [a-z_]+::[a-z_.]+\\)\n$"
                        quantize ${FX_QUANT_CLI_DIR}/digits.int8.fx --calibration ${FX_DIGITS}/digits.calib.pt)
set_tests_properties(cli.quantize_quantized_model PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_digits_int8")
add_test(NAME cli.quantize_skip_keeps_float
         COMMAND ${FX_CLI} quantize ${FX_DIGITS}/digits.trace.pt --calibration ${FX_DIGITS}/digits.calib.pt --skip conv2 --report)
set_tests_properties(cli.quantize_skip_keeps_float PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "^conv1  conv1  quantized  int8 oneDNN convolution \\(relu\\)\nconv2  conv2  float  qconfig is None\n[^\n]*\n[^\n]*\nfc  fc  quantized  int8 oneDNN linear\n4 of 5 nodes quantized, 2 int8 kernels, 4 calibration batches \\(256 samples\\)\n(note: int8 without VNNI[^\n]*\nnote: int8 against float32 here: [^\n]*\n)?$")
# --skip by a call_module node's name (layer1_0_conv1) or by a module's qualified
# name (layer1.0: both its convolutions) on resnet18 (tests/quantization/agreement.cmake).
add_test(NAME cli.quantize_skip_node_and_module
         COMMAND sh -c "\"$0\" quantize \"$1/resnet18.agree.pt\" --calibration \"$1/resnet18.agree_calib.pt\" --skip layer1_0_conv1 --report | grep -E '^layer1_0_conv|nodes quantized' && \"$0\" quantize \"$1/resnet18.agree.pt\" --calibration \"$1/resnet18.agree_calib.pt\" --skip layer1.0 --report | grep -E '^layer1_0_conv|nodes quantized'"
                 ${FX_CLI} ${FX_MODELS_DIR}/quant_agree)
set_tests_properties(cli.quantize_skip_node_and_module PROPERTIES FIXTURES_REQUIRED fx_quant_agree TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "^layer1_0_conv1  layer1.0.conv1  float  qconfig is None\nlayer1_0_conv2  layer1.0.conv2  quantized  [^\n]*\n39 of 40 nodes quantized, 20 int8 kernels, 4 calibration batches \\(8 samples\\)\nlayer1_0_conv1  layer1.0.conv1  float  qconfig is None\nlayer1_0_conv2  layer1.0.conv2  float  qconfig is None\n37 of 40 nodes quantized, 19 int8 kernels, 4 calibration batches \\(8 samples\\)\n$")
