"""fiamma.fx.replace_pattern: the documented examples and the matching rules."""

import numpy as np
import pytest

import fiamma
import fiamma.fx as fx
import fiamma.nn as nn
from fiamma.fx import replace_pattern


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class M(nn.Module):
    def forward(self, x, w1, w2):
        m1 = fiamma.cat([w1, w2]).sum()
        m2 = fiamma.cat([w1, w2]).sum()
        return x + fiamma.max(m1) + fiamma.max(m2)


def pattern(w1, w2):
    return fiamma.cat([w1, w2]).sum()


def replacement(w1, w2):
    return fiamma.stack([w1, w2])


def test_documented_cat_sum_to_stack():
    gm = fx.symbolic_trace(M())
    matches = replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2
    assert all(mt.anchor.op == "call_method" for mt in matches)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert fiamma.cat not in targets and targets.count(fiamma.stack) == 2
    x, w1, w2 = fiamma.randn(2), fiamma.randn(2), fiamma.randn(2)
    ref = x + fiamma.max(fiamma.stack([w1, w2])) * 2
    _close(gm(x, w1, w2), ref)
    # the nodes_map names each pattern node's match
    mt = matches[0]
    assert {pn.op for pn in mt.nodes_map} == {"placeholder", "call_function", "call_method"}


def test_inner_values_used_elsewhere_are_not_replaced():
    def f(x, y):
        s = x + y
        return fiamma.relu(s), s * 2          # `s` is used outside relu(x + y)

    gm = fx.symbolic_trace(f)
    assert replace_pattern(gm, lambda a, b: fiamma.relu(a + b),
                           lambda a, b: fiamma.sigmoid(a + b)) == []
    x, y = fiamma.randn(3), fiamma.randn(3)
    _close(gm(x, y)[0], fiamma.relu(x + y))


def test_literals_must_match_and_inputs_match_literals():
    def f(x):
        return x * 2 + x * 3

    gm = fx.symbolic_trace(f)
    assert len(replace_pattern(gm, lambda a: a * 2, lambda a: a + a)) == 1
    x = fiamma.randn(4)
    _close(gm(x), x + x + x * 3)
    gm = fx.symbolic_trace(f)
    # a pattern input matches the literal 3 as well as 2
    assert len(replace_pattern(gm, lambda a, k: a * k, lambda a, k: a / (1 / k))) == 2
    _close(gm(x), x * 5, 1e-5)


def test_overlapping_matches_take_the_first_and_modules_are_copied():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return fiamma.relu(fiamma.relu(self.lin(x)))

    class Repl(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.Tanh()

        def forward(self, a):
            return self.act(a)

    net = Net()
    gm = fx.symbolic_trace(net)
    matches = replace_pattern(gm, lambda a: fiamma.relu(fiamma.relu(a)),
                              fx.symbolic_trace(Repl()))
    assert len(matches) == 1
    assert isinstance(gm.act, nn.Tanh)
    x = fiamma.randn(2, 3)
    _close(gm(x), fiamma.tanh(net.lin(x)))


def test_mismatched_arity_is_an_error():
    gm = fx.symbolic_trace(lambda x: fiamma.relu(x))
    with pytest.raises(ValueError, match="takes 1 inputs but the replacement takes 2"):
        replace_pattern(gm, lambda a: fiamma.relu(a), lambda a, b: a + b)
