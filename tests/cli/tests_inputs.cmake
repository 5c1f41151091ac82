# Inputs and models saved the ordinary way in Python (issue 26): plain
# torch.save of a dict of named inputs or a bare list (Python pickles
# one-element ones with APPEND / SETITEM), matched to forward's parameters;
# and inspect --summary with and without shapes.
set(FX_USER_FILES ${FX_BIN}/user_files)
fx_generated_cases(make_user_files make_user_files.py ${FX_USER_FILES} fx_user_files)
# linear.pt is forward(input): {'input': x} and [x] are its one argument.
foreach(kind dict list)
  add_test(NAME cli.run_${kind}_input COMMAND ${FX_CLI} run ${FX_CORRUPT_DIR}/linear.pt -i ${FX_USER_FILES}/${kind}_input.pt)
  set_tests_properties(cli.run_${kind}_input PROPERTIES FIXTURES_REQUIRED "fx_corrupt_files;fx_user_files"
                       PASS_REGULAR_EXPRESSION "^tensor \\[2, 3\\] Float")
endforeach()
fx_cli_one_line(run_unknown_key_input
                "unknown_key_input.pt: the inputs are a dict whose 'x' is not a parameter of forward \\(input\\)"
                run ${FX_CORRUPT_DIR}/linear.pt -i ${FX_USER_FILES}/unknown_key_input.pt)
set_tests_properties(cli.run_unknown_key_input PROPERTIES FIXTURES_REQUIRED "fx_corrupt_files;fx_user_files")
# forward(images: List[Tensor], scale=1.0): a bare list is the images; a dict names them.
add_test(NAME cli.run_list_of_images COMMAND ${FX_CLI} run ${FX_USER_FILES}/images.pt -i ${FX_USER_FILES}/images_list.pt)
add_test(NAME cli.run_dict_of_images COMMAND ${FX_CLI} run ${FX_USER_FILES}/images.pt -i ${FX_USER_FILES}/images_dict.pt)
set_tests_properties(cli.run_list_of_images PROPERTIES FIXTURES_REQUIRED fx_user_files
                     PASS_REGULAR_EXPRESSION "^tensor \\[2, 3, 2, 2\\] Float  min 1  max 1")
set_tests_properties(cli.run_dict_of_images PROPERTIES FIXTURES_REQUIRED fx_user_files
                     PASS_REGULAR_EXPRESSION "^tensor \\[1, 3, 2, 2\\] Float  min 2  max 2")
# --summary without --input / --shape: parameters only, as torchinfo without input_size.
add_test(NAME cli.summary_without_shapes COMMAND ${FX_CLI} inspect ${FX_USER_FILES}/seq.script.pt --summary)
set_tests_properties(cli.summary_without_shapes PROPERTIES FIXTURES_REQUIRED fx_user_files
                     PASS_REGULAR_EXPRESSION "^node +type +params\n-+\n_0 +Conv2d +1792\n_1 +Identity +-\n_2 +Flatten +-\n_3 +Linear +2570\n-+\nTotal params: 4362 \\(4.36 K\\)\nTrainable params: 4362\nParams \\+ buffers size: 0.02 MB\n$")
# With shapes: the scripted Identity passes its input on; the traced one is
# what torch.jit.trace keeps of it, a call without input or output.
add_test(NAME cli.summary_identity COMMAND ${FX_CLI} inspect ${FX_USER_FILES}/seq.script.pt --summary
         --input ${FX_USER_FILES}/seq.input.pt)
set_tests_properties(cli.summary_identity PROPERTIES FIXTURES_REQUIRED fx_user_files
                     PASS_REGULAR_EXPRESSION "\n_1 +Identity +\\[1, 64, 2, 2\\] +- +- +-\n.*\nTotal MACs: 9472 \\(9.47 KMAC\\)\n")
add_test(NAME cli.summary_traced_identity COMMAND ${FX_CLI} inspect ${FX_USER_FILES}/seq.trace.pt --summary --shape 1x3x4x4)
set_tests_properties(cli.summary_traced_identity PROPERTIES FIXTURES_REQUIRED fx_user_files
                     PASS_REGULAR_EXPRESSION "\n_1 +Identity +None +- +- +-\n.*\n-+\n\\(1 module call with output None: torch.jit.trace recorded a module that returns its input")
# Small counts are not repeated: "Total params: 15", not "15 (15)".
add_test(NAME cli.summary_small_counts COMMAND ${FX_CLI} inspect ${FX_CORRUPT_DIR}/linear.pt --summary --shape 2x4)
set_tests_properties(cli.summary_small_counts PROPERTIES FIXTURES_REQUIRED fx_corrupt_files
                     PASS_REGULAR_EXPRESSION "\nTotal params: 15\nTrainable params: 15\nTotal MACs: 24\nTotal FLOPs: 48\n")
