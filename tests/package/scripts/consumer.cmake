# Driven by tests/package/tests.cmake (cmake -P). MODE:
#   install           cmake --install the build tree into PREFIX (fresh)
#   find_package      build examples/consumer against PREFIX, run it; also
#                     compile it with pkg-config's flags and run the
#                     installed fxcpp binary (its RPATH finds the libraries)
#   add_subdirectory  build examples/consumer with fxcpp's sources inside (linked to
#                     one layer; a dry run of the rest)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${err}")
  endif()
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run(${CMAKE_COMMAND} --install ${FX_BIN} --prefix ${PREFIX})
  foreach(f include/fx/fx.h lib/cmake/fxcpp/fxcppConfig.cmake lib/cmake/fxcpp/fxcppConfigVersion.cmake
            lib/pkgconfig/fxcpp.pc bin/fxcpp)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  file(GLOB sonames ${PREFIX}/lib/libfxcpp_core.so.*)
  list(LENGTH sonames n)
  if(n LESS 2)
    message(FATAL_ERROR "libfxcpp_core.so is not versioned: ${sonames}")
  endif()
  return()
endif()

set(model ${MODELS}/resnet18.pt)
set(input ${MODELS}/resnet18.input.pt)
file(REMOVE_RECURSE ${WORK})
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${FX_SRC}/examples/consumer -B ${WORK} -G Ninja -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${PREFIX})
else()
  # What this checks is the build inside another project, not the code (the
  # main build compiled these sources): so the consumer links one layer,
  # fxcpp::fxcpp_import (4 of fxcpp's 12 libraries), compiled unoptimised in
  # one unity batch per library: 1.5 min of 2 cores here, against 10 for all
  # of fxcpp in Release. Ninja's dry run of everything then checks that the
  # other layers' builds are generated whole inside another project.
  run(${CMAKE_COMMAND} -S ${FX_SRC}/examples/consumer -B ${WORK} -G Ninja -DCMAKE_BUILD_TYPE=Debug
      -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DFXCPP_UNITY_BATCH=64
      -DFXCPP_SOURCE_DIR=${FX_SRC} -DFXCPP_CONSUMER_LINK=fxcpp::fxcpp_import)
  run(${CMAKE_COMMAND} --build ${WORK} -- -n)
endif()
run(${CMAKE_COMMAND} --build ${WORK} --target consumer)
run(${WORK}/consumer ${model} ${input})

if(MODE STREQUAL "find_package")
  # The installed command line runs from its prefix (RPATH $ORIGIN/../lib).
  run(${PREFIX}/bin/fxcpp inspect ${model})
  # pkg-config gives what a Makefile needs.
  set(ENV{PKG_CONFIG_PATH} ${PREFIX}/lib/pkgconfig)
  execute_process(COMMAND pkg-config --cflags --libs fxcpp OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config fxcpp failed")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(c++ -O1 ${FX_SRC}/examples/consumer/main.cpp -o ${WORK}/consumer_pc ${flags} -Wl,-rpath,${PREFIX}/lib)
  run(${WORK}/consumer_pc ${model} ${input})
endif()
