"""The fused family of the array-module backend on every device besides the CPU: convolution,
normalisation, pooling, resampling, padding, optimizer steps, GELU and NMS, forward and the
backward primitives, against the CPU backend's results (the semantics every device shares)."""

import inspect

import numpy as np
import pytest
from conftest import assert_same

import fiamma
from fiamma import detection, fused

F32 = dict(rtol=1e-4, atol=1e-5)


def _pair(a, device, dtype=fiamma.float32):
    c = fiamma.tensor(a, dtype=dtype)
    return c, c.to(device)


def _rand(rng, *shape):
    return rng.standard_normal(shape)


def _both(f, device, *arrays, dtype=fiamma.float32, tol=F32):
    """f on CPU tensors and on device tensors of the same values: every result the same."""
    cs, ds = zip(*(_pair(a, device, dtype) for a in arrays))
    want, got = f(*cs), f(*ds)
    if not isinstance(want, (tuple, list)):
        want, got = [want], [got]
    assert len(want) == len(got)
    for w, g in zip(want, got):
        if w is None:
            assert g is None
            continue
        assert g.device.type == device
        assert_same(g, w, **tol)


def test_xp_backend_implements_the_fused_family():
    from fiamma._backend.contract import FAMILIES, Backend
    from fiamma._backend.xp import XpBackend

    for name in FAMILIES["fused"]:
        want = list(inspect.signature(getattr(Backend, name)).parameters)
        got = list(inspect.signature(getattr(XpBackend, name)).parameters)
        assert got == want, name


# ---- convolution -----------------------------------------------------------------------------

CONV_CASES = [  # nd, n, cin, cout, spatial, kernel, stride, padding, dilation, groups
    (1, 2, 3, 4, (9,), (3,), 1, 0, 1, 1),
    (1, 1, 4, 6, (11,), (2,), 3, 2, 2, 2),
    (2, 2, 4, 6, (7, 6), (3, 2), (2, 1), (1, 2), (1, 2), 2),
    (2, 3, 3, 5, (8, 8), (1, 1), 1, 0, 1, 1),
    (2, 2, 4, 4, (6, 5), (3, 3), 1, 1, 1, 4),
    (3, 1, 2, 4, (5, 4, 6), (2, 3, 2), (1, 2, 2), (1, 0, 1), 1, 2),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_convolution_forward_and_backward(device, case, dtype):
    # float32 to float32 precision: cuDNN's TF32 (on by default, as in PyTorch) off here
    prev = fiamma.backends.cudnn.allow_tf32
    fiamma.backends.cudnn.allow_tf32 = False
    try:
        _conv_case(device, case, dtype)
    finally:
        fiamma.backends.cudnn.allow_tf32 = prev


def _conv_case(device, case, dtype):
    nd, n, cin, cout, sp, k, s, p, d, g = case
    rng = np.random.default_rng(len(sp) + n)
    x = _rand(rng, n, cin, *sp)
    w = _rand(rng, cout, cin // g, *k)
    b = _rand(rng, cout)
    tol = F32 if dtype is fiamma.float32 else {}
    conv = (fiamma.conv1d, fiamma.conv2d, fiamma.conv3d)[nd - 1]
    _both(lambda x, w, b: conv(x, w, b, s, p, d, g), device, x, w, b, dtype=dtype, tol=tol)
    y = fiamma.convolution(fiamma.tensor(x), fiamma.tensor(w), None, s, p, d, False, 0, g)
    gy = _rand(rng, *y.shape)
    # the input gradient (a transposed convolution) and the weight gradient
    op = _outpad(x.shape, gy.shape, k, s, p, d)
    _both(lambda gy, w: fiamma.convolution(gy, w, None, s, p, d, True, op, g), device, gy, w,
          dtype=dtype, tol=tol)
    _both(lambda x, gy: fiamma.convolution_backward_weight(x, gy, w.shape, s, p, d, g), device,
          x, gy, dtype=dtype, tol=tol)


def _outpad(xshape, yshape, k, s, p, d):
    nd = len(k)
    s, p, d = (v if isinstance(v, tuple) else (v,) * nd for v in (s, p, d))
    return [xshape[2 + i] - ((yshape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1)
            for i in range(nd)]


def test_conv_transpose_with_bias(device):
    rng = np.random.default_rng(3)
    x, w, b = _rand(rng, 2, 4, 5, 4), _rand(rng, 4, 3, 3, 2), _rand(rng, 6)
    _both(lambda x, w, b: fiamma.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                  output_padding=1, groups=2),
          device, x, w, b)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_im2col_col2im(device, nd):
    rng = np.random.default_rng(nd)
    sp = (7, 6, 5)[:nd]
    k, dl, pd, st = (3, 2, 2)[:nd], (1, 2, 1)[:nd], (1, 0, 1)[:nd], (2, 1, 2)[:nd]
    x = _rand(rng, 2, 3, *sp)
    cols = fiamma.im2col(fiamma.tensor(x, dtype=fiamma.float32), k, dl, pd, st)
    _both(lambda x: fiamma.im2col(x, k, dl, pd, st), device, x)
    c = _rand(rng, *cols.shape)
    _both(lambda c: fiamma.col2im(c, sp, k, dl, pd, st), device, c)


def test_conv_half_precision_and_same_padding(device):
    rng = np.random.default_rng(4)
    x, w = _rand(rng, 1, 2, 6, 7), _rand(rng, 3, 2, 2, 3)
    _both(lambda x, w: fiamma.conv2d(x, w, padding="same"), device, x, w)
    _both(lambda x, w: fiamma.conv2d(x, w, stride=2), device, x, w, dtype=fiamma.bfloat16,
          tol=dict(rtol=2e-2, atol=2e-2))


def test_conv_mixed_devices_raise(device):
    x = fiamma.ones(1, 1, 4, 4).to(device)
    with pytest.raises(RuntimeError, match="device"):
        fiamma.conv2d(x, fiamma.ones(1, 1, 2, 2))


# ---- normalisation -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 2)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(device, shape, training):
    rng = np.random.default_rng(len(shape))
    C = shape[1]
    x = _rand(rng, *shape) * 3 + 5
    w, b = _rand(rng, C), _rand(rng, C)
    rm0, rv0 = _rand(rng, C), rng.uniform(0.5, 2, C)
    for dt in (fiamma.float32, fiamma.float64):
        xc, xd = _pair(x, device, dt)
        outs = []
        for xx, dev in ((xc, "cpu"), (xd, device)):
            rm = fiamma.tensor(rm0, dtype=dt, device=dev)
            rv = fiamma.tensor(rv0, dtype=dt, device=dev)
            wt = fiamma.tensor(w, dtype=dt, device=dev)
            bt = fiamma.tensor(b, dtype=dt, device=dev)
            y = fiamma.batch_norm(xx, rm, rv, wt, bt, training, 0.1, 1e-5)
            g = fiamma.tensor(np.cos(x), dtype=dt, device=dev)
            m = xx.mean([d for d in range(len(shape)) if d != 1]) if training else rm
            var = xx.var([d for d in range(len(shape)) if d != 1], unbiased=False) \
                if training else rv
            inv = (var + 1e-5).rsqrt()
            grads = fiamma.batch_norm_backward(g, xx, wt, m.contiguous(), inv.contiguous(),
                                               training)
            outs.append((y, rm, rv) + tuple(grads))
        tol = F32 if dt is fiamma.float32 else dict(rtol=1e-9, atol=1e-9)
        for w_, g_ in zip(*outs):
            assert_same(g_, w_, **tol)


@pytest.mark.parametrize("kind", ["layer", "rms", "group"])
def test_row_norms(device, kind):
    rng = np.random.default_rng(7)
    x = _rand(rng, 3, 4, 5) + 2
    w, b = _rand(rng, 4, 5), _rand(rng, 4, 5)
    gw, gb = _rand(rng, 4), _rand(rng, 4)
    g = _rand(rng, 3, 4, 5)
    if kind == "layer":
        _both(lambda x, w, b: fiamma.layer_norm(x, (4, 5), w, b), device, x, w, b)
        _both(lambda x: fiamma.layer_norm(x, (5,)), device, x)

        def bwd(g, x, w):
            mean = x.mean((1, 2))
            rstd = (x.var((1, 2), unbiased=False) + 1e-5).rsqrt()
            return fiamma.layer_norm_backward(g, x, (4, 5), w, mean, rstd)
        _both(bwd, device, g, x, w)
    elif kind == "rms":
        _both(lambda x, w: fiamma.rms_norm(x, (5,), w[0], 1e-6), device, x, w)

        def bwd(g, x, w):
            rstd = ((x * x).mean(-1, keepdim=True) + 1e-6).rsqrt()
            return fiamma.rms_norm_backward(g, x, (5,), w[0], rstd, 1e-6)
        _both(bwd, device, g, x, w)
    else:
        _both(lambda x, w, b: fiamma.group_norm(x, 2, w, b), device, x, gw, gb)

        def bwd(g, x, w):
            xs = x.reshape(3, 2, 10)
            mean = xs.mean(-1)
            rstd = (xs.var(-1, unbiased=False) + 1e-5).rsqrt()
            return fiamma.group_norm_backward(g, x, 2, w, mean, rstd)
        _both(bwd, device, g, x, gw)


# ---- pooling -------------------------------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_pool_and_backward(device, nd):
    rng = np.random.default_rng(nd)
    sp = (9, 8, 7)[:nd]
    x = _rand(rng, 2, 3, *sp)
    x.reshape(-1)[5] = np.nan
    x.reshape(-1)[7] = -np.inf
    pool = (fiamma.max_pool1d, fiamma.max_pool2d, fiamma.max_pool3d)[nd - 1]
    kw = dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True,
              return_indices=True)
    _both(lambda x: pool(x, **kw), device, x)
    kw2 = dict(kernel_size=2, stride=1, padding=1, dilation=2, return_indices=True)
    _both(lambda x: pool(x, **kw2), device, x)
    v, i = pool(fiamma.tensor(x, dtype=fiamma.float32), **kw)
    gy = _rand(rng, *v.shape)
    _both(lambda g, i: fiamma.max_pool_backward(g, i.long(), sp), device, gy,
          i.numpy().astype(np.float64))
    unpool = (fiamma.max_unpool1d, fiamma.max_unpool2d, fiamma.max_unpool3d)[nd - 1]
    _both(lambda v, i: unpool(v, i.long(), 3, 2, 1, sp), device, v.numpy(),
          i.numpy().astype(np.float64))


def test_max_pool_all_minus_inf_windows(device):
    # no tap beats -inf: the index is each window's first tap inside the plane, as on the CPU
    x = np.full((1, 2, 4, 5), -np.inf)
    x[0, 1, 2, 3] = 1.0
    _both(lambda x: fiamma.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
          device, x)
    _both(lambda x: fiamma.max_pool2d(x, 2, 1, 1, dilation=3, return_indices=True), device, x)


def test_max_pool_bad_index_raises(device):
    v = fiamma.ones(1, 1, 2, 2, device=device)
    i = fiamma.tensor([[[[0, 1], [2, 99]]]], device=device)
    with pytest.raises(IndexError, match="99"):
        fiamma.max_unpool2d(v, i, 2)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_pools(device, nd):
    rng = np.random.default_rng(10 + nd)
    sp = (7, 5, 6)[:nd]
    x = _rand(rng, 2, 3, *sp)
    amax = (fiamma.adaptive_max_pool1d, fiamma.adaptive_max_pool2d,
            fiamma.adaptive_max_pool3d)[nd - 1]
    aavg = (fiamma.adaptive_avg_pool1d, fiamma.adaptive_avg_pool2d,
            fiamma.adaptive_avg_pool3d)[nd - 1]
    for size in [(3, 4, 2)[:nd], (1,) * nd, (9, 7, 8)[:nd]]:
        _both(lambda x: amax(x, size, True), device, x)
        _both(lambda x: aavg(x, size), device, x)
        y = aavg(fiamma.tensor(x, dtype=fiamma.float32), size)
        _both(lambda g: fiamma.adaptive_avg_pool_backward(g, sp), device,
              _rand(rng, *y.shape))


def test_adaptive_pools_tiling_evenly(device):
    # windows that tile the plane (in % out == 0) run as one reduction: ties, NaN, -inf
    rng = np.random.default_rng(15)
    x = np.round(_rand(rng, 2, 3, 8, 6))
    x[0, 0, :2, :3] = -np.inf
    x[0, 1, 0, 0] = x[0, 1, 1, 1] = np.nan
    x[1, 2, 4:6, 3:6] = 7.0
    for size in [(4, 3), (2, 2), (8, 1), (1, 1)]:
        _both(lambda x: fiamma.adaptive_max_pool2d(x, size, True), device, x)
        _both(lambda x: fiamma.adaptive_avg_pool2d(x, size), device, x)
    x3 = _rand(rng, 1, 2, 4, 6, 2)
    _both(lambda x: fiamma.adaptive_max_pool3d(x, (2, 3, 1), True), device, x3)
    _both(lambda x: fiamma.adaptive_avg_pool3d(x, (2, 3, 1)), device, x3)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cip,divo", [(True, None), (False, None), (True, 3)])
def test_avg_pool_and_backward(device, nd, cip, divo):
    rng = np.random.default_rng(20 + nd)
    sp = (9, 7, 6)[:nd]
    x = _rand(rng, 2, 2, *sp)
    pool = (fiamma.avg_pool1d, fiamma.avg_pool2d, fiamma.avg_pool3d)[nd - 1]
    extra = {"divisor_override": divo} if divo else {}
    _both(lambda x: pool(x, 3, 2, 1, True, cip, **extra), device, x)
    y = pool(fiamma.tensor(x, dtype=fiamma.float32), 3, 2, 1, True, cip, **extra)
    _both(lambda g: fiamma.avg_pool_backward(g, sp, (3,) * nd, (2,) * nd, (1,) * nd, True, cip,
                                             divo), device, _rand(rng, *y.shape))


def test_pools_float64_and_bfloat16(device):
    rng = np.random.default_rng(5)
    x = _rand(rng, 2, 3, 6, 6)
    _both(lambda x: fiamma.max_pool2d(x, 2, return_indices=True), device, x,
          dtype=fiamma.float64, tol={})
    _both(lambda x: fiamma.avg_pool2d(x, 3, 1, 1), device, x, dtype=fiamma.bfloat16,
          tol=dict(rtol=2e-2, atol=2e-2))


# ---- resampling ----------------------------------------------------------------------------

UP_CASES = [("nearest", None), ("nearest-exact", None), ("linear", False), ("linear", True),
            ("cubic", False), ("cubic", True)]


@pytest.mark.parametrize("mode,ac", UP_CASES)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_upsample_and_backward(device, mode, ac, nd):
    if mode == "cubic" and nd == 3:
        pytest.skip("cubic interpolation is 1-d or 2-d")
    rng = np.random.default_rng(30 + nd)
    sp = (5, 4, 3)[:nd]
    x = _rand(rng, 2, 2, *sp)
    for size, scales in [((9, 3, 5)[:nd], None), ((7, 8, 6)[:nd], (1.5, 2.0, 2.25)[:nd])]:
        _both(lambda x: fiamma.upsample(x, size, mode, bool(ac), scales), device, x)
        g = _rand(rng, 2, 2, *size)
        _both(lambda g: fiamma.upsample_backward(g, (2, 2) + sp, mode, bool(ac), scales),
              device, g)


GRID_CASES = [(m, p, ac) for m in (0, 1, 2) for p in (0, 1, 2) for ac in (False, True)]


@pytest.mark.parametrize("mode,padding,ac", GRID_CASES)
def test_grid_sample_2d(device, mode, padding, ac):
    rng = np.random.default_rng(mode * 6 + padding * 2 + ac)
    x = _rand(rng, 2, 3, 5, 4)
    grid = rng.uniform(-1.3, 1.3, (2, 6, 7, 2))
    grid[0, 0, 0] = [np.nan, 0.2]
    grid[1, 0, 0] = [1e20, -3.0]
    _both(lambda x, g: fiamma.grid_sampler(x, g, mode, padding, ac), device, x, grid)
    gy = _rand(rng, 2, 3, 6, 7)
    _both(lambda gy, x, g: fiamma.grid_sampler_backward(gy, x, g, mode, padding, ac), device,
          gy, x, grid, tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("mode,padding,ac", [(0, 0, False), (0, 2, True), (1, 1, False),
                                             (0, 1, True)])
def test_grid_sample_3d(device, mode, padding, ac):
    rng = np.random.default_rng(40 + mode + padding)
    x = _rand(rng, 2, 2, 4, 3, 5)
    grid = rng.uniform(-1.2, 1.2, (2, 3, 2, 4, 3))
    _both(lambda x, g: fiamma.grid_sampler(x, g, mode, padding, ac), device, x, grid)
    gy = _rand(rng, 2, 2, 3, 2, 4)
    _both(lambda gy, x, g: fiamma.grid_sampler_backward(gy, x, g, mode, padding, ac), device,
          gy, x, grid, tol=dict(rtol=1e-4, atol=1e-4))


# ---- padding -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(device, mode):
    rng = np.random.default_rng(50)
    x = _rand(rng, 2, 3, 5, 4)
    for p in [(1, 2, 2, 1), (2, 1, 1, 3), (0, 1, 3, 2), (1, 1, 1, 2, 0, 1)]:
        _both(lambda x: fiamma.pad(x, p, mode), device, x)
    if mode == "constant":
        _both(lambda x: fiamma.pad(x, (1, -1, 2, 0, 1, 1), value=2.5), device, x)
        _both(lambda x: fiamma.pad(x, (2, 2)), device, x, dtype=fiamma.int64, tol={})


# ---- optimizer steps, GELU, NMS ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("amsgrad,decoupled,maximize,wd", [(False, False, False, 0.0),
                                                           (True, False, True, 0.1),
                                                           (False, True, False, 0.05)])
def test_adam_step(device, dtype, amsgrad, decoupled, maximize, wd):
    rng = np.random.default_rng(60)
    shapes = [(3, 4), (5,), (0,)]
    vals = [[_rand(rng, *s) for s in shapes] for _ in range(4)]
    vals[2] = [np.abs(v) for v in vals[2]]
    vals[3] = [np.abs(v) * 2 for v in vals[3]]
    res = []
    for dev in ("cpu", device):
        p, g, m, v = [[fiamma.tensor(a, dtype=dtype, device=dev) for a in vs] for vs in vals]
        vm = [t.clone() for t in v] if amsgrad else None
        for step in (1, 2):
            fused.adam_(p, g, m, v, vm, steps=[step] * 3, lr=0.01, beta1=0.9, beta2=0.99,
                        eps=1e-8, weight_decay=wd, amsgrad=amsgrad, maximize=maximize,
                        decoupled=decoupled)
        res.append(p + m + v + (vm or []))
    for a, b in zip(*res):
        assert_same(b, a, rtol=1e-6 if dtype is fiamma.float32 else 1e-12, atol=1e-7)


@pytest.mark.parametrize("momentum,nesterov,wd,maximize", [(0.0, False, 0.0, False),
                                                           (0.9, False, 0.01, True),
                                                           (0.9, True, 0.0, False)])
def test_sgd_step(device, momentum, nesterov, wd, maximize):
    rng = np.random.default_rng(61)
    vals = [[_rand(rng, 4, 3), _rand(rng, 7)] for _ in range(3)]
    res = []
    for dev in ("cpu", device):
        p, g, b = [[fiamma.tensor(a, dtype=fiamma.float32, device=dev) for a in vs]
                   for vs in vals]
        for first in (True, False):
            fused.sgd_(p, g, b if momentum else None, lr=0.1, momentum=momentum,
                       dampening=0.1 if not nesterov else 0.0, weight_decay=wd,
                       nesterov=nesterov, maximize=maximize, first=first)
        res.append(p + (b if momentum else []))
    for a, b in zip(*res):
        assert_same(b, a, rtol=1e-6, atol=1e-7)


def test_fused_refuses_mixed_devices(device):
    p = fiamma.ones(3, device=device)
    assert fused.supports([p, fiamma.ones(2, device=device)])
    assert not fused.supports([p, fiamma.ones(2)])
    with pytest.raises(RuntimeError, match="on cpu"):
        fused.sgd_([p], [fiamma.ones(3)], lr=0.1)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_gelu(device, approximate, dtype):
    x = np.concatenate([np.linspace(-45, 45, 181), np.linspace(-3, 3, 61), [np.inf, -np.inf]])
    g = np.cos(np.where(np.isfinite(x), x, 0))
    tol = dict(rtol=2e-6, atol=1e-7) if dtype is fiamma.float32 else dict(rtol=1e-12,
                                                                            atol=1e-14)
    _both(lambda x: fiamma.gelu(x, approximate), device, x, dtype=dtype, tol=tol)
    _both(lambda g, x: fiamma.gelu_backward(g, x, approximate), device, g, x, dtype=dtype,
          tol=tol)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_nms(device, dtype):
    rng = np.random.default_rng(70)
    xy = rng.uniform(0, 50, (60, 2))
    wh = rng.uniform(1, 20, (60, 2))
    boxes = np.concatenate([xy, xy + wh], 1)
    scores = rng.uniform(0, 1, 60)
    scores[10] = scores[20]  # a tie: the lower index first
    for thr in (0.0, 0.3, 0.7):
        _both(lambda b, s: detection.nms(b, s, thr), device, boxes, scores, dtype=dtype, tol={})
    _both(lambda b, s: detection.nms(b, s, 0.5), device, np.zeros((0, 4)), np.zeros(0),
          dtype=dtype, tol={})
