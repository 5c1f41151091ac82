# Every model of the import zoo (tests/import/tests.cmake exports them into
# FX_MODELS_DIR) round-tripped through fx::save / fx::load: same printed
# graph, same code, bitwise-equal outputs. One entry per export group.
fx_executable(round_trip_zoo SOURCES ${CMAKE_SOURCE_DIR}/tests/serialize/zoo/round_trip_zoo.cpp LIBS fxcpp)
set_target_properties(round_trip_zoo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
set(i 0)
foreach(group ${FX_MODEL_GROUPS})
  separate_arguments(models UNIX_COMMAND "${group}")
  add_test(NAME serialize_zoo_${i} COMMAND round_trip_zoo ${FX_MODELS_DIR} ${CMAKE_BINARY_DIR}/serialize_zoo ${models})
  set_tests_properties(serialize_zoo_${i} PROPERTIES FIXTURES_REQUIRED fx_models_${i} TIMEOUT 900
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  math(EXPR i "${i} + 1")
endforeach()
