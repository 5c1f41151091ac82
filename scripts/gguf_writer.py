#!/usr/bin/python3
"""A LLaMA checkpoint folder (config.json + model.safetensors, as fxcpp generate reads it) as a GGUF v3 file of
llama.cpp's `llama` architecture, in F32, Q8_0 or Q4_0: the peer benchmark's weights (scripts/bench_decoder.py).

    gguf_writer.py FOLDER OUT.gguf [--type F32|Q8_0|Q4_0]
    gguf_writer.py --self-test

What llama.cpp's convert_hf_to_gguf.py (LlamaModel) does, without its `gguf` package: the tensor names
(token_embd.weight, blk.N.attn_q.weight ..., output_norm.weight, output.weight; none for a tied lm_head, llama.cpp
then reads token_embd), q_proj and k_proj permuted from Hugging Face's rotate_half rotary order to ggml's
adjacent pairs (LlamaModel.permute), the llama.* hyperparameter keys. Q8_0 / Q4_0 are ggml's reference quantizers
(ggml-quants.c quantize_row_q8_0_ref / quantize_row_q4_0_ref, blocks of 32 along a row, float32 arithmetic, the
scale rounded to fp16 to nearest even) applied to every 2-D weight, the embedding and output included (as
`llama-quantize --pure`); the norms stay F32. The tokenizer (tokenizer.ggml.model "llama") is the folder's
tokenizer.model's pieces when it has one, else synthetic: <unk>, <s>, </s>, the byte tokens <0x00>..<0xFF> and
filler pieces (a vocabulary under 259 ids: newline's byte token and ASCII characters), as many as config.json's
vocab_size; llama.cpp then takes token ids as they are. Its <unk>, <s>, </s> ids: tokenizer.model's pieces of
those names, else 0 and config.json's bos_token_id / eos_token_id (1, 2). (llama.cpp's tokenizer on the GGUF of
a tokenizer.model gives spm_encode's ids: tried on make_llama_fixture.py --tokenizer's texts.)
--self-test checks the quantizers against hand-computed blocks.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
TYPES = {"F32": GGML_F32, "Q8_0": GGML_Q8_0, "Q4_0": GGML_Q4_0}
FILE_TYPE = {"F32": 0, "Q8_0": 7, "Q4_0": 2}  # llama_ftype: ALL_F32, MOSTLY_Q8_0, MOSTLY_Q4_0
ALIGNMENT = 32
QK = 32  # QK8_0 == QK4_0

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32_, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)


# ---------------------------------------------------------------------------------------------- quantizers

def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref over the rows of x (float32, last dim a multiple of 32): bytes of blocks
    {fp16 d; int8 qs[32]}: d = amax / 127, qs = roundf(x / d) (x * (1/d) in float32, half away from zero)."""
    b = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK)
    amax = np.abs(b).max(axis=1)
    d = amax / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    x0 = (b * inv[:, None]).astype(np.float32)
    q = np.sign(x0) * np.floor(np.abs(x0).astype(np.float64) + 0.5)  # roundf, exactly (float64 holds |x0| + 0.5)
    out = np.empty((b.shape[0], 34), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.astype(np.int8).view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    """ggml's quantize_row_q4_0_ref over the rows of x: bytes of blocks {fp16 d; uint8 qs[16]}: max = the value of
    the largest magnitude (the first of equals), d = max / -8, q = min(15, (int8)(x * (1/d) + 8.5)), byte j holding
    element j in its low nibble and element j + 16 in its high one."""
    b = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK)
    idx = np.abs(b).argmax(axis=1)  # first occurrence, as the strict `amax < fabsf(v)`
    mx = b[np.arange(b.shape[0]), idx]
    d = mx / np.float32(-8)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = ((b * inv[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.float32)
    q = np.clip(np.trunc(v), 0, 15).astype(np.uint8)  # (int8_t) truncates toward zero; MIN(15, .)
    out = np.empty((b.shape[0], 18), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def dequantize(raw, ggml_type, n):
    """The float32 values of n elements quantized as ggml_type (dequantize_row_q8_0 / _q4_0)."""
    if ggml_type == GGML_Q8_0:
        blk = np.frombuffer(raw, np.uint8).reshape(-1, 34)
        d = blk[:, :2].copy().view(np.float16).astype(np.float32)
        return (blk[:, 2:].view(np.int8).astype(np.float32) * d).reshape(n)
    blk = np.frombuffer(raw, np.uint8).reshape(-1, 18)
    d = blk[:, :2].copy().view(np.float16).astype(np.float32)
    q = np.concatenate([(blk[:, 2:] & 15), (blk[:, 2:] >> 4)], axis=1).astype(np.float32) - 8
    return (q * d).reshape(n)


def tensor_bytes(x, ggml_type):
    if ggml_type == GGML_F32:
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    return (quantize_q8_0 if ggml_type == GGML_Q8_0 else quantize_q4_0)(x)


def nbytes(shape, ggml_type):
    n = int(np.prod(shape))
    return 4 * n if ggml_type == GGML_F32 else n // QK * (34 if ggml_type == GGML_Q8_0 else 18)


# ---------------------------------------------------------------------------------------------- checkpoint

def read_safetensors(path):
    """{name: float32 numpy array} of one safetensors file (F32 memory-mapped; F16, BF16 converted)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        shape, dt = tuple(info["shape"]), info["dtype"]
        count = int(np.prod(shape)) if shape else 1
        if dt == "F32":
            arr = np.memmap(path, dtype="<f4", mode="r", offset=base + a, shape=(count,))
        elif dt == "F16":
            arr = np.memmap(path, dtype="<f2", mode="r", offset=base + a, shape=(count,)).astype(np.float32)
        elif dt == "BF16":
            raw = np.memmap(path, dtype="<u2", mode="r", offset=base + a, shape=(count,))
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit("%s: tensor '%s' is %s; gguf_writer reads F32, F16, BF16" % (path, name, dt))
        assert b - a == arr.dtype.itemsize * count or dt != "F32"
        out[name] = arr.reshape(shape)
    return out


def read_checkpoint(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for name in files:
        out.update(read_safetensors(os.path.join(folder, name)))
    return out


def permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate_half's halves to ggml's adjacent rotary pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return np.ascontiguousarray(
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def gguf_tensors(cfg, p):
    """[(gguf name, float32 array)] in llama.cpp's order."""
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    out = [("token_embd.weight", p["model.embed_tokens.weight"])]
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for n in range(cfg["num_hidden_layers"]):
        for hf, gg in names.items():
            w = p["model.layers.%d.%s.weight" % (n, hf)]
            if hf == "self_attn.q_proj":
                w = permute(np.asarray(w), nh, nh)
            elif hf == "self_attn.k_proj":
                w = permute(np.asarray(w), nh, nkv)
            out.append(("blk.%d.%s.weight" % (n, gg), w))
    out.append(("output_norm.weight", p["model.norm.weight"]))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("output.weight", p["lm_head.weight"]))
    return out


# ---------------------------------------------------------------------------------------------- tokenizer

def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def _fields(buf):
    """(field number, wire type, value) of a protobuf message (varint, 64-bit, bytes, 32-bit)."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("protobuf wire type %d" % wt)
        yield num, wt, v


def sentencepiece_pieces(path):
    """[(piece, score, type)] of a SentencePiece tokenizer.model (ModelProto.pieces: piece 1, score 2, type 3;
    its types are llama.cpp's token types)."""
    with open(path, "rb") as f:
        buf = f.read()
    out = []
    for num, wt, v in _fields(buf):
        if num == 1 and wt == 2:
            piece, score, typ = "", 0.0, 1
            for n2, w2, v2 in _fields(v):
                if n2 == 1:
                    piece = bytes(v2).decode("utf-8")
                elif n2 == 2 and w2 == 5:
                    (score,) = struct.unpack("<f", v2)
                elif n2 == 3:
                    typ = v2
            out.append((piece, score, typ))
    return out


def vocabulary(folder, vocab_size):
    """(tokens, scores, token types) of vocab_size entries."""
    path = os.path.join(folder, "tokenizer.model")
    pieces = sentencepiece_pieces(path) if os.path.exists(path) else []
    if not pieces:
        pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
        if vocab_size >= 3 + 256:  # LLaMA's layout: the 256 byte tokens at 3..258
            pieces += [("<0x%02X>" % b, 0.0, 6) for b in range(256)]
        else:  # too few ids for every byte: newline's byte token, then ASCII characters as pieces (what
            # node-llama-cpp tokenizes when it loads a model, e.g. "some test text here", must not need the
            # byte fallback: llama.cpp throws on a byte token that is not there)
            chars = ("\u2581" + "abcdefghijklmnopqrstuvwxyz" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "0123456789" +
                     ".,!?'\"-:;()[]{}<>/\\|@#$%^&*_+=`~")
            pieces += [("<0x0A>", 0.0, 6)] + [(c, -float(i), 1) for i, c in enumerate(chars)]
    pieces = pieces[:vocab_size]
    n = len(pieces)
    pieces += [("\u2581t%d" % i, -float(i), 1) for i in range(n, vocab_size)]  # filler: normal pieces
    return [t for t, _, _ in pieces], [float(s) for _, s, _ in pieces], [int(k) for _, _, k in pieces]


# ---------------------------------------------------------------------------------------------- GGUF

def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, value):
    out = _str(key) + struct.pack("<I", vtype)
    fmt = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32_: "<f", BOOL: "<?", U64: "<Q",
           I64: "<q", F64: "<d"}
    if vtype == STRING:
        return out + _str(value)
    if vtype == ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(_str(s) for s in items)
        return out + np.asarray(items, dtype=np.dtype(fmt[etype])).tobytes()
    return out + struct.pack(fmt[vtype], value)


def write_gguf(folder, out_path, type_name="F32", log=None):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("rope_scaling"):
        raise SystemExit("gguf_writer: rope_scaling is not supported")
    p = read_checkpoint(folder)
    tensors = gguf_tensors(cfg, p)
    qtype = TYPES[type_name]
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    tokens, scores, types = vocabulary(folder, cfg["vocab_size"])

    def special(piece, default):  # the id of a tokenizer.model's <unk>, <s>, </s>, else config.json's
        ids = [i for i, (t, k) in enumerate(zip(tokens, types)) if t == piece and k in (2, 3)]
        return ids[0] if os.path.exists(os.path.join(folder, "tokenizer.model")) and ids else int(default)
    kvs = [
        _kv("general.architecture", STRING, "llama"),
        _kv("general.name", STRING, os.path.basename(os.path.abspath(folder))),
        _kv("general.file_type", U32, FILE_TYPE[type_name]),
        _kv("general.quantization_version", U32, 2),
        _kv("general.alignment", U32, ALIGNMENT),
        _kv("llama.vocab_size", U32, cfg["vocab_size"]),
        _kv("llama.context_length", U32, cfg["max_position_embeddings"]),
        _kv("llama.embedding_length", U32, h),
        _kv("llama.block_count", U32, cfg["num_hidden_layers"]),
        _kv("llama.feed_forward_length", U32, cfg["intermediate_size"]),
        _kv("llama.attention.head_count", U32, nh),
        _kv("llama.attention.head_count_kv", U32, cfg.get("num_key_value_heads", nh)),
        _kv("llama.rope.freq_base", F32_, float(cfg.get("rope_theta", 10000.0))),
        _kv("llama.attention.layer_norm_rms_epsilon", F32_, float(cfg["rms_norm_eps"])),
        _kv("llama.rope.dimension_count", U32, h // nh),
        _kv("tokenizer.ggml.model", STRING, "llama"),
        _kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        _kv("tokenizer.ggml.scores", ARRAY, (F32_, scores)),
        _kv("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        _kv("tokenizer.ggml.unknown_token_id", U32, special("<unk>", 0)),
        _kv("tokenizer.ggml.bos_token_id", U32, special("<s>", cfg.get("bos_token_id") or 1)),
        _kv("tokenizer.ggml.eos_token_id", U32, special("</s>", cfg.get("eos_token_id") or 2)),
        _kv("tokenizer.ggml.add_bos_token", BOOL, False),
        _kv("tokenizer.ggml.add_eos_token", BOOL, False),
    ]
    infos, offset, plan = b"", 0, []
    for name, w in tensors:
        t = qtype if w.ndim == 2 else GGML_F32
        if t != GGML_F32 and w.shape[-1] % QK:
            t = GGML_F32  # rows that are not whole blocks stay float
        infos += _str(name) + struct.pack("<I", w.ndim) + struct.pack("<%dQ" % w.ndim, *reversed(w.shape))
        infos += struct.pack("<IQ", t, offset)
        plan.append((name, w, t, offset))
        offset += nbytes(w.shape, t)
        offset += -offset % ALIGNMENT
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % ALIGNMENT)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for name, w, t, off in plan:
            assert f.tell() == len(head) + off, name
            raw = tensor_bytes(np.asarray(w, dtype=np.float32), t)
            f.write(raw)
            f.write(b"\0" * (-len(raw) % ALIGNMENT))
            if log:
                log("  %s %s %s" % (name, list(w.shape), {0: "F32", 2: "Q4_0", 8: "Q8_0"}[t]))
    os.replace(tmp, out_path)
    return out_path


# ---------------------------------------------------------------------------------------------- self-test

def self_test():
    """The quantizers against blocks computed by hand from ggml's reference code. Prints 'N passed, 0 failed'."""
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        passed, failed = passed + bool(cond), failed + (not cond)
        if not cond:
            print("FAILED:", what)

    def half(v):
        return struct.pack("<e", v)

    # Q8_0: x = j - 16 (j = 0..31): amax 16, d = 16/127, id = 127/16 = 7.9375 exactly; x*id = 7.9375*(j-16).
    x = np.arange(32, dtype=np.float32) - 16
    expect_q = [int(np.sign(v) * np.floor(abs(v) + 0.5)) for v in 7.9375 * (np.arange(32) - 16)]
    check(expect_q[0] == -127 and expect_q[16] == 0 and expect_q[17] == 8 and expect_q[18] == 16,
          "hand values %s" % expect_q[:20])
    blk = quantize_q8_0(x)
    check(len(blk) == 34 and blk[:2] == half(np.float32(16) / np.float32(127)), "q8_0 scale %r" % blk[:2])
    check(list(np.frombuffer(blk[2:], np.int8)) == expect_q, "q8_0 quants %s" % list(np.frombuffer(blk[2:], np.int8)))
    # roundf's half away from zero (not numpy's half to even): amax 127 -> id 1: 0.5 -> 1, -2.5 -> -3, 1.5 -> 2
    x = np.zeros(32, np.float32)
    x[:5] = [127, 0.5, -2.5, 1.5, -0.49999997]
    q = list(np.frombuffer(quantize_q8_0(x)[2:], np.int8))
    check(q[:5] == [127, 1, -3, 2, 0], "q8_0 roundf %s" % q[:5])
    check(quantize_q8_0(np.zeros(32, np.float32)) == b"\0" * 34, "q8_0 zero block")
    # Q4_0: max by magnitude is -4 (at 31): d = 0.5, id = 2; x0 = 2x + 8.5 truncated, capped at 15.
    x = np.array([0, 1, -1, 0.25, 0.3, 3.9, -3.9, 2] + [0.1] * 23 + [-4], np.float32)
    q = [min(15, int(2 * v + 8.5)) for v in x.tolist()]
    check(q[:8] == [8, 10, 6, 9, 9, 15, 0, 12] and q[31] == 0, "hand values %s" % q[:8])
    blk = quantize_q4_0(x)
    check(len(blk) == 18 and blk[:2] == half(0.5), "q4_0 scale %r" % blk[:2])
    check(list(blk[2:]) == [q[j] | (q[j + 16] << 4) for j in range(16)], "q4_0 nibbles %s" % list(blk[2:]))
    # a positive maximum gives a negative scale; the first of equal magnitudes wins (+8 before -8)
    x = np.zeros(32, np.float32)
    x[3], x[9], x[20] = 8, -8, 2
    blk = quantize_q4_0(x)
    check(blk[:2] == half(-1.0), "q4_0 negative scale %r" % blk[:2])
    q = [min(15, int(-v + 8.5)) for v in x.tolist()]
    check(list(blk[2:]) == [q[j] | (q[j + 16] << 4) for j in range(16)] and q[3] == 0 and q[9] == 15,
          "q4_0 first max %s" % list(blk[2:]))
    # rows of several blocks; dequantized error within half a step
    g = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    for t, step in ((GGML_Q8_0, 127), (GGML_Q4_0, 8)):
        back = dequantize(tensor_bytes(g, t), t, g.size).reshape(g.shape)
        bound = np.repeat(np.abs(g).reshape(-1, 32).max(1) / step, 32).reshape(g.shape)
        check(np.all(np.abs(back - g) <= bound * (0.51 if t == GGML_Q8_0 else 1.01)), "dequantize %d" % t)
    # the q/k permutation: head of 4 dims [a0 a1 b0 b1] (rotate_half pairs (a0,b0), (a1,b1)) -> [a0 b0 a1 b1]
    w = np.arange(8, dtype=np.float32).reshape(8, 1)
    check(permute(w, 2).ravel().tolist() == [0, 2, 1, 3, 4, 6, 5, 7], "permute %s" % permute(w, 2).ravel())
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--type", default="F32", choices=sorted(TYPES))
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.folder or not a.out:
        ap.error("FOLDER and OUT are required")
    write_gguf(a.folder, a.out, a.type, log=(lambda m: print(m, file=sys.stderr)) if a.verbose else None)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
