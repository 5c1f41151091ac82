// llama.cpp's side of scripts/bench_decoder.py and of ctest decoders.gguf_llama_cpp: a GGUF file
// (scripts/gguf_writer.py) through node-llama-cpp's low-level API (scripts/setup_llama_cpp.sh installs it), on the
// CPU: getLlama({gpu: false}) with its prebuilt binary (never built, nothing downloaded), the model loaded with
// gpuLayers 0 (memory-mapped, llama.cpp's default), a context of --context positions (at least the prompt and -n)
// with N threads for both the prompt and the decode, one sequence.
//
//   node llama_bench.js --pkg DIR/node_modules/node-llama-cpp --model M.gguf --prompt-ids 1,2,3 [--n 64]
//                       [--threads 1] [--warmup 1] [--mode generate|teacher] [--context N]
//
// --mode generate (default): --warmup W forwards of one token first (they page the memory-mapped weights in, as
// fxcpp's weights are in memory before its first forward; then the cache is cleared), then the prompt in one
// evaluation and greedy decoding (temperature 0, no repetition penalty, an end-of-generation token does not stop
// it) of --n tokens. Prompt time: from the start of the evaluation to the first new token (the prompt's forward
// and its sampling); decode time: from then to the last token, n - 1 forwards, as fxcpp generate counts them.
// Prints one JSON line: {prompt_tokens, prompt_tokens_per_s, decode_tokens, decode_tokens_per_s,
// time_to_first_token_ms, generated: [ids], peak_rss_mb (this process's, node's own included), threads, ...}.
//
// --mode teacher: teacher forcing over --prompt-ids: one evaluation of the whole sequence (controlledEvaluate),
// the greedy next token at every position. Prints {top1: [ids], ...}, top1[i] the token llama.cpp would choose
// after ids[0..i].
'use strict';
const path = require('path');
const {parseArgs} = require('../ort/common.js');

function ids(text) {
  return text.split(',').filter((s) => s.length).map((s) => {
    const v = Number(s);
    if (!Number.isInteger(v) || v < 0) throw new Error(`--prompt-ids: '${s}' is not a token id`);
    return v;
  });
}

async function main() {
  const a = parseArgs(process.argv.slice(2), {n: '64', threads: '1', warmup: '1', mode: 'generate', context: '0'},
                      ['pkg', 'model', 'prompt-ids']);
  const prompt = ids(a['prompt-ids']);
  const n = Number(a.n), threads = Number(a.threads), warmup = Number(a.warmup);
  if (a.mode !== 'generate' && a.mode !== 'teacher') throw new Error(`--mode ${a.mode}: generate or teacher`);
  const {getLlama, LlamaLogLevel} = await import(path.resolve(a.pkg, 'dist', 'index.js'));
  const llama = await getLlama({gpu: false, build: 'never', usePrebuiltBinaries: true, skipDownload: true,
                                progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: threads});
  const tLoad = performance.now();
  const model = await llama.loadModel({modelPath: path.resolve(a.model), gpuLayers: 0});
  const loadMs = performance.now() - tLoad;
  const needed = prompt.length + (a.mode === 'generate' ? n : 0);
  const contextSize = Math.max(Number(a.context), needed);
  const context = await model.createContext({contextSize, batchSize: Math.max(prompt.length, 1), threads,
                                             sequences: 1});
  const sequence = context.getSequence();
  const out = {engine: 'llama.cpp', node_llama_cpp: require(path.resolve(a.pkg, 'package.json')).version,
               model: path.basename(a.model), threads, context_size: context.contextSize,
               batch_size: context.batchSize, flash_attention: context.flashAttention,
               kv_cache_type: context.kvCacheKeyType, load_ms: loadMs};

  if (a.mode === 'teacher') {
    const res = await sequence.controlledEvaluate(prompt.map((t) => [t, {generateNext: {token: true,
                                                                                         options: {temperature: 0}}}]));
    out.top1 = res.map((r) => (r && r.next && r.next.token != null ? r.next.token : -1));
  } else {
    for (let i = 0; i < warmup; ++i) {
      await sequence.evaluateWithoutGeneratingNewTokens([prompt[0]]);
      await sequence.clearHistory();
    }
    const generated = [];
    let tFirst = 0;
    const t0 = performance.now();
    for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
      if (generated.length === 0) tFirst = performance.now();
      generated.push(token);
      if (generated.length >= n) break;
    }
    const tEnd = performance.now();
    const prefillS = (tFirst - t0) / 1e3, decodeS = (tEnd - tFirst) / 1e3;
    Object.assign(out, {prompt_tokens: prompt.length, prompt_tokens_per_s: prompt.length / prefillS,
                        decode_tokens: generated.length - 1,
                        decode_tokens_per_s: generated.length > 1 ? (generated.length - 1) / decodeS : 0,
                        time_to_first_token_ms: prefillS * 1e3, warmup, generated});
  }
  // VmHWM: this process image's own peak. getrusage's maxRSS is not: Linux carries it across exec, so a child
  // of a big parent (the bench, holding its bandwidth probe) starts at the parent's size.
  const hwm = /VmHWM:\s+(\d+)\s+kB/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'));
  out.peak_rss_mb = hwm ? Number(hwm[1]) / 1024 : process.resourceUsage().maxRSS / 1024;
  process.stdout.write(JSON.stringify(out) + '\n');
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`llama_bench.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
