# Fuzz targets (issue #12). Every fuzz/<name>_fuzz.cpp defines
# LLVMFuzzerTestOneInput; adding such a file is all it takes (fuzz/README.md).
# Two optional comment lines in it:
#   // fuzz-seeds: torchscript tensors   seed kinds (python/make_fuzz_seeds.py;
#                                        default: all)
#   // fuzz-libs: fxcpp_import           what it links (default: all of fxcpp)
# Crash reproducers of a target live in tests/corpus/<name>/.
#
# Normal builds: <name>_regress = the target + fuzz/driver.cpp, and a ctest
# entry fuzz.<name> running the seeds, the reproducers and
# FXCPP_FUZZ_MUTATIONS fixed-seed mutants.
# -DFXCPP_FUZZ=ON (clang, make fuzz): <name>_fuzz, a libFuzzer program in
# build-fuzz/fuzz/, and fuzz/<name>.dirs listing its corpus folders.
set(FXCPP_FUZZ_MUTATIONS 2000 CACHE STRING "Mutants per fuzz target in the ctest regression runs")
set(FX_FUZZ_SEEDS ${FX_BIN}/fuzz/seeds)
set(FX_FUZZ_SEED_KINDS torchscript tensors fx)

# The seed corpus, generated at build time (Debian's python3 with torch).
add_custom_command(OUTPUT ${FX_FUZZ_SEEDS}/.done
                   COMMAND /usr/bin/python3 ${FX_SRC}/python/make_fuzz_seeds.py ${FX_FUZZ_SEEDS}
                   COMMAND ${CMAKE_COMMAND} -E touch ${FX_FUZZ_SEEDS}/.done
                   DEPENDS ${FX_SRC}/python/make_fuzz_seeds.py ${FX_SRC}/python/make_corrupt_files.py
                           ${FX_SRC}/python/fxcpp_bridge.py ${FX_SRC}/python/fxcpp/_bridge_lowering.py
                           ${FX_SRC}/python/fxcpp/_bridge_error.py ${FX_SRC}/python/test_fxcpp_bridge.py
                   COMMENT "Generating the seed corpus of the fuzz targets")
add_custom_target(fuzz_seeds DEPENDS ${FX_FUZZ_SEEDS}/.done)

file(GLOB FX_FUZZ_SOURCES CONFIGURE_DEPENDS ${FX_SRC}/fuzz/*_fuzz.cpp)
set(FX_FUZZ_PROGRAMS)
foreach(src ${FX_FUZZ_SOURCES})
  get_filename_component(stem ${src} NAME_WE)
  string(REGEX REPLACE "_fuzz$" "" name ${stem})
  set(kinds ${FX_FUZZ_SEED_KINDS})
  set(libs fxcpp)
  file(STRINGS ${src} line REGEX "^// fuzz-seeds:")
  if(line)
    string(REGEX REPLACE "^// fuzz-seeds:[ ]*" "" line "${line}")
    separate_arguments(kinds UNIX_COMMAND "${line}")
  endif()
  file(STRINGS ${src} line REGEX "^// fuzz-libs:")
  if(line)
    string(REGEX REPLACE "^// fuzz-libs:[ ]*" "" line "${line}")
    separate_arguments(libs UNIX_COMMAND "${line}")
  endif()
  set(dirs)
  foreach(k ${kinds})
    list(APPEND dirs ${FX_FUZZ_SEEDS}/${k})
  endforeach()
  list(APPEND dirs ${FX_SRC}/tests/corpus/${name})

  if(FXCPP_FUZZ)
    fx_executable(${name}_fuzz SOURCES ${src} LIBS ${libs})
    target_link_options(${name}_fuzz PRIVATE -fsanitize=fuzzer)
    set_target_properties(${name}_fuzz PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/fuzz)
    add_dependencies(${name}_fuzz fuzz_seeds)
    list(JOIN dirs "\n" dirs_text)
    file(WRITE ${FX_BIN}/fuzz/${name}.dirs "${dirs_text}\n")
    list(APPEND FX_FUZZ_PROGRAMS ${name}_fuzz)
  else()
    fx_executable(${name}_regress SOURCES ${src} ${FX_SRC}/fuzz/driver.cpp LIBS ${libs})
    set_target_properties(${name}_regress PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/fuzz)
    add_dependencies(${name}_regress fuzz_seeds)
    add_test(NAME fuzz.${name} COMMAND ${name}_regress -mutations=${FXCPP_FUZZ_MUTATIONS} -seed=12 ${dirs}
             WORKING_DIRECTORY ${FX_BIN}/fuzz)
    set_tests_properties(fuzz.${name} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 300)
  endif()
endforeach()
# All libFuzzer programs at once (make fuzz).
if(FX_FUZZ_PROGRAMS)
  add_custom_target(fuzz_targets)
  add_dependencies(fuzz_targets ${FX_FUZZ_PROGRAMS})
endif()
