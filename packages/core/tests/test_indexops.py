"""Index ops (gather, scatter family, index_*, masked_*, take, put, bincount, histc) against
NumPy references: random shapes incl. 0-d, empty and non-contiguous layouts, every dtype."""

import itertools

import numpy as np
import pytest
from conftest import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    LAYOUTS,
    assert_close,
    make_pair,
    to_numpy,
    to_tensor,
)
from hypothesis import HealthCheck, given, settings, strategies as st

import fiamma
from fiamma import _grad_hook as G

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
dtypes = st.sampled_from(ALL_DTYPES)
layouts = st.sampled_from(LAYOUTS)


def idx_tensor(a, layout="contiguous"):
    """An int64 index tensor (transposed layout: a non-contiguous view)."""
    a = np.asarray(a, dtype=np.int64)
    if layout == "transposed" and a.ndim >= 2:
        return fiamma.from_numpy(np.ascontiguousarray(a.T)).permute(
            tuple(range(a.ndim - 1, -1, -1)))
    return fiamma.from_numpy(a.copy())


def ref_dtype(x):
    return np.float64 if x.dtype.kind == "f" else x.dtype


@st.composite
def gather_case(draw, src_bigger=False):
    """(shape of input, dim, shape of index) with index no larger outside dim."""
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple))
    nd = max(len(shape), 1)
    dim = draw(st.integers(-nd, nd - 1))
    d = dim % nd
    full = shape if shape else (1,)
    ishape = tuple(draw(st.integers(0, 5)) if i == d else draw(st.integers(0, full[i]))
                   for i in range(nd))
    if not shape:
        ishape = () if draw(st.booleans()) else (draw(st.integers(0, 2)),)
    return shape, dim, ishape


def np_gather(x, dim, idx):
    xs = x.reshape(1) if x.ndim == 0 else x
    ix = idx.reshape(-1) if idx.ndim == 0 else idx
    d = dim % xs.ndim
    sub = xs[tuple(slice(None) if i == d else slice(0, n) for i, n in enumerate(ix.shape))]
    return np.take_along_axis(sub, ix, d).reshape(idx.shape)


# ---- gather / take_along_dim ------------------------------------------------------------------

@SETTINGS
@given(gather_case(), dtypes, layouts, st.sampled_from(["contiguous", "transposed"]),
       st.integers(0, 2**31))
def test_gather(case, dt, layout, ilayout, seed):
    shape, dim, ishape = case
    rng = np.random.default_rng(seed)
    x, a = make_pair(shape, dt, rng, layout)
    size = (shape if shape else (1,))[dim % max(len(shape), 1)]
    iv = rng.integers(0, max(size, 1), size=ishape) if size else np.zeros(ishape, np.int64)
    if size == 0 and iv.size:
        with pytest.raises(IndexError, match="gather"):
            fiamma.gather(x, dim, idx_tensor(iv, ilayout))
        return
    got = fiamma.gather(x, dim, idx_tensor(iv, ilayout))
    assert_close(got, np_gather(a, dim, iv), dt)
    got32 = x.gather(dim, fiamma.from_numpy(iv.astype(np.int32)))
    assert_close(got32, np_gather(a, dim, iv), dt)


def test_gather_out_and_large_parallel(rng):
    x = rng.standard_normal((300, 700)).astype(np.float32)
    for dim in (0, 1):
        iv = rng.integers(0, x.shape[dim], size=(300, 700))
        out = fiamma.empty(0)
        fiamma.gather(fiamma.from_numpy(x), dim, fiamma.from_numpy(iv), out=out)
        np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x, iv, dim))
    big = rng.standard_normal(400_000).astype(np.float32)  # prefetching branch
    iv = rng.integers(0, big.size, size=200_000)
    np.testing.assert_array_equal(fiamma.gather(fiamma.from_numpy(big), 0,
                                                fiamma.from_numpy(iv)).numpy(), big[iv])


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), dtypes,
       st.integers(0, 2**31), st.data())
def test_take_along_dim(shape, dt, seed, data):
    rng = np.random.default_rng(seed)
    x, a = make_pair(shape, dt, rng, "strided")
    d = data.draw(st.integers(0, len(shape) - 1))
    # broadcast: indices have size 1 where the input is larger, and vice versa
    ishape = tuple(data.draw(st.integers(0, 3)) if i == d else
                   data.draw(st.sampled_from([1, n])) for i, n in enumerate(shape))
    iv = rng.integers(0, shape[d], size=ishape)
    got = fiamma.take_along_dim(x, fiamma.from_numpy(iv), d)
    assert_close(got, np.take_along_axis(a, iv, d), dt)
    flat = rng.integers(0, a.size, size=5)
    assert_close(x.take_along_dim(fiamma.from_numpy(flat)), a.reshape(-1)[flat], dt)


# ---- scatter family -----------------------------------------------------------------------------

def np_scatter(x, dim, idx, src, op, include_self=True):
    """Row-major loop over the index positions (the order fiamma promises)."""
    out = x.astype(ref_dtype(x)).reshape(x.shape or (1,))
    idx = idx.reshape(idx.shape or (1,))
    src = np.broadcast_to(src, idx.shape) if np.ndim(src) == 0 else src.reshape(src.shape or (1,))
    d = dim % out.ndim
    hit = np.zeros(out.shape, np.int64)
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[d] = idx[p]
        q = tuple(q)
        v = src[p]
        if not include_self and not hit[q]:
            out[q] = v
        elif op == "set":
            out[q] = v
        elif op in ("sum", "add", "mean"):
            out[q] = out[q] + v
        elif op in ("prod", "multiply"):
            out[q] = out[q] * v
        elif op == "amax":
            out[q] = v if np.isnan(v) or v > out[q] else out[q]
        elif op == "amin":
            out[q] = v if np.isnan(v) or v < out[q] else out[q]
        hit[q] += 1
    if op == "mean":
        cnt = hit + (1 if include_self else 0)
        cnt = np.maximum(cnt, 1)
        out = out / cnt if out.dtype.kind == "f" else np.floor_divide(out, cnt)
    return out.reshape(x.shape)


def _cast_like(ref, dt):
    if dt is fiamma.bool:
        return ref.astype(bool)
    if dt.is_floating_point:
        return ref
    return ref.astype(to_numpy(fiamma.zeros(1, dtype=dt)).dtype)


@SETTINGS
@given(gather_case(), dtypes, layouts, st.integers(0, 2**31),
       st.sampled_from(["set", "value", "add", "multiply", "scatter_add"]))
def test_scatter(case, dt, layout, seed, kind):
    shape, dim, ishape = case
    rng = np.random.default_rng(seed)
    size = (shape if shape else (1,))[dim % max(len(shape), 1)]
    if size == 0:
        return
    x, a = make_pair(shape, dt, rng, layout, low=-3, high=3)
    src_shape = tuple(n + 1 for n in ishape) if ishape else ()
    s, sa = make_pair(src_shape, dt, rng, "strided", low=-3, high=3)
    iv = rng.integers(0, size, size=ishape)
    it = idx_tensor(iv)
    sub = sa[tuple(slice(0, n) for n in ishape)] if ishape else sa
    if kind == "set":
        got, ref = x.scatter(dim, it, s), np_scatter(a, dim, iv, sub, "set")
    elif kind == "value":
        got, ref = fiamma.scatter(x, dim, it, 2), np_scatter(a, dim, iv, np.array(2), "set")
    elif kind == "scatter_add":
        got, ref = fiamma.scatter_add(x, dim, it, s), np_scatter(a, dim, iv, sub, "add")
    else:
        got, ref = x.scatter(dim, it, s, reduce=kind), np_scatter(a, dim, iv, sub, kind)
    assert_close(got, _cast_like(ref, dt), dt, rtol=2e-2, atol=2e-2)
    y = x.clone()  # in place
    if kind == "scatter_add":
        assert y.scatter_add_(dim, it, s) is y
    elif kind == "value":
        y.scatter_(dim, it, value=2)
    else:
        y.scatter_(dim, it, s, reduce=None if kind == "set" else kind)
    assert_close(y, got, dt)


@SETTINGS
@given(gather_case(), st.sampled_from([d for d in ALL_DTYPES if d is not fiamma.bool]),
       st.sampled_from(["sum", "prod", "mean", "amax", "amin"]), st.booleans(),
       st.integers(0, 2**31))
def test_scatter_reduce(case, dt, reduce, include_self, seed):
    shape, dim, ishape = case
    rng = np.random.default_rng(seed)
    size = (shape if shape else (1,))[dim % max(len(shape), 1)]
    if size == 0:
        return
    x, a = make_pair(shape, dt, rng, "transposed", low=-3, high=3)
    s, sa = make_pair(ishape, dt, rng, "contiguous", low=-3, high=3)
    iv = rng.integers(0, size, size=ishape)
    got = x.scatter_reduce(dim, idx_tensor(iv), s, reduce, include_self=include_self)
    ref = np_scatter(a, dim, iv, sa, reduce, include_self)
    assert_close(got, _cast_like(ref, dt), dt, rtol=3e-2, atol=3e-2)
    y = x.clone()
    y.scatter_reduce_(dim, idx_tensor(iv), s, reduce, include_self=include_self)
    assert_close(y, got, dt)


def test_scatter_duplicates_last_wins_and_exact_order():
    x = fiamma.zeros(3)
    idx = fiamma.tensor([1, 1, 1, 0])
    assert fiamma.scatter(x, 0, idx, fiamma.tensor([5.0, 6.0, 7.0, 1.0])).tolist() == \
        [1.0, 7.0, 0.0]
    # float32 accumulation in index order: 1e8 + 1 - 1e8 == 0 (and not 1)
    big = fiamma.tensor([1e8, 1.0, -1e8], dtype=fiamma.float32)
    got = fiamma.zeros(1).scatter_add(0, fiamma.tensor([0, 0, 0]), big)
    ref = np.float32(0)
    for v in big.numpy():
        ref = np.float32(ref + v)
    assert got.item() == ref
    # large, multi-threaded: same as the serial reference
    rng = np.random.default_rng(1)
    src = rng.standard_normal((400, 500)).astype(np.float32)
    iv = rng.integers(0, 50, size=(400, 500))
    got = fiamma.zeros(400, 50).scatter_add(1, fiamma.from_numpy(iv), fiamma.from_numpy(src))
    ref = np.zeros((400, 50), np.float32)
    np.add.at(ref, (np.arange(400)[:, None], iv), src)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
    got0 = fiamma.zeros(50, 500).scatter_add(0, fiamma.from_numpy(iv), fiamma.from_numpy(src))
    ref0 = np.zeros((50, 500), np.float32)
    np.add.at(ref0, (iv, np.arange(500)[None, :]), src)
    np.testing.assert_allclose(got0.numpy(), ref0, rtol=1e-5, atol=1e-5)


def test_scatter_reduce_nan_and_int_mean():
    nan = float("nan")
    got = fiamma.zeros(3).scatter_reduce(0, fiamma.tensor([1, 1]), fiamma.tensor([nan, 1.0]),
                                         "amax")
    assert np.isnan(got[1].item()) and got[0].item() == 0
    got = fiamma.arange(6).reshape(2, 3).scatter_reduce(
        1, fiamma.tensor([[1, 1], [0, 0]]), fiamma.tensor([[2, 3], [4, 4]]), "mean")
    assert got.tolist() == [[0, 2, 2], [3, 4, 5]]


# ---- index_select / index_add / index_copy / index_fill --------------------------------------

@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), dtypes, layouts,
       st.integers(0, 2**31), st.data())
def test_index_family(shape, dt, layout, seed, data):
    rng = np.random.default_rng(seed)
    d = data.draw(st.integers(0, len(shape) - 1))
    x, a = make_pair(shape, dt, rng, layout, low=-3, high=3)
    n = data.draw(st.integers(0, 4))
    if shape[d] == 0:
        n = 0
    iv = rng.integers(0, max(shape[d], 1), size=n)
    it = fiamma.from_numpy(iv)
    assert_close(fiamma.index_select(x, d, it), np.take(a, iv, axis=d), dt)
    assert_close(x.index_select(d, it.int()), np.take(a, iv, axis=d), dt)
    sshape = shape[:d] + (n,) + shape[d + 1:]
    s, sa = make_pair(sshape, dt, rng, "strided", low=-3, high=3)
    # index_add: np.add.at in the reference dtype
    ref = a.astype(ref_dtype(a))
    np.add.at(ref, (slice(None),) * d + (iv,), sa.astype(ref.dtype) * (1 if dt is fiamma.bool
                                                                          else 2))
    alpha = True if dt is fiamma.bool else 2
    assert_close(fiamma.index_add(x, d, it, s, alpha=alpha), _cast_like(ref, dt), dt,
                 rtol=2e-2, atol=2e-2)
    y = x.clone()
    y.index_add_(d, it, s, alpha=alpha)
    assert_close(y, _cast_like(ref, dt), dt, rtol=2e-2, atol=2e-2)
    # index_copy: last duplicate wins
    ref = a.copy()
    for j, v in enumerate(iv):
        ref[(slice(None),) * d + (v,)] = sa[(slice(None),) * d + (j,)]
    assert_close(x.index_copy(d, it, s), ref, dt)
    y = x.clone()
    y.index_copy_(d, it, s)
    assert_close(y, ref, dt)
    # index_fill with negative positions
    neg = iv - shape[d] if shape[d] else iv
    ref = a.copy()
    ref[(slice(None),) * d + (iv,)] = 1
    assert_close(x.index_fill(d, fiamma.from_numpy(neg), 1), ref, dt)
    y = x.clone()
    y.index_fill_(d, fiamma.from_numpy(iv), fiamma.tensor(1))
    assert_close(y, ref, dt)


def test_index_select_0d():
    x = fiamma.tensor(4.0)
    assert fiamma.index_select(x, 0, fiamma.tensor([0])).shape == ()
    assert fiamma.index_select(fiamma.arange(5), 0, fiamma.tensor(3)).tolist() == [3]


# ---- masked ops ---------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple), dtypes, layouts,
       st.integers(0, 2**31), st.booleans())
def test_masked(shape, dt, layout, seed, bcast_mask):
    rng = np.random.default_rng(seed)
    x, a = make_pair(shape, dt, rng, layout)
    mshape = shape[1:] if bcast_mask and shape else shape
    m = rng.integers(0, 2, size=mshape).astype(bool)
    mt = fiamma.from_numpy(m.copy())
    mb = np.broadcast_to(m, a.shape)
    assert_close(x.masked_fill(mt, 1), np.where(mb, np.array(1).astype(a.dtype), a), dt)
    y = x.clone()
    y.masked_fill_(mt, fiamma.tensor(0))
    assert_close(y, np.where(mb, np.array(0).astype(a.dtype), a), dt)
    assert_close(fiamma.masked_select(x, mt), a[mb], dt)
    # masked_select broadcasts the input too
    m2 = rng.integers(0, 2, size=(2,) + shape).astype(bool)
    assert_close(x.masked_select(fiamma.from_numpy(m2)),
                 np.broadcast_to(a, m2.shape)[m2], dt)
    n = int(mb.sum())
    s, sa = make_pair((n + 2,), dt, rng, "strided")
    ref = a.copy()
    ref[mb] = sa[:n]
    assert_close(x.masked_scatter(mt, s), ref, dt)
    y = x.clone()
    y.masked_scatter_(mt, s)
    assert_close(y, ref, dt)


# ---- take / put -------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple), dtypes, layouts,
       st.integers(0, 2**31), st.booleans())
def test_take_put(shape, dt, layout, seed, accumulate):
    rng = np.random.default_rng(seed)
    x, a = make_pair(shape, dt, rng, layout, low=-3, high=3)
    numel = a.size
    if numel == 0:
        assert fiamma.take(x, fiamma.zeros(0, dtype=fiamma.int64)).shape == (0,)
        with pytest.raises(IndexError, match="take"):
            fiamma.take(x, fiamma.tensor([0]))
        return
    iv = rng.integers(-numel, numel, size=(2, 3))
    assert_close(fiamma.take(x, fiamma.from_numpy(iv)), np.take(a.reshape(-1), iv), dt)
    s, sa = make_pair((6,), dt, rng, "strided", low=-3, high=3)
    ref = a.reshape(-1).astype(ref_dtype(a))
    if accumulate:
        np.add.at(ref, iv.reshape(-1) % numel, sa.astype(ref.dtype))
    else:
        np.put(ref, iv.reshape(-1) % numel, sa)  # in order: the last duplicate wins
    ref = _cast_like(ref.reshape(a.shape), dt)
    y = x.clone() if layout == "contiguous" else x  # non-contiguous put_ writes through
    before = to_numpy(y)
    assert y.put_(fiamma.from_numpy(iv), s, accumulate=accumulate) is y
    assert_close(y, ref, dt, rtol=2e-2, atol=2e-2)
    z = fiamma.from_numpy(before) if dt is not fiamma.bfloat16 else to_tensor(before, dt)
    assert_close(z.put(fiamma.from_numpy(iv), s, accumulate), ref, dt, rtol=2e-2, atol=2e-2)


# ---- nonzero / argwhere --------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple), dtypes, layouts,
       st.integers(0, 2**31))
def test_nonzero_argwhere(shape, dt, layout, seed):
    rng = np.random.default_rng(seed)
    x, a = make_pair(shape, dt, rng, layout, low=-1, high=1)
    assert_close(fiamma.argwhere(x), np.argwhere(a))
    assert_close(x.nonzero(), np.argwhere(a))
    cols = fiamma.nonzero(x, as_tuple=True)
    ref = np.nonzero(a.reshape(-1) if a.ndim == 0 else a)
    assert len(cols) == len(ref)
    for c, r in zip(cols, ref):
        assert_close(c, r)


# ---- bincount / histc ----------------------------------------------------------------------

@pytest.mark.parametrize("dt", INT_DTYPES)
def test_bincount(dt, rng):
    a = rng.integers(0, 20, size=50)
    x = fiamma.from_numpy(a).to(dt)
    got = fiamma.bincount(x)
    assert got.dtype is fiamma.int64
    np.testing.assert_array_equal(got.numpy(), np.bincount(a))
    np.testing.assert_array_equal(x.bincount(minlength=30).numpy(), np.bincount(a, minlength=30))
    w = rng.standard_normal(50)
    got = fiamma.bincount(x, fiamma.from_numpy(w.astype(np.float32)))
    assert got.dtype is fiamma.float32
    np.testing.assert_allclose(got.numpy(), np.bincount(a, w.astype(np.float32)), rtol=1e-5,
                               atol=1e-5)
    got = fiamma.bincount(x[::2], fiamma.from_numpy(w)[::2])
    assert got.dtype is fiamma.float64
    np.testing.assert_allclose(got.numpy(), np.bincount(a[::2], w[::2]))
    assert fiamma.bincount(fiamma.zeros(0, dtype=dt), minlength=3).tolist() == [0, 0, 0]


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_histc(dt, rng):
    a = rng.standard_normal(200) * 3
    if dt in (fiamma.float16, fiamma.bfloat16):  # values exact in the dtype
        a = np.round(a * 4) / 4
    x = to_tensor(a, dt)
    got = fiamma.histc(x, bins=7, min=-2, max=3)
    assert got.dtype is dt
    ref, _ = np.histogram(a, bins=7, range=(-2, 3))
    np.testing.assert_array_equal(to_numpy(got), ref)
    got = x.histc(bins=5)  # min == max: the data's range
    ref, _ = np.histogram(a, bins=5, range=(a.min(), a.max()))
    np.testing.assert_array_equal(to_numpy(got), ref)
    # NaN and out-of-range values are ignored; a constant input widens the range by 1
    y = to_tensor(np.array([1.0, np.nan, 9.0, 1.0]), dt)
    assert fiamma.histc(y, bins=2, min=0, max=2).tolist() == [0, 2]
    assert fiamma.histc(to_tensor(np.ones(3), dt), bins=4).tolist() == [0, 0, 3, 0]
    assert fiamma.histc(fiamma.zeros(0, dtype=dt), bins=3).tolist() == [0, 0, 0]


# ---- errors -------------------------------------------------------------------------------------

def test_errors():
    x = fiamma.arange(6.0).reshape(2, 3)
    cases = [
        (IndexError, "gather.*index 3 .*dimension 1 with size 3",
         lambda: fiamma.gather(x, 1, fiamma.tensor([[3], [0]]))),
        (IndexError, "gather.*index -1", lambda: fiamma.gather(x, 1, fiamma.tensor([[-1]]))),
        (IndexError, "scatter.*index 5", lambda: x.scatter(0, fiamma.tensor([[5]]), 1.0)),
        (IndexError, "scatter_add_.*index -1",
         lambda: x.clone().scatter_add_(1, fiamma.tensor([[-1]]), x)),
        (IndexError, "scatter_reduce.*index 9",
         lambda: x.scatter_reduce(1, fiamma.tensor([[9]]), x, "amax")),
        (IndexError, "index_select.*index -1",
         lambda: fiamma.index_select(x, 0, fiamma.tensor([-1]))),
        (IndexError, "index_add_.*index 2",
         lambda: x.clone().index_add_(0, fiamma.tensor([2]), fiamma.ones(1, 3))),
        (IndexError, "index_copy.*index 3",
         lambda: x.index_copy(1, fiamma.tensor([3]), fiamma.ones(2, 1))),
        (IndexError, "index_fill.*index -4",
         lambda: x.index_fill(1, fiamma.tensor([-4]), 0)),
        (IndexError, "take.*index 6", lambda: fiamma.take(x, fiamma.tensor([6]))),
        (IndexError, "put_.*index -7",
         lambda: x.clone().put_(fiamma.tensor([-7]), fiamma.tensor([1.0]))),
        (IndexError, "take_along_dim|gather",
         lambda: fiamma.take_along_dim(x, fiamma.tensor([[4]]), 1)),
        (RuntimeError, "gather.*int32/int64",
         lambda: fiamma.gather(x, 1, fiamma.tensor([[1.0]]))),
        (RuntimeError, "gather.*int32/int64",
         lambda: fiamma.gather(x, 1, fiamma.tensor([[1]], dtype=fiamma.int16))),
        (RuntimeError, "take.*int64", lambda: fiamma.take(x, fiamma.tensor([1],
                                                                           dtype=fiamma.int32))),
        (RuntimeError, "index_fill.*int64",
         lambda: x.index_fill(1, fiamma.tensor([1], dtype=fiamma.int32), 0)),
        (RuntimeError, "gather.*Size does not match",
         lambda: fiamma.gather(x, 1, fiamma.tensor([[1], [0], [0]]))),
        (RuntimeError, "gather.*same number of dimensions",
         lambda: fiamma.gather(x, 1, fiamma.tensor([1]))),
        (RuntimeError, "scatter.*dtype",
         lambda: x.scatter(1, fiamma.tensor([[1]]), fiamma.ones(1, 1, dtype=fiamma.float64))),
        (RuntimeError, "scatter.*reduce", lambda: x.scatter(1, fiamma.tensor([[1]]), 1.0,
                                                            reduce="sum")),
        (RuntimeError, "scatter_reduce.*reduce",
         lambda: x.scatter_reduce(1, fiamma.tensor([[1]]), x, "max")),
        (RuntimeError, "index_add.*shape",
         lambda: x.index_add(1, fiamma.tensor([1]), fiamma.ones(3, 1))),
        (RuntimeError, "index_add.*same scalar type",
         lambda: x.index_add(1, fiamma.tensor([1]), fiamma.ones(2, 1, dtype=fiamma.float64))),
        (IndexError, "index_select.*vector",
         lambda: fiamma.index_select(x, 1, fiamma.tensor([[1]]))),
        (RuntimeError, "masked_fill.*bool",
         lambda: x.masked_fill(fiamma.tensor([1, 0, 1], dtype=fiamma.uint8), 1.0)),
        (RuntimeError, "masked_fill.*0-dimensional",
         lambda: x.masked_fill(fiamma.tensor([True, False, True]), fiamma.tensor([1.0]))),
        (RuntimeError, "masked_fill_.*broadcast",
         lambda: x.masked_fill_(fiamma.ones(3, 2, 3, dtype=fiamma.bool), 1.0)),
        (RuntimeError, "masked_scatter.*Number of elements",
         lambda: x.masked_scatter(fiamma.tensor([True, False, True]), fiamma.ones(3))),
        (RuntimeError, "put_.*same number of elements",
         lambda: x.clone().put_(fiamma.tensor([1, 2]), fiamma.tensor([1.0]))),
        (RuntimeError, "bincount.*non-negative", lambda: fiamma.bincount(fiamma.tensor([-1, 2]))),
        (RuntimeError, "bincount", lambda: fiamma.bincount(fiamma.tensor([[1]]))),
        (RuntimeError, "bincount", lambda: fiamma.bincount(fiamma.tensor([1.0]))),
        (RuntimeError, "bincount.*weights",
         lambda: fiamma.bincount(fiamma.tensor([1, 2]), fiamma.tensor([1.0]))),
        (NotImplementedError, "histc", lambda: fiamma.histc(fiamma.tensor([1, 2]))),
        (RuntimeError, "histc.*max must be larger",
         lambda: fiamma.histc(fiamma.tensor([1.0]), min=3, max=1)),
        (RuntimeError, "histc.*not finite",
         lambda: fiamma.histc(fiamma.tensor([1.0, float("inf")]))),
        (RuntimeError, "scatter_add_.*memory location",
         lambda: fiamma.zeros(1).expand(3).scatter_add_(0, fiamma.tensor([0]),
                                                        fiamma.ones(1))),
    ]
    for exc, pat, fn in cases:
        with pytest.raises(exc, match=pat):
            fn()


def test_inplace_untouched_on_bad_index():
    x = fiamma.arange(6.0).reshape(2, 3)
    for fn in (lambda y: y.scatter_(1, fiamma.tensor([[0, 1], [2, 3]]), 9.0),
               lambda y: y.scatter_add_(1, fiamma.tensor([[0, 1], [2, 3]]), fiamma.ones(2, 2)),
               lambda y: y.scatter_reduce_(1, fiamma.tensor([[0, 1], [2, 3]]),
                                           fiamma.ones(2, 2), "prod", include_self=False),
               lambda y: y.index_add_(0, fiamma.tensor([0, 2]), fiamma.ones(2, 3)),
               lambda y: y.index_fill_(0, fiamma.tensor([0, 2]), 9.0),
               lambda y: y.put_(fiamma.tensor([0, 6]), fiamma.tensor([9.0, 9.0]))):
        y = x.clone()
        with pytest.raises(IndexError):
            fn(y)
        assert y.tolist() == x.tolist()


# ---- autograd recording -----------------------------------------------------------------------

class _Rec:
    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        self.calls.append((op, len(inputs), tuple(sorted(kwargs))))

    def record_inplace(self, op, out, inputs, kwargs):
        self.calls.append((op, len(inputs), tuple(sorted(kwargs))))


def test_records_for_autograd(monkeypatch):
    rec = _Rec()
    monkeypatch.setattr(G, "_recorder", rec)
    x = fiamma.arange(6.0).reshape(2, 3)
    x.requires_grad = True
    i = fiamma.tensor([[0, 1], [2, 0]])
    m = fiamma.tensor([True, False, True])
    fiamma.gather(x, 1, i)
    fiamma.scatter_add(x, 1, i, x)
    fiamma.scatter_reduce(x, 1, i, x, "amax", include_self=False)
    fiamma.index_select(x, 0, fiamma.tensor([1]))
    fiamma.masked_fill(x, m, 0.0)
    fiamma.take(x, fiamma.tensor([1]))
    y = fiamma.zeros(2, 3)
    src = fiamma.ones(1, 3)
    src.requires_grad = True
    y.index_add_(0, fiamma.tensor([1]), src)
    ops = [c[0] for c in rec.calls]
    for name in ("gather", "scatter_add", "scatter_reduce", "index_select", "masked_fill",
                 "take", "index_add_"):
        assert name in ops, (name, ops)
    assert ("scatter_reduce", 4, ("include_self", "reduce")) in rec.calls
    rec.calls.clear()
    fiamma.gather(x.detach(), 1, i)  # no input requires grad: nothing recorded
    assert rec.calls == []


def test_all_dtypes_scatter_value_large(rng):
    """Every dtype through the parallel kernel: scatter a value along a large dim."""
    for dt in ALL_DTYPES:
        x = fiamma.zeros(256, 300, dtype=dt)
        iv = rng.integers(0, 300, size=(256, 300))
        got = x.scatter(1, fiamma.from_numpy(iv), 1)
        ref = np.zeros((256, 300), bool)
        ref[np.arange(256)[:, None], iv] = True
        np.testing.assert_array_equal(to_numpy(got) != 0, ref)


def test_product_shapes_small():
    """Exhaustive small shapes: gather along each dim equals the NumPy reference."""
    for shape in itertools.product([1, 2, 3], repeat=2):
        a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        for d in range(2):
            iv = np.indices(shape)[d][..., ::-1].copy() % shape[d]
            got = fiamma.gather(fiamma.from_numpy(a), d, fiamma.from_numpy(iv))
            np.testing.assert_array_equal(got.numpy(), np.take_along_axis(a, iv, d))
