"""Sorting and searching (fiamma._ops.sorting) against NumPy / plain-Python references: every
dtype, non-contiguous layouts, 0-d and empty tensors, duplicates, NaN / inf / -0.0."""

import collections

import numpy as np
import pytest
from conftest import ALL_DTYPES, NP_DTYPE, fiamma_contiguous_strides, to_numpy, to_tensor
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma import _grad_hook as G

FLOATS = {fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64}
SPECIAL = np.array([-3.0, -1.5, -0.0, 0.0, 0.5, 1.0, 2.0, 2.0, 7.0, np.inf, -np.inf, np.nan])
LAYOUTS = ["contiguous", "transposed", "strided", "offset"]


def values(shape, dtype, rng, special=True):
    """Values with many duplicates (and NaN/inf/-0.0 for floats when ``special``) as float64 /
    int64 / bool NumPy arrays exactly representable in ``dtype``."""
    shape = tuple(shape)
    if dtype is fiamma.bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype in FLOATS:
        a = rng.integers(-6, 7, size=shape).astype(np.float64) / 2
        if special:
            mask = rng.random(shape) < 0.3
            a = np.where(mask, rng.choice(SPECIAL, size=shape), a)
        return a
    lo = 0 if dtype is fiamma.uint8 else -6
    return rng.integers(lo, lo + 12, size=shape).astype(np.int64)


def lay(a, dtype, layout):
    """A fiamma tensor of ``dtype`` holding ``a`` with the given memory layout."""
    a = np.asarray(a)
    shape = a.shape
    if layout == "contiguous" or a.ndim == 0:
        return to_tensor(a, dtype)
    if layout == "transposed":
        base = to_tensor(np.transpose(a).copy(), dtype)
        return base.permute(tuple(range(a.ndim - 1, -1, -1)))
    if layout == "strided":
        big = np.zeros(tuple(2 * s for s in shape), dtype=a.dtype)
        big[tuple(slice(None, None, 2) for _ in shape)] = a
        base = to_tensor(big, dtype)
        return base.as_strided(shape, tuple(2 * s for s in base.stride()), 0)
    flat = np.concatenate([np.zeros(3, a.dtype), a.reshape(-1)])
    return to_tensor(flat, dtype).as_strided(shape, fiamma_contiguous_strides(shape), 3)


def ref_of(a, dtype):
    """What ``a`` becomes in ``dtype``, as float64 / int64 / bool NumPy."""
    if dtype is fiamma.bool:
        return a.astype(np.bool_)
    if dtype in FLOATS:
        return a.astype(np.float64)
    return a.astype(NP_DTYPE[dtype]).astype(np.int64)


def np_of(t):
    a = to_numpy(t)
    return a.astype(np.float64) if t.dtype in FLOATS else a


def order_key(v):
    """Sort key of one element: NaN largest, -0.0 == 0.0."""
    v = float(v)
    return (1, 0.0) if v != v else (0, v)


def ref_argsort(a, axis, descending=False):
    """Stable argsort along ``axis`` with NaN largest (descending: NaN first, ties in order)."""
    def lane(x):
        return np.array(sorted(range(len(x)), key=lambda i: order_key(x[i]),
                               reverse=descending), dtype=np.int64)
    if a.ndim == 0:
        return np.zeros((), np.int64)
    if a.size == 0:
        return np.zeros(a.shape, np.int64)
    return np.apply_along_axis(lane, axis, a)


def same(got, exp):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(exp))


SHAPES = [(), (0,), (1,), (9,), (4, 0), (3, 17), (2, 3, 45), (5, 1, 6)]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_matches_stable_reference(dtype, layout):
    rng = np.random.default_rng(1)
    for shape in SHAPES:
        a = values(shape, dtype, rng)
        r = ref_of(a, dtype)
        t = lay(a, dtype, layout)
        for dim in range(-max(len(shape), 1), max(len(shape), 1)):
            for desc in (False, True):
                v, i = fiamma.sort(t, dim=dim, descending=desc)
                ax = dim % max(len(shape), 1)
                ei = ref_argsort(r, ax, desc)
                assert v.dtype is dtype and i.dtype is fiamma.int64
                assert tuple(v.shape) == shape and tuple(i.shape) == shape
                same(np_of(i), ei)
                ev = np.take_along_axis(r, ei, ax) if r.ndim else r
                np.testing.assert_array_equal(np_of(v), ev)
                if not desc and r.ndim and dtype is not fiamma.bool:
                    np.testing.assert_array_equal(np_of(v), np.sort(r, axis=ax, kind="stable"))


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.int16, fiamma.float16, fiamma.bfloat16,
                                   fiamma.int32, fiamma.int64, fiamma.float64, fiamma.uint8],
                         ids=lambda d: d.name)
def test_sort_long_lanes(dtype):
    # long lanes take the MSD bucket path (and threads); compare with NumPy's stable argsort
    rng = np.random.default_rng(2)
    n = 70_000
    if dtype in FLOATS:
        a = rng.standard_normal(n) * 100
        a[rng.integers(0, n, 50)] = np.nan
        a[rng.integers(0, n, 50)] = -0.0
        a[rng.integers(0, n, 50)] = np.inf
        a = a.astype(NP_DTYPE[dtype]).astype(np.float64)
        if dtype is fiamma.bfloat16:
            a = to_numpy(to_tensor(a, dtype)).astype(np.float64)
    else:
        a = rng.integers(0, 200, n)
    t = to_tensor(a, dtype)
    for desc in (False, True):
        v, i = t.sort(descending=desc)
        if desc:  # NaN first, then by decreasing value, ties in input order
            ei = np.lexsort((-np.where(np.isnan(a), 0, a) + 0.0, ~np.isnan(a)))
        else:
            ei = np.argsort(a, kind="stable")
        same(np_of(i), ei)
        np.testing.assert_array_equal(np_of(v), a[ei])
    # a strided 2-d tensor sorted along its long dim
    t2 = to_tensor(np.stack([a, a[::-1]]), dtype).t()
    v2, i2 = t2.sort(0)
    same(np_of(i2)[:, 1], np.argsort(a[::-1], kind="stable"))


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.int32, fiamma.int16, fiamma.float16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("dist", ["unit", "const", "narrow", "extremes", "negative", "two"])
def test_sort_long_lanes_key_ranges(dtype, dist):
    # the MSD digit is taken over the keys' actual range: data crowded into a narrow range, a
    # single value, the dtype's extremes and one-sided data all go through it
    rng = np.random.default_rng(5)
    n = 90_000
    npdt = NP_DTYPE[dtype]
    info = np.iinfo(npdt) if dtype in (fiamma.int32, fiamma.int16) else None
    if dist == "unit":
        a = rng.random(n) if info is None else rng.integers(0, 1 << 12, n)
    elif dist == "const":
        a = np.full(n, 7)
    elif dist == "narrow":
        a = rng.integers(1000, 1500, n)
    elif dist == "extremes":
        a = rng.integers(-100, 100, n).astype(np.float64)
        a[::7] = info.min if info else -np.inf
        a[::11] = info.max if info else np.inf
    elif dist == "negative":
        a = -rng.random(n) * 50 - 1 if info is None else rng.integers(info.min, -1, n)
    else:
        a = rng.choice([-3, 5], n)
    a = a.astype(npdt)
    t = fiamma.from_numpy(a)
    for desc in (False, True):
        v, i = t.sort(descending=desc)
        key = -a.astype(np.float64) if desc else a
        ei = np.argsort(key, kind="stable")
        same(np_of(i), ei)
        np.testing.assert_array_equal(np_of(v), a[ei])
        same(np_of(t.argsort(descending=desc)), ei)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.int32, fiamma.int16, fiamma.float16,
                                   fiamma.bfloat16, fiamma.float64, fiamma.uint8],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("dist", ["random", "sorted", "reversed", "const", "few", "organ"])
def test_msort_long_lanes_values_only(dtype, dist):
    # msort computes no indices: long lanes of 16/32-bit dtypes take the vectorised quicksort
    rng = np.random.default_rng(6)
    n = 70_001
    if dist == "random":
        a = rng.standard_normal(n) * 1000
    elif dist == "sorted":
        a = np.sort(rng.standard_normal(n) * 1000)
    elif dist == "reversed":
        a = -np.sort(rng.standard_normal(n) * 1000)
    elif dist == "const":
        a = np.full(n, 3.0)
    elif dist == "few":
        a = rng.integers(-2, 3, n).astype(np.float64)
    else:
        a = np.concatenate([np.arange(n // 2), np.arange(n - n // 2)[::-1]]).astype(np.float64)
    if dtype not in FLOATS:
        a = np.clip(np.round(a), *(np.iinfo(NP_DTYPE[dtype]).min, np.iinfo(NP_DTYPE[dtype]).max))
    t = to_tensor(a.astype(np.float64) if dtype is fiamma.bfloat16 else
                  a.astype(NP_DTYPE[dtype]), dtype)
    r = to_numpy(t).astype(np.float64)
    got = fiamma.msort(t)
    np.testing.assert_array_equal(to_numpy(got).astype(np.float64), np.sort(r))
    # a strided lane (dim 0 of an (n, 2) tensor): copied in, written with a stride
    t2 = fiamma.stack([t, -t], 1) if dtype not in (fiamma.uint8,) else fiamma.stack([t, t], 1)
    r2 = to_numpy(t2).astype(np.float64)
    np.testing.assert_array_equal(to_numpy(fiamma.msort(t2)).astype(np.float64),
                                  np.sort(r2, axis=0))


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float16, fiamma.bfloat16])
def test_msort_long_lane_nan_and_negative_zero(dtype):
    # NaN payloads and -0.0 are not recoverable from the sort keys: the stable path is taken
    rng = np.random.default_rng(7)
    n = 80_000
    a = rng.standard_normal(n).astype(np.float32)
    a[rng.integers(0, n, 100)] = -0.0
    a[rng.integers(0, n, 100)] = 0.0
    a[rng.integers(0, n, 30)] = np.nan
    a[rng.integers(0, n, 30)] = -np.inf
    t = fiamma.from_numpy(a).to(dtype)
    got = to_numpy(fiamma.msort(t)).astype(np.float32)
    ref = to_numpy(t.sort().values).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    nan = int(np.isnan(a).sum())
    assert nan > 0 and np.isnan(got[-nan:]).all() and not np.isnan(got[:-nan]).any()


def test_sort_negative_zero_and_nan_payloads_kept():
    a = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -0.0], dtype=np.float32)
    v, i = fiamma.from_numpy(a).sort()
    same(np_of(i), [0, 1, 5, 4, 2, 3])
    got = to_numpy(v)
    assert np.signbit(got[1]) and np.signbit(got[2]) and not np.signbit(got[0])
    assert np.isnan(got[4:]).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_argsort_msort(dtype):
    rng = np.random.default_rng(3)
    a = values((6, 13), dtype, rng)
    r = ref_of(a, dtype)
    t = lay(a, dtype, "strided")
    same(np_of(t.argsort()), ref_argsort(r, 1))
    same(np_of(fiamma.argsort(t, dim=0, descending=True)), ref_argsort(r, 0, True))
    same(np_of(fiamma.argsort(t, stable=True)), ref_argsort(r, 1))
    ei = ref_argsort(r, 0)
    np.testing.assert_array_equal(np_of(fiamma.msort(t)), np.take_along_axis(r, ei, 0))
    np.testing.assert_array_equal(np_of(t.msort()), np.take_along_axis(r, ei, 0))


def test_sort_out_and_named_tuple():
    t = fiamma.tensor([[3.0, 1.0, 2.0]])
    res = t.sort()
    assert type(res).__name__ == "sort" and res.values is res[0] and res.indices is res[1]
    ov, oi = fiamma.empty(1, 3), fiamma.empty(1, 3, dtype=fiamma.int64)
    r2 = fiamma.sort(t, out=(ov, oi))
    assert r2.values is ov and r2.indices is oi
    same(to_numpy(ov), [[1.0, 2.0, 3.0]])
    same(to_numpy(oi), [[1, 2, 0]])
    assert isinstance(res, tuple)
    v, i = fiamma.sort(t, stable=True, dim=1, descending=True)
    same(to_numpy(i), [[0, 2, 1]])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_topk(dtype, layout):
    rng = np.random.default_rng(4)
    for shape, dim in [((50,), 0), ((7, 300), 1), ((7, 300), -1), ((40, 6), 0), ((3, 5, 9), 1),
                       ((), 0), ((4, 0), 0)]:
        a = values(shape, dtype, rng)
        r = ref_of(a, dtype)
        t = lay(a, dtype, layout)
        ax = dim % max(len(shape), 1)
        n = shape[ax] if shape else 1
        for k in sorted({0, 1, min(3, n), n // 2, n}):
            for largest in (True, False):
                v, i = fiamma.topk(t, k, dim=dim, largest=largest)
                ei = ref_argsort(r, ax, largest)
                if r.ndim:
                    ei = np.take(ei, np.arange(k), axis=ax)
                same(np_of(i), ei)
                ev = np.take_along_axis(r, ei, ax) if r.ndim else r
                np.testing.assert_array_equal(np_of(v), ev)
                if r.ndim and k and dtype not in FLOATS and dtype is not fiamma.bool:
                    # the k smallest as np.partition sees them, in order
                    part = np.sort(np.take(np.partition(r, k - 1, axis=ax), np.arange(k),
                                           axis=ax), axis=ax)
                    if not largest:
                        np.testing.assert_array_equal(np_of(v), part)


def test_topk_large_random_matches_numpy():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 1024)).astype(np.float32)
    v, i = fiamma.from_numpy(a).topk(10)
    ei = np.argsort(-a, axis=1, kind="stable")[:, :10]
    same(to_numpy(i), ei)
    same(to_numpy(v), np.take_along_axis(a, ei, 1))
    v, i = fiamma.from_numpy(a).topk(100, largest=False, sorted=False)
    same(to_numpy(i), np.argsort(a, axis=1, kind="stable")[:, :100])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_kthvalue(dtype):
    rng = np.random.default_rng(6)
    a = values((5, 21), dtype, rng)
    r = ref_of(a, dtype)
    t = lay(a, dtype, "transposed")
    for dim in (0, 1):
        n = a.shape[dim]
        ei = ref_argsort(r, dim)
        for k in (1, n // 2, n):
            for keepdim in (False, True):
                v, i = fiamma.kthvalue(t, k, dim, keepdim)
                exp_i = np.take(ei, [k - 1], axis=dim)
                exp_v = np.take_along_axis(r, exp_i, dim)
                if not keepdim:
                    exp_i, exp_v = exp_i.squeeze(dim), exp_v.squeeze(dim)
                same(np_of(i), exp_i)
                np.testing.assert_array_equal(np_of(v), exp_v)
    # against np.partition on finite data
    if dtype is not fiamma.bool:
        b = ref_of(values((4, 30), dtype, rng, special=False), dtype)
        v, _ = lay(b, dtype, "strided").kthvalue(7)
        np.testing.assert_array_equal(np_of(v), np.partition(b, 6, axis=1)[:, 6])


def ref_median(x, nan_skip):
    x = np.asarray(x, dtype=np.float64)
    if not nan_skip and np.isnan(x).any():
        return np.nan, int(np.flatnonzero(np.isnan(x))[0])
    order = sorted(range(len(x)), key=lambda i: order_key(x[i]))
    m = int((~np.isnan(x)).sum())
    pos = (m - 1) // 2 if m else 0
    return x[order[pos]], order[pos]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median(dtype, op):
    rng = np.random.default_rng(7)
    fn = getattr(fiamma, op)
    for shape in [(9,), (4, 10), (3, 1, 8), ()]:
        a = values(shape, dtype, rng)
        r = ref_of(a, dtype)
        t = lay(a, dtype, "strided")
        whole = fn(t)
        assert whole.shape == () and whole.dtype is dtype
        ev, _ = ref_median(r.reshape(-1), op == "nanmedian")
        np.testing.assert_array_equal(np_of(whole), ev)
        for dim in range(len(shape)):
            v, i = fn(t, dim)
            assert tuple(v.shape) == shape[:dim] + shape[dim + 1:]
            rr = np.moveaxis(r, dim, -1).reshape(-1, shape[dim])
            refs = [ref_median(row, op == "nanmedian") for row in rr]
            oshape = v.shape
            np.testing.assert_array_equal(np_of(v).reshape(-1), [x for x, _ in refs])
            same(np_of(i).reshape(-1), [j for _, j in refs])
            v2, i2 = getattr(t, op)(dim, keepdim=True)
            assert tuple(v2.shape) == shape[:dim] + (1,) + shape[dim + 1:]
            assert v2.reshape(oshape).tolist() == v.tolist() or dtype in FLOATS
    if dtype not in FLOATS and dtype is not fiamma.bool:
        b = ref_of(values((7, 11), dtype, rng), dtype)
        # lower median of an odd count is np.median
        np.testing.assert_array_equal(np_of(fn(to_tensor(b, dtype), 1).values),
                                      np.median(b, axis=1))


def ref_mode(x):
    x = np.asarray(x, dtype=np.float64)
    cnt = collections.Counter(float(v) + 0.0 for v in x if v == v)
    if not cnt:
        return np.nan, 0
    best = max(cnt.values())
    val = min(v for v, c in cnt.items() if c == best)
    last = int(np.flatnonzero(x == val)[-1])
    return val, last


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_mode(dtype):
    rng = np.random.default_rng(8)
    a = values((6, 25), dtype, rng, special=False)
    r = ref_of(a, dtype)
    t = lay(a, dtype, "transposed")
    for dim in (0, 1, -1):
        v, i = fiamma.mode(t, dim)
        rr = np.moveaxis(r, dim, -1).reshape(-1, r.shape[dim])
        refs = [ref_mode(row) for row in rr]
        np.testing.assert_array_equal(np_of(v).reshape(-1), [x for x, _ in refs])
        same(np_of(i).reshape(-1), [j for _, j in refs])
    v, i = t.mode(keepdim=True)
    assert tuple(v.shape) == (6, 1)
    res = fiamma.mode(fiamma.tensor([1.0, float("nan"), float("nan"), 2.0]))
    assert res.values.item() == 1.0 and res.indices.item() == 0


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(dtype, op):
    rng = np.random.default_rng(9)
    acc = np.maximum.accumulate if op == "cummax" else np.minimum.accumulate
    for shape in [(), (0,), (11,), (4, 9), (2, 3, 5)]:
        a = values(shape, dtype, rng)
        r = ref_of(a, dtype)
        t = lay(a, dtype, "strided")
        for dim in range(max(len(shape), 1)):
            v, i = getattr(fiamma, op)(t, dim)
            assert v.dtype is dtype and i.dtype is fiamma.int64
            if r.ndim == 0:
                np.testing.assert_array_equal(np_of(v), r)
                same(np_of(i), 0)
                continue
            if r.size == 0:
                assert tuple(v.shape) == shape
                continue
            ev = acc(r.astype(np.float64) if dtype is fiamma.bool else r, axis=dim)
            np.testing.assert_array_equal(np_of(v).astype(ev.dtype), ev)
            # index: the last position where the running extreme was reached (NaN sticks)
            rr = np.moveaxis(r, dim, -1).reshape(-1, r.shape[dim]).astype(np.float64)
            exp = []
            for row in rr:
                best, bi, out = None, 0, []
                for j, x in enumerate(row):
                    if best is None or x != x or (x >= best if op == "cummax" else x <= best):
                        best, bi = x, j
                    out.append(bi)
                exp.append(out)
            got = np.moveaxis(np_of(i), dim, -1).reshape(-1, r.shape[dim])
            same(got, np.array(exp, dtype=np.int64).reshape(got.shape))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_unique_flat(dtype):
    rng = np.random.default_rng(10)
    for shape in [(), (0,), (30,), (5, 7)]:
        a = values(shape, dtype, rng)
        r = ref_of(a, dtype)
        t = lay(a, dtype, "transposed")
        u = fiamma.unique(t)
        eu, einv, ecnt = np.unique(r, return_inverse=True, return_counts=True, equal_nan=False)
        np.testing.assert_array_equal(np_of(u), eu)
        u2, inv, cnt = t.unique(return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(np_of(u2), eu)
        assert tuple(inv.shape) == shape
        # NaNs are all distinct: which NaN group a NaN gets may differ from NumPy's
        known = ~np.isnan(r.astype(np.float64))
        same(np_of(inv)[known], einv.reshape(shape)[known])
        np.testing.assert_array_equal(np_of(u2)[np_of(inv)], r)
        same(np_of(cnt), ecnt)
        u3, cnt3 = fiamma.unique(t, sorted=False, return_counts=True)
        same(np_of(cnt3), ecnt)


@pytest.mark.parametrize("dtype", [fiamma.int32, fiamma.float32, fiamma.bfloat16, fiamma.bool],
                         ids=lambda d: d.name)
def test_unique_dim(dtype):
    rng = np.random.default_rng(11)
    a = rng.integers(0, 2, size=(9, 3, 2))
    r = ref_of(a, dtype)
    t = lay(a, dtype, "strided")
    for dim in (0, 1, 2, -1):
        u, inv, cnt = fiamma.unique(t, dim=dim, return_inverse=True, return_counts=True)
        eu, einv, ecnt = np.unique(r, axis=dim % 3, return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(np_of(u), eu)
        same(np_of(inv), einv.reshape(-1))
        same(np_of(cnt), ecnt)


def ref_consecutive(seq):
    vals, inv, cnt = [], [], []
    for x in seq:
        if vals and not (x != x) and x == vals[-1] and not (vals[-1] != vals[-1]):
            cnt[-1] += 1
        else:
            vals.append(x)
            cnt.append(1)
        inv.append(len(vals) - 1)
    return vals, inv, cnt


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_unique_consecutive(dtype):
    rng = np.random.default_rng(12)
    a = np.repeat(values((12,), dtype, rng), rng.integers(1, 4, 12))
    r = ref_of(a, dtype)
    t = lay(a, dtype, "strided")
    u, inv, cnt = fiamma.unique_consecutive(t, return_inverse=True, return_counts=True)
    ev, einv, ecnt = ref_consecutive(list(r))
    np.testing.assert_array_equal(np_of(u), np.array(ev, dtype=r.dtype))
    same(np_of(inv), einv)
    same(np_of(cnt), ecnt)
    m = np.array([[1, 0, 1], [1, 0, 1], [0, 1, 1]])
    u = fiamma.unique_consecutive(to_tensor(m, dtype), dim=0)
    np.testing.assert_array_equal(np_of(u), ref_of(m[[0, 2]], dtype))


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d is not fiamma.bool],
                         ids=lambda d: d.name)
def test_searchsorted(dtype):
    rng = np.random.default_rng(13)
    seq = np.sort(values((15,), dtype, rng, special=False))
    r = ref_of(seq, dtype)
    vals = values((4, 6), dtype, rng, special=False)
    rv = ref_of(vals, dtype)
    ts, tv = lay(seq, dtype, "strided"), lay(vals, dtype, "transposed")
    for right in (False, True):
        side = "right" if right else "left"
        out = fiamma.searchsorted(ts, tv, right=right)
        assert out.dtype is fiamma.int64
        same(np_of(out), np.searchsorted(r, rv, side=side))
        out = fiamma.searchsorted(ts, tv, side=side, out_int32=True)
        assert out.dtype is fiamma.int32
        same(np_of(out), np.searchsorted(r, rv, side=side))
        # N-d sequences: one per row
        seq2 = np.sort(values((4, 9), dtype, rng, special=False), axis=1)
        r2 = ref_of(seq2, dtype)
        got = fiamma.searchsorted(lay(seq2, dtype, "strided"), tv, right=right)
        exp = np.stack([np.searchsorted(r2[j], rv[j], side=side) for j in range(4)])
        same(np_of(got), exp)
        # sorter
        perm = rng.permutation(15)
        shuffled = seq[perm]
        sorter = fiamma.tensor(np.argsort(ref_of(shuffled, dtype), kind="stable"))
        got = fiamma.searchsorted(to_tensor(shuffled, dtype), tv, side=side, sorter=sorter)
        same(np_of(got), np.searchsorted(r, rv, side=side))
    # a scalar value
    s = fiamma.searchsorted(ts, 3)
    assert s.shape == () and s.item() == np.searchsorted(r, 3)
    # empty values and empty sequence
    assert fiamma.searchsorted(ts, to_tensor(np.zeros((0,)), dtype)).shape == (0,)
    same(np_of(fiamma.searchsorted(to_tensor(np.zeros((0,)), dtype), tv)), np.zeros((4, 6)))


def test_searchsorted_float_values_int_sequence_and_nan():
    seq = fiamma.tensor([1, 2, 3])
    same(to_numpy(fiamma.searchsorted(seq, fiamma.tensor([1.5, 2.5, 3.0]))), [1, 2, 2])
    same(to_numpy(fiamma.searchsorted(fiamma.tensor([1.0, 2.0]), fiamma.tensor([np.nan]))), [2])


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d is not fiamma.bool],
                         ids=lambda d: d.name)
def test_bucketize(dtype):
    rng = np.random.default_rng(14)
    b = np.unique(values((8,), dtype, rng, special=False))
    rb = ref_of(b, dtype)
    x = values((3, 10), dtype, rng, special=False)
    rx = ref_of(x, dtype)
    tb, tx = to_tensor(b, dtype), lay(x, dtype, "strided")
    same(np_of(fiamma.bucketize(tx, tb)), np.digitize(rx, rb, right=True))
    same(np_of(fiamma.bucketize(tx, tb, right=True)), np.digitize(rx, rb, right=False))
    same(np_of(fiamma.bucketize(tx, tb, out_int32=True)), np.searchsorted(rb, rx))
    assert fiamma.bucketize(tx, tb, out_int32=True).dtype is fiamma.int32


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_diff(dtype):
    rng = np.random.default_rng(15)
    a = values((5, 7), dtype, rng, special=False)
    r = a.astype(NP_DTYPE[dtype]) if dtype is not fiamma.bfloat16 else a.astype(np.float32)
    t = lay(a, dtype, "transposed")
    for n in (0, 1, 2, 9):
        for dim in (0, 1, -1):
            got = fiamma.diff(t, n=n, dim=dim)
            exp = np.diff(r, n=n, axis=dim)
            assert got.dtype is dtype and tuple(got.shape) == exp.shape
            np.testing.assert_allclose(np_of(got).astype(np.float64), exp.astype(np.float64))
    pre = values((5, 2), dtype, rng, special=False)
    app = values((5, 1), dtype, rng, special=False)
    rp = pre.astype(r.dtype)
    ra = app.astype(r.dtype)
    got = t.diff(dim=1, prepend=to_tensor(pre, dtype), append=to_tensor(app, dtype))
    exp = np.diff(r, axis=1, prepend=rp, append=ra)
    np.testing.assert_allclose(np_of(got).astype(np.float64), exp.astype(np.float64))


def test_diff_n0_is_a_copy_without_prepend_append():
    # PyTorch: n=0 returns a copy of the input; prepend/append are checked, not joined
    x = fiamma.tensor([[1.0, 4.0], [9.0, 16.0]])
    for kw in ({}, {"prepend": fiamma.ones(2, 3)}, {"append": fiamma.ones(2, 1)},
               {"prepend": fiamma.ones(2, 1), "append": fiamma.ones(2, 2)}):
        r = fiamma.diff(x, n=0, **kw)
        assert r is not x and r.tolist() == x.tolist()
        assert r.data_ptr() != x.data_ptr()
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        fiamma.diff(x, n=0, prepend=fiamma.ones(3))
    for bad in (0.5, 2.0, True):  # PyTorch: n must be an int (0.5 is not truncated to 0)
        with pytest.raises(TypeError, match="'n' must be int"):
            fiamma.diff(x, n=bad)
    assert fiamma.diff(x, n=fiamma.tensor(1)).tolist() == [[3.0], [7.0]]
    pytest.importorskip("fiamma.autograd")
    xg = fiamma.tensor([1.0, 4.0, 9.0], requires_grad=True)
    p = fiamma.tensor([5.0], requires_grad=True)
    r = fiamma.diff(xg, n=0, prepend=p)
    assert r.requires_grad and r.shape == (3,)
    (r * fiamma.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert xg.grad.tolist() == [1.0, 2.0, 3.0] and p.grad is None


def test_diff_prepend_append_values():
    x = fiamma.tensor([1.0, 4.0, 9.0])
    assert fiamma.diff(x, prepend=fiamma.tensor([0.0]), append=fiamma.tensor([10.0, 20.0])
                       ).tolist() == [1.0, 3.0, 5.0, 1.0, 10.0]
    assert fiamma.diff(x, n=2, append=fiamma.tensor([16.0])).tolist() == [2.0, 2.0]
    # a float64 prepend promotes, as PyTorch's concatenation does
    assert fiamma.diff(x, prepend=fiamma.zeros(1, dtype=fiamma.float64)).dtype is fiamma.float64
    # a number (a fiamma extension; NumPy's form) keeps its kind: no truncation to the input's
    assert fiamma.diff(fiamma.tensor([1, 2]), prepend=2.5).tolist() == [-1.5, 1.0]
    assert fiamma.diff(fiamma.tensor([1, 2]), append=2).dtype is fiamma.int64


@pytest.mark.parity
def test_diff_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(16)
    a, p, q = rng.standard_normal((3, 4)), rng.standard_normal((3, 2)), rng.standard_normal((3, 1))
    for n in (0, 1, 2, 5):
        for kw in ({}, {"prepend": p}, {"append": q}, {"prepend": p, "append": q}):
            got = fiamma.diff(fiamma.tensor(a), n=n, dim=1,
                              **{k: fiamma.tensor(v) for k, v in kw.items()}).numpy()
            ref = torch.diff(torch.tensor(a), n=n, dim=1,
                             **{k: torch.tensor(v) for k, v in kw.items()}).numpy()
            assert got.shape == ref.shape and np.allclose(got, ref), (n, list(kw))


def test_bool_diff_is_xor():
    t = fiamma.tensor([True, False, False, True])
    assert fiamma.diff(t).tolist() == [True, False, True]


# ---- hypothesis: random shapes and dims ---------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(ALL_DTYPES), seed=st.integers(0, 2**16), data=st.data())
def test_sort_topk_random(shape, dtype, seed, data):
    rng = np.random.default_rng(seed)
    a = values(shape, dtype, rng)
    r = ref_of(a, dtype)
    t = lay(a, dtype, data.draw(st.sampled_from(LAYOUTS)))
    nd = max(len(shape), 1)
    dim = data.draw(st.integers(-nd, nd - 1))
    desc = data.draw(st.booleans())
    ax = dim % nd
    v, i = fiamma.sort(t, dim, desc)
    ei = ref_argsort(r, ax, desc)
    same(np_of(i), ei)
    n = shape[ax] if shape else 1
    k = data.draw(st.integers(0, n))
    v, i = fiamma.topk(t, k, dim, largest=desc)
    if r.ndim:
        ei = np.take(ei, np.arange(k), axis=ax)
    same(np_of(i), ei)


# ---- errors -------------------------------------------------------------------------------------

def test_errors_name_the_op():
    t = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(IndexError, match="sort"):
        fiamma.sort(t, dim=2)
    with pytest.raises(IndexError, match="argsort"):
        t.argsort(dim=-3)
    with pytest.raises(RuntimeError, match="topk"):
        t.topk(3)
    with pytest.raises(IndexError, match="topk"):
        t.topk(-1)
    with pytest.raises(RuntimeError, match="kthvalue"):
        t.kthvalue(0)
    with pytest.raises(IndexError, match="kthvalue"):
        t.kthvalue(3, 1)
    with pytest.raises(RuntimeError, match="median"):
        fiamma.median(fiamma.empty(2, 0), 1)
    with pytest.raises(IndexError, match="mode"):
        fiamma.mode(t, 5)
    with pytest.raises(IndexError, match="cummax"):
        fiamma.cummax(t, 2)
    with pytest.raises(TypeError, match="sort"):
        fiamma.sort([1, 2])
    with pytest.raises(RuntimeError, match="searchsorted"):
        fiamma.searchsorted(fiamma.ones(2, 3), fiamma.ones(3, 3))
    with pytest.raises(RuntimeError, match="searchsorted"):
        fiamma.searchsorted(fiamma.ones(3), fiamma.ones(2), side="left", right=True)
    with pytest.raises(IndexError, match="searchsorted"):
        fiamma.searchsorted(fiamma.ones(3), fiamma.ones(2),
                            sorter=fiamma.tensor([0, 5, 1]))
    with pytest.raises(RuntimeError, match="bucketize"):
        fiamma.bucketize(fiamma.ones(3), fiamma.ones(2, 2))
    with pytest.raises(RuntimeError, match="diff"):
        fiamma.diff(fiamma.tensor(1.0))
    with pytest.raises(IndexError, match="unique"):
        fiamma.unique(t, dim=3)
    with pytest.warns(UserWarning, match="sort: an output .* was resized"):
        fiamma.sort(t, out=(fiamma.empty(3), fiamma.empty(3, dtype=fiamma.int64)))


def test_zero_d_and_empty():
    x = fiamma.tensor(3.5)
    v, i = x.sort()
    assert v.shape == () and v.item() == 3.5 and i.item() == 0
    v, i = x.topk(1)
    assert v.item() == 3.5 and i.item() == 0
    assert x.topk(0).values.item() == 3.5  # like PyTorch: a 0-d tensor has its one element
    assert x.median().item() == 3.5
    assert x.kthvalue(1).values.item() == 3.5
    assert fiamma.cummax(x, 0).values.item() == 3.5
    e = fiamma.empty(0, 4)
    assert e.sort(0).values.shape == (0, 4)
    assert e.topk(0, 0).values.shape == (0, 4)
    assert e.kthvalue(1, 1).values.shape == (0,)
    assert np.isnan(fiamma.median(fiamma.empty(0)).item())
    assert fiamma.unique(e).shape == (0,)


# ---- autograd recording --------------------------------------------------------------------------

class FakeRecorder:
    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        self.calls.append((op, out, inputs, kwargs))

    def record_inplace(self, op, out, inputs, kwargs):
        pass

    def requires_grad_(self, t, flag):
        t.requires_grad = bool(flag)


def test_records_differentiable_results():
    prev = G._recorder
    rec = FakeRecorder()
    G.register_autograd(rec)
    try:
        x = fiamma.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
        x.requires_grad = True
        x.sort(1, descending=True)
        x.topk(2)
        x.kthvalue(2)
        x.median()
        x.median(0)
        x.nanmedian(1, keepdim=True)
        x.mode(1)
        x.cummax(1)
        x.cummin(0)
        x.diff(dim=0)
        x.msort()
        ops = [c[0] for c in rec.calls]
        assert ops == ["sort", "topk", "kthvalue", "median", "median", "nanmedian", "mode",
                       "cummax", "cummin", "diff", "sort"]
        op, out, inputs, kw = rec.calls[0]
        assert inputs[0] is x and kw == {"dim": 1, "descending": True, "stable": False}
        assert rec.calls[1][3] == {"k": 2, "dim": 1, "largest": True, "sorted": True}
        assert rec.calls[2][3] == {"dim": 1, "keepdim": False, "k": 2}
        assert rec.calls[3][3] == {"dim": None, "keepdim": False}
        assert rec.calls[9][3]["n"] == 1 and rec.calls[9][3]["dim"] == 0
        n = len(rec.calls)
        x.argsort()
        fiamma.searchsorted(fiamma.tensor([1.0, 2.0]), x)
        x.unique()
        assert len(rec.calls) == n
    finally:
        G._recorder = prev


@pytest.mark.parametrize("m", [1, 3])
def test_unique_runs_c_checks_positions(m):
    # the C entry checks the row numbers and positions it is given (bad ones are reported, no
    # write happens out of bounds)
    from fiamma._lib import ffi, lib

    n = 5
    data = np.zeros((n, m), np.float32)
    first = np.zeros(n, np.int64)
    inv = np.zeros(n, np.int64)
    ng = ffi.new("int64_t *")
    for bad in (-1, n, 1 << 40):
        pos = np.arange(n, dtype=np.int64)
        pos[3] = bad
        rc = lib.fm_unique_runs(8, n, m, data.ctypes.data, 0, pos.ctypes.data,
                                first.ctypes.data, inv.ctypes.data, 0, ng)
        assert rc == lib.FM_ERR_INDEX and ng[0] == bad
        order = np.arange(n, dtype=np.int64)
        order[2] = bad
        rc = lib.fm_unique_runs(8, n, m, data.ctypes.data, order.ctypes.data, 0,
                                first.ctypes.data, 0, 0, ng)
        assert rc == lib.FM_ERR_INDEX and ng[0] == bad
