#!/usr/bin/env bash
# Installs llama.cpp for the optional fxcpp-vs-llama.cpp decoder bench
# (scripts/bench_decoder.py) and ctest decoders.gguf_llama_cpp: the npm package
# node-llama-cpp 3.21.1 (llama.cpp's Node.js binding) with its prebuilt CPU
# binaries, the package @node-llama-cpp/linux-x64 (libllama, libggml and a
# libggml-cpu per x86 level, picked at run time), into DIR/node_modules
# (default build/llama_cpp). Its install script is skipped (--ignore-scripts)
# and its optional packages (CUDA, Vulkan, other platforms' binaries, ~600 MB)
# are left out; then the prebuilt binary must load (getLlama with build 'never',
# no download). Needs node and npm (Debian's nodejs, npm; installed when
# missing). Idempotent: does nothing when the version is there and loads.
# Exit 0 when llama.cpp is ready, 1 (with one line saying why) when it cannot
# be had, e.g. the npm registry is unreachable: the bench then skips it.
#
#   bash scripts/setup_llama_cpp.sh [DIR]
set -uo pipefail

dir="${1:-build/llama_cpp}"
version="3.21.1"
pkg="$dir/node_modules/node-llama-cpp/package.json"
bin="$dir/node_modules/@node-llama-cpp/linux-x64/package.json"

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup_llama_cpp: only Linux x86-64's prebuilt binary is set up, this is $(uname -s) $(uname -m)" >&2
  exit 1
fi

loads() {  # the prebuilt binary loads, without building or downloading anything
  local probe="$dir/.probe.mjs"
  cat > "$probe" <<EOF
import {getLlama} from '$(cd "$dir" && pwd)/node_modules/node-llama-cpp/dist/index.js';
const llama = await getLlama({gpu: false, build: 'never', usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: 'error'});
if (llama.buildType !== 'prebuilt') throw new Error('not the prebuilt binary: ' + llama.buildType);
await llama.dispose();
EOF
  timeout 120 node "$probe" >/dev/null 2>"$dir/.probe.err"
}

installed() {
  [ -f "$pkg" ] && grep -q "\"version\": \"$version\"" "$pkg" && [ -f "$bin" ] && grep -q "\"version\": \"$version\"" "$bin"
}

if installed && loads; then
  exit 0
fi

# shellcheck source=scripts/ensure_node.sh
source "$(dirname "$0")/ensure_node.sh"
ensure_node setup_llama_cpp || exit 1
npm_project "$dir"
echo "setup_llama_cpp: npm install --ignore-scripts node-llama-cpp@$version into $dir" >&2
if ! (cd "$dir" && timeout 600 npm install -E --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error \
        "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version") >&2; then
  echo "setup_llama_cpp: npm install node-llama-cpp@$version failed (is the npm registry reachable?)" >&2
  exit 1
fi
if ! installed; then
  echo "setup_llama_cpp: node-llama-cpp@$version or @node-llama-cpp/linux-x64@$version missing after npm install" >&2
  exit 1
fi
if ! loads; then
  echo "setup_llama_cpp: node-llama-cpp's prebuilt llama.cpp binary does not load: $(grep -m1 -i error "$dir/.probe.err" | cut -c1-200)" >&2
  exit 1
fi
