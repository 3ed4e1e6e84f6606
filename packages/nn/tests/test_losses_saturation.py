"""Losses at saturated and boundary inputs: binary_cross_entropy at probabilities 0 and 1 (and
next to them), the softplus/log-sigmoid based losses at logits 0 and +-inf. Values and
gradients against float64 NumPy versions of PyTorch's formulas; (parity) against PyTorch."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck, gradgradcheck
from fiamma.nn import functional as F

# probabilities at and next to the ends, with targets that make each end hurt or not
PROBS = [0.0, 1.0, 1.0, 0.0, 1e-30, 1 - 1e-7, 0.5, 1e-13, 1e-7, 0.999, 0.25]
TARGETS = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.3, 1.0, 0.0, 1.0, 0.75]
WEIGHTS = [1.0, 2.0, 0.5, 3.0, 1.0, 1.5, 2.0, 0.25, 1.0, 1.0, 4.0]


def bce_reference(x, t, w, reduction, dtype):
    """PyTorch's BCE forward and input gradient, computed in float64 from inputs rounded to
    ``dtype``: loss ``(t - 1) max(log1p(-x), -100) - t max(log x, -100)``, gradient
    ``(x - t) / max(x (1 - x), eps)`` with eps the float32 nearest 1e-12 (PyTorch's constant
    is a C float), both times the weight, divided by n for 'mean'."""
    x = np.asarray(x, dtype).astype(np.float64)
    t = np.asarray(t, dtype).astype(np.float64)
    with np.errstate(divide="ignore"):
        loss = (t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100)
    grad = (x - t) / np.maximum(x * (1 - x), float(np.float32(1e-12)))
    loss, grad = loss * w, grad * w
    if reduction == "mean":
        return loss.mean(), grad / x.size
    if reduction == "sum":
        return loss.sum(), grad
    return loss, grad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_value_and_gradient_at_the_ends(dtype, reduction, weighted):
    np_dt = np.dtype(dtype)
    x = fiamma.tensor(np.array(PROBS, np_dt), requires_grad=True)
    t = fiamma.tensor(np.array(TARGETS, np_dt))
    w = np.array(WEIGHTS if weighted else [1.0] * len(PROBS))
    weight = fiamma.tensor(w.astype(np_dt)) if weighted else None
    loss = F.binary_cross_entropy(x, t, weight=weight, reduction=reduction)
    loss.sum().backward()
    ref_loss, ref_grad = bce_reference(PROBS, TARGETS, w, reduction, np_dt)
    rtol = 1e-12 if dtype == "float64" else 2e-6
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(loss.detach().numpy(), ref_loss, rtol=rtol)
    np.testing.assert_allclose(x.grad.numpy(), ref_grad, rtol=rtol)


def test_bce_loss_module_trains_from_saturated_outputs():
    """A siamese head (shared embedding, sigmoid of a distance) that saturates in the first
    batch: BCELoss's gradient must stay finite, so the parameters do too after the step (they
    went NaN before)."""
    fiamma.manual_seed(0)
    embed = nn.Linear(4, 3)
    head = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
    with fiamma.no_grad():
        embed.weight.fill_(10.0)
        head[0].weight.fill_(10.0)
        head[0].bias.fill_(-200.0)
    a = fiamma.cat([fiamma.ones(3, 4), fiamma.zeros(3, 4)])
    b = fiamma.cat([-fiamma.ones(3, 4), fiamma.zeros(3, 4)])
    y = fiamma.tensor([[0.0], [1.0], [0.0], [1.0], [0.0], [1.0]])
    out = head((embed(a) - embed(b)).abs())  # sigmoid(940) = 1, sigmoid(-200) = 0 in float32
    assert out[:3].tolist() == [[1.0]] * 3 and out[3:].tolist() == [[0.0]] * 3
    loss = nn.BCELoss()(out, y)
    assert loss.item() == pytest.approx(400 / 6, rel=1e-6)  # four saturated wrong answers
    loss.backward()
    params = list(embed.parameters()) + list(head.parameters())
    for p in params:
        assert np.isfinite(p.grad.numpy()).all()
    with fiamma.no_grad():
        for p in params:
            p -= 1e-12 * p.grad
    assert np.isfinite(head((embed(a) - embed(b)).abs()).detach().numpy()).all()


def test_bce_target_gradient_is_the_clamped_forward_derivative():
    x = fiamma.tensor([0.0, 1.0, 0.25, 1e-50], dtype=fiamma.float64)
    t = fiamma.tensor([0.5, 0.5, 0.5, 0.5], dtype=fiamma.float64, requires_grad=True)
    F.binary_cross_entropy(x, t, reduction="sum").backward()
    # max(log(1 - x), -100) - max(log x, -100)
    np.testing.assert_allclose(t.grad.numpy(), [100.0, -100.0, np.log(0.75) - np.log(0.25),
                                                100.0], rtol=1e-12)


def test_bce_gradcheck_inside_and_second_order():
    rng = np.random.default_rng(0)
    x = fiamma.tensor(rng.uniform(0.05, 0.95, (3, 4)), requires_grad=True)
    t = fiamma.tensor(rng.uniform(0, 1, (3, 4)), requires_grad=True)
    w = fiamma.tensor(rng.uniform(0.5, 2, (4,)))
    for reduction in ("none", "mean", "sum"):
        def fn(a, b, reduction=reduction):
            return F.binary_cross_entropy(a, b, weight=w, reduction=reduction)
        assert gradcheck(fn, (x, t))
        assert gradgradcheck(fn, (x, t))


def test_bce_checks_its_inputs():
    ok = fiamma.tensor([0.5])
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(RuntimeError, match="input should be between 0 and 1"):
            F.binary_cross_entropy(fiamma.tensor([bad]), ok)
        with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
            F.binary_cross_entropy(ok, fiamma.tensor([bad]))
    with pytest.raises(ValueError, match="target size"):
        F.binary_cross_entropy(fiamma.tensor([0.5, 0.5]), ok)
    # without grad the same values come without building a graph
    assert not F.binary_cross_entropy(ok, ok).requires_grad


# ---- softplus / log-sigmoid based: exact gradients at 0 and at +-inf --------------------------

LOGITS = [0.0, 0.0, 50.0, -50.0, 800.0, -800.0, 1.0, -3.0, float("inf"), float("-inf")]
LABELS = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5, 0.25, 1.0, 0.0]


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


@pytest.mark.parametrize("pos_weight", [None, 3.0])
def test_bce_with_logits_gradient_is_sigmoid_minus_target(pos_weight):
    x = fiamma.tensor(LOGITS, dtype=fiamma.float64, requires_grad=True)
    t = fiamma.tensor(LABELS, dtype=fiamma.float64)
    pw = None if pos_weight is None else fiamma.tensor([pos_weight], dtype=fiamma.float64)
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none", pos_weight=pw)
    loss.sum().backward()
    xs, ts = np.array(LOGITS), np.array(LABELS)
    pwv = 1.0 if pos_weight is None else pos_weight
    lw = 1 + (pwv - 1) * ts
    f = np.isfinite(xs)
    ref = (1 - ts[f]) * xs[f] + lw[f] * _softplus(-xs[f])
    np.testing.assert_allclose(loss.detach().numpy()[f], ref, rtol=1e-12)
    # PyTorch's backward: (pos_weight t + 1 - t) sigmoid(x) - pos_weight t
    grad = lw * _sigmoid(xs) - pwv * ts
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12, atol=1e-300)


def test_soft_margin_losses_and_logsigmoid_at_zero():
    xs = np.array(LOGITS)
    x = fiamma.tensor(xs, dtype=fiamma.float64, requires_grad=True)
    y = fiamma.tensor([1.0, -1.0] * 5, dtype=fiamma.float64)
    F.soft_margin_loss(x, y, reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.array([1.0, -1.0] * 5) *
                               _sigmoid(-np.array([1.0, -1.0] * 5) * xs), atol=1e-300)
    x.grad = None
    t = fiamma.tensor([LABELS], dtype=fiamma.float64)
    F.multilabel_soft_margin_loss(x.unsqueeze(0), t, reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), (_sigmoid(xs) - np.array(LABELS)) / xs.size,
                               rtol=1e-12, atol=1e-300)
    x.grad = None
    out = F.logsigmoid(x)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _sigmoid(-xs), rtol=1e-12, atol=1e-300)
    finite = np.isfinite(xs)
    np.testing.assert_allclose(out.detach().numpy()[finite], -_softplus(-xs[finite]),
                               rtol=1e-12)
    assert out[-2].item() == 0.0 and out[-1].item() == float("-inf")


# ---- parity -----------------------------------------------------------------------------------

@pytest.mark.parity
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_saturated_equal_pytorch(dtype, reduction):
    torch = pytest.importorskip("torch")
    np_dt = np.dtype(dtype)
    xs, ts, ws = (np.array(v, np_dt) for v in (PROBS, TARGETS, WEIGHTS))
    x = fiamma.tensor(xs, requires_grad=True)
    tx = torch.tensor(xs, requires_grad=True)
    loss = F.binary_cross_entropy(x, fiamma.tensor(ts), fiamma.tensor(ws), reduction=reduction)
    tloss = torch.nn.functional.binary_cross_entropy(tx, torch.tensor(ts), torch.tensor(ws),
                                                     reduction=reduction)
    loss.sum().backward()
    tloss.sum().backward()
    rtol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(loss.detach().numpy(), tloss.detach().numpy(), rtol=rtol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["bce_logits", "bce_logits_pw", "soft_margin", "multilabel",
                                  "logsigmoid"])
def test_logit_losses_at_zero_and_inf_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    xs, ts = np.array(LOGITS), np.array(LABELS)
    signs = np.array([1.0, -1.0] * 5)

    def run(lib, fn_mod):
        x = lib.tensor(xs, requires_grad=True)
        t, s = lib.tensor(ts), lib.tensor(signs)
        if name == "bce_logits":
            out = fn_mod.binary_cross_entropy_with_logits(x, t, reduction="sum")
        elif name == "bce_logits_pw":
            out = fn_mod.binary_cross_entropy_with_logits(x, t, reduction="sum",
                                                          pos_weight=lib.tensor([3.0] * 10))
        elif name == "soft_margin":
            out = fn_mod.soft_margin_loss(x, s, reduction="sum")
        elif name == "multilabel":
            out = fn_mod.multilabel_soft_margin_loss(x.unsqueeze(0), t.unsqueeze(0))
        else:
            out = fn_mod.logsigmoid(x).sum()
        out.backward()
        return out.item(), x.grad.numpy()

    v, g = run(fiamma, F)
    tv, tg = run(torch, torch.nn.functional)
    np.testing.assert_allclose(v, tv, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-300)


def test_poisson_nll_full_target_gradient_includes_stirling():
    """full=True adds t log t - t + log(2 pi t) / 2 where t > 1; its target gradient
    log t + 1 / (2 t) was missing (the term was computed from a detached target)."""
    x = fiamma.tensor([0.5, 2.0, 1.5, 3.0], dtype=fiamma.float64)
    t = fiamma.tensor([0.0, 1.0, 3.0, 2.5], dtype=fiamma.float64, requires_grad=True)
    F.poisson_nll_loss(x, t, log_input=False, full=True, eps=1e-8, reduction="sum").backward()
    xs, ts = x.numpy(), t.detach().numpy()
    big = np.maximum(ts, 1.0)
    expected = -np.log(xs + 1e-8) + np.where(ts > 1, np.log(big) + 0.5 / big, 0.0)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-12)
