"""fiamma.nn.aten: PyTorch's top-level ATen bindings of nn functions (fiamma.dropout,
fiamma.kl_div, fiamma.lstm_cell, ...): NumPy references, and PyTorch's values."""

import warnings

import numpy as np
import pytest

import fiamma
from fiamma.nn import functional as F


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_resolve_at_the_top_level():
    for name in ("dropout", "kl_div", "lstm_cell", "grid_sampler_2d", "conv_tbc"):
        assert getattr(fiamma, name) is getattr(fiamma.nn.aten, name)
    assert F.conv_tbc is not None and F.native_channel_shuffle is not None


def test_integer_reductions():
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((4, 5)), rng.random((4, 5))
    ref = t * (np.log(t) - x)
    for code, r in [(0, ref), (1, ref.mean()), (2, ref.sum())]:
        np.testing.assert_allclose(fiamma.kl_div(fiamma.tensor(x), fiamma.tensor(t), code)
                                   .numpy(), r, rtol=1e-12)
    with pytest.raises(ValueError, match="reduction must be 0"):
        fiamma.kl_div(fiamma.tensor(x), fiamma.tensor(t), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ATen's mean: no 'batchmean' advice
        fiamma.kl_div(fiamma.tensor(x), fiamma.tensor(t), 1)
    z = (t > 0.5) * 1.0
    bce = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    np.testing.assert_allclose(
        fiamma.binary_cross_entropy_with_logits(fiamma.tensor(x), fiamma.tensor(z), None, None,
                                                2).item(), bce.sum(), rtol=1e-12)


def test_cells_equal_their_formulas():
    rng = np.random.default_rng(1)
    H, x, h, c = 3, rng.standard_normal((2, 4)), rng.standard_normal((2, 3)), \
        rng.standard_normal((2, 3))
    w_ih, w_hh = rng.standard_normal((4 * H, 4)), rng.standard_normal((4 * H, H))
    b_ih, b_hh = rng.standard_normal(4 * H), rng.standard_normal(4 * H)
    T = fiamma.tensor
    g = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, gg, o = np.split(g, 4, axis=1)
    c2 = _sig(f) * c + _sig(i) * np.tanh(gg)
    h2, c2f = fiamma.lstm_cell(T(x), [T(h), T(c)], T(w_ih), T(w_hh), T(b_ih), T(b_hh))
    np.testing.assert_allclose(c2f.numpy(), c2, rtol=1e-12)
    np.testing.assert_allclose(h2.numpy(), _sig(o) * np.tanh(c2), rtol=1e-12)
    wi3, wh3, bi3, bh3 = w_ih[:3 * H], w_hh[:3 * H], b_ih[:3 * H], b_hh[:3 * H]
    gi, gh = np.split(x @ wi3.T + bi3, 3, 1), np.split(h @ wh3.T + bh3, 3, 1)
    r, z = _sig(gi[0] + gh[0]), _sig(gi[1] + gh[1])
    n = np.tanh(gi[2] + r * gh[2])
    np.testing.assert_allclose(fiamma.gru_cell(T(x), T(h), T(wi3), T(wh3), T(bi3), T(bh3))
                               .numpy(), (1 - z) * n + z * h, rtol=1e-12)
    w1, v1 = w_ih[:H], w_hh[:H]
    np.testing.assert_allclose(fiamma.rnn_tanh_cell(T(x), T(h), T(w1), T(v1)).numpy(),
                               np.tanh(x @ w1.T + h @ v1.T), rtol=1e-12)
    np.testing.assert_allclose(fiamma.rnn_relu_cell(T(x), T(h), T(w1), T(v1)).numpy(),
                               np.maximum(x @ w1.T + h @ v1.T, 0), rtol=1e-12)


def test_conv_tbc_and_padding_and_norm_except_dim():
    rng = np.random.default_rng(2)
    inp, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), \
        rng.standard_normal(4)
    out = fiamma.conv_tbc(fiamma.tensor(inp), fiamma.tensor(w), fiamma.tensor(b), 1)
    padded = np.pad(inp, ((1, 1), (0, 0), (0, 0)))
    ref = np.stack([sum(padded[t + k] @ w[k] for k in range(3)) + b for t in range(7)])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    assert fiamma.constant_pad_nd(fiamma.ones(2, 3), [1, -1], 7.0).tolist() == \
        [[7.0, 1.0, 1.0], [7.0, 1.0, 1.0]]
    v = rng.standard_normal((3, 4, 5))
    np.testing.assert_allclose(fiamma.norm_except_dim(fiamma.tensor(v), 2, 1).numpy(),
                               np.sqrt((v ** 2).sum((0, 2), keepdims=True)), rtol=1e-12)
    assert fiamma.norm_except_dim(fiamma.tensor(v), 2, -1).shape == ()


def test_dropouts():
    fiamma.manual_seed(0)
    o, m = fiamma.native_dropout(fiamma.ones(1000), 0.3, True)
    assert m.dtype == fiamma.bool
    np.testing.assert_allclose(o.numpy(), m.numpy() / 0.7, rtol=1e-6)
    o, m = fiamma.native_dropout(fiamma.ones(3), 0.3, False)
    assert o.tolist() == [1.0] * 3 and m.all()
    f = fiamma.feature_dropout(fiamma.ones(50, 40, 3), 0.5, True)
    assert (f[:, :, 0] == f[:, :, 2]).all() and set(f.unique().tolist()) == {0.0, 2.0}
    assert fiamma.dropout(fiamma.ones(3), 0.5, False).tolist() == [1.0] * 3
    x = fiamma.ones(4, 4)
    assert fiamma.dropout_(x, 0.5, True) is x


@pytest.mark.parity
def test_aten_bindings_equal_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    y = (rng.random(4) > 0.5) * 2.0 - 1
    img, grid = rng.standard_normal((2, 3, 5, 6)), rng.uniform(-1.1, 1.1, (2, 4, 4, 2))
    wb = rng.standard_normal((3, 5, 5))
    lp = np.log(rng.dirichlet(np.ones(4), (6, 2)))
    inp, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), \
        rng.standard_normal(4)
    cases = [
        lambda L, r: L.binary_cross_entropy_with_logits(
            L.tensor(x), L.tensor((t > 0) * 1.0), L.tensor(np.abs(t)), L.tensor(np.ones(5)), r),
        lambda L, r: L.kl_div(L.tensor(x), L.tensor(np.abs(t)), r, log_target=False),
        lambda L, r: L.cosine_embedding_loss(L.tensor(x), L.tensor(t), L.tensor(y), 0.1, r),
        lambda L, r: L.hinge_embedding_loss(L.tensor(x), L.tensor(np.sign(t)), 0.5, r),
        lambda L, r: L.margin_ranking_loss(L.tensor(x[:, 0]), L.tensor(t[:, 0]), L.tensor(y),
                                           0.2, r),
        lambda L, r: L.poisson_nll_loss(L.tensor(x), L.tensor(np.abs(t)), True, True, 1e-8, r),
        lambda L, r: L.triplet_margin_loss(L.tensor(x), L.tensor(t), L.tensor(x * 0.5), 1.0,
                                           2.0, 1e-6, True, r),
        lambda L, r: L.ctc_loss(L.tensor(lp), L.tensor([[1, 2, 1], [3, 1, 0]]), [6, 5], [3, 2],
                                0, r, False),
        lambda L, r: L.grid_sampler_2d(L.tensor(img), L.tensor(grid), r, 2 - r, r == 1),
        lambda L, r: L.affine_grid_generator(L.tensor(wb[:2, :2, :3]), [2, 3, 4, 5], r == 1),
        lambda L, r: L.bilinear(L.tensor(x), L.tensor(t), L.tensor(wb), None),
        lambda L, r: L.conv_tbc(L.tensor(inp), L.tensor(w), L.tensor(b), r),
        lambda L, r: L.norm_except_dim(L.tensor(wb), 2 + r, r - 1),
        lambda L, r: L.constant_pad_nd(L.tensor(x), [r, -1, 2, 0], 3.0),
        lambda L, r: L.native_channel_shuffle(L.tensor(np.tile(img, (1, 2, 1, 1))), 3),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            for r in (0, 1, 2):
                a = case(fiamma, r).numpy()
                b_ = case(torch, r).detach().numpy()
                np.testing.assert_allclose(a, b_, rtol=1e-6, atol=1e-12)


def _rnn_case(rng, kind, layers, bidir, bias, proj=0):
    T, B, I, H = 5, 3, 4, 6
    dirs = 2 if bidir else 1
    k = {"rnn_tanh": 1, "rnn_relu": 1, "gru": 3, "lstm": 4}[kind]
    hout = proj or H
    params = []
    for layer in range(layers):
        for _ in range(dirs):
            inp = I if layer == 0 else hout * dirs
            params += [rng.standard_normal((k * H, inp)) * 0.5,
                       rng.standard_normal((k * H, hout)) * 0.5]
            if bias:
                params += [rng.standard_normal(k * H) * 0.5, rng.standard_normal(k * H) * 0.5]
            if proj:
                params.append(rng.standard_normal((proj, H)) * 0.5)
    x = rng.standard_normal((T, B, I))
    h0 = rng.standard_normal((layers * dirs, B, hout))
    c0 = rng.standard_normal((layers * dirs, B, H))
    return params, x, h0, c0


@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "gru", "lstm"])
@pytest.mark.parametrize("layers,bidir,bias", [(1, False, True), (2, True, True),
                                               (2, False, False)])
def test_whole_rnn_forms_equal_the_modules(kind, layers, bidir, bias):
    """fiamma.lstm(...) with the flat parameters equals nn.LSTM holding them, and the packed
    overload equals the module on a PackedSequence."""
    rng = np.random.default_rng(7)
    params, x, h0, c0 = _rnn_case(rng, kind, layers, bidir, bias)
    cls = {"rnn_tanh": "RNN", "rnn_relu": "RNN", "gru": "GRU", "lstm": "LSTM"}[kind]
    kw = {"nonlinearity": kind[4:]} if cls == "RNN" else {}
    m = getattr(fiamma.nn, cls)(4, 6, layers, bias=bias, bidirectional=bidir, **kw).double()
    with fiamma.no_grad():
        for p, v in zip(m._flat_weights, params):
            p.copy_(fiamma.tensor(v))
    T = fiamma.tensor
    hx = (T(h0), T(c0)) if kind == "lstm" else T(h0)
    ref = m(T(x), hx)
    ours = getattr(fiamma, kind)(T(x), list(hx) if kind == "lstm" else hx,
                                 [T(p) for p in params], bias, layers, 0.0, False, bidir, False)
    flat_ref = [ref[0]] + (list(ref[1]) if kind == "lstm" else [ref[1]])
    for a, b in zip(ours, flat_ref):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    lens = [5, 3, 2]
    packed = fiamma.nn.utils.rnn.pack_padded_sequence(T(x), lens)
    ref_p = m(packed, hx)
    ours_p = getattr(fiamma, kind)(packed.data, packed.batch_sizes, list(hx) if kind == "lstm"
                                   else hx, [T(p) for p in params], bias, layers, 0.0, False,
                                   bidir)
    np.testing.assert_allclose(ours_p[0].detach().numpy(), ref_p[0].data.detach().numpy(),
                               rtol=1e-10, atol=1e-12)


def test_rnn_form_checks():
    T = fiamma.tensor
    with pytest.raises(RuntimeError, match="got 3 parameters"):
        fiamma.gru(T(np.zeros((2, 1, 3))), T(np.zeros((1, 1, 2))), [T(np.zeros((6, 3)))] * 3,
                   True, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="hx must be a list of two"):
        fiamma.lstm(T(np.zeros((2, 1, 3))), T(np.zeros((1, 1, 2))), [T(np.zeros((8, 3)))] * 2,
                    False, 1, 0.0, False, False, False)


@pytest.mark.parity
@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "gru", "lstm"])
@pytest.mark.parametrize("packed", [False, True])
def test_whole_rnn_forms_equal_pytorch(kind, packed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    proj = 3 if kind == "lstm" else 0
    params, x, h0, c0 = _rnn_case(rng, kind, 2, True, True, proj)
    res = []
    for lib in (torch, fiamma):
        P = [lib.tensor(p) for p in params]
        hx = [lib.tensor(h0), lib.tensor(c0)] if kind == "lstm" else lib.tensor(h0)
        if packed:
            pk = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), [5, 3, 2])
            out = getattr(lib, kind)(lib.tensor(pk.data.numpy()),
                                     lib.tensor(pk.batch_sizes.numpy()), hx, P, True, 2, 0.0,
                                     False, True)
        else:
            out = getattr(lib, kind)(lib.tensor(x.transpose(1, 0, 2)), hx, P, True, 2, 0.0,
                                     False, True, True)
        res.append([o.detach().numpy() for o in out])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["fiamma.nn.aten", "fiamma.nn.grad", "fiamma.nn._linear_xent",
                                  "fiamma.nn.modules.linear_cross_entropy_options"])
def test_docstring_examples(name):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(name))
    assert res.attempted > 0 and res.failed == 0
