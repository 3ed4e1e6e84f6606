"""fiamma.fused.activation / activation_backward (csrc/activations.c fm_act_fwd/_bwd): every
kind against a float64 NumPy reference of PyTorch's formulas, over a dense grid, the branch
boundaries and the special values (inf, NaN, -0), in float32/float64 (and float16/bfloat16,
computed in float32), contiguous or not; and the argument checks."""

import math

import numpy as np
import pytest

import fiamma
from fiamma import fused

SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0)

CASES = [("silu", ()), ("leaky_relu", (0.01,)), ("leaky_relu", (0.2,)), ("elu", (1.0, 1.0, 1.0)),
         ("elu", SELU), ("elu", (0.5, 1.0, 2.0)), ("hardswish", ()), ("hardsigmoid", ()),
         ("softplus", (1.0, 20.0)), ("softplus", (2.0, 5.0)), ("mish", ()), ("log_sigmoid", ()),
         ("hardtanh", (-1.0, 1.0)), ("hardtanh", (0.0, 6.0)), ("softshrink", (0.5,)),
         ("hardshrink", (3.0,)), ("threshold", (0.0, -2.0)), ("threshold", (3.0, 20.0))]


def _sig(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _ref(name, p, x, g):
    """(y, gx) in float64 by PyTorch's formulas."""
    with np.errstate(all="ignore"):
        if name == "silu":
            s = _sig(x)
            return x * s, g * s * (1 + x * (1 - s))
        if name == "leaky_relu":
            return np.where(x > 0, x, x * p[0]), np.where(x > 0, g, g * p[0])
        if name == "elu":
            a, sc, isc = p
            return (np.where(x <= 0, np.expm1(x * isc) * a * sc, x * sc),
                    np.where(x <= 0, g * isc * a * sc * np.exp(x * isc), g * sc))
        if name == "hardswish":
            return (x * np.clip(x + 3, 0, 6) / 6,
                    np.where(x <= -3, 0.0, np.where(x < 3, g * (x / 3 + 0.5), g)))
        if name == "hardsigmoid":
            return np.clip(x + 3, 0, 6) / 6, np.where((x > -3) & (x < 3), g / 6, 0.0)
        if name == "softplus":
            b, t = p
            z = np.exp(x * b)
            return (np.where(x * b > t, x, np.log1p(z) / b),
                    np.where(x * b > t, g, g * z / (z + 1)))
        if name == "mish":
            sp = np.log1p(np.exp(x))
            tt = np.tanh(sp)
            return x * tt, g * (tt + x * _sig(x) * (1 - tt * tt))
        if name == "log_sigmoid":
            return (np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
                    g * _sig(-x))
        # PyTorch's branches: the kinks belong to the flat side; NaN keeps its value and
        # passes the gradient
        if name == "hardtanh":
            return (np.where(x < p[0], p[0], np.where(x > p[1], p[1], x)),
                    np.where((x <= p[0]) | (x >= p[1]), 0.0, g))
        inside = (x >= -p[0]) & (x <= p[0])
        if name == "softshrink":
            return (np.where(x > p[0], x - p[0], np.where(x < -p[0], x + p[0], x * 0)),
                    np.where(inside, 0.0, g))
        if name == "hardshrink":
            return np.where(inside, 0.0, x), np.where(inside, 0.0, g)
        if name == "threshold":
            return np.where(x <= p[0], p[1], x), np.where(x <= p[0], 0.0, g)
    raise AssertionError(name)


def _grid():
    rng = np.random.default_rng(1)
    edge = [0.0, -0.0, 3.0, -3.0, 2.999999, -2.999999, 3.000001, -3.000001, 1e-30, -1e-30, 0.5,
            -0.5, 1.0, -1.0, 6.0, -6.0,
            10.0, -10.0, 19.99, 20.0, 20.01, 2.5, 2.4999, 30.0, -30.0, 80.0, -80.0, 100.0,
            -100.0, 1e30, -1e30]
    return np.concatenate([rng.uniform(-12, 12, 4000), rng.standard_normal(1000), edge])


def _close(got, ref, rtol, atol):
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN pattern differs"
    assert np.array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    np.testing.assert_allclose(got[fin], ref[fin], rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,p", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_against_float64_reference(name, p, dtype):
    x = _grid().astype(dtype)
    g = np.random.default_rng(2).standard_normal(x.size).astype(dtype)
    y_ref, gx_ref = _ref(name, p, x.astype(np.float64), g.astype(np.float64))
    y = fused.activation(name, fiamma.from_numpy(x), *p).numpy()
    gx = fused.activation_backward(name, fiamma.from_numpy(g), fiamma.from_numpy(x), *p).numpy()
    assert y.dtype == np.dtype(dtype) and gx.dtype == np.dtype(dtype)
    rtol, atol = (2e-6, 1e-30) if dtype == "float32" else (1e-13, 1e-300)
    _close(y.astype(np.float64), y_ref, rtol, atol)
    # the gradients of silu, hardswish and mish cross zero (cancellation): an absolute
    # tolerance at the rounding of their terms (|g| < 5, terms of order 1)
    _close(gx.astype(np.float64), gx_ref, rtol * 4, 1e-6 if dtype == "float32" else 1e-14)


@pytest.mark.parametrize("name,p", CASES)
def test_special_values(name, p):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    y = fused.activation(name, fiamma.from_numpy(x), *p).numpy()
    y_ref, _ = _ref(name, p, x.astype(np.float64), np.ones(5))
    # silu(-inf) = -inf / inf and mish(-inf) = -inf * 0 are NaN in PyTorch's formulas too
    assert np.array_equal(np.isnan(y), np.isnan(y_ref))
    ok = ~np.isnan(y_ref)
    np.testing.assert_array_equal(y[ok], y_ref[ok].astype(np.float32))
    assert np.isnan(y[2])  # NaN propagates


@pytest.mark.parametrize("name,p", CASES)
def test_large_tensor_threads_and_strided_input(name, p):
    rng = np.random.default_rng(3)
    x = rng.uniform(-8, 8, (300, 700)).astype(np.float32)  # over the threading threshold
    t = fiamma.from_numpy(x)
    want = fused.activation(name, fiamma.from_numpy(np.ascontiguousarray(x.T)), *p).numpy()
    got = fused.activation(name, t.t(), *p)  # a transposed view: copied, same values
    assert got.shape == (700, 300)
    np.testing.assert_array_equal(got.numpy(), want)
    y_ref, gx_ref = _ref(name, p, x.astype(np.float64), np.ones_like(x, dtype=np.float64))
    np.testing.assert_allclose(fused.activation(name, t, *p).numpy(), y_ref, rtol=2e-6,
                               atol=1e-30)
    gx = fused.activation_backward(name, fiamma.ones(300, 700), t, *p).numpy()
    np.testing.assert_allclose(gx, gx_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,p", CASES[:8] + CASES[-6:])
def test_half_precision_rounds_once(name, p, dtype):
    x32 = np.linspace(-6, 6, 97, dtype=np.float32)
    xh = fiamma.from_numpy(x32).to(getattr(fiamma, dtype))
    y = fused.activation(name, xh, *p)
    assert y.dtype == getattr(fiamma, dtype)
    want = fused.activation(name, xh.float(), *p).to(getattr(fiamma, dtype))
    np.testing.assert_array_equal(y.float().numpy(), want.float().numpy())


def test_sigmoid_and_tanh_backward_from_output():
    y = np.array([0.0, 0.25, 0.5, 0.9, 1.0, -0.7, np.nan], np.float32)
    g = np.array([1.0, 2.0, -1.0, 0.5, 3.0, 1.5, 1.0], np.float32)
    got = fused.activation_backward("sigmoid", fiamma.from_numpy(g), fiamma.from_numpy(y))
    np.testing.assert_allclose(got.numpy(), g * (1 - y) * y, rtol=1e-6)  # (the kernel may
    got = fused.activation_backward("tanh", fiamma.from_numpy(g), fiamma.from_numpy(y))  # fma)
    np.testing.assert_allclose(got.numpy(), g * (1 - y * y), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        fused.activation("tanh", fiamma.from_numpy(y))


def test_argument_checks():
    x = fiamma.tensor([1.0, -1.0])
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        fused.activation("swish", x)
    with pytest.raises(ValueError, match="unknown activation"):
        fused.activation("sigmoid", x)  # backward only: the forward is fiamma.sigmoid
    with pytest.raises(TypeError, match="leaky_relu: expected 1 parameters, got 0"):
        fused.activation("leaky_relu", x)
    with pytest.raises(TypeError, match="elu: expected a number parameter, got str"):
        fused.activation("elu", x, "a", 1.0, 1.0)
    with pytest.raises(NotImplementedError, match="silu: not implemented for dtype .*int64"):
        fused.activation("silu", fiamma.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="mish: .*complex64"):
        fused.activation("mish", fiamma.tensor([1j], dtype=fiamma.complex64))
    with pytest.raises(TypeError, match="silu: expected input to be a Tensor, got list"):
        fused.activation("silu", [1.0])
    with pytest.raises(ValueError, match=r"silu_backward: expected grad_output of shape \(2,\)"):
        fused.activation_backward("silu", fiamma.ones(3), x)
    # complex silu is x * sigmoid(x), as PyTorch
    z = fiamma.tensor([1 + 1j, -2j], dtype=fiamma.complex64)
    want = z.numpy() / (1 + np.exp(-z.numpy()))
    np.testing.assert_allclose(fused.activation("silu", z).numpy(), want, rtol=1e-6)
    # a 0-d tensor parameter is a number
    assert fused.activation("leaky_relu", x, fiamma.tensor(0.5)).tolist() == [1.0, -0.5]
    assert math.isclose(fused.activation("silu", fiamma.zeros(0)).numel(), 0)


def test_torch_level_names():
    """torch.selu/celu/threshold/hardshrink/rrelu (and in-place forms, Tensor.hardshrink)."""
    x = np.array([-3.0, -1.0, -0.2, 0.0, 0.5, 2.0, np.nan], np.float32)
    t = fiamma.from_numpy(x.copy())
    a, s = SELU[0], SELU[1]
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(fiamma.selu(t).numpy(),
                                   s * np.where(x > 0, x, a * np.expm1(x)), rtol=1e-6)
        np.testing.assert_allclose(fiamma.celu(t, 2.0).numpy(),
                                   np.where(x > 0, x, 2.0 * np.expm1(x / 2.0)), rtol=1e-6)
    np.testing.assert_array_equal(fiamma.threshold(t, 0.1, -5.0).numpy(),
                                  np.where(x <= 0.1, -5.0, x).astype(np.float32))
    np.testing.assert_array_equal(t.hardshrink(0.6).numpy(),
                                  np.where((x >= -0.6) & (x <= 0.6), 0.0, x).astype(np.float32))
    np.testing.assert_array_equal(fiamma.hardshrink(t, 0.6).numpy(), t.hardshrink(0.6).numpy())
    assert fiamma.threshold(fiamma.tensor([1, 5, -2]), 2, 9).tolist() == [9, 5, 9]
    np.testing.assert_allclose(fiamma.rrelu(t).numpy(),
                               np.where(x > 0, x, x * (1 / 8 + 1 / 3) / 2), rtol=1e-6)
    r = fiamma.rrelu(fiamma.full((2000,), -1.0), training=True)
    assert -1 / 3 - 1e-6 <= r.min().item() < r.max().item() <= -1 / 8 + 1e-6
    y = fiamma.tensor([-1.0, 2.0])
    assert fiamma.selu_(y) is y and y.tolist() == pytest.approx([-1.1113, 2.1014], abs=1e-4)
    y = fiamma.tensor([-1.0, 2.0])
    fiamma.threshold_(y, 0.0, 7.0)
    assert y.tolist() == [7.0, 2.0]
    with pytest.raises(ValueError, match="alpha cannot be 0"):
        fiamma.celu(t, 0.0)
