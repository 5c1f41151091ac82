# fxcpp draw --training (issue 34): the joint forward+backward graph of a
# training step of an imported resnet18, coloured by its partition. The
# TorchScript leaves train (batch norm on batch statistics), so fxcpp's min
# cut recomputes batch-norm outputs and activations in backward.
add_test(NAME cli.draw_training
         COMMAND sh -c "\"$0\" draw \"$1/resnet18.pt\" --training --input \"$1/resnet18.input.pt\" -o \"$2/joint.svg\" && test -s \"$2/joint.svg\" && grep -c 'saved for backward' \"$2/joint.svg\""
                 ${FX_CLI} ${FX_MODELS_DIR} ${FX_BIN})
set_tests_properties(cli.draw_training PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "min-cut partition: [0-9]+ saved values \\([0-9]+ kB of activations\\), [1-9][0-9]* nodes recomputed in backward\n[1-9]")
add_test(NAME cli.draw_training_needs_input
         COMMAND sh -c "out=$(\"$0\" draw \"$1/resnet18.pt\" --training 2>&1); s=$?; printf '%s\\n' \"$out\"; [ $s -eq 2 ] || echo fx-cli-bad"
                 ${FX_CLI} ${FX_MODELS_DIR})
set_tests_properties(cli.draw_training_needs_input PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "^fxcpp draw: --training needs --input IN.pt \\(the shapes to trace the training step with\\)\n$"
                     FAIL_REGULAR_EXPRESSION "fx-cli-bad")
add_test(NAME cli.draw_training_bad_partition
         COMMAND sh -c "out=$(\"$0\" draw \"$1/resnet18.pt\" --training --input \"$1/resnet18.input.pt\" --partition fast 2>&1); s=$?; printf '%s\\n' \"$out\"; [ $s -eq 2 ] || echo fx-cli-bad"
                 ${FX_CLI} ${FX_MODELS_DIR})
set_tests_properties(cli.draw_training_bad_partition PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "^fxcpp draw: --partition fast: expected default, functorch-min-cut or min-cut\n$"
                     FAIL_REGULAR_EXPRESSION "fx-cli-bad")
