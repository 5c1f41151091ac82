#!/usr/bin/env bash
# Installs ONNX Runtime for the optional fxcpp-vs-ONNX-Runtime bench
# (scripts/bench_ort.py): the npm package onnxruntime-node, which ships
# libonnxruntime.so and its Node.js binding, into DIR/node_modules
# (default build/ort). Its install script is skipped (--ignore-scripts): it
# only fetches a CUDA provider. Needs node and npm (Debian's nodejs, npm;
# installed when missing). Idempotent: does nothing when the version is there.
# Exit 0 when ONNX Runtime is ready, 1 (with one line saying why) when it
# cannot be had, e.g. the npm registry is unreachable: the bench then skips it.
#
#   bash scripts/setup_ort.sh [DIR]
set -uo pipefail

dir="${1:-build/ort}"
version="1.30"
pkg="$dir/node_modules/onnxruntime-node/package.json"

if [ -f "$pkg" ] && grep -q "\"version\": \"$version\." "$pkg"; then
  exit 0
fi

# shellcheck source=scripts/ensure_node.sh
source "$(dirname "$0")/ensure_node.sh"
ensure_node setup_ort || exit 1
npm_project "$dir"
echo "setup_ort: npm install --ignore-scripts onnxruntime-node@$version into $dir" >&2
if ! (cd "$dir" && timeout 600 npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "onnxruntime-node@$version") >&2; then
  echo "setup_ort: npm install onnxruntime-node@$version failed (is the npm registry reachable?)" >&2
  exit 1
fi
if ! [ -f "$pkg" ]; then
  echo "setup_ort: $pkg missing after npm install" >&2
  exit 1
fi
