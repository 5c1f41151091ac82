# fxcpp convert and .fx files in inspect / run: converting then running gives
# the output of running the .pt; a bad .fx is one line and exit status 2; -o
# is written atomically (a failed convert leaves an existing file alone).
set(FX_CLI $<TARGET_FILE:fxcpp_cli>)  # tests.cmake sets it too, but is included after this file
set(FX_CONVERT_DIR ${FX_BIN}/convert)
add_test(NAME cli.convert_resnet18
         COMMAND sh -c "mkdir -p \"$1\" && \"$0\" convert \"$2/resnet18.pt\" -o \"$1/resnet18.fx\""
                 ${FX_CLI} ${FX_CONVERT_DIR} ${FX_MODELS_DIR})
set_tests_properties(cli.convert_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0 FIXTURES_SETUP fx_converted
                     PASS_REGULAR_EXPRESSION "wrote [^ ]*resnet18.fx \\([0-9]+ bytes, [0-9]+ nodes, [0-9]+ storages")
# run on the .fx and on the .pt: the same output file, byte for byte.
add_test(NAME cli.run_fx_same_as_pt
         COMMAND sh -c "\"$0\" run \"$1/resnet18.fx\" --input \"$2/resnet18.input.pt\" --output \"$1/fx.out.pt\" >/dev/null && \"$0\" run \"$2/resnet18.pt\" --input \"$2/resnet18.input.pt\" --output \"$1/pt.out.pt\" >/dev/null && cmp \"$1/fx.out.pt\" \"$1/pt.out.pt\" && echo SAME"
                 ${FX_CLI} ${FX_CONVERT_DIR} ${FX_MODELS_DIR})
set_tests_properties(cli.run_fx_same_as_pt PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_converted"
                     PASS_REGULAR_EXPRESSION "SAME" ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME cli.inspect_fx COMMAND ${FX_CLI} inspect ${FX_CONVERT_DIR}/resnet18.fx)
set_tests_properties(cli.inspect_fx PROPERTIES FIXTURES_REQUIRED fx_converted
                     PASS_REGULAR_EXPRESSION "call_module +layer1_0_conv1 +layer1.0.conv1.*def forward\\(self, x\\):")
# Bad .fx files: one line on stdout + stderr, exit status 2.
function(fx_cli_bad_fx name setup expect)
  add_test(NAME cli.${name}
           COMMAND sh -c "mkdir -p \"$1\" && ${setup} && out=$(\"$0\" inspect \"$1/${name}.fx\" 2>&1); s=$?; printf '%s\\n' \"$out\"; n=$(printf '%s\\n' \"$out\" | wc -l); [ $s -eq 2 ] && [ $n -eq 1 ] || echo \"fx-cli-bad: exit status $s, $n lines\""
                   ${FX_CLI} ${FX_CONVERT_DIR})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                       FIXTURES_REQUIRED fx_converted)
endfunction()
fx_cli_bad_fx(fx_not_zip "printf 'not a zip' > \"$1/fx_not_zip.fx\""
              "fx_not_zip.fx: not an fxcpp file \\(not a zip archive; expected a file written by fx::save\\)")
fx_cli_bad_fx(fx_truncated "head -c 100000 \"$1/resnet18.fx\" > \"$1/fx_truncated.fx\""
              "fx_truncated.fx: truncated or damaged zip archive \\(")
fx_cli_bad_fx(fx_torchscript "cp \"$1/../models/resnet18.pt\" \"$1/fx_torchscript.fx\""
              "fx_torchscript.fx: not an fxcpp file \\(a zip archive without extra/fxcpp.json; it is a TorchScript file")
set_tests_properties(cli.fx_torchscript PROPERTIES FIXTURES_REQUIRED "fx_converted;fx_models_0")
# One bit of a weight changed (the largest tensor record; the zip directory as
# written): refused by the record's CRC-32, naming the file and the record.
fx_cli_bad_fx(fx_flipped_weight
              "/usr/bin/python3 \"${FX_SRC}/tests/cli/flip_record_byte.py\" \"$1/resnet18.fx\" \"$1/fx_flipped_weight.fx\" >/dev/null"
              "fx_flipped_weight.fx: damaged zip archive \\(record '[^']*data/[0-9]+' does not match its CRC-32\\)")

# bench on a .fx file: every engine runs, the TorchScript ones on its export
# (fx::to_torchscript), with outputs equal to fxcpp's (check_bench_json.py).
add_test(NAME cli.bench_fx
         COMMAND sh -c "\"$0\" bench \"$1/resnet18.fx\" --input \"$2/resnet18.input.pt\" --iters 2 --warmup 1 --json | /usr/bin/python3 \"$3\" 2"
                 ${FX_CLI} ${FX_CONVERT_DIR} ${FX_MODELS_DIR} ${FX_SRC}/tests/cli/check_bench_json.py)
set_tests_properties(cli.bench_fx PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_converted" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "^bench json ok\n$")
add_test(NAME cli.bench_fx_table
         COMMAND ${FX_CLI} bench ${FX_CONVERT_DIR}/resnet18.fx --input ${FX_MODELS_DIR}/resnet18.input.pt --iters 1
                 --warmup 0 --engine torchscript --engine fxcpp)
set_tests_properties(cli.bench_fx_table PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_converted" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "\nTorchScript +[0-9.]+ .*\\(export\\)\nfxcpp +[0-9.]+ .*\\(load\\)\n\nTorchScript engines: fx::to_torchscript of the fxcpp file\n")
# A failed convert leaves an existing output untouched and no temporary file.
add_test(NAME cli.convert_atomic
         COMMAND sh -c "mkdir -p \"$1\" && echo keep > \"$1/keep.fx\" && \"$0\" convert \"$2\" -o \"$1/keep.fx\"; s=$?; [ $s -eq 2 ] && [ \"$(cat \"$1/keep.fx\")\" = keep ] && ! ls \"$1\" | grep -q fxcpp-tmp && echo ATOMIC"
                 ${FX_CLI} ${FX_CONVERT_DIR} ${FX_SRC}/README.md)
set_tests_properties(cli.convert_atomic PROPERTIES PASS_REGULAR_EXPRESSION "ATOMIC")

# Run-time control flow (cond / loop modules): convert, run the .fx in a fresh
# process, export it, and run the export under Python's torch.jit.load, on
# both inputs of each case; every output is eager PyTorch's.
add_test(NAME cli.control_flow_convert_run_export
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/cli/check_control_flow_cli.py ${FX_CLI} ${FX_BIN}/cli_control_flow
                 ${FX_SRC}/python/make_control_flow_cases.py
                 data_if nested_if loop_over_length carried_loop while_data break_loop early_return dict_out interpolate)
set_tests_properties(cli.control_flow_convert_run_export PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "9 control-flow cases ok")
