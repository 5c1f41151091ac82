#!/usr/bin/python3
"""Fixtures of tests/import/transformers/check_transformers.cpp (issue 68):
torch.nn's transformer layers scripted and traced, seeded weights, with their
inputs and eager outputs.

    make_transformers.py --out DIR

writes for each case NAME:
    NAME.pt            the TorchScript file (torch.jit.script or torch.jit.trace, eval mode)
    NAME.input.pt      forward's arguments, a tuple (masks, None, bools as forward takes them)
    NAME.output.pt     eager PyTorch's output in eval mode under torch.no_grad (the fast path
                       where 1.13 takes it); for encoder_padding_script with grad enabled (the
                       slow path): eval mode's nested-tensor path writes zeros at padded positions,
                       the slow path (and fxcpp) computes them; the other positions agree
    NAME.train.pt      (dropout 0 cases) eager's output in train mode
    NAME.expect.txt    what the check asserts: "error TEXT" for a case whose import must fail
"""
import argparse
import os
import warnings

import torch
from torch import nn

warnings.filterwarnings("ignore")


class KeyPaddingOnly(nn.Module):
    """A layer called with a key padding mask only (the error case gives it int32)."""

    def __init__(self):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        return self.block(x, src_key_padding_mask=padding)


def causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def cases():
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    enc = lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, activation="gelu", batch_first=True), 2)
    x = randn(2, 10, 64)
    padding = torch.zeros(2, 10, dtype=torch.bool)
    padding[1, 7:] = True
    yield "encoder_script", enc, "script", (x,), False
    yield "encoder_trace", enc, "trace", (x,), False
    yield "encoder_trace_fast", enc, "trace_no_grad", (x,), False
    yield "encoder_padding_script", enc, "script", (x, None, padding), False
    yield ("layer_norm_first_script",
           lambda: nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="relu", norm_first=True,
                                              batch_first=False),
           "script", (randn(10, 2, 64), causal(10), padding), True)
    q, kv = randn(2, 6, 64), randn(2, 10, 64)
    mask = torch.rand(6, 10, generator=g) > 0.8
    mask[:, 0] = False
    yield ("mha_masks_script", lambda: nn.MultiheadAttention(64, 4, dropout=0.0, batch_first=True), "script",
           (q, kv, kv, padding, True, mask, True), True)
    yield ("mha_seq_first_script", lambda: nn.MultiheadAttention(64, 4, dropout=0.0), "script",
           (randn(6, 2, 64), randn(10, 2, 64), randn(10, 2, 64), None, False), True)
    yield ("mha_unbatched_script", lambda: nn.MultiheadAttention(64, 4, dropout=0.0, batch_first=True), "script",
           (randn(6, 64), randn(6, 64), randn(6, 64), None, True, causal(6).unsqueeze(0).expand(4, 6, 6).contiguous(),
            False), True)
    yield ("decoder_layer_script",
           lambda: nn.TransformerDecoderLayer(64, 4, 128, dropout=0.0, batch_first=True), "script",
           (randn(2, 7, 64), kv, causal(7)), True)
    yield ("decoder_layer_trace_fast",
           lambda: nn.TransformerDecoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True),
           "trace_no_grad",
           (randn(2, 7, 64), kv), False)
    yield ("decoder_script",
           lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 4, 128, batch_first=True, norm_first=True), 2,
                                         norm=nn.LayerNorm(64)),
           "script", (randn(2, 7, 64), kv, causal(7)), False)
    yield ("error_int_padding_script", KeyPaddingOnly, "script",
           (randn(2, 5, 32), torch.zeros(2, 5, dtype=torch.int32)), False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    for name, make, mode, inputs, train_check in cases():
        torch.manual_seed(0)
        m = make().eval()
        path = os.path.join(args.out, name)
        if mode == "script":
            ts = torch.jit.script(m)
        elif mode == "trace":
            ts = torch.jit.trace(m, inputs, check_trace=False)  # grad enabled: the slow path is recorded
        else:
            with torch.no_grad():  # the fused fast-path operators are recorded
                ts = torch.jit.trace(m, inputs, check_trace=False)
        ts.save(path + ".pt")
        torch.save(tuple(inputs), path + ".input.pt")
        expect = "pass"
        try:
            with torch.set_grad_enabled(name == "encoder_padding_script"):
                out = m(*inputs)
            if name == "encoder_padding_script":
                with torch.no_grad():
                    fast = m(*inputs)
                keep = ~inputs[2].unsqueeze(-1)
                assert torch.allclose(out * keep, fast * keep, atol=1e-5), "slow and fast path differ off the padding"
                out = out.detach()
            torch.save(out, path + ".output.pt")
        except Exception as e:  # eager rejects the inputs: the import must fail too
            expect = "error " + str(e).splitlines()[0]
        if train_check:
            m.train()
            torch.save(m(*inputs), path + ".train.pt")
        with open(path + ".expect.txt", "w") as f:
            f.write(expect + "\n")
        print(name, mode, expect)


if __name__ == "__main__":
    main()
