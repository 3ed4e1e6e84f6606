"""Recurrent layers under CPU autocast (PyTorch's list: the fused LSTM/RNN layer runs in the
lower precision; GRU and projected LSTMs run in float32): result dtypes, values against the
float32 run, gradients, packed input; parity with torch (marked)."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn.utils.rnn import pack_padded_sequence

pytest.importorskip("fiamma.autograd")

X = np.random.default_rng(0).standard_normal((3, 5, 8)).astype(np.float32)


def build(cls, **kw):
    fiamma.manual_seed(0)
    return getattr(nn, cls)(8, 16, 2, batch_first=True, bidirectional=True, **kw)


@pytest.mark.parametrize("cls", ["LSTM", "RNN"])
def test_listed_layers_run_in_bfloat16_and_keep_float32_gradients(cls):
    m = build(cls)
    ref, _ = m(fiamma.tensor(X))
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        y, h = m(fiamma.tensor(X))
    states = h if isinstance(h, tuple) else (h,)
    assert y.dtype == fiamma.bfloat16 and all(s.dtype == fiamma.bfloat16 for s in states)
    np.testing.assert_allclose(y.float().detach().numpy(), ref.detach().numpy(), atol=0.05)
    y.float().sum().backward()
    for p in m.parameters():
        assert p.grad is not None and p.grad.dtype == fiamma.float32
        assert np.isfinite(p.grad.numpy()).all()


@pytest.mark.parametrize("cls,kw", [("GRU", {}), ("LSTM", {"proj_size": 4})])
def test_unlisted_layers_run_in_float32_unchanged(cls, kw):
    m = build(cls, **kw)
    ref, _ = m(fiamma.tensor(X))
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        y, _ = m(fiamma.tensor(X))
    assert y.dtype == fiamma.float32
    np.testing.assert_array_equal(y.detach().numpy(), ref.detach().numpy())
    y.sum().backward()  # no mixed-dtype products in the backward pass
    assert all(p.grad is not None for p in m.parameters())


def test_packed_input_and_given_states_are_cast():
    m = nn.LSTM(8, 16)
    x = fiamma.tensor(X.transpose(1, 0, 2).copy())
    h0 = (fiamma.zeros(1, 3, 16), fiamma.zeros(1, 3, 16))
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        y, (h, c) = m(pack_padded_sequence(x, [5, 3, 2]), h0)
        y2, _ = m(x, h0)
    assert y.data.dtype == h.dtype == c.dtype == y2.dtype == fiamma.bfloat16
    # outside autocast the layer is float32 again
    assert m(x)[0].dtype == fiamma.float32


@pytest.mark.parity
@pytest.mark.parametrize("cls", ["LSTM", "RNN", "GRU"])
def test_parity_torch_autocast(cls):
    torch = pytest.importorskip("torch")
    m = build(cls)
    t = getattr(torch.nn, cls)(8, 16, 2, batch_first=True, bidirectional=True)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        y, _ = m(fiamma.tensor(X))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty, _ = t(torch.tensor(X))
    assert str(y.dtype).split(".")[1] == str(ty.dtype).split(".")[1]
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(),
                               atol=0.03)
