# `fxcpp export MODEL -o OUT.pt` (issue 10): the exported file runs under
# `fxcpp run` (imported back) and under Python's torch.jit.load with the
# eager torchvision outputs; bad input is one line and exit status 2, and a
# failed export leaves no file behind.
# (tests/cli/tests.cmake is included after this file: nothing of it is used here.)
set(FX_EXPORT_CLI $<TARGET_FILE:fxcpp_cli>)
set(FX_CLI_EXPORT_DIR ${FX_BIN}/cli_export)

add_test(NAME cli.export_resnet18
         COMMAND sh -c "mkdir -p \"$2\" && \"$0\" export \"$1/resnet18.pt\" -o \"$2/resnet18.pt\" --remove-dropout && \"$0\" run \"$2/resnet18.pt\" --input \"$1/resnet18.input.pt\" && /usr/bin/python3 \"$3\" --models \"$1\" --exported \"$2\" resnet18"
                 ${FX_EXPORT_CLI} ${FX_MODELS_DIR} ${FX_CLI_EXPORT_DIR} ${FX_SRC}/python/check_export.py)
set_tests_properties(cli.export_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "wrote .*resnet18.pt.*tensor \\[1, 1000\\] Float.*resnet18 +ok .*1 models match")

# One line (stdout and stderr together), exit status 2, and no OUT file nor
# temporary file left in OUT's directory. ctest ignores the exit status once
# PASS_REGULAR_EXPRESSION is set, so sh prints a failure marker instead.
function(fx_cli_export_fails name expect make_dir out)
  add_test(NAME cli.${name}
           COMMAND sh -c "mkdir -p \"$1\" 2>/dev/null; d=$(dirname \"$2\"); o=\"$2\"; shift 2; out=$(\"$0\" export -o \"$o\" \"$@\" 2>&1); s=$?; printf '%s\\n' \"$out\"; n=$(printf '%s\\n' \"$out\" | wc -l); [ $s -eq 2 ] && [ $n -eq 1 ] || echo \"fx-cli-bad: exit status $s, $n lines\"; [ -f \"$o\" ] && echo \"fx-cli-bad: $o written\"; ls \"$d\" 2>/dev/null | grep -q tmp && echo \"fx-cli-bad: temporary file left\"; true"
                   ${FX_EXPORT_CLI} ${make_dir} ${out} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                       TIMEOUT 120)
endfunction()
fx_cli_export_fails(export_not_a_model "not a TorchScript file \\(not a zip archive"
                    ${FX_CLI_EXPORT_DIR}/bad ${FX_CLI_EXPORT_DIR}/bad/readme.pt ${FX_SRC}/README.md)
fx_cli_export_fails(export_to_directory "cannot write .*: Is a directory"
                    ${FX_CLI_EXPORT_DIR}/dir/sub ${FX_CLI_EXPORT_DIR}/dir/sub ${FX_MODELS_DIR}/alexnet.pt)
set_tests_properties(cli.export_to_directory PROPERTIES FIXTURES_REQUIRED fx_models_0)
fx_cli_export_fails(export_no_directory "cannot write /nonexistent_fx_dir/out.pt: No such file or directory"
                    ${FX_CLI_EXPORT_DIR} /nonexistent_fx_dir/out.pt ${FX_MODELS_DIR}/alexnet.pt)
set_tests_properties(cli.export_no_directory PROPERTIES FIXTURES_REQUIRED fx_models_0)
add_test(NAME cli.export_needs_output COMMAND ${FX_EXPORT_CLI} export ${FX_SRC}/README.md)
set_tests_properties(cli.export_needs_output PROPERTIES PASS_REGULAR_EXPRESSION "-o OUT.pt is required")
