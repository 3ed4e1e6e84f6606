"""Recurrent layers and packed sequences: values against a float64 NumPy reference of each
cell, gradients by gradcheck, packed == per-sequence results, clear errors, and (parity
session) outputs and every parameter gradient against torch.nn with the same weights."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck, gradgradcheck
from fiamma.nn.utils import rnn as U

try:
    import torch
except ImportError:
    torch = None

parity = [pytest.mark.parity, pytest.mark.skipif(torch is None, reason="needs torch")]

# ---- float64 NumPy reference -------------------------------------------------------------------


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh, act="tanh"):
    pre = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    return np.tanh(pre) if act == "tanh" else np.maximum(pre, 0)


def np_lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    g = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, gg, o = np.split(g, 4, axis=-1)
    c = _sig(f) * c + _sig(i) * np.tanh(gg)
    h = _sig(o) * np.tanh(c)
    if w_hr is not None:
        h = h @ w_hr.T
    return h, c


def np_gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    xr, xz, xn = np.split(x @ w_ih.T + b_ih, 3, axis=-1)
    hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
    r, z = _sig(xr + hr), _sig(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def np_layers(m, x, h0, c0=None):
    """Reference forward of module ``m`` on x (T, B, I) (time-major): output, h_n, c_n."""
    P = {k: v.detach().numpy().astype(np.float64) for k, v in m.named_parameters()}
    dirs = 2 if m.bidirectional else 1
    T = x.shape[0]
    inp = x
    hn, cn = [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = P["weight_ih" + sfx], P["weight_hh" + sfx]
            b_ih = P.get("bias_ih" + sfx, 0.0)
            b_hh = P.get("bias_hh" + sfx, 0.0)
            k = layer * dirs + d
            h = h0[k]
            c = c0[k] if c0 is not None else None
            out = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                if m.mode == "LSTM":
                    h, c = np_lstm_cell(inp[t], h, c, w_ih, w_hh, b_ih, b_hh,
                                        P.get("weight_hr" + sfx))
                elif m.mode == "GRU":
                    h = np_gru_cell(inp[t], h, w_ih, w_hh, b_ih, b_hh)
                else:
                    h = np_rnn_cell(inp[t], h, w_ih, w_hh, b_ih, b_hh,
                                    "tanh" if m.mode == "RNN_TANH" else "relu")
                out[t] = h
            outs.append(np.stack(out))
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hn), (np.stack(cn) if c0 is not None else None)


def _make(mode, I, H, **kw):
    if mode == "LSTM":
        return nn.LSTM(I, H, dtype=fiamma.float64, **kw)
    if mode == "GRU":
        return nn.GRU(I, H, dtype=fiamma.float64, **kw)
    return nn.RNN(I, H, nonlinearity=mode, dtype=fiamma.float64, **kw)


MODES = ["LSTM", "GRU", "tanh", "relu"]
OPTIONS = [
    {},
    {"num_layers": 2},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"bias": False},
]


# ---- values against NumPy ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_layers_against_numpy(mode, opts):
    rng = np.random.default_rng(0)
    fiamma.manual_seed(1)
    I, H, T, B = 3, 4, 5, 2
    m = _make(mode, I, H, **opts)
    dirs = 2 if m.bidirectional else 1
    L = m.num_layers * dirs
    x = rng.standard_normal((T, B, I))
    h0 = rng.standard_normal((L, B, H))
    c0 = rng.standard_normal((L, B, H))
    ref, rh, rc = np_layers(m, x, h0, c0 if mode == "LSTM" else None)
    fx = fiamma.tensor(x.transpose(1, 0, 2) if m.batch_first else x)
    hx = (fiamma.tensor(h0), fiamma.tensor(c0)) if mode == "LSTM" else fiamma.tensor(h0)
    out, hn = m(fx, hx)
    out = out.detach().numpy()
    if m.batch_first:
        out = out.transpose(1, 0, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(hn[0].detach().numpy(), rh, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(hn[1].detach().numpy(), rc, rtol=1e-10, atol=1e-12)
    else:
        np.testing.assert_allclose(hn.detach().numpy(), rh, rtol=1e-10, atol=1e-12)
    # default h0/c0 are zeros
    out0, _ = m(fx)
    ref0, _, _ = np_layers(m, x, np.zeros((L, B, H)),
                           np.zeros((L, B, H)) if mode == "LSTM" else None)
    out0 = out0.detach().numpy()
    np.testing.assert_allclose(out0.transpose(1, 0, 2) if m.batch_first else out0, ref0,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("opts", [{}, {"num_layers": 2, "bidirectional": True}])
def test_lstm_projection_against_numpy(opts):
    rng = np.random.default_rng(2)
    m = nn.LSTM(3, 5, proj_size=2, dtype=fiamma.float64, **opts)
    assert m.weight_hh_l0.shape == (20, 2) and m.weight_hr_l0.shape == (2, 5)
    L = m.num_layers * (2 if m.bidirectional else 1)
    x, h0, c0 = (rng.standard_normal((4, 2, 3)), rng.standard_normal((L, 2, 2)),
                 rng.standard_normal((L, 2, 5)))
    out, (h, c) = m(fiamma.tensor(x), (fiamma.tensor(h0), fiamma.tensor(c0)))
    ref, rh, rc = np_layers(m, x, h0, c0)
    assert out.shape == (4, 2, 2 * (2 if m.bidirectional else 1))
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), rh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c.detach().numpy(), rc, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_unbatched_and_noncontiguous_input(mode):
    rng = np.random.default_rng(3)
    m = _make(mode, 3, 4, num_layers=2, bidirectional=True)
    x = rng.standard_normal((6, 3))
    out, hn = m(fiamma.tensor(x))
    assert out.shape == (6, 8)
    ref, rh, _ = np_layers(m, x[:, None], np.zeros((4, 1, 4)),
                           np.zeros((4, 1, 4)) if mode == "LSTM" else None)
    np.testing.assert_allclose(out.detach().numpy(), ref[:, 0], rtol=1e-10, atol=1e-12)
    h = hn[0] if mode == "LSTM" else hn
    assert h.shape == (4, 4)
    np.testing.assert_allclose(h.detach().numpy(), rh[:, 0], rtol=1e-10, atol=1e-12)
    # a transposed, step-sliced view gives the same as its contiguous copy
    big = fiamma.tensor(rng.standard_normal((3, 4, 10)))
    view = big.permute(2, 1, 0)[::2]  # (5, 4, 3), non-contiguous
    assert not view.is_contiguous()
    a, _ = m(view)
    b, _ = m(view.contiguous())
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "tanh", "relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_against_numpy(mode, bias):
    rng = np.random.default_rng(4)
    I, H, B = 3, 5, 4
    if mode == "LSTM":
        cell = nn.LSTMCell(I, H, bias=bias, dtype=fiamma.float64)
    elif mode == "GRU":
        cell = nn.GRUCell(I, H, bias=bias, dtype=fiamma.float64)
    else:
        cell = nn.RNNCell(I, H, bias=bias, nonlinearity=mode, dtype=fiamma.float64)
    P = {k: v.detach().numpy() for k, v in cell.named_parameters()}
    b_ih, b_hh = P.get("bias_ih", 0.0), P.get("bias_hh", 0.0)
    x, h, c = (rng.standard_normal((B, I)), rng.standard_normal((B, H)),
               rng.standard_normal((B, H)))
    if mode == "LSTM":
        rh, rc = np_lstm_cell(x, h, c, P["weight_ih"], P["weight_hh"], b_ih, b_hh)
        fh, fc = cell(fiamma.tensor(x), (fiamma.tensor(h), fiamma.tensor(c)))
        np.testing.assert_allclose(fc.detach().numpy(), rc, rtol=1e-10, atol=1e-12)
        uh, uc = cell(fiamma.tensor(x[0]), (fiamma.tensor(h[0]), fiamma.tensor(c[0])))
        assert uh.shape == (H,) and uc.shape == (H,)
        np.testing.assert_allclose(uh.detach().numpy(), rh[0], rtol=1e-10, atol=1e-12)
        z, _ = cell(fiamma.tensor(x))
        rz, _ = np_lstm_cell(x, 0 * h, 0 * c, P["weight_ih"], P["weight_hh"], b_ih, b_hh)
    else:
        if mode == "GRU":
            rh = np_gru_cell(x, h, P["weight_ih"], P["weight_hh"], b_ih, b_hh)
            rz = np_gru_cell(x, 0 * h, P["weight_ih"], P["weight_hh"], b_ih, b_hh)
        else:
            rh = np_rnn_cell(x, h, P["weight_ih"], P["weight_hh"], b_ih, b_hh, mode)
            rz = np_rnn_cell(x, 0 * h, P["weight_ih"], P["weight_hh"], b_ih, b_hh, mode)
        fh = cell(fiamma.tensor(x), fiamma.tensor(h))
        uh = cell(fiamma.tensor(x[1]), fiamma.tensor(h[1]))
        assert uh.shape == (H,)
        np.testing.assert_allclose(uh.detach().numpy(), rh[1], rtol=1e-10, atol=1e-12)
        z = cell(fiamma.tensor(x))
    np.testing.assert_allclose(fh.detach().numpy(), rh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(z.detach().numpy(), rz, rtol=1e-10, atol=1e-12)


# ---- gradients ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_layer_gradcheck(mode):
    fiamma.manual_seed(5)
    kw = {"num_layers": 2, "bidirectional": True}
    m = _make(mode, 2, 2, **kw) if mode != "LSTM" else _make(mode, 2, 3, proj_size=2, **kw)
    x = fiamma.randn(3, 2, 2, dtype=fiamma.float64, requires_grad=True)
    h0 = fiamma.randn(4, 2, 2, dtype=fiamma.float64, requires_grad=True)
    params = list(m.parameters())

    if mode == "LSTM":
        c0 = fiamma.randn(4, 2, 3, dtype=fiamma.float64, requires_grad=True)

        def fn(x, h0, c0, *ps):
            out, (h, c) = m(x, (h0, c0))
            return out, h, c
        assert gradcheck(fn, (x, h0, c0, *params))
    else:
        def fn(x, h0, *ps):
            out, h = m(x, h0)
            return out, h
        assert gradcheck(fn, (x, h0, *params))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_layer_double_backward(mode):
    # the fused gate nodes recompute their activations under create_graph
    fiamma.manual_seed(15)
    m = _make(mode, 2, 2)
    x = fiamma.randn(3, 1, 2, dtype=fiamma.float64, requires_grad=True)
    h0 = fiamma.randn(1, 1, 2, dtype=fiamma.float64, requires_grad=True)
    w = m.weight_hh_l0
    if mode == "LSTM":
        c0 = fiamma.randn(1, 1, 2, dtype=fiamma.float64, requires_grad=True)
        assert gradgradcheck(lambda x, h0, c0, w: m(x, (h0, c0))[1][1], (x, h0, c0, w))
    else:
        assert gradgradcheck(lambda x, h0, w: m(x, h0)[0], (x, h0, w))


def test_fused_lstm_layer_gradients():
    # LSTM without projections runs core's fused layer (one graph node per layer and
    # direction): first and second derivatives of every output w.r.t. every input, the same
    # results without recording, and a one-layer LSTM equal to its composite ops
    fiamma.manual_seed(25)
    m = _make("LSTM", 2, 3, num_layers=2, bidirectional=True, dropout=0.0)
    x = fiamma.randn(4, 2, 2, dtype=fiamma.float64, requires_grad=True)
    h0 = fiamma.randn(4, 2, 3, dtype=fiamma.float64, requires_grad=True)
    c0 = fiamma.randn(4, 2, 3, dtype=fiamma.float64, requires_grad=True)
    params = list(m.parameters())

    def fn(x, h0, c0, *ps):
        out, (h, c) = m(x, (h0, c0))
        return out, h, c
    assert gradcheck(fn, (x, h0, c0, *params))
    assert gradgradcheck(fn, (x, h0, c0, m.weight_hh_l0, m.weight_ih_l1_reverse))
    with fiamma.no_grad():  # not recording: the same results without a node
        ref = fn(x, h0, c0)
    for a, b in zip(fn(x, h0, c0), ref):
        np.testing.assert_array_equal(a.detach().numpy(), b.numpy())
    w_ih, w_hh, b_ih, b_hh = m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0
    one = _make("LSTM", 2, 3)
    one.load_state_dict({"weight_ih_l0": w_ih, "weight_hh_l0": w_hh, "bias_ih_l0": b_ih,
                         "bias_hh_l0": b_hh})
    out, (h, c) = one(x, (h0[:1], c0[:1]))
    (out.sum() + (h * c).sum()).backward()
    gx = x.grad.clone()
    x.grad = None
    hh, cc, outs = h0[0], c0[0], []
    for t in range(4):
        g = x[t] @ w_ih.t() + b_ih + hh @ w_hh.t() + b_hh
        i, f, gg, o = g.chunk(4, 1)
        cc = f.sigmoid() * cc + i.sigmoid() * gg.tanh()
        hh = o.sigmoid() * cc.tanh()
        outs.append(hh)
    np.testing.assert_allclose(out.detach().numpy(), fiamma.stack(outs).detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    (fiamma.stack(outs).sum() + (hh * cc).sum()).backward()
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_fused_lstm_layer_graph_lifetime():
    # the layer node's buffers are saved tensors: retain_graph keeps them for a second
    # backward, without it a second backward is refused; writing into the returned output
    # afterwards does not change the gradient (the output is its own buffer)
    fiamma.manual_seed(26)
    m = _make("LSTM", 3, 4)
    x = fiamma.randn(5, 2, 3, dtype=fiamma.float64, requires_grad=True)
    out, _ = m(x)
    (g1,) = fiamma.autograd.grad(out.sum(), x, retain_graph=True)
    with fiamma.no_grad():
        out.detach().mul_(0.0)
    (g2,) = fiamma.autograd.grad(out.sum(), x)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())
    with pytest.raises(RuntimeError):
        fiamma.autograd.grad(out.sum(), x)


def test_fused_gru_layer_gradients():
    # GRU over sequences of one length runs core's fused layer (one graph node per layer and
    # direction; csrc/gru.c): first and second derivatives of every output w.r.t. every input,
    # the same results without recording, and a one-layer GRU equal to its composite ops
    fiamma.manual_seed(27)
    m = _make("GRU", 2, 3, num_layers=2, bidirectional=True)
    x = fiamma.randn(4, 2, 2, dtype=fiamma.float64, requires_grad=True)
    h0 = fiamma.randn(4, 2, 3, dtype=fiamma.float64, requires_grad=True)
    params = list(m.parameters())

    def fn(x, h0, *ps):
        return m(x, h0)
    assert gradcheck(fn, (x, h0, *params))
    assert gradgradcheck(fn, (x, h0, m.weight_hh_l0, m.bias_hh_l1_reverse,
                              m.weight_ih_l1_reverse))
    with fiamma.no_grad():
        ref = fn(x, h0)
    for a, b in zip(fn(x, h0), ref):
        np.testing.assert_array_equal(a.detach().numpy(), b.numpy())
    for bias in (True, False):
        one = _make("GRU", 2, 3, bias=bias)
        w_ih, w_hh = one.weight_ih_l0, one.weight_hh_l0
        b_ih, b_hh = (one.bias_ih_l0, one.bias_hh_l0) if bias else (0, 0)
        out, h = one(x, h0[:1])
        (out.sum() + (h * h).sum()).backward()
        grads = [x.grad.clone()] + [p.grad.clone() for p in one.parameters()]
        x.grad = None
        for p in one.parameters():
            p.grad = None
        hh, outs = h0[0], []
        for t in range(4):
            gx, gh = x[t] @ w_ih.t() + b_ih, hh @ w_hh.t() + b_hh
            (xr, xz, xn), (hr, hz, hn) = gx.chunk(3, 1), gh.chunk(3, 1)
            r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
            n = (xn + r * hn).tanh()
            hh = (1 - z) * n + z * hh
            outs.append(hh)
        np.testing.assert_allclose(out.detach().numpy(), fiamma.stack(outs).detach().numpy(),
                                   rtol=1e-12, atol=1e-14)
        (fiamma.stack(outs).sum() + (hh * hh).sum()).backward()
        for a, b in zip(grads, [x.grad] + [p.grad for p in one.parameters()]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
        x.grad = None


def test_fused_gru_layer_graph_lifetime():
    # as the LSTM's: retain_graph keeps the node's buffers for a second backward, without it a
    # second backward is refused; the returned output is its own buffer
    fiamma.manual_seed(28)
    m = _make("GRU", 3, 4)
    x = fiamma.randn(5, 2, 3, dtype=fiamma.float64, requires_grad=True)
    out, h = m(x)
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "GRULayerBackward"
    (g1,) = fiamma.autograd.grad(out.sum() + h.sum(), x, retain_graph=True)
    with fiamma.no_grad():
        out.detach().mul_(0.0)
    (g2,) = fiamma.autograd.grad(out.sum() + h.sum(), x)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())
    with pytest.raises(RuntimeError):
        fiamma.autograd.grad(out.sum(), x)


@pytest.mark.parity
@pytest.mark.parametrize("opts", [{"num_layers": 2, "bidirectional": True, "batch_first": True},
                                  {"bias": False}])
def test_parity_fused_gru_layer(opts):
    # the fused layer at sizes where the own sgemm kernel and the threaded cell run, float32 and
    # float64: outputs and every gradient as PyTorch's
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    rng = np.random.default_rng(13)
    I, H, T, B = 24, 100, 6, 40
    for tdt, fdt, tol in ((torch.float64, fiamma.float64, 1e-10),
                          (torch.float32, fiamma.float32, 2e-4)):
        tm = torch.nn.GRU(I, H, **opts).to(tdt)
        fm = nn.GRU(I, H, **opts).to(fdt)
        fm.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tm.state_dict().items()})
        bf = opts.get("batch_first", False)
        x = rng.standard_normal((B, T, I) if bf else (T, B, I))
        L = opts.get("num_layers", 1) * (2 if opts.get("bidirectional") else 1)
        h0 = rng.standard_normal((L, B, H))
        tx, th = (torch.tensor(a, dtype=tdt, requires_grad=True) for a in (x, h0))
        fx, fh = (fiamma.tensor(a, dtype=fdt, requires_grad=True) for a in (x, h0))
        to, thn = tm(tx, th)
        fo, fhn = fm(fx, fh)
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=tol,
                                   atol=tol)
        np.testing.assert_allclose(fhn.detach().numpy(), thn.detach().numpy(), rtol=tol,
                                   atol=tol)
        wo, wh = rng.standard_normal(tuple(to.shape)), rng.standard_normal(tuple(thn.shape))
        ((to * torch.tensor(wo, dtype=tdt)).sum() + (thn * torch.tensor(wh, dtype=tdt)).sum()
         ).backward()
        ((fo * fiamma.tensor(wo, dtype=fdt)).sum() + (fhn * fiamma.tensor(wh, dtype=fdt)).sum()
         ).backward()
        for a, b, what in [(fx.grad, tx.grad, "x"), (fh.grad, th.grad, "h0")] + [
                (p.grad, dict(tm.named_parameters())[n].grad, n)
                for n, p in fm.named_parameters()]:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol * 10, atol=tol * 10,
                                       err_msg=what)


@pytest.mark.parametrize("mode", MODES)
def test_packed_gradcheck(mode):
    fiamma.manual_seed(6)
    m = _make(mode, 2, 2, bidirectional=True)
    x = fiamma.randn(3, 2, 2, dtype=fiamma.float64, requires_grad=True)
    params = list(m.parameters())

    def fn(x, *ps):
        p = U.pack_padded_sequence(x, [1, 2, 1], batch_first=True, enforce_sorted=False)
        out, hn = m(p)
        return out.data, (hn[0] if mode == "LSTM" else hn)
    assert gradcheck(fn, (x, *params))


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "tanh"])
def test_cell_gradcheck(mode):
    fiamma.manual_seed(7)
    cls = {"LSTM": nn.LSTMCell, "GRU": nn.GRUCell, "tanh": nn.RNNCell}[mode]
    cell = cls(2, 3, dtype=fiamma.float64)
    x = fiamma.randn(2, 2, dtype=fiamma.float64, requires_grad=True)
    h = fiamma.randn(2, 3, dtype=fiamma.float64, requires_grad=True)
    ps = list(cell.parameters())
    if mode == "LSTM":
        c = fiamma.randn(2, 3, dtype=fiamma.float64, requires_grad=True)
        assert gradcheck(lambda x, h, c, *p: cell(x, (h, c)), (x, h, c, *ps))
    else:
        assert gradcheck(lambda x, h, *p: cell(x, h), (x, h, *ps))


# ---- packed sequences through the layers -------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_equals_each_sequence_alone(mode, enforce_sorted):
    rng = np.random.default_rng(8)
    m = _make(mode, 3, 4, num_layers=2, bidirectional=True)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    seqs = [fiamma.tensor(rng.standard_normal((n, 3))) for n in lengths]
    L = 4
    h0 = rng.standard_normal((L, 4, 4))
    c0 = rng.standard_normal((L, 4, 4))
    hx = (fiamma.tensor(h0), fiamma.tensor(c0)) if mode == "LSTM" else fiamma.tensor(h0)
    packed = U.pack_sequence(seqs, enforce_sorted=enforce_sorted)
    out, hn = m(packed, hx)
    assert isinstance(out, U.PackedSequence)
    padded, lens = U.pad_packed_sequence(out, batch_first=True)
    assert lens.tolist() == lengths
    for b, s in enumerate(seqs):
        hxb = ((fiamma.tensor(h0[:, b]), fiamma.tensor(c0[:, b])) if mode == "LSTM"
               else fiamma.tensor(h0[:, b]))
        ob, hb = m(s, hxb)
        np.testing.assert_allclose(padded[b, :lengths[b]].detach().numpy(),
                                   ob.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert np.all(padded[b, lengths[b]:].detach().numpy() == 0)
        if mode == "LSTM":
            for k in range(2):
                np.testing.assert_allclose(hn[k][:, b].detach().numpy(),
                                           hb[k].detach().numpy(), rtol=1e-10, atol=1e-12)
        else:
            np.testing.assert_allclose(hn[:, b].detach().numpy(), hb.detach().numpy(),
                                       rtol=1e-10, atol=1e-12)


# ---- utils.rnn ---------------------------------------------------------------------------------

def test_pad_sequence_against_numpy():
    rng = np.random.default_rng(9)
    arrs = [rng.standard_normal((n, 2)) for n in (2, 4, 1)]
    for side in ("right", "left"):
        for bf in (False, True):
            ref = np.full((3, 4, 2), -1.0)
            for b, a in enumerate(arrs):
                if side == "right":
                    ref[b, :len(a)] = a
                else:
                    ref[b, 4 - len(a):] = a
            out = U.pad_sequence([fiamma.tensor(a) for a in arrs], batch_first=bf,
                                 padding_value=-1.0, padding_side=side).numpy()
            np.testing.assert_array_equal(out, ref if bf else ref.transpose(1, 0, 2))
    with pytest.raises(ValueError, match="padding_side"):
        U.pad_sequence([fiamma.zeros(2)], padding_side="middle")
    with pytest.raises(RuntimeError, match="pad_sequence"):
        U.pad_sequence([fiamma.zeros(2, 3), fiamma.zeros(2, 4)])


def test_pack_pad_roundtrip_and_layout():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 3, 2))  # (B, T, F)
    lengths = [2, 3, 1, 3]
    p = U.pack_padded_sequence(fiamma.tensor(x), fiamma.tensor(lengths), batch_first=True,
                               enforce_sorted=False)
    assert p.batch_sizes.tolist() == [4, 3, 2]
    assert p.batch_sizes.dtype == fiamma.int64
    order = p.sorted_indices.tolist()
    assert sorted(lengths[i] for i in order) == sorted(lengths) and \
        [lengths[i] for i in order] == [3, 3, 2, 1]
    assert [order[i] for i in p.unsorted_indices.tolist()] == [0, 1, 2, 3]
    ref = np.concatenate([x[order[:n], t] for t, n in enumerate([4, 3, 2])])
    np.testing.assert_array_equal(p.data.numpy(), ref)
    out, lens = U.pad_packed_sequence(p, batch_first=True, padding_value=7.0, total_length=5)
    assert out.shape == (4, 5, 2) and lens.tolist() == lengths
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(out[b, :n].numpy(), x[b, :n])
        assert np.all(out[b, n:].numpy() == 7.0)
    tm, _ = U.pad_packed_sequence(p)
    assert tm.shape == (3, 4, 2)
    with pytest.raises(ValueError, match="total_length"):
        U.pad_packed_sequence(p, total_length=2)
    seqs = U.unpack_sequence(p)
    assert [s.shape[0] for s in seqs] == lengths
    for s, b in zip(seqs, range(4)):
        np.testing.assert_array_equal(s.numpy(), x[b, :lengths[b]])
    un = U.unpad_sequence(fiamma.tensor(x).transpose(0, 1), lengths)
    np.testing.assert_array_equal(un[1].numpy(), x[1, :3])
    # PackedSequence is a namedtuple; .to() changes the data's dtype only
    d, bs, si, ui = p
    assert d is p.data and bs is p.batch_sizes
    q = p.to(fiamma.float32)
    assert q.data.dtype == fiamma.float32 and q.batch_sizes is p.batch_sizes
    assert q.sorted_indices.dtype == fiamma.int64 and p.to(fiamma.float64) is p
    assert p.float().data.dtype == fiamma.float32


def test_pack_errors():
    x = fiamma.zeros(3, 2)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        U.pack_padded_sequence(x, [1, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        U.pack_padded_sequence(x, [3, 0])
    with pytest.raises(RuntimeError, match="exceeds"):
        U.pack_padded_sequence(x, [4, 1])
    with pytest.raises(ValueError, match="expected 2 lengths"):
        U.pack_padded_sequence(x, [3])
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        U.pack_sequence([fiamma.zeros(1), fiamma.zeros(2)])


def test_pack_gradients_flow_back():
    x = fiamma.randn(3, 2, 2, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(lambda x: U.pack_padded_sequence(x, [2, 3], enforce_sorted=False).data,
                     (x,))
    seqs = [fiamma.randn(n, 2, dtype=fiamma.float64, requires_grad=True) for n in (3, 1)]
    assert gradcheck(lambda a, b: U.pad_packed_sequence(U.pack_sequence([a, b]),
                                                        total_length=4)[0], tuple(seqs))


# ---- modules: construction, parameters, errors -------------------------------------------------

def test_parameter_names_shapes_and_init():
    m = nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=2)
    names = [n for n, _ in m.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_hr_l0"]
    assert names[5] == "weight_ih_l0_reverse" and len(names) == 20
    assert m.weight_ih_l1.shape == (32, 4) and m.weight_hh_l1_reverse.shape == (32, 2)
    assert len(m.all_weights) == 4 and m._flat_weights[0] is m.weight_ih_l0
    g = nn.GRU(3, 100, bias=False)
    assert [n for n, _ in g.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    w = g.weight_hh_l0.detach().numpy()
    assert w.shape == (300, 100) and np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.09
    m.flatten_parameters()
    c = nn.GRUCell(2, 4, bias=False)
    assert c.bias_ih is None and [n for n, _ in c.named_parameters()] == ["weight_ih",
                                                                         "weight_hh"]


def test_constructor_errors():
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(2, 3, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.GRU(2, 3, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.LSTM(2, 0)
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        nn.LSTM(2, 3.0)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(2, 3, dropout=0.5)


@pytest.mark.parametrize("mode", MODES)
def test_forward_errors_name_the_module(mode):
    m = _make(mode, 3, 4, num_layers=2)
    name = type(m).__name__
    x = fiamma.zeros(5, 2, 3, dtype=fiamma.float64)
    with pytest.raises(RuntimeError, match=f"{name}: input.size\\(-1\\) must be equal to "
                       "input_size. Expected 3, got 6"):
        m(fiamma.zeros(5, 2, 6, dtype=fiamma.float64))
    with pytest.raises(ValueError, match=f"{name}: Expected input to be 2D or 3D, got 4D"):
        m(fiamma.zeros(1, 5, 2, 3, dtype=fiamma.float64))
    bad = fiamma.zeros(2, 3, 4, dtype=fiamma.float64)
    hx = (bad, fiamma.zeros(2, 2, 4, dtype=fiamma.float64)) if mode == "LSTM" else bad
    with pytest.raises(RuntimeError, match=f"{name}: Expected hidden.* size \\(2, 2, 4\\), "
                       "got \\[2, 3, 4\\]"):
        m(x, hx)
    with pytest.raises(RuntimeError, match=f"{name}: For batched 3-D input, hx should also "
                       "be 3-D"):
        h2 = fiamma.zeros(2, 4, dtype=fiamma.float64)
        m(x, (h2, h2) if mode == "LSTM" else h2)
    with pytest.raises(RuntimeError, match=f"{name}: input must have the type"):
        m(fiamma.zeros(5, 2, 3))
    with pytest.raises(RuntimeError, match=f"{name}: Expected sequence length to be larger "
                       "than 0"):
        m(fiamma.zeros(0, 2, 3, dtype=fiamma.float64))


def test_cell_errors():
    c = nn.LSTMCell(3, 4)
    with pytest.raises(RuntimeError, match="LSTMCell: input has inconsistent input_size: got "
                       "5 expected 3"):
        c(fiamma.zeros(2, 5))
    with pytest.raises(RuntimeError, match="LSTMCell: Expected hidden\\[1\\] size"):
        c(fiamma.zeros(2, 3), (fiamma.zeros(2, 4), fiamma.zeros(3, 4)))
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D"):
        nn.GRUCell(3, 4)(fiamma.zeros(1, 2, 3))


def test_dropout_between_layers():
    fiamma.manual_seed(11)
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5, dtype=fiamma.float64)
    x = fiamma.randn(5, 2, 3, dtype=fiamma.float64)
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    a = a.detach()
    np.testing.assert_array_equal(a.numpy(), b.detach().numpy())
    m.train()
    c, _ = m(x)
    assert not np.allclose(c.detach().numpy(), a.numpy())
    m1 = nn.GRU(3, 4, num_layers=2, dtype=fiamma.float64)
    m1.load_state_dict(m.state_dict())
    d, _ = m1(x)  # dropout=0: training equals eval
    np.testing.assert_allclose(d.detach().numpy(), a.numpy(), rtol=1e-12)


def test_reprs():
    assert repr(nn.LSTM(10, 20, num_layers=2, batch_first=True, proj_size=5)) == \
        "LSTM(10, 20, proj_size=5, num_layers=2, batch_first=True)"
    assert repr(nn.GRU(3, 4, bias=False, bidirectional=True)) == \
        "GRU(3, 4, bias=False, bidirectional=True)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.LSTMCell(3, 4, bias=False)) == "LSTMCell(3, 4, bias=False)"


def test_float32_layers_and_empty_batch():
    m = nn.LSTM(3, 4)
    out, (h, c) = m(fiamma.randn(5, 2, 3))
    assert out.dtype == fiamma.float32 and h.dtype == fiamma.float32
    out.sum().backward()
    assert m.weight_hh_l0.grad.shape == (16, 4)
    m = nn.GRU(3, 4, batch_first=True)
    out, h = m(fiamma.zeros(0, 5, 3))
    assert out.shape == (0, 5, 4) and h.shape == (1, 0, 4)


# ---- parity with PyTorch -----------------------------------------------------------------------

def _copy_weights(fm, tm):
    tsd = tm.state_dict()
    assert list(tsd) == list(fm.state_dict())
    for k, v in tsd.items():
        assert tuple(v.shape) == tuple(fm.state_dict()[k].shape), k
    fm.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tsd.items()})


def _close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=what)


def _states(h):
    return list(h) if isinstance(h, tuple) else [h]


PARITY = [
    ("LSTM", {}), ("LSTM", {"num_layers": 2}), ("LSTM", {"bidirectional": True}),
    ("LSTM", {"batch_first": True}), ("LSTM", {"proj_size": 3}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": 3, "batch_first": True}),
    ("LSTM", {"bias": False}),
    ("GRU", {}), ("GRU", {"num_layers": 2}), ("GRU", {"bidirectional": True}),
    ("GRU", {"batch_first": True, "num_layers": 2, "bidirectional": True}),
    ("GRU", {"bias": False}),
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {"bidirectional": True, "batch_first": True}), ("RNN", {"bias": False}),
]


@pytest.mark.parametrize("cls,opts", PARITY, ids=lambda o: o if isinstance(o, str)
                         else ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("with_hx", [False, True], ids=["h0=0", "h0"])
@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_layers(cls, opts, packed, with_hx):
    torch.manual_seed(0)
    rng = np.random.default_rng(12)
    I, H, T, B = 5, 6, 7, 4
    tm = getattr(torch.nn, cls)(I, H, **opts)
    fm = getattr(nn, cls)(I, H, **opts)
    _copy_weights(fm, tm)
    assert repr(fm) == repr(tm)
    bf = opts.get("batch_first", False)
    x = rng.standard_normal((B, T, I) if bf else (T, B, I)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    fx = fiamma.tensor(x, requires_grad=True)
    lengths = [5, 7, 2, 5]
    dirs = 2 if opts.get("bidirectional") else 1
    L = opts.get("num_layers", 1) * dirs
    Hr = opts.get("proj_size", 0) or H
    hx = [rng.standard_normal((L, B, Hr)).astype(np.float32)]
    if cls == "LSTM":
        hx.append(rng.standard_normal((L, B, H)).astype(np.float32))
    thx = [torch.tensor(h, requires_grad=True) for h in hx]
    fhx = [fiamma.tensor(h, requires_grad=True) for h in hx]

    def run(mod, inp, hxs, lib):
        if packed:
            inp = lib.nn.utils.rnn.pack_padded_sequence(inp, lengths, batch_first=bf,
                                                        enforce_sorted=False)
        h = None if not with_hx else (tuple(hxs) if cls == "LSTM" else hxs[0])
        out, hn = mod(inp, h)
        if packed:
            out, lens = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=bf)
            assert lens.tolist() == lengths
        return out, _states(hn)

    to, th = run(tm, tx, thx, torch)
    fo, fh = run(fm, fx, fhx, fiamma)
    _close(fo.detach().numpy(), to.detach().numpy(), "output")
    for a, b in zip(fh, th):
        _close(a.detach().numpy(), b.detach().numpy(), "h_n/c_n")
    # a loss touching every output
    wo = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    wh = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in th]
    tl = (to * torch.tensor(wo)).sum() + sum((t * torch.tensor(w)).sum() for t, w in zip(th, wh))
    fl = (fo * fiamma.tensor(wo)).sum() + sum((f * fiamma.tensor(w)).sum()
                                              for f, w in zip(fh, wh))
    tl.backward()
    fl.backward()
    _close(fx.grad.numpy(), tx.grad.numpy(), "input grad")
    if with_hx:
        for a, b in zip(fhx, thx):
            _close(a.grad.numpy(), b.grad.numpy(), "hx grad")
    tp = dict(tm.named_parameters())
    for n, p in fm.named_parameters():
        _close(p.grad.numpy(), tp[n].grad.numpy(), n + " grad")


@pytest.mark.parametrize("cls,kw", [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {}),
                                    ("RNNCell", {"nonlinearity": "relu"}),
                                    ("LSTMCell", {"bias": False}), ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_cells(cls, kw, batched):
    torch.manual_seed(1)
    rng = np.random.default_rng(13)
    tm = getattr(torch.nn, cls)(5, 6, **kw)
    fm = getattr(nn, cls)(5, 6, **kw)
    _copy_weights(fm, tm)
    assert repr(fm) == repr(tm)
    shp = (3,) if batched else ()
    x = rng.standard_normal(shp + (5,)).astype(np.float32)
    hs = [rng.standard_normal(shp + (6,)).astype(np.float32)
          for _ in range(2 if cls == "LSTMCell" else 1)]
    tx, fx = torch.tensor(x, requires_grad=True), fiamma.tensor(x, requires_grad=True)
    th = [torch.tensor(h, requires_grad=True) for h in hs]
    fh = [fiamma.tensor(h, requires_grad=True) for h in hs]
    to = _states(tm(tx, tuple(th) if cls == "LSTMCell" else th[0]))
    fo = _states(fm(fx, tuple(fh) if cls == "LSTMCell" else fh[0]))
    w = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in to]
    sum((t * torch.tensor(a)).sum() for t, a in zip(to, w)).backward()
    sum((f * fiamma.tensor(a)).sum() for f, a in zip(fo, w)).backward()
    for a, b in zip(fo, to):
        _close(a.detach().numpy(), b.detach().numpy(), "output")
    _close(fx.grad.numpy(), tx.grad.numpy(), "input grad")
    for a, b in zip(fh, th):
        _close(a.grad.numpy(), b.grad.numpy(), "hx grad")
    tp = dict(tm.named_parameters())
    for n, p in fm.named_parameters():
        _close(p.grad.numpy(), tp[n].grad.numpy(), n + " grad")
    # default hx
    to0 = _states(tm(tx))
    fo0 = _states(fm(fx))
    for a, b in zip(fo0, to0):
        _close(a.detach().numpy(), b.detach().numpy(), "output, hx=None")


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_sequence_utils():
    rng = np.random.default_rng(14)
    arrs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 3)]
    for side in ("right", "left"):
        a = torch.nn.utils.rnn.pad_sequence([torch.tensor(v) for v in arrs], batch_first=True,
                                            padding_value=2.0, padding_side=side)
        b = U.pad_sequence([fiamma.tensor(v) for v in arrs], batch_first=True,
                           padding_value=2.0, padding_side=side)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    tp = torch.nn.utils.rnn.pack_sequence([torch.tensor(v) for v in arrs], enforce_sorted=False)
    fp = U.pack_sequence([fiamma.tensor(v) for v in arrs], enforce_sorted=False)
    np.testing.assert_array_equal(tp.data.numpy(), fp.data.numpy())
    for f in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(tp, f).tolist() == getattr(fp, f).tolist(), f
    ta, tl = torch.nn.utils.rnn.pad_packed_sequence(tp, total_length=6, padding_value=-3.0)
    fa, fl = U.pad_packed_sequence(fp, total_length=6, padding_value=-3.0)
    np.testing.assert_array_equal(ta.numpy(), fa.numpy())
    assert tl.tolist() == fl.tolist()
