"""Linear, Bilinear, Flatten/Unflatten, the first activations, init: values against NumPy
float64, gradients numerically, initial distributions."""

import math

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F, init


def test_linear_forward_and_init_bounds():
    lin = nn.Linear(20, 7)
    assert lin.weight.shape == (7, 20) and lin.bias.shape == (7,)
    bound = 1 / math.sqrt(20)
    assert lin.weight.abs().max().item() <= bound + 1e-7
    assert lin.bias.abs().max().item() <= bound + 1e-7
    x = np.random.default_rng(0).standard_normal((3, 5, 20)).astype(np.float32)
    y = lin(fiamma.tensor(x))
    ref = x @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    nb = nn.Linear(4, 2, bias=False)
    assert nb.bias is None and [n for n, _ in nb.named_parameters()] == ["weight"]
    assert "bias=False" in repr(nb)


def test_linear_gradients():
    lin = nn.Linear(4, 3).double()
    x = fiamma.randn(5, 4, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.linear(x, w, b), (x, lin.weight, lin.bias))
    x3 = fiamma.randn(2, 3, 4, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.linear(x, w, b), (x3, lin.weight, lin.bias))
    out = lin(x).sum()
    out.backward()
    np.testing.assert_allclose(lin.bias.grad.numpy(), np.full(3, 5.0))
    np.testing.assert_allclose(lin.weight.grad.numpy(),
                               np.ones((3, 5)) @ x.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_linear_nd_inputs_fused_bias_and_strided(dtype):
    # a contiguous N-d input large enough takes addmm's fused bias, a strided one matmul + add:
    # the same values (NumPy float64) and gradients either way
    rs = np.random.default_rng(1)
    x = rs.standard_normal((2, 3, 50, 24))
    w, b = rs.standard_normal((200, 24)), rs.standard_normal(200)
    g = rs.standard_normal((2, 3, 50, 200))
    ref = x @ w.T + b
    tol = 1e-4 if dtype is fiamma.float32 else 1e-12
    for contiguous in (True, False):
        xn = x if contiguous else np.ascontiguousarray(x.transpose(0, 2, 1, 3))
        xt = fiamma.tensor(xn, dtype=dtype, requires_grad=True)
        xin = xt if contiguous else xt.transpose(1, 2)
        wt = fiamma.tensor(w, dtype=dtype, requires_grad=True)
        bt = fiamma.tensor(b, dtype=dtype, requires_grad=True)
        y = F.linear(xin, wt, bt)
        assert y.shape == (2, 3, 50, 200)
        np.testing.assert_allclose(y.detach().numpy(), ref, rtol=tol, atol=tol)
        (y * fiamma.tensor(g, dtype=dtype)).sum().backward()
        gx = xt.grad.numpy() if contiguous else xt.grad.numpy().transpose(0, 2, 1, 3)
        np.testing.assert_allclose(gx, g @ w, rtol=tol, atol=tol)
        np.testing.assert_allclose(wt.grad.numpy(), g.reshape(-1, 200).T @ x.reshape(-1, 24),
                                   rtol=tol, atol=10 * tol)
        np.testing.assert_allclose(bt.grad.numpy(), g.sum(axis=(0, 1, 2)), rtol=tol,
                                   atol=10 * tol)
    with pytest.raises(RuntimeError, match="matmul"):
        F.linear(fiamma.randn(2, 3, 50, 23), fiamma.randn(200, 24), fiamma.randn(200))


def test_bilinear():
    m = nn.Bilinear(3, 4, 2).double()
    a = fiamma.randn(5, 3, dtype=fiamma.float64, requires_grad=True)
    b = fiamma.randn(5, 4, dtype=fiamma.float64, requires_grad=True)
    ref = np.einsum("ni,kij,nj->nk", a.detach().numpy(), m.weight.detach().numpy(),
                    b.detach().numpy()) + m.bias.detach().numpy()
    np.testing.assert_allclose(m(a, b).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda a, b, w, c: F.bilinear(a, b, w, c), (a, b, m.weight, m.bias))


def test_flatten_unflatten_identity():
    x = fiamma.arange(24.0).reshape(2, 3, 4)
    assert nn.Flatten()(x).shape == (2, 12) and nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Unflatten(1, (3, 1))(nn.Flatten()(x)[:, :3]).shape == (2, 3, 1)
    assert nn.Identity(1, k=2)(x) is x
    with pytest.raises(TypeError, match="unflattened_size"):
        nn.Unflatten(1, 3)


def test_activations():
    x = fiamma.tensor([[-1.0, 0.5, 2.0]])
    assert nn.ReLU()(x).tolist() == [[0.0, 0.5, 2.0]]
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-x.numpy())),
                               rtol=1e-6)
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh(x.numpy()), rtol=1e-6)
    sm = nn.Softmax(dim=1)(x).numpy()
    np.testing.assert_allclose(sm, np.exp(x.numpy()) / np.exp(x.numpy()).sum(1), rtol=1e-6)
    np.testing.assert_allclose(nn.LogSoftmax(dim=1)(x).numpy(), np.log(sm), rtol=1e-5)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(x)
    y = x.clone()
    nn.ReLU(inplace=True)(y)
    assert y.tolist() == [[0.0, 0.5, 2.0]]


def test_init_gains_and_fans():
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope"):
        init.calculate_gain("leaky_relu", True)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(fiamma.empty(3))


def test_init_private_fan_helpers_keep_pytorchs_names():
    # libraries (timm's weight_init) import these private names from torch.nn.init
    assert init._calculate_fan_in_and_fan_out(fiamma.empty(8, 3, 5, 5)) == (75, 200)
    assert init._calculate_correct_fan(fiamma.empty(8, 3, 5, 5), "fan_out") == 200
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(fiamma.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init._calculate_correct_fan(fiamma.empty(2, 2), "fan_avg")


@pytest.mark.parametrize("fn,kw,std", [
    (init.kaiming_normal_, dict(mode="fan_in", nonlinearity="relu"), math.sqrt(2 / 300)),
    (init.kaiming_normal_, dict(mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 400)),
    (init.kaiming_uniform_, dict(nonlinearity="relu"), math.sqrt(2 / 300)),
    (init.xavier_normal_, dict(), math.sqrt(2 / 700)),
    (init.xavier_uniform_, dict(gain=2.0), 2 * math.sqrt(2 / 700)),
])
def test_init_distributions(fn, kw, std):
    w = fiamma.empty(400, 300)
    fn(w, **kw)
    v = w.numpy()
    assert abs(v.std() - std) / std < 0.02 and abs(v.mean()) < 3 * std / math.sqrt(v.size)
    if "uniform" in fn.__name__:
        assert np.abs(v).max() <= math.sqrt(3) * std * (1 + 1e-6)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_trunc_normal_moments(dtype):
    # N(0.5, 2) truncated to [-1, 3]: alpha = -0.75, beta = 1.25; mean and variance in closed
    # form, and the fraction below 0.5 is (Phi(0) - Phi(alpha)) / Z
    mean, std, a, b = 0.5, 2.0, -1.0, 3.0
    w = init.trunc_normal_(fiamma.empty(400, 500, dtype=dtype), mean, std, a, b,
                           generator=fiamma.Generator().manual_seed(0))
    v = w.numpy().astype(np.float64)
    assert w.dtype is dtype and v.min() >= a and v.max() <= b

    def pdf(z):
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    def cdf(z):
        return 0.5 * math.erfc(-z / math.sqrt(2))

    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    var = std ** 2 * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    n = v.size
    assert abs(v.mean() - m) < 5 * math.sqrt(var / n)
    assert abs(v.var() / var - 1) < 0.01
    frac = (cdf(0.0) - cdf(al)) / z
    assert abs((v < mean).mean() - frac) < 5 * math.sqrt(frac * (1 - frac) / n)


def test_init_simple_fills():
    w = fiamma.empty(3, 4)
    assert init.ones_(w).tolist() == [[1.0] * 4] * 3
    assert init.zeros_(w).sum().item() == 0
    assert init.constant_(w, 2.5).max().item() == 2.5
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3, 4))
    d = init.dirac_(fiamma.empty(4, 2, 3, 3), groups=2)
    assert d.sum().item() == 4 and d[0, 0, 1, 1].item() == 1 and d[2, 0, 1, 1].item() == 1
    s = init.sparse_(fiamma.empty(10, 6), sparsity=0.3)
    assert all((s[:, c] == 0).sum().item() >= 3 for c in range(6))
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(fiamma.empty(0, 3))
    g1 = init.uniform_(fiamma.empty(5), generator=fiamma.Generator().manual_seed(3))
    g2 = init.uniform_(fiamma.empty(5), generator=fiamma.Generator().manual_seed(3))
    assert g1.tolist() == g2.tolist()


def test_init_does_not_record_gradients():
    p = nn.Parameter(fiamma.empty(3, 3))
    init.normal_(p)
    assert p.is_leaf and p.grad_fn is None


def test_dropout():
    fiamma.manual_seed(0)
    x = fiamma.ones(200, 100, requires_grad=True)
    d = nn.Dropout(0.3)
    y = d(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.02
    np.testing.assert_allclose(np.unique(y.detach().numpy()), [0.0, 1 / 0.7], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy(), rtol=1e-6)
    d.eval()
    assert d(x) is x
    assert F.dropout(x, 1.0).abs().sum().item() == 0
    assert F.dropout(x, 0.0) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout(0.2)) == "Dropout(p=0.2, inplace=False)"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_dropout_draws_are_bernoulli_of_the_keep_probability(dtype):
    # F.dropout's mask is bernoulli(1 - p) drawn as bernoulli(full_like(x, 1 - p)) draws it
    # (the same seed gives the same mask, the probability rounded to x's dtype), scaled by
    # 1 / (1 - p); the fused attention's dropout documents the same draws
    dt = getattr(fiamma, dtype)
    x = fiamma.randn(6, 301).to(dt).t()  # non-contiguous
    for p in (0.1, 0.5, 1 / 3):
        fiamma.manual_seed(7)
        y = F.dropout(x, p)
        fiamma.manual_seed(7)
        keep = fiamma.bernoulli(fiamma.full_like(x, 1.0 - p))
        ref = x.double().numpy() * keep.double().numpy() / (1.0 - p)
        got = y.double().numpy()
        assert ((got == 0) == ((keep.double().numpy() == 0) | (x.double().numpy() == 0))).all()
        tol = {"float32": 1e-6, "float64": 1e-12}.get(dtype, 1e-2)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=0)
        kept = float((keep.double().numpy() != 0).mean())
        assert abs(kept - (1 - p)) < 0.05
