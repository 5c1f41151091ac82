// What ort_bench.js and ort_profile.js share: their command lines (`--name value`
// pairs) and the float32 files python/export_onnx.py writes.
'use strict';
const fs = require('fs');

/// `--name value` pairs of argv over `defaults`; throws on a bad pair or a missing `required` name.
function parseArgs(argv, defaults, required) {
  const out = Object.assign({}, defaults);
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument '${argv[i]}'`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of required)
    if (!out[k]) throw new Error(`--${k} is required`);
  return out;
}

/// The float32 little-endian file `path` holding a tensor of `shape`; throws when its size differs.
function readFloats(path, shape) {
  const buf = fs.readFileSync(path);
  const n = shape.reduce((a, b) => a * b, 1);
  if (buf.length !== 4 * n) throw new Error(`${path}: ${buf.length} bytes, expected ${4 * n} for [${shape}]`);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = buf.readFloatLE(4 * i);
  return data;
}

module.exports = {parseArgs, readFloats};
