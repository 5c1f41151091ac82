# The fxcpp command line, run as a user would: good files give tables and
# files, bad ones one line and exit status 2.
set(FX_CLI $<TARGET_FILE:fxcpp_cli>)
# exit status 2 and the one-line message (sh checks the status, ctest the
# text; ctest ignores the status once PASS_REGULAR_EXPRESSION is set, so sh
# prints a failure marker instead)
function(fx_cli_bad_input name expect)
  add_test(NAME cli.${name} COMMAND sh -c "\"$0\" \"$@\"; s=$?; [ $s -eq 2 ] || echo \"fx-cli-bad: exit status $s\"" ${FX_CLI} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad")
endfunction()
# A model failing while it runs (an operator's error, the model's own raise):
# exit status 1 and one line naming the node.
function(fx_cli_run_fails name expect)
  add_test(NAME cli.${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); s=$?; printf '%s\\n' \"$out\"; n=$(printf '%s\\n' \"$out\" | wc -l); [ $s -eq 1 ] && [ $n -eq 1 ] || echo \"fx-cli-bad: exit status $s, $n lines\""
                   ${FX_CLI} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                       TIMEOUT 60)
endfunction()
fx_cli_bad_input(inspect_not_a_zip "not a TorchScript file \\(not a zip archive" inspect ${FX_SRC}/README.md)
fx_cli_bad_input(inspect_missing_file "no such file" inspect ${FX_BIN}/no_such.pt)
fx_cli_bad_input(unknown_command "unknown command 'frobnicate'" frobnicate)
# Real model files come from the first torchvision export group (tests/import/tests.cmake).
add_test(NAME cli.inspect_resnet18 COMMAND ${FX_CLI} inspect ${FX_MODELS_DIR}/resnet18.pt)
set_tests_properties(cli.inspect_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "call_module +layer1_0_conv1 +layer1.0.conv1.*def forward\\(self, x\\):")
add_test(NAME cli.profile_resnet18 COMMAND ${FX_CLI} profile ${FX_MODELS_DIR}/resnet18.pt
         --input ${FX_MODELS_DIR}/resnet18.input.pt --runs 1 --warmup 1 --top 3 --trace ${FX_BIN}/resnet18.trace.json)
set_tests_properties(cli.profile_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "Conv2d +20 .*wrote .*resnet18.trace.json")
# resnet18 on alexnet's output ([1, 1000]): its first convolution refuses it.
fx_cli_run_fails(run_wrong_input "fxcpp run: [^\n]*resnet18.pt failed on [^\n]*alexnet.output.pt at node conv1 \\(call_module\\[target=conv1\\]\\): Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to conv2d"
                 run ${FX_MODELS_DIR}/resnet18.pt --input ${FX_MODELS_DIR}/alexnet.output.pt)
set_tests_properties(cli.run_wrong_input PROPERTIES FIXTURES_REQUIRED fx_models_0)

# Damaged and inconsistent files (python/make_corrupt_files.py, issue #12):
# exactly one line on stderr and exit status 2, never a backtrace or a hang.
# fx_generated_cases(NAME SCRIPT DIR FIXTURE): test cli.NAME runs
# python/SCRIPT into DIR unless it ran since the script changed (flock: safe
# beside the GoogleTest programs that generate the same directory); the
# fixture FIXTURE for the tests that read DIR.
function(fx_generated_cases name script dir fixture)
  add_test(NAME cli.${name}
           COMMAND sh -c "mkdir -p '$0' && flock '$0/.lock' sh -c \"[ '$0/.done' -nt '$1' ] || (/usr/bin/python3 '$1' '$0' >/dev/null && touch '$0/.done')\""
                   ${dir} ${FX_SRC}/python/${script})
  set_tests_properties(cli.${name} PROPERTIES FIXTURES_SETUP ${fixture})
endfunction()
set(FX_CORRUPT_DIR ${FX_BIN}/corrupt_files)
fx_generated_cases(make_corrupt_files make_corrupt_files.py ${FX_CORRUPT_DIR} fx_corrupt_files)
# One line of output (stdout and stderr together) and exit status 2. ctest
# ignores the status when PASS_REGULAR_EXPRESSION is set, so sh reports it.
function(fx_cli_one_line name expect)
  add_test(NAME cli.${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); s=$?; printf '%s\\n' \"$out\"; n=$(printf '%s\\n' \"$out\" | wc -l); [ $s -eq 2 ] && [ $n -eq 1 ] || echo \"fx-cli-bad: exit status $s, $n lines\""
                   ${FX_CLI} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}" FAIL_REGULAR_EXPRESSION "fx-cli-bad"
                       FIXTURES_REQUIRED fx_corrupt_files TIMEOUT 60)
endfunction()
fx_cli_one_line(run_short_storage "fxcpp run: [^\n]*short_storage.pt: tensor 0 needs 400 bytes of storage but has 16"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/short_storage.pt)
fx_cli_one_line(run_huge_numel "huge_numel.pt: tensor 0 needs 17179869184 bytes of storage but has 16"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/huge_numel.pt)
fx_cli_one_line(run_input_dev_zero "/dev/zero: is a character device, not a torch.save file"
                run ${FX_CORRUPT_DIR}/linear.pt --input /dev/zero)
fx_cli_one_line(run_input_fifo "input.fifo: is a FIFO, not a torch.save file"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/input.fifo)
fx_cli_one_line(run_input_directory "corrupt_files: is a directory, not a torch.save file"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR})
fx_cli_one_line(run_input_truncated "truncated.input.pt: damaged zip archive \\(no end of central directory record"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/truncated.input.pt)
fx_cli_one_line(run_input_record_past_end "record_past_end.pt: damaged zip archive \\(record 'good.input/data/0'"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/record_past_end.pt)
fx_cli_one_line(inspect_short_weight "short_weight.pt: storage '0' \\(FloatStorage of 12 elements\\) needs 48 bytes but its record 'linear/data/0' has 16"
                inspect ${FX_CORRUPT_DIR}/short_weight.pt)
fx_cli_one_line(inspect_dev_zero "/dev/zero: is a character device, not a TorchScript file"
                inspect /dev/zero)
fx_cli_one_line(inspect_directory "corrupt_files: is a directory, not a TorchScript file"
                inspect ${FX_CORRUPT_DIR})
fx_cli_one_line(profile_short_storage "short_storage.pt: tensor 0 needs 400 bytes of storage but has 16"
                profile ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/short_storage.pt)
add_test(NAME cli.run_linear_good COMMAND ${FX_CLI} run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/linear.input.pt)
set_tests_properties(cli.run_linear_good PROPERTIES FIXTURES_REQUIRED fx_corrupt_files PASS_REGULAR_EXPRESSION "tensor \\[2, 3\\] Float")
fx_cli_one_line(inspect_bad_code "bad_code.pt: cannot load TorchScript: Arguments for call are not valid \\(aten::linear: Keyword argument frob unknown\\) at File .*line 14: return torch.linear"
                inspect ${FX_CORRUPT_DIR}/bad_code.pt)
fx_cli_one_line(inspect_bad_debug_pkl "bad_debug_pkl_deflated.pt: cannot import TorchScript: libtorch internal check isTuple\\(\\) failed: Expected Tuple but got Int"
                inspect ${FX_CORRUPT_DIR}/bad_debug_pkl_deflated.pt)
# The crash guard: a command that dies from a signal (FXCPP_TEST_CRASH raises
# SIGSEGV where the command records what it does) is one line and exit 2.
fx_cli_one_line(crash_guard "fxcpp run: crashed \\(Segmentation fault, signal 11\\) while reading [^ ]*linear.pt; the file is damaged"
                run ${FX_CORRUPT_DIR}/linear.pt --input ${FX_CORRUPT_DIR}/linear.input.pt)
set_tests_properties(cli.crash_guard PROPERTIES ENVIRONMENT "FXCPP_TEST_CRASH=1")

# The command line itself (CLI11, issue #11): --version, per-command help,
# --opt=value and -i, `--`, --warmup 0, output paths checked before any work.
add_test(NAME cli.version COMMAND ${FX_CLI} --version)
set_tests_properties(cli.version PROPERTIES PASS_REGULAR_EXPRESSION "^fxcpp [0-9]+\\.[0-9]+\\.[0-9]+ \\(libtorch 1\\.13\\.[0-9]+\\)")
add_test(NAME cli.command_help COMMAND ${FX_CLI} profile --help)
set_tests_properties(cli.command_help PROPERTIES
                     PASS_REGULAR_EXPRESSION "-i,--input VALUE.*--warmup VALUE.*usage: fxcpp profile MODEL")
add_test(NAME cli.opt_equals_value COMMAND ${FX_CLI} run ${FX_CORRUPT_DIR}/linear.pt --input=${FX_CORRUPT_DIR}/linear.input.pt)
add_test(NAME cli.short_option_and_dashdash COMMAND ${FX_CLI} run -i ${FX_CORRUPT_DIR}/linear.input.pt -- ${FX_CORRUPT_DIR}/linear.pt)
add_test(NAME cli.warmup_zero COMMAND ${FX_CLI} profile ${FX_CORRUPT_DIR}/linear.pt -i ${FX_CORRUPT_DIR}/linear.input.pt
                 --warmup 0 --runs 1 --trace ${FX_BIN}/linear.trace.json)
set_tests_properties(cli.opt_equals_value cli.short_option_and_dashdash PROPERTIES FIXTURES_REQUIRED fx_corrupt_files
                     PASS_REGULAR_EXPRESSION "tensor \\[2, 3\\] Float")
set_tests_properties(cli.warmup_zero PROPERTIES FIXTURES_REQUIRED fx_corrupt_files
                     PASS_REGULAR_EXPRESSION "1 timed runs \\(after 0 warm-up\\)")
fx_cli_one_line(output_dir_missing "no_such_dir/out.pt: no such directory '[^']*no_such_dir' \\(--output\\)"
                run ${FX_CORRUPT_DIR}/linear.pt -i ${FX_CORRUPT_DIR}/linear.input.pt -o ${FX_BIN}/no_such_dir/out.pt)
fx_cli_one_line(unknown_option "The following argument was not expected: --frobnicate"
                run ${FX_CORRUPT_DIR}/linear.pt --frobnicate)
fx_cli_one_line(negative_warmup "--warmup expects an integer >= 0, got '-1'"
                profile ${FX_CORRUPT_DIR}/linear.pt -i ${FX_CORRUPT_DIR}/linear.input.pt --warmup=-1)
# Inputs saved as a dict or a bare list: tests/cli/tests_inputs.cmake.
