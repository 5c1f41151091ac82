# fx_gtest_suites(TARGET [DISCOVERY_TIMEOUT s] [PROPERTIES k v ...]): one
# ctest entry per GoogleTest suite of TARGET, named after the suite and run
# as `TARGET --gtest_filter=Suite.*`.
#
# Why not gtest_discover_tests (one entry, so one process, per test): every
# process of a program linked to libtorch pays ~0.75 s of libtorch's static
# initialisation (its operator registrations) before the first test, which
# was ~800 of 2 cores' seconds in `make test` for ~800 tests, most of them
# taking milliseconds. Per suite it is ~190 processes; a failure still names
# its test in the output (`ctest --output-on-failure`), and
# `ctest -R Suite` runs one suite.
#
# Like gtest_discover_tests' PRE_TEST mode, the suites are listed when ctest
# starts (`TARGET --gtest_list_tests`), again whenever TARGET was rebuilt.
# A suite whose tests all skipped (GTEST_SKIP: a model not exported, a CPU
# without the kernels) is reported as skipped; one with a failure fails.
set(FX_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/gtest_suites_add.cmake)

function(fx_gtest_suites target)
  cmake_parse_arguments(G "" "DISCOVERY_TIMEOUT" "PROPERTIES" ${ARGN})
  if(NOT G_DISCOVERY_TIMEOUT)
    set(G_DISCOVERY_TIMEOUT 5)
  endif()
  set(base ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites)
  string(CONCAT content
    "if(EXISTS \"$<TARGET_FILE:${target}>\")\n"
    "  if(NOT EXISTS \"${base}.cmake\" OR\n"
    "     NOT \"${base}.cmake\" IS_NEWER_THAN \"$<TARGET_FILE:${target}>\" OR\n"
    "     NOT \"${base}.cmake\" IS_NEWER_THAN \"\${CMAKE_CURRENT_LIST_FILE}\")\n"
    "    include(\"${FX_GTEST_SUITES_SCRIPT}\")\n"
    "    fx_gtest_suites_write([==[$<TARGET_FILE:${target}>]==] [==[${base}.cmake]==] ${G_DISCOVERY_TIMEOUT}\n"
    "                          [==[${CMAKE_CURRENT_BINARY_DIR}]==] [==[${G_PROPERTIES}]==])\n"
    "  endif()\n"
    "  include(\"${base}.cmake\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  file(GENERATE OUTPUT ${base}_include.cmake CONTENT "${content}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${base}_include.cmake)
endfunction()
