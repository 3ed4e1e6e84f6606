"""Fused cross entropy (fiamma.cross_entropy_loss / cross_entropy_loss_backward; csrc/xent.c
and the array-module backend's xent) against a float64 NumPy reference, on the CPU and on the
other devices, plus its errors; parity with torch at the end."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma


def _ref(x, t, w, reduction, ii, s):
    """(loss, d loss / d x for an incoming gradient g) in float64, class dim 1 (or 0 for 1-d)."""
    x = np.asarray(x, np.float64)
    one_d = x.ndim == 1
    if one_d:
        x, t = x[None], np.asarray(t)[None]
    c = x.shape[1]
    xr = np.moveaxis(x, 1, -1).reshape(-1, c)
    tr = np.asarray(t).reshape(-1)
    wv = np.ones(c) if w is None else np.asarray(w, np.float64)
    m = xr.max(1, keepdims=True)
    lse = m + np.log(np.exp(xr - m).sum(1, keepdims=True))
    logp = xr - lse
    kept = tr != ii
    safe = np.where(kept, tr, 0)
    wt = wv[safe] * kept
    nll = -wt * logp[np.arange(len(tr)), safe]
    rows = (1 - s) * nll
    if s:
        rows = rows - s / c * (logp * wv).sum(1) * kept
    if reduction == "none":
        loss = rows.reshape(np.asarray(t).shape if not one_d else ())
    elif reduction == "sum":
        loss = rows.sum()
    else:
        loss = rows.sum() / wt.sum()

    def grad(g):
        g = np.asarray(g, np.float64)
        a = g.reshape(-1) if reduction == "none" else np.full(len(tr), float(g))
        if reduction == "mean":
            a = a / wt.sum()
        a = a * kept
        p = np.exp(logp)
        onehot = np.eye(c)[safe]
        k = (1 - s) * wt + s / c * wv.sum() * kept
        gr = a[:, None] * (k[:, None] * p - (1 - s) * wt[:, None] * onehot - s / c * wv)
        shp = (x.shape[0],) + x.shape[2:] + (c,)
        gr = np.moveaxis(gr.reshape(shp), -1, 1)
        return gr[0] if one_d else gr

    return loss, grad


CASES = [  # input shape, reduction, label_smoothing, weight, ignore_index
    ((7, 5), "mean", 0.0, False, -100),
    ((7, 5), "sum", 0.0, True, -100),
    ((7, 5), "none", 0.1, False, 2),
    ((33, 40), "mean", 0.25, True, 3),
    ((6,), "mean", 0.0, False, -100),
    ((6,), "none", 0.3, True, -100),
    ((3, 4, 2, 3), "none", 0.2, True, 1),
    ((3, 4, 5), "mean", 0.0, True, 0),
    ((2, 3), "mean", 1.0, False, -100),
    ((64, 65), "mean", 0.0, False, -100),  # the GPT benchmark's row width
]


def _case(shape, w, ii, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = rng.integers(0, c, tshape)
    if 0 <= ii < c and t.ndim:
        t.reshape(-1)[::3] = ii  # some ignored rows
    wt = rng.random(c) + 0.5 if w else None
    return x, t, wt


@pytest.mark.parametrize("shape,reduction,s,w,ii", CASES)
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
def test_matches_float64_reference(shape, reduction, s, w, ii, dt):
    x, t, wv = _case(shape, w, ii)
    want, grad = _ref(x, t, wv, reduction, ii, s)
    fx = fiamma.tensor(x, dtype=dt)
    ft = fiamma.tensor(t)
    fw = None if wv is None else fiamma.tensor(wv, dtype=dt)
    got = fiamma.cross_entropy_loss(fx, ft, fw, reduction, ii, s)
    assert got.dtype == dt and tuple(got.shape) == np.shape(want)
    tol = 2e-5 if dt is fiamma.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    g = np.random.default_rng(1).standard_normal(np.shape(want))
    gx = fiamma.cross_entropy_loss_backward(fiamma.tensor(g, dtype=dt), fx, ft, fw, reduction,
                                            ii, s)
    assert gx.dtype == dt and tuple(gx.shape) == shape
    np.testing.assert_allclose(gx.numpy(), grad(g), rtol=tol, atol=tol)


def test_autograd_records_one_op_and_matches_backward():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    x, t, wv = _case((9, 7), True, 2)
    fx = fiamma.tensor(x, requires_grad=True)
    loss = fiamma.cross_entropy_loss(fx, fiamma.tensor(t), fiamma.tensor(wv), ignore_index=2,
                                     label_smoothing=0.1)
    # PyTorch's last node for a label-smoothed cross entropy (the class stays the fused op's)
    assert loss.grad_fn.name() == "AddBackward0"
    assert type(loss.grad_fn).__name__ == "CrossEntropyLossBackward0"
    loss.backward()
    _, grad = _ref(x, t, wv, "mean", 2, 0.1)
    np.testing.assert_allclose(fx.grad.numpy(), grad(1.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dt", [fiamma.float16, fiamma.bfloat16])
def test_half_types_compute_in_float32(dt):
    x, t, _ = _case((10, 6), False, -100)
    got = fiamma.cross_entropy_loss(fiamma.tensor(x, dtype=dt), fiamma.tensor(t))
    want = fiamma.cross_entropy_loss(fiamma.tensor(x, dtype=dt).float(), fiamma.tensor(t))
    assert got.dtype == dt
    assert got.float().item() == pytest.approx(want.item(), rel=1e-2)


def test_layouts_and_limits():
    x, t, _ = _case((6, 8), False, -100)
    fx = fiamma.tensor(x.T.copy()).t()  # non-contiguous input
    got = fiamma.cross_entropy_loss(fx, fiamma.tensor(t).int())  # int32 targets
    np.testing.assert_allclose(got.item(), _ref(x, t, None, "mean", -100, 0)[0], rtol=1e-6)
    # -inf logits (masked classes) are fine unless they are the target
    xm = x.copy()
    xm[:, 0] = -np.inf
    tm = np.where(t == 0, 1, t)
    got = fiamma.cross_entropy_loss(fiamma.tensor(xm), fiamma.tensor(tm), reduction="none")
    np.testing.assert_allclose(got.numpy(), _ref(xm, tm, None, "none", -100, 0)[0], rtol=1e-6)
    assert np.isinf(fiamma.cross_entropy_loss(fiamma.tensor(xm), fiamma.tensor(t * 0)).item())
    xn = x.copy()
    xn[1, 2] = np.nan
    r = fiamma.cross_entropy_loss(fiamma.tensor(xn), fiamma.tensor(t), reduction="none").numpy()
    assert np.isnan(r[1]) and np.isfinite(np.delete(r, 1)).all()
    # every row ignored: mean is 0/0 (NaN), sum 0; no rows at all
    all_ignored = fiamma.tensor(np.full(6, -100))
    assert np.isnan(fiamma.cross_entropy_loss(fiamma.tensor(x), all_ignored).item())
    assert fiamma.cross_entropy_loss(fiamma.tensor(x), all_ignored, reduction="sum").item() == 0
    empty = fiamma.cross_entropy_loss(fiamma.zeros(0, 4), fiamma.zeros(0, dtype=fiamma.int64),
                                      reduction="none")
    assert tuple(empty.shape) == (0,)


def test_errors_name_the_op():
    x = fiamma.zeros(3, 4)
    with pytest.raises(IndexError, match=r"cross_entropy_loss: Target 4 is out of bounds"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="Target -1"):
        fiamma.cross_entropy_loss_backward(fiamma.tensor(1.0), x, fiamma.tensor([0, -1, 1]))
    with pytest.raises(ValueError, match="expected target of shape"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="integer dtype"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1, 2]), fiamma.ones(3))
    with pytest.raises(TypeError, match="floating point input"):
        fiamma.cross_entropy_loss(fiamma.zeros(3, 4, dtype=fiamma.int64), fiamma.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="0-d"):
        fiamma.cross_entropy_loss(fiamma.tensor(1.0), fiamma.tensor(0))
    with pytest.raises(ValueError, match="expected grad_output of shape"):
        fiamma.cross_entropy_loss_backward(fiamma.ones(3), x, fiamma.tensor([0, 1, 2]))
    pytest.importorskip("fiamma.autograd")  # the rest records for autograd
    with pytest.raises(RuntimeError, match="derivative for 'weight'"):
        fiamma.cross_entropy_loss(x, fiamma.tensor([0, 1, 2]), fiamma.ones(4, requires_grad=True))


@pytest.mark.parametrize("shape,reduction,s,w,ii", CASES[:4] + CASES[6:8])
def test_on_device(device, shape, reduction, s, w, ii):
    x, t, wv = _case(shape, w, ii)
    for dt in (fiamma.float32, fiamma.float64):
        c = (fiamma.tensor(x, dtype=dt), fiamma.tensor(t),
             None if wv is None else fiamma.tensor(wv, dtype=dt))
        d = tuple(None if v is None else v.to(device) for v in c)
        want = fiamma.cross_entropy_loss(*c, reduction, ii, s)
        got = fiamma.cross_entropy_loss(*d, reduction, ii, s)
        assert_same(got, want)
        g = fiamma.ones(tuple(want.shape), dtype=dt) * 0.5
        assert_same(fiamma.cross_entropy_loss_backward(g.to(device), *d, reduction, ii, s),
                    fiamma.cross_entropy_loss_backward(g, *c, reduction, ii, s))
    with pytest.raises(IndexError, match="Target 9"):
        fiamma.cross_entropy_loss(fiamma.zeros(2, 3, device=device),
                                  fiamma.tensor([0, 9], device=device))


@pytest.mark.parity
@pytest.mark.parametrize("shape,reduction,s,w,ii", CASES)
def test_parity_with_torch(shape, reduction, s, w, ii):
    torch = pytest.importorskip("torch")
    x, t, wv = _case(shape, w, ii, seed=3)
    tx = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    tw = None if wv is None else torch.tensor(wv, dtype=torch.float32)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t), tw, ignore_index=ii,
                                           reduction=reduction, label_smoothing=s)
    fx = fiamma.tensor(x, dtype=fiamma.float32, requires_grad=True)
    fw = None if wv is None else fiamma.tensor(wv, dtype=fiamma.float32)
    fl = fiamma.cross_entropy_loss(fx, fiamma.tensor(t), fw, reduction, ii, s)
    np.testing.assert_allclose(fl.detach().numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    tl.sum().backward()
    fl.sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
