"""Padding modules (Reflection/Replication/Zero/Constant/CircularPad1d-3d) against NumPy's
np.pad, their reprs and errors, Module.share_memory; (parity) outputs and gradients against
torch.nn with the same inputs."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

_NP_MODE = {"Reflection": "reflect", "Replication": "edge", "Circular": "wrap",
            "Zero": "constant", "Constant": "constant"}
_FAMILIES = list(_NP_MODE)


def _make(family, nd, padding):
    cls = getattr(nn, f"{family}Pad{nd}d")
    return cls(padding, 2.5) if family == "Constant" else cls(padding)


def _np_pad(a, family, nd, padding):
    p = (padding,) * (2 * nd) if isinstance(padding, int) else padding
    widths = [(0, 0)] * (a.ndim - nd) + [(p[2 * i], p[2 * i + 1]) for i in reversed(range(nd))]
    kw = {"constant_values": 2.5} if family == "Constant" else {}
    return np.pad(a, widths, mode=_NP_MODE[family], **kw)


@pytest.mark.parametrize("family", _FAMILIES)
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_padding_matches_numpy(family, nd, batched):
    rng = np.random.default_rng(nd)
    shape = ((2,) if batched else ()) + (3,) + (4, 5, 3)[:nd]
    a = rng.standard_normal(shape).astype(np.float32)
    for padding in (1, tuple([1, 2, 2, 1, 0, 2][:2 * nd]), tuple([2, 0, 1, 3, 0, 2][:2 * nd])):
        m = _make(family, nd, padding)
        got = m(fiamma.tensor(a))
        np.testing.assert_array_equal(got.numpy(), _np_pad(a, family, nd, padding))


def test_repr_attributes_and_errors():
    assert repr(nn.ReflectionPad2d(1)) == "ReflectionPad2d((1, 1, 1, 1))"
    assert repr(nn.ConstantPad1d((1, 2), 3.5)) == "ConstantPad1d(padding=(1, 2), value=3.5)"
    assert repr(nn.ZeroPad2d((1, 0, 0, 1))) == "ZeroPad2d((1, 0, 0, 1))"
    assert nn.ZeroPad3d(1).value == 0.0 and nn.ReplicationPad3d(2).padding == (2,) * 6
    with pytest.raises(ValueError, match="ReflectionPad2d: padding must be"):
        nn.ReflectionPad2d((1, 2))
    with pytest.raises(ValueError, match="CircularPad2d: expected 3D or 4D input"):
        nn.CircularPad2d(1)(fiamma.zeros(4, 4))
    with pytest.raises(Exception, match="reflect|[Pp]adding size"):
        nn.ReflectionPad1d(4)(fiamma.zeros(1, 1, 3))  # reflection needs amount < size
    assert list(nn.ReflectionPad1d(1).state_dict()) == []


@pytest.mark.parametrize("family", ["Reflection", "Replication", "Circular", "Constant"])
def test_padding_gradients(family):
    m = _make(family, 2, (1, 2, 2, 1))
    x = fiamma.tensor(np.random.default_rng(3).standard_normal((1, 2, 3, 4)),
                      requires_grad=True)
    assert gradcheck(lambda t: m(t), (x,))


def test_share_memory_moves_parameters_buffers_and_grads():
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    m(fiamma.randn(4, 3)).sum().backward()
    w = m[0].weight
    assert m.share_memory() is m
    assert m[0].weight is w  # same Parameter objects: an optimizer built before stays valid
    for t in list(m.parameters()) + list(m.buffers()):
        assert t.is_shared()
    assert w.grad.is_shared()


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("family", _FAMILIES)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_padding_parity(family, nd):
    a = np.random.default_rng(7).standard_normal((2, 2) + (4, 5, 3)[:nd])
    padding = tuple([1, 2, 0, 3, 2, 1][:2 * nd])
    f = _make(family, nd, padding)
    tcls = getattr(torch.nn, f"{family}Pad{nd}d")
    t = tcls(padding, 2.5) if family == "Constant" else tcls(padding)
    assert repr(f) == repr(t)
    x = fiamma.tensor(a, requires_grad=True)
    y = torch.tensor(a, requires_grad=True)
    g = np.random.default_rng(8).standard_normal(tuple(t(y).shape))
    fo, to = f(x), t(y)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy())
    (fo * fiamma.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)
