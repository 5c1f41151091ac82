# What only TorchScript's interpreter runs (warnings.warn, "{}".format, the
# model's own asserts) and custom operator libraries (torchvision::nms with
# --load-library) on the command line (issue 14). The files come from
# python/make_op_cases.py into FX_BIN/op_cases, shared with tests/import.
set(FX_OP_CASES ${FX_BIN}/op_cases)
fx_generated_cases(make_op_cases make_op_cases.py ${FX_OP_CASES} fx_op_cases)

# A scripted googlenet-like module: its warning goes to stderr, its output is eager's.
add_test(NAME cli.run_warn_assert
         COMMAND sh -c "\"$0\" run \"$1/warn_assert.pt\" -i \"$1/warn_assert.input.pt\" -o \"$1/warn_assert.fxcpp.pt\" 2>&1 && /usr/bin/python3 \"$2\" \"$1/warn_assert.output.pt\" \"$1/warn_assert.fxcpp.pt\" 1e-5"
                 ${FX_CLI} ${FX_OP_CASES} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_warn_assert PROPERTIES FIXTURES_REQUIRED fx_op_cases
                     PASS_REGULAR_EXPRESSION "fxcpp run: warning: Scripted WarnAssert always returns a tensor\ntensor \\[1, 4, 8, 8\\] Float.*within tolerance")
# The model's own check fails at run time: a run failure naming the node
# (exit 1), not bad input; its warning came first, on a line of its own.
# fxcpp run imports with the input as example: `x.dim() == 4` folds to False
# for this 3-D input, so the check is the raise itself.
add_test(NAME cli.run_model_assert_fails
         COMMAND sh -c "\"$0\" run \"$1/warn_assert.pt\" -i \"$1/warn_assert.bad_input.pt\" 2>&1; s=$?; [ $s -eq 1 ] || echo \"fx-cli-bad: exit status $s\""
                 ${FX_CLI} ${FX_OP_CASES})
set_tests_properties(cli.run_model_assert_fails PROPERTIES FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                     PASS_REGULAR_EXPRESSION "^fxcpp run: warning: Scripted WarnAssert always returns a tensor\nfxcpp run: [^\n]*warn_assert.pt failed on [^\n]*warn_assert.bad_input.pt at node raise_exception \\(call_function\\[target=prim::RaiseException\\]\\): AssertionError: expected a 4-d input for k=3\n$")
fx_cli_run_fails(run_operator_fails
                 "fxcpp run: [^\n]*raising.pt failed on [^\n]*raising.input.pt at node view \\(call_function\\[target=aten::view\\]\\): shape '\\[5\\]' is invalid for input of size 6\n$"
                 run ${FX_OP_CASES}/raising.pt -i ${FX_OP_CASES}/raising.input.pt)
fx_cli_run_fails(profile_operator_fails
                 "fxcpp profile: [^\n]*raising.pt failed on [^\n]*raising.input.pt at node view \\(call_function\\[target=aten::view\\]\\): shape '\\[5\\]' is invalid for input of size 6\n$"
                 profile ${FX_OP_CASES}/raising.pt -i ${FX_OP_CASES}/raising.input.pt --trace ${FX_OP_CASES}/raising.trace.json)
fx_cli_run_fails(bench_operator_fails
                 "fxcpp bench: [^\n]*raising.pt failed on [^\n]*raising.input.pt at node view \\(call_function\\[target=aten::view\\]\\): shape '\\[5\\]' is invalid for input of size 6\n$"
                 bench ${FX_OP_CASES}/raising.pt -i ${FX_OP_CASES}/raising.input.pt --iters 1)
set_tests_properties(cli.run_model_assert_fails cli.run_operator_fails cli.profile_operator_fails
                     cli.bench_operator_fails PROPERTIES FIXTURES_REQUIRED fx_op_cases)

# torchvision::nms: without its library the one line names the operator and
# says how to load it; with --load-library (repeatable) the model runs and
# returns eager's indices. Skipped (77) without python3-torchvision.
fx_cli_one_line(nms_needs_library
                "fxcpp run: [^\n]*nms.pt: cannot load TorchScript: Unknown builtin op: torchvision::nms. Could not find any similar ops to torchvision::nms. This op may not exist or may not be currently supported in TorchScript \\(an operator of a custom library\\? load it first: fx::load_library, fxcpp --load-library PATH\\) at File \"code/__torch__/torchvision/ops/boxes.py\", line 6: _2 = ops.torchvision.nms\\(boxes, scores, iou_threshold\\)\n$"
                run ${FX_OP_CASES}/nms.pt -i ${FX_OP_CASES}/nms.input.pt)
add_test(NAME cli.nms_with_library
         COMMAND sh -c "lib=$(cat \"$1/torchvision_ops.txt\"); [ -n \"$lib\" ] || exit 77; \"$0\" run \"$1/nms.pt\" -i \"$1/nms.input.pt\" -o \"$1/nms.fxcpp.pt\" --load-library \"$lib\" --load-library \"$lib\" && /usr/bin/python3 \"$2\" \"$1/nms.output.pt\" \"$1/nms.fxcpp.pt\" 0"
                 ${FX_CLI} ${FX_OP_CASES} ${FX_SRC}/tests/cli/compare_outputs.py)
add_test(NAME cli.inspect_nms_with_library
         COMMAND sh -c "lib=$(cat \"$1/torchvision_ops.txt\"); [ -n \"$lib\" ] || exit 77; \"$0\" inspect \"$1/nms.pt\" --load-library=\"$lib\""
                 ${FX_CLI} ${FX_OP_CASES})
set_tests_properties(cli.nms_with_library PROPERTIES PASS_REGULAR_EXPRESSION "tensor \\[[0-9]+\\] Long.*within tolerance")
set_tests_properties(cli.inspect_nms_with_library PROPERTIES PASS_REGULAR_EXPRESSION "call_function +nms +torchvision::nms")
set_tests_properties(cli.nms_needs_library cli.nms_with_library cli.inspect_nms_with_library PROPERTIES
                     FIXTURES_REQUIRED fx_op_cases SKIP_RETURN_CODE 77)
set_tests_properties(cli.nms_needs_library PROPERTIES SKIP_REGULAR_EXPRESSION "nms.pt: no such file")
fx_cli_one_line(load_library_missing "fxcpp inspect: /no/such/libops.so: no such file \\(an operator library to load\\)\n$"
                inspect ${FX_CORRUPT_DIR}/linear.pt --load-library /no/such/libops.so)
fx_cli_one_line(load_library_not_a_library "fxcpp run: [^\n]*README.md: cannot load the library: [^\n]*invalid ELF header\n$"
                run ${FX_CORRUPT_DIR}/linear.pt --load-library ${FX_SRC}/README.md)
