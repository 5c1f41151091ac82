#!/usr/bin/python3
"""ctest decoders.cli_generate: `fxcpp generate` on the LLaMA fixture folder (make_llama_fixture.py).

Usage: check_generate_cli.py FXCPP FIXTURE_DIR
--json's greedy tokens equal the reference's (expected.pt), its fields are there; streamed ids equal them too; bad
input is one line on stderr and exit 2. Prints "N passed, 0 failed".
"""
import json
import subprocess
import sys

import torch

fxcpp, fixture = sys.argv[1], sys.argv[2]
prompt, _, greedy = torch.load(fixture + "/expected.pt")
ids = ",".join(str(i) for i in prompt[0].tolist())
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def run(*args):
    return subprocess.run([fxcpp, "generate", fixture] + list(args), capture_output=True, text=True)


r = run("--prompt-ids", ids, "-n", "12", "--json", "--max-seq", "64")
check(r.returncode == 0, "json run exit %d: %s" % (r.returncode, r.stderr))
out = json.loads(r.stdout)
check(out["generated"] == greedy[:12].tolist(), "json tokens %s vs %s" % (out["generated"], greedy[:12].tolist()))
for key in ("text", "prompt_tokens_per_s", "decode_tokens_per_s", "time_to_first_token_ms", "peak_rss_mb", "cpu",
            "threads"):
    check(key in out, "json field " + key)
check(out["threads"] == 1 and out["decode_tokens_per_s"] > 0, "json values %s" % out)

r = run("--prompt-ids", ids, "-n", "6")
check(r.returncode == 0 and r.stdout.split() == [str(t) for t in greedy[:6].tolist()], "streamed: " + r.stdout)
check("tokens/s" in r.stderr and "time to first token" in r.stderr, "timings line: " + r.stderr)

for args, text in [
    (("--prompt-ids", ids, "-n", "60", "--max-seq", "64"),
     "fxcpp generate: the prompt (16 tokens) and -n 60 need 75 positions, --max-seq is 64"),
    (("--prompt", "hello"),
     "fxcpp generate: --prompt TEXT needs a tokenizer, which fxcpp generate does not have yet; give --prompt-ids 1,2,3"),
    (("--prompt-ids", "1,x"), "fxcpp generate: --prompt-ids: 'x' is not a token id"),
    (("--prompt-ids", "1,200"), "fxcpp generate: LlamaForCausalLM.forward(tokens, input_pos): token ids 1 to 200 are "
                                "outside the vocabulary's 0 to 96"),
]:
    r = run(*args)
    check(r.returncode == 2, "%s: exit %d" % (args, r.returncode))
    check(r.stderr.strip() == text, "%s: stderr %r" % (args, r.stderr))
r = subprocess.run([fxcpp, "generate", fixture + "/config.json", "--prompt-ids", "1"], capture_output=True, text=True)
check(r.returncode == 2 and r.stderr.strip().endswith("not a folder; fxcpp generate reads a checkpoint folder "
                                                      "(config.json and safetensors)"), "not a folder: " + r.stderr)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
