#!/usr/bin/python3
"""ctest decoders.gguf_llama_cpp: scripts/gguf_writer.py's GGUF files of the LLaMA fixture folder in llama.cpp
(node-llama-cpp, bench/llama_cpp/llama_bench.js), against `fxcpp generate` on the same folder.

Usage: check_gguf_llama_cpp.py FXCPP FIXTURE_DIR LLAMA_CPP_DIR
Exits 77 (ctest's SKIP_RETURN_CODE), saying so, when LLAMA_CPP_DIR has no node-llama-cpp
(bash scripts/setup_llama_cpp.sh LLAMA_CPP_DIR installs it) or there is no node.
Checks: the F32 GGUF's 24 greedy tokens in llama.cpp equal fxcpp generate's (and the fixture's reference), for
the fixture (untied, F32) and for a tied BF16 checkpoint in two shards; the file sizes the GGUF layout gives;
Q8_0's teacher-forced top-1 tokens agree with F32's at 90% of the positions or more; Q4_0 loads and generates
ids inside the vocabulary. Prints "N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import check, finish  # noqa: E402
import gguf_writer  # noqa: E402

fxcpp, fixture, llama_dir = sys.argv[1], sys.argv[2], sys.argv[3]
pkg = os.path.join(llama_dir, "node_modules", "node-llama-cpp")
if not os.path.isfile(os.path.join(pkg, "package.json")):
    print("SKIPPED: llama.cpp is not installed in %s (bash scripts/setup_llama_cpp.sh %s installs node-llama-cpp; "
          "an optional peer)" % (llama_dir, llama_dir))
    sys.exit(77)
if not shutil.which("node"):
    print("SKIPPED: no node (Debian's nodejs) to run llama.cpp's binding")
    sys.exit(77)
BENCH = os.path.join(ROOT, "bench", "llama_cpp", "llama_bench.js")


def llama(gguf, ids, *args):
    r = subprocess.run(["node", BENCH, "--pkg", pkg, "--model", gguf, "--prompt-ids", ",".join(map(str, ids))] +
                       list(args), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("llama_bench.js on %s: exit %d: %s" % (gguf, r.returncode, r.stderr.strip()[-500:]))
    return json.loads(r.stdout)


def fx_generate(folder, ids, n):
    r = subprocess.run([fxcpp, "generate", folder, "--prompt-ids", ",".join(map(str, ids)), "-n", str(n),
                        "--temperature", "0", "--json"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("fxcpp generate %s: exit %d: %s" % (folder, r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)["generated"]


def expected_size(folder, qtype):
    """The GGUF's tensor data bytes (each tensor padded to 32) from config.json."""
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    h, i, v, n = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * h // c["num_attention_heads"]
    mats = [(v, h)] + [(h, h), (kv, h), (kv, h), (h, h), (i, h), (i, h), (h, i)] * n
    mats += [] if c["tie_word_embeddings"] else [(v, h)]
    vecs = [h] * (2 * n + 1)
    pad = lambda b: b + (-b % 32)  # noqa: E731
    return sum(pad(gguf_writer.nbytes(m, qtype)) for m in mats) + sum(pad(4 * x) for x in vecs)


import torch  # noqa: E402

prompt, _, reference = torch.load(os.path.join(fixture, "expected.pt"))
prompt, reference = prompt[0].tolist(), reference.tolist()
N = 24
tmp = tempfile.mkdtemp(prefix="gguf_llama_cpp_")
try:
    tied = os.path.join(tmp, "tied_bf16")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "decoders", "make_llama_fixture.py"), tied,
                    "--tied", "--dtype", "BF16", "--shards", "2"], check=True)
    for name, folder in (("fixture F32", fixture), ("tied BF16 2 shards", tied)):
        fx_tokens = fx_generate(folder, prompt, N)
        if folder == fixture:
            check(fx_tokens == reference[:N], "fxcpp generate vs the reference: %s vs %s" % (fx_tokens, reference))
        ggufs = {}
        for t in ("F32", "Q8_0", "Q4_0"):
            ggufs[t] = gguf_writer.write_gguf(folder, os.path.join(tmp, "%s-%s.gguf" % (os.path.basename(folder), t)), t)
            with open(ggufs[t], "rb") as f:
                head = f.read(8)
            data = expected_size(folder, gguf_writer.TYPES[t])
            size = os.path.getsize(ggufs[t])
            check(head[:4] == b"GGUF" and head[4:8] == b"\3\0\0\0" and data < size < data + 64 * 1024,
                  "%s %s: %d bytes for %d of tensor data" % (name, t, size, data))
        out = llama(ggufs["F32"], prompt, "--n", str(N))
        check(out["generated"] == fx_tokens, "%s: llama.cpp F32 greedy %s vs fxcpp generate %s" % (
            name, out["generated"], fx_tokens))
        sequence = prompt + fx_tokens
        f32 = llama(ggufs["F32"], sequence, "--mode", "teacher")["top1"]
        check(f32[len(prompt) - 1:-1] == fx_tokens, "%s: F32 teacher-forced top-1 %s vs %s" % (name, f32, fx_tokens))
        q8 = llama(ggufs["Q8_0"], sequence, "--mode", "teacher")["top1"]
        agree = sum(a == b for a, b in zip(q8, f32)) / len(f32)
        check(agree >= 0.9, "%s: Q8_0 top-1 agrees with F32's at %.0f%% of the positions" % (name, 100 * agree))
        q4 = llama(ggufs["Q4_0"], prompt, "--n", str(N))
        check(len(q4["generated"]) == N and all(0 <= t < 97 for t in q4["generated"]),
              "%s: Q4_0 generated %s" % (name, q4["generated"]))
        print("%s: llama.cpp F32 = fxcpp generate (%d tokens); Q8_0 top-1 agreement %.0f%%; Q4_0 top-1 agreement "
              "%.0f%%" % (name, N, 100 * agree, 100 * sum(a == b for a, b in zip(
                  llama(ggufs["Q4_0"], sequence, "--mode", "teacher")["top1"], f32)) / len(f32)))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
