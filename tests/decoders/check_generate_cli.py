#!/usr/bin/python3
"""ctest decoders.cli_generate: `fxcpp generate` on the LLaMA fixture folder (make_llama_fixture.py --tokenizer).

Usage: check_generate_cli.py FXCPP FIXTURE_DIR
--json's greedy tokens equal the reference's (expected.pt, expected_text.json), its fields are there; with the
folder's tokenizer.model a text prompt is encoded as spm_encode does, the new tokens stream as the text spm_decode
gives them (the same as --json's "text"), and its end-of-sequence id stops generation unless --ignore-eos; a copy
of the folder without tokenizer.model streams ids, and refuses --prompt TEXT. Bad input is one line on stderr and
exit 2. Prints "N passed, 0 failed".
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import check, finish  # noqa: E402

fxcpp, fixture = sys.argv[1], sys.argv[2]
prompt, _, greedy = torch.load(fixture + "/expected.pt")
prompt, greedy = prompt[0].tolist(), greedy.tolist()
with open(fixture + "/expected_text.json", encoding="utf-8") as f:
    expected = json.load(f)
eos = expected["eos_id"]
model = fixture + "/tokenizer.model"
ids = ",".join(str(i) for i in prompt)
if shutil.which("spm_decode") is None:
    sys.exit("check_generate_cli.py: spm_decode not found: install Debian's sentencepiece (scripts/setup.sh)")


def run(*args, folder=fixture):
    """fxcpp generate FOLDER ARGS; stdout and stderr as UTF-8 text, as they are (no newline translation)."""
    r = subprocess.run([fxcpp, "generate", folder] + list(args), capture_output=True)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode("utf-8", "replace"),
                                       r.stderr.decode("utf-8", "replace"))


def spm_decode(token_ids):
    r = subprocess.run(["spm_decode", "--model=" + model, "--input_format=id"], capture_output=True,
                       input=(" ".join(str(i) for i in token_ids) + "\n").encode())
    assert r.returncode == 0, r.stderr
    return r.stdout.decode("utf-8")[:-1]


def new_text(before, generated):
    """What spm_decode gives for the new ids after `before` (the prompt's own text is a prefix of the whole's)."""
    head, whole = spm_decode(before), spm_decode(before + generated)
    check(whole.startswith(head), "the prompt's text %r is a prefix of the whole's %r" % (head, whole))
    return whole[len(head):]


def until_eos(tokens, n):
    """The first n of `tokens`, up to and with the end-of-sequence id."""
    out = tokens[:n]
    return out[:out.index(eos) + 1] if eos in out else out


# Ids in, greedy as the reference; the end-of-sequence id (the fixture's is greedy's 5th to 12th) stops it.
r = run("--prompt-ids", ids, "-n", "12", "--json", "--max-seq", "64", "--ignore-eos")
check(r.returncode == 0, "json run exit %d: %s" % (r.returncode, r.stderr))
out = json.loads(r.stdout)
check(out["generated"] == greedy[:12], "json tokens %s vs %s" % (out["generated"], greedy[:12]))
for key in ("text", "prompt_tokens_per_s", "decode_tokens_per_s", "time_to_first_token_ms", "peak_rss_mb", "cpu",
            "threads"):
    check(key in out, "json field " + key)
check(out["threads"] == 1 and out["decode_tokens_per_s"] > 0, "json values %s" % out)
check(out["text"] == new_text(prompt, greedy[:12]), "json text %r" % out["text"])
check(eos in greedy[4:12] and eos not in greedy[:4], "the fixture's eos id %d is early in %s" % (eos, greedy))
r = run("--prompt-ids", ids, "-n", "12", "--json", "--max-seq", "64")
out = json.loads(r.stdout)
check(out["generated"] == until_eos(greedy, 12) and out["stopped"], "stopped at eos: %s" % out)

# Text in, text out: the prompt encoded as spm_encode does (BOS first), the text streamed as --json has it.
text_greedy = until_eos(expected["greedy"], 12)
r = run("--prompt", expected["prompt"], "-n", "12", "--json", "--max-seq", "64")
check(r.returncode == 0, "text json run exit %d: %s" % (r.returncode, r.stderr))
out = json.loads(r.stdout)
check(out["generated"] == text_greedy, "text prompt's tokens %s vs %s" % (out["generated"], text_greedy))
text = new_text(expected["prompt_ids"], out["generated"])
check(out["text"] == text, "json text %r vs spm_decode's %r" % (out["text"], text))
r = run("--prompt", expected["prompt"], "-n", "12", "--max-seq", "64")
check(r.returncode == 0 and r.stdout == text + "\n", "streamed text %r vs %r" % (r.stdout, text))
check("tokens/s" in r.stderr and "time to first token" in r.stderr, "timings line: " + r.stderr)
r = run("--prompt-ids", ids, "-n", "6", "--ignore-eos")
check(r.returncode == 0 and r.stdout == new_text(prompt, greedy[:6]) + "\n", "ids in, text out: %r" % r.stdout)
r = run("--prompt-ids", ids, "-n", "12")
check(r.returncode == 0 and "stopped at the end-of-sequence id" in r.stderr, "eos on the timings line: " + r.stderr)

# Without tokenizer.model: ids out, --tokenizer PATH instead, --prompt TEXT refused.
bare = tempfile.mkdtemp(prefix="no_tokenizer.", dir=os.path.dirname(os.path.abspath(fixture)))
try:
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(fixture, name), os.path.join(bare, name))
    r = run("--prompt-ids", ids, "-n", "6", folder=bare)
    check(r.returncode == 0 and r.stdout.split() == [str(t) for t in greedy[:6]], "streamed ids: " + r.stdout)
    r = run("--prompt-ids", ids, "-n", "6", "--json", folder=bare)
    check(r.returncode == 0 and json.loads(r.stdout)["text"] is None, "json text without a tokenizer: " + r.stdout)
    r = run("--prompt", expected["prompt"], "-n", "12", "--max-seq", "64", "--tokenizer", model, folder=bare)
    check(r.returncode == 0 and r.stdout == text + "\n", "--tokenizer PATH: %r" % r.stdout)
    missing = os.path.join(bare, "missing.model")
    for args, folder, line in [
        (("--prompt", "hello"), bare,
         "fxcpp generate: %s has no tokenizer.model: --prompt TEXT needs the checkpoint's SentencePiece tokenizer (or "
         "--tokenizer PATH); give --prompt-ids 1,2,3" % bare),
        (("--prompt", "hello", "--tokenizer", missing), bare,
         "fxcpp generate: %s: cannot open the SentencePiece model (Not found: \"%s\": No such file or directory Error "
         "#2)" % (missing, missing)),
        (("--prompt-ids", "1,400"), fixture,
         "fxcpp generate: %s: token id 400 is outside the vocabulary (320 pieces: ids 0 to 319)" % model),
        (("--prompt-ids", ids, "-n", "60", "--max-seq", "64"), fixture,
         "fxcpp generate: the prompt (16 tokens) and -n 60 need 75 positions, --max-seq is 64"),
        (("--prompt-ids", "1,x"), fixture, "fxcpp generate: --prompt-ids: 'x' is not a token id"),
        (("--prompt", "hello", "--prompt-ids", "1"), fixture,
         "fxcpp generate: give --prompt TEXT or --prompt-ids 1,2,3, not both"),
        (("-n", "3"), fixture, "fxcpp generate: --prompt TEXT or --prompt-ids 1,2,3 is required"),
    ]:
        r = run(*args, folder=folder)
        check(r.returncode == 2, "%s: exit %d" % (args, r.returncode))
        check(r.stderr.strip() == line, "%s: stderr %r" % (args, r.stderr))
    # The model's own lines (which part of it says so is the engine's: only their ends are checked here).
    r = run("--prompt-ids", "1,400", folder=bare)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("fxcpp generate: ") and
          r.stderr.endswith(": token ids 1 to 400 are outside the vocabulary's 0 to 319\n"), "1,400: " + r.stderr)
finally:
    shutil.rmtree(bare)
r = run("--prompt-ids", "1", folder=fixture + "/config.json")
check(r.returncode == 2 and r.stderr.count("\n") == 1 and
      r.stderr.startswith("fxcpp generate: %s/config.json: not a " % fixture), "not a folder: " + r.stderr)
finish()
