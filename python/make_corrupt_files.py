#!/usr/bin/python3
"""Damaged and inconsistent files for fxcpp's reliability tests (tests/reliability, tests/cli).

Writes into the directory given as argument:
  good.input.pt          a tuple (ones(2, 3), arange(4.)): loads fine
  short_storage.pt       tuple whose tensor 0 is 10x10 float on a 4-float storage
  empty_storage.pt       a lone tensor of shape (3,) on an empty storage
  offset_past_end.pt     tuple (tensor of shape (2,) at storage offset 3 of 4 floats,)
  negative_size.pt       tuple (tensor of shape (-1, 4),)
  huge_size.pt           tuple (tensor of shape (2**62, 4), strides (4, 1) on 4 floats,)
  huge_numel.pt          tuple (tensor of shape (2**30, 4), strides (4, 1) on 4 floats,)
  rank70.pt              tuple (tensor with 70 dimensions of size 1,)
  nested.pt              tuple (ones(1), [ones(1), short tensor])
  truncated.input.pt     the first half of good.input.pt
  record_past_end.pt     good.input.pt with its first storage record claiming 2**31-1 bytes
  linear.pt              TorchScript nn.Linear(4, 3): loads fine
  linear.input.pt        its input, ones(2, 4)
  short_weight.pt        linear.pt with the weight's storage record cut to 16 bytes
  no_pickle.zip          a zip archive without data.pkl
  input.fifo             a FIFO (reading it would block forever)
  bad_code.pt            linear.pt whose code calls torch.linear with an unknown keyword
  syntax_error.pt        linear.pt whose code misses a closing parenthesis
  bad_debug_pkl.pt       linear.pt whose (stored) debug_pkl record is garbage
  bad_debug_pkl_deflated.pt  linear.pt whose deflated debug_pkl (read lazily by libtorch) is a
                         well-formed pickle of the int 1 instead of source ranges
  pickle_underflow.pt    good.input.pt whose data.pkl is PROTO 2, REDUCE, STOP (an empty stack)
  pickle_bad_get.pt      ... PROTO 2, BINGET 5, STOP (a memo slot never PUT)
  pickle_opcode.pt       ... PROTO 2, INT "1", STOP (an opcode torch never writes)
  bad_version.pt         good.input.pt whose version record says 99
  version_garbage.pt     ... whose version record is "3x"
Tensors whose storage does not match their sizes cannot be made by torch's
own API; they are pickled through _rebuild_tensor_v2 directly, as a hostile
file would. Run with Debian's python3 (python3-torch). Deterministic; nothing
is downloaded.
"""
import collections
import os
import struct
import sys
import zipfile

import torch


class RawTensor:
    """Pickles as torch.save pickles a tensor, with any sizes / strides / offset."""

    def __init__(self, numel, offset, size, stride):
        self.storage = torch.arange(float(numel)).storage() if numel else torch.empty(0).storage()
        self.offset, self.size, self.stride = offset, tuple(size), tuple(stride)

    def __reduce_ex__(self, proto):
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, self.offset, self.size, self.stride, False, collections.OrderedDict()))


def rewrite_zip(src, dst, change, deflate=()):
    """Copies zip `src` to `dst` (stored records, deflated when the name ends with
    one of `deflate`), `change(name, bytes)` -> bytes or None to drop."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                method = zipfile.ZIP_DEFLATED if info.filename.endswith(tuple(deflate)) else zipfile.ZIP_STORED
                zout.writestr(info.filename, data, compress_type=method)


def main(out):
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    torch.manual_seed(0)
    torch.save((torch.ones(2, 3), torch.arange(4.0)), p("good.input.pt"))
    torch.save((RawTensor(4, 0, (10, 10), (10, 1)),), p("short_storage.pt"))
    torch.save(RawTensor(0, 0, (3,), (1,)), p("empty_storage.pt"))
    torch.save((RawTensor(4, 3, (2,), (1,)),), p("offset_past_end.pt"))
    torch.save((RawTensor(4, 0, (-1, 4), (4, 1)),), p("negative_size.pt"))
    torch.save((RawTensor(4, 0, (2 ** 62, 4), (4, 1)),), p("huge_size.pt"))
    torch.save((RawTensor(4, 0, (2 ** 30, 4), (4, 1)),), p("huge_numel.pt"))
    torch.save((RawTensor(1, 0, (1,) * 70, (1,) * 70),), p("rank70.pt"))
    torch.save((torch.ones(1), [torch.ones(1), RawTensor(2, 0, (3,), (1,))]), p("nested.pt"))
    with open(p("good.input.pt"), "rb") as f:
        good = f.read()
    with open(p("truncated.input.pt"), "wb") as f:
        f.write(good[: len(good) // 2])
    # A plain (non-zip64) copy, then its first storage record's sizes set to 2**31-1.
    rewrite_zip(p("good.input.pt"), p("record_past_end.pt"), lambda n, d: d)
    with open(p("record_past_end.pt"), "rb") as f:
        data = bytearray(f.read())
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at)
        nlen = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46: at + 46 + nlen].decode().endswith("data/0"):
            struct.pack_into("<II", data, at + 20, 2 ** 31 - 1, 2 ** 31 - 1)
            break
        at += 4
    with open(p("record_past_end.pt"), "wb") as f:
        f.write(bytes(data))

    linear = torch.jit.script(torch.nn.Linear(4, 3))
    linear.save(p("linear.pt"))
    torch.save((torch.ones(2, 4),), p("linear.input.pt"))
    # Which storage record holds the weight: the one of 3 * 4 floats.
    rewrite_zip(p("linear.pt"), p("short_weight.pt"),
                lambda n, d: d[:16] if "/data/" in n and len(d) == 48 else d)
    rewrite_zip(p("good.input.pt"), p("no_pickle.zip"), lambda n, d: None if n.endswith("data.pkl") else d)
    code = lambda old, new: lambda n, d: d.replace(old, new) if n.endswith("linear.py") else d
    rewrite_zip(p("linear.pt"), p("bad_code.pt"), code(b"linear(input, weight, bias)", b"linear(input, weight, bias, frob=1)"))
    rewrite_zip(p("linear.pt"), p("syntax_error.pt"), code(b"linear(input, weight, bias)", b"linear(input, weight, bias"))
    rewrite_zip(p("linear.pt"), p("bad_debug_pkl.pt"), lambda n, d: b"\x80\x02garbage" if n.endswith("debug_pkl") else d)
    rewrite_zip(p("linear.pt"), p("bad_debug_pkl_deflated.pt"),
                lambda n, d: b"\x80\x02K\x01." if n.endswith("debug_pkl") else d, deflate=("debug_pkl",))
    for name, pkl in [("pickle_underflow.pt", b"\x80\x02R."), ("pickle_bad_get.pt", b"\x80\x02h\x05."),
                      ("pickle_opcode.pt", b"\x80\x02I1\n.")]:
        rewrite_zip(p("good.input.pt"), p(name), lambda n, d, pkl=pkl: pkl if n.endswith("data.pkl") else d)
    for name, version in [("bad_version.pt", b"99\n"), ("version_garbage.pt", b"3x")]:
        rewrite_zip(p("good.input.pt"), p(name), lambda n, d, v=version: v if n.endswith("/version") else d)
    if not os.path.exists(p("input.fifo")):
        os.mkfifo(p("input.fifo"))


if __name__ == "__main__":
    main(sys.argv[1])
