#!/usr/bin/python3
"""ONNX Runtime held at AVX2 on an AVX-512 CPU, for `bench_ort.py --hold-avx2` (issue 39).

Issue 39's targets against ONNX Runtime are set on an AVX2-only CPU. fxcpp,
TorchScript and OpenBLAS can be held at AVX2 on an AVX-512 machine by the
environment (bench_markdown.AVX2_HELD: oneDNN's max ISA, ATen's CPU
capability, OpenBLAS's core type), but ONNX Runtime's MLAS chooses its
kernels from `cpuid` once, in its platform constructor, with no setting to
hold it. This makes a copy of the onnxruntime-node package whose
libonnxruntime.so skips that constructor's AVX-512 branch, so MLAS keeps the
AVX2 / FMA3 kernels it chose just before (NCHWc convolutions in 8-channel
blocks, the AVX2 SGEMM): one byte, the `je` after `test $0x10000, %r10d`
(CPUID.(EAX=7):EBX bit 16, AVX512F), made a `jmp`. The byte is found by its
instructions, not its offset, and only where the XCR0 check of the AVX-512
state (`test $0xe0, %al`) follows it, exactly once in the file; any other
build of the library is refused, never patched blindly.

What it gives is a proxy: AVX2 code on an AVX-512 core, whose caches,
clocks and execution units are not an AVX2 CPU's. Its ratios say which rows
are weak in the AVX2 code paths; the issue's targets are measured on an
AVX2-only CPU (docs/bench/bench_ort_avx2.md).

    /usr/bin/python3 scripts/ort_hold_avx2.py SRC_PACKAGE_DIR DST_DIR
"""
import os
import shutil
import sys

LIB = os.path.join("bin", "napi-v6", "linux", "x64", "libonnxruntime.so.1")
# test $0x10000,%r10d ; je rel8 -- then, 2 bytes on: mov %r8,%rax ; not %rax ; test $0xe0,%al
GATE = bytes.fromhex("41f7c200000100") + b"\x74"
XCR0_CHECK = bytes.fromhex("4c89c048f7d0a8e0")
JMP_REL8 = 0xEB


def patch_offset(data):
    """The offset of the `je` byte of MLAS's AVX-512 gate in libonnxruntime.so's bytes; ValueError when the
    library does not have it exactly once (another build of ONNX Runtime)."""
    hits = []
    start = 0
    while True:
        i = data.find(GATE, start)
        if i < 0:
            break
        je = i + len(GATE) - 1
        if data[je + 2:je + 2 + len(XCR0_CHECK)] == XCR0_CHECK:
            hits.append(je)
        start = i + 1
    if len(hits) != 1:
        raise ValueError("MLAS's AVX-512 check found %d times in libonnxruntime.so (expected once: ONNX Runtime "
                         "1.30's x64 build)" % len(hits))
    return hits[0]


def make_held_copy(src_pkg, dst_dir):
    """Copies the onnxruntime-node package SRC_PKG to DST_DIR/node_modules/onnxruntime-node with MLAS held at
    AVX2, its sibling packages (onnxruntime-common) linked beside it (idempotent); returns the package
    directory of the copy."""
    modules = os.path.join(dst_dir, "node_modules")
    dst_pkg = os.path.join(modules, "onnxruntime-node")
    src_modules = os.path.dirname(os.path.abspath(src_pkg))
    os.makedirs(modules, exist_ok=True)
    for name in os.listdir(src_modules):
        link = os.path.join(modules, name)
        if name != "onnxruntime-node" and not os.path.lexists(link):
            os.symlink(os.path.join(src_modules, name), link)
    lib = os.path.join(dst_pkg, LIB)
    with open(os.path.join(src_pkg, LIB), "rb") as f:
        original = f.read()
    je = patch_offset(original)
    if os.path.exists(lib):
        with open(lib, "rb") as f:
            held = f.read()
        if len(held) == len(original) and held[je] == JMP_REL8 and held[:je] == original[:je]:
            return dst_pkg
    if os.path.exists(dst_pkg):
        shutil.rmtree(dst_pkg)
    shutil.copytree(src_pkg, dst_pkg, symlinks=True)
    data = bytearray(original)
    data[je] = JMP_REL8
    tmp = lib + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, lib)
    return dst_pkg


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ort_hold_avx2.py SRC_PACKAGE_DIR DST_DIR")
    try:
        print(make_held_copy(sys.argv[1], sys.argv[2]))
    except (OSError, ValueError) as e:
        sys.exit("ort_hold_avx2.py: %s" % e)


if __name__ == "__main__":
    main()
