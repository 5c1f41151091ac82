# An int8 model shipped (issues 22 and 23): `fxcpp quantize -o` writes the
# oneDNN int8 kernels (int8 weights, scales and quantization kept, packed again
# at load); the file runs from `fxcpp run`, from the deployment example (byte
# for byte the same output) and, exported to TorchScript, from Python after
# torch.ops.load_library (bit for bit the C++ output). The model is
# quantization_goldens.py's resnet18 export (64x64), its calibration batches
# written as a tuple by plain torch.save.
set(FX_INT8_DIR ${FX_BIN}/cli_saved_int8)
set(FX_INT8 ${FX_INT8_DIR}/resnet18.int8.fx)
add_test(NAME cli.quantize_resnet18
         COMMAND sh -c "mkdir -p \"$1\" && /usr/bin/python3 -c 'import sys, torch; torch.save((torch.load(sys.argv[1]).flatten(0, 1),), sys.argv[2])' \"$2/quant/resnet18.calib.pt\" \"$1/calib.pt\" && exec \"$0\" quantize \"$2/quant/resnet18.quant.pt\" --calibration \"$1/calib.pt\" -o \"$3\""
                 ${FX_CLI} ${FX_INT8_DIR} ${FX_MODELS_DIR} ${FX_INT8})
set_tests_properties(cli.quantize_resnet18 PROPERTIES FIXTURES_REQUIRED fx_quant_models FIXTURES_SETUP fx_saved_int8
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "21 int8 kernels[^\n]*\n(note: int8 without VNNI[^\n]*\nnote: int8 against float32 here: [^\n]*\n)?wrote [^ ]*resnet18.int8.fx \\([0-9]+ bytes, [0-9]+ nodes, [0-9]+ storages\\)\n$")
add_test(NAME cli.int8_deploy_example
         COMMAND sh -c "\"$0\" \"$1\" \"$2/quant/resnet18.test.pt\" \"$3/deploy.out.pt\" && \"$4\" run \"$1\" --input \"$2/quant/resnet18.test.pt\" -o \"$3/run.out.pt\" >/dev/null && cmp \"$3/deploy.out.pt\" \"$3/run.out.pt\" && echo SAME"
                 $<TARGET_FILE:example_deploy> ${FX_INT8} ${FX_MODELS_DIR} ${FX_INT8_DIR} ${FX_CLI})
set_tests_properties(cli.int8_deploy_example PROPERTIES FIXTURES_REQUIRED "fx_quant_models;fx_saved_int8" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" FAIL_REGULAR_EXPRESSION "libfxcpp_passes;libfxcpp_import;libfxcpp_trace"
                     PASS_REGULAR_EXPRESSION "loaded [^\n]*resnet18.int8.fx in [0-9.]+ ms;.*wrote [^\n]*deploy.out.pt\nSAME")
add_test(NAME cli.int8_export_runs_in_python
         COMMAND sh -c "\"$0\" export \"$1\" -o \"$3/int8.ts.pt\" >/dev/null && \"$0\" run \"$1\" --input \"$2/quant/resnet18.test.pt\" -o \"$3/cpp.pt\" >/dev/null && /usr/bin/python3 \"$4\" \"$5\" \"$3/int8.ts.pt\" \"$2/quant/resnet18.test.pt\" \"$3/cpp.pt\""
                 ${FX_CLI} ${FX_INT8} ${FX_MODELS_DIR} ${FX_INT8_DIR} ${FX_SRC}/python/run_exported_optimized.py
                 $<TARGET_FILE:fxcpp_onednn>)
set_tests_properties(cli.int8_export_runs_in_python PROPERTIES FIXTURES_REQUIRED "fx_quant_models;fx_saved_int8"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "same as C\\+\\+: \\(1, 1000\\) torch.float32")
# Loaded where oneDNN stops at AVX2 (no VNNI, no AMX): the int8 kernels packed for it, close to the AMX / VNNI run.
add_test(NAME cli.int8_file_on_avx2
         COMMAND sh -c "\"$0\" run \"$1\" --input \"$2/quant/resnet18.test.pt\" -o \"$3/native.pt\" >/dev/null && ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 \"$0\" run \"$1\" --input \"$2/quant/resnet18.test.pt\" -o \"$3/avx2.pt\" >/dev/null && /usr/bin/python3 \"$4\" \"$3/avx2.pt\" \"$3/native.pt\" 0.05"
                 ${FX_CLI} ${FX_INT8} ${FX_MODELS_DIR} ${FX_INT8_DIR} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.int8_file_on_avx2 PROPERTIES FIXTURES_REQUIRED "fx_quant_models;fx_saved_int8"
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "within tolerance\n$")
