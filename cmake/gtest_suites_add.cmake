# Included by ctest through fx_gtest_suites' include file (cmake/gtest_suites.cmake):
# lists the suites of a GoogleTest program and writes one add_test per suite.

# gtest's summary when every test of the run skipped and none failed: "[  PASSED  ] 0 tests."
# then only "[  SKIPPED ]" lines to the end (a failure adds "[  FAILED  ]" lines after them).
set(FX_GTEST_ALL_SKIPPED "\\[  PASSED  \\] 0 tests\\.\n\\[  SKIPPED \\] [0-9]+ tests?, listed below:\n(\\[  SKIPPED \\] [^\n]+\n)*$")

function(fx_gtest_suites_write exe out timeout workdir props)
  execute_process(COMMAND "${exe}" --gtest_list_tests WORKING_DIRECTORY "${workdir}" TIMEOUT ${timeout}
                  OUTPUT_VARIABLE listing ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${exe} --gtest_list_tests failed (${rc}):\n${listing}${err}")
  endif()
  # Quote every property value: ENVIRONMENT lists hold ';' and '='.
  set(quoted_props "")
  foreach(p IN LISTS props)
    string(APPEND quoted_props " [==[${p}]==]")
  endforeach()
  set(script "")
  string(REPLACE "\n" ";" lines "${listing}")
  foreach(line IN LISTS lines)
    # A suite line: "Suite." or "Instance/Suite.  # TypeParam = ..."; its tests follow, indented.
    if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
      set(suite "${CMAKE_MATCH_1}")
      string(APPEND script
        "add_test([==[${suite}]==] [==[${exe}]==] [==[--gtest_filter=${suite}.*]==])\n"
        "set_tests_properties([==[${suite}]==] PROPERTIES WORKING_DIRECTORY [==[${workdir}]==]"
        " SKIP_REGULAR_EXPRESSION [==[${FX_GTEST_ALL_SKIPPED}]==]${quoted_props})\n")
    endif()
  endforeach()
  file(WRITE "${out}" "${script}")
endfunction()
