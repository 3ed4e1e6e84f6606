"""Activations: values against NumPy float64 formulas, gradients by gradcheck, and (parity)
values and gradients against torch.nn for every module."""

import math

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

X = np.array([-4.0, -1.5, -0.6, -0.2, 0.0, 0.3, 0.7, 2.5, 25.0])
ERF = np.vectorize(math.erf)

REFS = {
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (lambda t: F.elu(t, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "selu": (F.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 *
                                                               np.expm1(x))),
    "celu": (lambda t: F.celu(t, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2))),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2)))),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
    "softplus": (lambda t: F.softplus(t, 2.0, 10.0),
                 lambda x: np.where(2 * x > 10, x, np.log1p(np.exp(2 * x)) / 2)),
    "mish": (F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "softshrink": (F.softshrink, lambda x: np.where(x > 0.5, x - 0.5,
                                                    np.where(x < -0.5, x + 0.5, 0))),
    "hardshrink": (F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "threshold": (lambda t: F.threshold(t, 0.1, -3.0), lambda x: np.where(x > 0.1, x, -3.0)),
    "logsigmoid": (F.logsigmoid, lambda x: -np.log1p(np.exp(-x))),
}


@pytest.mark.parametrize("name", list(REFS))
def test_values_against_numpy(name):
    fn, ref = REFS[name]
    np.testing.assert_allclose(fn(fiamma.tensor(X)).numpy(), ref(X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", [n for n in REFS if n not in ("hardshrink", "threshold")])
def test_gradients(name):
    fn, _ = REFS[name]
    x = fiamma.tensor([[-1.3, 0.4, 2.2], [0.9, -0.35, -2.6]], dtype=fiamma.float64,
                      requires_grad=True)
    assert gradcheck(fn, (x,))


def test_glu_prelu_softmin_rrelu():
    x = fiamma.randn(2, 6, dtype=fiamma.float64, requires_grad=True)
    a, b = x.detach().numpy()[:, :3], x.detach().numpy()[:, 3:]
    np.testing.assert_allclose(F.glu(x).detach().numpy(), a / (1 + np.exp(-b)), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(fiamma.randn(2, 5))
    w = fiamma.tensor([0.1, 0.2, 0.3], dtype=fiamma.float64, requires_grad=True)
    xc = fiamma.randn(2, 3, 4, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(F.prelu, (xc, w))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
        F.prelu(fiamma.randn(2, 4), fiamma.ones(3))
    p = nn.PReLU(3)
    assert p.weight.tolist() == pytest.approx([0.25] * 3)
    s = F.softmin(x, dim=1).detach().numpy()
    e = np.exp(-x.detach().numpy())
    np.testing.assert_allclose(s, e / e.sum(1, keepdims=True), rtol=1e-12)
    r = nn.RReLU()
    y = r(fiamma.full((1000,), -1.0))
    assert -1 / 3 - 1e-6 <= y.min().item() and y.max().item() <= -1 / 8 + 1e-6
    r.eval()
    assert r(fiamma.tensor([-1.0])).item() == pytest.approx(-(1 / 8 + 1 / 3) / 2)


def test_inplace_forms_write_the_input():
    x = fiamma.tensor([-1.0, 2.0, 7.0])
    nn.ReLU6(inplace=True)(x)
    assert x.tolist() == [0.0, 2.0, 6.0]
    y = fiamma.tensor([-2.0, 1.0])
    nn.LeakyReLU(0.5, inplace=True)(y)
    assert y.tolist() == [-1.0, 1.0]


MODULES = ["ReLU", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Hardtanh",
           "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Softshrink",
           "Hardshrink", "Tanhshrink", "LogSigmoid", "Sigmoid", "Tanh"]


INPLACE = ["leaky_relu", "elu", "selu", "celu", "silu", "mish", "hardtanh", "relu6",
           "hardsigmoid", "hardswish", "threshold", "rrelu"]


def _inplace_call(name, t, inplace):
    if name == "threshold":
        return F.threshold(t, 0.1, -2.0, inplace=inplace)
    if name == "rrelu":
        return F.rrelu(t, training=False, inplace=inplace)
    return getattr(F, name)(t, inplace=inplace)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_forms_inside_a_graph_have_the_out_of_place_gradient(name):
    """An in-place activation on an intermediate (as torchvision's models use them after a
    batch norm) must not invalidate what backward saved, and gives the same gradient."""
    x0 = fiamma.tensor(X * 0.5, dtype=fiamma.float64)
    grads = []
    for inplace in (False, True):
        x = x0.clone().requires_grad_()
        h = x * 1.5                      # an intermediate, not a leaf
        y = _inplace_call(name, h, inplace)
        if inplace:
            assert y is h
        (y * fiamma.arange(len(X), dtype=fiamma.float64)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", MODULES + ["GLU", "Softmin", "Softmax2d", "PReLU",
                                            "Threshold", "GELU_tanh"])
def test_modules_equal_pytorch(name):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 4, 3, 2)) * 3).astype(np.float32)
    args = {"Softmin": (1,), "Threshold": (0.2, -1.0)}.get(name, ())
    kw = {"GELU_tanh": {"approximate": "tanh"}}.get(name, {})
    cls = "GELU" if name == "GELU_tanh" else name
    fm, tm = getattr(nn, cls)(*args, **kw), getattr(torch.nn, cls)(*args, **kw)
    fx, tx = fiamma.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fy, ty = fm(fx), tm(tx)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (fy * fiamma.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert repr(fm) == repr(tm)


FUSED = {"leaky_relu": "LeakyReluBackward0", "elu": "EluBackward0", "selu": "EluBackward0",
         "celu": "EluBackward0", "silu": "SiluBackward0", "softplus": "SoftplusBackward0",
         "mish": "MishBackward0", "hardswish": "HardswishBackward0",
         "hardsigmoid": "HardsigmoidBackward0", "logsigmoid": "LogSigmoidBackward0",
         "relu6": "HardtanhBackward0", "softshrink": "SoftshrinkBackward0",
         "hardshrink": "HardshrinkBackward0", "threshold": "ThresholdBackward0"}


@pytest.mark.parametrize("name", list(FUSED))
def test_fused_activations_second_order_and_node_names(name):
    """One recorded op named as PyTorch's; create_graph gradients are differentiable again
    (gradgradcheck in float64, away from the kinks)."""
    from fiamma.autograd import gradgradcheck

    fn, _ = REFS[name]
    x = fiamma.tensor([[-1.3, 0.4, 2.2], [0.9, -0.35, -2.6]], dtype=fiamma.float64,
                      requires_grad=True)
    y = fn(x)
    assert y.grad_fn.name() == FUSED[name]
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    assert gradgradcheck(fn, (x,))
    # float32 first-order gradients (the fused backward) equal float64's to float32 rounding
    x32 = x.detach().float().requires_grad_()
    fn(x32).sum().backward()
    fn(x).sum().backward()
    np.testing.assert_allclose(x32.grad.numpy(), x.grad.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", [n for n in FUSED
                                  if n not in ("relu6", "threshold", "softshrink", "hardshrink")])
def test_fused_activations_refuse_integer_input(name):
    fn, _ = REFS[name]
    with pytest.raises(NotImplementedError, match="not implemented for dtype .*int64"):
        fn(fiamma.tensor([1, -2]))


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", list(FUSED))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_fused_activations_equal_pytorch_at_the_kinks(name, dtype):
    """Values and gradients at the branch points (0, +-3, the softplus threshold), at the
    limits and at NaN, where a composition and a kernel can differ."""
    x = np.array([-np.inf, -100.0, -20.0, -3.0, -2.9999, -1.5, -1e-8, -0.0, 0.0, 1e-8, 2.9999,
                  3.0, 3.0001, 5.0, 6.0, 10.0, 10.0001, 20.0, 100.0, np.inf, np.nan])
    args = {"leaky_relu": (0.2,), "elu": (0.7,), "celu": (2.0,), "softplus": (2.0, 10.0),
            "softshrink": (3.0,), "hardshrink": (3.0,), "threshold": (3.0, -5.0)}
    a = args.get(name, ())
    fdt, tdt = getattr(fiamma, dtype), getattr(torch, dtype)
    fx = fiamma.tensor(x, dtype=fdt, requires_grad=True)
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    fy = getattr(F, name)(fx, *a)
    ty = getattr(torch.nn.functional, name)(tx, *a)
    assert fy.dtype == fdt
    tol = {"float32": (1e-6, 1e-6), "float64": (1e-13, 1e-13), "bfloat16": (8e-3, 1e-5)}[dtype]
    if name == "hardsigmoid" and dtype == "float64":
        tol = (1e-7, 1e-13)  # PyTorch's float64 slope is float32's 1/6; fiamma's the exact one
    np.testing.assert_allclose(fy.detach().double().numpy(), ty.detach().double().numpy(),
                               rtol=tol[0], atol=tol[1])
    fy.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(fx.grad.double().numpy(), tx.grad.double().numpy(),
                               rtol=tol[0], atol=tol[1])


def test_integer_inputs_of_the_clamping_activations_stay_integer():
    x = fiamma.tensor([-2, 0, 1, 9])
    assert F.relu6(x).tolist() == [0, 0, 1, 6] and F.relu6(x).dtype == fiamma.int64
    assert F.hardtanh(x).tolist() == [-1, 0, 1, 1]
    assert F.threshold(x, 0, 5).tolist() == [5, 5, 1, 9]


def test_prelu_at_zero_takes_the_slope_side():
    # PyTorch's x > 0 ? x : w x: at x == 0 the gradient is the slope, and w's is 0
    x = fiamma.tensor([0.0, -1.0, 1.0], dtype=fiamma.float64, requires_grad=True)
    w = fiamma.tensor([0.25], dtype=fiamma.float64, requires_grad=True)
    gx, gw = fiamma.autograd.grad(F.prelu(x, w).sum(), (x, w))
    assert gx.tolist() == [0.25, 0.25, 1.0]
    assert gw.tolist() == [-1.0]
