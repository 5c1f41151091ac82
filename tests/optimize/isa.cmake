# The optimiser's oneDNN paths held at AVX2 (ONEDNN_MAX_CPU_ISA, and ATen's
# kernels at AVX2 too), as on an AVX2-only CPU (AMD EPYC Zen 3): no bf16 or
# Winograd kernels there, and the tests key their expectations by what
# oneDNN reports (onednn_cpu_test.cpp), so a machine with AVX-512 also runs
# the branches an AVX2 machine takes. The int8 kernels' AVX2 runs are in
# tests/quantization/quantization.cmake. emulated_avx2_optimize runs the same
# suites on an emulated AVX2-only CPU (cmake/emulated_cpu.cmake).
# (FX_EXPECT_ONEDNN_ISA: OnednnCpu checks that oneDNN saw the CPU it was meant to.)
set(FX_ISA_HELD_ENV "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;ATEN_CPU_CAPABILITY=avx2"
                    "FX_EXPECT_ONEDNN_ISA=avx2")
set(FX_ISA_OPTIMIZE_SUITES OnednnCpu.*:OptimizeForInference.*:LowerToOneDnn.*:OptimizeLayout.*:LinearKernel.*:BlockActivations.*:SiluKernel.*:PanelGemm.*:GemmWinograd.*:OneThread.*)
add_test(NAME optimize_isa_AVX2 COMMAND test_optimize --gtest_filter=${FX_ISA_OPTIMIZE_SUITES})
add_test(NAME passes_minimizer_isa_AVX2 COMMAND test_passes --gtest_filter=MinimizerBase.*)
set_tests_properties(optimize_isa_AVX2 passes_minimizer_isa_AVX2 PROPERTIES TIMEOUT 600 ENVIRONMENT "${FX_ISA_HELD_ENV}")
# One model end to end held at AVX2: fp32 within 1e-4 of the imported
# model, bf16 asked for and float32 kernels made, with its warning.
add_test(NAME optimize_models_resnet18_AVX2 COMMAND test_optimize --gtest_filter=OptimizeModels.resnet18)
set_tests_properties(optimize_models_resnet18_AVX2 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 600
                     ENVIRONMENT "${FX_ISA_HELD_ENV}")
add_test(NAME emulated_avx2_optimize
         COMMAND ${FX_EMULATED_AVX2} $<TARGET_FILE:test_optimize> --gtest_filter=${FX_ISA_OPTIMIZE_SUITES})
set_tests_properties(emulated_avx2_optimize PROPERTIES TIMEOUT 900 ENVIRONMENT "${FX_EMULATED_AVX2_ENV}")
