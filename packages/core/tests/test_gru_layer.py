"""A whole GRU layer (fiamma.fused_gru_layer / fused_gru_layer_backward; csrc/gru.c on the
time loop shared with the LSTM, csrc/rnn_seq.c) against a float64 NumPy reference and central
differences; the per-step fallback other backends run against the C loop; errors."""

import numpy as np
import pytest

import fiamma
from fiamma._backend import cpu as _cpu


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _layer_ref(xw, w, b, h0, reverse):
    """float64 NumPy: the states after each step (time order) and the final state."""
    B, H = h0.shape
    T = xw.shape[0] // B
    h, outs = h0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        x = xw[t * B:(t + 1) * B]
        gh = h @ w.T + (0 if b is None else b)
        r, z = _sig(x[:, :H] + gh[:, :H]), _sig(x[:, H:2 * H] + gh[:, H:2 * H])
        n = np.tanh(x[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * h
        outs[t] = h
    return np.concatenate(outs), h


def _loss(xw, w, b, h0, reverse, go, gh):
    out, h = _layer_ref(xw, w, b, h0, reverse)
    return (out * go).sum() + (h * gh).sum()


def _numgrad(base, k, reverse, go, gh, stride):
    """Central differences of _loss in base[k] at every stride-th element: {index: value}."""
    a, got = base[k], {}
    for idx in list(np.ndindex(a.shape))[::stride]:
        a[idx] += 1e-6
        up = _loss(*base, reverse, go, gh)
        a[idx] -= 2e-6
        down = _loss(*base, reverse, go, gh)
        a[idx] += 1e-6
        got[idx] = (up - down) / 2e-6
    return got


def _inputs(T, B, H, seed, bias=True):
    rng = np.random.default_rng(seed)
    xw = rng.standard_normal((T * B, 3 * H))
    w = rng.standard_normal((3 * H, H)) / np.sqrt(H)
    b = rng.standard_normal(3 * H) if bias else None
    h0 = rng.standard_normal((B, H))
    go, gh = rng.standard_normal((T * B, H)), rng.standard_normal((B, H))
    return xw, w, b, h0, go, gh


def _t(a, dt):
    return None if a is None else fiamma.tensor(a, dtype=dt)


# (4, 33, 100): the own AVX-512 kernel with a prepacked weight, 300 = 3H columns not a multiple
# of its 32-wide slivers; (3, 16, 130): the backward's k = 390; (5, 2, 3): BLAS; (3, 40, 256):
# the cell's rows split between threads too (float32, 2 threads)
@pytest.mark.parametrize("T,B,H", [(4, 33, 100), (3, 16, 130), (5, 2, 3), (1, 1, 1),
                                   (3, 40, 256)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_against_reference(T, B, H, reverse, threads):
    xw, w, b, h0, go, gh = _inputs(T, B, H, T * B * H + reverse)
    ro, rh = _layer_ref(xw, w, b, h0, reverse)
    old = fiamma.get_num_threads()
    fiamma.set_num_threads(threads)
    try:
        for dt, tol in ((fiamma.float64, 1e-11), (fiamma.float32, 2e-5)):
            args = [_t(a, dt) for a in (xw, w, b, h0)]
            out, hn, saved = fiamma.fused_gru_layer(*args, reverse=reverse)
            for got, want in ((out, ro), (hn, rh)):
                assert got.dtype is dt
                np.testing.assert_allclose(got.numpy(), want, rtol=tol * 10, atol=tol)
            prev = np.concatenate([h0, ro[:-B]]) if not reverse else np.concatenate([ro[B:], h0])
            np.testing.assert_allclose(saved[0].numpy(), prev, rtol=tol * 10, atol=tol)
            gx, gg, gh0 = fiamma.fused_gru_layer_backward(_t(go, dt), _t(gh, dt), args[1],
                                                          saved)
            # the weight's and bias's gradients as the caller makes them
            gw, gb = (gg.t() @ saved[0]).numpy(), gg.sum(0).numpy()
            if dt is fiamma.float64:
                base = [xw, w, b, h0]
                for k, got in ((0, gx.numpy()), (1, gw), (2, gb), (3, gh0.numpy())):
                    num = _numgrad(base, k, reverse, go, gh, max(1, base[k].size // 20))
                    for idx, v in num.items():
                        assert abs(got[idx] - v) < 1e-6 * max(1, abs(v)), (k, idx)
                ref64 = (gx.numpy(), gg.numpy(), gh0.numpy())
            else:
                for got, want in zip((gx, gg, gh0), ref64):
                    np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-4)
    finally:
        fiamma.set_num_threads(old)


@pytest.mark.parametrize("reverse", [False, True])
def test_no_bias_and_missing_gradients(reverse):
    xw, w, _, h0, go, gh = _inputs(3, 4, 5, 11, bias=False)
    ro, rh = _layer_ref(xw, w, None, h0, reverse)
    args = [fiamma.tensor(a) for a in (xw, w)] + [None, fiamma.tensor(h0)]
    out, hn, saved = fiamma.fused_gru_layer(*args, reverse=reverse)
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hn.numpy(), rh, rtol=1e-10, atol=1e-12)
    gx = fiamma.fused_gru_layer_backward(fiamma.tensor(go), None, args[1], saved)[0]
    num = _numgrad([xw, w, None, h0], 0, reverse, go, np.zeros_like(gh), 3)
    for idx, v in num.items():
        assert abs(gx.numpy()[idx] - v) < 1e-6 * max(1, abs(v))
    a = fiamma.fused_gru_layer_backward(fiamma.tensor(go), None, args[1], saved)
    z = fiamma.fused_gru_layer_backward(fiamma.tensor(go), fiamma.zeros(4, 5), args[1], saved)
    for x, y in zip(a, z):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    _, gg, gh0 = fiamma.fused_gru_layer_backward(None, None, args[1], saved)
    assert not gg.numpy().any() and not gh0.numpy().any()


def test_empty():
    z = fiamma.zeros
    out, hn, saved = fiamma.fused_gru_layer(z(0, 6), z(6, 2), None, z(0, 2))
    assert out.shape == (0, 2) and hn.shape == (0, 2)
    h0 = fiamma.ones(3, 2)
    out, hn, saved = fiamma.fused_gru_layer(z(0, 6), z(6, 2), z(6), h0)
    assert out.shape == (0, 2) and hn.tolist() == h0.tolist()
    gx, gg, gh0 = fiamma.fused_gru_layer_backward(None, fiamma.ones(3, 2), z(6, 2), saved)
    assert gx.shape == (0, 6) and gh0.tolist() == [[1.0, 1.0]] * 3


def test_errors():
    z = fiamma.zeros
    with pytest.raises(RuntimeError, match=r"fused_gru_layer: expected w_hh of shape \(6, 2\)"):
        fiamma.fused_gru_layer(z(6, 6), z(8, 2), None, z(3, 2))
    with pytest.raises(RuntimeError, match=r"expected xw of shape \(T \* 3, 6\), got \(5, 6\)"):
        fiamma.fused_gru_layer(z(5, 6), z(6, 2), None, z(3, 2))
    with pytest.raises(RuntimeError, match=r"expected b_hh of shape \(6,\) or None, got \(8,\)"):
        fiamma.fused_gru_layer(z(6, 6), z(6, 2), z(8), z(3, 2))
    with pytest.raises(RuntimeError, match="expected h0 of shape"):
        fiamma.fused_gru_layer(z(6, 6), z(6, 2), None, z(3, 2, 1))
    with pytest.raises(RuntimeError, match="float32 or float64"):
        fiamma.fused_gru_layer(z(6, 6, dtype=fiamma.float16), z(6, 2), None, z(3, 2))
    with pytest.raises(RuntimeError, match="of one dtype"):
        fiamma.fused_gru_layer(z(6, 6), z(6, 2), z(6, dtype=fiamma.float64), z(3, 2))
    with pytest.raises(TypeError, match="expected h0 to be a Tensor"):
        fiamma.fused_gru_layer(z(6, 6), z(6, 2), None, None)
    _, _, saved = fiamma.fused_gru_layer(z(6, 6), z(6, 2), None, z(3, 2))
    with pytest.raises(RuntimeError, match=r"expected grad_out of shape \(6, 2\)"):
        fiamma.fused_gru_layer_backward(z(5, 2), None, z(6, 2), saved)
    with pytest.raises(RuntimeError, match=r"expected w_hh \(6, 2\)"):
        fiamma.fused_gru_layer_backward(None, None, z(8, 2), saved)
    with pytest.raises(TypeError, match="saved tuple of fused_gru_layer"):
        fiamma.fused_gru_layer_backward(None, None, z(6, 2), (1, 2))


@pytest.mark.parametrize("bias", [True, False])
def test_fallback_equals_c_loop(monkeypatch, bias):
    # a backend without gru_seq_fwd/_bwd (every one but the CPU's) runs the per-step loop
    xw, w, b, h0, go, gh = _inputs(5, 3, 7, 4, bias)
    for dt in (fiamma.float64, fiamma.float32):
        tol = 1e-12 if dt is fiamma.float64 else 1e-5
        for reverse in (False, True):
            args = [_t(a, dt) for a in (xw, w, b, h0)]
            want = fiamma.fused_gru_layer(*args, reverse=reverse)
            wb = fiamma.fused_gru_layer_backward(_t(go, dt), _t(gh, dt), args[1], want[2])
            with monkeypatch.context() as m:
                m.delattr(_cpu, "gru_seq_fwd")
                m.delattr(_cpu, "gru_seq_bwd")
                got = fiamma.fused_gru_layer(*args, reverse=reverse)
                gb = fiamma.fused_gru_layer_backward(_t(go, dt), _t(gh, dt), args[1], got[2])
            for x, y in zip(got[:2] + got[2][:3] + gb, want[:2] + want[2][:3] + wb):
                np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=tol, atol=tol)


def test_layer_on_device(device):
    rng = np.random.default_rng(9)
    for reverse in (False, True):
        a = [fiamma.tensor(rng.standard_normal(s)) for s in ((12, 12), (12, 4), (12,), (3, 4))]
        want = fiamma.fused_gru_layer(*a, reverse=reverse)
        got = fiamma.fused_gru_layer(*(t.to(device) for t in a), reverse=reverse)
        for x, y in zip(got[:2], want[:2]):
            np.testing.assert_allclose(x.cpu().numpy(), y.numpy(), rtol=1e-5, atol=1e-6)
        g = fiamma.tensor(rng.standard_normal((12, 4)))
        bw = fiamma.fused_gru_layer_backward(g, g[:3], a[1], want[2])
        bg = fiamma.fused_gru_layer_backward(g.to(device), g[:3].to(device), a[1].to(device),
                                             got[2])
        for x, y in zip(bg, bw):
            np.testing.assert_allclose(x.cpu().numpy(), y.numpy(), rtol=1e-5, atol=1e-6)


def test_refuses_inputs_that_require_grad():
    pytest.importorskip("fiamma.autograd")  # requires_grad needs it (core's wheel alone: no)
    with pytest.raises(RuntimeError, match="not differentiable itself"):
        fiamma.fused_gru_layer(fiamma.zeros(6, 6, requires_grad=True), fiamma.zeros(6, 2), None,
                               fiamma.zeros(3, 2))

