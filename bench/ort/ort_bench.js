// ONNX Runtime's side of scripts/bench_ort.py: one model in one InferenceSession
// (CPU execution provider, sequential execution, --threads intra-op threads, one
// inter-op thread, graph optimisation level 'all'), checked against the eager
// PyTorch output, then timing forwards on request, so that the driver can
// interleave it with fxcpp's engines (`fxcpp bench-worker`), each process
// waiting on its pipe while the other runs.
//
//   node bench/ort/ort_bench.js --ort DIR/node_modules/onnxruntime-node --model M.onnx
//        --input IN.bin --output OUT.bin --info M.json [--threads N]
//
// IN.bin / OUT.bin: float32 little-endian, shapes in M.json (python/export_onnx.py).
// Protocol, one JSON object per line on stdout:
//   ready  {"ready": true, "ort": VERSION, "threads": N, "load_ms": L, "first_ms": F, "max_rel_diff": D}
//          (D: max |ORT - eager| / max |eager|)
//   stdin "run ort K" -> {"engine": "ort", "ms": [t1, ..., tK]}; "quit" or end of input: exit 0.
// Errors: one line {"error": "..."} (a bad request: the worker goes on; a failed load: exit 1).
'use strict';
const {parseArgs, readFloats} = require('./common');
const fs = require('fs');
const readline = require('readline');

function relDiff(out, ref) {
  let diff = 0, scale = 0;
  for (let i = 0; i < ref.length; ++i) {
    diff = Math.max(diff, Math.abs(out[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

async function main() {
  const args = parseArgs(process.argv.slice(2), {threads: '1'}, ['ort', 'model', 'input', 'output', 'info']);
  const ort = require(args.ort);
  const info = JSON.parse(fs.readFileSync(args.info, 'utf8'));
  const threads = parseInt(args.threads, 10);
  if (!(threads >= 1)) throw new Error(`--threads ${args.threads}: expected a positive integer`);
  let t0 = nowMs();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all'});
  const loadMs = nowMs() - t0;
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', readFloats(args.input, info.input_shape),
                                                         info.input_shape)};
  const ref = readFloats(args.output, info.output_shape);
  t0 = nowMs();
  const result = await session.run(feeds);
  const firstMs = nowMs() - t0;
  const out = result[session.outputNames[0]];
  if (out.data.length !== ref.length)
    throw new Error(`output has ${out.data.length} values, the eager output ${ref.length}`);
  reply({ready: true, ort: ort.env.versions.common, threads, load_ms: loadMs, first_ms: firstMs,
         max_rel_diff: relDiff(out.data, ref)});

  const rl = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of rl) {
    const words = line.trim().split(/\s+/);
    if (words[0] === '') continue;
    if (words[0] === 'quit') break;
    const count = parseInt(words[2], 10);
    if (words.length !== 3 || words[0] !== 'run' || words[1] !== 'ort' || !(count >= 1 && count <= 100000)) {
      reply({error: `bad request '${line}' (expected 'run ort K' or 'quit')`});
      continue;
    }
    const ms = [];
    for (let i = 0; i < count; ++i) {
      const s = nowMs();
      await session.run(feeds);
      ms.push(nowMs() - s);
    }
    reply({engine: 'ort', ms});
  }
  rl.close();
  await session.release();
}

main().catch((e) => {
  reply({error: String(e && e.message ? e.message : e)});
  process.exit(1);
});
