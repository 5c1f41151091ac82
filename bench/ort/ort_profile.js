// ONNX Runtime's per-node times for scripts/compare_layers_ort.py: one model in
// one InferenceSession set up as ort_bench.js sets it up (CPU execution
// provider, sequential, --threads intra-op threads, graph optimisation 'all'),
// with ONNX Runtime's profiler on; --runs + 1 forwards (the reader drops each
// node's first, warm-up time), then the profile is written and its path
// printed on stdout, one line.
//
//   node bench/ort/ort_profile.js --ort DIR/node_modules/onnxruntime-node --model M.onnx
//        --input IN.bin --info M.json --prefix PATH_PREFIX [--threads N] [--runs R]
'use strict';
const {parseArgs, readFloats} = require('./common');
const fs = require('fs');
const path = require('path');

async function main() {
  const args = parseArgs(process.argv.slice(2), {threads: '1', runs: '20'}, ['ort', 'model', 'input', 'info', 'prefix']);
  const ort = require(args.ort);
  const info = JSON.parse(fs.readFileSync(args.info, 'utf8'));
  const threads = parseInt(args.threads, 10), runs = parseInt(args.runs, 10);
  if (!(threads >= 1) || !(runs >= 1)) throw new Error('--threads and --runs take positive integers');
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all', enableProfiling: true,
    profileFilePrefix: args.prefix});
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', readFloats(args.input, info.input_shape), info.input_shape)};
  for (let i = 0; i <= runs; ++i) await session.run(feeds);
  session.endProfiling();
  await session.release();
  // The profiler names its file PREFIX_DATE_TIME.json.
  const dir = path.dirname(args.prefix), base = path.basename(args.prefix) + '_';
  const files = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'))
      .map((f) => path.join(dir, f)).sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (!files.length) throw new Error(`no profile ${args.prefix}_*.json written`);
  process.stdout.write(files[0] + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_profile.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
