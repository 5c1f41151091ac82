// The command lines of ort_bench.js and ort_profile.js: `--name value` pairs.
'use strict';

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

module.exports = {parseArgs};
