"""Shared fixtures of the `import fxcpp` tests (issue 37): torchvision classifiers with honest random weights
(python/honest_weights.py: batch-norm statistics from a train-mode pass, so activations are of order 1), small
inputs, one thread."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
torch.set_num_threads(1)

# One of each family torch.fx 1.13 traces (the full sweep: FXCPP_ALL_MODELS=1, ctest python.models_all).
MODELS = ["resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "regnet_x_400mf", "squeezenet1_0",
          "mobilenet_v3_small", "convnext_tiny"]


def size_of(name):
    return 112 if name.startswith("swin") else 96 if name.startswith("inception") else 64


_CACHE = {}


def classifier(name):
    """(eval-mode model, input) of a torchvision classifier with seeded, calibrated random weights."""
    if name not in _CACHE:
        import torchvision
        import honest_weights
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)()
        size = size_of(name)
        honest_weights.calibrate(m, lambda mm: mm(torch.randn(32 if name.startswith("inception") else 16, 3,
                                                              size, size)))
        m.eval()
        _CACHE[name] = (m, torch.randn(1, 3, size, size))
    return _CACHE[name]


def all_classifiers():
    """Every torchvision classification builder torch.fx 1.13 can symbolic_trace."""
    import inspect
    import torchvision.models as models
    names = sorted(n for n, f in vars(models).items()
                   if inspect.isfunction(f) and n.islower() and "weights" in inspect.signature(f).parameters)
    out = []
    for n in names:
        try:
            torch.fx.symbolic_trace(getattr(models, n)().eval())
        except Exception:  # noqa: BLE001 - torch.fx cannot trace it
            continue
        out.append(n)
    return out


def relative(actual, expected):
    """max |actual - expected| / max |expected| over tensors, tuples and lists."""
    if isinstance(expected, (tuple, list)):
        return max(relative(a, e) for a, e in zip(actual, expected))
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def close_to_eager(model, inputs, actual, tolerance):
    """actual within `tolerance` of eager relative to its largest value; or, for an ill-conditioned model
    (deep resnets, inception_v3: eager's float32 is itself ~1e-4 off float64), at most twice as far from the
    float64 result as eager's float32 is (the criterion of python/test_fxcpp_bridge.py)."""
    import copy
    with torch.no_grad():
        expected = model(*inputs)
        d = relative(actual, expected)
        if d <= tolerance:
            return True
        exact = copy.deepcopy(model).double()(*[x.double() for x in inputs])
    d_exact, d_eager = relative(actual.double(), exact), relative(expected.double(), exact)
    assert d_exact <= 2 * d_eager, "%g relative to eager; %g to float64, eager's float32 %g" % (d, d_exact, d_eager)
    return True


def pytest_generate_tests(metafunc):
    if "model_name" in metafunc.fixturenames:
        names = all_classifiers() if os.environ.get("FXCPP_ALL_MODELS") else MODELS
        metafunc.parametrize("model_name", names)


@pytest.fixture
def rel():
    return relative
