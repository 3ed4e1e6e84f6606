"""Losses: values against float64 NumPy formulas, gradients by gradcheck, and (parity
session) values and gradients against torch.nn.functional for every option."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None


def _logsoftmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_pointwise_losses_against_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5)) * 2
    fa, fb = fiamma.tensor(a), fiamma.tensor(b)
    d = a - b
    np.testing.assert_allclose(F.mse_loss(fa, fb).item(), (d * d).mean(), rtol=1e-12)
    np.testing.assert_allclose(F.l1_loss(fa, fb, reduction="sum").item(), np.abs(d).sum(),
                               rtol=1e-12)
    sl1 = np.where(np.abs(d) < 0.5, 0.5 * d * d / 0.5, np.abs(d) - 0.25)
    np.testing.assert_allclose(F.smooth_l1_loss(fa, fb, reduction="none", beta=0.5).numpy(),
                               sl1, rtol=1e-12)
    hub = np.where(np.abs(d) <= 2.0, 0.5 * d * d, 2.0 * (np.abs(d) - 1.0))
    np.testing.assert_allclose(F.huber_loss(fa, fb, delta=2.0).item(), hub.mean(), rtol=1e-12)
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(fa, fb[0])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(fa, fb, reduction="avg")


def test_cross_entropy_and_nll_against_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4))
    t = np.array([0, 3, 1, -100, 2, 3])
    w = np.array([1.0, 2.0, 0.5, 1.5])
    fx, ft, fw = fiamma.tensor(x), fiamma.tensor(t), fiamma.tensor(w)
    lp = _logsoftmax(x, 1)
    keep = t != -100
    picked = -lp[np.arange(6)[keep], t[keep]] * w[t[keep]]
    np.testing.assert_allclose(F.cross_entropy(fx, ft, weight=fw).item(),
                               picked.sum() / w[t[keep]].sum(), rtol=1e-12)
    none = F.cross_entropy(fx, ft, reduction="none").numpy()
    assert none[3] == 0.0
    np.testing.assert_allclose(none[keep], -lp[np.arange(6)[keep], t[keep]], rtol=1e-12)
    # probability targets
    p = rng.random((6, 4))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(F.cross_entropy(fx, fiamma.tensor(p)).item(),
                               -(lp * p).sum(1).mean(), rtol=1e-12)
    # K-dimensional input (N, C, d)
    xk = rng.standard_normal((2, 3, 5))
    tk = rng.integers(0, 3, (2, 5))
    lpk = _logsoftmax(xk, 1)
    ref = -np.take_along_axis(lpk, tk[:, None], 1)[:, 0].mean()
    np.testing.assert_allclose(F.cross_entropy(fiamma.tensor(xk), fiamma.tensor(tk)).item(),
                               ref, rtol=1e-12)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.nll_loss(fx, fiamma.tensor([7, 0, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match="expected target of shape"):
        F.nll_loss(fx, fiamma.tensor([0, 1]))


def test_binary_and_kl_against_numpy():
    rng = np.random.default_rng(2)
    z = rng.standard_normal((3, 4)) * 3
    y = (rng.random((3, 4)) > 0.5).astype(np.float64)
    pw = np.array([1.0, 2.0, 0.5, 3.0])
    sig = 1 / (1 + np.exp(-z))
    ref = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    np.testing.assert_allclose(
        F.binary_cross_entropy_with_logits(fiamma.tensor(z), fiamma.tensor(y),
                                           pos_weight=fiamma.tensor(pw),
                                           reduction="none").numpy(), ref, rtol=1e-10)
    bce = -(y * np.log(sig) + (1 - y) * np.log(1 - sig))
    np.testing.assert_allclose(F.binary_cross_entropy(fiamma.tensor(sig), fiamma.tensor(y)).item(),
                               bce.mean(), rtol=1e-10)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(fiamma.tensor(z), fiamma.tensor(y))
    lp = _logsoftmax(z, 1)
    q = rng.random((3, 4))
    q /= q.sum(1, keepdims=True)
    np.testing.assert_allclose(
        F.kl_div(fiamma.tensor(lp), fiamma.tensor(q), reduction="batchmean").item(),
        (q * (np.log(q) - lp)).sum() / 3, rtol=1e-10)
    np.testing.assert_allclose(
        F.kl_div(fiamma.tensor(lp), fiamma.tensor(np.log(q)), reduction="sum",
                 log_target=True).item(), (q * (np.log(q) - lp)).sum(), rtol=1e-10)


_T = fiamma.tensor([[0.3, -1.2, 2.0], [0.1, 0.9, -0.4], [1.5, -0.2, 0.0]],
                   dtype=fiamma.float64)  # fixed targets (not functions of the input)


@pytest.mark.parametrize("fn", [
    lambda x: F.cross_entropy(x, fiamma.tensor([1, 0, 2]), label_smoothing=0.2),
    lambda x: F.cross_entropy(x, fiamma.tensor([1, -100, 2]),
                              weight=fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64)),
    lambda x: F.nll_loss(x.log_softmax(1), fiamma.tensor([2, 2, 0]), reduction="sum"),
    lambda x: F.smooth_l1_loss(x, _T),
    lambda x: F.binary_cross_entropy_with_logits(x, (_T > 0).double()),
])
def test_loss_gradients(fn):
    x = fiamma.randn(3, 3, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(fn, (x,))


def test_loss_modules():
    crit = nn.CrossEntropyLoss(weight=fiamma.ones(3), label_smoothing=0.1)
    assert [n for n, _ in crit.named_buffers()] == ["weight"]
    x = fiamma.randn(4, 3, requires_grad=True)
    loss = crit(x, fiamma.tensor([0, 1, 2, 1]))
    loss.backward()
    assert x.grad.shape == (4, 3) and loss.dim() == 0
    assert nn.MSELoss(reduction="sum")(fiamma.ones(2), fiamma.zeros(2)).item() == 2.0
    assert nn.BCEWithLogitsLoss(pos_weight=fiamma.ones(2))(fiamma.zeros(2),
                                                           fiamma.ones(2)).item() > 0


CASES = {
    "ce": lambda m, x, t: m.cross_entropy(x, t),
    "ce_smooth_weight": lambda m, x, t: m.cross_entropy(
        x, t, weight=_w(m), label_smoothing=0.3, ignore_index=2),
    "ce_sum_smooth": lambda m, x, t: m.cross_entropy(x, t, reduction="sum",
                                                     label_smoothing=0.1),
    "nll_none": lambda m, x, t: m.nll_loss(x.log_softmax(1), t, reduction="none"),
    "mse": lambda m, x, t: m.mse_loss(x, x.detach() * 0.3),
    "huber": lambda m, x, t: m.huber_loss(x, x.detach() * 0.3 + 1, delta=0.7),
    "bce_logits_pw": lambda m, x, t: m.binary_cross_entropy_with_logits(
        x, (x.detach() > 0).float(), pos_weight=_w(m)[:1].expand(4)),
    "kl": lambda m, x, t: m.kl_div(x.log_softmax(1), x.detach().softmax(1).flip(1),
                                   reduction="batchmean"),
}


def _w(m):
    v = [0.5, 1.0, 2.0, 1.5]
    return fiamma.tensor(v) if m is F else torch.tensor(v)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", list(CASES))
def test_losses_equal_pytorch(name):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    t = np.array([0, 3, 2, 1, 2])
    fx = fiamma.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fl = CASES[name](F, fx, fiamma.tensor(t))
    tl = CASES[name](torch.nn.functional, tx, torch.tensor(t))
    np.testing.assert_allclose(fl.detach().numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    fl.sum().backward()
    tl.sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
