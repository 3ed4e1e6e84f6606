"""Fused LSTM cell arithmetic (fiamma.fused_lstm_cell / fused_lstm_cell_backward; csrc/lstm.c
and the array-module backend's) against a float64 NumPy reference and numerical derivatives,
on the CPU and the other devices, plus its errors."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _ref(gates, c):
    H = c.shape[1]
    i, f, o = _sig(gates[:, :H]), _sig(gates[:, H:2 * H]), _sig(gates[:, 3 * H:])
    g = np.tanh(gates[:, 2 * H:3 * H])
    cy = f * c + i * g
    return o * np.tanh(cy), cy


def _numgrad(gates, c, dh, dc, eps=1e-6):
    """d(sum(hy dh + cy dc)) / d(gates, c) by central differences."""
    def loss(g, cc):
        h, cy = _ref(g, cc)
        return (h * dh).sum() + (cy * dc).sum()
    out = []
    for a in (gates, c):
        d = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            a[idx] += eps
            up = loss(gates, c)
            a[idx] -= 2 * eps
            down = loss(gates, c)
            a[idx] += eps
            d[idx] = (up - down) / (2 * eps)
        out.append(d)
    return out


@pytest.mark.parametrize("B,H", [(3, 5), (1, 17), (4, 33)])
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
def test_against_reference(B, H, dt):
    rng = np.random.default_rng(B * H)
    gates = rng.standard_normal((B, 4 * H)) * 2
    c = rng.standard_normal((B, H))
    hy, cy, ws = fiamma.fused_lstm_cell(fiamma.tensor(gates, dtype=dt), fiamma.tensor(c, dtype=dt))
    h_ref, c_ref = _ref(gates, c)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dt is fiamma.float32 else {"rtol": 1e-12, "atol": 0}
    assert hy.dtype is dt and tuple(hy.shape) == (B, H)
    np.testing.assert_allclose(hy.numpy(), h_ref, **tol)
    np.testing.assert_allclose(cy.numpy(), c_ref, **tol)
    dh, dc = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    t = [fiamma.tensor(a, dtype=dt) for a in (dh, dc, c)]
    gg, gc = fiamma.fused_lstm_cell_backward(*t, cy, ws)
    ng, nc = _numgrad(gates.copy(), c.copy(), dh, dc)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dt is fiamma.float32 else {"rtol": 1e-7, "atol": 1e-8}
    np.testing.assert_allclose(gg.numpy(), ng, **tol)
    np.testing.assert_allclose(gc.numpy(), nc, **tol)


def test_missing_gradients_are_zero_and_strided_gates():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((3, 30))
    gates, c = fiamma.tensor(big)[:, 2:22], fiamma.tensor(rng.standard_normal((3, 5)))
    hy, cy, ws = fiamma.fused_lstm_cell(gates, c)
    h_ref, c_ref = _ref(big[:, 2:22], c.numpy())
    np.testing.assert_allclose(hy.numpy(), h_ref, rtol=1e-12)
    zero = fiamma.zeros(3, 5, dtype=fiamma.float64)
    dh = fiamma.tensor(rng.standard_normal((3, 5)))
    for a, b in zip(fiamma.fused_lstm_cell_backward(dh, None, c, cy, ws),
                    fiamma.fused_lstm_cell_backward(dh, zero, c, cy, ws)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(fiamma.fused_lstm_cell_backward(None, dh, c, cy, ws),
                    fiamma.fused_lstm_cell_backward(zero, dh, c, cy, ws)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_half_precision_and_empty():
    rng = np.random.default_rng(1)
    g, c = rng.standard_normal((2, 8)), rng.standard_normal((2, 2))
    hy, cy, ws = fiamma.fused_lstm_cell(fiamma.tensor(g, dtype=fiamma.bfloat16),
                                        fiamma.tensor(c, dtype=fiamma.bfloat16))
    assert hy.dtype is fiamma.bfloat16 and ws.dtype is fiamma.float32
    np.testing.assert_allclose(hy.float().numpy(), _ref(g, c)[0], atol=0.02)
    gg, gc = fiamma.fused_lstm_cell_backward(fiamma.ones(2, 2, dtype=fiamma.bfloat16), None,
                                             fiamma.tensor(c, dtype=fiamma.bfloat16), cy, ws)
    assert gg.dtype is fiamma.bfloat16 and tuple(gg.shape) == (2, 8)
    hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(0, 12), fiamma.zeros(0, 3))
    assert tuple(hy.shape) == (0, 3) and tuple(ws.shape) == (0, 12)


def test_errors():
    with pytest.raises(RuntimeError, match=r"gates \(B, 4H\)"):
        fiamma.fused_lstm_cell(fiamma.zeros(2, 7), fiamma.zeros(2, 2))
    with pytest.raises(RuntimeError, match="one floating dtype"):
        fiamma.fused_lstm_cell(fiamma.zeros(2, 8), fiamma.zeros(2, 2, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="one floating dtype"):
        fiamma.fused_lstm_cell(fiamma.zeros(2, 8, dtype=fiamma.int64),
                               fiamma.zeros(2, 2, dtype=fiamma.int64))
    with pytest.raises(TypeError, match="cx to be a Tensor"):
        fiamma.fused_lstm_cell(fiamma.zeros(2, 8), 1.0)
    hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(2, 8), fiamma.zeros(2, 2))
    with pytest.raises(RuntimeError, match="grad_hy of shape"):
        fiamma.fused_lstm_cell_backward(fiamma.zeros(3, 2), None, fiamma.zeros(2, 2), cy, ws)
    with pytest.raises(RuntimeError, match="workspace"):
        fiamma.fused_lstm_cell_backward(None, None, fiamma.zeros(2, 2), cy, fiamma.zeros(2, 7))


def test_refuses_to_record():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    with pytest.raises(RuntimeError, match="not differentiable"):
        fiamma.fused_lstm_cell(fiamma.zeros(2, 8, requires_grad=True), fiamma.zeros(2, 2))


def test_on_device(device):
    rng = np.random.default_rng(2)
    for dt in (fiamma.float32, fiamma.float64):
        g = fiamma.tensor(rng.standard_normal((3, 12)), dtype=dt)
        c = fiamma.tensor(rng.standard_normal((3, 3)), dtype=dt)
        want = fiamma.fused_lstm_cell(g, c)
        got = fiamma.fused_lstm_cell(g.to(device), c.to(device))
        for a, b in zip(got, want):
            assert_same(a, b)
        dh = fiamma.tensor(rng.standard_normal((3, 3)), dtype=dt)
        for a, b in zip(fiamma.fused_lstm_cell_backward(dh.to(device), None, c.to(device),
                                                        got[1], got[2]),
                        fiamma.fused_lstm_cell_backward(dh, None, c, want[1], want[2])):
            assert_same(a, b)


# ---- a whole layer: fused_lstm_layer / fused_lstm_layer_backward --------------------------------

def _layer_ref(xw, w, h0, c0, reverse):
    """float64 NumPy: the states after each step (time order) and the final state."""
    T = xw.shape[0] // h0.shape[0]
    B = h0.shape[0]
    h, c, outs = h0, c0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h, c = _ref(xw[t * B:(t + 1) * B] + h @ w.T, c)
        outs[t] = h
    return np.concatenate(outs), h, c


def _layer_loss(xw, w, h0, c0, reverse, go, gh, gc):
    out, h, c = _layer_ref(xw, w, h0, c0, reverse)
    return (out * go).sum() + (h * gh).sum() + (c * gc).sum()


# (33, 100): the own AVX-512 kernel with a prepacked weight, 400 = 4H columns not a multiple of
# its 32-wide slivers; (16, 130): backward k = 520 in two blocks; (2, 3): BLAS; (40, 256): the
# cell's rows split between threads too (float32, 2 threads)
@pytest.mark.parametrize("T,B,H", [(4, 33, 100), (3, 16, 130), (5, 2, 3), (1, 1, 1),
                                   (3, 40, 256)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_against_reference(T, B, H, reverse, threads):
    rng = np.random.default_rng(T * B * H + reverse)
    xw = rng.standard_normal((T * B, 4 * H))
    w = rng.standard_normal((4 * H, H)) / np.sqrt(H)
    h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    go, gh, gc = (rng.standard_normal(s) for s in ((T * B, H), (B, H), (B, H)))
    ro, rh, rc = _layer_ref(xw, w, h0, c0, reverse)
    old = fiamma.get_num_threads()
    fiamma.set_num_threads(threads)
    try:
        for dt, tol in ((fiamma.float64, 1e-11), (fiamma.float32, 2e-5)):
            args = [fiamma.tensor(a, dtype=dt) for a in (xw, w, h0, c0)]
            out, hn, cn, saved = fiamma.fused_lstm_layer(*args, reverse=reverse)
            for got, want in ((out, ro), (hn, rh), (cn, rc)):
                assert got.dtype is dt
                np.testing.assert_allclose(got.numpy(), want, rtol=tol * 10, atol=tol)
            # the states each step read, for the recurrent weight's gradient
            prev = np.concatenate([h0, ro[:-B]]) if not reverse else np.concatenate([ro[B:], h0])
            np.testing.assert_allclose(saved[0].numpy(), prev, rtol=tol * 10, atol=tol)
            gx, gh0, gc0 = fiamma.fused_lstm_layer_backward(
                *(fiamma.tensor(a, dtype=dt) for a in (go, gh, gc)), args[1], saved)
            if dt is fiamma.float64:  # derivatives: central differences of the reference
                base = [xw, w, h0, c0]
                for k, got in ((0, gx), (2, gh0), (3, gc0)):
                    a = base[k]
                    for idx in list(np.ndindex(a.shape))[::max(1, a.size // 25)]:
                        a[idx] += 1e-6
                        up = _layer_loss(*base, reverse, go, gh, gc)
                        a[idx] -= 2e-6
                        down = _layer_loss(*base, reverse, go, gh, gc)
                        a[idx] += 1e-6
                        assert abs(got.numpy()[idx] - (up - down) / 2e-6) < 1e-6
                ref64 = (gx, gh0, gc0)
            else:
                for got, want in zip((gx, gh0, gc0), ref64):
                    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-3, atol=1e-4)
        # missing incoming gradients are zeros
        args = [fiamma.tensor(a) for a in (xw, w, h0, c0)]
        _, _, _, saved = fiamma.fused_lstm_layer(*args, reverse=reverse)
        a = fiamma.fused_lstm_layer_backward(fiamma.tensor(go), None, None, args[1], saved)
        b = fiamma.fused_lstm_layer_backward(fiamma.tensor(go), fiamma.zeros(B, H),
                                             fiamma.zeros(B, H), args[1], saved)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    finally:
        fiamma.set_num_threads(old)


def test_layer_errors():
    z = fiamma.zeros
    with pytest.raises(RuntimeError, match=r"fused_lstm_layer: expected w_hh of shape \(8, 2\)"):
        fiamma.fused_lstm_layer(z(6, 8), z(8, 3), z(3, 2), z(3, 2))
    with pytest.raises(RuntimeError, match="expected xw of shape"):
        fiamma.fused_lstm_layer(z(5, 8), z(8, 2), z(3, 2), z(3, 2))
    with pytest.raises(RuntimeError, match="h0 and c0 of one shape"):
        fiamma.fused_lstm_layer(z(6, 8), z(8, 2), z(3, 2), z(2, 2))
    with pytest.raises(RuntimeError, match="float32 or float64"):
        fiamma.fused_lstm_layer(z(6, 8, dtype=fiamma.float16), z(8, 2), z(3, 2), z(3, 2))
    with pytest.raises(TypeError, match="expected c0 to be a Tensor"):
        fiamma.fused_lstm_layer(z(6, 8), z(8, 2), z(3, 2), None)
    _, _, _, saved = fiamma.fused_lstm_layer(z(6, 8), z(8, 2), z(3, 2), z(3, 2))
    with pytest.raises(RuntimeError, match=r"expected grad_out of shape \(6, 2\)"):
        fiamma.fused_lstm_layer_backward(z(5, 2), None, None, z(8, 2), saved)
    with pytest.raises(RuntimeError, match="expected w_hh"):
        fiamma.fused_lstm_layer_backward(None, None, None, z(8, 3), saved)
    with pytest.raises(TypeError, match="saved tuple"):
        fiamma.fused_lstm_layer_backward(None, None, None, z(8, 2), (1, 2))


def test_layer_on_device(device):
    # other backends run the per-step fallback: the same numbers as the C loop
    rng = np.random.default_rng(9)
    for reverse in (False, True):
        a = [fiamma.tensor(rng.standard_normal(s)) for s in ((12, 16), (16, 4), (3, 4), (3, 4))]
        want = fiamma.fused_lstm_layer(*a, reverse=reverse)
        got = fiamma.fused_lstm_layer(*(t.to(device) for t in a), reverse=reverse)
        for x, y in zip(got[:3], want[:3]):
            np.testing.assert_allclose(x.cpu().numpy(), y.numpy(), rtol=1e-5, atol=1e-6)
        g = fiamma.tensor(rng.standard_normal((12, 4)))
        bw = fiamma.fused_lstm_layer_backward(g, None, g[:3], a[1], want[3])
        bg = fiamma.fused_lstm_layer_backward(g.to(device), None, g[:3].to(device),
                                              a[1].to(device), got[3])
        for x, y in zip(bg, bw):
            np.testing.assert_allclose(x.cpu().numpy(), y.numpy(), rtol=1e-5, atol=1e-6)
