# Export to TorchScript on the torchvision zoo (issue 10): every model
# exported by python/export_models.py (fixtures of tests/import/tests.cmake)
# is imported, rewritten by passes and exported by fx::export_torchscript
# (tests/serialize/export/export_zoo.cpp); python/check_export.py then loads
# each file with stock torch.jit.load (Debian's python3) and compares its
# output with eager torchvision and with the original scripted model.
fx_executable(export_zoo SOURCES ${FX_SRC}/tests/serialize/export/export_zoo.cpp)
set_target_properties(export_zoo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/tests)
set(FX_EXPORTED_DIR ${FX_BIN}/exported_models)
set(i 0)
foreach(group ${FX_MODEL_GROUPS})  # defined by tests/import/tests.cmake
  separate_arguments(models UNIX_COMMAND "${group}")
  add_test(NAME export_models_${i}
           COMMAND sh -c "\"$0\" \"$1\" \"$2\" $3 && /usr/bin/python3 \"$4\" --models \"$1\" --exported \"$2\" $3"
                   $<TARGET_FILE:export_zoo> ${FX_MODELS_DIR} ${FX_EXPORTED_DIR} "${group}"
                   ${FX_SRC}/python/check_export.py)
  set_tests_properties(export_models_${i} PROPERTIES FIXTURES_REQUIRED fx_models_${i} TIMEOUT 900
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  math(EXPR i "${i} + 1")
endforeach()
# A model traced in C++ and rewritten (replace_pattern), exported, loaded by Python.
add_test(NAME export_traced_residual_net
         COMMAND sh -c "\"$0\" --traced \"$1/ref\" \"$1\" && /usr/bin/python3 \"$2\" --models \"$1/ref\" --exported \"$1\" residual_net"
                 $<TARGET_FILE:export_zoo> ${FX_EXPORTED_DIR}/traced ${FX_SRC}/python/check_export.py)
set_tests_properties(export_traced_residual_net PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1"
                     PASS_REGULAR_EXPRESSION "residual_net +ok .*1 models match")
