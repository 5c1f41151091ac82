"""fxcpp.optimize / quantize / load / save and the package itself."""
import os

import pytest
import torch
import torch.fx

import fxcpp
from conftest import classifier


def test_version():
    assert fxcpp.__version__ == fxcpp._C.__version__
    assert issubclass(fxcpp.FxError, RuntimeError)


def test_optimize_is_a_module_under_no_grad(rel):
    m, x = classifier("mobilenet_v2")
    fast = fxcpp.optimize(m, x, threads=1)
    assert fast.report["onednn_convs"] > 0
    assert "onednn" in fast.code
    with torch.no_grad():
        y = fast(x)
        assert isinstance(y, torch.Tensor) and rel(y, m(x)) < 1e-4
    seq = torch.nn.Sequential(fast, torch.nn.Softmax(dim=1))  # composes with Python modules
    with torch.no_grad():
        assert rel(seq(x), torch.softmax(m(x), 1)) < 1e-4


def test_optimize_bf16(rel):
    m, x = classifier("resnet18")
    fast = fxcpp.optimize(m, (x,), dtype=torch.bfloat16)
    with torch.no_grad():
        assert rel(fast(x), m(x)) < 5e-2
    with pytest.raises(ValueError):
        fxcpp.optimize(m, (x,), dtype=torch.float16)


def test_optimize_linear_kernel(rel):
    torch.manual_seed(0)
    # fc1 does 2 * 16 * 64 * 256 = 2^19 operations and is timed below AVX-512;
    # fc2 (2 * 16 * 256 * 10) is under the 2^18 that is worth timing: oneDNN's.
    m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).eval()
    x = torch.randn(16, 64)
    aten = fxcpp.optimize(m, x, linear_kernel="aten")
    assert (aten.report["aten_linears"], aten.report["onednn_linears"]) == (2, 0)
    assert "onednn_linear" not in aten.code and aten.report["linear_choices"] == []
    onednn = fxcpp.optimize(m, x, linear_kernel="onednn")
    assert (onednn.report["aten_linears"], onednn.report["onednn_linears"]) == (0, 2)
    threads = torch.get_num_threads()
    avx512 = fxcpp._C._cpu_summary().startswith("oneDNN ISA avx512")
    auto = fxcpp.optimize(m, x, threads=1)  # timed per shape below AVX-512, oneDNN's on it
    choices = auto.report["linear_choices"]
    assert auto.report["aten_linears"] == sum(c["kernel"] == "aten" for c in choices)
    assert len(choices) == (0 if avx512 else 1), choices
    assert all(c["onednn_ms"] > 0 and c["aten_ms"] > 0 and c["input_sizes"] == [16, 64] for c in choices)
    assert auto.report["linear_note"] == ""
    # On two threads beside Debian's OpenBLAS (a pool of its own) nothing is timed: oneDNN's, and why.
    two = fxcpp.optimize(m, x, threads=2)
    torch.set_num_threads(threads)
    assert (two.report["linear_choices"], two.report["onednn_linears"]) == ([], 2)
    assert two.report["linear_note"] == ("" if avx512 else "linears on oneDNN untimed: 2 threads, and the BLAS's own "
                                         "would compete with OpenMP's")
    with torch.no_grad():
        for fast in (aten, onednn, auto, two):
            assert rel(fast(x), m(x)) < 1e-5
    with pytest.raises(fxcpp.FxError, match="linear kernel 'blas': expected auto, onednn or aten"):
        fxcpp.optimize(m, x, linear_kernel="blas")


def test_optimize_shufflenet_through_torch_jit_trace(rel):
    # torch.fx cannot trace shufflenet's channel_shuffle (`batch, channels, h, w = x.size()`: TraceError, Proxy
    # object cannot be iterated): optimize goes through torch.jit.trace and the importer, and says so once.
    m, x = classifier("shufflenet_v2_x1_0")
    with pytest.warns(UserWarning) as caught:
        fast = fxcpp.optimize(m, (x,))
    said = [str(w.message) for w in caught if "symbolic_trace failed" in str(w.message)]
    assert len(said) == 1 and "Proxy object cannot be iterated" in said[0], [str(w.message) for w in caught]
    assert "used torch.jit.trace and fxcpp's TorchScript importer instead" in said[0]
    assert fast.report["onednn_convs"] > 0
    with torch.no_grad():
        assert rel(fast(x), m(x)) < 1e-4


def test_optimize_refuses_training_mode():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    with pytest.raises(fxcpp.FxError):
        fxcpp.optimize(m, torch.randn(1, 3, 8, 8))


def test_quantize(rel):
    m, x = classifier("resnet18")
    q = fxcpp.quantize(m, [torch.randn(4, 3, 64, 64) for _ in range(4)], (x,))
    assert "quantized" in q.report
    with torch.no_grad():
        assert rel(q(x), m(x)) < 0.2


def test_quantize_seven_bit_weights(rel):
    m, x = classifier("resnet18")
    q = fxcpp.quantize(m, [torch.randn(4, 3, 64, 64) for _ in range(4)], (x,), weight_bits=7)
    with torch.no_grad():
        assert rel(q(x), m(x)) < 0.2
    # Without VNNI every kernel of 7-bit weights runs on oneDNN's int8 kernels, and the report says so.
    vnni = fxcpp._C._cpu_summary().endswith("int8 dot products (VNNI/AMX) yes")
    assert "compute in float32" not in q.report
    assert ("all 21 int8 kernels run on oneDNN's int8 kernels" in q.report) == (not vnni), q.report
    with pytest.raises(fxcpp.FxError, match="^fxcpp.quantize: weight_bits must be 7 or 8, got 6$"):
        fxcpp.quantize(m, [x], weight_bits=6)


def test_save_load(tmp_path):
    m, x = classifier("resnet18")
    gm = torch.fx.symbolic_trace(m)
    path = os.path.join(tmp_path, "m.fx")
    fxcpp.save(gm, path, (x,))
    back = fxcpp.load(path)
    assert isinstance(back, torch.fx.GraphModule) and back.code == gm.code
    fast = fxcpp.optimize(m, (x,))
    opt_path = os.path.join(tmp_path, "opt.fx")
    fxcpp.save(fast, opt_path)
    loaded = fxcpp.load(opt_path)  # optimised: the bridge cannot give it back as torch.fx; fxcpp runs it
    assert isinstance(loaded, fxcpp.Module)
    with torch.no_grad():
        assert torch.allclose(loaded(x), fast(x), atol=1e-5)


def test_save_kernel_objects(tmp_path):
    """fxcpp.save(..., kernel_objects=True): the generated kernels' objects travel in the file, and a process
    without a compiler (and an empty kernel cache) runs them: no warning, the values of the optimised module."""
    if not fxcpp._C._fuse_kernels_available():
        pytest.skip("no C++ compiler")

    class Tail(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(64)

        def forward(self, x, r):
            return torch.nn.functional.gelu(self.ln(x + r), approximate="tanh") * 0.5

    torch.manual_seed(0)
    x, r = torch.randn(3, 8, 64), torch.randn(3, 8, 64)
    fast = fxcpp.optimize(Tail().eval(), (x, r))
    assert "fused_kernel" in fast.code
    path = os.path.join(tmp_path, "tail.fx")
    assert fxcpp.save(fast, path, kernel_objects=True) == 1
    torch.save((x, r), os.path.join(tmp_path, "in.pt"))
    with torch.no_grad():
        torch.save(fast(x, r), os.path.join(tmp_path, "want.pt"))
    with pytest.raises(fxcpp.FxError, match="^kernel_objects: a torch.fx.GraphModule has no generated kernels"):
        fxcpp.save(torch.fx.symbolic_trace(Tail()), os.path.join(tmp_path, "plain.fx"), kernel_objects=True)
    cache = os.path.join(tmp_path, "cache")
    os.mkdir(cache, 0o700)
    code = ("import sys, torch, fxcpp; d = sys.argv[1]; m = fxcpp.load(d + '/tail.fx'); "
            "x, r = torch.load(d + '/in.pt'); y = m(x, r); "
            "print(torch.equal(y, torch.load(d + '/want.pt')), fxcpp._C._fuse_kernels_available())")
    env = dict(os.environ, FXCPP_CXX="/nonexistent/g++", FXCPP_KERNEL_CACHE=cache)
    import subprocess, sys
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "False"]
    assert "Warning" not in p.stderr, p.stderr
    assert os.listdir(cache) == []
