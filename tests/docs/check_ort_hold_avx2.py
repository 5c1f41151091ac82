#!/usr/bin/python3
"""scripts/ort_hold_avx2.py (bench_ort.py --hold-avx2) on made-up libraries: the one byte of MLAS's AVX-512
gate becomes a jmp, only where the XCR0 check follows it, once; a library without the gate, or with two, is
refused and nothing is written; the copy is idempotent and links the package's siblings."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import ort_hold_avx2 as hold  # noqa: E402

GATE = bytes.fromhex("41f7c2000001007412")  # test $0x10000,%r10d ; je +0x12
XCR0 = bytes.fromhex("4c89c048f7d0a8e0")    # mov %r8,%rax ; not %rax ; test $0xe0,%al
DECOY = bytes.fromhex("41f7c200000100740e") + bytes.fromhex("909090")  # the test, but no XCR0 check after it


def library(*parts):
    return b"\x90" * 100 + b"".join(parts) + b"\xc3" * 50


def package(root, data):
    pkg = os.path.join(root, "node_modules", "onnxruntime-node")
    os.makedirs(os.path.join(pkg, os.path.dirname(hold.LIB)))
    os.makedirs(os.path.join(root, "node_modules", "onnxruntime-common"))
    with open(os.path.join(pkg, hold.LIB), "wb") as f:
        f.write(data)
    with open(os.path.join(pkg, "package.json"), "w") as f:
        f.write('{"version": "1.30.0"}')
    return pkg


def refused(data, count):
    try:
        hold.patch_offset(data)
    except ValueError as e:
        expected = "MLAS's AVX-512 check found %d times in libonnxruntime.so" % count
        assert str(e).startswith(expected), str(e)
        return
    raise AssertionError("no error for a library with %d gates" % count)


def main():
    data = library(DECOY, b"\x00" * 7, GATE + XCR0, b"\x00" * 3)
    je = hold.patch_offset(data)
    assert je == 100 + len(DECOY) + 7 + 7, je
    assert data[je] == 0x74
    refused(library(DECOY), 0)
    refused(library(GATE + XCR0, GATE + XCR0), 2)

    with tempfile.TemporaryDirectory() as tmp:
        src = package(os.path.join(tmp, "src"), data)
        out = os.path.join(tmp, "held")
        pkg = hold.make_held_copy(src, out)
        with open(os.path.join(pkg, hold.LIB), "rb") as f:
            held = f.read()
        changed = [i for i in range(len(data)) if held[i] != data[i]]
        assert changed == [je] and held[je] == 0xEB, changed
        with open(os.path.join(src, hold.LIB), "rb") as f:
            assert f.read() == data, "the original library was changed"
        assert os.path.islink(os.path.join(out, "node_modules", "onnxruntime-common"))
        assert os.path.exists(os.path.join(pkg, "package.json"))
        stamp = os.stat(os.path.join(pkg, hold.LIB)).st_mtime_ns
        assert hold.make_held_copy(src, out) == pkg
        assert os.stat(os.path.join(pkg, hold.LIB)).st_mtime_ns == stamp, "a second call rewrote the copy"

        bad = package(os.path.join(tmp, "bad"), library(DECOY))
        try:
            hold.make_held_copy(bad, os.path.join(tmp, "bad_held"))
            raise AssertionError("a library without the gate was copied")
        except ValueError:
            pass
        assert not os.path.exists(os.path.join(tmp, "bad_held", "node_modules", "onnxruntime-node"))
    print("ort_hold_avx2 ok")


if __name__ == "__main__":
    main()
