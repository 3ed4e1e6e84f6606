"""fiamma.fx against torch.fx (parity session): the same module source traced by both gives
the same nodes (op, target, name) and, with the same weights, the same outputs."""

import math

import nn_models
import numpy as np
import pytest

import fiamma
import fiamma.fx as ffx

pytestmark = pytest.mark.parity


def build(lib, nn, F):
    """A module written once against the torch API (``lib`` is torch or fiamma)."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.norm = nn.LayerNorm(16)
            self.fc2 = nn.Linear(16, 4)
            self.scale = nn.Parameter(lib.ones(4))

        def forward(self, x, mask=None):
            b, d = x.shape
            h = F.relu(self.norm(self.fc1(x)))
            h = lib.cat([h, -h], dim=1)[:, :16] / math.sqrt(d)
            if mask is not None:
                h = h.masked_fill(mask, 0.0)
            y = self.fc2(h).view(b, -1) * self.scale + 1
            return lib.softmax(y, dim=-1), y.sum(dim=1, keepdim=True)

    return Net()


def _signature(gm):
    out = []
    for n in gm.graph.nodes:
        t = n.target if isinstance(n.target, str) else n.target.__name__
        out.append((n.op, t, n.name))
    return out


def _copy_weights(src, dst):
    for (k, v), (k2, v2) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert k == k2
        v2.copy_(fiamma.from_numpy(v.detach().numpy().copy()))


def test_node_sequence_matches_torch_fx():
    torch = pytest.importorskip("torch")
    import torch.fx as tfx

    tm = build(torch, torch.nn, torch.nn.functional)
    fm = build(fiamma, fiamma.nn, fiamma.nn.functional)
    tg = tfx.symbolic_trace(tm, concrete_args={"mask": None})
    fg = ffx.symbolic_trace(fm, concrete_args={"mask": None})
    assert _signature(fg) == _signature(tg)
    with fiamma.no_grad():
        _copy_weights(tm, fm)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    for a, b in zip(fg(fiamma.from_numpy(x)), tg(torch.from_numpy(x))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_resnet18_node_sequence_matches_torch_fx():
    torch = pytest.importorskip("torch")
    import torch.fx as tfx

    tg = tfx.symbolic_trace(nn_models.resnet18(torch.nn, num_classes=10))
    fg = ffx.symbolic_trace(nn_models.resnet18(fiamma.nn, num_classes=10))
    assert _signature(fg) == _signature(tg)
    assert fg.code.replace("fiamma", "torch") == tg.code
