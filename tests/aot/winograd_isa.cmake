# The training compiler's Winograd rewrite held at AVX2, as on an AVX2-only
# CPU (oneDNN 2.6 has Winograd kernels only with AVX-512): the pass leaves
# graphs alone, the operators say why, and the compiled step trains as
# eager on the direct kernels. (tests/optimize/isa.cmake holds the
# optimiser's paths the same way.) emulated_avx2_winograd: the same suites on
# an emulated AVX2-only CPU (cmake/emulated_cpu.cmake).
set(FX_WINOGRAD_SUITES WinogradConv2d.*:ConvAsWinograd.*:TrainingCompiler.*)
add_test(NAME aot_winograd_isa_AVX2 COMMAND test_aot --gtest_filter=${FX_WINOGRAD_SUITES})
set_tests_properties(aot_winograd_isa_AVX2 PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;ATEN_CPU_CAPABILITY=avx2")
add_test(NAME emulated_avx2_winograd
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_aot> --gtest_filter=${FX_WINOGRAD_SUITES})
set_tests_properties(emulated_avx2_winograd PROPERTIES TIMEOUT 900 ENVIRONMENT "${FX_EMULATED_AVX2_ENV}")
