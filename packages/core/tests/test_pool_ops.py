"""Pooling ops against float64 NumPy references written here: max / avg / adaptive pools over
1-3 dims (values and indices), max_unpool, the backward ops, lp pools; random shapes and
parameters, non-contiguous inputs, ceil_mode windows that would start in the padding,
dilation, unbatched and empty-batch inputs, every float dtype, and the errors."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma

FLOATS = [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16]
TOL = {fiamma.float32: 1e-5, fiamma.float64: 1e-12, fiamma.float16: 2e-3,
       fiamma.bfloat16: 1e-2}


# ---- references -------------------------------------------------------------------------------

def out_len(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1
    if ceil:
        o = -(-num // s) + 1
        if (o - 1) * s >= n + p:
            o -= 1
        return o
    return num // s + 1


def planes(x, nd):
    """x as (P, *spatial) plus its leading shape."""
    lead = x.shape[:-nd]
    return x.reshape((-1,) + x.shape[-nd:]), lead


def ref_max(x, k, s, p, d, ceil):
    nd = len(k)
    xp, lead = planes(x, nd)
    sp = x.shape[-nd:]
    o = [out_len(n, *a, ceil) for n, *a in zip(sp, k, s, p, d)]
    val = np.full((xp.shape[0],) + tuple(o), -np.inf)
    idx = np.zeros((xp.shape[0],) + tuple(o), np.int64)
    for pos in itertools.product(*[range(e) for e in o]):
        taps = []
        for j in itertools.product(*[range(e) for e in k]):
            c = [pos[a] * s[a] - p[a] + j[a] * d[a] for a in range(nd)]
            if all(0 <= c[a] < sp[a] for a in range(nd)):
                taps.append(np.ravel_multi_index(c, sp))
        if not taps:  # every tap in the padding (dilation): -inf, no index to compare
            idx[(slice(None),) + pos] = -1
            continue
        flat = xp.reshape(xp.shape[0], -1)[:, taps]
        am = np.argmax(flat, axis=1)
        val[(slice(None),) + pos] = flat[np.arange(len(am)), am]
        idx[(slice(None),) + pos] = np.array(taps)[am]
    return val.reshape(lead + tuple(o)), idx.reshape(lead + tuple(o))


def ref_avg(x, k, s, p, ceil, cip, divo):
    nd = len(k)
    xp, lead = planes(x, nd)
    sp = x.shape[-nd:]
    o = [out_len(n, kk, ss, pp, 1, ceil) for n, kk, ss, pp in zip(sp, k, s, p)]
    out = np.zeros((xp.shape[0],) + tuple(o))
    for pos in itertools.product(*[range(e) for e in o]):
        sl, pool, cnt = [], 1, 1
        for a in range(nd):
            b = pos[a] * s[a] - p[a]
            e = min(b + k[a], sp[a] + p[a])
            pool *= e - b
            b, e = max(b, 0), min(e, sp[a])
            cnt *= e - b
            sl.append(slice(b, e))
        tot = xp[(slice(None),) + tuple(sl)].reshape(xp.shape[0], -1).sum(1)
        out[(slice(None),) + pos] = tot / (divo if divo else (pool if cip else cnt))
    return out.reshape(lead + tuple(o))


def ref_adaptive(x, o, kind):
    nd = len(o)
    xp, lead = planes(x, nd)
    sp = x.shape[-nd:]
    val = np.zeros((xp.shape[0],) + tuple(o))
    idx = np.zeros((xp.shape[0],) + tuple(o), np.int64)
    for pos in itertools.product(*[range(e) for e in o]):
        rng = [range(pos[a] * sp[a] // o[a], -(-(pos[a] + 1) * sp[a] // o[a])) for a in range(nd)]
        taps = [np.ravel_multi_index(c, sp) for c in itertools.product(*rng)]
        flat = xp.reshape(xp.shape[0], -1)[:, taps]
        if kind == "avg":
            val[(slice(None),) + pos] = flat.mean(1)
        else:
            am = np.argmax(flat, axis=1)
            val[(slice(None),) + pos] = flat[np.arange(len(am)), am]
            idx[(slice(None),) + pos] = np.array(taps)[am]
    return val.reshape(lead + tuple(o)), idx.reshape(lead + tuple(o))


def ref_unpool(v, idx, size, nd):
    vp, lead = planes(v, nd)
    ip = idx.reshape(vp.shape[0], -1)
    out = np.zeros((vp.shape[0], int(np.prod(size))))
    for q in range(vp.shape[0]):
        out[q, ip[q]] = vp.reshape(vp.shape[0], -1)[q]
    return out.reshape(lead + tuple(size))


# ---- inputs -----------------------------------------------------------------------------------

def make_input(rng, shape, dt, layout):
    """A fiamma tensor of distinct values (no ties) with the given layout, and its float64 twin."""
    n = int(np.prod(shape))
    a = (rng.permutation(n).astype(np.float64) - n / 2) / max(n, 1) * 8
    a = a.reshape(shape)
    if dt in (fiamma.float16, fiamma.bfloat16):
        a = np.round(a * 8) / 8  # exact in 16-bit (values may tie; compare values only)
    if layout == "transposed" and len(shape) >= 2:
        t = fiamma.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype=dt)
        t = t.transpose(-1, -2)
    elif layout == "strided":
        big = np.zeros(shape[:-1] + (shape[-1] * 2,))
        big[..., ::2] = a
        t = fiamma.tensor(big, dtype=dt)[..., ::2]
    else:
        t = fiamma.tensor(a, dtype=dt)
    assert layout == "contiguous" or not t.is_contiguous() or 1 in shape[-2:]
    return t, a


def close(actual, expected, dt):
    got = actual.to(fiamma.float64).numpy()
    tol = TOL[dt]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * 4)


def lead_strategy():
    return st.sampled_from([(), (1,), (2,), (2, 3), (1, 2)])


@st.composite
def window_case(draw, nd, dilation=True):
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    p = tuple(draw(st.integers(0, kk // 2)) for kk in k)
    d = tuple(draw(st.integers(1, 2)) if dilation else 1 for _ in range(nd))
    ceil = draw(st.booleans())
    sp = []
    for kk, ss, pp, dd in zip(k, s, p, d):
        lo = max(1, dd * (kk - 1) + 1 - 2 * pp)
        sp.append(draw(st.integers(lo, lo + 5)))
    return tuple(sp), k, s, p, d, ceil


def call(fn, nd, x, *args, **kw):
    return getattr(fiamma, fn.format(nd))(x, *args, **kw)


# ---- max pools --------------------------------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
@given(data=st.data(), seed=st.integers(0, 2**31))
@settings(max_examples=25, deadline=None)
def test_max_pool(nd, data, seed):
    sp, k, s, p, d, ceil = data.draw(window_case(nd))
    lead = data.draw(lead_strategy())
    if len(lead) == 0:
        lead = (2,)  # (C, *spatial) unbatched
    dt = data.draw(st.sampled_from(FLOATS))
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    rng = np.random.default_rng(seed)
    x, a = make_input(rng, lead + sp, dt, layout)
    v, i = call("max_pool{}d", nd, x, k, s, p, d, ceil, return_indices=True)
    ev, ei = ref_max(a, k, s, p, d, ceil)
    assert tuple(v.shape) == ev.shape and v.dtype == dt and i.dtype == fiamma.int64
    close(v, ev, dt)
    if dt in (fiamma.float32, fiamma.float64):
        m = ei >= 0
        np.testing.assert_array_equal(i.numpy()[m], ei[m])
    v2 = call("max_pool{}d", nd, x, k, s, p, d, ceil)
    close(v2, ev, dt)
    w, j = getattr(fiamma, f"max_pool{nd}d_with_indices")(x, k, s, p, d, ceil)
    close(w, ev, dt)


def test_max_pool_defaults_and_nan():
    x = fiamma.tensor([[[1.0, float("nan"), 3.0, 2.0, 5.0, 4.0]]])
    v, i = fiamma.max_pool1d(x, 2, return_indices=True)
    assert math.isnan(v[0, 0, 0].item()) and i.tolist() == [[[1, 2, 4]]]
    assert v[0, 0, 1:].tolist() == [3.0, 5.0]
    # all -inf window keeps a valid index
    y = fiamma.full((1, 2, 2), float("-inf"))
    v, i = fiamma.max_pool2d(y, 2, return_indices=True)
    assert v.item() == float("-inf") and 0 <= i.item() < 4
    # a window whose taps all fall in the padding (dilation): -inf and an in-plane index (PyTorch
    # reports one past the plane), so the backward and max_unpool accept it
    v, i = fiamma.max_pool2d(fiamma.ones(2, 1, 1), 2, 1, 1, dilation=2, return_indices=True)
    assert v.tolist() == [[[float("-inf")]]] * 2 and i.tolist() == [[[0]]] * 2
    assert fiamma.max_pool_backward(fiamma.ones(2, 1, 1), i, (1, 1)).tolist() == [[[1.0]]] * 2


def ref_max2x2(x):
    """2x2 stride-2 max pool of (P, H, W) by the scan rule of fiamma's (and PyTorch's) loop:
    taps in row-major order, a later tap taken when greater or NaN (so the last NaN wins)."""
    P, H, W = x.shape
    oh, ow = H // 2, W // 2
    r = np.arange(oh)[:, None] * 2 * W + np.arange(ow)[None, :] * 2
    taps = [r, r + 1, r + W, r + W + 1]
    flat = x.reshape(P, -1)
    best, bi = flat[:, taps[0]], np.broadcast_to(taps[0], (P, oh, ow)).copy()
    for t in taps[1:]:
        v = flat[:, t]
        take = (v > best) | np.isnan(v)
        best, bi = np.where(take, v, best), np.where(take, t, bi)
    return best, bi


@pytest.mark.parametrize("w", [2, 3, 4, 15, 16, 17, 18, 31, 32, 33, 34, 35, 47, 64, 100])
def test_max_pool_2x2_stride_2(w):
    """max_pool2d(2) has a vectorised float32 kernel (16 outputs a step, partial last steps):
    values and indices against the scan-rule reference, with ties, NaNs, infinities; odd sizes;
    the backward through the indices."""
    rng = np.random.default_rng(w)
    for h in (2, 3, 5):
        x = rng.integers(-3, 4, (2, 3, h, w)).astype(np.float32)  # many ties
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, max(1, flat.size // 10))] = np.nan
        flat[rng.integers(0, flat.size, max(1, flat.size // 10))] = -np.inf
        flat[rng.integers(0, flat.size, max(1, flat.size // 20))] = np.inf
        v, i = fiamma.max_pool2d(fiamma.tensor(x), 2, return_indices=True)
        rv, ri = ref_max2x2(x.reshape(-1, h, w))
        np.testing.assert_array_equal(v.numpy().reshape(rv.shape), rv)
        np.testing.assert_array_equal(i.numpy().reshape(ri.shape), ri)
        # float64 (the generic loop) gives the same indices
        v64, i64 = fiamma.max_pool2d(fiamma.tensor(x.astype(np.float64)), 2, return_indices=True)
        np.testing.assert_array_equal(i64.numpy(), i.numpy())
        # the gradient lands on the chosen taps
        g = rng.standard_normal((2, 3, h // 2, w // 2)).astype(np.float32)
        gx = fiamma.max_pool_backward(fiamma.tensor(g), i, (h, w))
        want = np.zeros((6, h * w), np.float32)
        np.put_along_axis(want, i.numpy().reshape(6, -1), g.reshape(6, -1), axis=1)
        np.testing.assert_array_equal(gx.numpy().reshape(6, -1), want)
    # ceil_mode's partial windows, a non-contiguous input and stride 1 still agree with ref_max
    x = rng.standard_normal((2, 5, w + 1)).astype(np.float32)
    for kw in (dict(ceil_mode=True), dict(stride=1)):
        v, i = fiamma.max_pool2d(fiamma.tensor(x), 2, return_indices=True, **kw)
        rv, ri = ref_max(x, (2, 2), (kw.get("stride", 2),) * 2, (0, 0), (1, 1),
                         kw.get("ceil_mode", False))
        np.testing.assert_array_equal(v.numpy(), rv.astype(np.float32))
        np.testing.assert_array_equal(i.numpy(), ri)
    xt = fiamma.tensor(np.ascontiguousarray(x.transpose(0, 2, 1))).transpose(1, 2)
    np.testing.assert_array_equal(fiamma.max_pool2d(xt, 2).numpy(),
                                  ref_max(x, (2, 2), (2, 2), (0, 0), (1, 1), False)[0])


def test_ceil_mode_last_window_in_padding():
    # length 5, k=2, s=2, p=1: ceil gives 4 windows but the last would start at 5 = n + p - 1 + 1
    # (inside the right padding), so it is dropped: 3 outputs
    x = fiamma.arange(5.0).reshape(1, 1, 5)
    assert fiamma.max_pool1d(x, 2, 2, 1, ceil_mode=True).tolist() == [[[0.0, 2.0, 4.0]]]
    assert fiamma.avg_pool1d(x, 2, 2, 1, ceil_mode=True).tolist() == [[[0.0, 1.5, 3.5]]]
    # length 6, k=3, s=2, p=0, ceil: a last window starting at 4 (inside) is kept, partial
    x = fiamma.arange(6.0).reshape(1, 6)
    assert fiamma.max_pool1d(x, 3, 2, ceil_mode=True).tolist() == [[2.0, 4.0, 5.0]]
    r = fiamma.avg_pool1d(x, 3, 2, ceil_mode=True).tolist()
    assert r == [[1.0, 3.0, 4.5]]
    r = fiamma.avg_pool1d(x, 3, 2, ceil_mode=True, count_include_pad=False).tolist()
    assert r == [[1.0, 3.0, 4.5]]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_max(nd):
    rng = np.random.default_rng(nd)
    for sp, o in [((5,) * nd, (3,) * nd), ((7,) * nd, (2,) * nd), ((4,) * nd, (4,) * nd),
                  ((3,) * nd, (5,) * nd), ((6,) * nd, (1,) * nd)]:
        for layout in ["contiguous", "transposed"]:
            x, a = make_input(rng, (2, 3) + sp, fiamma.float64, layout)
            v, i = call("adaptive_max_pool{}d", nd, x, o, return_indices=True)
            ev, ei = ref_adaptive(a, o, "max")
            close(v, ev, fiamma.float64)
            np.testing.assert_array_equal(i.numpy(), ei)
            assert call("adaptive_max_pool{}d", nd, x[0], o,
                        return_indices=False).shape == ev.shape[1:]


# ---- avg pools --------------------------------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
@given(data=st.data(), seed=st.integers(0, 2**31))
@settings(max_examples=25, deadline=None)
def test_avg_pool(nd, data, seed):
    sp, k, s, p, _, ceil = data.draw(window_case(nd, dilation=False))
    lead = data.draw(lead_strategy()) or (3,)
    cip = data.draw(st.booleans())
    divo = data.draw(st.sampled_from([None, None, 1, 3]))
    dt = data.draw(st.sampled_from(FLOATS))
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    x, a = make_input(np.random.default_rng(seed), lead + sp, dt, layout)
    kw = {"divisor_override": divo}
    r = call("avg_pool{}d", nd, x, k, s, p, ceil, cip, **kw)
    close(r, ref_avg(a, k, s, p, ceil, cip, divo), dt)
    # the backward is the adjoint: <pool(x), g> == <x, backward(g)>
    if dt is fiamma.float64:
        g = fiamma.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(r.shape)))
        b = fiamma.avg_pool_backward(g, sp, k, s, p, ceil, cip, divo)
        assert tuple(b.shape) == a.shape
        np.testing.assert_allclose((r * g).sum().item(), (x * b).sum().item(), rtol=1e-10)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_avg(nd):
    rng = np.random.default_rng(10 + nd)
    for sp, o in [((5,) * nd, (3,) * nd), ((7,) * nd, (2,) * nd), ((3,) * nd, (5,) * nd),
                  ((6,) * nd, (1,) * nd)]:
        for dt in FLOATS:
            x, a = make_input(rng, (2, 3) + sp, dt, "transposed")
            r = call("adaptive_avg_pool{}d", nd, x, o)
            close(r, ref_adaptive(a, o, "avg")[0], dt)
            if dt is fiamma.float64:
                g = fiamma.randn(*r.shape, dtype=fiamma.float64)
                b = fiamma.adaptive_avg_pool_backward(g, sp)
                np.testing.assert_allclose((r * g).sum().item(), (x * b).sum().item(),
                                           rtol=1e-10)
    # None keeps that size
    x = fiamma.randn(2, 5, 6)
    assert fiamma.adaptive_avg_pool2d(x, (None, 3)).shape == (2, 5, 3)
    assert fiamma.adaptive_max_pool2d(x, (2, None)).shape == (2, 2, 6)


# ---- unpool and max-pool backward --------------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_and_backward(nd):
    rng = np.random.default_rng(20 + nd)
    for lead, dt in [((2, 3), fiamma.float32), ((3,), fiamma.float64), ((1, 2), fiamma.float16)]:
        x, a = make_input(rng, lead + (6,) * nd, dt, "strided")
        v, i = call("max_pool{}d", nd, x, 2, return_indices=True)
        u = call("max_unpool{}d", nd, v, i, 2)
        ev, ei = ref_max(a, (2,) * nd, (2,) * nd, (0,) * nd, (1,) * nd, False)
        close(u, ref_unpool(ev, ei, (6,) * nd, nd), dt)
        # output_size with the batch dims, one bigger than the default
        u = call("max_unpool{}d", nd, v, i, 2, output_size=lead + (7,) * nd)
        assert tuple(u.shape) == lead + (7,) * nd
        # overlapping windows: the backward adds duplicates
        v, i = call("max_pool{}d", nd, x, 3, 1, return_indices=True)
        g = fiamma.ones(*v.shape, dtype=dt)
        b = fiamma.max_pool_backward(g, i, (6,) * nd)
        ei = ref_max(a, (3,) * nd, (1,) * nd, (0,) * nd, (1,) * nd, False)[1]
        eb = np.zeros(lead + (6,) * nd).reshape(-1, 6 ** nd)
        for q, row in enumerate(ei.reshape(eb.shape[0], -1)):
            np.add.at(eb[q], row, 1.0)
        if dt is not fiamma.float16:
            close(b, eb.reshape(lead + (6,) * nd), dt)


def test_empty_batch_and_big_parallel():
    x = fiamma.empty(0, 3, 8, 8)
    assert fiamma.max_pool2d(x, 2).shape == (0, 3, 4, 4)
    assert fiamma.avg_pool2d(x, 3, 1, 1).shape == (0, 3, 8, 8)
    assert fiamma.adaptive_avg_pool2d(x, 2).shape == (0, 3, 2, 2)
    v, i = fiamma.adaptive_max_pool2d(x, 2, return_indices=True)
    assert fiamma.max_unpool2d(v, i, 4).shape == (0, 3, 8, 8)
    # enough work for the threaded path
    rng = np.random.default_rng(5)
    x, a = make_input(rng, (8, 16, 20, 20), fiamma.float32, "contiguous")
    v, i = fiamma.max_pool2d(x, 3, 2, 1, return_indices=True)
    ev, ei = ref_max(a, (3, 3), (2, 2), (1, 1), (1, 1), False)
    close(v, ev, fiamma.float32)
    np.testing.assert_array_equal(i.numpy(), ei)
    close(fiamma.avg_pool2d(x, 2), ref_avg(a, (2, 2), (2, 2), (0, 0), False, True, None),
          fiamma.float32)


def test_lp_pool():
    rng = np.random.default_rng(7)
    a = np.abs(rng.standard_normal((2, 3, 6, 5))) + 0.1
    x = fiamma.tensor(a)
    for p in [1, 2, 3.5]:
        r = fiamma.lp_pool2d(x, p, (2, 3), stride=(2, 1))
        e = ref_avg(a ** p, (2, 3), (2, 1), (0, 0), False, True, None) * 6
        close(r, e ** (1 / p), fiamma.float64)
        r = fiamma.lp_pool1d(x[0], p, 2)
        e = ref_avg(a[0] ** p, (2,), (2,), (0,), False, True, None) * 2
        close(r, e ** (1 / p), fiamma.float64)
    r = fiamma.lp_pool3d(x, 2, 2)
    e = ref_avg(a ** 2, (2, 2, 2), (2, 2, 2), (0, 0, 0), False, True, None) * 8
    close(r, e ** 0.5, fiamma.float64)


# ---- errors -----------------------------------------------------------------------------------

def test_errors():
    x = fiamma.randn(2, 3, 8, 8)
    with pytest.raises(ValueError, match="max_pool2d.*padding"):
        fiamma.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="avg_pool2d.*padding"):
        fiamma.avg_pool2d(x, 3, padding=2)
    with pytest.raises(RuntimeError, match="max_pool2d.*too small"):
        fiamma.max_pool2d(fiamma.randn(1, 2, 2), 3)
    with pytest.raises(RuntimeError, match="max_pool2d.*3D.*4D"):
        fiamma.max_pool2d(fiamma.randn(8, 8), 2)
    with pytest.raises(RuntimeError, match="max_pool1d.*2D.*3D"):
        fiamma.max_pool1d(x, 2)
    with pytest.raises(RuntimeError, match="avg_pool3d"):
        fiamma.avg_pool3d(x[0, 0], 2)
    with pytest.raises(RuntimeError, match="adaptive_avg_pool2d.*output_size"):
        fiamma.adaptive_avg_pool2d(x, -1)  # 0 is allowed: an empty result, as PyTorch
    with pytest.raises(RuntimeError, match="adaptive_max_pool1d.*output_size"):
        fiamma.adaptive_max_pool1d(x[0], -1)
    with pytest.raises(ValueError, match="max_pool2d.*stride"):
        fiamma.max_pool2d(x, 2, 0)
    with pytest.raises(ValueError, match="max_pool2d.*kernel_size"):
        fiamma.max_pool2d(x, (2, 2, 2))
    with pytest.raises(ValueError, match="max_pool2d.*dilation"):
        fiamma.max_pool2d(x, 2, dilation=0)
    with pytest.raises(TypeError, match="max_pool2d.*floating"):
        fiamma.max_pool2d(fiamma.ones(1, 4, 4, dtype=fiamma.int64), 2)
    with pytest.raises(RuntimeError, match="avg_pool2d.*non-zero"):
        fiamma.avg_pool2d(fiamma.randn(2, 0, 4, 4), 2)
    with pytest.raises(RuntimeError, match="avg_pool2d.*divisor"):
        fiamma.avg_pool2d(x, 2, divisor_override=0)
    v, i = fiamma.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(IndexError, match="max_unpool2d.*index 64 is out of range"):
        fiamma.max_unpool2d(v, i * 0 + 64, 2)
    with pytest.raises(IndexError, match="max_unpool2d.*index -1"):
        fiamma.max_unpool2d(v, i * 0 - 1, 2)
    with pytest.raises(ValueError, match="max_unpool2d.*output_size"):
        fiamma.max_unpool2d(v, i, 2, output_size=(20, 20))
    with pytest.raises(TypeError, match="max_unpool2d.*int64"):
        fiamma.max_unpool2d(v, i.to(fiamma.int32), 2)
    with pytest.raises(RuntimeError, match="max_unpool2d.*shape"):
        fiamma.max_unpool2d(v, i[:, :, :1], 2)
    with pytest.raises(IndexError, match="max_pool_backward"):
        fiamma.max_pool_backward(v, i + 100, (8, 8))
