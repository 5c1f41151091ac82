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
# QAT on real data: python/qat_digits_fixture.py trains the depthwise-separable digits net
# and scores Python's post-training int8 and QAT of it and of digits_fixture.py's CNN (whose
# files it reads: it runs after that fixture); tests/quantization/qat_digits_test.cpp.
add_test(NAME quantization_qat_digits_fixture
         COMMAND /usr/bin/python3 ${FX_SRC}/python/qat_digits_fixture.py ${FX_MODELS_DIR}/digits)
set_tests_properties(quantization_qat_digits_fixture PROPERTIES FIXTURES_SETUP fx_qat_digits
                     FIXTURES_REQUIRED fx_digits TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_qat_digits COMMAND test_quantization --gtest_filter=QatDigits.*)
set_tests_properties(quantization_qat_digits PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_qat_digits" TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
# The same with oneDNN held at AVX2 (no int8 dot products, where PyTorch's own onednn int8
# kernels fail on depthwise nets): fxcpp's QAT int8 model still computes its reference model.
# Its training losses are compared with Python's held at AVX2 too (the fp32 kernels of
# another ISA round differently): the fixture's --losses-only run writes them.
add_test(NAME quantization_qat_digits_fixture_AVX2
         COMMAND /usr/bin/python3 ${FX_SRC}/python/qat_digits_fixture.py ${FX_MODELS_DIR}/digits --losses-only _avx2)
set_tests_properties(quantization_qat_digits_fixture_AVX2 PROPERTIES FIXTURES_SETUP fx_qat_digits_avx2
                     FIXTURES_REQUIRED fx_qat_digits TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2")
add_test(NAME quantization_qat_digits_AVX2 COMMAND test_quantization --gtest_filter=QatDigits.*)
set_tests_properties(quantization_qat_digits_AVX2 PROPERTIES
                     FIXTURES_REQUIRED "fx_digits;fx_qat_digits;fx_qat_digits_avx2" TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;FX_QAT_LOSSES_SUFFIX=_avx2")
