# `import fxcpp` (issue 37): pytest (Debian's python3-pytest) on the extension
# module as the build tree holds it (PYTHONPATH=${FX_BIN}/python, see
# cmake/python_module.cmake). python.convert / python.passes / python.api / python.training are
# quick (a handful of torchvision models at 64x64, seeded honest weights);
# python.models_all (opt-in) runs every torchvision classifier torch.fx traces.
if(TARGET fxcpp_python)
  set(fx_pytest_env "PYTHONPATH=${FX_BIN}/python" "OMP_NUM_THREADS=1" "PYTHONDONTWRITEBYTECODE=1")
  foreach(name convert passes api training training_rewrites decoders)
    add_test(NAME python.${name}
             COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/test_${name}.py)
    set_tests_properties(python.${name} PROPERTIES ENVIRONMENT "${fx_pytest_env}" TIMEOUT 600)
  endforeach()
  # The long sweep of the training compiler's rewrites (issue 66: six torchvision models and the encoder, batch
  # 1-32, inputs 32-224, both partitions): label `long`, which `make test` leaves out and
  # `make test-long` (ctest -L long) runs.
  add_test(NAME python.training_rewrites_long
           COMMAND /usr/bin/python3 -m pytest -q -s -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/test_training_rewrites.py
                   -k "every_rewrite")
  set_tests_properties(python.training_rewrites_long PROPERTIES TIMEOUT 3600 LABELS long
                       ENVIRONMENT "${fx_pytest_env};FXCPP_SWEEP=long")
  # fxcpp.quantize(weight_bits=7) where oneDNN has no VNNI (held at AVX2): all on int8 kernels.
  add_test(NAME python.api_quantize_AVX2
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/test_api.py
                   -k "quantize")
  set_tests_properties(python.api_quantize_AVX2 PROPERTIES TIMEOUT 600 ENVIRONMENT
                       "${fx_pytest_env};ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2")
  # fxcpp.optimize's linear kernels where Auto times them (held at AVX2): timed on one thread,
  # oneDNN's untimed on two beside Debian's OpenBLAS.
  add_test(NAME python.api_linear_kernel_AVX2
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/test_api.py
                   -k "linear_kernel")
  set_tests_properties(python.api_linear_kernel_AVX2 PROPERTIES TIMEOUT 600 ENVIRONMENT
                       "${fx_pytest_env};ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2")
endif()
# Every torchvision classifier torch.fx traces (~70; 6 min on 2 cores, so not in the default run):
# cmake -DFXCPP_PYTHON_ALL_MODELS=ON, then ctest -R python.models_all.
option(FXCPP_PYTHON_ALL_MODELS "ctest entry python.models_all: import fxcpp on every torchvision classifier" OFF)
if(TARGET fxcpp_python AND FXCPP_PYTHON_ALL_MODELS)
  add_test(NAME python.models_all
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_LIST_DIR}/test_convert.py
                   -k "classifier")
  set_tests_properties(python.models_all PROPERTIES ENVIRONMENT "${fx_pytest_env};FXCPP_ALL_MODELS=1" TIMEOUT 900)
endif()
# The newcomer example (examples/python/): it checks its own results.
if(TARGET fxcpp_python)
  add_test(NAME python.example_optimize_resnet
           COMMAND /usr/bin/python3 ${FX_SRC}/examples/python/optimize_resnet.py)
  set_tests_properties(python.example_optimize_resnet PROPERTIES ENVIRONMENT "${fx_pytest_env}"
                       PASS_REGULAR_EXPRESSION "OK" TIMEOUT 300)
endif()
