"""batch_norm, instance_norm, layer_norm, group_norm, rms_norm and their fused backward ops
against float64 NumPy references: random shapes, non-contiguous inputs, batch 1, running-stat
updates, float32/float64 and the 16-bit floats (computed via float32)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma

F32, F64 = fiamma.float32, fiamma.float64


def T(a, dt=F64):
    return fiamma.tensor(np.asarray(a, dtype=np.float64), dtype=dt)


def N(t):
    return t.to(F64).numpy()


def rounded(a, dt):
    """a as the values dt holds (the reference then sees the same inputs as fiamma)."""
    return a.astype(np.float32).astype(np.float64) if dt is F32 else a


def tol(dt):
    return dict(rtol=1e-4, atol=1e-4) if dt is F32 else dict(rtol=1e-10, atol=1e-10)


def gtol(dt, rstd):
    """Tolerance of a gradient: float32 rounding is amplified by 1/std, which is large for a
    group whose values nearly coincide (variance below eps)."""
    t = tol(dt)
    t["atol"] *= max(1.0, float(np.max(rstd, initial=0.0)) / 3)
    return t


# ---- NumPy references ----------------------------------------------------------------------

def rows_fwd(x2, eps, center=True):
    mu = x2.mean(1, keepdims=True) if center else 0.0
    c = x2 - mu
    r = 1.0 / np.sqrt((c * c).mean(1, keepdims=True) + eps)
    return c * r, np.ravel(mu + np.zeros((x2.shape[0], 1))), r.ravel()


def rows_bwd(x2, g2, w2, eps, center=True):
    """(gx, g * xhat, g) per element for rows x2 (R, m) with per-element weight w2."""
    xh, _, r = rows_fwd(x2, eps, center)
    r = r[:, None]
    gh = g2 * w2
    cen = (gh - gh.mean(1, keepdims=True)) if center else gh
    gx = r * (cen - xh * (gh * xh).mean(1, keepdims=True))
    return gx, g2 * xh, g2


def rows_bwd_given(x2, g2, w2, mean, rstd, center=True):
    """gx for rows x2 from the saved statistics a backward kernel is given (in float32 they are
    rounded, and with a variance near eps the gradient amplifies that rounding by far more
    than float32's own: the reference must start from the same numbers)."""
    r = rstd[:, None]
    xh = (x2 - (mean[:, None] if center else 0.0)) * r
    gh = g2 * w2
    cen = (gh - gh.mean(1, keepdims=True)) if center else gh
    return r * (cen - xh * (gh * xh).mean(1, keepdims=True))


def bn_layout(x):
    """(N, C, *) -> (C, N*S) rows and back."""
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, -1)
    return x3.transpose(1, 0, 2).reshape(c, -1), lambda r: r.reshape(c, n, -1).transpose(
        1, 0, 2).reshape(x.shape)


def ref_bn(x, rm, rv, w, b, training, mom, eps):
    c = x.shape[1]
    bs = (1, c) + (1,) * (x.ndim - 2)
    if training:
        rows, back = bn_layout(x)
        mean, var = rows.mean(1), rows.var(1)
        m = rows.shape[1]
        if rm is not None:
            rm = (1 - mom) * rm + mom * mean
            rv = (1 - mom) * rv + mom * var * m / (m - 1)
    else:
        mean, var = rm, rv
    y = (x - mean.reshape(bs)) / np.sqrt(var.reshape(bs) + eps)
    if w is not None:
        y = y * w.reshape(bs)
    if b is not None:
        y = y + b.reshape(bs)
    return y, rm, rv


# ---- batch norm ----------------------------------------------------------------------------

def _layout(a, kind):
    """fiamma tensor with a's values in a non-contiguous layout ``kind``."""
    if kind == "contig":
        return T(a)
    if kind == "channels_last" and a.ndim >= 3:
        perm = (0,) + tuple(range(2, a.ndim)) + (1,)
        inv = np.argsort(perm)
        return T(np.ascontiguousarray(a.transpose(perm))).permute(*inv)
    if kind == "step":
        big = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,))
        big[..., ::2] = a
        return T(big)[..., ::2]
    return T(np.ascontiguousarray(np.swapaxes(a, 0, -1))).transpose(0, -1)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10**6), st.sampled_from(["contig", "channels_last",
                                                                   "step", "transpose"]),
       st.booleans(), st.booleans(), st.sampled_from([F32, F64]))
def test_batch_norm_forward(nd, seed, kind, training, affine, dt):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 5, size=nd))
    shape = (shape[0] + 1,) + shape[1:]  # more than one value per channel
    x = rounded(rng.standard_normal(shape) * 3 + 1, dt)
    C = shape[1]
    w = rounded(rng.standard_normal(C), dt) if affine else None
    b = rounded(rng.standard_normal(C), dt) if affine else None
    rm, rv = rounded(rng.standard_normal(C), dt), rounded(rng.uniform(0.5, 2, C), dt)
    xt = _layout(x, kind).to(dt)
    rmt, rvt = T(rm, dt), T(rv, dt)
    y = fiamma.batch_norm(xt, rmt, rvt, None if w is None else T(w, dt),
                          None if b is None else T(b, dt), training, 0.3, 1e-5)
    ey, erm, erv = ref_bn(x, rm, rv, w, b, training, 0.3, 1e-5)
    assert y.dtype is dt and tuple(y.shape) == shape
    np.testing.assert_allclose(N(y), ey, **tol(dt))
    np.testing.assert_allclose(N(rmt), erm, **tol(dt))
    np.testing.assert_allclose(N(rvt), erv, **tol(dt))


def test_batch_norm_running_stats_over_steps_and_none():
    rng = np.random.default_rng(0)
    rm, rv = np.zeros(3), np.ones(3)
    rmt, rvt = T(rm), T(rv)
    for _ in range(4):
        x = rng.standard_normal((5, 3, 7)) * 2 - 1
        fiamma.batch_norm(T(x), rmt, rvt, training=True, momentum=0.1)
        _, rm, rv = ref_bn(x, rm, rv, None, None, True, 0.1, 1e-5)
    np.testing.assert_allclose(N(rmt), rm, rtol=1e-12)
    np.testing.assert_allclose(N(rvt), rv, rtol=1e-12)
    x = rng.standard_normal((4, 3))
    y = fiamma.batch_norm(T(x), None, None, training=True)
    np.testing.assert_allclose(N(y), ref_bn(x, None, None, None, None, True, 0, 1e-5)[0],
                               atol=1e-12)
    with pytest.raises(ValueError, match="batch_norm.*running_mean"):
        fiamma.batch_norm(T(x), None, None, training=False)


def test_batch_norm_float32_running_stats_strided_and_batch1():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 6, 5))
    buf = T(np.zeros(8), F32)
    rm = buf[::2]
    rv = T(np.ones(4), F32)
    fiamma.batch_norm(T(x, F32), rm, rv, training=True, momentum=0.5)
    _, erm, erv = ref_bn(x, np.zeros(4), np.ones(4), None, None, True, 0.5, 1e-5)
    np.testing.assert_allclose(N(rm), erm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(rv), erv, rtol=1e-5)
    assert N(buf)[1::2].tolist() == [0.0] * 4


def test_batch_norm_large_mean_is_stable():
    rng = np.random.default_rng(2)
    x = (1e4 + rng.standard_normal((8, 2, 100))).astype(np.float32)
    y = fiamma.batch_norm(T(x, F32), None, None, training=True)
    ey = ref_bn(x.astype(np.float64), None, None, None, None, True, 0, 1e-5)[0]
    np.testing.assert_allclose(N(y), ey, atol=2e-3)


@pytest.mark.parametrize("dt", [fiamma.float16, fiamma.bfloat16])
def test_half_dtypes_via_float32(dt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5))
    xt = T(x, dt)
    x32 = N(xt)
    rm = T(np.zeros(4), F32)
    y = fiamma.batch_norm(xt, rm, T(np.ones(4), F32), training=True)
    assert y.dtype is dt
    ey = ref_bn(x32, None, None, None, None, True, 0, 1e-5)[0]
    np.testing.assert_allclose(N(y), ey, atol=0.05, rtol=0.02)
    assert np.abs(N(rm)).max() > 0
    y = fiamma.layer_norm(xt, (5,))
    assert y.dtype is dt
    np.testing.assert_allclose(N(y), rows_fwd(x32.reshape(-1, 5), 1e-5)[0].reshape(x.shape),
                               atol=0.05, rtol=0.02)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.integers(0, 10**6), st.booleans(), st.booleans(),
       st.sampled_from(["contig", "transpose", "channels_last"]), st.sampled_from([F32, F64]))
def test_batch_norm_backward(nd, seed, training, affine, kind, dt):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 5, size=nd))
    shape = (shape[0] + 1,) + shape[1:]
    C = shape[1]
    x = rounded(rng.standard_normal(shape), dt)
    g = rounded(rng.standard_normal(shape), dt)
    w = rounded(rng.standard_normal(C), dt) if affine else None
    rm, rv = rounded(rng.standard_normal(C), dt), rounded(rng.uniform(0.5, 2, C), dt)
    bs = (1, C) + (1,) * (nd - 2)
    if training:
        rows, _ = bn_layout(x)
        mean, inv = rows.mean(1), 1 / np.sqrt(rows.var(1) + 1e-5)
    else:
        mean, inv = rm, 1 / np.sqrt(rv + 1e-5)
    gx, gw, gb = fiamma.batch_norm_backward(_layout(g, kind).to(dt), _layout(x, kind).to(dt),
                                            None if w is None else T(w, dt), T(mean, dt),
                                            T(inv, dt), training, 1e-5)
    wf = np.ones(C) if w is None else w
    xh = (x - mean.reshape(bs)) * inv.reshape(bs)
    axes = (0,) + tuple(range(2, nd))
    if training:
        xr, back = bn_layout(x)
        gr, _ = bn_layout(g)
        wr = np.broadcast_to(wf[:, None], xr.shape)
        egx = back(rows_bwd(xr, gr, wr, 1e-5)[0])
    else:
        egx = g * (wf * inv).reshape(bs)
    np.testing.assert_allclose(N(gx), egx, **gtol(dt, inv))
    np.testing.assert_allclose(N(gw), (g * xh).sum(axes), **tol(dt))
    np.testing.assert_allclose(N(gb), g.sum(axes), **tol(dt))
    gx2, gw2, gb2 = fiamma.batch_norm_backward(T(g, dt), T(x, dt), None, T(mean, dt),
                                               T(inv, dt), training,
                                               output_mask=(False, True, False))
    assert gx2 is None and gb2 is None
    np.testing.assert_allclose(N(gw2), (g * xh).sum(axes), **tol(dt))


def test_instance_norm_running_stats_averaged():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 2, 4, 5)) + np.array([1.0, -2.0])[None, :, None, None]
    w, b = rng.standard_normal(2), rng.standard_normal(2)
    rm, rv = T(np.zeros(2)), T(np.ones(2))
    y = fiamma.instance_norm(T(x), rm, rv, T(w), T(b), True, 0.1, 1e-5)
    rows = x.reshape(6, -1)
    ey = rows_fwd(rows, 1e-5)[0].reshape(x.shape) * w[None, :, None, None] + \
        b[None, :, None, None]
    np.testing.assert_allclose(N(y), ey, atol=1e-10)
    m = rows.shape[1]
    np.testing.assert_allclose(N(rm), 0.1 * rows.mean(1).reshape(3, 2).mean(0), atol=1e-12)
    np.testing.assert_allclose(N(rv), 0.9 + 0.1 * (rows.var(1) * m / (m - 1)).reshape(3, 2)
                               .mean(0), atol=1e-12)
    y = fiamma.instance_norm(T(x), rm, rv, use_input_stats=False)
    ey = (x - N(rm)[None, :, None, None]) / np.sqrt(N(rv)[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(N(y), ey, atol=1e-10)


# ---- row norms -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(0, 10**6), st.booleans(), st.booleans(),
       st.sampled_from(["contig", "transpose", "step"]), st.sampled_from([F32, F64]))
def test_layer_and_rms_norm(nd, seed, affine, rms, kind, dt):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 6, size=nd))
    k = int(rng.integers(1, nd + 1))
    if np.prod(shape[nd - k:]) == 1:  # a single element: 1/sqrt(eps) amplifies rounding
        shape = shape[:-1] + (2,)
    ns = shape[nd - k:]
    x = rounded(rng.standard_normal(shape) * 2 + 0.5, dt)
    g = rounded(rng.standard_normal(shape), dt)
    w = rounded(rng.standard_normal(ns), dt) if affine else None
    b = rounded(rng.standard_normal(ns), dt) if affine and not rms else None
    xt = _layout(x, kind).to(dt) if nd >= 2 else T(x, dt)
    K = int(np.prod(ns))
    x2, g2 = x.reshape(-1, K), g.reshape(-1, K)
    w2 = np.broadcast_to((np.ones(ns) if w is None else w).reshape(1, K), x2.shape)
    eps = 1e-6
    if rms:
        y = fiamma.rms_norm(xt, ns, None if w is None else T(w, dt), eps)
    else:
        y = fiamma.layer_norm(xt, ns, None if w is None else T(w, dt),
                              None if b is None else T(b, dt), eps)
    ey = rows_fwd(x2, eps, not rms)[0] * w2 + (0 if b is None else b.reshape(1, K))
    np.testing.assert_allclose(N(y), ey.reshape(shape), **tol(dt))
    _, mean, rstd = rows_fwd(x2, eps, not rms)
    gt = _layout(g, kind).to(dt) if nd >= 2 else T(g, dt)
    if rms:
        gx, gw = fiamma.rms_norm_backward(gt, xt, ns, None if w is None else T(w, dt),
                                          T(rstd, dt), eps)
    else:
        gx, gw, gb = fiamma.layer_norm_backward(gt, xt, ns, None if w is None else T(w, dt),
                                                T(mean, dt), T(rstd, dt), eps)
        np.testing.assert_allclose(N(gb), g2.sum(0).reshape(ns), **tol(dt))
    _, egw, _ = rows_bwd(x2, g2, w2, eps, not rms)
    egx = rows_bwd_given(x2, g2, w2, rounded(mean, dt), rounded(rstd, dt), not rms)
    np.testing.assert_allclose(N(gx), egx.reshape(shape), **gtol(dt, rstd))
    np.testing.assert_allclose(N(gw).reshape(-1), egw.sum(0), **tol(dt))


def test_rms_norm_default_eps_is_finfo():
    x = np.array([[1e-4, -1e-4, 2e-4]])
    y = fiamma.rms_norm(T(x), (3,))
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(N(y), x / np.sqrt((x * x).mean() + eps), rtol=1e-12)
    y32 = fiamma.rms_norm(T(x, F32), (3,))
    e32 = np.finfo(np.float32).eps
    np.testing.assert_allclose(N(y32), x / np.sqrt((x * x).mean() + e32), rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(0, 10**6), st.booleans(), st.booleans(),
       st.sampled_from([F32, F64]))
def test_group_norm(nd, seed, affine, noncontig, dt):
    rng = np.random.default_rng(seed)
    groups = int(rng.integers(1, 4))
    # at least 2 elements per group (one element has zero variance: 1/sqrt(eps) amplifies
    # float32 rounding)
    shape = (int(rng.integers(1, 4)), groups * int(rng.integers(2 if nd == 2 else 1, 4))) + \
        tuple(int(s) for s in rng.integers(1, 5, size=nd - 2))
    if np.prod(shape[1:]) // groups == 1:
        shape = shape[:-1] + (2,)
    C = shape[1]
    x = rounded(rng.standard_normal(shape) - 2, dt)
    g = rounded(rng.standard_normal(shape), dt)
    w = rounded(rng.standard_normal(C), dt) if affine else None
    b = rounded(rng.standard_normal(C), dt) if affine else None
    xt = _layout(x, "transpose" if noncontig else "contig").to(dt)
    y = fiamma.group_norm(xt, groups, None if w is None else T(w, dt),
                          None if b is None else T(b, dt), 1e-5)
    Nb = shape[0]
    x2 = x.reshape(Nb * groups, -1)
    S = int(np.prod(shape[2:]))
    wf = np.ones(C) if w is None else w
    w2 = np.broadcast_to(wf[None, :, None], (Nb, C, S)).reshape(x2.shape)
    b2 = np.broadcast_to((np.zeros(C) if b is None else b)[None, :, None], (Nb, C, S))
    xh, mean, rstd = rows_fwd(x2, 1e-5)
    ey = xh * w2 + b2.reshape(x2.shape)
    np.testing.assert_allclose(N(y), ey.reshape(shape), **tol(dt))
    gx, gw, gb = fiamma.group_norm_backward(T(g, dt), xt, groups,
                                            None if w is None else T(w, dt), T(mean, dt),
                                            T(rstd, dt), 1e-5)
    egx, egw, egb = rows_bwd(x2, g.reshape(x2.shape), w2, 1e-5)
    np.testing.assert_allclose(N(gx), egx.reshape(shape), **gtol(dt, rstd))
    np.testing.assert_allclose(N(gw), egw.reshape(Nb, C, S).sum((0, 2)), **tol(dt))
    np.testing.assert_allclose(N(gb), egb.reshape(Nb, C, S).sum((0, 2)), **tol(dt))


def test_large_rows_use_threads_and_agree():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 700)).astype(np.float32)
    y = fiamma.layer_norm(T(x, F32), (700,))
    np.testing.assert_allclose(N(y), rows_fwd(x.astype(np.float64), 1e-5)[0], atol=1e-5)
    x4 = rng.standard_normal((4, 32, 30, 30))
    y = fiamma.batch_norm(T(x4, F32), None, None, training=True)
    np.testing.assert_allclose(N(y), ref_bn(x4, None, None, None, None, True, 0, 1e-5)[0],
                               atol=1e-4)
    cl = T(np.ascontiguousarray(x4.transpose(0, 2, 3, 1)), F32).permute(0, 3, 1, 2)
    y = fiamma.batch_norm(cl, None, None, training=True)
    np.testing.assert_allclose(N(y), ref_bn(x4, None, None, None, None, True, 0, 1e-5)[0],
                               atol=1e-4)
    y = fiamma.group_norm(T(x4, F32), 8)
    np.testing.assert_allclose(N(y), rows_fwd(x4.reshape(32, -1), 1e-5)[0].reshape(x4.shape),
                               atol=1e-4)


def test_large_backward_with_threads_agrees():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((300, 700))
    g = rng.standard_normal((300, 700))
    w = rng.standard_normal(700)
    _, mean, rstd = rows_fwd(x, 1e-5)
    gx, gw, gb = fiamma.layer_norm_backward(T(g, F32), T(x, F32), (700,), T(w, F32),
                                            T(mean, F32), T(rstd, F32))
    egx, egw, egb = rows_bwd(x, g, np.broadcast_to(w, x.shape), 1e-5)
    np.testing.assert_allclose(N(gx), egx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(gw), egw.sum(0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(N(gb), egb.sum(0), rtol=1e-4, atol=1e-3)
    x4 = rng.standard_normal((4, 32, 30, 30))
    g4 = rng.standard_normal((4, 32, 30, 30))
    w32 = rng.standard_normal(32)
    x2 = x4.reshape(32, -1)
    xh, mean, rstd = rows_fwd(x2, 1e-5)
    gx, gw, gb = fiamma.group_norm_backward(T(g4, F32), T(x4, F32), 8, T(w32, F32),
                                            T(mean, F32), T(rstd, F32))
    w2 = np.broadcast_to(w32[None, :, None], (4, 32, 900)).reshape(x2.shape)
    egx, egw, egb = rows_bwd(x2, g4.reshape(x2.shape), w2, 1e-5)
    np.testing.assert_allclose(N(gx), egx.reshape(x4.shape), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(gw), egw.reshape(4, 32, 900).sum((0, 2)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(N(gb), egb.reshape(4, 32, 900).sum((0, 2)), rtol=1e-4, atol=1e-3)
    rows, back = bn_layout(x4)
    mean, inv = rows.mean(1), 1 / np.sqrt(rows.var(1) + 1e-5)
    gx, gw, gb = fiamma.batch_norm_backward(T(g4, F32), T(x4, F32), T(w32, F32), T(mean, F32),
                                            T(inv, F32), True)
    gr, _ = bn_layout(g4)
    egx, egw, egb = rows_bwd(rows, gr, np.broadcast_to(w32[:, None], rows.shape), 1e-5)
    np.testing.assert_allclose(N(gx), back(egx), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(gw), egw.sum(1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(N(gb), egb.sum(1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("transposed", [False, True])
def test_large_2d_batch_norm(transposed):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((700, 300)) * 3 + 2
    g = rng.standard_normal((700, 300))
    w = rng.standard_normal(300)
    xt = T(x.T.copy(), F32).t() if transposed else T(x, F32)
    rm, rv = T(np.zeros(300), F32), T(np.ones(300), F32)
    y = fiamma.batch_norm(xt, rm, rv, T(w, F32), None, True, 0.1)
    ey, erm, erv = ref_bn(x, np.zeros(300), np.ones(300), w, None, True, 0.1, 1e-5)
    np.testing.assert_allclose(N(y), ey, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(rm), erm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(rv), erv, rtol=1e-5)
    mean, inv = x.mean(0), 1 / np.sqrt(x.var(0) + 1e-5)
    gx, gw, gb = fiamma.batch_norm_backward(T(g, F32), xt, T(w, F32), T(mean, F32),
                                            T(inv, F32), True)
    egx, egw, egb = rows_bwd(x.T, g.T, np.broadcast_to(w[:, None], (300, 700)), 1e-5)
    np.testing.assert_allclose(N(gx), egx.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(gw), egw.sum(1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(N(gb), egb.sum(1), rtol=1e-4, atol=1e-3)
    y = fiamma.batch_norm(xt, rm, rv, T(w, F32), None, False)
    ey = (x - N(rm)) / np.sqrt(N(rv) + 1e-5) * w
    np.testing.assert_allclose(N(y), ey, rtol=1e-4, atol=1e-4)


def test_empty_inputs():
    x = fiamma.zeros((0, 3, 4))
    assert tuple(fiamma.batch_norm(x, None, None, training=True).shape) == (0, 3, 4)
    rm = fiamma.zeros(3)
    fiamma.batch_norm(x, rm, fiamma.ones(3), training=True)
    assert rm.tolist() == [0.0] * 3
    assert tuple(fiamma.layer_norm(x, (4,)).shape) == (0, 3, 4)
    assert tuple(fiamma.group_norm(x, 3).shape) == (0, 3, 4)
    assert tuple(fiamma.rms_norm(x, (4,)).shape) == (0, 3, 4)


def test_bad_arguments_name_the_op():
    x = fiamma.randn(2, 3, 4)
    with pytest.raises(ValueError, match="layer_norm.*normalized_shape"):
        fiamma.layer_norm(x, (3,))
    with pytest.raises(ValueError, match="group_norm.*divisible"):
        fiamma.group_norm(x, 2)
    with pytest.raises(ValueError, match="batch_norm.*weight.*3"):
        fiamma.batch_norm(x, None, None, fiamma.ones(4), training=True)
    with pytest.raises(ValueError, match="batch_norm.*running_mean"):
        fiamma.batch_norm(x, fiamma.zeros(2), fiamma.ones(3), training=True)
    with pytest.raises(TypeError, match="layer_norm.*floating"):
        fiamma.layer_norm(fiamma.ones(2, 3, dtype=fiamma.int64), (3,))
    with pytest.raises(ValueError, match="batch_norm.*2 dims"):
        fiamma.batch_norm(fiamma.ones(3), None, None, training=True)
    with pytest.raises(ValueError, match="instance_norm.*use_input_stats"):
        fiamma.instance_norm(x, use_input_stats=False)
    with pytest.raises(ValueError, match="rms_norm.*weight"):
        fiamma.rms_norm(x, (4,), fiamma.ones(3))


@pytest.mark.parametrize("mean,std", [(1000.0, 0.01), (1e4, 1.0), (100.0, 1e-3)])
def test_row_norms_keep_precision_at_a_large_mean(mean, std):
    """float32 rows whose mean is 1e5 times their spread: the forward subtracts the mean as a
    float32 plus its rest, so the output keeps float32 precision (it erred by ~3e-3 when the
    mean was rounded to float32 first; PyTorch's kernel errs by ~9e-3 here)."""
    rng = np.random.default_rng(0)
    x = (mean + std * rng.standard_normal((8, 64))).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(N(fiamma.layer_norm(T(x, F32), (64,))), ref, atol=2e-6)
    w = rng.uniform(0.5, 2, 4)
    y = fiamma.group_norm(T(x.reshape(8, 4, 16), F32), 1, T(w, F32), None, 1e-5)
    np.testing.assert_allclose(N(y), ref.reshape(8, 4, 16) * w[None, :, None], atol=5e-6)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [(), []])
def test_empty_normalized_shape_is_refused(op, shape):
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        getattr(fiamma, op)(fiamma.ones(2, 3), shape)
