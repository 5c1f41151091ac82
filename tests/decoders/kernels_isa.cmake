# The decoder's own loops (decoder_attention, silu_mul and their vector exp,
# src/decoders/vec_exp.h) are built for AVX-512, AVX2 and plain C++, picked
# once from the CPU. The host runs one; these run the kernel suites on
# emulated CPUs (cmake/emulated_cpu.cmake): EPYC-Milan (AVX2, no AVX-512) and
# qemu64 (SSE2 only), each checking that its path was the one taken.
set(FX_DECODER_KERNEL_SUITES
    "DecoderAttention.EqualsTheRepeatedCachesMaskedSoftmax:DecoderPointwise.KernelsEqualHuggingFacesArithmetic:DecoderPointwise.VectorExpIsLibmsWithinTwoUlp")
add_test(NAME emulated_avx2_decoder_kernels
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_decoders> --gtest_filter=${FX_DECODER_KERNEL_SUITES})
set_tests_properties(emulated_avx2_decoder_kernels PROPERTIES TIMEOUT 300
                     ENVIRONMENT "${FX_EMULATED_AVX2_ENV};FX_EXPECT_DECODER_KERNEL=avx2")
if(FX_QEMU_X86_64)
  add_test(NAME emulated_baseline_decoder_kernels
           COMMAND ${FX_QEMU_X86_64} -cpu qemu64 $<TARGET_FILE:test_decoders> --gtest_filter=${FX_DECODER_KERNEL_SUITES})
  # OpenBLAS (the reference's matmul) takes qemu64 for a CPU with AVX unless told its core.
  set_tests_properties(emulated_baseline_decoder_kernels PROPERTIES TIMEOUT 300
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_CORETYPE=Prescott;FX_EXPECT_DECODER_KERNEL=plain")
endif()
