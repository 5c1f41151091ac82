# python/fxcpp_bridge.py both ways, with Debian's python3: files fx::save
# wrote load into torch.fx and compute what C++ computed; files the bridge
# wrote from Python GraphModules run in `fxcpp run` with Python's results.
set(FX_BRIDGE_DIR ${FX_BIN}/bridge)
add_test(NAME serialize_bridge_files
         COMMAND sh -c "mkdir -p \"$1\" && exec \"$0\" \"$1\"" $<TARGET_FILE:example_save_load> ${FX_BRIDGE_DIR})
set_tests_properties(serialize_bridge_files PROPERTIES FIXTURES_SETUP fx_bridge_files)
add_test(NAME serialize_bridge_cpp_to_python
         COMMAND /usr/bin/python3 ${FX_SRC}/python/test_fxcpp_bridge.py cpp-to-python
                 ${FX_BRIDGE_DIR}/save_load.fx ${FX_BRIDGE_DIR}/save_load.input.pt ${FX_BRIDGE_DIR}/save_load.output.pt)
set_tests_properties(serialize_bridge_cpp_to_python PROPERTIES FIXTURES_REQUIRED fx_bridge_files
                     PASS_REGULAR_EXPRESSION "OK" ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME serialize_bridge_python_to_cpp
         COMMAND sh -c "mkdir -p \"$1\" && exec /usr/bin/python3 \"$0\" python-to-cpp \"$1\" \"$2\""
                 ${FX_SRC}/python/test_fxcpp_bridge.py ${FX_BRIDGE_DIR} $<TARGET_FILE:fxcpp_cli>)
set_tests_properties(serialize_bridge_python_to_cpp PROPERTIES PASS_REGULAR_EXPRESSION "OK"
                     ENVIRONMENT "OMP_NUM_THREADS=1")
# An imported model (TorchScript leaves) converted by the CLI: Python runs
# the .fx as `fxcpp run` does.
add_test(NAME serialize_bridge_torchscript_leaves
         COMMAND sh -c "\"$0\" run \"$1/resnet18.fx\" --input \"$2/resnet18.input.pt\" --output \"$1/resnet18.fx.out.pt\" >/dev/null && exec /usr/bin/python3 \"$3\" cpp-to-python \"$1/resnet18.fx\" \"$2/resnet18.input.pt\" \"$1/resnet18.fx.out.pt\""
                 $<TARGET_FILE:fxcpp_cli> ${FX_BIN}/convert ${FX_MODELS_DIR}
                 ${FX_SRC}/python/test_fxcpp_bridge.py)
set_tests_properties(serialize_bridge_torchscript_leaves PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_converted"
                     PASS_REGULAR_EXPRESSION "OK" ENVIRONMENT "OMP_NUM_THREADS=1")
