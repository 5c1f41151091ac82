# The differential tests of tests/quantization/qat_models_test.cpp read torchvision
# models, data and goldens written by python/goldens/qat_goldens.py --export on this
# machine (Python's prepare_qat_fx trained for a few steps: fp32 training follows the
# CPU's kernels); the plain test_quantization program skips them.
add_test(NAME quantization_qat_export
         COMMAND /usr/bin/python3 ${FX_SRC}/python/goldens/qat_goldens.py --export ${FX_MODELS_DIR}/qat)
set_tests_properties(quantization_qat_export PROPERTIES FIXTURES_SETUP fx_qat_models TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_qat_models COMMAND test_quantization --gtest_filter=QatModels.*)
set_tests_properties(quantization_qat_models PROPERTIES FIXTURES_REQUIRED fx_qat_models TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1;FX_QAT_MODELS=1")
