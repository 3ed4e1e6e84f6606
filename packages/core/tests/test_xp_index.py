"""The array-module backend's index family on every device besides the CPU: advanced indexing
(get, set, accumulate, masks, errors), the dim-wise index ops, nonzero, masks, bincount and
histc, each against the CPU backend's result."""

import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_same

import fiamma
from fiamma._backend.xp import XpBackend

NUM_DTYPES = [d for d in ALL_DTYPES if d is not fiamma.bool]


def _vals(shape, dt, seed=0):
    """Small integers (exact in every dtype; bool: parity), with a NaN in floating dtypes."""
    a = np.random.default_rng(seed).integers(-4, 9, shape).astype(np.float64)
    if dt is fiamma.bool:
        return fiamma.tensor(a.astype(np.int64) % 2 == 1)
    if dt is fiamma.uint8:
        a = np.abs(a)
    t = fiamma.tensor(a, dtype=dt)
    if dt.is_floating_point and t.numel() > 3:
        t.view(-1)[3] = float("nan")
    return t


def _outs(r):
    if isinstance(r, fiamma.Tensor):
        return [r]
    return [t for t in r if isinstance(t, fiamma.Tensor)]


def _both(f, device, *ts, **tol):
    """f on the CPU tensors ts and on their copies on device: the same results."""
    want = _outs(f(*ts))
    got = _outs(f(*[t.to(device) if isinstance(t, fiamma.Tensor) else t for t in ts]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == device
        assert_same(g, w, **tol)


def _both_raise(f, device, *ts):
    """f raises on the CPU, and raises the same exception type on device."""
    with pytest.raises(Exception) as cpu_err:
        f(*ts)
    with pytest.raises(cpu_err.type):
        f(*[t.to(device) if isinstance(t, fiamma.Tensor) else t for t in ts])


# ---- advanced indexing ------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_getitem(device, dt):
    x = _vals((4, 5, 3), dt)
    i = fiamma.tensor([0, 3, -1, 2, 0])
    j = fiamma.tensor([[1], [-2]])
    m = fiamma.tensor([True, False, True, True])
    for f in [lambda x: x[i], lambda x: x[:, i], lambda x: x[i, i % 3],
              lambda x: x[j, :, fiamma.tensor([0, 2, 1])], lambda x: x[x != 0],
              lambda x: x[m], lambda x: x[:, [1, 3]], lambda x: x[[[0, 1]], 2:, [-1, 0]],
              lambda x: x[np.array([True, False, False, True])], lambda x: x[True],
              lambda x: x[None, i, ..., 1], lambda x: x.permute(2, 0, 1)[:, i],
              lambda x: x[::2, ::-1 if False else 2][[1, 0]], lambda x: x[[]],
              lambda x: x[i.int()], lambda x: x[m, 1:, fiamma.tensor(0)]]:
        _both(f, device, x)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_setitem(device, dt):
    x = _vals((4, 5), dt)
    v = _vals((5,), dt, seed=1)

    def put(key, value):
        def f(x, *vs):
            y = x.clone()
            y[key] = vs[0] if vs else value
            return y
        return f

    dup = fiamma.tensor([1, 3, 1, -3, 1])  # 1 written three times: the last write wins
    _both(put(dup, 0), device, x)
    _both(put(dup, None), device, x, _vals((5, 5), dt, seed=2))
    _both(put((dup, fiamma.tensor([0, 4, 2, 2, 2])), None), device, x, _vals((5,), dt, 3))
    _both(put((slice(None), [4, 0, 4]), None), device, x, _vals((4, 1), dt, 4))
    _both(put(x != 0, 1), device, x)
    _both(put(fiamma.tensor([True, False, True, False]), None), device, x, v)
    _both(put((x != 0), None), device, x, _vals((int((x != 0).sum()),), dt, 5))
    _both(put(([0, 2], slice(1, 3)), None), device, x, _vals((2, 2), dt, 6))


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_index_put_accumulate(device, dt):
    x = _vals((4, 5), dt)
    idx = fiamma.tensor([2, 0, 2, -2, 2])

    def acc(x, v):
        return x.index_put((idx,), v, accumulate=True)

    def acc2(x, v):
        return x.index_put((idx, fiamma.tensor([1, 1, 1, 4, 1])), v[0], accumulate=True)

    def iadd(x, v):
        y = x.clone()
        y[:, [1, 1, 3]] += v[:4, :3]
        return y
    v = _vals((5, 5), dt, seed=7)
    _both(acc, device, x, v)
    _both(acc2, device, x, v)
    if dt is not fiamma.bool:
        _both(iadd, device, x, v)


def test_index_errors(device):
    x = fiamma.arange(12.0).reshape(3, 4)

    def setbad(x):
        x[fiamma.tensor([0, 5])] = 1.0

    for f in [lambda x: x[fiamma.tensor([0, 3])], lambda x: x[[0, -4]],
              lambda x: x[:, fiamma.tensor([[1], [4]])], lambda x: x[[0, 1], [0, 4]], setbad,
              lambda x: x.index_put((fiamma.tensor([-4]),), fiamma.tensor(1.0), True),
              lambda x: x[fiamma.tensor([True, False])]]:
        _both_raise(f, device, x)
    d = x.to(device)
    with pytest.raises(IndexError, match="out of bounds"):
        d[fiamma.tensor([1, 2, 9, 0])] = 5.0
    assert_same(d, x)  # every index is checked before the first write


# ---- dim-wise index ops -----------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_gather_scatter(device, dt):
    x = _vals((3, 4), dt)
    src = _vals((3, 4), dt, seed=1)
    ix = fiamma.tensor([[0, 3, 3, 1], [2, 2, 2, 2], [1, 0, 3, 3]])
    ix0 = fiamma.tensor([[0, 2, 0, 1], [2, 2, 1, 0]])
    _both(lambda x, i: x.gather(1, i), device, x, ix)
    _both(lambda x, i: x.gather(0, i), device, x, ix0)
    _both(lambda x, i, s: x.scatter(1, i, s), device, x, ix, src)
    _both(lambda x, i, s: x.scatter(0, i, s[:2]), device, x, ix0, src)
    _both(lambda x, i: x.scatter(1, i, 1), device, x, ix)
    _both(lambda x, i, s: x.scatter_add(1, i, s), device, x, ix, src)
    _both(lambda x, i, s: x.scatter_add(0, i, s[:2]), device, x, ix0, src)
    _both(lambda x, i: x.take_along_dim(i, 1), device, x, ix)
    for red in ["sum", "prod", "amax", "amin"] + ([] if dt is fiamma.bool else ["mean"]):
        for inc in (True, False):
            _both(lambda x, i, s: x.scatter_reduce(1, i, s, red, include_self=inc), device, x,
                  ix, src)
    if dt.is_floating_point:  # NaN propagates through amax/amin
        _both(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), device, x, ix, src)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_index_ops(device, dt):
    x = _vals((4, 3), dt)
    src = _vals((5, 3), dt, seed=2)
    i = fiamma.tensor([3, 0, 3, 1, 3])
    _both(lambda x, i: x.index_select(0, i), device, x, i)
    _both(lambda x, i: x.index_select(1, i % 3), device, x, i)
    _both(lambda x, i, s: x.index_add(0, i, s), device, x, i, src)
    _both(lambda x, i, s: x.index_add(1, i % 3, s), device, x, i, _vals((4, 5), dt, seed=9))
    _both(lambda x, i, s: x.index_copy(0, i, s), device, x, i, src)
    _both(lambda x, i: x.index_fill(1, fiamma.tensor([-1, 0], device=x.device), 1), device, x,
          i)
    _both(lambda x, i: x.take(fiamma.tensor([[0, -1], [11, 5]], device=x.device)), device, x,
          i)
    for acc in (False, True):
        _both(lambda x, i, s: x.put(fiamma.tensor([0, -1, 0, 6], device=x.device),
                                    s.reshape(-1)[2:6], accumulate=acc), device, x, i, src)
    if dt not in (fiamma.bool,):
        _both(lambda x, i, s: x.index_add(0, i, s, alpha=2), device, x, i, src)


def test_index_op_errors(device):
    x = fiamma.arange(12.0).reshape(3, 4)
    for f in [lambda x: x.gather(1, fiamma.tensor([[4]], device=x.device)),
              lambda x: x.scatter(0, fiamma.tensor([[3]], device=x.device), 1.0),
              lambda x: x.scatter_add(1, fiamma.tensor([[0, -1]], device=x.device), x[:1, :2]),
              lambda x: x.index_select(0, fiamma.tensor([3], device=x.device)),
              lambda x: x.index_add(0, fiamma.tensor([0, 0, 5], device=x.device), x),
              lambda x: x.take(fiamma.tensor([12], device=x.device)),
              lambda x: x.put(fiamma.tensor([-13], device=x.device),
                              fiamma.tensor([1.0], device=x.device)),
              lambda x: x.index_fill(1, fiamma.tensor([4], device=x.device), 0.0)]:
        _both_raise(lambda x: f(x), device, x)
    # an index tensor on another device is a clear error, never a crash
    with pytest.raises(RuntimeError, match="device"):
        x.to(device).gather(1, fiamma.tensor([[0]]))


# ---- nonzero and masks ------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_nonzero_and_masks(device, dt):
    x = _vals((3, 5), dt)
    if dt.is_floating_point:
        x.view(-1)[0] = -0.0  # -0.0 is zero, NaN is not
    m = _vals((3, 5), fiamma.bool, seed=3)
    _both(lambda x: x.nonzero(), device, x)
    _both(lambda x: x.nonzero(as_tuple=True), device, x)
    _both(lambda x: x[0, 0].nonzero(), device, x)
    _both(lambda x: fiamma.argwhere(x.t()), device, x)
    _both(lambda x: fiamma.count_nonzero(x, 1), device, x)
    _both(lambda x, m: x.masked_select(m), device, x, m)
    _both(lambda x, m: x.masked_select(m[1]), device, x, m)
    _both(lambda x, m: x.masked_fill(m, 1), device, x, m)
    _both(lambda x, m: x.t().masked_fill(m.t(), 0), device, x, m)
    _both(lambda x, m: x.masked_scatter(m, x.flip(0) if False else x[[2, 1, 0]]), device, x, m)
    _both(lambda x, m: x[:1].masked_scatter(m, x), device, x, m)
    _both_raise(lambda x, m: x.masked_scatter(m, x[0, :2]), device, x, fiamma.ones(3, 5) > 0)


# ---- counting ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32,
                                fiamma.int64], ids=str)
def test_bincount(device, dt):
    x = fiamma.tensor([1, 4, 1, 0, 9, 4, 4], dtype=dt)
    w32 = fiamma.tensor([0.5, 1.25, 3.0, -1.0, 2.0, 0.1, 0.2])
    _both(lambda x: x.bincount(), device, x)
    _both(lambda x: x.bincount(minlength=12), device, x)
    _both(lambda x, w: x.bincount(w), device, x, w32)
    _both(lambda x, w: x.bincount(w.double()), device, x, w32)
    _both(lambda x, w: x[::2].bincount(w[::2].half()), device, x, w32)
    _both(lambda x: x[:0].bincount(), device, x)
    if dt is not fiamma.uint8:
        _both_raise(lambda x: (x - 2).bincount(), device, x)


@pytest.mark.parametrize("dt", [fiamma.float16, fiamma.bfloat16, fiamma.float32,
                                fiamma.float64], ids=str)
def test_histc(device, dt):
    a = np.random.default_rng(4).normal(size=200) * 2
    a[:6] = [np.nan, -1.0, 1.0, 0.5, 5.0, -0.2]  # the edges, outside, NaN
    x = fiamma.tensor(a, dtype=dt)
    _both(lambda x: x.histc(8, -1, 1), device, x)
    _both(lambda x: x.histc(7), device, x[1:])
    _both(lambda x: x.histc(3, 0, 0.5), device, x)


# ---- the CuPy paths of the scatter helpers, run here with NumPy ---------------------------------

def test_segmented_scatter_matches_ufunc_at():
    be = XpBackend(np, "xp-helpers")
    rng = np.random.default_rng(5)
    pos = rng.integers(0, 6, 40)
    for dt in [np.int8, np.int32, np.int64, np.float32, np.float64]:
        vals = rng.integers(-3, 4, 40).astype(dt)
        if np.dtype(dt).kind == "f":
            vals[7] = np.nan
        for op, uf in [("add", np.add), ("mul", np.multiply), ("max", np.maximum),
                       ("min", np.minimum)]:
            a = rng.integers(-2, 3, 8).astype(dt)
            b = a.copy()
            be._segmented_at(op, a, pos, vals)
            with np.errstate(all="ignore"):
                uf.at(b, pos, vals)
            np.testing.assert_array_equal(a, b)
    keep = be._last_writes(np.array([3, 1, 3, 2, 1, 3]))
    assert sorted(keep.tolist()) == [3, 4, 5]


@pytest.mark.parametrize("dt", [fiamma.float16, fiamma.bfloat16, fiamma.float32], ids=str)
def test_accumulation_rounding(device, dt):
    """Many duplicates of an inexact value: the reference device rounds after every step in
    index order, as the C loops do (bit for bit); CUDA's atomics only agree to rounding."""
    idx = (fiamma.arange(300) % 37) % 5
    src = fiamma.full((300,), 0.1, dtype=dt)
    tol = {} if device == "xp" else dict(rtol=0.1, atol=0.0)
    _both(lambda i, s: fiamma.zeros(5, dtype=dt, device=s.device).index_add(0, i, s), device,
          idx, src, **tol)
    _both(lambda i, s: fiamma.ones(5, dtype=dt, device=s.device).scatter_reduce(
        0, i, s + 0.91, "prod"), device, idx, src, **tol)
    _both(lambda i, s: fiamma.zeros(5, dtype=dt, device=s.device).index_put(
        (i,), s, accumulate=True), device, idx, src, **tol)
