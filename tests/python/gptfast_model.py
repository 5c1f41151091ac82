"""A gpt-fast style LLaMA (pytorch-labs/gpt-fast's model.py, trimmed) as torch.fx 1.13 can trace it: static
KVCache buffers updated in place (index_copy_: a Proxy takes no item assignment), sizes read with size(i) (a Proxy
cannot be unpacked), split results indexed; tests/python/test_decoders.py decodes it with fxcpp.generate."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache(nn.Module):
    def __init__(self, max_batch, max_seq, heads, head_dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(max_batch, heads, max_seq, head_dim))
        self.register_buffer("v_cache", torch.zeros(max_batch, heads, max_seq, head_dim))

    def update(self, input_pos, k_val, v_val):
        k_out = self.k_cache
        v_out = self.v_cache
        k_out.index_copy_(2, input_pos, k_val)  # k_out[:, :, input_pos] = k_val, as torch.fx 1.13 can trace it
        v_out.index_copy_(2, input_pos, v_val)
        return k_out, v_out


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


def apply_rotary_emb(x, freqs_cis):
    xshaped = x.float().reshape(x.size(0), x.size(1), x.size(2), -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack([xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
                          xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1]], -1)
    return x_out2.flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, max_seq):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.kv_cache = KVCache(1, max_seq, kv_heads, self.head_dim)

    def forward(self, x, freqs_cis, mask, input_pos):
        bsz, seqlen = x.size(0), x.size(1)
        kv_size = self.kv_heads * self.head_dim
        qkv = self.wqkv(x).split([self.heads * self.head_dim, kv_size, kv_size], dim=-1)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q.view(bsz, seqlen, self.heads, self.head_dim)
        k = k.view(bsz, seqlen, self.kv_heads, self.head_dim)
        v = v.view(bsz, seqlen, self.kv_heads, self.head_dim)
        q = apply_rotary_emb(q, freqs_cis)
        k = apply_rotary_emb(k, freqs_cis)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        kv = self.kv_cache.update(input_pos, k, v)
        k, v = kv[0], kv[1]
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # F.scaled_dot_product_attention is torch 2's
        att = att.masked_fill(~mask, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(y)


class Block(nn.Module):
    def __init__(self, dim, hidden, heads, kv_heads, max_seq):
        super().__init__()
        self.attention = Attention(dim, heads, kv_heads, max_seq)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)

    def forward(self, x, input_pos, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask, input_pos)
        n = self.ffn_norm(h)  # once, as gpt-fast's TransformerBlock: w1 and w3 read one value
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Transformer(nn.Module):
    def __init__(self, vocab=97, dim=64, hidden=160, layers=2, heads=4, kv_heads=2, max_seq=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, hidden, heads, kv_heads, max_seq) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        hd = dim // heads
        freqs = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        t = torch.arange(max_seq).float()
        f = torch.outer(t, freqs)
        self.register_buffer("freqs_cis", torch.stack([f.cos(), f.sin()], -1))
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def forward(self, idx, input_pos):
        mask = self.causal_mask[None, None, input_pos]
        freqs_cis = self.freqs_cis[input_pos]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, input_pos, freqs_cis, mask)
        return self.output(self.norm(x))
