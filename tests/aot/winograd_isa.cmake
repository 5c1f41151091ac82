# The training compiler's Winograd rewrite held at AVX2, as on an AVX2-only
# CPU (oneDNN 2.6 has Winograd kernels only with AVX-512): the pass leaves
# graphs alone, the operators say why, and the compiled step trains as
# eager on the direct kernels. (tests/optimize/isa.cmake holds the
# optimiser's paths the same way.)
add_test(NAME aot_winograd_isa_AVX2 COMMAND test_aot --gtest_filter=WinogradConv2d.*:ConvAsWinograd.*:TrainingCompiler.*)
set_tests_properties(aot_winograd_isa_AVX2 PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;ATEN_CPU_CAPABILITY=avx2")
