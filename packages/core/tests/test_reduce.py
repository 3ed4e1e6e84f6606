"""Reductions, scans and softmax against NumPy / float64 references: every dtype, random shapes
(0-d, empty, size-1 dims), awkward layouts (transposed, strided, offset, expanded), dim as
None / int / negative / tuple, keepdim; plus accuracy, threading-sized inputs, NaN and tie
rules, dtype rules and errors."""

import math

import numpy as np
import pytest
from conftest import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    LAYOUTS,
    NP_DTYPE,
    assert_close,
    make_pair,
    shapes,
    to_numpy,
    to_tensor,
)
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma._lib import ffi, lib

SETTINGS = settings(max_examples=60, deadline=None)
NUMERIC = [d for d in ALL_DTYPES if d is not fiamma.bool]

# precision of a dtype's stored values, and of the accumulator its reductions use
EPS = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24, "float64": 2.0 ** -53}
ACC_EPS = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -24, "float32": 2.0 ** -24,
           "float64": 2.0 ** -53}


@st.composite
def cases(draw, dtypes=ALL_DTYPES, min_side=0, layouts=LAYOUTS + ["expanded"]):
    """(tensor, array, dim, keepdim): dim is None, an int (maybe negative) or a tuple."""
    shape = draw(shapes(max_side=5, min_side=min_side))
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(layouts))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    if layout == "expanded" and shape and shape[0] != 0:
        base, a = make_pair((1,) + shape[1:], dtype, rng, "contiguous")
        t = base.expand(shape)
        a = np.broadcast_to(a, shape).copy()
    else:
        t, a = make_pair(shape, dtype, rng, "contiguous" if layout == "expanded" else layout)
    nd = len(shape)
    kind = draw(st.sampled_from(["none", "int", "tuple", "empty_tuple"]))
    if kind == "none" or nd == 0 and kind != "int":
        dim = None
    elif kind == "int":
        dim = draw(st.integers(-max(nd, 1), max(nd, 1) - 1))
    elif kind == "empty_tuple":
        dim = ()
    else:
        dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        dim = tuple(d - nd if draw(st.booleans()) else d for d in dims)
    return t, a, dim, draw(st.booleans())


def np_axes(dim, nd):
    """NumPy axis argument for a fiamma dim argument."""
    if dim is None or dim == ():
        return None
    if nd == 0:
        return None
    if isinstance(dim, int):
        return (dim % nd,)
    return tuple(d % nd for d in dim)


def keep_shape(a, axes, keepdim):
    """The expected result shape."""
    if axes is None:
        return (1,) * a.ndim if keepdim else ()
    return tuple(1 if i in axes else s for i, s in enumerate(a.shape) if keepdim or i not in axes)


def check_float(got, ref, dtype, abs_scale, n_terms=1, extra=0.0):
    """Compare a float result with a float64 reference: rounding of the result to ``dtype`` plus
    accumulation error proportional to ``abs_scale`` (e.g. sum of |x|)."""
    g = to_numpy(got).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert g.shape == ref.shape, (g.shape, ref.shape)
    tol = (2 * EPS[dtype.name] * np.abs(ref) + 8 * ACC_EPS[dtype.name] * max(n_terms, 1) *
           np.asarray(abs_scale) + extra + 1e-300)
    with np.errstate(over="ignore"):  # a result beyond float16's range is inf
        rounded = ref.astype(np.float16) if dtype is fiamma.float16 else ref
    ok = (np.abs(g - ref) <= tol) | (np.isnan(g) & np.isnan(ref)) | (g == ref) | (g == rounded)
    assert ok.all(), f"max err {np.nanmax(np.abs(g - ref))}\ngot {g}\nref {ref}"


def f64(a):
    return np.asarray(a, dtype=np.float64)


# ---- sum / nansum / mean / prod ----------------------------------------------------------------

@SETTINGS
@given(cases())
def test_sum_matches_numpy(case):
    t, a, dim, keepdim = case
    axes = np_axes(dim, a.ndim)
    res = fiamma.sum(t, dim, keepdim) if dim is not None else t.sum(keepdim=keepdim)
    assert tuple(res.shape) == keep_shape(a, axes, keepdim)
    if t.dtype.is_floating_point:
        assert res.dtype is t.dtype
        ref = f64(a).sum(axis=axes, keepdims=keepdim)
        n = a.size // max(ref.size, 1)
        check_float(res, ref, t.dtype, np.abs(f64(a)).sum(axis=axes, keepdims=keepdim),
                    math.log2(n + 1) + 1)
    else:
        assert res.dtype is fiamma.int64
        ref = a.astype(np.int64).sum(axis=axes, keepdims=keepdim)
        np.testing.assert_array_equal(to_numpy(res), ref)


@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES))
def test_nansum_nanmean_ignore_nan(case):
    t, a, dim, keepdim = case
    if a.size:  # put NaNs in a copy (the view may be expanded/strided: go through NumPy)
        a = a.copy()
        a.reshape(-1)[:: 3] = np.nan
        t = to_tensor(a, t.dtype)
    axes = np_axes(dim, a.ndim)
    ref = np.nansum(f64(a), axis=axes, keepdims=keepdim)
    scale = np.nansum(np.abs(f64(a)), axis=axes, keepdims=keepdim)
    check_float(t.nansum(dim, keepdim), ref, t.dtype, scale, 8)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_m = np.nanmean(f64(a), axis=axes, keepdims=keepdim)
    res = fiamma.nanmean(t, dim, keepdim)
    assert res.dtype is t.dtype
    check_float(res, ref_m, t.dtype, np.abs(np.nan_to_num(ref_m)), 8, extra=1e-6)


@SETTINGS
@given(cases(dtypes=NUMERIC))
def test_nansum_of_integers_is_sum(case):
    t, a, dim, keepdim = case
    if t.dtype.is_floating_point:
        return
    axes = np_axes(dim, a.ndim)
    res = t.nansum(dim, keepdim)
    assert res.dtype is fiamma.int64
    np.testing.assert_array_equal(to_numpy(res), a.astype(np.int64).sum(axis=axes,
                                                                          keepdims=keepdim))


@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES))
def test_mean_matches_numpy(case):
    t, a, dim, keepdim = case
    axes = np_axes(dim, a.ndim)
    res = t.mean(dim, keepdim)
    assert res.dtype is t.dtype
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = f64(a).mean(axis=axes, keepdims=keepdim)
            scale = np.abs(f64(a)).mean(axis=axes, keepdims=keepdim)
    check_float(res, ref, t.dtype, np.nan_to_num(scale), 8)


@SETTINGS
@given(cases(), st.booleans())
def test_prod_matches_numpy(case, small):
    t, a, dim, keepdim = case
    axes = np_axes(dim, a.ndim)
    if t.dtype.is_floating_point:
        # values near 1 so products stay in range
        rng = np.random.default_rng(a.size)
        a = rng.uniform(0.5, 1.5, size=a.shape).astype(NP_DTYPE[t.dtype])
        if t.dtype is fiamma.bfloat16:
            from conftest import round_bf16

            a = round_bf16(a)
        t = to_tensor(a, t.dtype).transpose(0, -1) if a.ndim > 1 else to_tensor(a, t.dtype)
        a = np.swapaxes(a, 0, -1) if a.ndim > 1 else a
        res = t.prod(dim, keepdim)
        assert res.dtype is t.dtype
        ref = f64(a).prod(axis=axes, keepdims=keepdim)
        check_float(res, ref, t.dtype, np.abs(ref), a.size + 1)
    else:
        res = t.prod(dim, keepdim)
        assert res.dtype is fiamma.int64
        np.testing.assert_array_equal(to_numpy(res), a.astype(np.int64).prod(axis=axes,
                                                                               keepdims=keepdim))


def test_sum_dtype_rules():
    b = fiamma.tensor([True, True, False])
    assert b.sum().dtype is fiamma.int64 and b.sum().item() == 2
    i = fiamma.tensor([1, 2, 3], dtype=fiamma.int32)
    assert i.sum().dtype is fiamma.int64
    assert i.sum(dtype=fiamma.int32).dtype is fiamma.int32
    assert i.sum(dtype=fiamma.float64).dtype is fiamma.float64
    assert i.prod().dtype is fiamma.int64 and i.prod().item() == 6
    h = fiamma.tensor([1.0, 2.0], dtype=fiamma.float16)
    assert h.sum().dtype is fiamma.float16 and h.sum(dtype=fiamma.float32).dtype is fiamma.float32
    # int8 values sum past int8 without wrapping
    assert fiamma.tensor([100, 100, 100], dtype=fiamma.int8).sum().item() == 300
    # int64 wraps like PyTorch (no trap)
    big = fiamma.tensor([2 ** 62, 2 ** 62, 2 ** 62])
    assert big.sum().item() == np.array([2 ** 62] * 3, dtype=np.int64).sum()
    assert big.prod().item() == 0


def test_mean_dtype_rules():
    i = fiamma.tensor([1, 2, 4])
    with pytest.raises(RuntimeError, match="mean"):
        i.mean()
    with pytest.raises(RuntimeError, match="mean"):
        fiamma.mean(i, dim=0)
    assert i.mean(dtype=fiamma.float64).dtype is fiamma.float64
    assert abs(i.mean(dtype=fiamma.float64).item() - 7 / 3) < 1e-15
    with pytest.raises(RuntimeError, match="mean"):
        fiamma.tensor([1.0]).mean(dtype=fiamma.int64)
    with pytest.raises(RuntimeError, match="nanmean"):
        i.nanmean()


def test_sum_of_ten_million_float32_is_accurate():
    rng = np.random.default_rng(1)
    a = (1.0 + rng.uniform(-0.01, 0.01, size=10_000_000)).astype(np.float32)
    ref = a.astype(np.float64).sum()
    t = fiamma.from_numpy(a)
    assert abs(t.sum().item() - ref) / ref < 2e-7
    assert abs(t.mean().item() - ref / a.size) < 2e-7
    # the outer shape (reduce the leading dim) and the rows shape, many rows per output
    m = a.reshape(100_000, 100)
    ref0 = m.astype(np.float64).sum(0)
    assert np.abs(fiamma.from_numpy(m).sum(0).numpy() - ref0).max() / ref0.max() < 1e-6
    ref1 = m.astype(np.float64).sum(1)
    assert np.abs(fiamma.from_numpy(m).sum(1).numpy() - ref1).max() / ref1.max() < 1e-6
    # float16 accumulates in float32
    h = fiamma.ones(60_000, dtype=fiamma.float16)
    assert h.sum().item() == 60_000 and h.sum(dtype=fiamma.float32).item() == 60_000
    assert fiamma.ones(70_000, dtype=fiamma.float16).sum().item() == math.inf


# ---- max / min / argmax / argmin / aminmax ---------------------------------------------------

def with_nans(t, a, rng):
    if a.size and t.dtype.is_floating_point and rng.random() < 0.5:
        a = a.copy()
        a.reshape(-1)[rng.integers(0, a.size, size=max(1, a.size // 7))] = np.nan
        t = to_tensor(a, t.dtype)
    return t, a


@SETTINGS
@given(cases(), st.integers(0, 2 ** 32 - 1))
def test_amax_amin_match_numpy(case, seed):
    t, a, dim, keepdim = case
    t, a = with_nans(t, a, np.random.default_rng(seed))
    axes = np_axes(dim, a.ndim)
    red = [s for i, s in enumerate(a.shape) if axes is None or i in axes]
    for fn, ref_fn, name in ((fiamma.amax, np.max, "amax"), (fiamma.amin, np.min, "amin")):
        if 0 in red or (a.size == 0 and axes is None):
            with pytest.raises(IndexError, match=name):
                fn(t, dim if dim is not None else (), keepdim)
            continue
        res = fn(t, dim if dim is not None else (), keepdim)
        assert res.dtype is t.dtype
        ref = ref_fn(a, axis=axes, keepdims=keepdim)
        assert_close(res, ref, t.dtype, rtol=0, atol=0)


def argext_ref(a, axis, fn):
    return fn(a, axis=axis)


@SETTINGS
@given(cases(min_side=1), st.integers(0, 2 ** 32 - 1))
def test_max_min_dim_and_argmax_match_numpy(case, seed):
    t, a, dim, keepdim = case
    rng = np.random.default_rng(seed)
    if t.dtype.is_floating_point:  # small integers make ties likely
        a = rng.integers(-3, 3, size=a.shape).astype(a.dtype)
        t = to_tensor(a, t.dtype)
    t, a = with_nans(t, a, rng)
    nd = a.ndim
    d = dim if isinstance(dim, int) else 0
    ax = d % nd if nd else None
    for fn, arg, npf, name in ((fiamma.max, fiamma.argmax, np.argmax, "max"),
                               (fiamma.min, fiamma.argmin, np.argmin, "min")):
        values, indices = fn(t, d, keepdim)
        res = fn(t, dim=d, keepdim=keepdim)
        assert res.values is not None and res.indices.dtype is fiamma.int64
        assert type(res).__name__ == name
        ref_i = npf(a, axis=ax) if nd else np.array(0)
        ref_v = np.take_along_axis(a, np.expand_dims(ref_i, ax), ax).squeeze(ax) if nd else a
        if keepdim and nd:
            ref_i = np.expand_dims(ref_i, ax)
            ref_v = np.expand_dims(ref_v, ax)
        np.testing.assert_array_equal(to_numpy(indices), ref_i)
        assert_close(values, ref_v, t.dtype, rtol=0, atol=0)
        assert_close(arg(t, d, keepdim), ref_i, fiamma.int64)
        # dim=None: index into the flattened tensor
        flat = arg(t)
        assert flat.shape == () and flat.item() == npf(a.reshape(-1))
        assert arg(t, keepdim=True).shape == (1,) * nd
        # the 0-d form
        full = fn(t)
        assert full.shape == () and full.dtype is t.dtype
        assert_close(full, npf and (np.max(a) if name == "max" else np.min(a)), t.dtype,
                     rtol=0, atol=0)


@SETTINGS
@given(cases(min_side=1, dtypes=NUMERIC))
def test_aminmax(case):
    t, a, dim, keepdim = case
    d = dim if isinstance(dim, int) else None
    lo, hi = fiamma.aminmax(t, dim=d, keepdim=keepdim)
    res = t.aminmax(dim=d, keepdim=keepdim)
    assert res.min.dtype is t.dtype and res.max.shape == hi.shape
    ax = None if d is None or a.ndim == 0 else d % a.ndim
    keep = keepdim and a.ndim > 0
    assert_close(lo, np.min(a, axis=ax, keepdims=keep), t.dtype)
    assert_close(hi, np.max(a, axis=ax, keepdims=keep), t.dtype)


def test_argmax_ties_and_nan():
    nan = float("nan")
    assert fiamma.tensor([1.0, 3.0, 3.0, 2.0]).argmax().item() == 1
    assert fiamma.tensor([1.0, 1.0, 1.0]).argmin().item() == 0
    assert fiamma.tensor([1.0, nan, 5.0, nan]).argmax().item() == 1
    assert fiamma.tensor([1.0, nan, -5.0, nan]).argmin().item() == 1
    assert math.isnan(fiamma.tensor([1.0, nan, 5.0]).max().item())
    assert math.isnan(fiamma.tensor([1.0, nan, 5.0]).amin().item())
    assert fiamma.tensor([-math.inf, -math.inf]).argmax().item() == 0
    assert fiamma.tensor([math.inf, math.inf]).argmin().item() == 0
    v, i = fiamma.tensor([[2, 5, 5], [7, 7, 1]]).max(1)
    assert v.tolist() == [5, 7] and i.tolist() == [1, 0]
    # long rows: the vectorised search and the threaded split keep the first occurrence
    for n in (31, 32, 33, 1000, 300_001):
        a = np.zeros(n, dtype=np.float32)
        a[n // 3] = a[n - 1] = 7.0
        t = fiamma.from_numpy(a)
        assert t.argmax().item() == n // 3
        assert t.max(0).indices.item() == n // 3
        a[n // 2] = np.nan
        a[n - 2] = np.nan
        assert fiamma.from_numpy(a).argmax().item() == n // 2
        assert fiamma.from_numpy(a).argmin().item() == n // 2
    # the outer shape (reduce dim 0 of a row-major matrix) breaks ties the same way
    m = np.zeros((50, 40), dtype=np.float32)
    m[7, :] = 1.0
    m[20, :] = 1.0
    m[3, 5] = np.nan
    m[30, 5] = np.nan
    r = fiamma.from_numpy(m).argmax(0).tolist()
    assert r[5] == 3 and all(r[j] == 7 for j in range(40) if j != 5)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_argmax_first_occurrence_in_long_rows(dtype):
    rng = np.random.default_rng(7)
    for n in (600, 1500, 5000):
        a = rng.integers(0, 2 if dtype is fiamma.bool else 4, size=(3, n))
        t = to_tensor(a, dtype)
        np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
        np.testing.assert_array_equal(t.argmin(1).numpy(), a.argmin(1))
        np.testing.assert_array_equal(t.max(1).indices.numpy(), a.argmax(1))
        np.testing.assert_array_equal(t.t().argmax(0).numpy(), a.argmax(1))


def test_max_on_bool_and_max_of_two_tensors():
    b = fiamma.tensor([False, True, False])
    assert b.max().item() is True and b.max().dtype is fiamma.bool
    assert b.argmax().item() == 1 and b.min(0).indices.item() == 0
    x = fiamma.tensor([1.0, 5.0, 2.0])
    y = fiamma.tensor([3.0, 0.0, 2.5])
    assert fiamma.max(x, y).tolist() == [3.0, 5.0, 2.5]
    assert x.min(y).tolist() == [1.0, 0.0, 2.0]


def test_return_types_unpack_and_attributes():
    x = fiamma.tensor([[1.0, 4.0], [3.0, 2.0]])
    res = x.max(dim=0)
    values, indices = res
    assert values.tolist() == res.values.tolist() == [3.0, 4.0]
    assert indices.tolist() == res.indices.tolist() == [1, 0]
    assert isinstance(res, fiamma.return_types.max)
    assert isinstance(x.min(1), fiamma.return_types.min)
    mm = x.aminmax()
    assert (mm.min.item(), mm.max.item()) == (1.0, 4.0)
    lo, hi = mm
    assert lo.item() == 1.0 and hi.item() == 4.0


# ---- var / std -------------------------------------------------------------------------------

@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES), st.sampled_from([0, 1, 2]), st.booleans())
def test_var_std_match_numpy(case, correction, legacy):
    t, a, dim, keepdim = case
    axes = np_axes(dim, a.ndim)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = a.size // max(np.ones(a.shape).sum(axis=axes).size, 1) if a.size else 0
            x = f64(a)
            m = x.mean(axis=axes, keepdims=True)
            ss = ((x - m) ** 2).sum(axis=axes, keepdims=keepdim)
            dof = max(n - correction, 0)
            ref_v = ss / dof if dof else ss * np.nan if n == 0 else ss / 0.0
            scale = (np.abs(x) ** 2).sum(axis=axes, keepdims=keepdim) / max(dof, 1)
    if legacy and correction in (0, 1):
        v = t.var(dim, bool(correction), keepdim)
        s = fiamma.std(t, dim, unbiased=bool(correction), keepdim=keepdim)
    else:
        v = t.var(dim, keepdim=keepdim, correction=correction)
        s = t.std(dim, correction=correction, keepdim=keepdim)
    assert v.dtype is t.dtype and s.dtype is t.dtype
    with np.errstate(all="ignore"):
        check_float(v, ref_v, t.dtype, np.nan_to_num(scale), 16)
        check_float(s, np.sqrt(ref_v), t.dtype, np.sqrt(np.nan_to_num(scale)), 16)
    vm = fiamma.var_mean(t, dim, keepdim=keepdim, correction=correction)
    sm = fiamma.std_mean(t, dim, keepdim=keepdim, correction=correction)
    assert_close(vm[0], to_numpy(v), t.dtype)
    assert_close(sm[0], to_numpy(s), t.dtype)
    assert_close(vm[1], to_numpy(t.mean(dim, keepdim)), t.dtype)
    assert sm[1].shape == v.shape


def test_var_rules():
    x = fiamma.tensor([1.0, 2.0, 3.0, 4.0])
    assert abs(x.var().item() - 5 / 3) < 1e-6
    assert abs(x.var(False).item() - 1.25) < 1e-6  # legacy positional unbiased
    assert abs(x.var(unbiased=False).item() - 1.25) < 1e-6
    assert abs(x.std(correction=0).item() - math.sqrt(1.25)) < 1e-6
    assert math.isnan(fiamma.tensor([1.0]).var().item())
    assert math.isinf(fiamma.tensor([1.0, 2.0]).var(correction=3).item())
    with pytest.raises(RuntimeError, match="var"):
        fiamma.tensor([1, 2]).var()
    with pytest.raises(RuntimeError, match="std"):
        fiamma.tensor([1, 2]).std()
    with pytest.raises(RuntimeError, match="var"):
        x.var(unbiased=True, correction=1)
    # a large offset does not swamp the variance (two-pass)
    rng = np.random.default_rng(3)
    a = (1e4 + rng.standard_normal(100_000)).astype(np.float32)
    ref = a.astype(np.float64).var(ddof=1)
    assert abs(fiamma.from_numpy(a).var().item() - ref) / ref < 1e-3


# ---- norm ------------------------------------------------------------------------------------

def norm_ref(x, p, axes, keepdim):
    ax = np.abs(x)
    if p == "fro" or p == 2:
        return np.sqrt((ax ** 2).sum(axis=axes, keepdims=keepdim))
    if p == math.inf:
        return ax.max(axis=axes, keepdims=keepdim)
    if p == -math.inf:
        return ax.min(axis=axes, keepdims=keepdim)
    if p == 0:
        return (x != 0).sum(axis=axes, keepdims=keepdim).astype(np.float64)
    return ((ax ** p).sum(axis=axes, keepdims=keepdim)) ** (1.0 / p)


@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES), st.sampled_from(["fro", 1, 2, 3, 0.5, 0, math.inf,
                                                     -math.inf]))
def test_norm_matches_numpy(case, p):
    t, a, dim, keepdim = case
    axes = np_axes(dim, a.ndim)
    if p == "fro" and isinstance(dim, tuple) and len(dim) > 2:
        with pytest.raises(RuntimeError, match="norm"):
            t.norm(p, dim, keepdim)
        return
    red = [s for i, s in enumerate(a.shape) if axes is None or i in axes]
    if p in (math.inf, -math.inf) and 0 in red:
        with pytest.raises(RuntimeError, match="norm"):
            t.norm(p, dim, keepdim)
        return
    res = t.norm(p, dim, keepdim)
    assert res.dtype is t.dtype
    ref = norm_ref(f64(a), p, axes, keepdim)
    check_float(res, ref, t.dtype, np.abs(ref), 8)


def test_norm_rules():
    x = fiamma.tensor([[3.0, -4.0], [0.0, 0.0]])
    assert x.norm().item() == 5.0
    assert fiamma.norm(x, p=1).item() == 7.0
    assert x.norm(float("inf")).item() == 4.0
    assert x.norm(0).item() == 2.0
    assert x.norm(dim=1).tolist() == [5.0, 0.0]
    assert x.norm(p="fro", dim=(0, 1), keepdim=True).shape == (1, 1)
    h = x.to(fiamma.float16)
    assert h.norm(dtype=fiamma.float32).dtype is fiamma.float32
    with pytest.raises(RuntimeError, match="norm"):
        fiamma.tensor([1, 2]).norm()
    assert x.norm("nuc").item() == pytest.approx(5.0)  # computed by fiamma.linalg


# ---- all / any / count_nonzero ---------------------------------------------------------------

@SETTINGS
@given(cases(), st.integers(0, 2 ** 32 - 1))
def test_all_any_count_nonzero(case, seed):
    t, a, dim, keepdim = case
    rng = np.random.default_rng(seed)
    if a.size:  # plenty of zeros, sometimes none
        a = a.copy()
        if rng.random() < 0.7:
            a.reshape(-1)[rng.random(a.size) < 0.5] = 0
        else:
            a.reshape(-1)[a.reshape(-1) == 0] = 1
        if t.dtype.is_floating_point and rng.random() < 0.3:
            a.reshape(-1)[0] = np.nan
        t = to_tensor(a, t.dtype)
    axes = np_axes(dim, a.ndim)
    out_dt = fiamma.uint8 if t.dtype is fiamma.uint8 else fiamma.bool
    for fn, npf in ((fiamma.all, np.all), (fiamma.any, np.any)):
        res = fn(t, dim, keepdim)
        assert res.dtype is out_dt
        np.testing.assert_array_equal(to_numpy(res).astype(bool),
                                      npf(a, axis=axes, keepdims=keepdim))
    cnt = t.count_nonzero(dim)
    assert cnt.dtype is fiamma.int64
    np.testing.assert_array_equal(to_numpy(cnt), np.count_nonzero(a, axis=axes))


# ---- logsumexp -------------------------------------------------------------------------------

def lse_ref(x, axes, keepdim):
    m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    m = np.where(np.isinf(m), 0, m)
    with np.errstate(divide="ignore"):
        r = np.log(np.exp(x - m).sum(axis=axes, keepdims=True)) + m
    if not keepdim:
        r = r.squeeze(axis=axes) if axes is not None else r.reshape(())
    return r


@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES + [fiamma.int32]), st.booleans())
def test_logsumexp_matches_reference(case, shift):
    t, a, dim, keepdim = case
    if shift and t.dtype.is_floating_point and t.dtype is not fiamma.float16:
        a = a + np.asarray(50.0, a.dtype)  # stable for values where exp overflows float16
        t = to_tensor(a, t.dtype)
    d = dim if dim is not None else tuple(range(a.ndim))
    axes = np_axes(d, a.ndim)
    res = fiamma.logsumexp(t, d, keepdim)
    exp_dt = t.dtype if t.dtype.is_floating_point else fiamma.float32
    assert res.dtype is exp_dt
    ref = lse_ref(f64(a), axes, keepdim)
    check_float(res, ref, exp_dt, np.abs(ref) + 1, 8)


def test_logsumexp_infinities():
    inf = math.inf
    t = fiamma.tensor([[-inf, -inf], [inf, 1.0], [1000.0, 1000.0]])
    r = t.logsumexp(1).tolist()
    assert r[0] == -inf and r[1] == inf and abs(r[2] - (1000 + math.log(2))) < 1e-3
    assert fiamma.tensor([]).logsumexp(0).item() == -inf


# ---- cumsum / cumprod ------------------------------------------------------------------------

@SETTINGS
@given(cases(min_side=0), st.sampled_from(["cumsum", "cumprod"]))
def test_scans_match_numpy(case, op):
    t, a, dim, _ = case
    nd = a.ndim
    d = dim if isinstance(dim, int) else -1 if nd else 0
    if op == "cumprod" and t.dtype.is_floating_point:
        rng = np.random.default_rng(a.size)
        a = rng.uniform(0.5, 1.5, size=a.shape).astype(NP_DTYPE[t.dtype])
        t = to_tensor(a, t.dtype)
        if t.dtype is fiamma.bfloat16:
            a = to_numpy(t)
    res = getattr(fiamma, op)(t, d)
    assert res.shape == t.shape
    npf = np.cumsum if op == "cumsum" else np.cumprod
    x = a.reshape(1) if nd == 0 else a
    if t.dtype.is_floating_point:
        assert res.dtype is t.dtype
        ref = npf(f64(x), axis=d % max(nd, 1)).reshape(a.shape)
        scale = np.cumsum(np.abs(f64(x)), axis=d % max(nd, 1)).reshape(a.shape)
        check_float(res, ref, t.dtype, scale if op == "cumsum" else np.abs(ref),
                    x.shape[d % max(nd, 1)] if x.size else 1)
    else:
        assert res.dtype is fiamma.int64
        ref = npf(x.astype(np.int64), axis=d % max(nd, 1)).reshape(a.shape)
        np.testing.assert_array_equal(to_numpy(res), ref)


def test_scan_rules():
    x = fiamma.tensor([1, 2, 3], dtype=fiamma.int32)
    assert x.cumsum(0).dtype is fiamma.int64 and x.cumsum(0).tolist() == [1, 3, 6]
    assert x.cumsum(0, dtype=fiamma.int32).dtype is fiamma.int32
    assert x.cumprod(0, dtype=fiamma.float64).tolist() == [1.0, 2.0, 6.0]
    assert fiamma.tensor([True, True]).cumsum(0).tolist() == [1, 2]
    # float32 cumsum accumulates in double, like PyTorch's CPU kernel
    assert fiamma.tensor([1e8, 1.0, -1e8]).cumsum(0).tolist() == [1e8, 1e8, 1.0]
    s = fiamma.tensor(5.0)
    assert s.cumsum(0).shape == () and s.cumsum(-1).item() == 5.0
    with pytest.raises(IndexError, match="cumsum"):
        x.cumsum(1)


# ---- softmax / log_softmax -------------------------------------------------------------------

def softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return e / s, x - m - np.log(s)


@SETTINGS
@given(cases(dtypes=FLOAT_DTYPES), st.booleans())
def test_softmax_log_softmax_match_reference(case, big):
    t, a, dim, _ = case
    nd = a.ndim
    d = dim if isinstance(dim, int) else -1 if nd else 0
    if big and t.dtype is not fiamma.float16:  # where exp(x) itself would overflow
        a = (a * 30).astype(a.dtype)
        t = to_tensor(a, t.dtype)
        if t.dtype is fiamma.bfloat16:
            a = to_numpy(t)
    s = fiamma.softmax(t, d)
    ls = t.log_softmax(d)
    assert s.dtype is t.dtype and ls.dtype is t.dtype and s.shape == t.shape
    x = f64(a).reshape(a.shape if nd else (1,))
    ax = d % max(nd, 1)
    ref_s, ref_ls = softmax_ref(x, ax) if x.size else (x, x)
    check_float(s, ref_s.reshape(a.shape), t.dtype, 1.0, 4)
    check_float(ls, ref_ls.reshape(a.shape), t.dtype, np.abs(ref_ls.reshape(a.shape)) + 1, 8)


def test_softmax_rules():
    x = fiamma.tensor([[1.0, 2.0, 3.0], [-math.inf, 0.0, 0.0]])
    s = x.softmax(1).tolist()
    assert abs(sum(s[0]) - 1) < 1e-6 and s[1] == [0.0, 0.5, 0.5]
    assert x.log_softmax(1).tolist()[1][0] == -math.inf
    assert all(math.isnan(v) for v in fiamma.tensor([[1.0, math.nan]]).softmax(1).tolist()[0])
    i = fiamma.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="softmax"):
        i.softmax(0)
    assert i.softmax(0, dtype=fiamma.float64).dtype is fiamma.float64
    assert fiamma.tensor(3.0).softmax(0).item() == 1.0
    assert fiamma.tensor(3.0).log_softmax(0).item() == 0.0
    with pytest.raises(IndexError, match="softmax"):
        x.softmax(2)


# ---- sizes that take the threaded and chunked paths ------------------------------------------

@pytest.mark.parametrize("shape", [(640, 513), (3, 200_003), (200_003, 3), (64, 70, 61)])
def test_large_inputs_every_layout(shape):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape).astype(np.float32)
    t = fiamma.from_numpy(a)
    for d in range(len(shape)):
        x = f64(a)
        ref = x.sum(d)
        check_float(t.sum(d), ref, fiamma.float32, np.abs(x).sum(d), 12)
        np.testing.assert_array_equal(t.argmax(d).numpy(), a.argmax(d))
        np.testing.assert_array_equal(t.amin(d).numpy(), a.min(d))
        ref_v = x.var(d, ddof=1)
        check_float(t.var(d), ref_v, fiamma.float32, ref_v, 12)
        ref_s, ref_ls = softmax_ref(x, d)
        check_float(t.softmax(d), ref_s, fiamma.float32, 1.0, 4)
        check_float(t.log_softmax(d), ref_ls, fiamma.float32, np.abs(ref_ls) + 1, 8)
        check_float(t.cumsum(d), np.cumsum(x, d), fiamma.float32, np.cumsum(np.abs(x), d), 4)
        check_float(t.logsumexp(d), lse_ref(x, (d,), False), fiamma.float32, 10.0, 8)
    tt = t.transpose(0, -1)
    check_float(tt.sum((0, -1)), f64(a).transpose().sum((0, -1)), fiamma.float32,
                np.abs(f64(a)).transpose().sum((0, -1)), 12)
    assert t.argmax().item() == a.argmax() and t.argmin().item() == a.argmin()
    check_float(t.sum(), f64(a).sum(), fiamma.float32, np.abs(f64(a)).sum(), 20)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows, cols", [(5, 7), (700, 300), (4096, 64)])
def test_matrix_row_reductions(threads, rows, cols):
    # one kept and one reduced dimension (x.sum(-1) of a matrix; x.T.sum(0) reads the same
    # rows): contiguous rows, rows inside a wider buffer (row stride > row length), columns
    old = fiamma.get_num_threads()
    fiamma.set_num_threads(threads)
    try:
        rng = np.random.default_rng(rows + cols)
        wide = rng.standard_normal((rows, cols + 5)).astype(np.float32)
        t_wide = fiamma.from_numpy(wide)
        for t, a, d in [(fiamma.from_numpy(wide[:, :cols].copy()), wide[:, :cols], 1),
                        (t_wide[:, 2:cols + 2], wide[:, 2:cols + 2], 1),
                        (fiamma.from_numpy(wide[:, :cols].copy()).t(), wide[:, :cols].T, 0),
                        (fiamma.from_numpy(wide[:, :cols].copy()), wide[:, :cols], 0)]:
            x = f64(a)
            check_float(t.sum(d), x.sum(d), fiamma.float32, np.abs(x).sum(d), 12)
            check_float(t.mean(d), x.mean(d), fiamma.float32, np.abs(x).mean(d), 12)
            ref_v = x.var(d, ddof=1)
            check_float(t.var(d), ref_v, fiamma.float32, ref_v, 12)
            check_float(t.norm(dim=d), np.sqrt((x * x).sum(d)), fiamma.float32,
                        np.sqrt((x * x).sum(d)), 12)
            check_float(t.logsumexp(d), lse_ref(x, (d,), False), fiamma.float32, 10.0, 8)
            np.testing.assert_array_equal(t.amax(d).numpy(), a.max(d))
            np.testing.assert_array_equal(t.argmax(d).numpy(), a.argmax(d))
            np.testing.assert_array_equal(t.argmin(d).numpy(), a.argmin(d))
            np.testing.assert_array_equal((t > 0).any(d).numpy(), (a > 0).any(d))
            np.testing.assert_array_equal((t > -9).all(d).numpy(), (a > -9).all(d))
    finally:
        fiamma.set_num_threads(old)


# ---- shapes, keepdim, out=, errors -----------------------------------------------------------

def test_empty_reductions():
    e = fiamma.zeros(0)
    assert e.sum().item() == 0 and e.prod().item() == 1
    assert math.isnan(e.mean().item())
    assert e.all().item() is True and e.any().item() is False
    assert e.count_nonzero().item() == 0
    m = fiamma.zeros(3, 0)
    assert m.sum(1).tolist() == [0.0, 0.0, 0.0] and m.prod(1).tolist() == [1.0, 1.0, 1.0]
    assert m.sum(0).shape == (0,) and m.amax(0).shape == (0,)
    for op in ("max", "min", "argmax", "argmin", "amax", "amin"):
        with pytest.raises(RuntimeError, match=op):
            getattr(e, op)()
        with pytest.raises(IndexError, match=op):
            getattr(m, op)(1)
    with pytest.raises(RuntimeError, match="aminmax"):
        e.aminmax()
    v, i = fiamma.zeros(0, 3).max(1)
    assert v.shape == (0,) and i.shape == (0,)


def test_zero_dim_tensors():
    s = fiamma.tensor(4.0)
    for d in (None, 0, -1, (0,)):
        assert s.sum(d).shape == () and s.sum(d).item() == 4.0
    assert s.max(0).values.item() == 4.0 and s.max(0).indices.item() == 0
    assert s.argmax(0).item() == 0 and s.var(correction=0).item() == 0.0
    assert s.sum(0, keepdim=True).shape == ()
    with pytest.raises(IndexError, match="sum"):
        s.sum(1)


def test_dims_and_keepdim():
    x = fiamma.ones(2, 3, 4)
    assert x.sum((0, 2)).shape == (3,) and x.sum((0, 2)).tolist() == [8.0] * 3
    assert x.sum((-1, 0), keepdim=True).shape == (1, 3, 1)
    assert x.sum([1]).shape == (2, 4)
    assert x.sum(()).shape == () and x.sum(()).item() == 24.0
    assert x.amax(()).shape == ()
    assert x.mean(dim=(0, 1, 2)).item() == 1.0
    with pytest.raises(RuntimeError, match="sum"):
        x.sum((0, 0))
    with pytest.raises(RuntimeError, match="amax"):
        x.amax((1, -2))
    with pytest.raises(IndexError, match="mean"):
        x.mean(3)
    with pytest.raises(IndexError, match="argmax"):
        x.argmax(-4)
    with pytest.raises(TypeError, match="max"):
        x.max(dim=(0, 1))
    with pytest.raises(TypeError, match="sum"):
        fiamma.sum([1, 2])


def test_out_arguments():
    x = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    o = fiamma.empty(2)
    r = fiamma.sum(x, 1, out=o)
    assert r is o and o.tolist() == [3.0, 7.0]
    o64 = fiamma.empty(2, dtype=fiamma.float64)
    fiamma.mean(x, 0, out=o64)
    assert o64.tolist() == [2.0, 3.0]
    v, i = fiamma.empty(2), fiamma.empty(2, dtype=fiamma.int64)
    res = fiamma.max(x, 1, out=(v, i))
    assert res.values is v and v.tolist() == [2.0, 4.0] and i.tolist() == [1, 1]
    c = fiamma.empty(2, 2)
    fiamma.cumsum(x, 0, out=c)
    assert c.tolist() == [[1.0, 2.0], [4.0, 6.0]]
    o = fiamma.empty(3)
    with pytest.warns(UserWarning, match="sum: an output .* was resized"):
        fiamma.sum(x, 1, out=o)
    assert o.tolist() == [3.0, 7.0]
    with pytest.raises(RuntimeError, match="sum"):
        fiamma.sum(x, 1, out=fiamma.empty(2, dtype=fiamma.int64))


def test_methods_installed():
    x = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    for name in ("sum", "mean", "nansum", "nanmean", "prod", "max", "min", "amax", "amin",
                 "argmax", "argmin", "aminmax", "std", "var", "norm", "all", "any",
                 "count_nonzero", "logsumexp", "cumsum", "cumprod", "softmax", "log_softmax"):
        assert callable(getattr(x, name)), name
        assert callable(getattr(fiamma, name)), name
    assert callable(fiamma.std_mean) and callable(fiamma.var_mean)


def test_records_for_autograd():
    from fiamma import _grad_hook as G

    calls = []

    class Rec:
        def record(self, op, out, inputs, kwargs):
            calls.append((op, kwargs))

        def record_inplace(self, *a):
            pass

        def requires_grad_(self, t, flag):
            t.requires_grad = flag

    prev = G._recorder
    G.register_autograd(Rec())
    try:
        x = fiamma.ones(2, 3).requires_grad_()
        x.sum(1)
        x.max(0)
        x.softmax(-1)
        x.mean()
    finally:
        G._recorder = prev
    assert [c[0] for c in calls] == ["sum", "max", "softmax", "mean"]
    assert calls[0][1]["dim"] == (1,) and calls[1][1]["dim"] == 0


def test_c_entry_points_reject_bad_arguments():
    shape = ffi.new("int64_t[2]", [2, 3])
    st_ = ffi.new("int64_t[2]", [3, 1])
    buf = ffi.new("float[6]")
    out = ffi.new("float[6]")
    idx = ffi.new("int64_t[6]")
    p, o, i = (int(ffi.cast("intptr_t", b)) for b in (buf, out, idx))
    assert lib.fm_reduce(99, lib.FM_FLOAT32, 2, shape, p, st_, 1, o, st_, 0, ffi.NULL, 0) \
        == lib.FM_ERR_OP
    assert lib.fm_reduce(lib.FM_RED_SUM, 42, 2, shape, p, st_, 1, o, st_, 0, ffi.NULL, 0) \
        == lib.FM_ERR_DTYPE
    assert lib.fm_reduce(lib.FM_RED_SUM, lib.FM_FLOAT32, 2, shape, p, st_, 4, o, st_, 0,
                         ffi.NULL, 0) == lib.FM_ERR_ARG
    assert lib.fm_reduce(lib.FM_RED_SUM, lib.FM_FLOAT32, 99, shape, p, st_, 1, o, st_, 0,
                         ffi.NULL, 0) == lib.FM_ERR_NDIM
    assert lib.fm_reduce(lib.FM_RED_ARGMAX, lib.FM_FLOAT32, 2, shape, p, st_, 3, o, st_, i,
                         st_, 0) == lib.FM_ERR_ARG
    assert lib.fm_reduce(lib.FM_RED_VAR, lib.FM_FLOAT32, 2, shape, p, st_, 1, o, st_, 0,
                         ffi.NULL, 0) == lib.FM_ERR_ARG
    assert lib.fm_reduce(lib.FM_RED_MEAN, lib.FM_INT32, 2, shape, p, st_, 1, o, st_, 0,
                         ffi.NULL, 0) == lib.FM_ERR_DTYPE
    assert lib.fm_softmax(0, lib.FM_FLOAT32, 2, shape, p, st_, o, st_, 2) == lib.FM_ERR_ARG
    assert lib.fm_softmax(0, lib.FM_INT64, 2, shape, p, st_, o, st_, 0) == lib.FM_ERR_DTYPE
    assert lib.fm_scan(5, lib.FM_FLOAT32, 2, shape, p, st_, o, st_, 0) == lib.FM_ERR_OP
    assert lib.fm_scan(0, lib.FM_FLOAT32, 2, shape, p, st_, o, st_, -1) == lib.FM_ERR_ARG
    neg = ffi.new("int64_t[2]", [2, -3])
    assert lib.fm_reduce(lib.FM_RED_SUM, lib.FM_FLOAT32, 2, neg, p, st_, 1, o, st_, 0,
                         ffi.NULL, 0) == lib.FM_ERR_ARG


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_large_reductions_work_in_a_forked_child():
    """libgomp's pool does not survive fork: a child must still finish (single-threaded)."""
    import os
    import signal

    a = np.ones(1_000_000, dtype=np.float32)
    t = fiamma.from_numpy(a)
    assert t.sum().item() == 1e6  # the parent has run a parallel region
    pid = os.fork()
    if pid == 0:  # child: exit code 0 iff the reductions finish with the right values
        signal.alarm(20)
        ok = t.sum().item() == 1e6 and t.softmax(0).sum().item() > 0.99
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
