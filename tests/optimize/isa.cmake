# The optimiser's oneDNN paths held at AVX2 (ONEDNN_MAX_CPU_ISA, and ATen's
# kernels at AVX2 too), as on an AVX2-only CPU (AMD EPYC Zen 3): no bf16 or
# Winograd kernels there, and the tests key their expectations by what
# oneDNN reports (onednn_cpu_test.cpp), so a machine with AVX-512 also runs
# the branches an AVX2 machine takes. The int8 kernels' AVX2 runs are in
# tests/quantization/quantization.cmake.
# (FX_EXPECT_ONEDNN_ISA: OnednnCpu checks that oneDNN saw the CPU it was meant to.)
set(FX_ISA_HELD_ENV "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;ATEN_CPU_CAPABILITY=avx2"
                    "FX_EXPECT_ONEDNN_ISA=avx2")
add_test(NAME optimize_isa_AVX2 COMMAND test_optimize --gtest_filter=OnednnCpu.*:OptimizeForInference.*:LowerToOneDnn.*:OptimizeLayout.*:LinearKernel.*)
add_test(NAME passes_minimizer_isa_AVX2 COMMAND test_passes --gtest_filter=MinimizerBase.*)
set_tests_properties(optimize_isa_AVX2 passes_minimizer_isa_AVX2 PROPERTIES TIMEOUT 600 ENVIRONMENT "${FX_ISA_HELD_ENV}")
# One model end to end held at AVX2: fp32 within 1e-4 of the imported
# model, bf16 asked for and float32 kernels made, with its warning.
add_test(NAME optimize_models_resnet18_AVX2 COMMAND test_optimize --gtest_filter=OptimizeModels.resnet18)
set_tests_properties(optimize_models_resnet18_AVX2 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 600
                     ENVIRONMENT "${FX_ISA_HELD_ENV}")
# The same kernels on an emulated AVX2-only CPU: qemu-user's AMD EPYC Milan (Zen 3),
# whose cpuid itself says AVX2 and FMA, no AVX-512, no VNNI, to every library in
# the process (oneDNN, ATen, fbgemm, OpenBLAS) and to fxcpp's own checks, where
# the held runs above tell only oneDNN and ATen. ~15x slower than the host: the
# kernels' tests here; scripts/emulated_cpu.py (make check-emulated) runs the
# model tests and their Python fixtures there too.
find_program(FX_QEMU_X86_64 qemu-x86_64)
if(FX_QEMU_X86_64)
  # Less the features QEMU 7.2's TCG does not emulate (it warns of each, for every
  # thread; none is one a kernel chooses by).
  set(FX_EMULATED_AVX2 ${FX_QEMU_X86_64} -cpu "EPYC-Milan,-3dnowprefetch,-amd-ssbd,-amd-stibp,-clzero,-fsrm,\
-fxsr-opt,-ibpb,-ibrs,-invpcid,-misalignsse,-nrip-save,-osvw,-pcid,-perfctr-core,-rdpid,-rdseed,-sha-ni,-topoext,\
-wbnoinvd,-xsavec,-xsaveerptr,-xsaves")
else()
  set(FX_EMULATED_AVX2 sh -c "echo 'qemu-x86_64 is missing: scripts/setup.sh installs qemu-user'; exit 1")
endif()
add_test(NAME emulated_avx2_optimize
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_optimize>
                 --gtest_filter=OnednnCpu.*:OptimizeForInference.*:LowerToOneDnn.*:OptimizeLayout.*:LinearKernel.*)
add_test(NAME emulated_avx2_int8
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_quantization>
                 --gtest_filter=*QConvKernel*:QLinearKernel*:LowerInt8*:OnednnQuantize*)
add_test(NAME emulated_avx2_winograd
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_aot> --gtest_filter=WinogradConv2d.*:ConvAsWinograd.*)
set_tests_properties(emulated_avx2_optimize emulated_avx2_int8 emulated_avx2_winograd PROPERTIES
                     TIMEOUT 900 ENVIRONMENT "OMP_NUM_THREADS=1;FX_EXPECT_ONEDNN_ISA=avx2")
