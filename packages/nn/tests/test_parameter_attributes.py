"""User attributes on nn.Parameter survive pickle and fiamma.save/load (PyTorch's
``_rebuild_parameter_with_state``), both ways with PyTorch."""

import pickle

import pytest

import fiamma
from fiamma import nn


def test_parameter_pickle_and_save(tmp_path):
    p = nn.Parameter(fiamma.ones(2))
    p.foo = 3
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is nn.Parameter and q.requires_grad and q.foo == 3
    fiamma.save(p, tmp_path / "p.pt")
    r = fiamma.load(tmp_path / "p.pt")
    assert type(r) is nn.Parameter and r.__dict__ == {"foo": 3} and r.tolist() == [1.0, 1.0]
    plain = nn.Parameter(fiamma.ones(1))
    assert pickle.loads(pickle.dumps(plain)).__dict__ == {}


@pytest.mark.parity
def test_parameter_state_both_ways_with_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    p = nn.Parameter(fiamma.zeros(2))
    p.foo = 3
    fiamma.save(p, tmp_path / "p.pt")
    r = torch.load(tmp_path / "p.pt")
    assert type(r) is torch.nn.Parameter and r.__dict__ == {"foo": 3} and r.requires_grad
    tp = torch.nn.Parameter(torch.ones(2))
    tp.x = "y"
    torch.save(tp, tmp_path / "tp.pt")
    f = fiamma.load(tmp_path / "tp.pt")
    assert type(f) is nn.Parameter and f.__dict__ == {"x": "y"}
