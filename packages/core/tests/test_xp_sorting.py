"""The array-module backend's sort family on every device besides the CPU: sort/argsort (stable,
descending, NaN), topk, kthvalue, median, nanmedian, mode, cummax/cummin, searchsorted/bucketize,
unique and unique_consecutive, each against the CPU backend's result."""

import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_same

import fiamma
from fiamma._backend.xp import XpBackend


def _vals(shape, dt, seed=0, nan=True):
    """Small integers with many ties (bool: parity); floating dtypes get NaNs and a -0.0."""
    a = np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float64)
    if dt is fiamma.bool:
        return fiamma.tensor(a.astype(np.int64) % 2 == 1)
    if dt is fiamma.uint8:
        a = np.abs(a)
    t = fiamma.tensor(a, dtype=dt)
    if dt.is_floating_point and t.numel() > 8:
        flat = t.view(-1)
        flat[1] = -0.0
        if nan:
            flat[2] = flat[7] = float("nan")
    return t


def _outs(r):
    if isinstance(r, fiamma.Tensor):
        return [r]
    return [t for t in r if isinstance(t, fiamma.Tensor)]


def _both(f, device, *ts):
    want = _outs(f(*ts))
    got = _outs(f(*[t.to(device) if isinstance(t, fiamma.Tensor) else t for t in ts]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == device
        assert_same(g, w)
        if g.dtype.is_floating_point:  # -0.0 and NaN keep their bits
            np.testing.assert_array_equal(np.signbit(g.cpu().float().numpy()),
                                          np.signbit(w.float().numpy()))


def _both_raise(f, device, *ts):
    with pytest.raises(Exception) as cpu_err:
        f(*ts)
    with pytest.raises(cpu_err.type):
        f(*[t.to(device) if isinstance(t, fiamma.Tensor) else t for t in ts])


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_sort(device, dt):
    x = _vals((4, 9), dt)
    for f in [lambda x: x.sort(), lambda x: x.sort(0), lambda x: x.sort(descending=True),
              lambda x: x.sort(0, descending=True, stable=True), lambda x: x.argsort(),
              lambda x: x.argsort(0, descending=True), lambda x: x.t().sort(1),
              lambda x: x[:, ::2].sort(), lambda x: x.view(-1).sort(), lambda x: x[:0].sort(),
              lambda x: x[1, 3].sort(), lambda x: fiamma.msort(x)]:
        _both(f, device, x)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_topk(device, dt):
    x = _vals((5, 9), dt)
    for k in (0, 1, 4, 9):
        _both(lambda x: x.topk(k), device, x)
        _both(lambda x: x.topk(k, largest=False), device, x)
    _both(lambda x: x.topk(3, 0, sorted=True), device, x)
    _both(lambda x: x.t().topk(2, 0, largest=False), device, x)
    _both_raise(lambda x: x.topk(10), device, x)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_selection(device, dt):
    x = _vals((5, 9), dt)
    clean = _vals((5, 9), dt, seed=1, nan=False)
    for t in (x, clean):
        _both(lambda x: x.kthvalue(1, 1), device, t)
        _both(lambda x: x.kthvalue(9, 1, keepdim=True), device, t)
        _both(lambda x: x.kthvalue(3, 0), device, t)
        _both(lambda x: x.median(1), device, t)
        _both(lambda x: x.median(0, keepdim=True), device, t)
        _both(lambda x: x.median(), device, t)
        _both(lambda x: x.mode(1), device, t)
        _both(lambda x: x.mode(0), device, t)
        _both(lambda x: x.t().mode(), device, t)
        if dt.is_floating_point:
            _both(lambda x: x.nanmedian(1), device, t)
            _both(lambda x: x.nanmedian(), device, t)
    _both_raise(lambda x: x.kthvalue(10, 1), device, x)
    if dt.is_floating_point:
        allnan = fiamma.full((2, 3), float("nan"), dtype=dt)
        _both(lambda x: x.nanmedian(1), device, allnan)
        _both(lambda x: x[:0].median(), device, x)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_cummax_cummin(device, dt):
    x = _vals((4, 9), dt)
    for f in [lambda x: x.cummax(1), lambda x: x.cummin(1), lambda x: x.cummax(0),
              lambda x: x.cummin(0), lambda x: x.t().cummax(0), lambda x: x[0, 0].cummin(0),
              lambda x: x[:, :0].cummax(1)]:
        _both(f, device, x)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_searchsorted(device, dt):
    seq = _vals((3, 8), dt, nan=False).sort(1).values
    v = _vals((3, 5), dt, seed=2, nan=False)
    flat = seq[0]
    for right in (False, True):
        _both(lambda s, v: fiamma.searchsorted(s, v, right=right), device, seq, v)
        _both(lambda s, v: fiamma.searchsorted(s, v, right=right, out_int32=True), device,
              flat, v)
        _both(lambda s, v: fiamma.bucketize(v, s, right=right), device, flat, v)
        _both(lambda s, v: fiamma.searchsorted(s, v[0, 0].item(), right=right), device, flat,
              v)
    raw = _vals((3, 8), dt, seed=3, nan=False)
    order = raw.argsort(1)
    _both(lambda s, o, v: fiamma.searchsorted(s, v, sorter=o), device, raw, order, v)
    _both_raise(lambda s, o, v: fiamma.searchsorted(s, v, sorter=o + 3), device, raw, order, v)
    if dt.is_floating_point:  # NaNs in the sequence: the CPU's binary search, step for step
        withnan = fiamma.tensor([1.0, 2.0, float("nan"), 3.0, float("nan")], dtype=dt)
        probe = fiamma.tensor([0.0, 1.5, 2.5, 3.0, float("nan")], dtype=dt)
        _both(lambda s, v: fiamma.searchsorted(s, v), device, withnan, probe)
        _both(lambda s, v: fiamma.searchsorted(s, v, side="right"), device, withnan, probe)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_unique(device, dt):
    x = _vals((6, 5), dt)
    for f in [lambda x: fiamma.unique(x), lambda x: fiamma.unique(x, return_inverse=True),
              lambda x: fiamma.unique(x, return_counts=True, return_inverse=True),
              lambda x: fiamma.unique(x, sorted=False),
              lambda x: fiamma.unique(x.t()[:, :3], dim=0, return_inverse=True,
                                      return_counts=True),
              lambda x: fiamma.unique(x, dim=1, return_counts=True),
              lambda x: fiamma.unique(x[:0]),
              lambda x: fiamma.unique_consecutive(x),
              lambda x: fiamma.unique_consecutive(x.view(-1), return_inverse=True,
                                                  return_counts=True),
              lambda x: fiamma.unique_consecutive(x[x.argsort(0)[:, 0]], dim=0,
                                                  return_counts=True)]:
        _both(f, device, x)


def test_cupy_paths_with_numpy():
    """The doubling running maximum and the column-by-column row sort (the CuPy flavour's
    substitutes for ufunc.accumulate and lexsort) match NumPy's."""
    be = XpBackend(np, "xp-helpers")
    a = np.random.default_rng(6).integers(0, 50, (3, 37)).astype(np.uint32)
    for ax in (0, 1):
        np.testing.assert_array_equal(be._cummax_doubling(a, ax), np.maximum.accumulate(a, ax))
    rows = np.random.default_rng(7).integers(0, 3, (40, 3)).astype(np.uint8)
    want = np.lexsort(rows.T[::-1])
    be.is_numpy = False  # CuPy's argsort is stable without asking: so is this stand-in
    be._argsort_stable = lambda a, axis=-1: np.argsort(a, axis=axis, kind="stable")
    np.testing.assert_array_equal(be._lexsort_rows(rows), want)
