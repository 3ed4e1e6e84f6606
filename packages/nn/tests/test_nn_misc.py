"""Distances, normalize, one_hot, embedding_bag / EmbeddingBag and the channel/alpha
dropouts: values against float64 NumPy, gradients by gradcheck, parity with torch."""

import warnings

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


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _t(a, grad=False):
    return fiamma.tensor(np.asarray(a), requires_grad=grad)


# ---- distances and normalisation ------------------------------------------------------------


def test_normalize_and_distances(rng):
    x = rng.standard_normal((4, 5))
    y = rng.standard_normal((4, 5))
    for p in (1.0, 2.0, 3.0):
        ref = x / np.maximum((np.abs(x) ** p).sum(1, keepdims=True) ** (1 / p), 1e-12)
        np.testing.assert_allclose(F.normalize(_t(x), p=p).numpy(), ref, rtol=1e-12)
        ref = (np.abs(x - y + 1e-6) ** p).sum(-1) ** (1 / p)
        np.testing.assert_allclose(F.pairwise_distance(_t(x), _t(y), p=p).numpy(), ref,
                                   rtol=1e-12)
        ref = np.array([(np.abs(x[i] - x[j]) ** p).sum() ** (1 / p)
                        for i in range(4) for j in range(i + 1, 4)])
        np.testing.assert_allclose(F.pdist(_t(x), p=p).numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(F.normalize(_t(x), dim=0).numpy(),
                               x / np.linalg.norm(x, axis=0), rtol=1e-12)
    assert F.normalize(fiamma.zeros(2, 3)).abs().sum().item() == 0
    out = fiamma.empty(4, 5, dtype=fiamma.float64)
    assert F.normalize(_t(x), out=out) is out
    cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
    np.testing.assert_allclose(F.cosine_similarity(_t(x), _t(y)).numpy(), cos, rtol=1e-12)
    np.testing.assert_allclose(F.cosine_similarity(_t(x), _t(y[:1]), dim=-1).numpy(),
                               (x * y[:1]).sum(1) / np.linalg.norm(x, axis=1)
                               / np.linalg.norm(y[0]), rtol=1e-12)
    assert F.cosine_similarity(fiamma.zeros(2, 3), fiamma.ones(2, 3)).abs().sum().item() == 0
    keep = F.pairwise_distance(_t(x), _t(y), keepdim=True)
    assert tuple(keep.shape) == (4, 1)
    assert tuple(F.pdist(fiamma.ones(1, 3)).shape) == (0,)
    xt = _t(x).T  # non-contiguous
    np.testing.assert_allclose(nn.CosineSimilarity(dim=0)(xt, xt).numpy(), np.ones(4),
                               rtol=1e-12)
    np.testing.assert_allclose(nn.PairwiseDistance(p=1.0, eps=0.0)(xt, xt * 2).numpy(),
                               np.abs(x.T).sum(-1), rtol=1e-12)
    with pytest.raises(RuntimeError, match="2D"):
        F.pdist(fiamma.ones(3))
    assert F.one_hot(fiamma.tensor([2, 0]), 3).tolist() == [[0, 0, 1], [1, 0, 0]]


def test_distance_gradchecks(rng):
    x = _t(rng.standard_normal((3, 4)), True)
    y = _t(rng.standard_normal((3, 4)), True)
    assert gradcheck(lambda a: F.normalize(a, p=3.0, dim=0), (x,))
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b), (x, y))
    assert gradcheck(lambda a, b: F.pairwise_distance(a, b, p=1.5), (x, y))
    assert gradcheck(lambda a: F.pdist(a), (x,))


# ---- embedding_bag ---------------------------------------------------------------------------


def _bag_ref(w, idx, offsets, mode, psw=None, padding_idx=None, include_last=False):
    m = len(idx)
    starts = list(offsets[:-1]) if include_last else list(offsets)
    ends = list(offsets[1:]) if include_last else list(offsets[1:]) + [m]
    out = np.zeros((len(starts), w.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        rows = [w[idx[k]] * (psw[k] if psw is not None else 1) for k in range(s, e)
                if idx[k] != padding_idx]
        if rows:
            rows = np.stack(rows)
            out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("include_last", [False, True])
def test_embedding_bag_values(rng, mode, padding_idx, include_last):
    w = rng.standard_normal((6, 3))
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 0, 2])
    offsets = np.array([0, 2, 2, 5, 9]) if include_last else np.array([0, 2, 2, 5])
    got = F.embedding_bag(_t(idx), _t(w), _t(offsets), mode=mode, padding_idx=padding_idx,
                          include_last_offset=include_last)
    np.testing.assert_allclose(got.numpy(), _bag_ref(w, idx, offsets, mode,
                                                     padding_idx=padding_idx,
                                                     include_last=include_last), rtol=1e-12)
    idx2 = idx[:8].reshape(2, 4)
    got = F.embedding_bag(_t(idx2), _t(w), mode=mode, padding_idx=padding_idx)
    np.testing.assert_allclose(got.numpy(), _bag_ref(w, idx[:8], [0, 4], mode,
                                                     padding_idx=padding_idx), rtol=1e-12)


def test_embedding_bag_weights_grads_errors(rng):
    w = rng.standard_normal((6, 3))
    idx = np.array([1, 2, 4, 5, 4])
    psw = rng.random(5)
    got = F.embedding_bag(_t(idx), _t(w), _t([0, 3]), mode="sum", per_sample_weights=_t(psw))
    np.testing.assert_allclose(got.numpy(), _bag_ref(w, idx, [0, 3], "sum", psw), rtol=1e-12)
    wt = _t(w, True)
    pt = _t(psw, True)
    for mode in ("sum", "mean", "max"):
        assert gradcheck(lambda a: F.embedding_bag(_t(idx), a, _t([0, 1, 3]), mode=mode,
                                                   padding_idx=4), (wt,))
    assert gradcheck(lambda a, b: F.embedding_bag(_t(idx), a, _t([0, 3]), mode="sum",
                                                  per_sample_weights=b), (wt, pt))
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(_t(idx), _t(w), _t([0, 3]), mode="mean", per_sample_weights=_t(psw))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(_t(idx.reshape(1, 5)), _t(w), _t([0]))
    with pytest.raises(RuntimeError, match="offsets\\[0\\]"):
        F.embedding_bag(_t(idx), _t(w), _t([1, 3]))
    with pytest.raises(IndexError, match="out of range"):
        F.embedding_bag(_t([1, 7]), _t(w), _t([0]))
    bag = nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
    assert bag.weight[0].abs().sum().item() == 0
    assert repr(bag) == "EmbeddingBag(10, 3, mode='max', padding_idx=0)"
    pre = nn.EmbeddingBag.from_pretrained(_t(w), mode="sum")
    assert not pre.weight.requires_grad
    np.testing.assert_allclose(pre(_t(idx), _t([0, 3])).numpy(),
                               _bag_ref(w, idx, [0, 3], "sum"), rtol=1e-12)


# ---- dropouts ----------------------------------------------------------------------------------


def test_channel_dropouts():
    fiamma.manual_seed(0)
    for fn, shape, lead in ((F.dropout1d, (8, 16, 5), 2), (F.dropout2d, (8, 16, 3, 4), 2),
                            (F.dropout3d, (8, 16, 2, 3, 2), 2), (F.dropout1d, (16, 5), 1),
                            (F.dropout3d, (16, 2, 3, 2), 1)):
        x = fiamma.ones(shape)
        y = fn(x, 0.4).numpy()
        assert y.shape == shape
        flat = y.reshape(int(np.prod(shape[:lead])), -1)
        # each channel all zero or all 1 / (1 - p), both seen
        assert (flat == flat[:, :1]).all()
        zero = flat[:, 0] == 0
        assert np.allclose(flat[~zero, 0], 1 / 0.6) and 0 < zero.sum() < len(zero)
        assert fn(x, 0.4, training=False) is x
    with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
        F.dropout1d(fiamma.ones(2, 3, 4, 5))
    with pytest.warns(UserWarning, match="3D input to dropout2d"):
        F.dropout2d(fiamma.ones(2, 3, 4))
    with pytest.warns(UserWarning, match="3-D input to dropout3d"):
        assert tuple(F.dropout3d(fiamma.ones(2, 3, 4)).shape) == (2, 3, 4)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(fiamma.ones(3), 0.5, training=True)
    x = fiamma.ones(4, 6, 5)
    F.dropout1d(x, 0.5, inplace=True)
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout2d(1.5)
    m = nn.Dropout3d(0.3).eval()
    z = fiamma.ones(2, 3, 2, 2, 2)
    assert m(z) is z


def test_alpha_dropouts_keep_mean_and_variance():
    fiamma.manual_seed(1)
    x = fiamma.randn(200000, dtype=fiamma.float64)
    for p in (0.2, 0.5):
        y = F.alpha_dropout(x, p, training=True).numpy()
        assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
        # dropped values all take the same value: alpha' * a + b
        a = 1 / np.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
        dropped = -1.7580993408473766 * a + 1.7580993408473766 * a * p
        np.testing.assert_allclose((np.isclose(y, dropped)).mean(), p, atol=0.01)
    assert F.alpha_dropout(x, 0.5) is x  # training defaults to False
    xf = fiamma.randn(4000, 8, 3, dtype=fiamma.float64)
    y = F.feature_alpha_dropout(xf, 0.5, training=True).numpy()
    a = 1 / np.sqrt((1.7580993408473766 ** 2 * 0.5 + 1) * 0.5)
    kept = np.isclose(y - a * xf.numpy(), 1.7580993408473766 * a * 0.5)
    dropped = np.isclose(y, -1.7580993408473766 * a * 0.5)
    # one noise per channel: each channel wholly kept or wholly dropped
    assert (kept.all(2) | dropped.all(2)).all() and 0.45 < kept.all(2).mean() < 0.55
    m = nn.AlphaDropout(0.3)
    assert m.training and repr(m) == "AlphaDropout(p=0.3, inplace=False)"
    assert nn.FeatureAlphaDropout(0.2).eval()(xf) is xf
    assert F.alpha_dropout(x, 1.0, training=True).abs().sum().item() == 0


# ---- parity with torch -------------------------------------------------------------------------


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("mode,per_sample", [("sum", False), ("sum", True), ("mean", False),
                                             ("max", False)])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("include_last", [False, True])
def test_parity_embedding_bag(rng, mode, padding_idx, include_last, per_sample):
    tb = torch.nn.EmbeddingBag(8, 4, mode=mode, padding_idx=padding_idx,
                               include_last_offset=include_last)
    fb = nn.EmbeddingBag(8, 4, mode=mode, padding_idx=padding_idx,
                         include_last_offset=include_last)
    assert list(tb.state_dict()) == list(fb.state_dict())
    assert repr(tb) == repr(fb)
    fb.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tb.state_dict().items()})
    idx = rng.integers(0, 8, 11)
    idx[:2] = 3
    offsets = np.array([0, 2, 2, 6, 11]) if include_last else np.array([0, 2, 2, 6])
    psw = rng.random(11).astype(np.float32) if per_sample else None
    pf = None if psw is None else fiamma.tensor(psw, requires_grad=True)
    pt = None if psw is None else torch.tensor(psw, requires_grad=True)
    of = fb(fiamma.tensor(idx), fiamma.tensor(offsets), pf)
    ot = tb(torch.tensor(idx), torch.tensor(offsets), pt)
    np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(tuple(ot.shape)).astype(np.float32)
    (of * fiamma.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fb.weight.grad.numpy(), tb.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-6)
    if per_sample:
        np.testing.assert_allclose(pf.grad.numpy(), pt.grad.numpy(), rtol=1e-5, atol=1e-6)
    # 2-D input
    i2 = rng.integers(0, 8, (3, 4))
    np.testing.assert_allclose(fb(fiamma.tensor(i2)).detach().numpy(),
                               tb(torch.tensor(i2)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_parity_embedding_bag_max_norm(rng, mode):
    w = (rng.standard_normal((6, 3)) * 2).astype(np.float32)
    tb = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), freeze=False, max_norm=1.5,
                                               mode=mode)
    fb = nn.EmbeddingBag.from_pretrained(fiamma.tensor(w), freeze=False, max_norm=1.5,
                                         mode=mode)
    idx = np.array([0, 2, 2, 5, 1])
    ot = tb(torch.tensor(idx), torch.tensor([0, 3]))
    of = fb(fiamma.tensor(idx), fiamma.tensor([0, 3]))
    np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fb.weight.detach().numpy(), tb.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)  # the rows used were renormalised
    ot.sum().backward()
    of.sum().backward()
    np.testing.assert_allclose(fb.weight.grad.numpy(), tb.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_distances(rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.standard_normal((5, 6)).astype(np.float32)
    cases = [
        (lambda a, b: F.cosine_similarity(a, b), torch.nn.functional.cosine_similarity),
        (lambda a, b: F.cosine_similarity(a, b[:1], dim=1, eps=0.5),
         lambda a, b: torch.nn.functional.cosine_similarity(a, b[:1], dim=1, eps=0.5)),
        (lambda a, b: F.pairwise_distance(a, b, 3.0, keepdim=True),
         lambda a, b: torch.nn.functional.pairwise_distance(a, b, 3.0, keepdim=True)),
        (lambda a, b: F.pairwise_distance(a, b, 1.0),
         lambda a, b: torch.nn.functional.pairwise_distance(a, b, 1.0)),
        (lambda a, b: F.normalize(a * b, p=1.5, dim=0),
         lambda a, b: torch.nn.functional.normalize(a * b, p=1.5, dim=0)),
        (lambda a, b: F.pdist(a + b), lambda a, b: torch.nn.functional.pdist(a + b)),
        (lambda a, b: F.pdist(a, p=1.0), lambda a, b: torch.nn.functional.pdist(a, p=1.0)),
    ]
    for ff, ft in cases:
        af, bf = (fiamma.tensor(v, requires_grad=True) for v in (x, y))
        at, bt = (torch.tensor(v, requires_grad=True) for v in (x, y))
        of, ot = ff(af, bf), ft(at, bt)
        np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        of.pow(2).sum().backward()
        ot.pow(2).sum().backward()
        for pf, pt in ((af, at), (bf, bt)):
            if pt.grad is not None:
                np.testing.assert_allclose(pf.grad.numpy(), pt.grad.numpy(), rtol=1e-5,
                                           atol=1e-5)
    for mf, mt in ((nn.CosineSimilarity(dim=0, eps=1e-6), torch.nn.CosineSimilarity(0, 1e-6)),
                   (nn.PairwiseDistance(1.0, 1e-3, True),
                    torch.nn.PairwiseDistance(1.0, 1e-3, True)),
                   (nn.Dropout1d(0.2), torch.nn.Dropout1d(0.2)),
                   (nn.FeatureAlphaDropout(0.1), torch.nn.FeatureAlphaDropout(0.1))):
        assert repr(mf) == repr(mt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert repr(nn.PairwiseDistance()) == repr(torch.nn.PairwiseDistance())
