"""fiamma.fused.loss / loss_backward (csrc/losses.c fm_loss_fwd/_bwd): every loss against a
float64 NumPy reference of PyTorch's formulas, for each reduction, in float32/float64 (and
float16/bfloat16, computed in float32 and rounded once), contiguous or not, broadcast, with
weights read in place or expanded, at the edge values (BCE at 0 and 1, huge logits, branch
boundaries, NaN), empty; the composed path of a backend without the kernels (the NumPy
reference device) against the kernels; and the argument checks. (Autograd through these:
fiamma-nn's test_fused_losses_nn.py.)"""

import numpy as np
import pytest

import fiamma
from fiamma import fused

EPS = float(np.float32(1e-12))


def _sig(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _sp(z):
    return np.logaddexp(0.0, z)


def ref(name, x, t, w=None, pw=None, p=0.0):
    """(elementwise loss, dloss/dx, dloss/dt) in float64, PyTorch's formulas."""
    with np.errstate(all="ignore"):
        d = x - t
        if name == "mse_loss":
            out = d * d, 2 * d, -2 * d
        elif name == "l1_loss":
            s = np.sign(np.nan_to_num(d))  # PyTorch's sign(NaN) gradient is 0
            out = np.abs(d), s, -s
        elif name == "smooth_l1_loss":
            a = np.abs(d)
            s = np.where(d < -p, -1.0, np.where(d > p, 1.0, d / p))
            out = np.where(a < p, 0.5 * a * a / p, a - 0.5 * p), s, -s
        elif name == "huber_loss":
            a = np.abs(d)
            s = np.where(d < -p, -p, np.where(d > p, p, d))
            out = np.where(a <= p, 0.5 * a * a, p * (a - 0.5 * p)), s, -s
        elif name == "binary_cross_entropy":
            lx = np.maximum(np.log(x), -100)
            l1x = np.maximum(np.log1p(-x), -100)
            out = ((t - 1) * l1x - t * lx, (x - t) / np.maximum(x * (1 - x), EPS), l1x - lx)
        elif name == "binary_cross_entropy_with_logits":
            pwv = 1.0 if pw is None else pw
            lw = 1 + (pwv - 1) * t
            out = ((1 - t) * x + lw * _sp(-x), lw * _sig(x) - pwv * t,
                   (pwv - 1) * _sp(-x) - x)
        elif name == "soft_margin_loss":
            q = _sig(-t * x)
            out = _sp(-t * x), -t * q, -x * q
        elif name == "kl_div" and not p:
            tl = np.where(t == 0, 0.0, t * np.log(t))
            out = tl - t * x, -t + 0 * x, np.log(t) + 1 - x
        else:  # kl_div, log target
            e = np.exp(t)
            out = e * (t - x), -e + 0 * x, e * (t - x + 1)
    if w is not None:
        out = tuple(o * w for o in out)
    return out


CASES = [("mse_loss", 0.0), ("l1_loss", 0.0), ("smooth_l1_loss", 1.0), ("smooth_l1_loss", 0.3),
         ("huber_loss", 1.0), ("huber_loss", 2.5), ("binary_cross_entropy", 0.0),
         ("binary_cross_entropy_with_logits", 0.0), ("soft_margin_loss", 0.0),
         ("kl_div", 0.0), ("kl_div", 1.0)]


def _data(name, rng, shape):
    x = rng.standard_normal(shape) * 3
    t = rng.standard_normal(shape) * 3
    if name == "binary_cross_entropy":
        x = rng.uniform(0.01, 0.99, shape)
        t = rng.uniform(0, 1, shape)
    elif name == "binary_cross_entropy_with_logits":
        t = rng.uniform(0, 1, shape)
    elif name == "soft_margin_loss":
        t = np.sign(t)
    elif name == "kl_div":
        t = rng.uniform(0.01, 1.0, shape)
    return x, t


def _reduce(v, reduction):
    return v.mean() if reduction == "mean" else v.sum() if reduction == "sum" else v


def _check(name, p, x, t, w=None, pw=None, reduction="mean", dtype=fiamma.float64, rtol=1e-12,
           atol=1e-14, xs=None, ts=None):
    """fused.loss and loss_backward on the arrays (as dtype; xs/ts: the tensors to pass
    instead, e.g. non-contiguous views) against the reference from the dtype-rounded values."""
    xt = xs if xs is not None else fiamma.tensor(x, dtype=dtype)
    tt = ts if ts is not None else fiamma.tensor(t, dtype=dtype)
    wt = None if w is None else fiamma.tensor(w, dtype=dtype)
    pt = None if pw is None else fiamma.tensor(pw, dtype=dtype)
    # the reference sees the values as rounded to the dtype
    xr, tr = (xt.double().numpy(), tt.double().numpy())
    wr = None if wt is None else wt.double().numpy()
    pr = None if pt is None else pt.double().numpy()
    v, gx, gt = ref(name, xr, tr, wr, pr, p)
    v, gx, gt = np.broadcast_arrays(v, gx, gt)
    out = fused.loss(name, xt, tt, wt, pt, reduction=reduction, param=p)
    assert out.dtype is dtype
    want = _reduce(v, reduction)
    np.testing.assert_allclose(out.double().numpy(), want, rtol=rtol, atol=atol)
    g = np.random.default_rng(5).uniform(0.5, 1.5, v.shape)
    gtensor = fiamma.tensor(g, dtype=dtype) if reduction == "none" else fiamma.tensor(
        1.5, dtype=dtype)
    rng_grad = gtensor.double().numpy()
    scale = rng_grad / v.size if reduction == "mean" else rng_grad
    ax, at = fused.loss_backward(name, gtensor, xt, tt, wt, pt, reduction=reduction, param=p)
    np.testing.assert_allclose(ax.double().numpy(), scale * gx, rtol=rtol, atol=atol)
    np.testing.assert_allclose(at.double().numpy(), scale * gt, rtol=rtol, atol=atol)
    return out, ax, at


@pytest.mark.parametrize("name,p", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loss_values_and_gradients(name, p, reduction, dtype):
    rng = np.random.default_rng(0)
    # 1100 elements: more than one of the kernel's blocks, with a tail
    x, t = _data(name, rng, (44, 25))
    if dtype == "float64":
        _check(name, p, x, t, reduction=reduction)
    else:
        _check(name, p, x, t, reduction=reduction, dtype=fiamma.float32, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["binary_cross_entropy", "binary_cross_entropy_with_logits"])
@pytest.mark.parametrize("wshape", [(25,), (1, 25), (44, 25), (44, 1), ()])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_weights_in_place_and_expanded(name, wshape, reduction):
    rng = np.random.default_rng(1)
    x, t = _data(name, rng, (44, 25))
    w = rng.uniform(0.5, 2.0, wshape)
    pw = rng.uniform(0.5, 3.0, wshape) if name.endswith("logits") else None
    _check(name, 0.0, x, t, w, pw, reduction=reduction)


def test_pos_weight_and_weight_of_different_periods():
    rng = np.random.default_rng(2)
    x, t = _data("binary_cross_entropy_with_logits", rng, (6, 4, 7))
    for wshape, pshape in (((7,), (4, 7)), ((4, 7), (7,)), ((6, 1, 1), (7,)), ((), (4, 1))):
        w, pw = rng.uniform(0.5, 2, wshape), rng.uniform(0.5, 3, pshape)
        for reduction in ("none", "sum"):
            _check("binary_cross_entropy_with_logits", 0.0, x, t, w, pw, reduction=reduction)


@pytest.mark.parametrize("name,p", CASES)
def test_broadcast_and_non_contiguous(name, p):
    rng = np.random.default_rng(3)
    x, t = _data(name, rng, (5, 8))
    # target broadcast along the rows
    _check(name, p, x, t[:1], reduction="none")
    _check(name, p, x[:, :1], t, reduction="sum")
    # transposed and strided views
    xs = fiamma.tensor(np.ascontiguousarray(x.T)).t()
    ts = fiamma.tensor(np.repeat(t, 2, axis=1))[:, ::2]
    assert not xs.is_contiguous() and not ts.is_contiguous()
    _check(name, p, x, t, xs=xs, ts=ts, reduction="mean")
    _check(name, p, x, t, xs=xs, ts=ts, reduction="none")


@pytest.mark.parametrize("dtype", [fiamma.float16, fiamma.bfloat16])
@pytest.mark.parametrize("name,p", [("mse_loss", 0.0), ("huber_loss", 1.0),
                                    ("binary_cross_entropy", 0.0),
                                    ("binary_cross_entropy_with_logits", 0.0)])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_half_dtypes_compute_in_float32_and_round_once(dtype, name, p, reduction):
    rng = np.random.default_rng(4)
    x, t = _data(name, rng, (16, 9))
    xt, tt = fiamma.tensor(x, dtype=dtype), fiamma.tensor(t, dtype=dtype)
    out = fused.loss(name, xt, tt, reduction=reduction, param=p)
    assert out.dtype is dtype
    # the float32 result of the same (rounded) values, rounded once to the 16-bit dtype
    want = fused.loss(name, xt.float(), tt.float(), reduction=reduction, param=p).to(dtype)
    assert np.array_equal(out.float().numpy(), want.float().numpy())
    g = fiamma.ones(out.shape, dtype=dtype)
    gx, gt = fused.loss_backward(name, g, xt, tt, reduction=reduction, param=p)
    wx, wt = fused.loss_backward(name, g.float(), xt.float(), tt.float(), reduction=reduction,
                                 param=p)
    assert gx.dtype is dtype
    assert np.array_equal(gx.float().numpy(), wx.to(dtype).float().numpy())
    assert np.array_equal(gt.float().numpy(), wt.to(dtype).float().numpy())


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_at_zero_and_one_clamps_the_logs(dtype, reduction):
    x = np.array([0.0, 1.0, 1.0, 0.0, 1e-30, 1 - 1e-7, 0.5, 1e-13, 1e-7, 0.999])
    t = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.3, 1.0, 0.0, 1.0])
    rtol = 1e-12 if dtype is fiamma.float64 else 2e-6
    out, gx, gt = _check("binary_cross_entropy", 0.0, x, t, reduction=reduction, dtype=dtype,
                         rtol=rtol, atol=0)
    assert np.isfinite(gx.numpy()).all() and np.isfinite(gt.numpy()).all()
    if reduction == "none":
        assert out[0].item() == 100.0 and out[1].item() == 100.0


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_logit_losses_at_huge_and_infinite_logits(dtype):
    x = np.array([0.0, 0.0, 50.0, -50.0, 800.0, -800.0, 1e30, -1e30, np.inf, -np.inf])
    t = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5, 0.5, 1.0, 0.0])
    s = np.array([1.0, -1.0] * 5)
    xt, tt, st = (fiamma.tensor(a, dtype=dtype) for a in (x, t, s))
    f = np.isfinite(x)
    for name, tgt, tref in (("binary_cross_entropy_with_logits", tt, t),
                            ("soft_margin_loss", st, s)):
        v, gx, _ = ref(name, x, tref)
        out = fused.loss(name, xt, tgt, reduction="none")
        np.testing.assert_allclose(out.numpy()[f], v[f], rtol=1e-6)
        ax, _ = fused.loss_backward(name, fiamma.ones(10, dtype=dtype), xt, tgt,
                                    reduction="none")
        np.testing.assert_allclose(ax.numpy(), gx, rtol=1e-6, atol=1e-30)
    # pos_weight: lw sigmoid(x) - pw t
    pw = fiamma.tensor([3.0], dtype=dtype)
    v, gx, _ = ref("binary_cross_entropy_with_logits", x, t, pw=3.0)
    ax, _ = fused.loss_backward("binary_cross_entropy_with_logits", fiamma.ones(10, dtype=dtype),
                                xt, tt, None, pw, reduction="none")
    np.testing.assert_allclose(ax.numpy(), gx, rtol=1e-6, atol=1e-30)


def test_branch_boundaries():
    # smooth_l1: |d| == beta takes the linear branch, its gradient d / beta there is +-1;
    # huber: |d| == delta takes the quadratic branch
    x = np.array([1.0, -1.0, 0.5, 0.0, 2.0, -2.0])
    t = np.zeros(6)
    for name, p in (("smooth_l1_loss", 1.0), ("huber_loss", 2.0), ("smooth_l1_loss", 0.5)):
        _check(name, p, x, t, reduction="none")


def test_nan_propagates_and_l1_gradient_at_nan_is_zero():
    x = fiamma.tensor([float("nan"), 1.0])
    t = fiamma.zeros(2)
    for name, p in CASES[:6]:
        out = fused.loss(name, x, t, reduction="none", param=p)
        assert np.isnan(out[0].item()) and not np.isnan(out[1].item())
        assert np.isnan(fused.loss(name, x, t, param=p).item())
    gx, _ = fused.loss_backward("l1_loss", fiamma.ones(2), x, t, reduction="none")
    assert gx.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("name,p", CASES)
def test_empty(name, p):
    x, t = fiamma.zeros(0, 3), fiamma.zeros(0, 3)
    assert np.isnan(fused.loss(name, x, t, param=p).item())  # the mean of nothing
    assert fused.loss(name, x, t, reduction="sum", param=p).item() == 0.0
    assert fused.loss(name, x, t, reduction="none", param=p).shape == (0, 3)
    gx, gt = fused.loss_backward(name, fiamma.tensor(1.0), x, t, param=p)
    assert gx.shape == (0, 3) and gt.shape == (0, 3)


def test_large_reduction_does_not_depend_on_threads():
    # more than one OpenMP chunk: chunk sums are added in order, whatever the thread count
    rng = np.random.default_rng(6)
    x, t = _data("binary_cross_entropy_with_logits", rng, (300_000,))
    xt, tt = fiamma.tensor(x, dtype=fiamma.float32), fiamma.tensor(t, dtype=fiamma.float32)
    prev = fiamma.get_num_threads()
    try:
        vals = []
        for n in (1, 2):
            fiamma.set_num_threads(n)
            vals.append(fused.loss("binary_cross_entropy_with_logits", xt, tt).item())
    finally:
        fiamma.set_num_threads(prev)
    assert vals[0] == vals[1]
    v, _, _ = ref("binary_cross_entropy_with_logits", xt.double().numpy(), tt.double().numpy())
    np.testing.assert_allclose(vals[0], v.mean(), rtol=1e-6)


@pytest.mark.parametrize("name,p", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_composed_path_of_a_backend_without_kernels(name, p, reduction):
    """The NumPy reference device has no loss kernels: the op composes the same formulas."""
    rng = np.random.default_rng(7)
    x, t = _data(name, rng, (6, 5))
    w = rng.uniform(0.5, 2.0, (5,)) if name.startswith("binary") else None
    pw = rng.uniform(0.5, 3.0, (5,)) if name.endswith("logits") else None
    args = [fiamma.tensor(a) if a is not None else None for a in (x, t, w, pw)]
    dev = [a.to("xp") if a is not None else None for a in args]
    want = fused.loss(name, *args, reduction=reduction, param=p)
    got = fused.loss(name, *dev, reduction=reduction, param=p)
    assert got.device.type == "xp"
    np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    g = fiamma.ones(want.shape, dtype=fiamma.float64)
    wx, wt = fused.loss_backward(name, g, *args, reduction=reduction, param=p)
    gx, gt = fused.loss_backward(name, g.to("xp"), *dev, reduction=reduction, param=p)
    np.testing.assert_allclose(gx.to("cpu").numpy(), wx.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gt.to("cpu").numpy(), wt.numpy(), rtol=1e-12, atol=1e-14)


def test_argument_checks():
    x, t = fiamma.rand(3), fiamma.rand(3)
    with pytest.raises(ValueError, match="unknown loss 'nope'"):
        fused.loss("nope", x, t)
    with pytest.raises(ValueError, match="mse_loss: avg is not a valid value for reduction"):
        fused.loss("mse_loss", x, t, reduction="avg")
    with pytest.raises(TypeError, match="mse_loss: expected target to be a Tensor, got list"):
        fused.loss("mse_loss", x, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="l1_loss: expected a floating point input, got dtype"):
        fused.loss("l1_loss", fiamma.ones(3, dtype=fiamma.int64), t)
    with pytest.raises(TypeError, match="mse_loss: takes no weight"):
        fused.loss("mse_loss", x, t, weight=x)
    with pytest.raises(TypeError, match="binary_cross_entropy: takes no pos_weight"):
        fused.loss("binary_cross_entropy", x, t, pos_weight=x)
    with pytest.raises(ValueError, match="expected beta > 0"):
        fused.loss("smooth_l1_loss", x, t, param=0.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        fused.loss("huber_loss", x, t, param=-1.0)
    with pytest.raises(RuntimeError, match="must match the size of tensor"):
        fused.loss("mse_loss", x, fiamma.rand(4))
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(RuntimeError, match="input should be between 0 and 1"):
            fused.loss("binary_cross_entropy", fiamma.tensor([0.5, bad]), fiamma.rand(2))
        with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
            fused.loss("binary_cross_entropy", fiamma.rand(2), fiamma.tensor([bad, 0.5]))
    with pytest.raises(ValueError, match=r"mse_loss_backward: expected grad of shape \[\]"):
        fused.loss_backward("mse_loss", fiamma.ones(3), x, t)
    with pytest.raises(ValueError, match=r"expected grad of shape \[3\]"):
        fused.loss_backward("mse_loss", fiamma.ones(()), x, t, reduction="none")


@pytest.mark.parametrize("name,p", CASES)
def test_composed_path_broadcasts_like_the_kernels(name, p):
    rng = np.random.default_rng(8)
    x, t = _data(name, rng, (4, 5))
    for xs, ts in ((x[:, :1], t), (x, t[:1])):
        args = [fiamma.tensor(np.ascontiguousarray(a)) for a in (xs, ts)]
        want = fused.loss(name, *args, reduction="none", param=p)
        got = fused.loss(name, *(a.to("xp") for a in args), reduction="none", param=p)
        np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=1e-12)
        g = fiamma.ones(4, 5, dtype=fiamma.float64)
        wx, wt = fused.loss_backward(name, g, *args, reduction="none", param=p)
        gx, gt = fused.loss_backward(name, g.to("xp"), *(a.to("xp") for a in args),
                                     reduction="none", param=p)
        assert gx.shape == wx.shape == (4, 5) and gt.shape == wt.shape == (4, 5)
        np.testing.assert_allclose(gx.to("cpu").numpy(), wx.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gt.to("cpu").numpy(), wt.numpy(), rtol=1e-12, atol=1e-14)


def test_weight_that_enlarges_the_shape():
    # PyTorch's loss * weight broadcasts: a weight with more dimensions widens the loss
    rng = np.random.default_rng(9)
    x, t = _data("binary_cross_entropy_with_logits", rng, (4, 5))
    w = rng.uniform(0.5, 2.0, (3, 4, 5))
    for reduction in ("none", "sum"):
        out, gx, gt = _check("binary_cross_entropy_with_logits", 0.0, x, t, w,
                             reduction=reduction)
        assert gx.shape == (3, 4, 5)


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_threaded_chunks_with_weight_periods(reduction):
    # 40 000 x 7 elements: several OpenMP chunks, whose starts fall inside a weight's period
    rng = np.random.default_rng(10)
    x, t = _data("binary_cross_entropy_with_logits", rng, (40_000, 7))
    w, pw = rng.uniform(0.5, 2, (7,)), rng.uniform(0.5, 3, (7,))
    args = [fiamma.tensor(a, dtype=fiamma.float32) for a in (x, t, w, pw)]
    g = fiamma.tensor(1.0) if reduction == "sum" else fiamma.ones(40_000, 7)
    prev = fiamma.get_num_threads()
    res = []
    try:
        for n in (1, 2):
            fiamma.set_num_threads(n)
            out = fused.loss("binary_cross_entropy_with_logits", *args, reduction=reduction)
            gx, gt = fused.loss_backward("binary_cross_entropy_with_logits", g, *args,
                                         reduction=reduction)
            res.append([out.numpy(), gx.numpy(), gt.numpy()])
    finally:
        fiamma.set_num_threads(prev)
    for a, b in zip(*res):
        assert np.array_equal(a, b)
    v, dx, dt = ref("binary_cross_entropy_with_logits", *(a.double().numpy() for a in args[:2]),
                    args[2].double().numpy(), args[3].double().numpy())
    np.testing.assert_allclose(res[0][0], _reduce(v, reduction), rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(res[0][1], dx, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][2], dt, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("log_target", [0.0, 1.0])
@pytest.mark.parametrize("device", ["cpu", "xp"])
def test_kl_div_batchmean(log_target, device):
    """The sum divided by the input's first size (0-d input: the sum), one op."""
    rng = np.random.default_rng(11)
    x, t = _data("kl_div", rng, (6, 4))
    if log_target:
        t = np.log(t)
    v, gx, gt = ref("kl_div", x, t, p=log_target)
    xt, tt = fiamma.tensor(x).to(device), fiamma.tensor(t).to(device)
    out = fused.loss("kl_div", xt, tt, reduction="batchmean", param=log_target)
    np.testing.assert_allclose(out.to("cpu").item(), v.sum() / 6, rtol=1e-12)
    ax, at = fused.loss_backward("kl_div", fiamma.tensor(2.0).to(device), xt, tt,
                                 reduction="batchmean", param=log_target)
    np.testing.assert_allclose(ax.to("cpu").numpy(), 2 * gx / 6, rtol=1e-12)
    np.testing.assert_allclose(at.to("cpu").numpy(), 2 * gt / 6, rtol=1e-12)
    x0 = fiamma.tensor(0.5, dtype=fiamma.float64).to(device)
    t0 = fiamma.tensor(0.25, dtype=fiamma.float64).to(device)
    v0, _, _ = ref("kl_div", np.float64(0.5), np.float64(0.25), p=log_target)
    assert fused.loss("kl_div", x0, t0, reduction="batchmean",
                      param=log_target).item() == pytest.approx(v0, rel=1e-12)
    e = fiamma.zeros(0, 3).to(device)
    assert np.isnan(fused.loss("kl_div", e, e, reduction="batchmean").item())
    with pytest.raises(ValueError, match="mse_loss: batchmean is not a valid value"):
        fused.loss("mse_loss", xt, tt, reduction="batchmean")
