"""Module.compile, nn.modules.utils (_pair & co., consume_prefix_in_state_dict_if_present),
nn.utils.clip_grads_with_norm_ and nn.utils.stateless."""

import collections

import numpy as np
import pytest

import fiamma
from fiamma import nn


def test_module_compile_named_backend_runs_eagerly():
    m = nn.Linear(3, 2)
    x = fiamma.randn(4, 3)
    want = m(x)
    assert m.compile() is None and m.compile(mode="max-autotune", fullgraph=True) is None
    np.testing.assert_array_equal(m(x).detach().numpy(), want.detach().numpy())
    assert list(m.state_dict()) == ["weight", "bias"]  # compiled in place: keys unchanged
    with pytest.raises(TypeError, match="keyword arguments only"):
        m.compile("inductor")


def test_module_compile_callable_backend_sees_the_graph():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append([n.op for n in gm.graph.nodes])
        return gm.forward

    m = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    x = fiamma.randn(4, 3)
    want = m(x)
    m.compile(backend=backend)
    np.testing.assert_array_equal(m(x).detach().numpy(), want.detach().numpy())
    m(x)
    assert graphs == [["placeholder", "call_module", "call_module", "output"]]  # cached
    m(fiamma.randn(5, 3))  # a new shape: captured again
    assert len(graphs) == 2
    assert list(m.state_dict()) == ["0.weight", "0.bias"]


def test_modules_utils():
    from fiamma.nn.modules.utils import (
        _list_with_default,
        _pair,
        _quadruple,
        _reverse_repeat_tuple,
        _single,
        _triple,
        consume_prefix_in_state_dict_if_present,
    )

    assert _single(2) == (2,) and _pair(3) == (3, 3) and _triple([1, 2, 3]) == (1, 2, 3)
    assert _quadruple(0) == (0, 0, 0, 0) and _pair.__name__ == "_pair"
    assert _reverse_repeat_tuple((1, 2, 3), 2) == (3, 3, 2, 2, 1, 1)
    assert _list_with_default([None, 4], [8, 5, 6]) == [5, 4]
    assert _list_with_default(7, [1]) == 7
    with pytest.raises(ValueError, match="Input dimension should be at least 3"):
        _list_with_default([None, 4], [8, 5])
    assert nn.modules.utils is __import__("fiamma.nn.modules.utils").nn.modules.utils
    assert nn.utils.__name__ == "fiamma.nn.utils"  # not shadowed by nn.modules.utils

    wrapped = nn.Sequential(collections.OrderedDict(module=nn.Linear(2, 2)))
    sd = wrapped.state_dict()
    consume_prefix_in_state_dict_if_present(sd, "module.")
    assert sorted(sd) == ["bias", "weight"]
    assert "module" not in sd._metadata and "" in sd._metadata
    bare = nn.Linear(2, 2)
    bare.load_state_dict(sd)
    np.testing.assert_array_equal(bare.weight.detach().numpy(),
                                  wrapped.module.weight.detach().numpy())


def test_clip_grads_with_norm():
    ps = [nn.Parameter(fiamma.ones(3)), nn.Parameter(fiamma.ones(4))]
    ps[0].grad = fiamma.full((3,), 3.0)
    ps[1].grad = fiamma.full((4,), 4.0)
    total = nn.utils.get_total_norm([p.grad for p in ps])
    assert abs(total.item() - (27 + 64) ** 0.5) < 1e-5
    nn.utils.clip_grads_with_norm_(ps, 1.0, total)
    assert abs(nn.utils.get_total_norm([p.grad for p in ps]).item() - 1.0) < 1e-5
    before = [p.grad.clone() for p in ps]
    nn.utils.clip_grads_with_norm_(ps, 10.0, 1.0)  # below the limit: unchanged
    assert all((a == p.grad).all() for a, p in zip(before, ps))
    with pytest.raises(ValueError, match="one-element tensor"):
        nn.utils.clip_grads_with_norm_(ps, 1.0, fiamma.ones(2))


def test_stateless_functional_call():
    m = nn.Linear(2, 1)
    w = {"weight": fiamma.tensor([[1.0, -1.0]]), "bias": fiamma.tensor([0.5])}
    out = nn.utils.stateless.functional_call(m, w, (fiamma.tensor([[3.0, 1.0]]),))
    assert out.tolist() == [[2.5]]
    assert not (m.weight.detach() == w["weight"]).all()  # the module's own weight untouched
