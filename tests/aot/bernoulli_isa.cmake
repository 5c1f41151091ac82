# fxcpp::bernoulli_'s loops are built for AVX-512, AVX2 and the baseline
# (target_clones: the CPU picks); all three must draw ATen's masks to the bit.
# The host runs one of them (FxcppBernoulli.* in test_aot); these run the
# others on emulated CPUs (cmake/emulated_cpu.cmake): EPYC-Milan (AVX2, no
# AVX-512) and qemu64 (SSE2 only).
add_test(NAME emulated_avx2_bernoulli COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_aot> --gtest_filter=FxcppBernoulli.*)
set_tests_properties(emulated_avx2_bernoulli PROPERTIES TIMEOUT 300 ENVIRONMENT "${FX_EMULATED_AVX2_ENV}")
if(FX_QEMU_X86_64)
  add_test(NAME emulated_baseline_bernoulli
           COMMAND ${FX_QEMU_X86_64} -cpu qemu64 $<TARGET_FILE:test_aot> --gtest_filter=FxcppBernoulli.*)
  set_tests_properties(emulated_baseline_bernoulli PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
