# Training the digits CNN through fx::aot_module (tests/aot/digits_training_test.cpp)
# on python/digits_fixture.py's data (tests/quantization/digits.cmake writes it:
# fixture fx_digits). The plain test_aot program skips the test when the data is missing.
add_test(NAME aot_digits COMMAND test_aot --gtest_filter=AotDigits.*)
set_tests_properties(aot_digits PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
