#!/usr/bin/env bash
# Installs the Debian packages fxcpp needs, by group:
#   scripts/setup.sh demo   what configuring the build and building the command line (make demo) need
#   scripts/setup.sh [all]  the demo's and the rest: tests, benchmarks, Python, fuzzing, docs (make test, make bench ...)
# Idempotent: installs only what is missing, runs apt-get update at most once.
set -euo pipefail

group="${1:-all}"

# Configuring needs all of these (CMakeLists.txt's REQUIRED find_package, find_path, find_library
# and pkg_check_modules), and building fxcpp_cli needs their headers: the command line links every layer.
demo_packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev            # libtorch 1.13 (find_package(Torch))
  libopenblas0-pthread    # libtorch's recommended BLAS; without it Debian's reference BLAS makes ATen's
                          # BLAS paths (im2col convolutions, linear) 6-20x slower
  libdnnl-dev             # oneDNN 2.6 C++ API (the libdnnl.so.2 libtorch loads): fx::optimize_for_inference's kernels
  libsleef-dev            # sleef.h, which ATen's AVX2 / AVX-512 at::vec headers include: fxcpp's kernels built per CPU capability (fx_cpu_kernel)
  libgloo-dev             # gloo's headers: c10d's ProcessGroupGloo.hpp (fxcpp_distributed: pipeline / data parallel)
  libgtest-dev            # find_package(GTest REQUIRED) and libbenchmark-dev's find_package(benchmark REQUIRED):
  libbenchmark-dev        # a top-level configure builds the tests and benchmarks (FXCPP_BUILD_TESTS / _BENCHMARKS ON)
  nlohmann-json3-dev      # the JSON graph document of fx::save / fx::load
  libdeflate-dev          # libdeflate_crc32: the CRC-32 check of every record fxcpp reads from a zip archive
  libcli11-dev            # the fxcpp command line
  libgraphviz-dev         # Graphviz's libgvc: graph layout for fx::FxGraphDrawer (SVG, HTML)
  libboost-graph-dev      # Boost.Graph's boykov_kolmogorov_max_flow: fx::min_cut_rematerialization_partition
  libsentencepiece-dev    # SentencePiece: the tokenizer.model of LLaMA-family checkpoints (fxcpp generate --prompt TEXT)
)

# Only the tests, benchmarks and the other make targets need these: CMake builds without them
# what does not need them (the Python module is skipped, qemu's tests say what is missing).
rest_packages=(
  libgmock-dev googletest
  python3-torch python3-torchvision   # Python torch.fx: model exports for the tests, the baseline
  python3-tabulate        # torch.fx print_tabular, for python/goldens/api_fidelity_goldens.py
  python3-sklearn         # sklearn.datasets.load_digits: the int8 quantization accuracy test (python/digits_fixture.py)
  clang libclang-rt-14-dev  # libFuzzer and the sanitizers (make fuzz, make check-sanitize)
  chromium                # headless browser test of the interactive graph page, make docs screenshot
  python3-networkx        # functorch's min-cut partitioner in Python 1.13: the training-graph goldens
  pybind11-dev            # the `import fxcpp` extension module (python/)
  python3-pytest          # its tests, run by ctest
  qemu-user               # qemu-x86_64 -cpu EPYC-Milan: the tests of CPU-dependent kernels on an emulated AVX2-only
                          # CPU, whatever CPU runs them (tests/optimize/isa.cmake, scripts/emulated_cpu.py)
  sentencepiece           # spm_train / spm_encode / spm_decode: the decoder tests' tokenizer.model and its reference
                          # ids and text (tests/decoders/make_llama_fixture.py, check_generate_cli.py)
)

case "$group" in
  demo) packages=("${demo_packages[@]}") ;;
  all) packages=("${demo_packages[@]}" "${rest_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [demo|all] (default all)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup ($group): installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
