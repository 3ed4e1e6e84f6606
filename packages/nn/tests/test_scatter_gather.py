"""fiamma.nn.parallel.scatter_gather (torch.nn.parallel.scatter_gather): split along a
dimension per target device, gather back; differentiable; containers recursed."""

import collections

import pytest

import fiamma
from fiamma.nn.parallel.scatter_gather import gather, scatter, scatter_kwargs


def test_scatter_one_device_keeps_the_input_and_is_differentiable():
    x = fiamma.arange(6.0).reshape(3, 2).requires_grad_()
    (part,) = scatter(x, target_gpus=["cpu"])
    assert part.tolist() == x.tolist()
    part.sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0]] * 3
    # a tuple of inputs: one tuple per device
    (pieces,) = scatter((x, "a", 3), ["cpu"])
    assert isinstance(pieces, tuple) and pieces[1:] == ("a", 3)


def test_scatter_several_pieces_and_containers():
    P = collections.namedtuple("P", "a b")
    x = fiamma.arange(10.0).reshape(5, 2)
    parts = scatter({"x": x, "p": P(x[:, 0], 7), "l": [x.t()]}, ["cpu", "cpu"], dim=0)
    assert len(parts) == 2 and all(type(p) is dict for p in parts)
    assert parts[0]["x"].shape == (3, 2) and parts[1]["x"].shape == (2, 2)  # chunk's sizes
    assert isinstance(parts[1]["p"], P) and parts[1]["p"].a.tolist() == [6.0, 8.0]
    assert parts[1]["p"].b == 7
    assert parts[0]["l"][0].shape == (1, 5) and isinstance(parts[0]["l"], list)
    args, kwargs = scatter_kwargs((x,), {"scale": 2.0}, ["cpu", "cpu"], dim=1)
    assert [a[0].shape for a in args] == [(5, 1), (5, 1)] and kwargs == ({"scale": 2.0},) * 2
    args, kwargs = scatter_kwargs((), {"y": x}, ["cpu", "cpu"])
    assert args == ((), ()) and [k["y"].shape[0] for k in kwargs] == [3, 2]
    with pytest.raises(ValueError, match="scatter: target_gpus is empty"):
        scatter(x, [])


def test_gather_concatenates_and_recurses():
    a, b = fiamma.ones(2, 3), fiamma.zeros(1, 3)
    assert gather([a, b], "cpu").shape == (3, 3)
    assert gather([a, b], -1, dim=0).device == fiamma.device("cpu")
    out = gather([{"y": a, "n": None}, {"y": b, "n": None}], "cpu")
    assert out["y"].shape == (3, 3) and out["n"] is None
    assert gather([fiamma.tensor(1.0), fiamma.tensor(2.0)], "cpu").tolist() == [1.0, 2.0]
    t = gather([(a, a), (b, b)], "cpu")
    assert isinstance(t, tuple) and t[1].shape == (3, 3)
