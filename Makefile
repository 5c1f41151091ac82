# fxcpp: `make demo` and `make test` do all the set-up on a fresh Debian 12 machine (make demo
# only the command line's packages, make test the rest).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all setup setup-demo configure configure-demo build demo test test-long bench bench-optimize goldens install docs
.PHONY: fuzz check-sanitize clean check-emulated

all: build

# scripts/setup.sh's package groups: `make demo` installs only what configuring and
# building the command line need (setup-demo), every other target all of them (setup).
setup:
	@bash scripts/setup.sh all

setup-demo:
	@bash scripts/setup.sh demo

# A build tree first configured with the demo's packages alone (marked by the file
# .configured-demo in it) is configured again once setup has installed the rest, so that
# CMake finds what it went without (pybind11: the Python module; qemu-x86_64).
CONFIGURE = cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
configure: setup
	@if [ ! -f $(BUILD)/build.ninja ] || [ -f $(BUILD)/.configured-demo ]; then \
	  echo "$(CONFIGURE)" && $(CONFIGURE) && rm -f $(BUILD)/.configured-demo; fi

configure-demo: setup-demo
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  echo "$(CONFIGURE)" && $(CONFIGURE) && touch $(BUILD)/.configured-demo; fi

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the command line: only its packages are installed, and no tests or
# benchmarks are built first.
demo: configure-demo
	cmake --build $(BUILD) -j $(JOBS) --target fxcpp_cli
	$(BUILD)/fxcpp demo

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

# The long sweeps (label `long`: the training compiler's rewrites on six models at every batch and size).
test-long: build
	cd $(BUILD) && ctest --output-on-failure -L long

# QUICK=1: the short versions (bench_table.py --quick; one configuration per model).
# The last table, fxcpp vs ONNX Runtime, is optional (scripts/setup_ort.sh installs
# the npm package onnxruntime-node into $(BUILD)/ort; without it the bench skips it).
bench: build
	cmake --build $(BUILD) -j $(JOBS) --target fx_bench
	/usr/bin/python3 scripts/bench_table.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)
	/usr/bin/python3 scripts/bench_optimize.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)
	/usr/bin/python3 scripts/bench_cold_start.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--runs 3)
	/usr/bin/python3 scripts/bench_pipeline.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)
	/usr/bin/python3 scripts/bench_quantize.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # int8: fxcpp vs Python's quantize_fx
	/usr/bin/python3 scripts/bench_python.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # import fxcpp: Python's options, the C++ CLI, passes
	/usr/bin/python3 scripts/bench_training.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # training steps: aot_module vs eager, functorch
	/usr/bin/python3 scripts/bench_training_memory.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench)  # resident memory of a training step: aot_module vs eager
	/usr/bin/python3 scripts/bench_qat.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # quantization-aware training: prepare_qat vs prepare_qat_fx, QAT int8
	/usr/bin/python3 scripts/bench_distributed_training.py --build $(BUILD) $(if $(QUICK),--quick)  # distributed training: data parallel (DDP's buckets), pipeline GPipe / 1F1B
	/usr/bin/python3 scripts/bench_ort.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # optional: skipped, with the reason, without ONNX Runtime
	/usr/bin/python3 scripts/bench_decoder.py --build $(BUILD) $(if $(QUICK),,--save-dir docs/bench) $(if $(QUICK),--quick)  # decoder LLM: fxcpp generate vs llama.cpp (optional peer: skipped, with the reason, without node-llama-cpp)
	/usr/bin/python3 scripts/bench_docs.py --render  # docs/benchmarks.md from the saved runs in docs/bench/

# Only the optimize_for_inference table (issue 9; needs only the command
# line): fxcpp optimised vs TorchScript's optimize_for_inference, written to
# $(BUILD)/bench_optimize.md. QUICK=1: one configuration per model.
bench-optimize: configure
	cmake --build $(BUILD) -j $(JOBS) --target fxcpp_cli
	/usr/bin/python3 scripts/bench_optimize.py --build $(BUILD) $(if $(QUICK),--quick)

# Regenerates the Python torch.fx goldens the differential tests compare with.
goldens: setup
	for g in python/goldens/*_goldens.py; do /usr/bin/python3 $$g || exit 1; done

# The README's drawing screenshot, docs/graph.png: resnet18's graph page
# (fxcpp draw) in headless Chromium, checked by python/draw_browser_test.py.
docs: configure
	cmake --build $(BUILD) --target fxcpp_cli
	[ -f $(BUILD)/models/resnet18.pt ] || /usr/bin/python3 python/export_models.py --out $(BUILD)/models resnet18
	/usr/bin/python3 python/draw_browser_test.py --fxcpp $(BUILD)/fxcpp --model $(BUILD)/models/resnet18.pt \
	  --input $(BUILD)/models/resnet18.input.pt --out $(BUILD)/draw --screenshot docs/graph.png

# libFuzzer targets of fuzz/ (clang, ASan + UBSan) in build-fuzz, each run
# FUZZ_SECONDS; findings in build-fuzz/fuzz/findings/<target>/.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: setup
	CXX=clang++ cmake -S . -B $(FUZZ_BUILD) $(CMAKE_FLAGS) -DFXCPP_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets fuzz_seeds
	bash scripts/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The CPU-dependent tests (and their fixtures) on an emulated CPU, qemu-x86_64 -cpu
# $(EMULATED_CPU) (default AMD EPYC Milan: AVX2, no AVX-512): ~15x slower than the
# host, so not part of `make test`, which runs the kernels' own tests there.
EMULATED_CPU ?= EPYC-Milan
check-emulated: build
	/usr/bin/python3 scripts/emulated_cpu.py --build $(BUILD) --cpu $(EMULATED_CPU) $(if $(R),-R '$(R)')

# The whole suite under ASan + UBSan (build-asan), then the tests that start
# threads under TSan (build-tsan). Suppressions: scripts/*.supp (why: there).
# allocator_may_return_null: a huge allocation throws std::bad_alloc, which
# fxcpp turns into an fx::Error; handle_segv=0: a segfault still fails its
# test (by the signal), and cli.crash_guard can check that fxcpp's crash guard
# reports its child's SIGSEGV. Allocation stacks use ASan's default fast
# unwinder: fast_unwind_on_malloc=0 made every test process spend ~5 s CPU
# unwinding libtorch's start-up allocations (~25 s wall per ctest entry, 510
# entries); only the entries that need it for an LSan suppression get it
# (cmake/sanitize.cmake).
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
TSAN_TESTS = Concurrency.*:FunctionCall.ConcurrentFirstCallsResolveSafely:TraceGraph.ConcurrentTracesOnSeveralThreads
check-sanitize: setup
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_FLAGS) "-DFXCPP_SANITIZE=address;undefined"
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:handle_segv=0 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_FLAGS) -DFXCPP_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_exec test_trace
	for t in test_exec test_trace; do \
	  OMP_NUM_THREADS=1 TSAN_OPTIONS=suppressions=$(CURDIR)/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1 \
	    $(TSAN_BUILD)/$$t --gtest_filter='$(TSAN_TESTS)' || exit 1; \
	done

clean:
	rm -rf $(BUILD)
