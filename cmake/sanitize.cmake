# Sanitizer and fuzzing builds (issue #12). Included from the top
# CMakeLists.txt before any target exists, so every fxcpp library, test and
# program compiles with the same flags. Default builds are unchanged.
#
#   -DFXCPP_SANITIZE=address;undefined   the whole suite under ASan + UBSan
#                                        (make check-sanitize, build-asan)
#   -DFXCPP_SANITIZE=thread              TSan (the concurrency tests, build-tsan)
#   -DFXCPP_FUZZ=ON                      clang only: libFuzzer targets of fuzz/
#                                        (make fuzz, build-fuzz); the libraries
#                                        get coverage instrumentation + ASan/UBSan
# libtorch itself is not instrumented; scripts/*.supp hold the few
# suppressions that needs (see there).
set(FXCPP_SANITIZE "" CACHE STRING "Sanitizers for every target: address;undefined, or thread (empty: none)")
option(FXCPP_FUZZ "Build the libFuzzer targets of fuzz/ (clang; implies ASan + UBSan)" OFF)

# Listing a test program's tests (ctest's PRE_TEST discovery) loads libtorch;
# under a sanitizer that takes longer than GoogleTest's default 5 s.
set(FX_GTEST_DISCOVERY_TIMEOUT 5)
set(FX_SANITIZE_LIST ${FXCPP_SANITIZE})
set(FX_SANITIZE_CONSUMER_LINK "")
if(FXCPP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FXCPP_FUZZ needs clang (CXX=clang++): libFuzzer is part of clang")
  endif()
  list(APPEND FX_SANITIZE_LIST address undefined)
  list(REMOVE_DUPLICATES FX_SANITIZE_LIST)
endif()
if(FX_SANITIZE_LIST)
  if("thread" IN_LIST FX_SANITIZE_LIST AND "address" IN_LIST FX_SANITIZE_LIST)
    message(FATAL_ERROR "FXCPP_SANITIZE: thread cannot be combined with address")
  endif()
  list(JOIN FX_SANITIZE_LIST "," FX_SANITIZE_FLAGS)
  set(FX_SANITIZE_COMPILE -fsanitize=${FX_SANITIZE_FLAGS} -fno-omit-frame-pointer)
  if("undefined" IN_LIST FX_SANITIZE_LIST)
    # A UBSan report is a failure, not a warning on stderr. vptr checks need
    # RTTI of every class across libtorch's uninstrumented libraries and
    # report false positives there; the other checks stay.
    list(APPEND FX_SANITIZE_COMPILE -fno-sanitize-recover=undefined -fno-sanitize=vptr)
  endif()
  set(FX_SANITIZE_LINK -fsanitize=${FX_SANITIZE_FLAGS})
  # A sanitized fxcpp library needs the sanitizer runtime loaded first, so a
  # program using it (an installed fxcpp: find_package's fxcpp::fxcpp, or
  # pkg-config's Libs) links with the same flag; without it the program
  # dies at start-up (ctest package.find_package).
  set(FX_SANITIZE_CONSUMER_LINK ${FX_SANITIZE_LINK})
  if(FXCPP_FUZZ)
    # Coverage for libFuzzer in every library; only the fuzz programs link
    # libFuzzer's main (fuzz/fuzz.cmake).
    list(APPEND FX_SANITIZE_COMPILE -fsanitize=fuzzer-no-link)
  endif()
  set(FX_GTEST_DISCOVERY_TIMEOUT 120)
  add_compile_options(${FX_SANITIZE_COMPILE})
  # Tests with nothing to check under sanitizers, disabled there (ctest lists
  # them as "Not Run (Disabled)"; the normal suite runs them):
  #   package.add_subdirectory  compiles fxcpp's sources a second time inside
  #                             examples/consumer with the consumer's own flags,
  #                             i.e. unsanitized (~10 min of a shared machine)
  # Tests that hand libtorch damaged zip archives (the fuzz.* mutants,
  # test_serialize's LoadFuzz) reach the one libtorch leak of scripts/lsan.supp
  # (PyTorchStreamReader::init). Its allocation is in miniz, a static part of
  # libtorch without symbols: only the slow unwinder sees the named frame the
  # suppression matches, so these run with it (once per process: ~5 s CPU).
  set(FX_SANITIZE_SLOW_UNWIND "")
  if("address" IN_LIST FX_SANITIZE_LIST AND CMAKE_VERSION VERSION_GREATER_EQUAL 3.22)
    set(FX_SANITIZE_SLOW_UNWIND ENVIRONMENT_MODIFICATION "ASAN_OPTIONS=string_append::fast_unwind_on_malloc=0")
  endif()
  set(FX_GTEST_SANITIZE_PROPERTIES_serialize ${FX_SANITIZE_SLOW_UNWIND})  # used by fx_gtest_suites
  function(fx_sanitize_test_properties)
    foreach(t package.add_subdirectory)
      if(TEST ${t})
        set_tests_properties(${t} PROPERTIES DISABLED TRUE)
      endif()
    endforeach()
    foreach(t fuzz.import fuzz.load_value fuzz.fx_load)
      if(TEST ${t} AND FX_SANITIZE_SLOW_UNWIND)
        set_tests_properties(${t} PROPERTIES ${FX_SANITIZE_SLOW_UNWIND})
      endif()
    endforeach()
  endfunction()
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
    cmake_language(DEFER CALL fx_sanitize_test_properties)  # after the tests exist
  endif()
  add_link_options(${FX_SANITIZE_LINK})
  message(STATUS "fxcpp: sanitizers ${FX_SANITIZE_FLAGS}")
endif()
