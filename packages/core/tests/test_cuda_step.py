"""The cuda backend's training-step kernels (fiamma/_backend/xp/cuda_step.py): ReLU's backward
in one launch for float32/float64/bfloat16/float16 (bits equal ``where(y <= 0, 0, g)``), and
GELU forward/backward on 16-bit data as it is (bits equal the widened float32 path's, every
16-bit pattern). Each op is served by its kernel (``fast_path_calls``) and none failed to build
(``fast_path_errors``).

Runs on devices whose backend has the kernels (cuda on a GPU; the CPU emulation of
tools/cuda_emu); skipped elsewhere."""

import numpy as np
import pytest

import fiamma
from fiamma import _backend


@pytest.fixture
def be(device):
    b = _backend.backend_for(fiamma.device(device))
    if not hasattr(b, "gelu_native"):
        pytest.skip(f"the {device} backend has no training-step kernels of its own")
    return b


def _served(b, name, before):
    assert not b.fast_path_errors, b.fast_path_errors
    assert b.fast_path_calls.get(name, 0) > before, (name, b.fast_path_calls)


def _bits(t):
    n = t.dtype.itemsize
    view = {2: fiamma.int16, 4: fiamma.int32, 8: fiamma.int64}[n]
    return t.cpu().view(view).numpy()


LOWP = [fiamma.bfloat16, fiamma.float16]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64] + LOWP)
def test_relu_backward_one_launch(be, device, dtype):
    rng = np.random.default_rng(0)
    y = fiamma.from_numpy(rng.standard_normal(3000)).to(dtype)
    y[::7] = 0.0
    y[::11] = float("nan")
    y[::13] = -0.0
    g = fiamma.from_numpy(rng.standard_normal(3000)).to(dtype)
    g[::17] = float("nan")
    want = fiamma.where(y <= 0, 0.0, g)  # a NaN output passes its gradient (PyTorch)
    before = be.fast_path_calls.get("relu_bwd", 0)
    got = fiamma.relu_backward(g.to(device), y.to(device))
    _served(be, "relu_bwd", before)
    assert got.dtype == dtype
    assert np.array_equal(_bits(got), _bits(want))
    # through autograd: ReLU's formula is relu_backward
    x = y.to(device).requires_grad_()
    before = be.fast_path_calls.get("relu_bwd", 0)
    fiamma.relu(x).backward(g.to(device))
    _served(be, "relu_bwd", before)
    assert np.array_equal(_bits(x.grad), _bits(want))


def _patterns():
    return fiamma.from_numpy(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
                             .view(np.int16).copy())


@pytest.mark.slow
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", LOWP)
def test_gelu_16bit_every_pattern(be, device, dtype, approximate, monkeypatch):
    x = _patterns().view(dtype).to(device)
    g = _patterns().flip(0).view(dtype).to(device)
    before = be.fast_path_calls.get("gelu_s", 0)
    y = fiamma.gelu(x, approximate)
    d = fiamma.gelu_backward(g, x, approximate)
    assert be.fast_path_calls.get("gelu_s", 0) == before + 2
    assert not be.fast_path_errors, be.fast_path_errors
    monkeypatch.setattr(type(be), "gelu_native", lambda self, dt: False)
    y0 = fiamma.gelu(x, approximate)  # widened: float32 through the same kernels, rounded
    d0 = fiamma.gelu_backward(g, x, approximate)
    assert be.fast_path_calls.get("gelu_s", 0) == before + 4
    for got, want in ((y, y0), (d, d0)):
        assert got.dtype == dtype
        a, b = _bits(got), _bits(want)
        nan = np.isnan(want.cpu().float().numpy())
        assert np.isnan(got.cpu().float().numpy()[nan]).all()
        assert np.array_equal(a[~nan], b[~nan])


@pytest.mark.parametrize("dtype", LOWP)
def test_gelu_16bit_autograd_and_strided(be, device, dtype):
    rng = np.random.default_rng(1)
    base = fiamma.from_numpy(rng.standard_normal((6, 40)).astype(np.float32)).to(dtype)
    x = base.to(device).t().requires_grad_()  # not contiguous: copied, then the kernel
    before = be.fast_path_calls.get("gelu_s", 0)
    y = fiamma.nn.functional.gelu(x) if hasattr(fiamma, "nn") else fiamma.gelu(x)
    y.backward(fiamma.ones_like(y))
    assert be.fast_path_calls.get("gelu_s", 0) == before + 2
    xf = base.t().double()
    want_y = fiamma.gelu(xf)
    want_g = fiamma.gelu_backward(fiamma.ones_like(xf), xf)
    tol = 1e-2 if dtype == fiamma.bfloat16 else 2e-3
    assert fiamma.allclose(y.cpu().double(), want_y, rtol=tol, atol=tol)
    assert fiamma.allclose(x.grad.cpu().double(), want_g, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64] + LOWP)
def test_addmm_bias_rows(be, device, dtype):
    rng = np.random.default_rng(2)
    x = fiamma.from_numpy(rng.standard_normal((5, 7)).astype(np.float32)).to(dtype)
    w = fiamma.from_numpy(rng.standard_normal((3, 7)).astype(np.float32)).to(dtype)
    bias = fiamma.from_numpy(rng.standard_normal(3).astype(np.float32)).to(dtype)
    before = be.fast_path_calls.get("bias_rows", 0)
    got = fiamma.addmm(bias.to(device), x.to(device), w.to(device).t())
    _served(be, "bias_rows", before)
    want = fiamma.addmm(bias.double(), x.double(), w.double().t())
    tol = 1e-12 if dtype == fiamma.float64 else (1e-5 if dtype == fiamma.float32 else 3e-2)
    assert got.dtype == dtype
    assert fiamma.allclose(got.cpu().double(), want, rtol=tol, atol=tol)
    # with gradients: the bias gradient is the column sum of the output gradient
    xb = x.to(device).requires_grad_()
    bb = bias.to(device).requires_grad_()
    fiamma.addmm(bb, xb, w.to(device).t()).sum().backward()
    assert bb.grad.cpu().double().tolist() == [5.0, 5.0, 5.0]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("kw", [{}, {"ignore_index": 1}, {"label_smoothing": 0.2},
                                {"weight": True, "ignore_index": 2, "label_smoothing": 0.1}])
def test_cross_entropy_mean_on_device(be, device, dtype, kw):
    rng = np.random.default_rng(3)
    x = fiamma.from_numpy(rng.standard_normal((37, 5))).to(dtype)
    t = fiamma.from_numpy(rng.integers(0, 5, 37))
    kw = dict(kw)
    w = fiamma.from_numpy(rng.uniform(0.5, 2.0, 5)).to(dtype) if kw.pop("weight", 0) else None
    F = fiamma.nn.functional
    xr = x.clone().requires_grad_()
    want = F.cross_entropy(xr, t, weight=w, **kw)
    want.backward()
    xd = x.to(device).requires_grad_()
    calls = dict(be.fast_path_calls)
    got = F.cross_entropy(xd, t.to(device), weight=None if w is None else w.to(device), **kw)
    got.backward()
    assert not be.fast_path_errors, be.fast_path_errors
    assert be.fast_path_calls.get("xent_mean", 0) == calls.get("xent_mean", 0) + 1
    if "ignore_index" in kw or w is not None:  # the gradient's scale computed on the device
        assert be.fast_path_calls.get("xent_gscale", 0) == calls.get("xent_gscale", 0) + 1
    tol = 1e-12 if dtype == fiamma.float64 else 1e-5
    assert abs(got.item() - want.item()) <= tol * max(1.0, abs(want.item()))
    assert fiamma.allclose(xd.grad.cpu(), xr.grad, rtol=tol, atol=tol)


def test_cross_entropy_mean_all_ignored(be, device):
    x = fiamma.randn(3, 4, device=device, requires_grad=True)
    t = fiamma.tensor([1, 1, 1], device=device)
    loss = fiamma.nn.functional.cross_entropy(x, t, ignore_index=1)
    loss.backward()
    assert np.isnan(loss.item())
    # no row is kept: every row's gradient is zero (as on the CPU, and PyTorch)
    xc = x.detach().cpu().requires_grad_()
    fiamma.nn.functional.cross_entropy(xc, t.cpu(), ignore_index=1).backward()
    assert x.grad.cpu().tolist() == xc.grad.tolist() == [[0.0] * 4] * 3


_POOLS = [
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", dict(kernel_size=2, stride=2, ceil_mode=True, count_include_pad=False)),
    ("avg_pool2d", dict(kernel_size=(3, 2), stride=1, padding=(1, 0), divisor_override=5)),
    ("adaptive_avg_pool2d", dict(output_size=1)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 5))),
    ("avg_pool1d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("adaptive_avg_pool3d", dict(output_size=(2, 1, 3))),
]


def _pool_input(name, dtype, layout):
    rng = np.random.default_rng(4)
    nd = int(name[-2])
    shape = (2, 3) + (5, 7, 6)[3 - nd:]
    x = fiamma.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    return x, nd


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64] + LOWP)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("case", range(len(_POOLS)))
def test_avg_pools_one_launch(be, device, dtype, layout, case):
    name, kw = _POOLS[case]
    x, nd = _pool_input(name, dtype, layout)
    fn = getattr(fiamma.nn.functional, name)
    xd = x.to(device)
    if layout == "strided":  # channels-last storage, or a spatial slice
        xd = xd.movedim(1, -1).contiguous().movedim(-1, 1) if nd == 2 else xd[..., ::-1]
        x = x[..., ::-1] if nd != 2 else x
    xd.requires_grad_()
    xc = x.clone().requires_grad_()
    calls = dict(be.fast_path_calls)
    got = fn(xd, **kw)
    want = fn(xc, **kw)
    g = fiamma.from_numpy(np.random.default_rng(5).standard_normal(tuple(want.shape))
                          .astype(np.float32)).to(dtype)
    got.backward(g.to(device))
    want.backward(g)
    assert not be.fast_path_errors, be.fast_path_errors
    for path in ("avgpool", "avgpool_bwd"):
        assert be.fast_path_calls.get(path, 0) == calls.get(path, 0) + 1, path
    tol = {fiamma.float64: 1e-12, fiamma.float32: 1e-5}.get(dtype, 1e-2)
    for a, b in ((got, want), (xd.grad, xc.grad)):
        assert a.dtype == dtype and tuple(a.shape) == tuple(b.shape)
        assert fiamma.allclose(a.cpu().double(), b.double(), rtol=tol, atol=tol)


_GLOBAL = [
    ("adaptive_avg_pool2d", dict(output_size=1), (2, 3, 40, 33)),
    ("adaptive_avg_pool2d", dict(output_size=(1, 1)), (1, 2, 16, 16)),  # exactly the threshold
    ("avg_pool2d", dict(kernel_size=(30, 20)), (3, 2, 30, 20)),
    ("avg_pool2d", dict(kernel_size=(30, 20), divisor_override=7), (1, 2, 30, 20)),
    ("adaptive_avg_pool1d", dict(output_size=1), (2, 3, 1000)),
    ("adaptive_avg_pool3d", dict(output_size=1), (1, 3, 7, 8, 9)),
]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64] + LOWP)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("case", range(len(_GLOBAL)))
def test_global_avg_pool_block_reduction(be, device, dtype, layout, case):
    """Global average pooling of planes of >= 256 elements: one block a plane (its sum in
    double, so within one rounding of the float64 mean), the backward the one-launch
    broadcast; channels-last or sliced inputs read through their strides."""
    name, kw, shape = _GLOBAL[case]
    rng = np.random.default_rng(case)
    a = rng.standard_normal(shape) * 3 + 1  # a mean away from 0: relative errors are meaningful
    x = fiamma.from_numpy(a).to(dtype)
    fn = getattr(fiamma.nn.functional, name)
    xd = x.to(device)
    if layout == "strided":
        xd = xd.movedim(1, -1).contiguous().movedim(-1, 1)
    xd.requires_grad_()
    xc = x.clone().requires_grad_()
    calls = dict(be.fast_path_calls)
    got = fn(xd, **kw)
    want = fn(xc, **kw)
    g = fiamma.from_numpy(rng.standard_normal(tuple(want.shape))).to(dtype)
    got.backward(g.to(device))
    want.backward(g)
    assert not be.fast_path_errors, be.fast_path_errors
    assert be.fast_path_calls.get("avgpool_glob", 0) == calls.get("avgpool_glob", 0) + 1
    assert be.fast_path_calls.get("avgpool", 0) == calls.get("avgpool", 0)
    assert be.fast_path_calls.get("avgpool_bwd", 0) == calls.get("avgpool_bwd", 0) + 1
    # the float64 mean of the stored values, rounded once to the dtype (within one unit; a
    # float64 result within the double sum's own rounding)
    xs = x.double().numpy().reshape(shape[0], shape[1], -1)
    ref = xs.sum(-1) / kw.get("divisor_override", xs.shape[-1])
    eps = {fiamma.float64: 2.0 ** -44, fiamma.float32: 2.0 ** -23,
           fiamma.bfloat16: 2.0 ** -7, fiamma.float16: 2.0 ** -10}[dtype]
    gd = got.detach().cpu().double().numpy().reshape(ref.shape)
    assert got.dtype == dtype and tuple(got.shape) == tuple(want.shape)
    assert np.all(np.abs(gd - ref) <= eps * np.abs(ref) + 1e-300), np.abs(gd - ref).max()
    tol = {fiamma.float64: 1e-12, fiamma.float32: 1e-5}.get(dtype, 1e-2)
    assert fiamma.allclose(got.detach().cpu().double(), want.detach().double(), rtol=tol,
                           atol=tol)
    assert xd.grad.dtype == dtype
    assert fiamma.allclose(xd.grad.cpu().double(), xc.grad.double(), rtol=tol, atol=tol)


def test_global_avg_pool_small_planes_keep_thread_kernel(be, device):
    """Planes under the threshold (ResNet's 7x7) stay on the thread-per-output kernel."""
    x = fiamma.randn(4, 8, 7, 7, device=device)
    calls = dict(be.fast_path_calls)
    y = fiamma.nn.functional.adaptive_avg_pool2d(x, 1)
    assert be.fast_path_calls.get("avgpool", 0) == calls.get("avgpool", 0) + 1
    assert be.fast_path_calls.get("avgpool_glob", 0) == calls.get("avgpool_glob", 0)
    assert fiamma.allclose(y.cpu(), x.cpu().mean((2, 3), keepdim=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("shape", [(20, 7), (300, 70), (40, 3, 5)])
def test_column_sums_one_launch(be, device, dtype, shape):
    rng = np.random.default_rng(6)
    a = rng.standard_normal(shape)
    x = fiamma.from_numpy(a).to(dtype)
    for rep in range(2):  # the tiles' counters are left at zero for the next launch
        before = be.fast_path_calls.get("colsum1", 0)
        s = x.to(device).sum(0)
        m = x.to(device).mean(0)
        assert be.fast_path_calls.get("colsum1", 0) == before + 2
        assert not be.fast_path_errors, be.fast_path_errors
        tol = 1e-12 if dtype == fiamma.float64 else 1e-5
        assert np.allclose(s.cpu().numpy(), a.sum(0), rtol=tol, atol=tol)
        assert np.allclose(m.cpu().numpy(), a.mean(0), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_relu_forward_one_launch(be, device, dtype):
    x = fiamma.tensor([-1.0, -0.0, 0.0, 2.5, float("nan"), float("-inf"), float("inf")],
                      dtype=dtype)
    before = be.fast_path_calls.get("relu", 0)
    y = fiamma.relu(x.to(device))
    xi = x.to(device)
    xi.relu_()  # in place: the same memory in and out
    assert be.fast_path_calls.get("relu", 0) == before + 2
    want = fiamma.relu(x)
    assert np.array_equal(_bits(y), _bits(want)) and np.array_equal(_bits(xi), _bits(want))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_from_pointers(be, device, approximate, monkeypatch):
    """float32 GELU takes the same kernels (one launch each way, no array views), bit for bit
    the elementwise kernel's arithmetic (cuda_kernels.py)."""
    rng = np.random.default_rng(7)
    x = fiamma.from_numpy(np.concatenate([rng.standard_normal(500) * 6,
                                          [0.0, -0.0, 20.0, -20.0, np.inf, -np.inf, np.nan]])
                          .astype(np.float32)).to(device)
    g = fiamma.from_numpy(rng.standard_normal(507).astype(np.float32)).to(device)
    before = be.fast_path_calls.get("gelu_s", 0)
    y, d = fiamma.gelu(x, approximate), fiamma.gelu_backward(g, x, approximate)
    assert be.fast_path_calls.get("gelu_s", 0) == before + 2
    monkeypatch.setitem(be.fast_path_errors, "gelu_s", "off (test)")
    e0 = be.fast_path_calls.get("gelu_fwd", 0)
    y0, d0 = fiamma.gelu(x, approximate), fiamma.gelu_backward(g, x, approximate)
    assert be.fast_path_calls.get("gelu_fwd", 0) == e0 + 1  # the elementwise kernel served
    for a, b in ((y, y0), (d, d0)):
        assert np.array_equal(a.cpu().numpy(), b.cpu().numpy(), equal_nan=True)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("M,K", [(12, 9), (300, 70)])
@pytest.mark.parametrize("rms", [False, True])
def test_norm_weight_grads_one_launch(be, device, dtype, M, K, rms):
    rng = np.random.default_rng(8)
    x = fiamma.from_numpy(rng.standard_normal((M, K))).to(dtype)
    w = fiamma.from_numpy(rng.uniform(0.5, 1.5, K)).to(dtype)
    b = fiamma.from_numpy(rng.standard_normal(K)).to(dtype)
    g = fiamma.from_numpy(rng.standard_normal((M, K))).to(dtype)
    F = fiamma.nn.functional
    res = []
    for dev in ("cpu", device):
        ps = [t.detach().clone().to(dev).requires_grad_() for t in (x, w, b)]
        y = F.rms_norm(ps[0], (K,), ps[1]) if rms else F.layer_norm(ps[0], (K,), ps[1], ps[2])
        before = be.fast_path_calls.get("row_norm_wb1", 0)
        y.backward(g.to(dev))
        if dev == device:
            assert be.fast_path_calls.get("row_norm_wb1", 0) == before + 1
        res.append([p.grad for p in ps[:2 if rms else 3]])
    assert not be.fast_path_errors, be.fast_path_errors
    tol = 1e-10 if dtype == fiamma.float64 else 1e-4
    for a, r in zip(res[1], res[0]):
        assert fiamma.allclose(a.cpu(), r, rtol=tol, atol=tol)


ACTS = [("silu", ()), ("leaky_relu", (0.2,)), ("elu", (1.0, 1.0, 1.0)),
        ("elu", (1.6732632423543772, 1.0507009873554805, 1.0)), ("elu", (2.0, 1.0, 0.5)),
        ("hardswish", ()), ("hardsigmoid", ()), ("softplus", (2.0, 5.0)), ("mish", ()),
        ("log_sigmoid", ()), ("hardtanh", (0.0, 6.0)), ("softshrink", (0.5,)),
        ("hardshrink", (1.0,)), ("threshold", (0.1, -3.0))]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("name,p", ACTS)
def test_fused_activations_one_launch(be, device, dtype, name, p):
    """fiamma.fused.activation / activation_backward on the device: one launch each, the CPU
    kernels' values (to the device math's rounding), NaN and the branch points included."""
    from fiamma import fused

    rng = np.random.default_rng(5)
    x = rng.uniform(-8, 8, 2000)
    x[:12] = [0.0, -0.0, 3.0, -3.0, 0.5, -0.5, 1.0, -1.0, 6.0, 0.1, np.nan, 2.5]
    xc = fiamma.from_numpy(x).to(dtype)
    gc = fiamma.from_numpy(rng.standard_normal(2000)).to(dtype)
    before = be.fast_path_calls.get("act", 0)
    y = fused.activation(name, xc.to(device), *p)
    d = fused.activation_backward(name, gc.to(device), xc.to(device), *p)
    _served(be, "act", before + 1)
    tol = 2e-6 if dtype is fiamma.float32 else 1e-13
    np.testing.assert_allclose(y.cpu().numpy(), fused.activation(name, xc, *p).numpy(),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(d.cpu().numpy(),
                               fused.activation_backward(name, gc, xc, *p).numpy(),
                               rtol=4 * tol, atol=4 * tol)


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_sigmoid_tanh_backward_one_launch(be, device, name):
    from fiamma import fused

    rng = np.random.default_rng(6)
    y = fiamma.from_numpy(rng.uniform(-1, 1, 500).astype(np.float32))
    g = fiamma.from_numpy(rng.standard_normal(500).astype(np.float32))
    before = be.fast_path_calls.get("act", 0)
    got = fused.activation_backward(name, g.to(device), y.to(device))
    _served(be, "act", before)
    np.testing.assert_allclose(got.cpu().numpy(), fused.activation_backward(name, g, y).numpy(),
                               rtol=1e-6, atol=1e-7)


_LOSSES = [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", dict(beta=0.5)),
    ("huber_loss", dict(delta=0.7)), ("binary_cross_entropy", {}),
    ("binary_cross_entropy", dict(weight="w")),
    ("binary_cross_entropy_with_logits", {}),
    ("binary_cross_entropy_with_logits", dict(weight="w", pos_weight="pw")),
    ("soft_margin_loss", {}), ("kl_div", {}), ("kl_div", dict(log_target=True)),
]


def _loss_args(name, kw, dtype, rng, shape):
    x = rng.standard_normal(shape)
    t = rng.standard_normal(shape)
    if name == "binary_cross_entropy":
        x, t = 1 / (1 + np.exp(-x)), rng.random(shape)
        x.flat[:3] = [0.0, 1.0, 1e-30]  # the log clamps at -100 and the gradient's floor
    elif name == "soft_margin_loss":
        t = np.sign(t)
    elif name == "kl_div" and not kw.get("log_target"):
        t = rng.random(shape)
        t.flat[0] = 0.0  # 0 log 0 = 0
    out = {k: v for k, v in kw.items() if v not in ("w", "pw")}
    for k in ("weight", "pos_weight"):
        if kw.get(k):
            out[k] = fiamma.from_numpy(rng.random(shape[-1:]) + 0.5).to(dtype)
    return (fiamma.from_numpy(x).to(dtype), fiamma.from_numpy(t).to(dtype)), out


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # kl_div's mean
@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", range(len(_LOSSES)))
def test_fused_losses_on_kernels(be, device, dtype, reduction, case):
    """core's fused losses take the cuda kernels (fm_loss_fwd + fm_loss_total, fm_loss_bwd: two
    launches forward for a reduction, one backward) and equal the CPU's csrc/losses.c within
    float rounding, gradients of the input and the target included."""
    name, kw = _LOSSES[case]
    rng = np.random.default_rng(case)
    (x, t), kw = _loss_args(name, kw, dtype, rng, (37, 29))
    fn = getattr(fiamma.nn.functional, name)
    xd, td = x.to(device).requires_grad_(), t.to(device).requires_grad_()
    xc, tc = x.clone().requires_grad_(), t.clone().requires_grad_()
    kwd = {k: (v.to(device) if isinstance(v, fiamma.Tensor) else v) for k, v in kw.items()}
    calls = dict(be.fast_path_calls)
    got = fn(xd, td, reduction=reduction, **kwd)
    want = fn(xc, tc, reduction=reduction, **kw)
    g = fiamma.from_numpy(rng.standard_normal(tuple(want.shape))).to(dtype)
    got.backward(g.to(device))
    want.backward(g)
    assert not be.fast_path_errors, be.fast_path_errors
    assert be.fast_path_calls.get("loss_fwd", 0) == calls.get("loss_fwd", 0) + 1
    assert be.fast_path_calls.get("loss_bwd", 0) == calls.get("loss_bwd", 0) + 1
    tol = 1e-12 if dtype == fiamma.float64 else 2e-5
    for a, b in ((got, want), (xd.grad, xc.grad), (td.grad, tc.grad)):
        assert a.dtype == dtype and tuple(a.shape) == tuple(b.shape)
        a, b = a.detach().cpu().double().numpy(), b.detach().double().numpy()
        fin = np.isfinite(b)  # (kl_div's target gradient at t = 0 is -inf)
        assert np.array_equal(np.isfinite(a), fin)
        assert np.array_equal(a[~fin], b[~fin], equal_nan=True)
        top = max(1.0, np.abs(b[fin]).max()) if fin.any() else 1.0
        assert np.allclose(a[fin], b[fin], rtol=tol, atol=tol * top), np.abs(a - b)[fin].max()


def test_fused_loss_edges_on_kernels(be, device):
    """BCE's range error (the flag read back), a NaN through l1's sign (0 gradient), the mean
    of no elements (NaN), bfloat16 operands (computed in float32, rounded once)."""
    F = fiamma.nn.functional
    with pytest.raises(RuntimeError, match="input should be between 0 and 1"):
        F.binary_cross_entropy(fiamma.tensor([0.5, 1.5], device=device),
                               fiamma.tensor([0.0, 1.0], device=device))
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        F.binary_cross_entropy(fiamma.tensor([0.5, 0.5], device=device),
                               fiamma.tensor([0.0, float("nan")], device=device))
    x = fiamma.tensor([1.0, float("nan"), -2.0], device=device, requires_grad=True)
    F.l1_loss(x, fiamma.zeros(3, device=device), reduction="sum").backward()
    assert x.grad.cpu().tolist() == [1.0, 0.0, -1.0]
    e = F.mse_loss(fiamma.zeros(0, device=device), fiamma.zeros(0, device=device))
    assert np.isnan(e.item())
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(500), rng.standard_normal(500)
    xb = fiamma.from_numpy(a).to(fiamma.bfloat16)
    tb = fiamma.from_numpy(b).to(fiamma.bfloat16)
    got = F.smooth_l1_loss(xb.to(device), tb.to(device))
    assert got.dtype == fiamma.bfloat16
    assert got.cpu().float().item() == F.smooth_l1_loss(xb, tb).float().item()


@pytest.mark.parametrize("dtype", [fiamma.int32, fiamma.int64])
def test_int_scalar_ops_one_launch(be, device, dtype):
    """An int32/int64 tensor + - * a Python int (batch norm's num_batches_tracked += 1): one
    launch each, wrapping as the CPU backend (the number wraps to the dtype's width too), in
    place included; a bool number reaches the backend as the int 1 (the kernel serves it); a
    float number (a float result) and a transposed operand stay generic."""
    info = np.iinfo(np.int32 if dtype == fiamma.int32 else np.int64)
    a = np.array([0, 1, -1, 7, info.max, info.min, 123456789, -98765], dtype=info.dtype)
    x = fiamma.from_numpy(a.copy())
    xd = x.to(device)
    big = (1 << 40) + 5  # wraps to the dtype's width (int32: 5)
    c0 = be.fast_path_calls.get("int_scalar", 0)
    got = [xd + 1, xd - 3, 3 - xd, xd * -7, 2 * xd, xd + big, xd * big]
    want = [x + 1, x - 3, 3 - x, x * -7, 2 * x, x + big, x * big]
    assert be.fast_path_calls.get("int_scalar", 0) == c0 + len(got)
    assert not be.fast_path_errors, be.fast_path_errors
    for g, w in zip(got, want):
        assert g.dtype == dtype and g.cpu().tolist() == w.tolist()
    y = xd.clone()
    y += 1  # in place
    assert y.cpu().tolist() == (x + 1).tolist()
    assert be.fast_path_calls.get("int_scalar", 0) == c0 + len(got) + 1
    n0 = be.fast_path_calls.get("int_scalar", 0)
    assert (xd + True).cpu().tolist() == (x + True).tolist()
    assert (xd + 0.5).cpu().tolist() == (x + 0.5).tolist()
    m = xd.reshape(2, 4)
    assert (m.t() + 1).cpu().tolist() == (x.reshape(2, 4).t() + 1).tolist()
    assert be.fast_path_calls.get("int_scalar", 0) == n0 + 1  # the bool only


_MAXPOOLS = [
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1), (2, 3, 12, 11)),  # ResNet's
    ("max_pool2d", dict(kernel_size=2, stride=2), (2, 3, 8, 8)),
    ("max_pool2d", dict(kernel_size=3, stride=1, padding=1, dilation=2), (1, 2, 9, 7)),
    ("max_pool2d", dict(kernel_size=3, stride=2, ceil_mode=True), (1, 2, 10, 9)),
    ("max_pool1d", dict(kernel_size=4, stride=3, padding=2), (2, 3, 20)),
    ("max_pool3d", dict(kernel_size=(2, 3, 3), stride=2, padding=1), (1, 2, 5, 6, 7)),
]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64] + LOWP)
@pytest.mark.parametrize("case", range(len(_MAXPOOLS)))
def test_max_pool_backward_gather(be, device, dtype, case):
    """The max-pool backward of the pool's own indices is one gather launch (no scatter, no
    zeroed accumulator): the same bits as the CPU's scatter (its order of additions), ties
    shared by overlapping windows included; every float dtype."""
    name, kw, shape = _MAXPOOLS[case]
    rng = np.random.default_rng(case)
    a = rng.standard_normal(shape)
    a.reshape(-1)[: a.size // 3] = 1.5  # ties: windows share their first maximum
    x = fiamma.from_numpy(a).to(dtype)
    fn = getattr(fiamma.nn.functional, name)
    xd, xc = x.to(device).requires_grad_(), x.clone().requires_grad_()
    yd, yc = fn(xd, **kw), fn(xc, **kw)
    g = fiamma.from_numpy(rng.standard_normal(tuple(yc.shape))).to(dtype)
    calls = dict(be.fast_path_calls)
    yd.backward(g.to(device))
    yc.backward(g)
    assert not be.fast_path_errors, be.fast_path_errors
    assert be.fast_path_calls.get("maxpool_bwd", 0) == calls.get("maxpool_bwd", 0) + 1
    for other in ("pool_scatter", "pool_lp"):
        assert be.fast_path_calls.get(other, 0) == calls.get(other, 0), other
    assert np.array_equal(_bits(xd.grad), _bits(xc.grad))


def test_max_pool_backward_gather_declines(be, device):
    """Indices written in place since the pool, an empty window (its index the clamped start,
    outside the gather's windows) and max_unpool keep the checked scatter."""
    F = fiamma.nn.functional
    x = fiamma.randn(1, 2, 6, 6, device=device)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    g = fiamma.randn(*y.shape, device=device)
    idx2 = idx.clone()
    n0 = be.fast_path_calls.get("maxpool_bwd", 0)
    gi = fiamma.max_pool_backward(g, idx2, (6, 6))  # a copy: no note, the scatter
    idx.add_(0)  # written in place: the note dropped
    gi2 = fiamma.max_pool_backward(g, idx, (6, 6))
    assert be.fast_path_calls.get("maxpool_bwd", 0) == n0
    ref = fiamma.max_pool_backward(g.cpu(), idx.cpu(), (6, 6))
    assert np.array_equal(_bits(gi), _bits(ref)) and np.array_equal(_bits(gi2), _bits(ref))
    # k 2, dilation 3, padding 1 on 2x2: the one window's taps (-1, 2) miss the plane
    e = fiamma.randn(1, 1, 2, 2, device=device).requires_grad_()
    ye = F.max_pool2d(e, 2, 1, 1, 3)
    ye.backward(fiamma.ones_like(ye))
    ec = e.detach().cpu().requires_grad_()
    F.max_pool2d(ec, 2, 1, 1, 3).backward(fiamma.ones(ye.shape))
    assert be.fast_path_calls.get("maxpool_bwd", 0) == n0
    assert np.array_equal(_bits(e.grad), _bits(ec.grad))
    assert not be.fast_path_errors, be.fast_path_errors
