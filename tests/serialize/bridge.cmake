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
# Python -> C++ as a torch.fx user starts (issue 28): torchvision classifiers
# as torch.fx.symbolic_trace makes them (one of each family here, vgg as
# alexnet; all 70 that symbolic_trace traces: scripts/check_bridge_models.sh), a
# convert_fx-quantized and a make_fx resnet18: fxcpp run = eager, run
# --optimize within 1e-4, Python -> C++ -> Python keeps names, targets, code.
foreach(group "resnet18 regnet_x_400mf mnasnet0_5 squeezenet1_0 densenet121"
              "googlenet inception_v3 mobilenet_v3_small efficientnet_b0 efficientnet_v2_s"
              "convnext_tiny swin_t swin_v2_t" "alexnet" "quantized_resnet18 make_fx_resnet18 functional_zoo")
  separate_arguments(models UNIX_COMMAND "${group}")
  list(GET models 0 first)
  add_test(NAME serialize_bridge_trace_${first}
           COMMAND sh -c "mkdir -p \"$1\" && exec /usr/bin/python3 \"$0\" symbolic-trace \"$@\""
                   ${FX_SRC}/python/test_fxcpp_bridge.py ${FX_BRIDGE_DIR}/trace_${first} $<TARGET_FILE:fxcpp_cli>
                   ${models})
  set_tests_properties(serialize_bridge_trace_${first} PROPERTIES PASS_REGULAR_EXPRESSION "OK"
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
add_test(NAME serialize_bridge_save_errors COMMAND /usr/bin/python3 ${FX_SRC}/python/test_fxcpp_bridge.py errors)
set_tests_properties(serialize_bridge_save_errors PROPERTIES PASS_REGULAR_EXPRESSION "OK")
# A node C++ changed keeps its ATen form when Python reads it back; saving
# without example inputs leaves overloads to fxcpp, and runs the same.
add_test(NAME serialize_bridge_python_form
         COMMAND /usr/bin/python3 ${FX_SRC}/python/test_fxcpp_bridge.py python-form $<TARGET_FILE:fxcpp_cli>)
set_tests_properties(serialize_bridge_python_form PROPERTIES PASS_REGULAR_EXPRESSION "OK"
                     ENVIRONMENT "OMP_NUM_THREADS=1")
