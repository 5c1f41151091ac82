#!/usr/bin/python3
"""A small random LLaMA checkpoint folder as Hugging Face writes it, and what Hugging Face's LlamaForCausalLM computes
on it: the fixture of tests/decoders/llama_test.cpp (Debian's python3-torch; transformers is not packaged, so the
reference below is modeling_llama.py's arithmetic written out in torch).

Usage: make_llama_fixture.py OUT [--tied] [--dtype F32|F16|BF16] [--shards N] [--tokenizer]
Writes OUT/config.json, OUT/model.safetensors (or N shards and model.safetensors.index.json) and OUT/expected.pt:
(prompt ids [1, T], the reference logits [1, T, V] of the prompt, greedy ids continuing it (each step the whole
prefix recomputed, no cache)). The weights are drawn so that the greedy continuation varies (not one token repeated).

--tokenizer: also OUT/tokenizer.model, a SentencePiece BPE model with byte fallback trained by spm_train (Debian's
sentencepiece) on a small text written here, with config.json's vocab_size (320 then: the 256 byte pieces, <unk>,
<s>, </s> and 61 of the text's). Its </s> is given the id of a token the greedy continuation reaches early (so
that fxcpp generate's end-of-sequence stop is seen), and OUT/expected_text.json has what spm_encode / spm_decode
give: the eos id, a text prompt's ids (BOS first) and the reference's greedy ids continuing them, and the ids of a
few texts (ASCII, multi-byte characters the pieces lack).
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import torch

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "vocab_size": 97,
          "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 500.0,
          "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float32"}
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def weights(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * d

    def w(*shape):
        return torch.randn(*shape, generator=g) / math.sqrt(shape[-1])

    out = {"model.embed_tokens.weight": torch.randn(v, h, generator=g)}
    for n in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % n
        out[p + "self_attn.q_proj.weight"] = w(h, h)
        out[p + "self_attn.k_proj.weight"] = w(kv, h)
        out[p + "self_attn.v_proj.weight"] = w(kv, h)
        out[p + "self_attn.o_proj.weight"] = w(h, h)
        out[p + "mlp.gate_proj.weight"] = w(i, h)
        out[p + "mlp.up_proj.weight"] = w(i, h)
        out[p + "mlp.down_proj.weight"] = w(h, i)
        out[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        out[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
    out["model.norm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
    if not cfg["tie_word_embeddings"]:
        out["lm_head.weight"] = w(v, h) * 4
    return out


def rms(x, weight, eps):
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def reference(cfg, p, ids):
    """HF LlamaForCausalLM.forward(ids).logits, without a cache."""
    b, t = ids.shape
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // nh
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(torch.arange(t).float(), inv_freq)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos(), emb.sin()
    x = p["model.embed_tokens.weight"][ids]
    mask = torch.full((t, t), float("-inf")).triu(1)
    for n in range(cfg["num_hidden_layers"]):
        q_ = "model.layers.%d." % n
        y = rms(x, p[q_ + "input_layernorm.weight"], cfg["rms_norm_eps"])
        q = (y @ p[q_ + "self_attn.q_proj.weight"].T).view(b, t, nh, d).transpose(1, 2)
        k = (y @ p[q_ + "self_attn.k_proj.weight"].T).view(b, t, nkv, d).transpose(1, 2)
        v = (y @ p[q_ + "self_attn.v_proj.weight"].T).view(b, t, nkv, d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(b, nkv, nh // nkv, t, d).reshape(b, nh, t, d)  # HF's repeat_kv
        v = v[:, :, None].expand(b, nkv, nh // nkv, t, d).reshape(b, nh, t, d)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d) + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        x = x + (att @ v).transpose(1, 2).reshape(b, t, h) @ p[q_ + "self_attn.o_proj.weight"].T
        y = rms(x, p[q_ + "post_attention_layernorm.weight"], cfg["rms_norm_eps"])
        mlp = torch.nn.functional.silu(y @ p[q_ + "mlp.gate_proj.weight"].T) * (y @ p[q_ + "mlp.up_proj.weight"].T)
        x = x + mlp @ p[q_ + "mlp.down_proj.weight"].T
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return rms(x, p["model.norm.weight"], cfg["rms_norm_eps"]) @ head.T


def write_safetensors(path, tensors):
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


TOKENIZER_VOCAB = 320
TEXT_PROMPT = "The old man reads a naïve story"
# Encoded in expected_text.json: ASCII, characters the pieces have (ï, é), and ones only bytes can spell (日本, 🙂).
TEXTS = ["The cat finds some fresh bread.", "naïve café 日本", "a 🙂 and 日本語 at the market!"]


def spm(tool, *args, stdin=None):
    path = shutil.which(tool)
    if path is None:
        sys.exit("make_llama_fixture.py: %s not found: the tokenizer fixture needs Debian's sentencepiece "
                 "(scripts/setup.sh installs it)" % tool)
    r = subprocess.run([path] + list(args), input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("make_llama_fixture.py: %s failed (exit %d): %s" % (tool, r.returncode, r.stderr.strip()[-2000:]))
    return r.stdout


def corpus():
    """Four hundred short English sentences (é and ï among their characters), the same every run."""
    r = random.Random(0)
    subject = ["the cat", "a dog", "my friend", "the old man", "our teacher", "the small bird", "every child",
               "the baker"]
    verb = ["sees", "likes", "finds", "makes", "reads", "writes", "brings", "paints"]
    thing = ["a red apple", "the long river", "some fresh bread", "a quiet song", "the green house", "a café menu",
             "the naïve plan", "many stars", "a naïve story"]
    tail = ["today.", "in the morning.", "near the window.", "after dinner.", "with great care.", "at the market!",
            "again and again.", "quickly?"]
    return "".join(" ".join([r.choice(subject).capitalize(), r.choice(verb), r.choice(thing), r.choice(tail)]) + "\n"
                   for _ in range(400))


def train_tokenizer(out, eos_id):
    """OUT/tokenizer.model: byte-fallback BPE with LLaMA's normalisation (none; a dummy prefix space)."""
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(corpus())
        spm("spm_train", "--input=" + text, "--model_prefix=" + os.path.join(tmp, "tokenizer"),
            "--vocab_size=%d" % TOKENIZER_VOCAB, "--model_type=bpe", "--byte_fallback=true",
            "--character_coverage=1.0", "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
            "--unk_id=0", "--bos_id=1", "--eos_id=%d" % eos_id, "--num_threads=1", "--minloglevel=2")
        shutil.copyfile(os.path.join(tmp, "tokenizer.model"), os.path.join(out, "tokenizer.model"))
    model = os.path.join(out, "tokenizer.model")
    pieces = spm("spm_export_vocab", "--model=" + model).splitlines()
    if len(pieces) != TOKENIZER_VOCAB:
        sys.exit("make_llama_fixture.py: spm_train made %d pieces, not %d" % (len(pieces), TOKENIZER_VOCAB))
    return model


def encode(model, text):
    return [int(i) for i in spm("spm_encode", "--model=" + model, "--output_format=id", "--extra_options=bos",
                                stdin=text + "\n").split()]


def early_token(prompt, generated):
    """A token of the greedy continuation at position 4 to 11 seen there for the first time (and not in the prompt,
    not <unk> or <s>): the fixture's end-of-sequence id, which `fxcpp generate -n 12` then stops at."""
    for k in range(4, 12):
        t = generated[k]
        if t > 1 and t not in generated[:k] and t not in prompt:
            return t
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--dtype", default="F32", choices=sorted(DTYPES))
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tokenizer", action="store_true")
    args = ap.parse_args()
    if args.tokenizer:
        spm("spm_train", "--help")  # fails here, with what to install, before any work
    os.makedirs(args.out, exist_ok=True)
    cfg = dict(CONFIG, tie_word_embeddings=args.tied, torch_dtype={"F32": "float32", "F16": "float16",
                                                                     "BF16": "bfloat16"}[args.dtype])
    if args.tokenizer:
        cfg["vocab_size"] = TOKENIZER_VOCAB
    prompt = torch.tensor([[3, 17, 42, 5, 88, 61, 9, 23, 70, 11, 34, 2, 56, 91, 40, 7]])
    for seed in range(20):  # greedy output that varies
        stored = {k: v.to(DTYPES[args.dtype]) for k, v in weights(cfg, seed).items()}
        p = {k: v.float() for k, v in stored.items()}  # what a float32 reader computes with
        ids = prompt
        for _ in range(24):
            ids = torch.cat((ids, reference(cfg, p, ids)[:, -1].argmax(-1, keepdim=True)), 1)
        generated = ids[0, prompt.shape[1]:]
        if len(set(generated.tolist())) >= 6 and (not args.tokenizer or early_token(prompt[0].tolist(),
                                                                                      generated.tolist())):
            break
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    names = list(stored)
    if args.shards == 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), stored)
    else:
        per = math.ceil(len(names) / args.shards)
        weight_map = {}
        for s in range(args.shards):
            f = "model-%05d-of-%05d.safetensors" % (s + 1, args.shards)
            part = {n: stored[n] for n in names[s * per:(s + 1) * per]}
            write_safetensors(os.path.join(args.out, f), part)
            weight_map.update({n: f for n in part})
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    if args.tokenizer:
        eos = early_token(prompt[0].tolist(), generated.tolist())
        model = train_tokenizer(args.out, eos)
        ids = torch.tensor([encode(model, TEXT_PROMPT)])
        start = ids.shape[1]
        for _ in range(24):
            ids = torch.cat((ids, reference(cfg, p, ids)[:, -1].argmax(-1, keepdim=True)), 1)
        with open(os.path.join(args.out, "expected_text.json"), "w", encoding="utf-8") as f:
            json.dump({"eos_id": eos, "vocab_size": TOKENIZER_VOCAB, "prompt": TEXT_PROMPT,
                       "prompt_ids": ids[0, :start].tolist(), "greedy": ids[0, start:].tolist(),
                       "encoded": {t: encode(model, t) for t in TEXTS}}, f, ensure_ascii=False, indent=1)
    torch.save((prompt, reference(cfg, p, prompt), generated), os.path.join(args.out, "expected.pt"))


if __name__ == "__main__":
    main()
