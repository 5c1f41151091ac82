# Every model of the import zoo (tests/import/tests.cmake exports them into
# FX_MODELS_DIR) round-tripped through fx::save / fx::load: same printed
# graph, same code, bitwise-equal outputs. One entry per export group.
fx_executable(round_trip_zoo SOURCES ${FX_SRC}/tests/serialize/zoo/round_trip_zoo.cpp LIBS fxcpp)
set_target_properties(round_trip_zoo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/tests)
set(i 0)
foreach(group ${FX_MODEL_GROUPS})
  separate_arguments(models UNIX_COMMAND "${group}")
  add_test(NAME serialize_zoo_${i} COMMAND round_trip_zoo ${FX_MODELS_DIR} ${FX_BIN}/serialize_zoo ${models})
  set_tests_properties(serialize_zoo_${i} PROPERTIES FIXTURES_REQUIRED fx_models_${i} TIMEOUT 900
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  math(EXPR i "${i} + 1")
endforeach()
