# FX_EMULATED_AVX2: the command prefix that runs a program on an emulated
# AVX2-only CPU, qemu-user's AMD EPYC Milan (Zen 3), whose cpuid itself says
# AVX2 and FMA, no AVX-512, no VNNI, to every library in the process (oneDNN,
# ATen, fbgemm, OpenBLAS) and to fxcpp's own checks, where the runs held at
# AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 ...) tell only oneDNN and ATen. ~15x slower
# than the host: the kernels' suites run so beside their held runs
# (emulated_avx2_* in tests/*/); scripts/emulated_cpu.py (make check-emulated)
# runs the model tests and their Python fixtures there too.
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
# (FX_EXPECT_ONEDNN_ISA: OnednnCpu checks that oneDNN saw the CPU it was meant to.)
set(FX_EMULATED_AVX2_ENV "OMP_NUM_THREADS=1;FX_EXPECT_ONEDNN_ISA=avx2")
