# fxcpp int8 vs fp32 on random-weight torchvision models, held to Python's int8
# (tests/quantization/agreement_test.cpp): python/quantization_agreement.py
# exports resnet18 and mobilenet_v2 (honest batch-norm statistics, 64x64),
# calibration data, 64 inputs and Python's int8 relative error and top-1 agreement.
add_test(NAME quantization_agreement_export
         COMMAND /usr/bin/python3 ${FX_SRC}/python/quantization_agreement.py ${FX_MODELS_DIR}/quant_agree)
set_tests_properties(quantization_agreement_export PROPERTIES FIXTURES_SETUP fx_quant_agree TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_agreement COMMAND test_quantization --gtest_filter=QuantizationAgreement.*)
set_tests_properties(quantization_agreement PROPERTIES FIXTURES_REQUIRED fx_quant_agree TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
