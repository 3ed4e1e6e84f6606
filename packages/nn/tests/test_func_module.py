"""fiamma.func.functional_call, stack_module_state, replace_all_batch_norm_modules_."""

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.func import (
    functional_call,
    grad,
    replace_all_batch_norm_modules_,
    stack_module_state,
    vmap,
)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2, bias=False)
        self.b = nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.a(x), self.b(x)


def test_functional_call_swaps_and_restores():
    lin = nn.Linear(3, 2)
    w0, b0 = lin.weight, lin.bias
    w, b = fiamma.ones(2, 3), fiamma.tensor([1.0, -1.0])
    x = fiamma.tensor([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(functional_call(lin, {"weight": w, "bias": b}, (x,)).numpy(),
                               [[7.0, 5.0]])
    np.testing.assert_allclose(functional_call(lin, {"weight": w}, x).detach().numpy(),
                               x.numpy() @ np.ones((3, 2)) + b0.detach().numpy())
    np.testing.assert_allclose(functional_call(lin, ({"weight": w}, {"bias": b}), (),
                                               {"input": x}).numpy(), [[7.0, 5.0]])
    assert lin.weight is w0 and lin.bias is b0
    assert isinstance(lin.weight, nn.Parameter)


def test_functional_call_restores_on_error_and_plain_attributes():
    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.seen = getattr(self, "extra", None)
            raise ValueError("boom")

    m = Boom()
    w0 = m.lin.weight
    with pytest.raises(ValueError, match="boom"):
        functional_call(m, {"lin.weight": fiamma.zeros(2, 2), "extra": fiamma.ones(1)},
                        (fiamma.ones(1, 2),))
    assert m.lin.weight is w0 and not hasattr(m, "extra")
    assert m.seen is not None  # strict=False: an unknown name is an attribute during the call


def test_functional_call_gradients_reach_the_passed_tensors():
    lin = nn.Linear(3, 1)
    w = fiamma.randn(1, 3, dtype=fiamma.float64, requires_grad=True)
    b = fiamma.zeros(1, dtype=fiamma.float64, requires_grad=True)
    x = fiamma.randn(4, 3, dtype=fiamma.float64)
    lin.double()
    functional_call(lin, {"weight": w, "bias": b}, (x,)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().sum(0, keepdims=True))
    assert b.grad.item() == 4.0
    assert lin.weight.grad is None
    g = grad(lambda p: functional_call(lin, p, (x,)).pow(2).sum())({"weight": w, "bias": b})
    pred = x.numpy() @ w.detach().numpy().T
    assert g["weight"].requires_grad  # w requires grad: the gradient stays differentiable
    want = 2 * (pred * x.numpy()).sum(0, keepdims=True)
    np.testing.assert_allclose(g["weight"].detach().numpy(), want)


def test_functional_call_tied_weights_and_strict():
    m = Tied()
    x = fiamma.ones(1, 2)
    a, b = functional_call(m, {"a.weight": fiamma.zeros(2, 2)}, (x,))
    assert a.abs().sum().item() == 0 and b.abs().sum().item() == 0
    a, b = functional_call(m, {"a.weight": fiamma.zeros(2, 2)}, (x,), tie_weights=False)
    assert a.abs().sum().item() == 0 and b.abs().sum().item() > 0
    with pytest.raises(ValueError, match="multiple values for keys \\['a.weight', 'b.weight'\\]"):
        functional_call(m, {"a.weight": fiamma.zeros(2, 2), "b.weight": fiamma.ones(2, 2)}, (x,))
    lin = nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
        functional_call(lin, {"weight": fiamma.zeros(2, 2)}, (x,), strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'zz'"):
        functional_call(lin, {"weight": fiamma.zeros(2, 2), "bias": fiamma.zeros(2),
                              "zz": fiamma.ones(1)}, (x,), strict=True)
    functional_call(m, {"a.weight": fiamma.zeros(2, 2)}, (x,), strict=True)  # tie covers b
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(lin, ({"weight": fiamma.zeros(2, 2)}, {"weight": fiamma.zeros(2, 2)}),
                        (x,))
    with pytest.raises(AttributeError, match="has no submodule 'nope'"):
        functional_call(lin, {"nope.weight": fiamma.zeros(2, 2)}, (x,))


def test_functional_call_buffers_batchnorm():
    bn = nn.BatchNorm1d(2)
    rm, rv = fiamma.zeros(2), fiamma.ones(2)
    x = fiamma.tensor([[1.0, 2.0], [3.0, 6.0]])
    functional_call(bn, {"running_mean": rm, "running_var": rv}, (x,))
    np.testing.assert_allclose(rm.numpy(), [0.2, 0.4], rtol=1e-6)  # the passed buffer updated
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.0)


def test_stack_module_state_and_ensemble():
    fiamma.manual_seed(0)
    models = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
              for _ in range(3)]
    for m in models:
        m.eval()
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (3, 4, 3) and params["0.weight"].is_leaf
    assert params["0.weight"].requires_grad and buffers["1.running_mean"].shape == (3, 4)
    assert not buffers["1.running_mean"].requires_grad
    x = fiamma.randn(5, 3)
    out = vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))(
        params, buffers, x)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    out.sum().backward()
    assert params["2.bias"].grad.shape == (3, 2)
    np.testing.assert_allclose(params["2.bias"].grad.numpy(), 5.0)
    assert models[0][2].bias.grad is None


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        stack_module_state([])
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    b.eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state([a, b])
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([nn.Linear(2, 2), nn.Conv1d(2, 2, 1)])
    c = nn.Linear(2, 2)
    c.weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Expected weight from each model to have the same"):
        stack_module_state([nn.Linear(2, 2), c])
    with pytest.raises(RuntimeError, match="equal size"):
        stack_module_state([nn.Linear(2, 2), nn.Linear(2, 3)])


def test_replace_all_batch_norm_modules_():
    net = nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2))
    assert replace_all_batch_norm_modules_(net) is net
    bn = net[1]
    assert bn.running_mean is None and bn.running_var is None and not bn.track_running_stats
    net.eval()
    x = fiamma.randn(4, 1, 3, 3)
    y = net(x)  # batch statistics in eval too
    np.testing.assert_allclose(y.mean((0, 2, 3)).detach().numpy(), bn.bias.detach().numpy(),
                               atol=1e-5)


def test_maml_meta_gradient_matches_autograd():
    """Second-order MAML through grad + functional_call equals autograd.grad(create_graph)."""
    fiamma.manual_seed(0)
    net = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    params = dict(net.named_parameters())
    xs, ys = fiamma.randn(5, 1, dtype=fiamma.float64), fiamma.randn(5, 1, dtype=fiamma.float64)
    xq, yq = fiamma.randn(5, 1, dtype=fiamma.float64), fiamma.randn(5, 1, dtype=fiamma.float64)

    def loss(p, x, y):
        return F.mse_loss(functional_call(net, p, (x,)), y)

    g = grad(loss)(params, xs, ys)
    fast = {k: params[k] - 0.1 * g[k] for k in params}
    meta = fiamma.autograd.grad(loss(fast, xq, yq), list(params.values()))
    names = list(params)
    g2 = fiamma.autograd.grad(loss(params, xs, ys), list(params.values()), create_graph=True)
    fast2 = {k: params[k] - 0.1 * gk for k, gk in zip(names, g2)}
    want = fiamma.autograd.grad(loss(fast2, xq, yq), list(params.values()))
    for a, b in zip(meta, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_runner_maps_torch_func_and_torch_vmap():
    import subprocess
    import sys

    code = ("import torch, torch.func\n"
            "from torch.func import vmap, grad, functional_call\n"
            "import fiamma.func\n"
            "assert torch.func is fiamma.func and torch.vmap is fiamma.func.vmap\n"
            "x = torch.arange(6.).reshape(2, 3)\n"
            "print(torch.vmap(grad(lambda r: (r ** 2).sum()))(x).tolist())\n")
    out = subprocess.run([sys.executable, "-m", "fiamma.run", "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]"
