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
