# The int8 accuracy test on real data (issue 22): python/digits_fixture.py trains a
# small CNN on sklearn's digits (python3-sklearn) and writes its exports, the
# held-out split, calibration data and Python's int8 accuracy; tests/quantization/
# digits_test.cpp (QuantizationDigits.*) and the CLI tests (tests/cli/quantize.cmake)
# read them. The plain test_quantization program skips when they are missing.
set(FX_DIGITS_DIR ${FX_MODELS_DIR}/digits)
add_test(NAME quantization_digits_fixture
         COMMAND /usr/bin/python3 ${FX_SRC}/python/digits_fixture.py ${FX_DIGITS_DIR})
set_tests_properties(quantization_digits_fixture PROPERTIES FIXTURES_SETUP fx_digits TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_digits COMMAND test_quantization --gtest_filter=QuantizationDigits.*)
set_tests_properties(quantization_digits PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
# 7-bit weights where oneDNN has no VNNI (held at AVX2): oneDNN's int8 kernels, as accurate.
add_test(NAME quantization_digits_AVX2 COMMAND test_quantization --gtest_filter=QuantizationDigits.*SevenBit*)
set_tests_properties(quantization_digits_AVX2 PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2")
