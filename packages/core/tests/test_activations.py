"""Fused gelu / gelu_backward and the vectorised float erf / erfc, against float64 references
(Python's math.erf / math.erfc) over random bit patterns (every binade), a dense grid and the
special values."""

import math

import numpy as np
import pytest

import fiamma

K = math.sqrt(2.0 / math.pi)


def _inputs():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    grid = rng.uniform(-12, 12, 20000).astype(np.float32)
    edge = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 0.5, -0.5, 0.4999999, 10.5, -10.5,
                     16.0, -16.0, 16.5, -16.5, 12.0, -12.0, 3e38, -3e38], np.float32)
    return np.concatenate([x, grid, edge])


def _ulps(got, ref, mag=None):
    """|got - ref| in units of float32 spacing at |mag| (default |ref|); subnormal results
    (whose exp() factor is itself subnormal, so has fewer bits) count in units of 2^-145."""
    mag = np.abs(ref) if mag is None else mag
    sp = np.maximum(np.spacing(mag.astype(np.float32)).astype(np.float64), 2.0**-145)
    return np.abs(got.astype(np.float64) - ref) / sp


def _ref_gelu(xd, approximate):
    """(gelu, gelu', |terms of gelu'|) in float64."""
    with np.errstate(all="ignore"):
        if approximate == "none":
            phi = 0.5 * np.vectorize(math.erfc)(-xd / math.sqrt(2.0))
            pdf = np.exp(-0.5 * xd * xd) / math.sqrt(2.0 * math.pi)
            return xd * phi, phi + xd * pdf, phi + np.abs(xd * pdf)
        u = K * (xd + 0.044715 * xd**3)
        e = np.exp(-2.0 * np.abs(u))
        s = 1.0 / (1.0 + e)
        onept = np.where(u >= 0, 2 * s, 2 * e * s)
        slope = 0.5 * xd * 4 * e * s * s * K * (1 + 3 * 0.044715 * xd * xd)
        y = np.where(np.isinf(xd), np.where(xd > 0, xd, 0.0), 0.5 * xd * onept)
        d = np.where(np.abs(xd) > 12, np.where(xd > 0, 1.0, 0.0), 0.5 * onept + slope)
        mag = np.where(np.abs(xd) > 12, 1.0, 0.5 * onept + np.abs(slope))
        return y, d, mag


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_float32_ulps(name):
    x = _inputs()
    ref = np.vectorize(getattr(math, name))(x.astype(np.float64))
    got = getattr(fiamma.from_numpy(x), name)().numpy()
    assert _ulps(got, ref).max() <= 4


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_ulps(approximate):
    x = _inputs()
    y, d, mag = _ref_gelu(x.astype(np.float64), approximate)
    t = fiamma.from_numpy(x)
    assert _ulps(fiamma.gelu(t, approximate).numpy(), y).max() <= 6
    g = fiamma.gelu_backward(fiamma.ones(len(x)), t, approximate).numpy()
    # gelu' crosses zero near x = -0.75: measured against the size of its terms; the tanh
    # form's slope near x = -10 multiplies a subnormal exp() by x^3 (fewer bits: 16 ulps)
    assert _ulps(g, d, mag).max() <= (6 if approximate == "none" else 16)


def test_gelu_exact_float32_dense():
    """The exact form on a dense grid over the whole range where it is neither 0 nor x, and
    through the negative tail, where gelu(x) = x Phi(x) needs Phi's relative accuracy: within
    6 ulp on every ISA level (measured 4.1 forward, 3.1 backward where FMA is available)."""
    x = np.concatenate([np.linspace(-14.6, 6.0, 400001, dtype=np.float32),
                        np.linspace(-1.0, 1.0, 100001, dtype=np.float32)])
    y, d, mag = _ref_gelu(x.astype(np.float64), "none")
    t = fiamma.from_numpy(x)
    assert _ulps(fiamma.gelu(t).numpy(), y).max() <= 6
    g = fiamma.gelu_backward(fiamma.ones(len(x)), t).numpy()
    assert _ulps(g, d, mag).max() <= 6
    # gelu'(x) = Phi(x) + x phi(x) against a central difference of the float64 reference
    xd = np.linspace(-8, 8, 1601)
    h = 1e-6
    num = (_ref_gelu(xd + h, "none")[0] - _ref_gelu(xd - h, "none")[0]) / (2 * h)
    got = fiamma.gelu_backward(fiamma.ones(len(xd)), fiamma.from_numpy(xd.astype(np.float32)))
    np.testing.assert_allclose(got.numpy(), num, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float64(approximate):
    x = np.random.default_rng(1).uniform(-30, 30, 5000)
    y, d, mag = _ref_gelu(x, approximate)
    t = fiamma.from_numpy(x)
    # the tails are conditioned like x^2: rounding x / sqrt(2) differently moves them that much
    tol = 1e-14 * (4 + x * x)
    assert np.all(np.abs(fiamma.gelu(t, approximate).numpy() - y) <= tol * np.abs(y) + 1e-300)
    g = fiamma.gelu_backward(fiamma.ones(len(x), dtype=fiamma.float64), t, approximate).numpy()
    assert np.all(np.abs(g - d) <= tol * mag + 1e-300)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values(dtype, approximate):
    x = fiamma.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0], dtype=dtype)
    y = fiamma.gelu(x, approximate).tolist()
    assert y[0] == math.inf and y[1] == 0.0 and math.isnan(y[2]) and y[3] == 0.0 == y[4]
    g = fiamma.gelu_backward(fiamma.ones(5, dtype=dtype), x, approximate).tolist()
    assert g[0] == 1.0 and g[1] == 0.0 and math.isnan(g[2]) and g[3] == 0.5 == g[4]


def test_erf_special_values():
    x = fiamma.tensor([math.inf, -math.inf, math.nan, -0.0])
    assert x.erf().tolist()[:2] == [1.0, -1.0] and math.isnan(x.erf().tolist()[2])
    assert math.copysign(1.0, x.erf().tolist()[3]) == -1.0
    assert x.erfc().tolist()[:2] == [0.0, 2.0]


@pytest.mark.parametrize("dtype", [fiamma.float16, fiamma.bfloat16])
def test_gelu_half_dtypes(dtype):
    x = fiamma.linspace(-4, 4, 101).to(dtype)
    y = fiamma.gelu(x)
    assert y.dtype is dtype
    ref = fiamma.gelu(x.float()).to(dtype)
    assert fiamma.equal(y, ref)
    assert fiamma.gelu_backward(fiamma.ones_like(x), x).dtype is dtype


def test_gelu_noncontiguous_and_empty():
    base = np.random.default_rng(2).standard_normal((8, 6)).astype(np.float32)
    t = fiamma.from_numpy(base).t()
    np.testing.assert_array_equal(fiamma.gelu(t).numpy(), fiamma.gelu(t.contiguous()).numpy())
    assert fiamma.gelu(fiamma.empty(0, 3)).shape == (0, 3)
    assert fiamma.gelu(fiamma.tensor(1.0)).shape == ()


def test_gelu_errors():
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh'"):
        fiamma.gelu(fiamma.ones(2), approximate="fast")
    with pytest.raises(TypeError, match="gelu: expected a floating point input"):
        fiamma.gelu(fiamma.ones(2, dtype=fiamma.int64))
    with pytest.raises(TypeError, match="gelu: expected input to be a Tensor"):
        fiamma.gelu([1.0])
    with pytest.raises(ValueError, match=r"gelu_backward: expected grad_output of shape \(2,\)"):
        fiamma.gelu_backward(fiamma.ones(3), fiamma.ones(2))


@pytest.mark.parity
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_parity(approximate):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).uniform(-8, 8, 4096).astype(np.float32)
    tx = torch.from_numpy(x).requires_grad_()
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    ty.backward(torch.ones_like(ty))
    t = fiamma.from_numpy(x)
    np.testing.assert_allclose(fiamma.gelu(t, approximate).numpy(), ty.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fiamma.gelu_backward(fiamma.ones(4096), t, approximate).numpy(),
                               tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64, fiamma.bfloat16,
                                   fiamma.float16])
@pytest.mark.parametrize("on_cpu", [True, False])
def test_relu_backward(device, dtype, on_cpu):
    device = "cpu" if on_cpu else device
    y = fiamma.tensor([[-1.0, 0.0, -0.0, 2.0], [float("nan"), float("inf"), 3.0, -5.0]],
                      dtype=dtype)
    g = fiamma.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, float("nan"), 8.0]], dtype=dtype)
    want = [[0.0, 0.0, 0.0, 4.0], [5.0, 6.0, float("nan"), 0.0]]  # a NaN output passes g
    got = fiamma.relu_backward(g.to(device), y.to(device))
    assert got.dtype == dtype and got.device.type == device
    assert np.array_equal(got.cpu().float().numpy(), np.array(want, np.float32), equal_nan=True)
    # strided and empty operands, and ReLU's gradient through autograd
    yt = y.to(device).t()
    assert fiamma.relu_backward(g.to(device).t(), yt).cpu().float().numpy().tolist()[1] == \
        [0.0, 6.0]
    assert fiamma.relu_backward(fiamma.ones(0, dtype=dtype, device=device),
                                fiamma.ones(0, dtype=dtype, device=device)).shape == (0,)
    pytest.importorskip("fiamma.autograd")  # (core's own wheel tests run without it)
    x = fiamma.tensor([-1.0, 0.5, 0.0, 3.0], dtype=dtype, device=device, requires_grad=True)
    fiamma.relu(x).sum().backward()
    assert x.grad.cpu().float().tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("n", [1, 15, 17, 1000, (1 << 18) + 33, (1 << 20) + 7])
def test_relu_backward_one_pass_sizes(dtype, n):
    """The CPU's one-pass kernel against NumPy's where at vector tails and past the size that
    splits it over threads; -0 outputs pass no gradient, NaN outputs pass theirs (PyTorch's
    threshold_backward: y <= 0 gives 0), and the zeros are +0."""
    rng = np.random.default_rng(n)
    npdt = np.float32 if dtype is fiamma.float32 else np.float64
    y = rng.standard_normal(n).astype(npdt)
    y[::7] = 0.0
    y[3::11] = -0.0
    y[5::13] = np.nan
    g = rng.standard_normal(n).astype(npdt)
    got = fiamma.relu_backward(fiamma.from_numpy(g), fiamma.from_numpy(y)).numpy()
    want = np.where(y <= 0, npdt(0), g)
    assert got.dtype == npdt
    assert np.array_equal(got, want)
    assert not np.signbit(got[y <= 0]).any()
    # mixed dtypes take the composition (promoted), as before
    mixed = fiamma.relu_backward(fiamma.from_numpy(g).double(), fiamma.from_numpy(y).float())
    assert mixed.dtype == fiamma.float64
    want = np.where(y.astype(np.float32) <= 0, 0, g.astype(np.float64))
    assert np.array_equal(mixed.numpy(), want)
