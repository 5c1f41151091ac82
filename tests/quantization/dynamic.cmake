# The differential tests of tests/quantization/dynamic_test.cpp read a small
# transformer encoder and an MLP traced by python/goldens/dynamic_goldens.py
# --export, with Python's quantize_dynamic outputs; the plain test_quantization
# program skips them when the files are missing.
add_test(NAME quantization_dynamic_export
         COMMAND /usr/bin/python3 ${FX_SRC}/python/goldens/dynamic_goldens.py --export ${FX_MODELS_DIR}/dyn)
set_tests_properties(quantization_dynamic_export PROPERTIES FIXTURES_SETUP fx_dyn_models TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_dynamic COMMAND test_quantization --gtest_filter=QuantizeDynamic*)
set_tests_properties(quantization_dynamic PROPERTIES FIXTURES_REQUIRED fx_dyn_models TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
