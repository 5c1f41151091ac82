# The fxcpp command line, run as a user would: good files give tables and
# files, bad ones one line and exit status 2.
set(FX_CLI $<TARGET_FILE:fxcpp_cli>)
# exit status 2 and the one-line message (sh checks the status, ctest the text)
function(fx_cli_bad_input name expect)
  add_test(NAME cli.${name} COMMAND sh -c "\"$0\" \"$@\"; test $? -eq 2" ${FX_CLI} ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expect}")
endfunction()
fx_cli_bad_input(inspect_not_a_zip "not a TorchScript file \\(not a zip archive" inspect ${CMAKE_SOURCE_DIR}/README.md)
fx_cli_bad_input(inspect_missing_file "no such file" inspect ${CMAKE_BINARY_DIR}/no_such.pt)
fx_cli_bad_input(unknown_command "unknown command 'frobnicate'" frobnicate)
# Real model files come from the first torchvision export group (tests/import/tests.cmake).
add_test(NAME cli.inspect_resnet18 COMMAND ${FX_CLI} inspect ${FX_MODELS_DIR}/resnet18.pt)
set_tests_properties(cli.inspect_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "call_module +layer1_0_conv1 +layer1.0.conv1.*def forward\\(self, x\\):")
add_test(NAME cli.profile_resnet18 COMMAND ${FX_CLI} profile ${FX_MODELS_DIR}/resnet18.pt
         --input ${FX_MODELS_DIR}/resnet18.input.pt --runs 1 --warmup 1 --top 3 --trace ${CMAKE_BINARY_DIR}/resnet18.trace.json)
set_tests_properties(cli.profile_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "Conv2d +20 .*wrote .*resnet18.trace.json")
fx_cli_bad_input(run_wrong_input "bad input|expected|Expected" run ${FX_MODELS_DIR}/resnet18.pt
                 --input ${FX_MODELS_DIR}/alexnet.output.pt)
set_tests_properties(cli.run_wrong_input PROPERTIES FIXTURES_REQUIRED fx_models_0)
