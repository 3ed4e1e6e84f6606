"""The second group of losses: values against float64 NumPy formulas, gradients by gradcheck,
CTC against a brute-force sum over alignments, and (parity) values and gradients against
torch for every loss and option."""

import itertools
import math
import warnings

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck, gradgradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

REDUCTIONS = ("none", "mean", "sum")


def _red(x, reduction):
    return {"none": x, "mean": np.mean(x), "sum": np.sum(x)}[reduction]


def _t(a, grad=False):
    return fiamma.tensor(np.asarray(a), requires_grad=grad)


def _softplus(x):
    return np.logaddexp(0, x)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- values against NumPy --------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_poisson_and_gaussian_nll(rng, reduction):
    x = rng.standard_normal((4, 3))
    t = rng.poisson(2.0, (4, 3)).astype(np.float64)
    ref = np.exp(x) - t * x
    got = F.poisson_nll_loss(_t(x), _t(t), reduction=reduction).numpy()
    np.testing.assert_allclose(got, _red(ref, reduction), rtol=1e-12)
    stir = np.where(t > 1, t * np.log(np.maximum(t, 1)) - t
                    + 0.5 * np.log(2 * np.pi * np.maximum(t, 1)), 0)
    got = F.poisson_nll_loss(_t(x), _t(t), full=True, reduction=reduction).numpy()
    np.testing.assert_allclose(got, _red(ref + stir, reduction), rtol=1e-12)
    xp = np.abs(x)
    got = F.poisson_nll_loss(_t(xp), _t(t), log_input=False, eps=1e-3, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _red(xp - t * np.log(xp + 1e-3), reduction),
                               rtol=1e-12)
    var = np.abs(rng.standard_normal((4, 3))) + 0.1
    ref = 0.5 * (np.log(var) + (x - t) ** 2 / var)
    got = F.gaussian_nll_loss(_t(x), _t(t), _t(var), reduction=reduction).numpy()
    np.testing.assert_allclose(got, _red(ref, reduction), rtol=1e-12)
    got = F.gaussian_nll_loss(_t(x), _t(t), _t(var), full=True, reduction=reduction).numpy()
    np.testing.assert_allclose(got, _red(ref + 0.5 * np.log(2 * np.pi), reduction), rtol=1e-12)


def test_gaussian_nll_var_shapes_and_errors(rng):
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    v = np.abs(rng.standard_normal(4)) + 0.5
    ref = 0.5 * (np.log(v[:, None]) + (x - t) ** 2 / v[:, None])
    for var in (_t(v), _t(v[:, None])):
        np.testing.assert_allclose(F.gaussian_nll_loss(_t(x), _t(t), var, reduction="none"
                                                       ).numpy(), ref, rtol=1e-12)
    got = F.gaussian_nll_loss(_t(x), _t(t), 0.5, reduction="sum").item()
    np.testing.assert_allclose(got, (0.5 * (np.log(0.5) + (x - t) ** 2 / 0.5)).sum())
    small = F.gaussian_nll_loss(_t(x), _t(t), fiamma.zeros(4, 3, dtype=fiamma.float64),
                                eps=1e-2, reduction="none").numpy()
    np.testing.assert_allclose(small, 0.5 * (np.log(1e-2) + (x - t) ** 2 / 1e-2))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(_t(x), _t(t), _t(v[:3]))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(_t(x), _t(t), _t(np.ones((4, 3, 1))))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(_t(x), _t(t), _t(-v))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pair_losses(rng, reduction):
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    y = np.array([1, -1, 1, -1, -1.0])
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    ref = np.where(y == 1, 1 - cos, np.maximum(cos - 0.2, 0))
    got = F.cosine_embedding_loss(_t(a), _t(b), _t(y), margin=0.2, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _red(ref, reduction), rtol=1e-12)
    a1, b1 = a[:, 0], b[:, 0]
    got = F.margin_ranking_loss(_t(a1), _t(b1), _t(y), margin=0.3, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _red(np.maximum(-y * (a1 - b1) + 0.3, 0),
                                                 reduction), rtol=1e-12)
    yy = np.where(rng.random((5, 4)) > 0.5, 1.0, -1.0)
    got = F.hinge_embedding_loss(_t(a), _t(yy), margin=0.5, reduction=reduction)
    ref = np.where(yy == 1, a, np.maximum(0.5 - a, 0))
    np.testing.assert_allclose(got.numpy(), _red(ref, reduction), rtol=1e-12)
    got = F.soft_margin_loss(_t(a), _t(yy), reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _red(_softplus(-yy * a), reduction), rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin(rng, p, weighted):
    x = rng.standard_normal((6, 4))
    y = rng.integers(0, 4, 6)
    w = rng.random(4) + 0.5
    ref = np.zeros(6)
    for n in range(6):
        for i in range(4):
            if i != y[n]:
                z = max(0.0, 0.7 - x[n, y[n]] + x[n, i]) ** p
                ref[n] += z * (w[y[n]] if weighted else 1) / 4
    got = F.multi_margin_loss(_t(x), _t(y), p=p, margin=0.7,
                              weight=_t(w) if weighted else None, reduction="none")
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12)
    one = F.multi_margin_loss(_t(x[0]), _t(y[:1]), p=p, margin=0.7,
                              weight=_t(w) if weighted else None)
    np.testing.assert_allclose(one.item(), ref[0], rtol=1e-12)
    with pytest.raises(IndexError, match="out of range"):
        F.multi_margin_loss(_t(x), _t(np.full(6, 4)))


def test_multilabel_losses(rng):
    x = rng.standard_normal((3, 5))
    t = np.array([[3, 0, -1, 1, 1], [1, 2, 3, 4, 0], [-1, 2, 2, 2, 2]])
    ref = np.zeros(3)
    for n in range(3):
        labels = []
        for v in t[n]:
            if v < 0:
                break
            labels.append(v)
        others = [i for i in range(5) if i not in labels]
        for j in labels:
            for i in others:
                ref[n] += max(0, 1 - (x[n, j] - x[n, i])) / 5
    got = F.multilabel_margin_loss(_t(x), _t(t), reduction="none")
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(F.multilabel_margin_loss(_t(x[0]), _t(t[0])).item(), ref[0],
                               rtol=1e-12)
    y = (rng.random((3, 5)) > 0.5).astype(np.float64)
    w = rng.random(5)
    per = -(y * -_softplus(-x) + (1 - y) * -_softplus(x)) * w
    got = F.multilabel_soft_margin_loss(_t(x), _t(y), weight=_t(w), reduction="none")
    np.testing.assert_allclose(got.numpy(), per.mean(1), rtol=1e-12)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_triplet_losses(rng, swap, p):
    a, pos, neg = (rng.standard_normal((4, 6)) for _ in range(3))

    def dist(u, v):
        return (np.abs(u - v + 1e-6) ** p).sum(-1) ** (1 / p)

    dn = dist(a, neg)
    if swap:
        dn = np.minimum(dn, dist(pos, neg))
    ref = np.maximum(1.5 + dist(a, pos) - dn, 0)
    got = F.triplet_margin_loss(_t(a), _t(pos), _t(neg), margin=1.5, p=p, swap=swap,
                                reduction="none")
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    def fn(u, v):
        return 1 - F.cosine_similarity(u, v)

    def cd(u, v):
        return 1 - (u * v).sum(-1) / np.linalg.norm(u, axis=-1) / np.linalg.norm(v, axis=-1)

    dn = cd(a, neg) if not swap else np.minimum(cd(a, neg), cd(pos, neg))
    got = F.triplet_margin_with_distance_loss(_t(a), _t(pos), _t(neg), distance_function=fn,
                                              margin=0.5, swap=swap)
    np.testing.assert_allclose(got.item(), np.maximum(0.5 + cd(a, pos) - dn, 0).mean(),
                               rtol=1e-10)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(_t(a), _t(pos), _t(neg[0]))


# ---- gradients ---------------------------------------------------------------------------------


def test_gradchecks(rng):
    x = _t(rng.standard_normal((3, 4)), True)
    x2 = _t(rng.standard_normal((3, 4)), True)
    t = _t(rng.poisson(2.0, (3, 4)).astype(np.float64))
    var = _t(np.abs(rng.standard_normal((3, 4))) + 0.3, True)
    y = _t(np.array([1.0, -1.0, 1.0]))
    ys = _t(np.where(rng.random((3, 4)) > 0.5, 1.0, -1.0))
    cls = _t(np.array([0, 3, 1]))
    ml = _t(np.array([[1, 2, -1, 0], [0, -1, 0, 0], [3, 2, 1, 0]]))
    w = _t(rng.random(4) + 0.5)
    checks = [
        (lambda a: F.poisson_nll_loss(a, t, full=True), (x,)),
        (lambda a: F.poisson_nll_loss(a.abs() + 0.1, t, log_input=False), (x,)),
        (lambda a, v: F.gaussian_nll_loss(a, t, v, full=True), (x, var)),
        (lambda a, b: F.cosine_embedding_loss(a, b, y, margin=-0.9), (x, x2)),
        (lambda a, b: F.margin_ranking_loss(a, b, ys, margin=0.1, reduction="sum"), (x, x2)),
        (lambda a: F.hinge_embedding_loss(a, ys, margin=2.0), (x,)),
        (lambda a: F.multi_margin_loss(a, cls, p=2, margin=3.0, weight=w), (x,)),
        (lambda a: F.multilabel_margin_loss(a, ml), (x,)),
        (lambda a: F.multilabel_soft_margin_loss(a, (ys + 1) / 2, weight=w), (x,)),
        (lambda a: F.soft_margin_loss(a, ys), (x,)),
        (lambda a, b: F.triplet_margin_loss(a, b, b * 0.5 + 1, margin=5.0, swap=True), (x, x2)),
        (lambda a, b: F.triplet_margin_with_distance_loss(a, b, b.flip(0), margin=5.0),
         (x, x2)),
    ]
    for fn, inputs in checks:
        assert gradcheck(fn, inputs)


def test_modules_forward_their_options(rng):
    x = _t(rng.standard_normal((3, 4)))
    t = _t(rng.poisson(2.0, (3, 4)).astype(np.float64))
    m = nn.PoissonNLLLoss(full=True, reduction="sum")
    np.testing.assert_allclose(m(x, t).item(), F.poisson_nll_loss(x, t, full=True,
                                                                  reduction="sum").item())
    assert nn.GaussianNLLLoss(full=True, eps=0.1).eps == 0.1
    mm = nn.MultiMarginLoss(p=2, margin=0.5, weight=fiamma.ones(4, dtype=fiamma.float64))
    assert list(mm.state_dict()) == ["weight"]
    with pytest.raises(ValueError):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError):
        nn.TripletMarginLoss(margin=0)
    with pytest.raises(ValueError):
        nn.TripletMarginWithDistanceLoss(margin=-1)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        legacy = nn.SoftMarginLoss(size_average=False)
    assert legacy.reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        out = F.hinge_embedding_loss(x, t, reduce=False)
    assert tuple(out.shape) == (3, 4)


# ---- CTC -------------------------------------------------------------------------------------


def _ctc_brute(lp, target, blank):
    """-log sum over every alignment (path of length T) that collapses to ``target``."""
    t_len, c = lp.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if (i == 0 or k != path[i - 1])]
        collapsed = [k for k in collapsed if k != blank]
        if collapsed == list(target):
            total += math.exp(sum(lp[i, k] for i, k in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("blank", [0, 2])
def test_ctc_against_brute_force(rng, blank):
    t_max, n, c = 5, 4, 3
    lp = _log_softmax(rng.standard_normal((t_max, n, c)), 2)
    labels = [k for k in range(c) if k != blank]
    targets = [[labels[0], labels[1]], [labels[0], labels[0]], [labels[1]], []]
    in_len = [5, 5, 3, 4]
    tgt_len = [len(t) for t in targets]
    padded = np.array([t + [blank] * (2 - len(t)) for t in targets])
    ref = np.array([_ctc_brute(lp[:in_len[i], i], targets[i], blank) for i in range(n)])
    got = F.ctc_loss(_t(lp), _t(padded), in_len, tgt_len, blank=blank, reduction="none")
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    concat = _t(np.array(sum(targets, [])))
    got2 = F.ctc_loss(_t(lp), concat, _t(np.array(in_len)), _t(np.array(tgt_len)),
                      blank=blank, reduction="none")
    np.testing.assert_allclose(got2.numpy(), ref, rtol=1e-10)
    mean = F.ctc_loss(_t(lp), _t(padded), in_len, tgt_len, blank=blank).item()
    np.testing.assert_allclose(mean, (ref / np.maximum(tgt_len, 1)).mean(), rtol=1e-10)
    one = F.ctc_loss(_t(lp[:, 0]), _t(padded[0]), 5, 2, blank=blank, reduction="none")
    np.testing.assert_allclose(one.item(), ref[0], rtol=1e-10)


def test_ctc_gradcheck_and_infinity(rng):
    lp = _t(_log_softmax(rng.standard_normal((4, 2, 3)), 2), True)
    tg = _t(np.array([[1, 2], [2, 2]]))
    assert gradcheck(lambda a: F.ctc_loss(a, tg, [4, 3], [2, 1], reduction="sum"), (lp,))
    assert gradcheck(lambda a: F.ctc_loss(a.log_softmax(2), tg, [4, 4], [2, 2]), (lp,))
    # [2, 2] needs 3 frames: impossible in 2
    x = _t(rng.standard_normal((2, 2, 3)), True)
    loss = F.ctc_loss(x.log_softmax(2), tg, [2, 2], [2, 2], reduction="none")
    assert math.isinf(loss[1].item()) and math.isfinite(loss[0].item())
    loss = F.ctc_loss(x.log_softmax(2), tg, [2, 2], [2, 2], reduction="sum", zero_infinity=True)
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all() and np.abs(x.grad.numpy()[:, 1]).max() == 0
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert m(x.log_softmax(2), tg, [2, 2], [2, 2]).item() == loss.item()
    with pytest.raises(RuntimeError, match="input_lengths"):
        F.ctc_loss(x.log_softmax(2), tg, [3, 2], [2, 2])
    with pytest.raises(IndexError, match="out of range"):
        F.ctc_loss(x.log_softmax(2), _t(np.array([[1, 5], [1, 1]])), [2, 2], [2, 2])


# ---- parity with torch -------------------------------------------------------------------------


def _pair(a, grad=True):
    a = np.asarray(a)
    return (fiamma.tensor(a, requires_grad=grad and a.dtype.kind == "f"),
            torch.tensor(a, requires_grad=grad and a.dtype.kind == "f"))


def _compare(fn_f, fn_t, arrays, grad_idx, rtol=1e-5, atol=1e-5):
    pairs = [_pair(a, i in grad_idx) for i, a in enumerate(arrays)]
    out_f = fn_f(*[p[0] for p in pairs])
    out_t = fn_t(*[p[1] for p in pairs])
    np.testing.assert_allclose(out_f.detach().numpy(), out_t.detach().numpy(), rtol=rtol,
                               atol=atol)
    g = np.random.default_rng(1).standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_f * fiamma.tensor(g)).sum().backward()
    (out_t * torch.tensor(g)).sum().backward()
    for i in grad_idx:
        np.testing.assert_allclose(pairs[i][0].grad.numpy(), pairs[i][1].grad.numpy(),
                                   rtol=rtol, atol=atol)


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, True)])
def test_parity_poisson(rng, reduction, log_input, full):
    x = _f32(rng, 4, 5)
    if not log_input:
        x = np.abs(x)
    t = rng.poisson(2.0, (4, 5)).astype(np.float32)
    kw = dict(log_input=log_input, full=full, reduction=reduction)
    _compare(lambda a, b: nn.PoissonNLLLoss(**kw)(a, b),
             lambda a, b: torch.nn.PoissonNLLLoss(**kw)(a, b), [x, t], [0])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("vshape", [(4, 5), (4, 1), (4,), (1, 5)])
@pytest.mark.parametrize("full", [False, True])
def test_parity_gaussian(rng, reduction, vshape, full):
    x, t = _f32(rng, 4, 5), _f32(rng, 4, 5)
    v = np.abs(_f32(rng, *vshape)) + 0.1
    v.reshape(-1)[0] = 1e-8  # clamped at eps
    kw = dict(full=full, eps=1e-4, reduction=reduction)
    _compare(lambda a, b, c: nn.GaussianNLLLoss(**kw)(a, b, c),
             lambda a, b, c: torch.nn.GaussianNLLLoss(**kw)(a, b, c), [x, t, v], [0, 1, 2],
             rtol=1e-4)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_parity_pair_losses(rng, reduction):
    a, b = _f32(rng, 6, 5), _f32(rng, 6, 5)
    y = np.array([1, -1, 1, -1, 1, -1], dtype=np.float32)
    yy = np.where(rng.random((6, 5)) > 0.5, 1, -1).astype(np.float32)
    for margin in (0.0, 0.3):
        _compare(lambda p, q, r: nn.CosineEmbeddingLoss(margin, reduction=reduction)(p, q, r),
                 lambda p, q, r: torch.nn.CosineEmbeddingLoss(margin, reduction=reduction)(
                     p, q, r), [a, b, y], [0, 1])
        _compare(lambda p, q, r: nn.MarginRankingLoss(margin, reduction=reduction)(p, q, r),
                 lambda p, q, r: torch.nn.MarginRankingLoss(margin, reduction=reduction)(
                     p, q, r), [a[:, 0], b[:, 0], y], [0, 1])
        _compare(lambda p, r: nn.HingeEmbeddingLoss(margin + 1, reduction=reduction)(p, r),
                 lambda p, r: torch.nn.HingeEmbeddingLoss(margin + 1, reduction=reduction)(
                     p, r), [a, yy], [0])
    _compare(lambda p, r: nn.SoftMarginLoss(reduction=reduction)(p, r),
             lambda p, r: torch.nn.SoftMarginLoss(reduction=reduction)(p, r), [a * 3, yy], [0])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_parity_multi_margin(rng, reduction, p, weighted):
    x = _f32(rng, 7, 5)
    y = rng.integers(0, 5, 7)
    w = (rng.random(5) + 0.5).astype(np.float32) if weighted else None

    def mk(lib, mod):
        return mod(p=p, margin=0.8, weight=None if w is None else lib.tensor(w),
                   reduction=reduction)

    _compare(lambda a, b: mk(fiamma, nn.MultiMarginLoss)(a, b),
             lambda a, b: mk(torch, torch.nn.MultiMarginLoss)(a, b), [x, y], [0])
    _compare(lambda a, b: mk(fiamma, nn.MultiMarginLoss)(a, b),
             lambda a, b: mk(torch, torch.nn.MultiMarginLoss)(a, b), [x[0], y[:1]], [0])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_parity_multilabel(rng, reduction):
    x = _f32(rng, 4, 6)
    t = np.array([[3, 0, -1, 1, 1, 2], [1, 2, 3, 4, 5, 0], [-1, 2, 2, 2, 2, 2],
                  [5, 5, -1, 0, 0, 0]])
    _compare(lambda a, b: nn.MultiLabelMarginLoss(reduction=reduction)(a, b),
             lambda a, b: torch.nn.MultiLabelMarginLoss(reduction=reduction)(a, b), [x, t],
             [0])
    _compare(lambda a, b: nn.MultiLabelMarginLoss(reduction=reduction)(a, b),
             lambda a, b: torch.nn.MultiLabelMarginLoss(reduction=reduction)(a, b),
             [x[0], t[0]], [0])
    y = (rng.random((4, 6)) > 0.5).astype(np.float32)
    w = (rng.random(6) + 0.2).astype(np.float32)
    for weight in (None, w):
        _compare(lambda a, b: nn.MultiLabelSoftMarginLoss(
                     None if weight is None else fiamma.tensor(weight), reduction=reduction)(a, b),
                 lambda a, b: torch.nn.MultiLabelSoftMarginLoss(
                     None if weight is None else torch.tensor(weight), reduction=reduction)(a, b),
                 [x, y], [0])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, True), (3.0, False), (2.0, True)])
def test_parity_triplet(rng, reduction, p, swap):
    a, pos, neg = _f32(rng, 5, 8), _f32(rng, 5, 8), _f32(rng, 5, 8)
    kw = dict(margin=2.0, p=p, eps=1e-5, swap=swap, reduction=reduction)
    _compare(lambda *x: nn.TripletMarginLoss(**kw)(*x),
             lambda *x: torch.nn.TripletMarginLoss(**kw)(*x), [a, pos, neg], [0, 1, 2])
    _compare(lambda *x: nn.TripletMarginLoss(**kw)(*x),
             lambda *x: torch.nn.TripletMarginLoss(**kw)(*x), [a[0], pos[0], neg[0]],
             [0, 1, 2])
    kw = dict(margin=1.5, swap=swap, reduction=reduction)
    _compare(lambda *x: nn.TripletMarginWithDistanceLoss(**kw)(*x),
             lambda *x: torch.nn.TripletMarginWithDistanceLoss(**kw)(*x), [a, pos, neg],
             [0, 1, 2])

    def cos_f(u, v):
        return 1 - F.cosine_similarity(u, v)

    def cos_t(u, v):
        return 1 - torch.nn.functional.cosine_similarity(u, v)

    _compare(lambda *x: nn.TripletMarginWithDistanceLoss(distance_function=cos_f, **kw)(*x),
             lambda *x: torch.nn.TripletMarginWithDistanceLoss(distance_function=cos_t,
                                                               **kw)(*x),
             [a, pos, neg], [0, 1, 2])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("blank", [0, 4])
def test_parity_ctc(rng, reduction, concat, blank):
    t_max, n, c, s = 12, 5, 5, 4
    logits = _f32(rng, t_max, n, c)
    labels = [k for k in range(c) if k != blank]
    tl = rng.integers(0, s + 1, n)
    tl[0] = s
    tg = rng.choice(labels, (n, s))
    tg[1, :2] = labels[0]  # a repeated label needs a blank between
    il = rng.integers(8, t_max + 1, n)
    il[0] = t_max
    targets = np.concatenate([tg[i, :tl[i]] for i in range(n)]) if concat else tg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare(lambda x, y, a, b: nn.CTCLoss(blank, reduction)(x.log_softmax(2), y, a, b),
                 lambda x, y, a, b: torch.nn.CTCLoss(blank, reduction)(x.log_softmax(2), y, a,
                                                                       b),
                 [logits, targets, il, tl], [0], rtol=1e-5, atol=1e-5)
    # lengths as tuples, and the zero_infinity branch with an impossible sample
    il2 = il.copy()
    il2[0] = 2
    lf = fiamma.tensor(logits, requires_grad=True)
    lt = torch.tensor(logits, requires_grad=True)
    out_f = F.ctc_loss(lf.log_softmax(2), fiamma.tensor(targets), tuple(il2.tolist()),
                       tuple(tl.tolist()), blank, reduction, zero_infinity=True)
    out_t = torch.nn.functional.ctc_loss(lt.log_softmax(2), torch.tensor(targets),
                                         tuple(il2.tolist()), tuple(tl.tolist()), blank,
                                         reduction, zero_infinity=True)
    np.testing.assert_allclose(out_f.detach().numpy(), out_t.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    out_f.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(lf.grad.numpy(), lt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs_match_contiguous(rng):
    a = rng.standard_normal((5, 4))
    b = rng.standard_normal((5, 4))
    at, bt = _t(a.T.copy()).T, _t(b.T.copy()).T  # transposed views of (4, 5) tensors
    assert not at.is_contiguous()
    ac, bc = _t(a), _t(b)
    y = _t(np.array([1.0, -1.0, 1.0, -1.0, 1.0]))
    ys = _t(np.where(rng.random((5, 4)) > 0.5, 1.0, -1.0))
    cls = _t(np.array([0, 3, 1, 2, 2]))
    fns = [
        lambda u, v: F.poisson_nll_loss(u, v.abs(), full=True, reduction="none"),
        lambda u, v: F.gaussian_nll_loss(u, v, v.abs() + 0.1, reduction="none"),
        lambda u, v: F.cosine_embedding_loss(u, v, y, reduction="none"),
        lambda u, v: F.margin_ranking_loss(u[:, 0], v[::2, 1].repeat(2)[:5], y,
                                           reduction="none"),
        lambda u, v: F.hinge_embedding_loss(u, ys, reduction="none"),
        lambda u, v: F.multi_margin_loss(u, cls, reduction="none"),
        lambda u, v: F.multilabel_soft_margin_loss(u, (ys + 1) / 2, reduction="none"),
        lambda u, v: F.soft_margin_loss(v, ys, reduction="none"),
        lambda u, v: F.triplet_margin_loss(u, v, u * v, reduction="none"),
    ]
    for fn in fns:
        np.testing.assert_allclose(fn(at, bt).numpy(), fn(ac, bc).numpy(), rtol=1e-12)
    lp = _t(_log_softmax(rng.standard_normal((3, 6, 4)), 2))  # (N, T, C) transposed below
    tg = _t(np.array([[1, 2], [3, 3], [1, 0]]))
    ref = F.ctc_loss(lp.transpose(0, 1).contiguous(), tg, [6, 5, 4], [2, 2, 1],
                     reduction="none")
    got = F.ctc_loss(lp.transpose(0, 1), tg, [6, 5, 4], [2, 2, 1], reduction="none")
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12)
    empty = F.ctc_loss(fiamma.zeros(4, 0, 3).log_softmax(2), fiamma.zeros(0, 2).long(), [],
                       [], reduction="sum")
    assert empty.item() == 0


# ---- losses as one named autograd node, as PyTorch's (the 60-minute blitz prints them) ----

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_is_one_named_node(reduction):
    lin = nn.Linear(3, 2)
    out = lin(fiamma.randn(4, 3))
    loss = F.mse_loss(out, fiamma.randn(4, 2), reduction=reduction)
    assert loss.grad_fn.name() == "MseLossBackward0"
    assert repr(loss.grad_fn).startswith("<MseLossBackward0 object at ")
    nxt = loss.grad_fn.next_functions
    assert len(nxt) == 2 and nxt[1][0] is None
    assert nxt[0][0].name() == "AddmmBackward0"


def test_bce_with_logits_is_one_named_node_and_exact():
    x = fiamma.randn(5, 3, dtype=fiamma.float64, requires_grad=True)
    t = fiamma.rand(5, 3, dtype=fiamma.float64)
    w = fiamma.rand(3, dtype=fiamma.float64, requires_grad=True)
    pw = fiamma.rand(3, dtype=fiamma.float64, requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw)
    assert loss.grad_fn.name() == "BinaryCrossEntropyWithLogitsBackward0"
    assert len(loss.grad_fn.next_functions) == 4  # input, target, weight, pos_weight
    # value against the float64 formula in NumPy
    xn, tn, wn, pn = (a.detach().numpy() for a in (x, t, w, pw))
    lw = 1 + (pn - 1) * tn
    ref = (wn * ((1 - tn) * xn + lw * np.logaddexp(0, -xn))).mean()
    assert loss.item() == pytest.approx(ref, rel=1e-12)
    for r in ("mean", "sum", "none"):
        def f(a, b, c, d):
            return F.binary_cross_entropy_with_logits(a, b, c, reduction=r, pos_weight=d)

        assert gradcheck(f, (x, t.requires_grad_(), w, pw))
        assert gradgradcheck(f, (x, t, w, pw))
    t.requires_grad_(False)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_gradients_exact_and_second_order(reduction):
    x = fiamma.randn(4, 3, dtype=fiamma.float64, requires_grad=True)
    t = fiamma.randn(4, 3, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), (x, t))
    assert gradgradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), (x, t))
    # broadcast target (with PyTorch's warning): gradients reduce to each input's shape
    b = fiamma.randn(3, dtype=fiamma.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="target size"):
        assert gradcheck(lambda a, c: F.mse_loss(a, c, reduction=reduction), (x, b))
    loss = F.mse_loss(x, t, reduction="sum")
    gx, = fiamma.autograd.grad(loss, [x])
    np.testing.assert_allclose(gx.numpy(), 2 * (x - t).detach().numpy(), rtol=1e-12)


def test_named_loss_without_grad_is_plain():
    with fiamma.no_grad():
        loss = F.mse_loss(fiamma.ones(3, requires_grad=True), fiamma.zeros(3))
    assert loss.grad_fn is None and loss.item() == 1.0
    with pytest.raises(ValueError, match="mse_loss: bad is not a valid value for reduction"):
        F.mse_loss(fiamma.ones(3), fiamma.ones(3), reduction="bad")


# ---- PyTorch's full functional signatures: size_average / reduce and positional order ----

def test_functional_losses_take_legacy_size_average_and_reduce():
    x = fiamma.randn(4, 3).log_softmax(1)
    t = fiamma.tensor([0, 1, 2, 1])
    want_sum = F.nll_loss(x, t, reduction="sum").item()
    with pytest.warns(UserWarning, match="reduction='sum' instead"):
        assert F.nll_loss(x, t, size_average=False).item() == pytest.approx(want_sum)
    with pytest.warns(UserWarning, match="reduction='none' instead"):
        assert F.cross_entropy(x, t, reduce=False).shape == (4,)
    y = fiamma.randn(4, 3)
    with pytest.warns(UserWarning):
        got = F.mse_loss(x, y, size_average=False)
    assert got.item() == pytest.approx(((x - y) ** 2).sum().item(), rel=1e-6)


def test_functional_losses_take_pytorch_positional_order():
    x = fiamma.randn(4, 3).log_softmax(1)
    t = fiamma.tensor([0, 1, 2, 1])
    w = fiamma.tensor([1.0, 2.0, 0.5])
    # nll_loss(input, target, weight, size_average, ignore_index, reduce, reduction)
    got = F.nll_loss(x, t, w, None, 1, None, "sum")
    assert got.item() == pytest.approx(F.nll_loss(x, t, w, ignore_index=1,
                                                  reduction="sum").item())
    a, b = fiamma.randn(5), fiamma.randn(5)
    s = fiamma.tensor([1.0, -1.0, 1.0, 1.0, -1.0])
    # margin_ranking_loss(input1, input2, target, margin, size_average, reduce, reduction)
    assert F.margin_ranking_loss(a, b, s, 0.5, None, None, "sum").item() == pytest.approx(
        F.margin_ranking_loss(a, b, s, margin=0.5, reduction="sum").item())
    with pytest.raises(TypeError, match="multiple values for argument 'weight'"):
        F.nll_loss(x, t, w, weight=w)
    with pytest.raises(TypeError, match="mse_loss: PyTorch's argument 'weight' is not supported"):
        F.mse_loss(x, x, None, None, "mean", fiamma.ones(3))


_LEGACY_MODULES = ["L1Loss", "MSELoss", "SmoothL1Loss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
                   "BCEWithLogitsLoss", "KLDivLoss", "PoissonNLLLoss", "CosineEmbeddingLoss",
                   "MarginRankingLoss", "HingeEmbeddingLoss", "MultiMarginLoss",
                   "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "SoftMarginLoss",
                   "TripletMarginLoss"]


@pytest.mark.parametrize("name", _LEGACY_MODULES)
def test_loss_modules_take_legacy_size_average_and_reduce(name):
    """``nn.MSELoss(size_average=False)`` (old tutorials) is reduction='sum' with PyTorch's
    warning; ``reduce=False`` is 'none'; without them the reduction is as given."""
    cls = getattr(nn, name)
    with pytest.warns(UserWarning, match="reduction='sum' instead"):
        assert cls(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none' instead"):
        assert cls(reduce=False).reduction == "none"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cls().reduction == "mean" and cls(reduction="sum").reduction == "sum"


def test_loss_modules_take_pytorch_positional_order():
    w = fiamma.tensor([1.0, 2.0, 0.5])
    # CrossEntropyLoss(weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    ce = nn.CrossEntropyLoss(w, None, 1, None, "sum", 0.1)
    assert (ce.ignore_index, ce.reduction, ce.label_smoothing) == (1, "sum", 0.1)
    assert ce.weight is w
    nll = nn.NLLLoss(None, None, 2, None, "none")
    assert (nll.ignore_index, nll.reduction) == (2, "none")
    # L1Loss(size_average, reduce, reduction), SmoothL1Loss(..., beta), KLDivLoss(..., log_target)
    assert nn.L1Loss(None, None, "sum").reduction == "sum"
    sm = nn.SmoothL1Loss(None, None, "sum", 0.5)
    assert (sm.reduction, sm.beta) == ("sum", 0.5)
    kl = nn.KLDivLoss(None, None, "batchmean", True)
    assert (kl.reduction, kl.log_target) == ("batchmean", True)
    pw = fiamma.tensor([2.0])
    bce = nn.BCEWithLogitsLoss(None, None, None, "sum", pw)
    assert bce.reduction == "sum" and bce.pos_weight is pw


def test_mse_loss_module_size_average_false_is_the_sum():
    x, y = fiamma.randn(4, 3), fiamma.randn(4, 3)
    with pytest.warns(UserWarning):
        crit = nn.MSELoss(size_average=False)
    assert crit(x, y).item() == pytest.approx(((x - y) ** 2).sum().item(), rel=1e-6)


@pytest.mark.parity
@pytest.mark.parametrize("name", _LEGACY_MODULES)
def test_parity_loss_module_signatures(name):
    torch = pytest.importorskip("torch")
    import inspect

    want = [p for p in inspect.signature(getattr(torch.nn, name).__init__).parameters]
    got = [p for p in inspect.signature(getattr(nn, name).__init__).parameters]
    assert got == want


def test_margin_losses_at_the_hinge_pass_no_gradient():
    # z = margin - x[y] + x[i] == 0 exactly: PyTorch counts a term only where z > 0
    x = fiamma.tensor([[1.0, 0.0, 2.0]], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(F.multi_margin_loss(x, fiamma.tensor([0])), x)
    # i=1: z = 1 - 1 + 0 = 0 (hinge, no gradient); i=2: z = 2 > 0
    assert g.tolist() == [[-1 / 3, 0.0, 1 / 3]]
    t = fiamma.tensor([[0, -1, 0]])
    (g,) = fiamma.autograd.grad(F.multilabel_margin_loss(x, t), x)
    assert g.tolist() == [[-1 / 3, 0.0, 1 / 3]]


def test_margin_losses_take_a_0d_input():
    x = fiamma.tensor(0.7, requires_grad=True)
    for red in ("none", "mean", "sum"):
        for loss in (F.multi_margin_loss(x, fiamma.tensor(0), reduction=red),
                     F.multilabel_margin_loss(x, fiamma.tensor(0), reduction=red)):
            assert tuple(loss.shape) == () and loss.item() == 0.0 and loss.requires_grad
