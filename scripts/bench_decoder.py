#!/usr/bin/python3
"""`make bench`, issue 67: decoding a LLaMA-family model, fxcpp generate against llama.cpp on the same weights.

    bench_decoder.py [--build build] [--save-dir DIR] [--quick] [--threads 1 2] [--rounds 3] [--prompt 128] [--n 64]
                     [--fxcpp NAME=ARGS ...] [--no-llama-cpp] [--render]

The model: scripts/make_decoder_bench_model.py's checkpoint folder, TinyLlama-1.1B's shapes with 8 of its 22
layers (hidden 2048, intermediate 5632, 32 heads / 4 KV heads, vocab 32000), random seeded weights, F32
safetensors (BUILD/decoder_bench/tinyllama8). llama.cpp reads the same weights as GGUF files
(scripts/gguf_writer.py: F32, and Q8_0 / Q4_0 quantized as ggml's reference quantizers do, every 2-D weight).

The engines, each run its own process, interleaved round by round (the engine that goes first rotating), at
1 and 2 threads (1-thread runs pinned to one CPU, as bench_ort.py does: a VM's vCPUs can differ in speed):
  fxcpp:      `fxcpp generate FOLDER --prompt-ids ... -n N --temperature 0 --threads T --max-seq P+N --json`
              plus each argument set of the list (--fxcpp NAME=ARGS, repeatable; by default what
              `fxcpp generate --help` offers: today no flag, eager libtorch on the C++ model; --engine
              eager|fxcpp and --quantize int8|int4 once they exist)
  llama.cpp:  bench/llama_cpp/llama_bench.js (node-llama-cpp 3.21.1's prebuilt CPU binary, installed into
              BUILD/llama_cpp by scripts/setup_llama_cpp.sh; skipped, with the reason, when it cannot be had),
              F32, Q8_0 and Q4_0, one warm-up token forward first (pages the memory-mapped weights in)
with a prompt of P token ids (fixed, seeded) and N greedy new tokens. Tokens/s of the prompt (P / the prompt's
forward) and of the decode ((N - 1) / the time after the first new token), medians of the rounds; peak resident
memory of the process as it reports it (VmHWM of its /proc/self/status; node's own ~50 MB included for llama.cpp):
wait4's ru_maxrss, used only where a child reports none, carries the parent's size across exec (this script holds
its 1 GiB bandwidth probe and torch).

The bandwidth limit: read bandwidth measured in the same run, STREAM-style: torch.sum over a 1 GiB float32
tensor (best of 5, at 1 and 2 threads, in this process, before the runs and after them: the better of the two,
as other work on a shared machine lowers it); a decoded token reads every weight but the embedding
(one row) once, so the decode cannot beat bandwidth / (bytes of those weights): the table gives that limit and
the measured decode's share of it (KV cache and activations, a few MB, left out). Bytes per weight: F32 4, Q8_0
34/32, Q4_0 18/32; fxcpp's --quantize int8 1 + 4/K (a float scale per output channel), int4 0.5 + 4/32 (a
float scale per 32).

Accuracy, once, at the last thread count: how many of each engine's greedy tokens equal fxcpp eager's before
the first difference; the teacher-forced top-1 over the prompt and fxcpp eager's tokens, llama.cpp's Q8_0 and
Q4_0 against its F32's, fxcpp's int8 and int4 (`fxcpp generate --teacher-forced`) against its float32's.

Prints a markdown table with the CPU, the bandwidth and the load average (a shared machine's numbers are noisy),
writes it to SAVE_DIR/bench_decoder.md and the run to SAVE_DIR/bench_decoder.json (--save-dir, default the
build dir; `make bench` saves into docs/bench/; --render re-prints the markdown). --quick: 1 thread, 1 round,
a prompt of 32 and 16 new tokens.
"""
import argparse
import json
import os
import random
import selectors
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_markdown import (add_save_args, command_line, cpu_name, load_average, log, measured,  # noqa: E402
                            print_saved, run_paths, save_run, utc_now)

GGUF_TYPES = ["F32", "Q8_0", "Q4_0"]
BYTES_PER_WEIGHT = {"F32": 4.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32}


# ---------------------------------------------------------------------------------------------- bandwidth

def read_bandwidth(threads, gib=1, repeats=5):
    """GB/s of torch.sum over a `gib` GiB float32 tensor at `threads` intra-op threads, best of `repeats`."""
    import torch
    torch.set_num_threads(threads)
    x = torch.ones(gib * (1 << 30) // 4, dtype=torch.float32)
    x.sum()  # pages in
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    nbytes = x.numel() * 4
    del x
    return nbytes / best / 1e9


# ---------------------------------------------------------------------------------------------- model

def weights_read_per_token(cfg):
    """Weights a decoded token reads: every linear layer's and lm_head's (the embedding: one row, left out)."""
    h, i, v, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    per_layer = 2 * h * h + 2 * kv * h + 3 * h * i
    return n * per_layer + v * h, h  # (weights, K of the widest-scaled rows: for int8's per-channel scale)


def fxcpp_bytes_per_weight(args, hidden):
    if "--bf16" in args:
        return 2.0, "BF16"
    if "--quantize" in args:
        q = args[args.index("--quantize") + 1]
        return {"int8": 1 + 4 / hidden, "int4": 0.5 + 4 / 32}.get(q, 4.0), q
    return 4.0, "F32"


# ---------------------------------------------------------------------------------------------- runs

def run_measured(cmd, threads, cpu, timeout=900):
    """(stdout, stderr, exit code, the child's peak resident memory in MB: os.wait4's ru_maxrss) of one child
    process, its intra-op threads set by OMP_NUM_THREADS too, pinned to `cpu` unless None."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    pre = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=pre)
    deadline = time.time() + timeout
    out, err = b"", b""
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    sel.register(p.stderr, selectors.EVENT_READ)
    open_ = 2  # stdout and stderr read as they come (a full pipe would stall the child)
    while open_ and time.time() < deadline:
        for key, _ in sel.select(timeout=1.0):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_ -= 1
            elif key.fileobj is p.stdout:
                out += chunk
            else:
                err += chunk
    if open_:
        p.kill()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return out.decode(), err.decode(), p.returncode, ru.ru_maxrss / 1024


class Engine:
    def __init__(self, name, kind, cmd, weights, bytes_per_weight):
        self.name, self.kind, self.cmd, self.weights, self.bpw = name, kind, cmd, weights, bytes_per_weight

    def run(self, prompt, n, threads, cpu):
        cmd = self.cmd(prompt, n, threads)
        out, err, rc, rss = run_measured(cmd, threads, cpu)
        if rc != 0:
            raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:4]), rc, (err.strip().splitlines() or ["?"])[-1]))
        r = json.loads(out.strip().splitlines()[-1])
        return {"prompt_tokens_per_s": r["prompt_tokens_per_s"], "decode_tokens_per_s": r["decode_tokens_per_s"],
                "time_to_first_token_ms": r["time_to_first_token_ms"], "peak_rss_mb": r.get("peak_rss_mb", rss),
                "generated": r["generated"]}


def fxcpp_engines(fxcpp, folder, sets, hidden, common):
    """The Engines of fxcpp generate's argument sets; `common`: arguments of every run (--ignore-eos when
    fxcpp generate has it: an end-of-sequence id must not shorten a run, llama.cpp's does not stop either)."""
    out = []
    for name, args in sets:
        bpw, fmt = fxcpp_bytes_per_weight(args, hidden)

        def cmd(prompt, n, threads, args=args):
            return [fxcpp, "generate", folder, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n),
                    "--temperature", "0", "--threads", str(threads), "--max-seq", str(len(prompt) + n),
                    "--json"] + common + args
        out.append(Engine(name, "fxcpp", cmd, fmt, bpw))
    return out


def llama_engines(pkg, ggufs):
    bench = os.path.join(ROOT, "bench", "llama_cpp", "llama_bench.js")
    out = []
    for t in GGUF_TYPES:
        def cmd(prompt, n, threads, t=t):
            return ["node", bench, "--pkg", pkg, "--model", ggufs[t], "--prompt-ids", ",".join(map(str, prompt)),
                    "--n", str(n), "--threads", str(threads), "--context", str(len(prompt) + n)]
        out.append(Engine("llama.cpp " + t, "llama.cpp", cmd, t, BYTES_PER_WEIGHT[t]))
    return out


def generate_help(fxcpp):
    return subprocess.run([fxcpp, "generate", "--help"], capture_output=True, text=True).stdout


def default_fxcpp_sets(help_text):
    """[(name, args)] from what `fxcpp generate --help` offers."""
    engine, quantize = "--engine" in help_text, "--quantize" in help_text
    sets = [("fxcpp eager", ["--engine", "eager"] if engine else [])]
    if engine:
        sets.append(("fxcpp", ["--engine", "fxcpp"]))
    if quantize:
        base = ["--engine", "fxcpp"] if engine else []
        sets += [("fxcpp int8", base + ["--quantize", "int8"]), ("fxcpp int4", base + ["--quantize", "int4"])]
    if "--bf16" in help_text:
        sets.append(("fxcpp bf16", (["--engine", "fxcpp"] if engine else []) + ["--bf16"]))
    return sets


def parse_fxcpp_set(text):
    name, _, args = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError("--fxcpp NAME=ARGS, e.g. 'fxcpp int8=--engine fxcpp --quantize int8'")
    return name.strip(), shlex.split(args)


def prepare_ggufs(folder, out_dir):
    """{type: path} of the folder's GGUF files, written when missing or older than the weights."""
    import gguf_writer
    src = os.path.join(folder, "model.safetensors")
    paths = {}
    for t in GGUF_TYPES:
        path = os.path.join(out_dir, "%s-%s.gguf" % (os.path.basename(folder), t))
        if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(src):
            t0 = time.time()
            gguf_writer.write_gguf(folder, path, t)
            log("  wrote %s (%.2f GB) in %.0f s" % (path, os.path.getsize(path) / 1e9, time.time() - t0))
        paths[t] = path
    return paths


def same_prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


# ---------------------------------------------------------------------------------------------- markdown

def fmt(v, f="%.1f"):
    return "—" if v is None else f % v


def render(data):
    head = measured(data)
    lines = [head, ""] if head else []
    bw, c = data["bandwidth_gbs"], data["config"]
    lines += [
        "Decoding, %s: a LLaMA %s(hidden %d, intermediate %d, %d layers, %d heads / %d KV heads, vocab %d; "
        "%.0f M weights read per decoded token, %.2f GB in F32), random seeded weights; a prompt of %d token ids, "
        "then %d greedy tokens; median of %d round(s), engines interleaved, each run its own process. Read "
        "bandwidth (%s): %s. The machine is shared with other work: the numbers are noisy." % (
            data["cpu"], "with TinyLlama-1.1B's shapes " if (c["hidden_size"], c["vocab_size"]) == (2048, 32000) else "",
            c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
            c["num_key_value_heads"], c["vocab_size"], data["weights_per_token"] / 1e6,
            data["weights_per_token"] * 4 / 1e9, data["prompt"], data["n"], data["rounds"], data["bandwidth_method"],
            ", ".join("%s thread(s) %.1f GB/s" % (t, v) for t, v in bw.items())), ""]
    if data.get("llama_cpp_skipped"):
        lines += ["llama.cpp: skipped (%s)." % data["llama_cpp_skipped"], ""]
    lines += ["| engine | weights | threads | prompt tok/s | decode tok/s | GB read / token | bandwidth limit tok/s | "
              "%% of limit | first token ms | peak RSS MB | greedy = %s's | top-1 = F32's |" % data.get(
                  "greedy_reference", "fxcpp eager"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    acc = data.get("accuracy", {})
    for r in data["rows"]:
        a = acc.get(r["engine"], {})
        same = "%d / %d" % (a["same_prefix"], data["n"]) if "same_prefix" in a else "—"
        top1 = "%.1f%%" % (100 * a["top1_agreement"]) if "top1_agreement" in a else "—"
        if "error" in r:
            lines.append("| %s | %s | %s | %s |  |  |  |  |  |  | | |" % (r["engine"], r["weights"], r["threads"],
                                                                        r["error"]))
            continue
        lines.append("| %s | %s | %d | %s | %s | %.2f | %s | %s | %s | %s | %s | %s |" % (
            r["engine"], r["weights"], r["threads"], fmt(r["prompt_tokens_per_s"]), fmt(r["decode_tokens_per_s"], "%.2f"),
            r["gb_per_token"], fmt(r["limit_tokens_per_s"], "%.2f"), fmt(r["percent_of_limit"], "%.0f%%"),
            fmt(r["time_to_first_token_ms"], "%.0f"), fmt(r["peak_rss_mb"], "%.0f"), same, top1))
    lines += ["", "GB read / token: the weights a decoded token reads (all but the embedding) at the engine's bytes "
              "per weight; bandwidth limit: the measured read bandwidth at that thread count / those bytes; %% of "
              "limit: the measured decode's share. llama.cpp: node-llama-cpp %s (its prebuilt CPU binary), "
              "memory-mapped weights, KV cache F16; fxcpp: float32 KV cache. greedy = %s's: new tokens "
              "equal before the first difference; top-1 = F32's: the teacher-forced top-1 over the prompt "
              "and those tokens agreeing with the same engine's F32 (llama.cpp's, fxcpp's float32)." % (data.get("node_llama_cpp", "?"),
                                                                      data.get("greedy_reference", "fxcpp eager"))]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=None, help="checkpoint folder (default BUILD/decoder_bench/tinyllama8)")
    ap.add_argument("--threads", type=int, nargs="+", default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--prompt", type=int, default=None)
    ap.add_argument("-n", type=int, default=None)
    ap.add_argument("--fxcpp", type=parse_fxcpp_set, action="append", default=None, metavar="NAME=ARGS",
                    help="an fxcpp generate argument set (repeatable; default: probed from fxcpp generate --help)")
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--cpu", type=int, default=None, help="the CPU 1-thread runs are pinned to (-1: none)")
    ap.add_argument("--quick", action="store_true")
    add_save_args(ap, "bench_decoder")
    a = ap.parse_args()
    json_path, md_path = run_paths(a, "bench_decoder")
    if a.render:
        print_saved(json_path, render)
        return 0
    threads = a.threads or ([1] if a.quick else [1, 2])
    rounds = a.rounds or (1 if a.quick else 3)
    prompt_len = a.prompt or (32 if a.quick else 128)
    n = a.n or (16 if a.quick else 64)
    fxcpp = os.path.join(a.build, "fxcpp")
    if not os.access(fxcpp, os.X_OK):
        sys.exit("%s: not built (cmake --build %s --target fxcpp_cli)" % (fxcpp, a.build))
    start = time.time()
    folder = a.model or os.path.join(a.build, "decoder_bench", "tinyllama8")
    if a.model is None:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make_decoder_bench_model.py"), folder],
                       check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    weights, hidden = weights_read_per_token(cfg)
    one_cpu = None if a.cpu == -1 else (a.cpu if a.cpu is not None else min(os.sched_getaffinity(0)))
    data = {"date": utc_now(), "cpu": cpu_name(), "cpus": os.cpu_count(), "command": command_line(__file__),
            "load_start": load_average(), "model": folder, "config": cfg, "weights_per_token": weights,
            "prompt": prompt_len, "n": n, "rounds": rounds, "threads": threads, "one_thread_cpu": one_cpu,
            "bandwidth_method": "torch.sum over a 1 GiB float32 tensor, best of 5, before and after the runs",
            "bandwidth_gbs": {}, "rows": []}
    data["bandwidth_runs"] = {str(t): [read_bandwidth(t)] for t in threads}  # again at the end: the best of the two
    log("read bandwidth: %s" % ", ".join("%s thread(s) %.1f GB/s" % (t, v[0]) for t, v in data["bandwidth_runs"].items()))

    help_text = generate_help(fxcpp)
    sets = a.fxcpp or default_fxcpp_sets(help_text)
    engines = fxcpp_engines(fxcpp, folder, sets, hidden, ["--ignore-eos"] if "--ignore-eos" in help_text else [])
    data["fxcpp_sets"] = [[name, args] for name, args in sets]
    if not a.no_llama_cpp:
        llama_dir = os.path.join(a.build, "llama_cpp")
        setup = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_llama_cpp.sh"), llama_dir],
                               capture_output=True, text=True)
        if setup.returncode != 0:
            data["llama_cpp_skipped"] = "optional; " + (setup.stderr.strip().splitlines() or ["setup failed"])[-1]
            log("llama.cpp: skipped (%s)" % data["llama_cpp_skipped"])
        else:
            pkg = os.path.join(llama_dir, "node_modules", "node-llama-cpp")
            with open(os.path.join(pkg, "package.json")) as f:
                data["node_llama_cpp"] = json.load(f)["version"]
            ggufs = prepare_ggufs(folder, os.path.dirname(os.path.abspath(folder)))
            engines += llama_engines(pkg, ggufs)
    else:
        data["llama_cpp_skipped"] = "--no-llama-cpp"

    prompt = random.Random(67).sample(range(3, cfg["vocab_size"]), prompt_len)
    data["prompt_ids"] = prompt
    results = {}  # (engine, threads) -> [run results]
    errors = {}
    for t in threads:
        for r in range(rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for e in order:
                res = None
                for attempt in range(3):  # fxcpp may be relinking (a build in the same tree): up to 2 more tries
                    try:
                        res = e.run(prompt, n, t, one_cpu if t == 1 else None)
                        break
                    except (RuntimeError, ValueError, OSError) as exc:
                        errors[(e.name, t)] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                        log("  %s, %d thread(s): %s%s" % (e.name, t, errors[(e.name, t)],
                                                         "; trying again in 30 s" if attempt < 2 else ""))
                        if attempt < 2:
                            time.sleep(30)
                if res is None:
                    continue
                results.setdefault((e.name, t), []).append(res)
                log("  %d thread(s), round %d: %-16s prompt %7.1f tok/s, decode %6.2f tok/s, RSS %5.0f MB (%.0f s)" % (
                    t, r + 1, e.name, res["prompt_tokens_per_s"], res["decode_tokens_per_s"], res["peak_rss_mb"],
                    time.time() - start))
    for t in threads:
        data["bandwidth_runs"][str(t)].append(read_bandwidth(t))
        data["bandwidth_gbs"][str(t)] = max(data["bandwidth_runs"][str(t)])
    log("read bandwidth at the end: %s" % ", ".join("%s thread(s) %.1f GB/s" % (t, v[1])
                                                     for t, v in data["bandwidth_runs"].items()))
    for t in threads:
        for e in engines:
            row = {"engine": e.name, "weights": e.weights, "threads": t}
            if (e.name, t) in errors:
                row["error"] = errors[(e.name, t)]
            runs = results.get((e.name, t), [])
            if runs:
                med = lambda k: statistics.median(x[k] for x in runs)  # noqa: E731
                gb = weights * e.bpw / 1e9
                limit = data["bandwidth_gbs"][str(t)] / gb
                row.update(prompt_tokens_per_s=med("prompt_tokens_per_s"), decode_tokens_per_s=med("decode_tokens_per_s"),
                           time_to_first_token_ms=med("time_to_first_token_ms"), peak_rss_mb=max(x["peak_rss_mb"] for x in runs),
                           gb_per_token=gb, limit_tokens_per_s=limit,
                           percent_of_limit=100 * med("decode_tokens_per_s") / limit, generated=runs[0]["generated"],
                           runs=[{k: v for k, v in x.items() if k != "generated"} for x in runs])
                row.pop("error", None)
            data["rows"].append(row)

    # accuracy: greedy prefixes against fxcpp eager's; llama.cpp's teacher-forced top-1 against F32's
    data["accuracy"] = {}
    last = [r for r in data["rows"] if r["threads"] == threads[-1] and "generated" in r]
    ref = next((r for r in last if r["engine"] == sets[0][0]), None) or next(
        (r for r in last if r["engine"] == "llama.cpp F32"), None)
    if ref is not None:
        eager = ref["generated"]
        data["greedy_reference"] = ref["engine"]
        for r in last:
            data["accuracy"][r["engine"]] = {"same_prefix": same_prefix(r["generated"], eager)}
        # fxcpp's own teacher-forced top-1 (generate --teacher-forced), each precision against fxcpp F32's.
        sequence = prompt + eager
        fx_top1 = {}
        for name, extra in sets:
            cmd = [fxcpp, "generate", folder, "--prompt-ids", ",".join(map(str, sequence)), "--teacher-forced",
                   "--threads", str(threads[-1]), "--max-seq", str(len(sequence))] + list(extra)
            out, err, rc, _ = run_measured(cmd, threads[-1], None)
            if rc == 0:
                fx_top1[name] = json.loads(out.strip().splitlines()[-1])["top1"]
            else:
                log("  teacher-forced %s: exit %d: %s" % (name, rc, err.strip()[-300:]))
        f32 = fx_top1.get("fxcpp") or fx_top1.get("fxcpp eager")
        if f32 is not None:
            for name, ids in fx_top1.items():
                agree = sum(x == y for x, y in zip(ids, f32)) / len(ids)
                data["accuracy"].setdefault(name, {})["top1_agreement"] = agree
        if any(e.kind == "llama.cpp" for e in engines):
            sequence = prompt + eager
            top1 = {}
            for t in GGUF_TYPES:
                out, err, rc, _ = run_measured(["node", os.path.join(ROOT, "bench", "llama_cpp", "llama_bench.js"),
                                                "--pkg", pkg, "--model", ggufs[t], "--prompt-ids",
                                                ",".join(map(str, sequence)), "--mode", "teacher",
                                                "--threads", str(threads[-1])], threads[-1], None)
                if rc == 0:
                    top1[t] = json.loads(out.strip().splitlines()[-1])["top1"]
                else:
                    log("  teacher-forced llama.cpp %s: exit %d: %s" % (t, rc, err.strip()[-300:]))
            if "F32" in top1:
                for t, ids in top1.items():
                    agree = sum(x == y for x, y in zip(ids, top1["F32"])) / len(ids)
                    data["accuracy"].setdefault("llama.cpp " + t, {})["top1_agreement"] = agree
            if "F32" in top1:
                # F32's top-1 after the prompt and each of fxcpp's tokens: equal to fxcpp's next token?
                data["accuracy"]["llama.cpp F32"]["top1_equal_fxcpp_greedy"] = sum(
                    x == y for x, y in zip(top1["F32"][prompt_len - 1:-1], eager)) / len(eager)
    save_run(data, start, json_path, md_path, render)
    return 1 if any("error" in r for r in data["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
