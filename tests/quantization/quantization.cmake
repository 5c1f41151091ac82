# The differential tests of tests/quantization/models_test.cpp read torchvision
# models exported by python/goldens/quantization_goldens.py --export (seeded
# random weights, batch-norm statistics set by a train-mode pass); the plain
# test_quantization program skips them when the files are missing.
# It also writes the goldens computed on this machine (observer scales depend on the CPU's fp32 kernels).
add_test(NAME quantization_models_export
         COMMAND /usr/bin/python3 ${FX_SRC}/python/goldens/quantization_goldens.py --export ${FX_MODELS_DIR}/quant
                 --goldens ${FX_MODELS_DIR}/quant/quantization.json)
set_tests_properties(quantization_models_export PROPERTIES FIXTURES_SETUP fx_quant_models TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME quantization_models COMMAND test_quantization --gtest_filter=QuantizationModels.*)
set_tests_properties(quantization_models PROPERTIES FIXTURES_REQUIRED fx_quant_models TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1;FX_QUANT_MODELS=1")
# The int8 oneDNN kernels on CPUs without VNNI (oneDNN told to stop at AVX2 / AVX512_CORE):
# correct there too (the linear layers and convolutions with an input zero point take the
# float path where oneDNN's own int8 arithmetic would saturate or be wrong).
# emulated_avx2_int8: the same suites on an emulated AVX2-only CPU (cmake/emulated_cpu.cmake).
set(FX_INT8_KERNEL_SUITES *QConvKernel*:QLinearKernel*:LowerInt8*:OnednnQuantize*)
foreach(isa AVX2 AVX512_CORE)
  add_test(NAME quantization_int8_${isa} COMMAND test_quantization --gtest_filter=${FX_INT8_KERNEL_SUITES})
  set_tests_properties(quantization_int8_${isa} PROPERTIES
                       ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=${isa};DNNL_MAX_CPU_ISA=${isa}")
endforeach()
add_test(NAME emulated_avx2_int8
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_quantization> --gtest_filter=${FX_INT8_KERNEL_SUITES})
set_tests_properties(emulated_avx2_int8 PROPERTIES TIMEOUT 900 ENVIRONMENT "${FX_EMULATED_AVX2_ENV}")
