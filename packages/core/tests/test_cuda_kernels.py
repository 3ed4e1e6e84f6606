"""The cuda backend's own kernels (fiamma/_backend/xp/cuda_kernels.py) against the CPU: every
fast path is taken (``fast_path_calls``), none failed to build (``fast_path_errors``), and the
results equal the CPU's within float tolerance, edge cases included (ignored and bad targets,
label smoothing with weights, -inf and NaN rows, rows longer than a block, strided rows,
sums over leading dims, sizes that are not a multiple of four, unaligned operands).

Runs on devices whose backend has the fast paths (cuda, on a GPU: benchmarks/gpu/run.sh);
skipped elsewhere."""

import numpy as np
import pytest
from _cuda_helpers import backend_with, calls as _calls, served as _served, total as _total
from conftest import assert_same

import fiamma
from fiamma import _backend


@pytest.fixture
def be(device):
    return backend_with(device, "fast_path_calls", "fused kernels of its own")


# 16-bit operands meet cuda_lowp.py's one-pass kernels first (its where/compare take them)
WHERE_PATHS = ("where_scalar", "lp_where")
CMP_PATHS = ("compare_scalar", "lp_cmp")


def _t(a, dtype):
    return fiamma.from_numpy(np.ascontiguousarray(a)).to(dtype).clone()


DTYPES = [(fiamma.float32, 2e-5), (fiamma.float64, 1e-11)]


# ---- cross entropy ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("n,c", [(7, 10), (3, 1000), (5, 1)])
@pytest.mark.parametrize("weighted,smoothing", [(False, 0.0), (True, 0.0), (False, 0.1),
                                                (True, 0.25)])
def test_cross_entropy(device, be, dtype, tol, n, c, weighted, smoothing):
    rng = np.random.default_rng(n * c)
    x = rng.standard_normal((n, c)) * 3
    if n > 3 and c > 1:
        x[1] = -np.inf          # a row of -inf: loss inf/NaN as on the CPU
        x[2, 0] = np.nan
    t = rng.integers(0, c, n)
    t[0] = -100                 # ignored
    w = rng.uniform(0.5, 2.0, c) if weighted else None
    xc, tc = _t(x, dtype), fiamma.from_numpy(t)
    wc = _t(w, dtype) if weighted else None
    xd, td = xc.to(device), tc.to(device)
    wd = wc.to(device) if weighted else None
    for red in ("none", "mean", "sum"):
        f0 = _calls(be, "xent_fwd")
        ref = fiamma.cross_entropy_loss(xc, tc, wc, red, label_smoothing=smoothing)
        got = fiamma.cross_entropy_loss(xd, td, wd, red, label_smoothing=smoothing)
        _served(be, "xent_fwd", f0)
        assert_same(got, ref, rtol=tol, atol=tol)
        g = fiamma.ones(n, dtype=dtype) * 0.5 if red == "none" else fiamma.tensor(0.5,
                                                                                   dtype=dtype)
        b0 = _calls(be, "xent_bwd")
        gref = fiamma.cross_entropy_loss_backward(g, xc, tc, wc, red, label_smoothing=smoothing)
        ggot = fiamma.cross_entropy_loss_backward(g.to(device), xd, td, wd, red,
                                                  label_smoothing=smoothing)
        _served(be, "xent_bwd", b0)
        assert_same(ggot, gref, rtol=tol, atol=tol)


def test_cross_entropy_bad_target_raises(device, be):
    x = fiamma.randn(4, 5, device=device)
    for bad in (5, -1):
        t = fiamma.tensor([0, 1, bad, 2], device=device)
        with pytest.raises(IndexError):
            fiamma.cross_entropy_loss(x, t)
        with pytest.raises(IndexError):
            fiamma.cross_entropy_loss_backward(fiamma.tensor(1.0, device=device), x, t)
    # the flag is per call: a good target afterwards works
    ok = fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1, 2, 3], device=device))
    assert np.isfinite(ok.item())


# ---- layer norm / RMS norm -------------------------------------------------------------------

def _stats(x, rms, eps):
    x = x.astype(np.float64)
    mu = np.zeros(x.shape[0]) if rms else x.mean(1)
    var = (x ** 2).mean(1) if rms else x.var(1)
    return mu, 1.0 / np.sqrt(var + eps)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("M,K", [(5, 384), (3, 1000), (70, 7), (1, 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(device, be, dtype, tol, M, K, affine):
    rng = np.random.default_rng(M + K)
    wide = rng.standard_normal((M, K + 3)) * 2 + 5  # offset: the shifted sums matter
    xc = _t(wide, dtype)[:, 1:K + 1]                 # strided rows (row stride K + 3)
    w = _t(rng.uniform(0.5, 1.5, K), dtype) if affine else None
    b = _t(rng.standard_normal(K), dtype) if affine else None
    xd = xc.to(device)
    assert xd.stride(0) in (K, K + 3)

    def on(t):
        return t.to(device) if t is not None else None

    f0 = _calls(be, "row_norm_fwd")
    assert_same(fiamma.layer_norm(xd, (K,), on(w), on(b)),
                fiamma.layer_norm(xc, (K,), w, b), rtol=tol, atol=tol)
    _served(be, "row_norm_fwd", f0)
    assert_same(fiamma.rms_norm(xd, (K,), on(w), 1e-6), fiamma.rms_norm(xc, (K,), w, 1e-6),
                rtol=tol, atol=tol)
    g = _t(rng.standard_normal((M, K)), dtype)
    mu, rs = _stats(wide[:, 1:K + 1], False, 1e-5)
    mean, rstd = _t(mu, dtype), _t(rs, dtype)
    b0 = _calls(be, "row_norm_bwd")
    ref = fiamma.layer_norm_backward(g, xc, (K,), w, mean, rstd)
    got = fiamma.layer_norm_backward(g.to(device), xd, (K,), on(w), mean.to(device),
                                     rstd.to(device))
    _served(be, "row_norm_bwd", b0)
    for a, r in zip(got, ref):
        if r is not None:
            assert_same(a, r, rtol=tol * 10, atol=tol * 10)
    _, rs2 = _stats(wide[:, 1:K + 1], True, 1e-6)
    ref = fiamma.rms_norm_backward(g, xc, (K,), w, _t(rs2, dtype), 1e-6)
    got = fiamma.rms_norm_backward(g.to(device), xd, (K,), on(w), _t(rs2, dtype).to(device),
                                   1e-6)
    for a, r in zip(got, ref):
        if r is not None:
            assert_same(a, r, rtol=tol * 10, atol=tol * 10)


def test_sum_casts_without_acc_out(device, be, monkeypatch):
    """The float64 sums of the column-sum and layer-norm weight/bias kernels reach their
    outputs through fm_acc_out; with that kernel refused, through array calls: same answers.
    (Column sums into a contiguous row take fm_colsum1, refused here too, which writes its
    outputs itself: the test_cuda_step.py tests.)"""
    real = be._raw_kernel
    refused = []

    def no_acc_out(key, src, name, ct):
        if name in ("fm_acc_out", "fm_colsum1", "fm_row_norm_wb1"):
            refused.append(name)
            raise RuntimeError("kernel refused (test)")
        return real(key, src, name, ct)

    monkeypatch.setattr(be, "_raw_kernel", no_acc_out)
    monkeypatch.setattr(be, "fast_path_errors", {})
    rng = np.random.default_rng(9)
    x = _t(rng.standard_normal((40, 33)) * 10, fiamma.float32)
    xd = x.to(device)
    for fn in (lambda t: t.sum(0), lambda t: t.mean(0)):
        assert_same(fn(xd), fn(x), rtol=1e-5, atol=1e-4)
    w = _t(rng.uniform(0.5, 1.5, 33), fiamma.float32)
    mean, rstd = x.mean(1), 1 / (x.var(1, unbiased=False) + 1e-5).sqrt()
    g = _t(rng.standard_normal((40, 33)), fiamma.float32)
    ref = fiamma.layer_norm_backward(g, x, (33,), w, mean, rstd)
    got = fiamma.layer_norm_backward(g.to(device), xd, (33,), w.to(device), mean.to(device),
                                     rstd.to(device))
    for a, r in zip(got, ref):
        assert_same(a, r, rtol=1e-4, atol=1e-4)
    assert refused and "acc_out" in be.fast_path_errors
    assert "colsum" not in be.fast_path_errors and "row_norm_bwd" not in be.fast_path_errors


# ---- GELU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(device, be, dtype, tol, approximate):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(1000) * 4, [0.0, -0.0, 1e-30, -1e-30, 11.9, 12.1,
                                                         -15.9, -16.1, 30.0, -30.0, 45.0, -45.0,
                                                         np.inf, -np.inf, np.nan]])
    xc = _t(x, dtype)
    g = _t(rng.standard_normal(x.size), dtype)
    # (float32: cuda_step.py's kernels from pointers, "gelu_s", where present)
    f0, b0 = _total(be, ("gelu_fwd", "gelu_s")), _total(be, ("gelu_bwd", "gelu_s"))
    assert_same(fiamma.gelu(xc.to(device), approximate), fiamma.gelu(xc, approximate),
                rtol=tol, atol=tol)
    _served(be, ("gelu_fwd", "gelu_s"), f0)
    assert_same(fiamma.gelu_backward(g.to(device), xc.to(device), approximate),
                fiamma.gelu_backward(g, xc, approximate), rtol=tol, atol=tol)
    _served(be, ("gelu_bwd", "gelu_s"), b0 + (dtype is fiamma.float32))


# ---- optimizer steps -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("amsgrad,decoupled,maximize,wd", [(False, False, False, 0.0),
                                                           (True, True, True, 0.01),
                                                           (False, False, False, 0.1)])
@pytest.mark.parametrize("mixed_steps", [False, True])
def test_adam(device, be, dtype, tol, amsgrad, decoupled, maximize, wd, mixed_steps):
    """One launch for every parameter (adam_multi) when they share a step count; one launch
    per parameter otherwise."""
    from fiamma import fused

    rng = np.random.default_rng(5)
    shapes = [(300, 7), (5,), (0,), (1,)]
    p, g, m = ([_t(rng.standard_normal(s), dtype) for s in shapes] for _ in range(3))
    v = [_t(np.abs(rng.standard_normal(s)), dtype) for s in shapes]
    vm = [fiamma.zeros_like(t) for t in p]
    cpu = (p, g, m, v, vm)
    dev = tuple([t.to(device) for t in group] for group in cpu)
    a0 = _calls(be, "adam_multi" if not mixed_steps else "adam")
    for step in (1, 2, 3):
        for p, g, m, v, vm in (cpu, dev):
            steps = [step + (i if mixed_steps else 0) for i in range(len(p))]
            fused.adam_(p, g, m, v, vm if amsgrad else None, steps=steps, lr=1e-2,
                        beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=wd, amsgrad=amsgrad,
                        maximize=maximize, decoupled=decoupled)
    _served(be, "adam_multi" if not mixed_steps else "adam", a0)
    for a, r in zip(dev[0], cpu[0]):
        assert_same(a, r, rtol=tol * 10, atol=tol * 10)


def test_a_failing_kernel_falls_back(device, be, monkeypatch):
    """A kernel that stops launching halfway through the parameters: the error is recorded,
    the generic code updates the rest, and every parameter is updated exactly once."""
    from fiamma import fused

    real = be._ew_kernel
    launched = []

    def flaky(key, *a, **kw):
        kern = real(key, *a, **kw)

        def launch(*args):
            launched.append(key)
            if len(launched) > 1:
                raise RuntimeError("launch refused (test)")
            return kern(*args)

        return launch

    monkeypatch.setattr(be, "_ew_kernel", flaky)
    monkeypatch.setattr(be, "fast_path_errors", {})
    rng = np.random.default_rng(8)
    shapes = [(30, 7), (5,), (11,)]
    cpu = tuple([_t(rng.standard_normal(s), fiamma.float32) for s in shapes] for _ in range(3))
    cpu += ([_t(np.abs(rng.standard_normal(s)), fiamma.float32) for s in shapes],)
    dev = tuple([t.to(device) for t in group] for group in cpu)
    for p, g, m, v in (cpu, dev):
        # (different step counts: one launch per parameter, not adam_multi's one)
        fused.adam_(p, g, m, v, steps=[1, 2, 1], lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    assert "adam" in be.fast_path_errors and launched == ["adam", "adam"]
    for a, r in zip(dev[0], cpu[0]):
        assert_same(a, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("momentum,nesterov,wd,maximize,dampening", [
    (0.0, False, 0.0, False, 0.0), (0.9, True, 0.01, True, 0.0), (0.9, False, 0.0, False, 0.3)])
def test_sgd(device, be, momentum, nesterov, wd, maximize, dampening):
    from fiamma import fused

    rng = np.random.default_rng(6)
    shapes = [(300, 7), (5,), (0,)]
    p_c = [_t(rng.standard_normal(s), fiamma.float32) for s in shapes]
    g_c = [_t(rng.standard_normal(s), fiamma.float32) for s in shapes]
    b_c = [fiamma.zeros_like(t) for t in p_c] if momentum else None
    p_d, g_d = [t.to(device) for t in p_c], [t.to(device) for t in g_c]
    b_d = [t.to(device) for t in b_c] if momentum else None
    s0, m0 = _calls(be, "sgd"), _calls(be, "sgd_multi")
    for first in (True, False, False):
        for p, g, b in ((p_c, g_c, b_c), (p_d, g_d, b_d)):
            fused.sgd_(p, g, b, lr=0.1, momentum=momentum, dampening=dampening,
                       weight_decay=wd, nesterov=nesterov, maximize=maximize, first=first)
    _served(be, "sgd_multi", m0)  # two non-empty parameters: one launch for both
    for a, r in zip(p_d, p_c):
        assert_same(a, r, rtol=1e-6, atol=1e-6)
    # one parameter: the per-parameter kernel
    pc, gc, pd, gd = p_c[0].clone(), g_c[0].clone(), p_d[0].clone(), g_d[0].clone()
    bc = [b_c[0].clone()] if momentum else None
    bd = [b_d[0].clone()] if momentum else None
    for first in (True, False):
        for p, g, b in (([pc], [gc], bc), ([pd], [gd], bd)):
            fused.sgd_(p, g, b, lr=0.1, momentum=momentum, dampening=dampening,
                       weight_decay=wd, nesterov=nesterov, maximize=maximize, first=first)
    assert_same(pd, pc, rtol=1e-6, atol=1e-6)
    _served(be, "sgd", s0)


def test_sgd_multi_refused_falls_back(device, be, monkeypatch):
    from fiamma import fused

    real = be._raw_kernel

    def no_multi(key, src, name, ct):
        if name == "fm_sgd_multi":
            raise RuntimeError("kernel refused (test)")
        return real(key, src, name, ct)

    monkeypatch.setattr(be, "_raw_kernel", no_multi)
    monkeypatch.setattr(be, "fast_path_errors", {})
    rng = np.random.default_rng(10)
    p_c = [_t(rng.standard_normal(s), fiamma.float32) for s in [(30, 7), (5,)]]
    g_c = [_t(rng.standard_normal(s), fiamma.float32) for s in [(30, 7), (5,)]]
    b_c = [fiamma.zeros_like(t) for t in p_c]
    p_d, g_d, b_d = ([t.to(device) for t in ts] for ts in (p_c, g_c, b_c))
    s0 = _calls(be, "sgd")
    for first in (True, False):
        for p, g, b in ((p_c, g_c, b_c), (p_d, g_d, b_d)):
            fused.sgd_(p, g, b, lr=0.1, momentum=0.9, first=first)
    assert "sgd_multi" in be.fast_path_errors and _calls(be, "sgd") > s0
    for a, r in zip(p_d + b_d, p_c + b_c):
        assert_same(a, r, rtol=1e-6, atol=1e-6)


# ---- sums over leading dims ------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_sums_over_leading_dims(device, be, dtype, tol):
    rng = np.random.default_rng(7)
    x = _t(rng.standard_normal((40, 30, 33)) * 10, dtype)
    xd = x.to(device)
    c0 = _total(be, ("colsum", "colsum1"))
    for fn in (lambda t: t.sum(0), lambda t: t.sum((0, 1)), lambda t: t.mean(0),
               lambda t: t.sum(0, keepdim=True), lambda t: t.mean((0, 1), keepdim=True)):
        assert_same(fn(xd), fn(x), rtol=tol, atol=tol * 100)
    _served(be, ("colsum", "colsum1"), c0)
    # not leading, not contiguous, integer: the generic code, same answers
    for fn in (lambda t: t.sum(1), lambda t: t.transpose(0, 2).sum(0)):
        assert_same(fn(xd), fn(x), rtol=tol, atol=tol * 100)
    i = fiamma.arange(60000).reshape(600, 100)
    assert_same(i.to(device).sum(0), i.sum(0))


# ---- + - * / of contiguous float32 -----------------------------------------------------------

@pytest.mark.parametrize("n", [65536, 70001, 1 << 20])
def test_binary_contiguous_float32(device, be, n):
    rng = np.random.default_rng(n)
    a = _t(rng.standard_normal(n + 1), fiamma.float32)
    b = _t(rng.standard_normal(n + 1) + 0.1, fiamma.float32)
    ad, bd = a.to(device), b.to(device)
    c0 = _calls(be, "binary")
    for sl in (slice(0, n), slice(1, n + 1)):  # aligned, and 4 bytes off (scalar loads)
        x, y, xd, yd = a[sl], b[sl], ad[sl], bd[sl]
        assert_same(xd + yd, x + y, rtol=0, atol=0)
        assert_same(xd - yd, x - y, rtol=0, atol=0)
        assert_same(xd * yd, x * y, rtol=0, atol=0)
        assert_same(xd / yd, x / y, rtol=0, atol=0)
    _served(be, "binary", c0)
    z, zd = a.clone(), ad.clone()
    z += b
    zd += bd
    assert_same(zd, z, rtol=0, atol=0)
    m = a.reshape(-1)[:n].reshape(n // 5, 5) if n % 5 == 0 else None
    if m is not None:  # broadcast: the generic code
        assert_same(m.to(device) + m[:1].to(device), m + m[:1], rtol=0, atol=0)


@pytest.mark.parametrize("n", [65536, 70001])
def test_binary_number_operand_float32(device, be, n):
    rng = np.random.default_rng(n)
    a = _t(rng.standard_normal(n + 1) + 0.1, fiamma.float32)
    ad = a.to(device)
    c0 = _calls(be, "binary_scalar")
    for sl in (slice(0, n), slice(1, n + 1)):  # aligned, and 4 bytes off (scalar loads)
        x, xd = a[sl], ad[sl]
        for s in (0.37, 3, -2.5e-3):
            assert_same(xd + s, x + s, rtol=0, atol=0)
            assert_same(s - xd, s - x, rtol=0, atol=0)
            assert_same(xd - s, x - s, rtol=0, atol=0)
            assert_same(xd * s, x * s, rtol=0, atol=0)
            assert_same(xd / s, x / s, rtol=0, atol=0)
            assert_same(s / xd, s / x, rtol=0, atol=0)
    _served(be, "binary_scalar", c0)
    # a number beyond float32's range becomes inf, as in the generic code
    assert_same(ad[:n] * 1e300, a[:n] * 1e300, rtol=0, atol=0)
    z, zd = a.clone(), ad.clone()
    z *= 0.999
    zd *= 0.999
    assert_same(zd, z, rtol=0, atol=0)


# ---- convolution: im2col / col2im of 2 spatial dims ------------------------------------------

CONV2D = [  # n, cin, cout, (H, W), (kh, kw), stride, padding, dilation, groups
    (2, 3, 4, (9, 8), (3, 3), 1, 1, 1, 1),
    (1, 4, 6, (11, 7), (3, 2), (2, 3), (2, 0), (2, 1), 2),
    (2, 2, 2, (5, 5), (2, 2), 3, 3, 1, 1),          # padding past the kernel's reach
    (1, 3, 3, (7, 9), (7, 7), 2, 3, 1, 3),           # a 7x7 stem, depthwise
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("case", CONV2D)
def test_conv2d_im2col_col2im(device, be, dtype, tol, case, monkeypatch):
    # the kernels serve where cuDNN does not (test_cuda_cudnn.py checks cuDNN's path)
    monkeypatch.setattr(fiamma.backends.cudnn, "enabled", False)
    n, cin, cout, sp, k, s, p, d, g = case
    rng = np.random.default_rng(sum(sp))
    x = _t(rng.standard_normal((n, cin) + sp), dtype)
    w = _t(rng.standard_normal((cout, cin // g) + k), dtype)
    b = _t(rng.standard_normal(cout), dtype)
    i0, c0 = _calls(be, "im2col"), _calls(be, "col2im")
    y = fiamma.conv2d(x, w, b, s, p, d, g)
    assert_same(fiamma.conv2d(x.to(device), w.to(device), b.to(device), s, p, d, g), y,
                rtol=tol, atol=tol * 10)
    gy = _t(rng.standard_normal(tuple(y.shape)), dtype)
    ss, pp, dd = ((v, v) if isinstance(v, int) else v for v in (s, p, d))
    op = [x.shape[2 + i] - ((gy.shape[2 + i] - 1) * ss[i] - 2 * pp[i] + dd[i] * (k[i] - 1) + 1)
          for i in range(2)]
    ref = fiamma.convolution(gy, w, None, s, p, d, True, op, g)
    got = fiamma.convolution(gy.to(device), w.to(device), None, s, p, d, True, op, g)
    assert_same(got, ref, rtol=tol, atol=tol * 10)
    ref = fiamma.convolution_backward_weight(x, gy, tuple(w.shape), s, p, d, g)
    got = fiamma.convolution_backward_weight(x.to(device), gy.to(device), tuple(w.shape), s, p,
                                             d, g)
    assert_same(got, ref, rtol=tol, atol=tol * 10)
    _served(be, "im2col", i0)
    _served(be, "col2im", c0)
    # the unfold/fold pair itself: im2col is a copy (exact), col2im sums in tap order
    cols = fiamma.im2col(x, k, d, p, s)
    assert_same(fiamma.im2col(x.to(device), k, d, p, s), cols, rtol=0, atol=0)
    back = fiamma.col2im(cols, sp, k, d, p, s)
    assert_same(fiamma.col2im(cols.to(device), sp, k, d, p, s), back, rtol=tol, atol=tol)


# ---- batch norm ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape,affine,training,strided", [
    ((4, 3, 5, 6), True, True, False), ((4, 3, 5, 6), False, True, True),
    ((2, 5, 7), True, False, True), ((1, 3), True, True, False), ((6, 4), False, False, False)])
def test_batch_norm(device, be, dtype, tol, shape, affine, training, strided):
    rng = np.random.default_rng(len(shape) + shape[1])
    C = shape[1]
    x = rng.standard_normal(shape) * 3 + 5
    if strided:  # a channels-last layout: strides the kernels read as given
        perm = (0,) + tuple(range(2, len(shape))) + (1,)
        inv = np.argsort(perm)
        xc = _t(np.transpose(x, perm), dtype).permute(*inv)
    else:
        xc = _t(x, dtype)
    g = _t(np.cos(x) * 2, dtype)
    w = _t(rng.uniform(0.5, 2, C), dtype) if affine else None
    b = _t(rng.standard_normal(C), dtype) if affine else None
    rm0, rv0 = rng.standard_normal(C), rng.uniform(0.5, 2, C)
    outs = []
    f0, b0 = _calls(be, "batch_norm_fwd"), _calls(be, "batch_norm_bwd")
    for dev in ("cpu", device):
        rm, rv = _t(rm0, dtype).to(dev), _t(rv0, dtype).to(dev)
        xx = xc.to(dev)
        on = [t.to(dev) if t is not None else None for t in (w, b)]
        y = fiamma.batch_norm(xx, rm, rv, on[0], on[1], training, 0.1, 1e-5)
        dims = [d for d in range(len(shape)) if d != 1]
        m = xx.mean(dims) if training else rm
        var = xx.var(dims, unbiased=False) if training else rv
        grads = fiamma.batch_norm_backward(g.to(dev), xx, on[0], m.contiguous(),
                                           (var + 1e-5).rsqrt().contiguous(), training)
        outs.append((y, rm, rv) + tuple(grads))
    _served(be, "batch_norm_fwd", f0)
    _served(be, "batch_norm_bwd", b0)
    for got, ref in zip(outs[1], outs[0]):
        if ref is None:
            assert got is None
        else:
            assert_same(got, ref, rtol=tol * 10, atol=tol * 10)


# ---- softmax and max pooling -----------------------------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(7, 10), (3, 1000), (2, 3, 33), (5, 1)])
def test_softmax_last_dim(device, be, dtype, tol, shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape) * 5
    flat = x.reshape(-1, shape[-1])
    if flat.shape[0] > 3 and shape[-1] > 2:
        flat[0] = -np.inf
        flat[1, 1] = np.nan
        flat[2, 0] = np.inf
    xc = _t(x, dtype)
    s0 = _calls(be, "softmax")
    for fn in (lambda t: t.softmax(-1), lambda t: t.log_softmax(-1)):
        assert_same(fn(xc.to(device)), fn(xc), rtol=tol, atol=tol)
    _served(be, "softmax", s0)
    # another dim: the generic code
    if len(shape) == 3:
        assert_same(xc.to(device).softmax(1), xc.softmax(1), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("k,s,p,d,ceil", [(2, 2, 0, 1, False), (3, 2, 1, 1, True),
                                          ((3, 2), (1, 2), (1, 0), (2, 1), False),
                                          (3, 3, 1, 2, True)])
def test_max_pool2d(device, be, dtype, k, s, p, d, ceil):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 11, 9))
    x[0, 0, 2, 3] = np.nan
    x[1, 2] = -np.inf
    x[1, 1, :4, :4] = 7.0      # ties: the first maximum
    xc = _t(x, dtype)
    p0 = _calls(be, "pool_max")
    y, i = fiamma.max_pool2d_with_indices(xc, k, s, p, d, ceil)
    yd, idd = fiamma.max_pool2d_with_indices(xc.to(device), k, s, p, d, ceil)
    _served(be, "pool_max", p0)
    assert_same(yd, y, rtol=0, atol=0)
    assert_same(idd, i, rtol=0, atol=0)


# ---- attention -------------------------------------------------------------------------------

def _attn_fwd_lse(q, k, v, causal, scale=None):
    """(out, lse) of the backend's attn_fwd for 4-d q, k, v of any row strides (lse is what
    the recorded op saves for the backward)."""
    from fiamma._backend import codes as K

    B, H, L, E = q.shape
    Hk, S, Ev = k.shape[1], k.shape[2], v.shape[3]
    dev = q.device
    out = fiamma.empty((B, L, H, Ev), dtype=q.dtype, device=dev).permute(0, 2, 1, 3)
    lse = fiamma.empty((B, H, L), dtype=q.dtype, device=dev)
    be = _backend.backend_for(dev)
    rc = be.attn_fwd(B, H, Hk, L, S, E, Ev, 1 / np.sqrt(E) if scale is None else scale,
                     q, list(q._stride[:3]), k, list(k._stride[:3]), v, list(v._stride[:3]),
                     K.ATTN_CAUSAL if causal else K.ATTN_NONE, None, None, None, out,
                     list(out._stride[:3]), lse)
    assert rc == 0
    return out, lse


def _attn_case(device, be, dtype, tol, causal, q, k, v, fwd, bwd, on_device=None):
    """Forward (output, log-sum-exp) and backward (all three gradients, then each alone) on the
    device against the CPU, counting the device's calls of the paths fwd / bwd; on_device: the
    device's q, k, v where their layout matters (else copies)."""
    gqa = q.shape[1] != k.shape[1]
    kw = dict(is_causal=causal, enable_gqa=gqa)
    qd, kd, vd = on_device or (q.to(device), k.to(device), v.to(device))
    f0, b0 = _calls(be, fwd), _calls(be, bwd)
    want = fiamma.fused_attention(q, k, v, **kw)
    got = fiamma.fused_attention(qd, kd, vd, **kw)
    _served(be, fwd, f0)
    assert_same(got, want.contiguous(), rtol=tol, atol=tol)
    o_ref, lse_ref = _attn_fwd_lse(q, k, v, causal)
    o_got, lse_got = _attn_fwd_lse(qd, kd, vd, causal)
    assert_same(o_got.contiguous(), o_ref.contiguous(), rtol=tol, atol=tol)
    assert_same(lse_got, lse_ref, rtol=tol, atol=tol)
    rng = np.random.default_rng(7)
    g = _t(rng.standard_normal(tuple(want.shape)), dtype)
    ref = fiamma.fused_attention_backward(g, q, k, v, lse_ref, None, **kw)
    for mask in ((True, True, True), (True, False, False), (False, True, False),
                 (False, False, True)):
        out = fiamma.fused_attention_backward(g.to(device), qd, kd, vd, lse_got, None,
                                              output_mask=mask, **kw)
        _served(be, bwd, b0)
        for a, r, m in zip(out, ref, mask):
            if m:
                assert_same(a, r, rtol=tol * 10, atol=tol * 10)
            else:
                assert a is None


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("causal,gqa,L,S,E,Ev", [
    (False, False, 6, 7, 8, 5), (True, False, 9, 9, 8, 8), (True, True, 5, 300, 8, 5),
    (False, True, 1, 3, 8, 5), (True, False, 70, 37, 12, 16), (False, True, 37, 70, 16, 12),
    (True, False, 19, 23, 72, 65), (False, False, 3, 2, 128, 128)])
def test_attention_flash(device, be, dtype, tol, causal, gqa, L, S, E, Ev):
    # L, S across several tiles of every configuration and not multiples of them; head dims
    # of the 64 and the 128 configurations, with float4 loads (E, Ev % 4 == 0) and without
    rng = np.random.default_rng(L * S + E)
    B, H, Hk = 2, 4, 2 if gqa else 4
    q = _t(rng.standard_normal((B, H, L, E)), dtype)
    k = _t(rng.standard_normal((B, Hk, S, E)), dtype)
    v = _t(rng.standard_normal((B, Hk, S, Ev)), dtype)
    _attn_case(device, be, dtype, tol, causal, q, k, v, "attn_flash_fwd", "attn_flash_bwd")


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_flash_strided_qkv(device, be, dtype, tol, causal):
    # a GPT block's q, k, v: views of one (B, L, 3 H E) projection, heads transposed (row
    # stride 3 H E), on the device as on the CPU
    rng = np.random.default_rng(3)
    B, L, H, E = 2, 33, 3, 8
    qkv = _t(rng.standard_normal((B, L, 3 * H * E)), dtype)

    def heads(t):
        return [a.view(B, L, H, E).transpose(1, 2) for a in t.split(H * E, dim=-1)]

    q, k, v = heads(qkv)
    assert q.stride() == (L * 3 * H * E, E, 3 * H * E, 1)
    _attn_case(device, be, dtype, tol, causal, q, k, v, "attn_flash_fwd", "attn_flash_bwd",
               heads(qkv.to(device)))
    # and one strided operand beside contiguous ones (no float4 loads: q's rows are odd)
    wide = _t(rng.standard_normal((B, H, L, E + 1)), dtype)
    q1, k1 = wide[..., :E], k.contiguous()
    _attn_case(device, be, dtype, tol, causal, q1, k1, v, "attn_flash_fwd", "attn_flash_bwd",
               (wide.to(device)[..., :E], k1.to(device), heads(qkv.to(device))[2]))


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_attention_flash_nan_and_dead_rows(device, be, dtype, tol):
    # a NaN key reaches exactly the rows that see it (causal: rows >= its index); a query row
    # of -inf scores everywhere gives output 0 and log-sum-exp -inf (and zero gradients)
    rng = np.random.default_rng(5)
    B, H, L, S, E = 1, 2, 40, 40, 8
    qn, kn = rng.standard_normal((B, H, L, E)), rng.standard_normal((B, H, S, E))
    kn[0, 0, 35, 3] = np.nan
    qn[0, 1, 2] = 0.0
    qn[0, 1, 2, 0] = -np.inf
    kn[0, 1, :, 0] = np.abs(kn[0, 1, :, 0]) + 0.5  # every score of q row 2 is -inf
    q, k = _t(qn, dtype), _t(kn, dtype)
    v = _t(rng.standard_normal((B, H, S, E)), dtype)
    for causal in (False, True):
        o_ref, lse_ref = _attn_fwd_lse(q, k, v, causal)
        o_got, lse_got = _attn_fwd_lse(q.to(device), k.to(device), v.to(device), causal)
        assert np.isnan(o_ref.numpy()[0, 0]).any() and lse_ref.numpy()[0, 1, 2] == -np.inf
        assert_same(o_got.contiguous(), o_ref.contiguous(), rtol=tol, atol=tol)
        assert_same(lse_got, lse_ref, rtol=tol, atol=tol)
        g = _t(rng.standard_normal((B, H, L, E)), dtype)
        ref = fiamma.fused_attention_backward(g, q, k, v, lse_ref, None, is_causal=causal)
        got = fiamma.fused_attention_backward(g.to(device), q.to(device), k.to(device),
                                              v.to(device), lse_got, None, is_causal=causal)
        # grad_key of head 1 is left out: its dead row's zero weights times the row's -inf
        # query are NaN wherever an implementation visits them (the CPU's blocks, our tiles)
        for i, (a, r) in enumerate(zip(got, ref)):
            if i == 1:
                a, r = a[:, :1], r[:, :1]
            assert_same(a, r, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("causal,gqa,L,S", [(False, False, 6, 7), (True, True, 5, 9)])
def test_attention_rows_beyond_flash(device, be, dtype, tol, causal, gqa, L, S):
    # head dims over the flash kernels' 128: the materialised scores' row kernels
    rng = np.random.default_rng(L * S)
    B, H, Hk, E, Ev = 1, 2, 1 if gqa else 2, 130, 5
    q = _t(rng.standard_normal((B, H, L, E)), dtype)
    k = _t(rng.standard_normal((B, Hk, S, E)), dtype)
    v = _t(rng.standard_normal((B, Hk, S, Ev)), dtype)
    _attn_case(device, be, dtype, tol, causal, q, k, v, "attn_fwd", "attn_bwd")


# ---- the counter-based generator -------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 12345, 2 ** 63 + 7, 2 ** 64 - 1])
def test_philox_same_numbers_as_the_cpu(device, be, seed):
    p0 = _calls(be, "philox")
    for fn in (lambda dev: fiamma.rand(1001, device=dev),
               lambda dev: fiamma.randn(3, 333, dtype=fiamma.float64, device=dev),
               lambda dev: fiamma.randint(-5, 10 ** 12, (257,), device=dev),
               lambda dev: fiamma.bernoulli(fiamma.full((999,), 0.3, device=dev))):
        fiamma.manual_seed(seed)
        fn("cpu")  # move the generator's offset along first
        ref = fn("cpu")
        fiamma.manual_seed(seed)
        fn(device)
        got = fn(device)
        assert_same(got, ref, rtol=0, atol=0)
    _served(be, "philox", p0)


# ---- where(cond, tensor, number): one bit-moving launch (ReLU's backward) --------------------

WHERE_DTYPES = [fiamma.float32, fiamma.float64, fiamma.bfloat16, fiamma.float16]


def _where_case(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    x.flat[0] = np.nan
    if x.size > 2:
        x.flat[1] = -np.inf
        x.flat[2] = -0.0
    return x, rng.random(shape) > 0.4


@pytest.mark.parametrize("dtype", WHERE_DTYPES)
@pytest.mark.parametrize("number", [0.0, -0.0, 2.5, float("nan"), -float("inf")])
@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shape", [(7, 10), (3, 1000), (1,), (2, 3, 5)])
def test_where_scalar(device, be, dtype, number, flip, shape):
    x, m = _where_case(shape, len(shape))
    xc, mc = _t(x, dtype), fiamma.from_numpy(m)
    xd, md = xc.to(device), mc.to(device)
    before = _total(be, WHERE_PATHS)
    args = (number, xd) if flip else (xd, number)
    got = fiamma.where(md, *args)
    _served(be, WHERE_PATHS, before)
    want = fiamma.where(mc, *((number, xc) if flip else (xc, number)))
    assert got.dtype is dtype and got.shape == want.shape
    # bits moved as they are: NaN payloads and the sign of zero included
    g, w = got.cpu(), want
    if dtype is fiamma.bfloat16:
        g, w = g.view(fiamma.int16), w.view(fiamma.int16)
    elif dtype is fiamma.float16:
        g, w = g.view(fiamma.int16), w.view(fiamma.int16)
    else:
        g, w = g.view(fiamma.int32 if dtype is fiamma.float32 else fiamma.int64), \
            w.view(fiamma.int32 if dtype is fiamma.float32 else fiamma.int64)
    np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("case", ["strided", "broadcast_cond", "inexact_bf16", "int",
                                  "two_tensors"])
def test_where_scalar_declines(device, be, case):
    """Layouts and dtypes the one-pass kernel leaves to the generic code: same results."""
    x, m = _where_case((6, 8), 3)
    dtype = fiamma.bfloat16 if case == "inexact_bf16" else fiamma.float32
    xc, mc = _t(x, dtype), fiamma.from_numpy(m)
    number = 0.1 if case == "inexact_bf16" else 1.5
    if case == "int":
        xc = _t(np.arange(48).reshape(6, 8), fiamma.int32)
        number = 3
    xd, md = xc.to(device), mc.to(device)
    if case == "strided":  # (made on the device: .to() copies into a contiguous layout)
        xc, mc, xd, md = xc.t(), mc.t(), xd.t(), md.t()
    elif case == "broadcast_cond":
        mc, md = mc[:1], md[:1]
    before = _calls(be, "where_scalar")
    if case == "two_tensors":
        got, want = fiamma.where(md, xd, xd * 2), fiamma.where(mc, xc, xc * 2)
    else:
        got, want = fiamma.where(md, xd, number), fiamma.where(mc, xc, number)
    assert _calls(be, "where_scalar") == before
    assert not be.fast_path_errors, be.fast_path_errors
    assert_same(got.cpu(), want)


@pytest.mark.parametrize("dtype,tol", DTYPES + [(fiamma.bfloat16, 0.0)])
def test_relu_backward_one_launch(device, be, dtype, tol):
    x, _ = _where_case((5, 33), 7)
    x[np.isnan(x)] = 1.0
    g = np.random.default_rng(1).standard_normal(x.shape)
    res = []
    for dev in ("cpu", device):
        xt = _t(x, dtype).to(dev).requires_grad_()
        fiamma.relu(xt).backward(_t(g, dtype).to(dev))
        res.append(xt.grad.cpu())
    paths = WHERE_PATHS + ("relu_bwd",)  # (cuda_step.py's one kernel where present)
    before = _total(be, paths)
    xt = _t(x, dtype).to(device).requires_grad_()
    fiamma.relu(xt).backward(_t(g, dtype).to(device))
    _served(be, paths, before)
    assert_same(res[1], res[0])


# ---- tensor <op> number into a bool result: one launch ---------------------------------------

CMP_OPS = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64, fiamma.bfloat16])
@pytest.mark.parametrize("number", [0, 0.0, -0.0, 0.1, 3, float("nan"), float("inf"), 1e300])
@pytest.mark.parametrize("left", [False, True])
def test_compare_scalar(device, be, dtype, number, left):
    if dtype is fiamma.bfloat16 and number == 0.1:
        pytest.skip("not exact in bfloat16: declined (test_compare_scalar_declines)")
    x, _ = _where_case((7, 10), 5)
    x.flat[3] = 0.1
    x.flat[4] = np.inf
    xc = _t(x, dtype)
    xd = xc.to(device)
    for name in CMP_OPS:
        before = _total(be, CMP_PATHS)
        if left:  # number <op> tensor: the reflected comparison
            rname = {"__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__",
                     "__ge__": "__le__"}.get(name, name)
            got, want = getattr(xd, rname)(number), getattr(xc, rname)(number)
        else:
            got, want = getattr(xd, name)(number), getattr(xc, name)(number)
        _served(be, CMP_PATHS, before)
        assert got.dtype is fiamma.bool
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy(), err_msg=name)


@pytest.mark.parametrize("case", ["strided", "int", "float16", "inexact_bf16"])
def test_compare_scalar_declines(device, be, case):
    x, _ = _where_case((6, 8), 9)
    number = 0.5
    if case == "inexact_bf16":  # the CPU compares with the number rounded to bfloat16
        x.flat[5] = 0.1
        xc, number = _t(x, fiamma.bfloat16), 0.1
    elif case == "int":  # (an int tensor with a float number is compared as float32)
        xc, number = _t(np.arange(48).reshape(6, 8), fiamma.int32), 7
    elif case != "inexact_bf16":
        xc = _t(x, fiamma.float16 if case == "float16" else fiamma.float32)
    xd = xc.to(device)
    if case == "strided":
        xc, xd = xc.t(), xd.t()
    before = _calls(be, "compare_scalar")
    got, want = xd > number, xc > number
    assert _calls(be, "compare_scalar") == before
    if case == "inexact_bf16":
        return  # (the generic array code compares in float32: it differs from the CPU here)
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
