"""fxcpp.aot_module from Python (issues 34 and 37): a model compiled for training by fxcpp — forward and backward
ATen graphs, one autograd node of libtorch's engine — trains like eager PyTorch: the same losses, gradients,
parameters and batch-norm statistics, with the optimizer built on the compiled module's parameters (fxcpp's
tensors, sharing the model's storage)."""
import copy

import pytest
import torch

import fxcpp
from conftest import classifier


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn(self.conv(x))), 1))


def steps(model, opt, seed, n=3):
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n):
        x = torch.randn(4, 3, 8, 8, generator=g)
        y = torch.randint(0, 5, (4,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("partition", ["default", "min-cut", "functorch-min-cut"])
def test_trains_like_eager(partition):
    torch.manual_seed(0)
    eager = Net().train()
    model = copy.deepcopy(eager)
    compiled = fxcpp.aot_module(model, partition=partition)
    assert isinstance(compiled, torch.nn.Module) and compiled.training
    want = steps(eager, torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9), 1)
    got = steps(compiled, torch.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9), 1)
    assert got == pytest.approx(want, rel=1e-6)
    # The compiled module's parameters are fxcpp's tensors on the model's storage: the model trained too.
    for (name, a), (_, b) in zip(eager.named_parameters(), model.named_parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), name
    for (name, a), (_, b) in zip(eager.named_buffers(), model.named_buffers()):
        assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-7), name
    assert int(model.bn.num_batches_tracked) == 3
    assert all(p.grad is not None for p in compiled.parameters())
    code = compiled.backward_graph().code
    assert "torch.ops.aten.convolution_backward" in code


def test_gradients_of_resnet18_equal_eager():
    model, _ = classifier("resnet18")
    eager = copy.deepcopy(model).train()
    compiled = fxcpp.aot_module(copy.deepcopy(model).train(), partition="min-cut")
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    y = torch.tensor([1, 7])
    le = torch.nn.functional.cross_entropy(eager(x), y)
    lc = torch.nn.functional.cross_entropy(compiled(x), y)
    le.backward()
    lc.backward()
    assert float(lc) == pytest.approx(float(le), rel=1e-5)
    grads = dict(compiled.named_parameters())
    for name, p in eager.named_parameters():
        g = grads[name].grad
        assert g is not None, name
        assert float((g - p.grad).abs().max()) <= 1e-4 * (1 + float(p.grad.abs().max())), name


def test_eval_mode_and_no_grad():
    torch.manual_seed(0)
    eager = Net().eval()
    compiled = fxcpp.aot_module(copy.deepcopy(eager))
    assert not compiled.training
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert torch.allclose(compiled(x), eager(x), rtol=1e-5, atol=1e-6)
    compiled.train()
    assert compiled.training
    compiled(x).sum().backward()


def test_bad_partition_is_an_fx_error():
    with pytest.raises(fxcpp.FxError, match="aot_module: partition must be 'default', 'min-cut' or "
                                            "'functorch-min-cut', not 'fast'"):
        fxcpp.aot_module(Net(), partition="fast")


def test_sgd_in_backward_steps_as_torch_optim_sgd():
    """AotModule.sgd_in_backward: the parameters, batch-norm statistics and momentum buffers of torch.optim.SGD's
    loop, with no .grad kept; every parameter updated once per backward."""
    torch.manual_seed(0)
    eager = Net().train()
    model = copy.deepcopy(eager)
    compiled = fxcpp.aot_module(model, partition="min-cut")
    opt_eager = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    opt = compiled.sgd_in_backward(lr=0.1, momentum=0.9, weight_decay=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g)
        opt_eager.zero_grad()
        torch.nn.functional.cross_entropy(eager(x), y).backward()
        opt_eager.step()
        torch.nn.functional.cross_entropy(compiled(x), y).backward()
    for (name, a), (_, b) in zip(eager.named_parameters(), compiled.named_parameters()):
        assert b.grad is None, name
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name
        assert torch.allclose(opt_eager.state[a]["momentum_buffer"], opt.momentum_buffer(b), rtol=1e-4,
                              atol=1e-6), name
    for (name, a), (_, b) in zip(eager.named_buffers(), model.named_buffers()):
        assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-7), name
    stats = compiled.optimizer_in_backward_stats()
    n = len(list(compiled.parameters()))
    assert stats["steps"] == 3
    assert stats["updates_at_gradient"] + stats["updates_after_reads"] + stats["updates_at_end"] == 3 * n
    x = torch.randn(4, 3, 8, 8)
    with pytest.raises(RuntimeError, match=r"AotModule: an optimizer steps in this module's backward "
                                           r"\(set_optimizer_in_backward\), which runs in a plain backward\(\) only"):
        torch.autograd.grad(compiled(x).sum(), list(compiled.parameters()))
    compiled.remove_optimizer_in_backward()
    compiled(x).sum().backward()
    assert all(p.grad is not None for p in compiled.parameters())
