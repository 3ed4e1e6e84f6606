"""Elementwise ops against NumPy: every op over every dtype PyTorch's CPU supports for it, random
(broadcast) shapes, contiguous / transposed / step-sliced operands, 0-d and empty tensors; type
promotion, in-place forms and versions, operators, errors, and the accuracy of fmath.h."""

import math
import operator

import numpy as np
import pytest
from conftest import XP_HOST, c_kernels_only
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import fiamma as F

ALL = [F.bool, F.uint8, F.int8, F.int16, F.int32, F.int64, F.float16, F.bfloat16, F.float32,
       F.float64]
INTS = [F.uint8, F.int8, F.int16, F.int32, F.int64]
FLOATS = [F.float16, F.bfloat16, F.float32, F.float64]
NUMERIC = INTS + FLOATS
NP = {F.bool: np.bool_, F.uint8: np.uint8, F.int8: np.int8, F.int16: np.int16,
      F.int32: np.int32, F.int64: np.int64, F.float16: np.float16, F.bfloat16: np.float32,
      F.float32: np.float32, F.float64: np.float64}
SETTINGS = settings(max_examples=6, deadline=None, database=None)


# ---- helpers -----------------------------------------------------------------------------------

def to_np(t):
    """Values of t as NumPy (bfloat16 through float32)."""
    if t.dtype is F.bfloat16:
        t = t.float()
    return np.asarray(t.numpy())


def build(ref, dt, layout):
    """A tensor of dtype dt holding ref's values with the given memory layout, and the NumPy
    array of the values it actually holds (after rounding to dt)."""
    ref = np.asarray(ref)
    if layout == "T" and ref.ndim >= 2:
        base = F.tensor(np.ascontiguousarray(ref.transpose()), dtype=dt)
        t = base.permute(tuple(range(ref.ndim - 1, -1, -1)))
        assert not t.is_contiguous() or min(ref.shape) <= 1
    elif layout == "step" and ref.ndim >= 1 and ref.size:
        big = np.repeat(ref, 2, axis=0)
        base = F.tensor(big, dtype=dt)
        stride = list(base.stride())
        stride[0] *= 2
        t = base.as_strided(ref.shape, tuple(stride), 0)
    else:
        t = F.tensor(ref, dtype=dt)
        if ref.ndim == 0:
            t = t.reshape(())
    assert t.shape == ref.shape
    return t, to_np(t)


def values(rng, shape, dt, domain="any"):
    """Random values for dt in an op's domain."""
    if dt is F.bool:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.is_floating_point:
        x = rng.standard_normal(shape) * 3
        if domain == "nonzero":
            x = np.where(np.abs(x) < 1e-2, 1.0, x)
        elif domain == "shift":
            x = rng.integers(0, 4, shape).astype(float)
        elif domain == "exponent":
            x = rng.uniform(-3, 3, shape)
        return x
    info = np.iinfo(NP[dt])
    if domain == "shift":
        return rng.integers(0, info.bits, shape).astype(NP[dt])
    if domain == "exponent":
        return rng.integers(0, 6, shape).astype(NP[dt])
    lo, hi = (max(info.min, -100), min(info.max, 100)) if domain == "small" else \
        (info.min, info.max)
    x = rng.integers(lo, hi, shape, endpoint=True).astype(NP[dt])
    if domain == "nonzero":
        x[x == 0] = 1
    return x


def tol(dt):
    return {F.float16: (2e-3, 1e-3), F.bfloat16: (2e-2, 1e-2), F.float32: (1e-5, 1e-6),
            F.float64: (1e-11, 1e-12)}.get(dt, (0, 0))


def assert_close(res, expected, dt):
    """Compare a result of dtype dt with a NumPy reference (exact for integers and bool)."""
    assert res.dtype is dt, (res.dtype, dt)
    got = to_np(res)
    expected = np.asarray(expected)
    assert got.shape == expected.shape
    if dt.is_floating_point:
        rtol, atol = tol(dt)
        if dt is F.bfloat16:
            expected = F.tensor(expected.astype(np.float32)).to(F.bfloat16).float().numpy()
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected.astype(NP[dt]))


layouts = st.sampled_from(["contig", "T", "step"])
shape_pairs = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                           max_side=5)
seeds = st.integers(0, 2**32 - 1)


# ---- binary ops --------------------------------------------------------------------------------

def _np_div(x, y):
    return np.true_divide(x, y)


# name: (fiamma fn, numpy fn, supported dtypes, kind, domain of y)
BINARY = {
    "add": (F.add, np.add, ALL, "same", "any"),
    "sub": (F.sub, np.subtract, NUMERIC, "same", "any"),
    "mul": (F.mul, np.multiply, ALL, "same", "any"),
    "div": (F.div, _np_div, ALL, "float", "nonzero"),
    "floor_divide": (F.floor_divide, np.floor_divide, NUMERIC, "same", "nonzero"),
    "remainder": (F.remainder, np.remainder, NUMERIC, "same", "nonzero"),
    "fmod": (F.fmod, np.fmod, NUMERIC, "same", "nonzero"),
    "pow": (F.pow, np.power, NUMERIC, "same", "exponent"),
    "atan2": (F.atan2, np.arctan2, ALL, "float", "any"),
    "hypot": (F.hypot, np.hypot, FLOATS, "same", "any"),
    "copysign": (F.copysign, np.copysign, ALL, "float", "any"),
    "maximum": (F.maximum, np.maximum, ALL, "same", "any"),
    "minimum": (F.minimum, np.minimum, ALL, "same", "any"),
    "fmax": (F.fmax, np.fmax, ALL, "same", "any"),
    "fmin": (F.fmin, np.fmin, ALL, "same", "any"),
    "eq": (F.eq, np.equal, ALL, "bool", "any"),
    "ne": (F.ne, np.not_equal, ALL, "bool", "any"),
    "lt": (F.lt, np.less, ALL, "bool", "any"),
    "le": (F.le, np.less_equal, ALL, "bool", "any"),
    "gt": (F.gt, np.greater, ALL, "bool", "any"),
    "ge": (F.ge, np.greater_equal, ALL, "bool", "any"),
    "logical_and": (F.logical_and, np.logical_and, ALL, "bool", "any"),
    "logical_or": (F.logical_or, np.logical_or, ALL, "bool", "any"),
    "logical_xor": (F.logical_xor, np.logical_xor, ALL, "bool", "any"),
    "bitwise_and": (F.bitwise_and, np.bitwise_and, [F.bool] + INTS, "same", "any"),
    "bitwise_or": (F.bitwise_or, np.bitwise_or, [F.bool] + INTS, "same", "any"),
    "bitwise_xor": (F.bitwise_xor, np.bitwise_xor, [F.bool] + INTS, "same", "any"),
    "bitwise_left_shift": (F.bitwise_left_shift, np.left_shift, INTS, "same", "shift"),
    "bitwise_right_shift": (F.bitwise_right_shift, np.right_shift, INTS, "same", "shift"),
}


def _out_dtype(kind, dt):
    if kind == "bool":
        return F.bool
    if kind == "float" and not dt.is_floating_point:
        return F.float32
    return dt


def _np_compute(npfn, x, y, dt, od):
    """The NumPy reference for inputs of dtype dt, as od."""
    with np.errstate(all="ignore"):
        if dt is F.bfloat16 or (od.is_floating_point and not dt.is_floating_point):
            x, y = x.astype(np.float32), y.astype(np.float32)
        return np.asarray(npfn(x, y)).astype(NP[od])


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(shapes=shape_pairs, la=layouts, lb=layouts, seed=seeds)
def test_binary_vs_numpy(name, dt, shapes, la, lb, seed):
    fn, npfn, dtypes, kind, ydom = BINARY[name]
    rng = np.random.default_rng(seed)
    (sa, sb), _ = shapes
    xdom = "small" if name == "pow" else "any"
    if name == "pow" and dt.is_floating_point:
        xdom = "any"
    x, xn = build(values(rng, sa, dt, xdom), dt, la)
    y, yn = build(values(rng, sb, dt, ydom), dt, lb)
    if name == "pow" and dt.is_floating_point:
        x, xn = build(np.abs(values(rng, sa, dt)) + 0.5, dt, la)
    if dt not in dtypes:
        with pytest.raises((TypeError, RuntimeError)):
            fn(x, y)
        return
    od = _out_dtype(kind, dt)
    res = fn(x, y)
    assert_close(res, _np_compute(npfn, xn, yn, dt, od), od)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "remainder",
                                  "pow", "maximum", "lt", "bitwise_and", "atan2"])
@pytest.mark.parametrize("dt", [F.int32, F.float32, F.float64, F.bfloat16], ids=str)
@SETTINGS
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple), seed=seeds,
       scalar_first=st.booleans())
def test_binary_with_python_scalar(name, dt, shape, seed, scalar_first):
    fn, npfn, dtypes, kind, _ = BINARY[name]
    if dt not in dtypes or (name == "maximum"):
        return
    rng = np.random.default_rng(seed)
    dom = "exponent" if name == "pow" else "nonzero"
    x, xn = build(values(rng, shape, dt, "small" if not scalar_first else dom), dt, "contig")
    if name == "pow" and dt.is_floating_point:
        x, xn = build(np.abs(xn) + 0.5, dt, "contig")
    s = 3 if not dt.is_floating_point else 1.5
    res = fn(s, x) if scalar_first else fn(x, s)
    od = _out_dtype(kind, dt)
    sn = np.asarray(s, dtype=NP[dt])
    ref = _np_compute(npfn, sn, xn, dt, od) if scalar_first else _np_compute(npfn, xn, sn, dt, od)
    assert_close(res, np.broadcast_to(ref, shape), od)


# ---- unary ops ---------------------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def _vec(f):
    return lambda x: np.vectorize(f, otypes=[np.float64])(x.astype(np.float64))


# name: (numpy reference, supported dtypes, kind, domain)
#   kind: "float" (ints promote to float32), "same", "bool" (bool result), "ident_int"
#   (the identity on integers)
UNARY = {
    "exp": (np.exp, ALL, "float", "any"), "exp2": (np.exp2, ALL, "float", "any"),
    "expm1": (np.expm1, ALL, "float", "any"), "log": (np.log, ALL, "float", "pos"),
    "log2": (np.log2, ALL, "float", "pos"), "log10": (np.log10, ALL, "float", "pos"),
    "log1p": (np.log1p, ALL, "float", "pos"), "sqrt": (np.sqrt, ALL, "float", "pos"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), ALL, "float", "pos"),
    "reciprocal": (lambda x: 1 / x, ALL, "float", "pos"),
    "sin": (np.sin, ALL, "float", "any"), "cos": (np.cos, ALL, "float", "any"),
    "tan": (np.tan, ALL, "float", "unit"), "asin": (np.arcsin, ALL, "float", "unit"),
    "acos": (np.arccos, ALL, "float", "unit"), "atan": (np.arctan, ALL, "float", "any"),
    "sinh": (np.sinh, ALL, "float", "any"), "cosh": (np.cosh, ALL, "float", "any"),
    "tanh": (np.tanh, ALL, "float", "any"), "asinh": (np.arcsinh, ALL, "float", "any"),
    "acosh": (np.arccosh, ALL, "float", "ge1"), "atanh": (np.arctanh, ALL, "float", "unit"),
    "sigmoid": (_sigmoid, ALL, "float", "any"), "erf": (_vec(math.erf), ALL, "float", "any"),
    "erfc": (_vec(math.erfc), ALL, "float", "any"),
    "abs": (np.abs, NUMERIC, "same", "any"), "neg": (np.negative, NUMERIC, "same", "any"),
    "sign": (np.sign, ALL, "same", "any"), "square": (np.square, ALL, "same", "small"),
    "floor": (np.floor, NUMERIC, "same", "any"), "ceil": (np.ceil, NUMERIC, "same", "any"),
    "round": (np.round, NUMERIC, "same", "any"), "trunc": (np.trunc, NUMERIC, "same", "any"),
    "frac": (lambda x: x - np.trunc(x), FLOATS, "same", "any"),
    "relu": (lambda x: np.maximum(x, 0), NUMERIC, "same", "any"),
    "isnan": (np.isnan, ALL, "bool", "special"), "isinf": (np.isinf, ALL, "bool", "special"),
    "isposinf": (np.isposinf, ALL, "bool", "special"),
    "isneginf": (np.isneginf, ALL, "bool", "special"),
    "isfinite": (np.isfinite, ALL, "bool", "special"),
    "signbit": (np.signbit, ALL, "bool", "special"),
    "logical_not": (np.logical_not, ALL, "bool", "any"),
    "bitwise_not": (np.invert, [F.bool] + INTS, "same", "any"),
    "nan_to_num": (np.nan_to_num, ALL, "same", "special"),
}


def unary_values(rng, shape, dt, domain):
    if domain == "special" and dt.is_floating_point:
        x = rng.standard_normal(shape) * 3
        pick = rng.integers(0, 6, shape)
        x = np.where(pick == 0, np.nan, np.where(pick == 1, np.inf, np.where(
            pick == 2, -np.inf, np.where(pick == 3, -0.0, x))))
        return x
    if dt is F.bool:
        return rng.integers(0, 2, shape).astype(bool)
    if not dt.is_floating_point:
        if domain in ("pos", "ge1"):
            return rng.integers(1, 6, shape).astype(NP[dt])
        if domain == "unit":
            return rng.integers(0, 2, shape).astype(NP[dt])
        return values(rng, shape, dt, "small" if domain == "small" else "any")
    x = rng.uniform(-3, 3, shape)
    if domain == "pos":
        return np.abs(x) + 0.05
    if domain == "ge1":
        return np.abs(x) + 1
    if domain == "unit":
        return np.tanh(x) * 0.95
    return x


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=4, deadline=None, database=None)
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple), layout=layouts,
       seed=seeds)
def test_unary_vs_numpy(name, dt, shape, layout, seed):
    npfn, dtypes, kind, domain = UNARY[name]
    fn = getattr(F, name)
    rng = np.random.default_rng(seed)
    x, xn = build(unary_values(rng, shape, dt, domain), dt, layout)
    if dt not in dtypes:
        with pytest.raises((TypeError, RuntimeError)):
            fn(x)
        return
    res = fn(x)
    if kind == "bool":
        od = F.bool
    elif name == "square" and dt is F.bool:
        od, xn = F.int64, xn.astype(np.int64)
    elif kind == "float" and not dt.is_floating_point:
        od = F.float32
    else:
        od = dt
    with np.errstate(all="ignore"):
        src = xn.astype(np.float32) if (od.is_floating_point and not dt.is_floating_point) \
            else xn
        if dt is F.bool and name in ("sign",):
            ref = xn
        elif dt is F.bool and name in ("signbit",):
            ref = np.zeros_like(xn)
        elif name in ("isposinf", "isneginf") and not dt.is_floating_point:
            ref = np.zeros(xn.shape, bool)
        elif name == "nan_to_num" and dt is F.bfloat16:
            ref = np.nan_to_num(xn, posinf=F.finfo(F.bfloat16).max, neginf=F.finfo(F.bfloat16).min)
        elif name == "nan_to_num" and dt is F.float16:
            ref = np.nan_to_num(xn.astype(np.float16))
        else:
            ref = npfn(src)
    assert_close(res, np.asarray(ref), od)


# ---- ternary ops -------------------------------------------------------------------------------

shape_triples = mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0,
                                             max_side=4)


@pytest.mark.parametrize("dt", ALL, ids=str)
@SETTINGS
@given(shapes=shape_triples, la=layouts, lb=layouts, seed=seeds,
       scalars=st.sampled_from(["none", "x", "y", "both"]))
def test_where(dt, shapes, la, lb, seed, scalars):
    rng = np.random.default_rng(seed)
    (sc, sa, sb), _ = shapes
    cond, cn = build(rng.integers(0, 2, sc).astype(bool), F.bool, la)
    x, xn = build(values(rng, sa, dt), dt, la)
    y, yn = build(values(rng, sb, dt), dt, lb)
    if scalars in ("x", "both"):
        x = xn = True if dt is F.bool else 1
    if scalars in ("y", "both"):
        y = yn = False if dt is F.bool else 0
    res = F.where(cond, x, y)
    od = dt if scalars != "both" else (F.bool if dt is F.bool else F.int64)
    assert_close(res, np.where(cn, xn, yn), od)


@pytest.mark.parametrize("dt", NUMERIC, ids=str)
@SETTINGS
@given(shapes=shape_triples, la=layouts, seed=seeds, mode=st.sampled_from(
    ["scalars", "tensors", "min", "max", "min_tensor"]))
def test_clamp(dt, shapes, la, seed, mode):
    rng = np.random.default_rng(seed)
    (sx, slo, shi), _ = shapes
    x, xn = build(values(rng, sx, dt, "small"), dt, la)
    lo, hi = (-5, 7) if not dt.is_floating_point else (-0.5, 0.75)
    if dt is F.uint8:
        lo = 3
    if mode == "tensors":
        lo, lon = build(values(rng, slo, dt, "small"), dt, "contig")
        hi, hin = build(values(rng, shi, dt, "small"), dt, "T")
        res, ref = F.clamp(x, lo, hi), np.minimum(np.maximum(xn, lon), hin)
    elif mode == "min_tensor":
        lo, lon = build(values(rng, slo, dt, "small"), dt, "contig")
        res, ref = F.clamp(x, min=lo), np.maximum(xn, lon)
    elif mode == "min":
        res, ref = x.clamp_min(lo), np.maximum(xn, np.asarray(lo, NP[dt]))
    elif mode == "max":
        res, ref = F.clamp_max(x, hi), np.minimum(xn, np.asarray(hi, NP[dt]))
    else:
        res, ref = x.clip(lo, hi), np.clip(xn, np.asarray(lo, NP[dt]), np.asarray(hi, NP[dt]))
    assert_close(res, ref, dt)


@pytest.mark.parametrize("dt", FLOATS, ids=str)
@SETTINGS
@given(shapes=shape_triples, seed=seeds, scalar_weight=st.booleans())
def test_lerp(dt, shapes, seed, scalar_weight):
    rng = np.random.default_rng(seed)
    (sa, sb, sw), _ = shapes
    a, an = build(values(rng, sa, dt), dt, "T")
    b, bn = build(values(rng, sb, dt), dt, "step")
    if scalar_weight:
        w = wn = 0.3
    else:
        w, wn = build(rng.uniform(-0.5, 1.5, sw), dt, "contig")
    res = F.lerp(a, b, w)
    ref = an.astype(np.float64) + wn * (bn.astype(np.float64) - an)
    assert_close(res, ref.astype(NP[dt]), dt)


@pytest.mark.parametrize("dt", NUMERIC, ids=str)
@SETTINGS
@given(shapes=shape_triples, seed=seeds)
def test_addcmul_addcdiv(dt, shapes, seed):
    rng = np.random.default_rng(seed)
    (sa, sb, sc), _ = shapes
    a, an = build(values(rng, sa, dt, "small"), dt, "contig")
    b, bn = build(values(rng, sb, dt, "small"), dt, "T")
    c, cn = build(values(rng, sc, dt, "nonzero"), dt, "step")
    v = 2
    with np.errstate(all="ignore"):
        ref = (an + np.asarray(v, NP[dt]) * bn * cn) if not dt.is_floating_point else \
            an.astype(np.float64) + v * bn.astype(np.float64) * cn
    assert_close(F.addcmul(a, b, c, value=v), ref, dt)
    if dt.is_floating_point:
        ref = an.astype(np.float64) + v * bn.astype(np.float64) / cn
        assert_close(a.addcdiv(b, c, value=v), ref, dt)
    else:
        with pytest.raises(RuntimeError, match="addcdiv"):
            F.addcdiv(a, b, c)


# ---- type promotion ----------------------------------------------------------------------------

def T(v, dt=None):
    t = F.tensor(v, dtype=dt)
    return t.reshape(()) if np.ndim(v) == 0 else t


@pytest.mark.parametrize("fn, expected", [
    (lambda: T([1, 2]) + 1.5, F.float32),
    (lambda: T([1, 2], F.uint8) + 1000, F.uint8),
    (lambda: T([True]) + T([True]), F.bool),
    (lambda: T([1], F.int32) + T(2.0, F.float64), F.float64),
    (lambda: T([1], F.int32) + T(2, F.int64), F.int32),
    (lambda: T(1, F.int32) + T([1], F.uint8), F.uint8),
    (lambda: T([1], F.uint8) + T([1], F.int8), F.int16),
    (lambda: T([1.0], F.float16) + T([1.0], F.bfloat16), F.float32),
    (lambda: T([True]) + 1, F.int64),
    (lambda: T([True]) + 1.5, F.float32),
    (lambda: T([1.0], F.float16) + 1.5, F.float16),
    (lambda: T([1.0], F.float16) + T(1.5, F.float64), F.float16),
    (lambda: T([1], F.int8) + T(1.5, F.float64), F.float64),
    (lambda: T([1, 2]) / T([2, 2]), F.float32),
    (lambda: T([1, 2], F.int16) * True, F.int16),
    (lambda: F.logical_and(T([1, 2]), T([1.0, 0.0])), F.bool),
    (lambda: T([1, 2]) < 1.5, F.bool),
    (lambda: T([1, 2]) ** 2.0, F.float32),
    (lambda: 2 ** T([1, 2]), F.int64),
    (lambda: 2.5 ** T([1, 2]), F.float32),
    (lambda: F.float_power(T([1.0]), 2), F.float64),
    (lambda: F.where(T([True, False]), 2, 3), F.int64),
    (lambda: F.where(T([True, False]), 2.0, 3), F.float32),
    (lambda: F.where(T([True, False]), T([1], F.int8), T([1.0], F.float16)), F.float16),
    (lambda: F.clamp(T([1, 2]), min=1.5), F.float32),
    (lambda: F.clamp(T([1, 2], F.uint8), min=-1), F.uint8),
    (lambda: F.addcmul(T([1.0]), T([1]), T([1.0], F.float64)), F.float64),
    (lambda: F.exp(T([1, 2])), F.float32),
    (lambda: F.square(T([True])), F.int64),
    (lambda: T([1], F.int32).floor(), F.int32),
    (lambda: F.atan2(T([1]), T([1])), F.float32),
    (lambda: F.copysign(T([True]), T([False])), F.float32),
    (lambda: T([5], F.uint8) & T([3], F.int8), F.int16),
    (lambda: T([True]) & 1, F.int64),
    (lambda: T([True]) & True, F.bool),
    (lambda: F.div(T([7]), 2, rounding_mode="floor"), F.int64),
    (lambda: F.div(T([7]), 2.0, rounding_mode="trunc"), F.float32),
])
def test_type_promotion(fn, expected):
    assert fn().dtype is expected


def test_promotion_values():
    u = T([250, 3], F.uint8)
    assert (u + 1000).tolist() == [(250 + 1000) % 256, (3 + 1000) % 256]
    assert (T([True, False]) + T([True, True])).tolist() == [True, True]
    assert (T([True, False]) * T([True, True])).tolist() == [True, False]
    assert (T([1], F.int32) + T(0.5, F.float64)).tolist() == [1.5]
    assert F.clamp(u, min=-1).tolist() == [255, 255]  # -1 wraps to 255, as in PyTorch


def test_default_dtype_follows():
    prev = F.get_default_dtype()
    F.set_default_dtype(F.float64)
    try:
        assert (T([1]) / 2).dtype is F.float64
        assert F.exp(T([1])).dtype is F.float64
        assert (T([1]) + 0.5).dtype is F.float64
    finally:
        F.set_default_dtype(prev)


# ---- semantics of special values and integer corner cases ---------------------------------------

nan, inf = float("nan"), float("inf")


def test_division_family_semantics():
    a = np.array([-7, -6, -1, 0, 1, 6, 7], np.int64)
    b = np.array([2, -2, 3, -3, 4, -4, 5], np.int64)
    x, y = T(a), T(b)
    assert (x // y).tolist() == (a // b).tolist()
    assert (x % y).tolist() == (a % b).tolist()
    assert F.fmod(x, y).tolist() == np.fmod(a, b).tolist()
    assert F.div(x, y, rounding_mode="trunc").tolist() == np.trunc(a / b).astype(int).tolist()
    assert F.div(x, y, rounding_mode="floor").tolist() == (a // b).tolist()
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    assert F.div(T(fa), T(fb), rounding_mode="trunc").tolist() == np.trunc(fa / fb).tolist()
    assert (T([-7.0, 7.0, -0.0, 5.0, -5.0]) // T([2.0, -2.0, 1.0, inf, inf])).tolist() == \
        [-4.0, -4.0, -0.0, 0.0, -1.0]
    assert (T([1.5, -2.5]) // 0.0).tolist() == [inf, -inf]
    r = (T([1.5, -2.5, 0.5]) % T([2.0, -2.0, -0.3])).tolist()
    np.testing.assert_allclose(r, [1.5, -0.5, -0.1], rtol=1e-6)
    assert (T([7.0, -7.0]) % inf).tolist() == [7.0, inf]
    assert np.isnan((T([1.0]) % 0.0).tolist()[0])


@pytest.mark.parametrize("dt", INTS, ids=str)
@pytest.mark.parametrize("op", [F.floor_divide, F.remainder, F.fmod,
                                lambda a, b: F.div(a, b, rounding_mode="trunc"),
                                lambda a, b: F.div(a, b, rounding_mode="floor"),
                                operator.floordiv, operator.mod])
def test_integer_division_by_zero_raises(dt, op):
    with pytest.raises(ZeroDivisionError):
        op(T([1, 2], dt), T([1, 0], dt))
    with pytest.raises(ZeroDivisionError):
        op(T([1, 2], dt), 0)


@pytest.mark.parametrize("dt", [F.int32, F.int64], ids=str)
def test_int_min_divided_by_minus_one_wraps(dt):
    m = int(np.iinfo(NP[dt]).min)
    x, y = T([m, m], dt), T([-1, -1], dt)
    assert (x // y).tolist() == [m, m]
    assert F.div(x, y, rounding_mode="trunc").tolist() == [m, m]
    assert (x % y).tolist() == [0, 0]
    assert F.fmod(x, y).tolist() == [0, 0]
    assert (x // -1).tolist() == [m, m]


def test_integer_pow():
    assert (T([-1, 1, 2, 0]) ** T([-3, -3, -1, -1])).tolist() == [-1, 1, 0, 0]
    assert (T([2], F.int8) ** T([10], F.int8)).tolist() == [0]
    assert (T([3], F.int64) ** 39).tolist() == [(3 ** 39 + 2 ** 63) % 2 ** 64 - 2 ** 63]
    assert (2 ** T([3, -1])).tolist() == [8, 0]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        T([1, 2]) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        T([1, 2]).pow_(-2)
    assert (T([4.0, 9.0]) ** 0.5).tolist() == [2.0, 3.0]
    assert (T([4.0, 0.5]) ** -1).tolist() == [0.25, 2.0]
    assert (T([1.0, 0.0]) ** -1.0).tolist() == [1.0, inf]


def test_shifts():
    assert (T([1, 2, -3]) << T([1, 64, -1])).tolist() == [2, 0, 0]
    assert (T([-8, 8]) >> T([1, 70])).tolist() == [-4, 0]
    assert (T([-8, 8], F.int8) >> T([9, 9], F.int8)).tolist() == [-1, 0]
    assert (T([1, 2, 3], F.uint8) << T([1, 9, 3], F.uint8)).tolist() == [2, 0, 24]
    assert (1 << T([0, 3])).tolist() == [1, 8]
    assert (T([255], F.uint8) >> 4).tolist() == [15]
    for bad in (T([1.0]), T([True])):
        with pytest.raises(TypeError):
            bad << bad


def test_nan_and_inf_semantics():
    x = T([nan, 1.0, -2.0])
    y = T([1.0, nan, 3.0])
    assert np.isnan(F.maximum(x, y).tolist()[:2]).all()
    assert F.fmax(x, y).tolist() == [1.0, 1.0, 3.0]
    assert F.fmin(x, y).tolist() == [1.0, 1.0, -2.0]
    assert F.sign(T([nan, -0.0, 0.0, -3.0, 2.0])).tolist() == [0.0, 0.0, 0.0, -1.0, 1.0]
    assert np.isnan(F.relu(T([nan])).item())
    assert np.isnan(F.clamp(T([nan]), 0, 1).item())
    assert np.isnan(F.clamp(T([0.5]), min=nan).item())
    assert F.signbit(T([-0.0, 0.0, -nan, nan, -inf])).tolist() == [True, False, True, False,
                                                                     True]
    assert F.frac(T([-1.5, 2.25])).tolist() == [-0.5, 0.25]
    assert np.isnan(F.frac(T([inf])).item())
    assert F.tanh(T([-0.0])).tolist() == [-0.0] and math.copysign(1, F.tanh(T([-0.0])).item()) < 0
    assert F.abs(T([-0.0])).item() == 0.0 and math.copysign(1, F.abs(T([-0.0])).item()) > 0
    assert (F.exp(T([nan, inf, -inf, 100.0, -110.0])).tolist()[1:]) == [inf, 0.0, inf, 0.0]
    assert F.sigmoid(T([-inf, inf, -100.0])).tolist()[:2] == [0.0, 1.0]
    assert F.sigmoid(T([-100.0])).item() > 0  # subnormal, not flushed to 0


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_nan_to_num_defaults(dt):
    x = T([nan, inf, -inf, 1.5]).to(dt)
    fi = F.finfo(dt)
    assert F.nan_to_num(x).double().tolist() == pytest.approx([0.0, fi.max, -fi.max, 1.5],
                                                             rel=1e-6)
    assert F.nan_to_num(x, nan=2.0, posinf=1.0, neginf=-1.0).double().tolist() == \
        [2.0, 1.0, -1.0, 1.5]
    i = T([1, 2])
    r = F.nan_to_num(i, nan=3.0)
    assert r.tolist() == [1, 2] and r.dtype is F.int64 and r.data_ptr() != i.data_ptr()


def test_round():
    assert F.round(T([0.5, 1.5, 2.5, -0.5, -2.5])).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    x = np.array([1.2345, 123.5, -0.125, 1234.5678], np.float64)
    for d in (1, 2, 3, -1, -2):
        np.testing.assert_allclose(F.round(T(x), decimals=d).tolist(), np.round(x, d),
                                   rtol=1e-12)
    assert F.round(T([1, 2]), decimals=0).tolist() == [1, 2]
    with pytest.raises(TypeError):
        F.round(T([1, 2]), decimals=1)


def test_isclose_allclose_equal():
    a = np.array([1.0, 2.0, nan, inf, -inf, 0.0, 1e-9])
    b = np.array([1.0 + 1e-6, 2.1, nan, inf, inf, 1e-8, 0.0])
    for eq_nan in (False, True):
        for rtol, atol in ((1e-5, 1e-8), (0.1, 0.0), (0.0, 0.0)):
            got = F.isclose(T(a, F.float64), T(b, F.float64), rtol=rtol, atol=atol,
                            equal_nan=eq_nan)
            assert got.tolist() == np.isclose(a, b, rtol=rtol, atol=atol,
                                              equal_nan=eq_nan).tolist()
    assert F.isclose(T([1, 5]), T([2, 5]), atol=1).tolist() == [True, True]
    assert F.isclose(T([1, 5]), T([3, 5])).tolist() == [False, True]
    assert F.allclose(T([1.0, 2.0]), T([1.0, 2.0 + 1e-7]))
    assert not F.allclose(T([1.0, 2.0]), T([1.0, 2.1]))
    assert F.equal(T([1, 2]), T([1.0, 2.0]))
    assert not F.equal(T([1, 2]), T([1, 2, 3]))
    assert not F.equal(T([1, 2]), T([1, 3]))
    with pytest.raises(RuntimeError, match="did not match"):
        F.isclose(T([1]), T([1.0]))


# ---- operators and methods ---------------------------------------------------------------------

OPERATORS = [
    (operator.add, F.add), (operator.sub, F.sub), (operator.mul, F.mul),
    (operator.truediv, F.div), (operator.floordiv, F.floor_divide), (operator.mod, F.remainder),
    (operator.pow, F.pow), (operator.and_, F.bitwise_and), (operator.or_, F.bitwise_or),
    (operator.xor, F.bitwise_xor), (operator.lshift, F.bitwise_left_shift),
    (operator.rshift, F.bitwise_right_shift), (operator.eq, F.eq), (operator.ne, F.ne),
    (operator.lt, F.lt), (operator.le, F.le), (operator.gt, F.gt), (operator.ge, F.ge),
]


@pytest.mark.parametrize("pyop, fn", OPERATORS, ids=lambda o: getattr(o, "__name__", ""))
@pytest.mark.parametrize("dt", [F.int32, F.float32], ids=str)
def test_operators_match_functions(pyop, fn, dt):
    if dt.is_floating_point and fn in (F.bitwise_and, F.bitwise_or, F.bitwise_xor,
                                       F.bitwise_left_shift, F.bitwise_right_shift):
        with pytest.raises(TypeError):
            pyop(T([1.0]), T([1.0]))
        return
    x = T([[5, 6, 7], [1, 2, 3]], dt)
    y = T([[2, 1, 3], [1, 2, 2]], dt)
    assert to_np(pyop(x, y)).tolist() == to_np(fn(x, y)).tolist()          # fast path
    assert to_np(pyop(x.t(), y.t())).tolist() == to_np(fn(x, y)).T.tolist()  # strided
    assert to_np(pyop(x, 2)).tolist() == to_np(fn(x, 2)).tolist()
    assert to_np(pyop(3, y)).tolist() == to_np(fn(3, y)).tolist()          # reflected
    assert to_np(pyop(x, y[0:1] if False else y.narrow(0, 0, 1))).tolist() == \
        to_np(fn(x, y.narrow(0, 0, 1))).tolist()


def test_unary_operators():
    x = T([1, -2])
    assert (-x).tolist() == [-1, 2] and (+x) is x and abs(x).tolist() == [1, 2]
    assert (~x).tolist() == [-2, 1]
    b = T([True, False])
    assert (~b).tolist() == [False, True]
    with pytest.raises(RuntimeError, match="bool"):
        _ = -b
    with pytest.raises(RuntimeError, match="bool"):
        _ = +b
    with pytest.raises(TypeError):
        abs(b)
    assert ((b & T([True, True])).tolist(), (b | b).tolist(), (b ^ b).tolist()) == \
        ([True, False], [True, False], [False, False])
    with pytest.raises(RuntimeError, match="Subtraction"):
        b - b
    assert (x == None) is False  # noqa: E711  (NotImplemented -> identity comparison)


INPLACE = [
    ("add_", (2,), {}), ("add_", ("t",), {"alpha": 3}), ("sub_", ("t",), {}),
    ("mul_", (2,), {}), ("div_", ("t",), {}), ("floor_divide_", ("t",), {}),
    ("remainder_", ("t",), {}), ("fmod_", (1.5,), {}), ("pow_", (2,), {}),
    ("atan2_", ("t",), {}), ("hypot_", ("t",), {}), ("copysign_", (-1.0,), {}),
    ("clamp_", (), {"min": -0.5, "max": 0.5}), ("clamp_min_", (0.0,), {}),
    ("clip_", ("t", None), {}), ("lerp_", ("t", 0.25), {}), ("addcmul_", ("t", "t"), {}),
    ("addcdiv_", ("t", "t"), {"value": 0.5}), ("eq_", ("t",), {}), ("lt_", (0.0,), {}),
    ("logical_and_", ("t",), {}), ("logical_not_", (), {}), ("exp_", (), {}),
    ("sigmoid_", (), {}), ("tanh_", (), {}), ("log1p_", (), {}), ("abs_", (), {}),
    ("neg_", (), {}), ("sign_", (), {}), ("floor_", (), {}), ("round_", (), {"decimals": 1}),
    ("relu_", (), {}), ("nan_to_num_", (), {}), ("square_", (), {}), ("reciprocal_", (), {}),
    ("sqrt_", (), {}), ("sin_", (), {}), ("frac_", (), {}), ("trunc_", (), {}),
]


@pytest.mark.parametrize("name, args, kwargs", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_methods(name, args, kwargs):
    base = np.array([[0.5, -1.25, 2.0], [3.5, 0.25, -0.75]], np.float32)
    other = np.array([[1.5, 2.0, -0.5], [0.75, 1.0, 2.5]], np.float32)
    args = [T(other) if a == "t" else a for a in args]
    x = T(base)
    expected = getattr(T(base), name[:-1])(*args, **kwargs)
    v = x._version
    ptr = x.data_ptr()
    r = getattr(x, name)(*args, **kwargs)
    assert r is x and x.data_ptr() == ptr and x._version > v
    assert x.dtype is F.float32
    np.testing.assert_allclose(to_np(x), to_np(expected.to(F.float32)), rtol=1e-6)
    # non-contiguous self
    xt = T(base.T.copy()).t()
    getattr(xt, name)(*args, **kwargs)
    np.testing.assert_allclose(to_np(xt), to_np(expected.to(F.float32)), rtol=1e-6)


def test_inplace_operators_and_versions():
    x = T([1.0, 2.0])
    v = x._version
    y = x
    x += T([1.0, 1.0])
    x -= 1
    x *= T([2.0, 2.0])
    x /= 2
    x **= 2
    x //= T([0.5, 0.5])
    x %= 3
    assert x is y and x._version == v + 7
    np.testing.assert_allclose(x.tolist(), [(1 / 0.5) % 3, (4 / 0.5) % 3])
    i = T([12, 7])
    i &= 5
    i |= 8
    i ^= T([1, 1])
    i <<= 1
    i >>= T([1, 1])
    assert i.tolist() == [((12 & 5) | 8) ^ 1, ((7 & 5) | 8) ^ 1]
    view = x.reshape(2, 1)
    view.add_(1)
    assert x._version == v + 8  # shared by views


def test_inplace_dtype_and_shape_errors():
    i = T([1, 2, 3])
    for f in (lambda: i.add_(1.5), lambda: i.div_(2), lambda: i.exp_(),
              lambda: i.clamp_(min=1.5), lambda: i.sigmoid_(), lambda: i.pow_(0.5)):
        with pytest.raises(RuntimeError, match="can't be cast"):
            f()
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.__itruediv__(2)
    assert i.tolist() == [1, 2, 3]
    assert i.floor_divide_(2).tolist() == [0, 1, 1]
    assert T([1, 2]).eq_(1).tolist() == [1, 0]
    x = T([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"\[2\].*\[3, 2\]"):
        x.add_(F.ones(3, 2))
    e = F.ones(1).expand(3)
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1)
    with pytest.raises(RuntimeError, match="float_power_"):
        T([1.0]).float_power_(2)
    d = T([2.0], F.float64)
    assert d.float_power_(2).tolist() == [4.0]


def test_inplace_aliasing():
    a = np.arange(9.0).reshape(3, 3)
    x = T(a)
    x.add_(x.t())
    assert to_np(x).tolist() == (a + a.T).tolist()
    x = T(a)
    x += x.t()
    assert to_np(x).tolist() == (a + a.T).tolist()
    base = T(np.arange(10.0))
    lo = base.as_strided((9,), (1,), 0)
    hi = base.as_strided((9,), (1,), 1)
    lo.add_(hi)
    assert base.tolist() == [float(2 * k + 1) for k in range(9)] + [9.0]
    base = T(np.arange(10.0))
    lo, hi = base.as_strided((9,), (1,), 0), base.as_strided((9,), (1,), 1)
    lo += hi  # the operator fast path must not run on partially overlapping memory
    assert base.tolist() == [float(2 * k + 1) for k in range(9)] + [9.0]
    y = T(a)
    F.exp(y, out=y)
    np.testing.assert_allclose(to_np(y), np.exp(a), rtol=1e-6)
    z = T(a)
    F.where(z > 4, z.t(), z, out=z)
    assert to_np(z).tolist() == np.where(a > 4, a.T, a).tolist()


def test_out_argument():
    x = T([1.0, 2.0])
    out = F.empty(2, dtype=F.float64)
    v = out._version
    assert F.add(x, 1, out=out) is out and out.tolist() == [2.0, 3.0] and out._version > v
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.exp(T([1, 2]), out=F.empty(2, dtype=F.int64))
    r = F.logical_and(T([1, 0]), T([1.0, 1.0]), out=F.empty(2))
    assert r.dtype is F.float32 and r.tolist() == [1.0, 0.0]
    o3 = F.empty(3)
    with pytest.warns(UserWarning, match="resized"):  # PyTorch's deprecated resize
        assert F.add(x, 1, out=o3) is o3 and o3.tolist() == [2.0, 3.0]


# ---- shapes, 0-d, empty, errors ------------------------------------------------------------

def test_zero_dim_and_empty():
    s = T(2.0)
    assert (s + s).shape == () and (s * 3).shape == () and F.exp(s).shape == ()
    assert F.where(T(True), s, 0.0).shape == ()
    assert (s + T([1.0, 2.0])).shape == (2,)
    e = F.ones(0, 3)
    assert (e + F.ones(1, 3)).shape == (0, 3)
    assert F.exp(e).shape == (0, 3) and F.clamp(e, 0, 1).shape == (0, 3)
    assert F.isclose(e, e).shape == (0, 3) and F.allclose(e, e)
    assert (F.ones(2, 0) // 2).shape == (2, 0)
    assert (T([1, 2]).reshape(2, 1, 1) + F.ones(3)).shape == (2, 1, 3)


def test_bad_broadcast_names_shapes():
    with pytest.raises(RuntimeError, match=r"add.*\[2, 3\].*\[4\]"):
        F.ones(2, 3) + F.ones(4)
    with pytest.raises(RuntimeError, match=r"where"):
        F.where(T([True, False]), F.ones(3), 0.0)


def test_errors_name_the_op():
    with pytest.raises(TypeError, match="hypot"):
        F.hypot(T([1]), T([1]))
    with pytest.raises(TypeError, match="bitwise_and"):
        F.bitwise_and(T([1.0]), T([1.0]))
    with pytest.raises(RuntimeError, match="where.*boolean"):
        F.where(T([1, 0]), T([1]), T([2]))
    with pytest.raises(RuntimeError, match="lerp"):
        F.lerp(T([1.0]), T([1.0], F.float64), 0.5)
    with pytest.raises(TypeError, match="lerp"):
        F.lerp(T([1]), T([1]), 0.5)
    with pytest.raises(RuntimeError, match="clamp"):
        F.clamp(T([1.0]))
    with pytest.raises(RuntimeError, match="overflow"):
        F.clamp(T([1], F.uint8), max=1000)
    with pytest.raises(RuntimeError, match="alpha"):
        F.add(T([1]), T([1]), alpha=0.5)
    with pytest.raises(RuntimeError, match="alpha"):
        F.add(T([1]), T([1]), alpha=2 ** 70)
    with pytest.raises(RuntimeError, match="value"):
        F.addcmul(T([1]), T([1]), T([1]), value=2 ** 70)
    with pytest.raises(TypeError, match="maximum"):
        F.maximum(T([1]), 2)
    with pytest.raises(ValueError, match="rounding_mode"):
        F.div(T([1.0]), 2, rounding_mode="round")
    with pytest.raises(TypeError):
        F.exp([1.0, 2.0])


def test_add_alpha_and_rsub():
    a, b = T([1.0, 2.0]), T([10.0, 20.0])
    assert F.add(a, b, alpha=2).tolist() == [21.0, 42.0]
    assert F.sub(a, b, alpha=0.5).tolist() == [-4.0, -8.0]
    assert F.add(T([1, 2]), T([3, 4]), alpha=3).tolist() == [10, 14]
    assert F.add(a, 3, alpha=2).tolist() == [7.0, 8.0]
    assert a.add(b.reshape(2, 1), alpha=-1).tolist() == [[-9.0, -8.0], [-19.0, -18.0]]
    assert F.rsub(a, 1).tolist() == [0.0, -1.0]


def test_add_float_alpha_on_complex():
    """A float alpha is refused only for bool/integer results; complex ones take it
    (SGD's momentum on a complex parameter)."""
    a, b = T([1 + 1j, 2 - 1j]), T([1j, 3 + 0j])
    assert F.add(a, b, alpha=0.5).tolist() == [1 + 1.5j, 3.5 - 1j]
    assert F.sub(a, b, alpha=0.5).tolist() == [1 + 0.5j, 0.5 - 1j]
    a.add_(b, alpha=0.25)
    assert a.tolist() == [1 + 1.25j, 2.75 - 1j]


def test_bool_corner_cases():
    b = T([True, False])
    assert (b ** True).tolist() == [True, False] and (b ** False).tolist() == [True, True]
    assert F.add(b, b, alpha=2).dtype is F.bool
    with pytest.raises(TypeError):
        F.clamp(b, b, b)
    assert F.clamp(b, min=0).dtype is F.int64


def test_where_moves_bits():
    x = T([-0.0, nan, 1.5], F.float32)
    r = F.where(T([True, True, False]), x, T([0.0, 0.0, 0.0]))
    assert math.copysign(1, r.tolist()[0]) < 0 and np.isnan(r.tolist()[1])
    assert r.tolist()[2] == 0.0
    for dt in (F.float16, F.bfloat16, F.float64):
        r = F.where(T([True, False]), T([-0.0, 2.0]).to(dt), 3.5)
        assert r.dtype is dt and r.float().tolist() == [0.0, 3.5]
        assert math.copysign(1, r.float().tolist()[0]) < 0


def test_div_inplace_rounding_mode():
    assert T([7, -7]).div_(2, rounding_mode="floor").tolist() == [3, -4]
    assert T([7.0, -7.0]).div_(2, rounding_mode="trunc").tolist() == [3.0, -3.0]
    assert T([7.0, -7.0]).div_(2).tolist() == [3.5, -3.5]


def test_module_level_inplace_and_aliases():
    x = T([-1.0, 2.0])
    assert F.relu_(x) is x and x.tolist() == [0.0, 2.0]
    assert F.clamp_(x, max=1.0).tolist() == [0.0, 1.0]
    assert F.arctan2 is F.atan2 and F.clip is F.clamp and F.absolute is F.abs
    assert T([3.0]).where(T([False]), T([4.0])).tolist() == [4.0]


# ---- fmath.h accuracy --------------------------------------------------------------------------

def _ulp_error(got, ref):
    """|got - ref| in units of the float32 ulp at ref (subnormal spacing below)."""
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32)
        finite = np.isfinite(ref32)
        _, e = np.frexp(np.where(finite & (ref32 != 0), ref32, 1).astype(np.float64))
        ulp = np.maximum(np.ldexp(1.0, e - 24), 2.0 ** -149)
        err = np.abs(got.astype(np.float64) - ref) / ulp
        same = (got == ref32) | (np.isnan(got) & np.isnan(ref32))
        return np.where(finite, err, np.where(same, 0, np.inf))


def _all_floats(step):
    bits = np.arange(0, 2 ** 32, step, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    return x[~np.isnan(x)]


@pytest.mark.parametrize("name, ref, max_ulp, domain", [
    ("exp", np.exp, 1.5, None),
    ("log", np.log, 1.5, "pos"),
    ("tanh", np.tanh, 2.0, None),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), 3.0, None),
    ("expm1", np.expm1, 2.0, None),
    ("log1p", np.log1p, 3.0, "gt-1"),
    ("sin", np.sin, 2.0, None),
    ("cos", np.cos, 2.0, None),
])
@c_kernels_only
def test_fmath_accuracy(name, ref, max_ulp, domain):
    x = _all_floats(1009)
    if domain == "pos":
        x = x[x > 0]
    elif domain == "gt-1":
        x = x[x > -1]
    with np.errstate(all="ignore"):
        expected = ref(x.astype(np.float64))
    fn = getattr(F, name)
    got = to_np(fn(F.from_numpy(x)))
    err = _ulp_error(got, expected)
    assert err.max() <= max_ulp, (name, float(err.max()), float(x[err.argmax()]))
    # the strided (scalar) loop computes the same function
    xs = x[: 20000 * 2: 2]
    got_s = to_np(fn(F.from_numpy(x[: 20000 * 2]).as_strided((20000,), (2,), 0)))
    with np.errstate(all="ignore"):
        assert _ulp_error(got_s, ref(xs.astype(np.float64))).max() <= max_ulp
    # special values
    sp = np.array([nan, inf, -inf, 0.0, -0.0], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(to_np(fn(F.from_numpy(sp))),
                                      ref(sp.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_large_arguments_and_inplace(name):
    # beyond 1e6 the kernel falls back to libm in a second pass over the output
    x = np.array([0.5, 1e6, 1.5e6, 3e7, -1e30, np.inf, -np.inf, np.nan, 2.0, -0.0], np.float32)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x.astype(np.float64))
    got = to_np(getattr(F, name)(F.from_numpy(x)))
    assert _ulp_error(got, ref).max() <= 2
    t = F.from_numpy(x.copy())
    getattr(t, name + "_")()  # in-place: the fix-up pass must not read overwritten inputs
    np.testing.assert_array_equal(to_np(t), got)
    for dt in (F.float16, F.bfloat16):
        h = F.from_numpy(x[[0, 1, 5, 7, 8]]).to(dt)
        g = getattr(F, name)(h).float().numpy()
        with np.errstate(all="ignore"):
            r = getattr(np, name)(h.float().numpy().astype(np.float64))
        np.testing.assert_allclose(g, r, rtol=1e-2, atol=1e-2, equal_nan=True)


def test_fmath_log_negative_and_subnormal():
    x = np.array([-1.0, -1e-40, 1e-40, 1e-45, 3e-39], np.float32)
    got = to_np(F.log(F.from_numpy(x)))
    assert np.isnan(got[:2]).all()
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got[2:], np.log(x[2:].astype(np.float64)), rtol=1e-6)


# ---- the operator fast paths agree with the general path ------------------------------------

SCALAR_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.mod, operator.pow, operator.and_, operator.or_, operator.xor,
              operator.lshift, operator.rshift, operator.lt, operator.eq, operator.ge]


def _outcome(f, *args, **kwargs):
    try:
        r = f(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the error type must agree too)
        return type(e).__name__
    return r.dtype, to_np(r).tolist()


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("scalar", [3, -2, 0, 2.5, True, 2 ** 70])
def test_scalar_operator_fast_paths(dt, scalar):
    base = np.array([[1, 2, 3], [4, 5, 6]]) if dt is not F.bool else np.array([[1, 0, 1]] * 2)
    x = T(base, dt)                            # contiguous: fast path
    xs = T(np.ascontiguousarray(base.T), dt).t()  # strided: the general path
    for op in SCALAR_OPS:
        for u, v in (((x, scalar), (xs, scalar)), ((scalar, x), (scalar, xs))):
            a, b = _outcome(op, *u), _outcome(op, *v)
            assert a == b or (isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and
                              np.allclose(a[1], b[1], equal_nan=True)), (op, a, b)
    for name in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                 "__imod__", "__iand__", "__ior__", "__ixor__", "add_", "mul_", "div_"):
        y, ys = T(base, dt), T(np.ascontiguousarray(base.T), dt).t()
        a = _outcome(getattr(y, name), scalar)
        b = _outcome(getattr(ys, name), scalar)
        assert a == b or (isinstance(a, tuple) and a[0] == b[0] and
                          np.allclose(a[1], b[1], equal_nan=True)), (name, a, b)


FUNCTIONAL = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow",
              "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor",
              "bitwise_left_shift", "bitwise_right_shift", "maximum", "atan2"]
TENSOR_FORMS = ([(op.__name__, op) for op in SCALAR_OPS + [operator.ne, operator.le, operator.gt]]
                + [(name, getattr(F, name)) for name in FUNCTIONAL])


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_tensor_operator_fast_paths(dt):
    # each generated operator method's tensor-tensor hot path (same dtype and shape, both
    # contiguous), and each functional form that binary() hands to it, against the general
    # path on a strided copy: dtype, values and errors agree (integer true division promotes
    # to float, predicates give bool)
    rng = np.random.default_rng(7)
    base = rng.integers(1, 6, (3, 4)) if dt is not F.bool else rng.integers(0, 2, (3, 4))
    other = rng.integers(1, 4, (3, 4)) if dt is not F.bool else rng.integers(0, 2, (3, 4))
    x, y = T(base, dt), T(other, dt)
    xs = T(np.ascontiguousarray(base.T), dt).t()
    for name, f in TENSOR_FORMS:
        a, b = _outcome(f, x, y), _outcome(f, xs, y)
        assert a == b or (isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and
                          np.allclose(a[1], b[1], equal_nan=True)), (name, a, b)


def test_operator_result_layout():
    # a contiguous operand whose size-1 dimension has an odd stride: the result has the
    # row-major strides of its shape, as torch gives, and is contiguous CPU memory
    x = F.arange(35.0).reshape(5, 7)[2:3, :4]
    assert x.stride() == (7, 1) and x.is_contiguous()
    for r in (x + x, x * 2.0, x == x, 1 - x):
        assert r.stride() == (4, 1) and r.is_contiguous()
        assert r._cpu_contig is not XP_HOST  # the C fast path's flag (off under xp)
        assert to_np(r).shape == (1, 4)
    np.testing.assert_array_equal(to_np(x + x), 2 * np.arange(14.0, 18.0)[None])
    # the fast-path flag follows contiguity through views
    z = F.arange(24.0).reshape(2, 3, 4)
    for v in (z, z[0], z[:, 1], z.t() if z.ndim == 2 else z.transpose(0, 2), z[..., :2],
              z.view(6, 4), z[None], z[1:, 1:2]):
        assert v._cpu_contig == (v.is_contiguous() and not XP_HOST), v.shape


def test_operator_strides_table_starts_over_when_full():
    from fiamma import _tensor

    saved = dict(_tensor._STRIDES)
    try:
        _tensor._STRIDES.update({(i, 1, 1, 1): (1, 1, 1, 1) for i in range(5000)})
        _tensor._STRIDES.pop((3, 5), None)
        x = F.ones(3, 5)  # a shape the full table lacks: it starts over with this one
        assert len(_tensor._STRIDES) <= 4096
        del _tensor._STRIDES[(3, 5)]
        r = x + x  # the operator path fills it in too
        assert r.stride() == (5, 1) and _tensor._STRIDES[(3, 5)] == (5, 1)
    finally:
        _tensor._STRIDES.clear()
        _tensor._STRIDES.update(saved)


@pytest.mark.parametrize("dt", [F.int64, F.float32], ids=str)
def test_add_sub_alpha_fast_path(dt):
    base = np.array([1, 2, 3])
    for alpha in (2, -3, 0.5):
        for name in ("add_", "sub_"):
            y, ys = T(base, dt), T(np.repeat(base, 2), dt).as_strided((3,), (2,), 0)
            o = T([10, 20, 30], dt)
            a = _outcome(getattr(y, name), o, alpha=alpha)
            b = _outcome(getattr(ys, name), o, alpha=alpha)
            assert a == b, (name, alpha, a, b)


def test_broadcast_pair_matches_numpy_and_broadcast_shapes():
    from fiamma._ops._common import broadcast_pair, broadcast_shapes

    rng = np.random.default_rng(11)
    for _ in range(300):
        na, nb = rng.integers(0, 5, 2)
        sa = tuple(int(v) for v in rng.choice([0, 1, 2, 3], na))
        sb = tuple(int(v) for v in rng.choice([0, 1, 2, 3], nb))
        try:
            ref = np.broadcast_shapes(sa, sb)
        except ValueError:
            with pytest.raises(RuntimeError) as e1:
                broadcast_pair(sa, sb, "add")
            with pytest.raises(RuntimeError) as e2:
                broadcast_shapes(sa, sb, op="add")
            assert str(e1.value) == str(e2.value) and "add" in str(e1.value)
            continue
        assert broadcast_pair(sa, sb, "add") == ref == broadcast_shapes(sa, sb, op="add")



def test_broadcast_clash_reported_at_the_trailing_dim():
    # PyTorch names the last clashing dim: (4, 16, 32) + (17, 16) clashes at dims 1 and 2
    with pytest.raises(RuntimeError, match=r"add: The size of tensor a \(32\) must match the "
                                           r"size of tensor b \(16\) at non-singleton "
                                           r"dimension 2"):
        F.ones(4, 16, 32) + F.ones(17, 16)
    with pytest.raises(RuntimeError, match=r"tensor a \(3\) .* tensor b \(4\) at "
                                           r"non-singleton dimension 2"):
        F.ones(5, 1, 3).mul(F.ones(2, 4))


# ---- the deprecated (alpha, other) overload of add / sub -------------------------------------

def test_add_sub_deprecated_alpha_first_overload():
    """``p.data.add_(-lr, grad)`` (old tutorials): the number is alpha, with PyTorch's
    deprecation warning; the result equals the ``alpha=`` form."""
    x = F.tensor([1.0, 2.0, 3.0])
    g = F.tensor([10.0, 20.0, 30.0])
    with pytest.warns(UserWarning, match=r"overload of add_ is deprecated"):
        y = x.clone().add_(-0.5, g)
    assert y.tolist() == [-4.0, -8.0, -12.0]
    with pytest.warns(UserWarning, match=r"overload of sub_ is deprecated"):
        assert x.clone().sub_(2, g).tolist() == [-19.0, -38.0, -57.0]
    with pytest.warns(UserWarning, match=r"overload of add is deprecated"):
        assert F.add(x, 2, g).tolist() == [21.0, 42.0, 63.0]
    with pytest.warns(UserWarning, match=r"overload of sub is deprecated"):
        assert x.sub(2, g).tolist() == [-19.0, -38.0, -57.0]


@pytest.mark.parametrize("call", [
    lambda x: x.add_(x, x),            # two tensors
    lambda x: x.add_(2, "3"),          # a number and a string (two numbers: test_edge_semantics)
    lambda x: x.add(2, x, alpha=2),    # alpha twice
    lambda x: F.sub(x, 2, x, x),       # too many
])
def test_add_sub_deprecated_overload_bad_arguments(call):
    with pytest.raises(TypeError, match=r"(add|sub)_?\(\): expected \(Tensor other"):
        call(F.ones(2))


@pytest.mark.parity
def test_add_deprecated_overload_matches_torch():
    torch = pytest.importorskip("torch")
    x, g = np.array([1.0, -2.0], np.float32), np.array([0.25, 4.0], np.float32)
    with pytest.warns(UserWarning):
        want = torch.tensor(x).add_(-0.1, torch.tensor(g)).numpy()
    with pytest.warns(UserWarning):
        got = F.tensor(x).add_(-0.1, F.tensor(g)).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", [F.bfloat16, F.float16])
@pytest.mark.parametrize("w", [0.1, 0.7])
def test_lowp_lerp_keeps_a_number_weight_in_float(dt, w):
    # PyTorch computes half/bfloat16 lerp in float with the weight as a float and rounds once;
    # rounding the weight to bfloat16 first (0.1 -> 0.10009765625) changed ~10-40 % of results
    # by an ulp (timm's Adafactor-BV keeps its momentum in bfloat16)
    rs = np.random.RandomState(0)
    a = F.tensor(rs.randn(500).astype(np.float32)).to(dt)
    b = F.tensor(rs.randn(500).astype(np.float32)).to(dt)
    a32, b32 = a.float().numpy(), b.float().numpy()
    wf = np.float32(w)
    ref = np.where(abs(wf) < 0.5, a32 + wf * (b32 - a32),
                   b32 - (b32 - a32) * (np.float32(1) - wf))
    expected = F.tensor(ref.astype(np.float32)).to(dt)
    assert F.equal(F.lerp(a, b, w), expected)
    c = a.clone()
    c.lerp_(b, w)
    assert F.equal(c, expected)
    out = F.empty(500, dtype=dt)
    assert F.lerp(a, b, w, out=out) is out and F.equal(out, expected)
    # the same values with the weight as a tensor of the dtype are PyTorch's other path
    assert F.lerp(a, b, F.tensor(w)).dtype is dt
