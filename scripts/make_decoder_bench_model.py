#!/usr/bin/python3
"""The decoder bench's checkpoint folder (scripts/bench_decoder.py): TinyLlama-1.1B's shapes with 8 of its 22
layers and random seeded weights, as Hugging Face writes a LlamaForCausalLM folder.

    make_decoder_bench_model.py [OUT] [--layers 8] [--seed 0] [--check]

OUT (default build/decoder_bench/tinyllama8) gets config.json (hidden 2048, intermediate 5632, 32 heads, 4 KV
heads, vocab 32000, rope_theta 10000, rms_norm_eps 1e-5, max_position_embeddings 2048, untied lm_head, as
TinyLlama-1.1B) and an F32 model.safetensors (1.93 GB: 0.26 GB of it the embedding, of which a token reads one
row; 1.67 GB read per decoded token). The weights are tests/decoders/make_llama_fixture.py's draw (normal,
scaled by 1/sqrt(fan-in), so activations are of order 1; norms near 1; lm_head x4 so the logits spread): greedy
decoding then varies rather than repeating one token. --check recomputes 16 greedy tokens after a fixed prompt
with the fixture's reference arithmetic (no cache) and fails when fewer than 6 differ. Does nothing when OUT
holds the same configuration and seed already.
"""
import argparse
import json
import os
import struct
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "decoders"))
import make_llama_fixture  # noqa: E402  (weights, reference: the fixture's draw and Hugging Face's arithmetic)

TINYLLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "vocab_size": 32000,
             "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
             "num_key_value_heads": 4, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float32", "bos_token_id": 1,
             "eos_token_id": 2}
PROMPT = [1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203, 29889, 13, 1576, 3271, 338]


def write_safetensors(path, tensors):
    """A safetensors file written as it goes (8-byte little-endian header size, JSON header, data): the
    fixture's writer joins the whole file in memory first."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            f.write(t.contiguous().numpy().tobytes())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=os.path.join(ROOT, "build", "decoder_bench", "tinyllama8"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="greedy tokens after a fixed prompt vary (slow: ~1 min)")
    a = ap.parse_args()
    cfg = dict(TINYLLAMA, num_hidden_layers=a.layers)
    stamp = dict(cfg, fxcpp_bench_seed=a.seed)
    cfg_path, st_path = os.path.join(a.out, "config.json"), os.path.join(a.out, "model.safetensors")
    if os.path.exists(cfg_path) and os.path.exists(st_path):
        with open(cfg_path) as f:
            if json.load(f) == stamp and not a.check:
                print(a.out)
                return 0
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    p = make_llama_fixture.weights(cfg, a.seed)
    print("make_decoder_bench_model: %d layers, %.2f GB of F32 weights drawn in %.0f s" % (
        a.layers, sum(t.numel() for t in p.values()) * 4 / 1e9, time.time() - t0), file=sys.stderr)
    if a.check:
        ids = torch.tensor([PROMPT])
        with torch.no_grad():
            for _ in range(16):
                ids = torch.cat((ids, make_llama_fixture.reference(cfg, p, ids)[:, -1].argmax(-1, keepdim=True)), 1)
        generated = ids[0, len(PROMPT):].tolist()
        print("make_decoder_bench_model: greedy after the prompt: %s" % generated, file=sys.stderr)
        if len(set(generated)) < 6:
            print("make_decoder_bench_model: greedy output hardly varies (%d distinct of 16)" % len(set(generated)),
                  file=sys.stderr)
            return 1
    write_safetensors(st_path, p)
    with open(cfg_path, "w") as f:
        json.dump(stamp, f, indent=2)
    print("make_decoder_bench_model: wrote %s (%.2f GB) in %.0f s" % (st_path, os.path.getsize(st_path) / 1e9,
                                                                       time.time() - t0), file=sys.stderr)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
