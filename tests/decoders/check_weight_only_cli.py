#!/usr/bin/python3
"""ctest decoders.cli_weight_only: `fxcpp generate --engine eager|fxcpp [--quantize int8|int4]` and
`fxcpp quantize --weight-only` on the LLaMA fixture folder (make_llama_fixture.py).

Usage: check_weight_only_cli.py FXCPP FIXTURE_DIR OUT_DIR
Both engines' greedy tokens equal the reference's; each --quantize runs and names its kernel; --bf16 runs on oneDNN's
bf16 kernels (teacher-forced top-1 within 0.9 of float32's) or says it fell back to float32; a .fx file written by
`fxcpp quantize --weight-only int4` decodes the same tokens as `generate --quantize int4` on the folder; bad input is
one line on stderr and exit 2. Prints "N passed, 0 failed".
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import check, finish  # noqa: E402

import torch

fxcpp, fixture, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out_dir, exist_ok=True)
prompt, _, greedy = torch.load(fixture + "/expected.pt")  # _: the reference's logits of the prompt
ids = ",".join(str(i) for i in prompt[0].tolist())


def fx(*args):
    return subprocess.run([fxcpp] + list(args), capture_output=True, text=True)


def generated(model, *args):
    r = fx("generate", model, "--prompt-ids", ids, "-n", "12", "--json", *args)
    check(r.returncode == 0, "%s %s: exit %d: %s" % (model, args, r.returncode, r.stderr))
    return json.loads(r.stdout) if r.returncode == 0 else {"generated": None, "engine": None}


for engine, name in (("eager", "eager (libtorch, the C++ model)"), ("fxcpp", "fxcpp")):
    out = generated(fixture, "--engine", engine)
    check(out["generated"] == greedy[:12].tolist(), "%s tokens %s vs %s" % (engine, out["generated"],
                                                                            greedy[:12].tolist()))
    check(out["engine"] == name, "engine %r" % out["engine"])
kernel = None
for flags, name in ((("--quantize", "int8"), "fxcpp, int8 per channel ("),
                    (("--quantize", "int8", "--group-size", "32"), "fxcpp, int8 group 32 ("),
                    (("--quantize", "int4"), "fxcpp, int4 group 32 ("),
                    (("--quantize", "int4", "--asymmetric"), "fxcpp, int4 group 32 asymmetric (")):
    out = generated(fixture, *flags)
    check(out["engine"] and out["engine"].startswith(name), "%s: engine %r" % (flags, out["engine"]))
    check(out["generated"] and len(out["generated"]) == 12, "%s: %s" % (flags, out["generated"]))
    kernel = out["engine"] and out["engine"][len(name):-1]
check(kernel in ("avx512-vnni", "avx2", "scalar"), "kernel %r" % kernel)
int4 = generated(fixture, "--quantize", "int4")["generated"]

# --teacher-forced: the most likely next token at every prompt position, as the reference's logits give it.
prompt_top1 = _[0].argmax(-1).tolist()
for engine in ("eager", "fxcpp"):
    r = fx("generate", fixture, "--prompt-ids", ids, "--teacher-forced", "--engine", engine)
    check(r.returncode == 0 and json.loads(r.stdout)["top1"] == prompt_top1, "teacher-forced %s: %s %s" %
          (engine, r.stdout, r.stderr))
r = fx("generate", fixture, "--prompt-ids", ids, "--teacher-forced", "--quantize", "int8")
agree = sum(a == b for a, b in zip(json.loads(r.stdout)["top1"], prompt_top1)) / len(prompt_top1) if r.returncode == 0 else 0
check(agree >= 0.9, "teacher-forced int8 agrees with float32 at %.2f of the positions" % agree)

# --bf16: the linears on oneDNN's bf16 kernels where it has them (AVX-512 on), named in the engine; elsewhere
# float32, the same tokens as without it, and the engine says why.
out = generated(fixture, "--bf16")
bf16 = out["engine"] == "fxcpp, bf16 (oneDNN)"
check(bf16 or (out["engine"] or "").startswith("fxcpp, float32 ("), "--bf16: engine %r" % out["engine"])
check(out["generated"] and len(out["generated"]) == 12, "--bf16: %s" % out["generated"])
if not bf16:
    check(out["generated"] == greedy[:12].tolist(), "--bf16 without bf16 kernels: %s" % out["generated"])
r = fx("generate", fixture, "--prompt-ids", ids, "--teacher-forced", "--bf16")
agree = sum(a == b for a, b in zip(json.loads(r.stdout)["top1"], prompt_top1)) / len(prompt_top1) if r.returncode == 0 else 0
check(agree >= 0.9, "teacher-forced bf16 agrees with float32 at %.2f of the positions" % agree)

q4 = os.path.join(out_dir, "int4.fx")
r = fx("quantize", "--weight-only", "int4", fixture, "-o", q4)
check(r.returncode == 0 and os.path.exists(q4), "quantize --weight-only: exit %d: %s" % (r.returncode, r.stderr))
check("15 linear layers and 1 embedding table," in r.stderr and "(int4, group 32)" in r.stderr, "quantize report: " + r.stderr)
check(generated(q4)["generated"] == int4, "the .fx file decodes as --quantize int4 on the folder")
check(generated(q4, "--engine", "eager")["generated"] == int4, "the .fx file unoptimised decodes the same")

for args, text in [
    (("generate", fixture, "--prompt-ids", ids, "--quantize", "int3"), "--quantize must be int8 or int4, not 'int3'"),
    (("generate", fixture, "--prompt-ids", ids, "--quantize", "int8", "--engine", "eager"),
     "--quantize needs --engine fxcpp (the eager model computes in float32)"),
    (("generate", fixture, "--prompt-ids", ids, "--engine", "onnx"), "--engine must be fxcpp or eager, not 'onnx'"),
    (("generate", fixture, "--prompt-ids", ids, "--bf16", "--engine", "eager"),
     "--bf16 needs --engine fxcpp (the eager model computes in float32)"),
    (("generate", fixture, "--prompt-ids", ids, "--bf16", "--quantize", "int4"),
     "--bf16 and --quantize are two kinds of weights (bfloat16, int8 / int4): choose one"),
    (("generate", fixture, "--prompt-ids", ids, "--group-size", "32"),
     "--group-size and --asymmetric choose how --quantize int8|int4 quantizes: add --quantize"),
    (("generate", fixture, "--prompt-ids", ids, "--quantize", "int4", "--group-size", "48"),
     "--group-size must be 32, 64 or 128 (or 0 for int8: a scale per output channel), not 48"),
    (("generate", fixture, "--prompt-ids", ids, "--quantize", "int4", "--group-size", "0"),
     "--group-size 0 (per channel) is for int8; int4 takes 32, 64 or 128"),
    (("generate", fixture, "--prompt-ids", ids, "--quantize", "int4", "--group-size", "64"),
     "quantize_weight_only: layer model.layers.0.mlp.down_proj: pack_weight_only: group_size 64 does not divide "
     "in_features 160"),
    (("generate", q4, "--prompt-ids", ids, "--max-seq", "100"), q4 + " holds 64 positions, --max-seq asks for 100"),
    (("generate", fixture + "/config.json", "--prompt-ids", ids),
     fixture + "/config.json: not a checkpoint folder (config.json and safetensors) nor a decoder graph (.fx)"),
    (("quantize", "--weight-only", "int4", fixture), "-o OUT.fx is required: where the quantized decoder goes"),
    (("quantize", "--weight-only", "int4", fixture, "--qat", "-o", q4),
     "--qat and --weight-only are two kinds of quantization: choose one"),
    (("quantize", fixture + "/model.safetensors", "--calibration", "x.pt", "--group-size", "32"),
     "--group-size is for --weight-only int8|int4"),
]:
    r = fx(*args)
    check(r.returncode == 2, "%s: exit %d" % (args, r.returncode))
    check(r.stderr.strip() == "fxcpp %s: %s" % (args[0], text), "%s: stderr %r" % (args, r.stderr))

finish()
