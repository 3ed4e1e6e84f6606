"""Gradients through the in-place shape methods (unsqueeze_, t_, transpose_, as_strided_, ...)
and through index assignment with a range key: numerical checks in float64 and the leaf rule."""

import numpy as np
import pytest

import fiamma
from fiamma.autograd import gradcheck


@pytest.mark.parametrize("call", [
    lambda t: t.unsqueeze_(1), lambda t: t.squeeze_(), lambda t: t.t_(),
    lambda t: t.transpose_(0, 1), lambda t: t.swapdims_(1, 0),
    lambda t: t.as_strided_((2, 2), (1, 3), 1),
])
def test_inplace_shape_grad(call):
    w = fiamma.tensor(np.random.default_rng(0).standard_normal((3, 2)), requires_grad=True)
    c = fiamma.tensor(np.random.default_rng(1).standard_normal(6))

    def f(x):
        y = x * 2  # a non-leaf: in-place shape changes are allowed on it
        out = call(y)
        assert out is y
        return (out.reshape(-1) * c[:out.numel()]).sum()

    assert gradcheck(f, (w,))


def test_inplace_shape_on_leaf_is_refused_and_allowed_under_no_grad():
    w = fiamma.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w.unsqueeze_(0)
    assert w.shape == (3,)
    with fiamma.no_grad():
        w.unsqueeze_(0)
    assert w.shape == (1, 3) and w.is_leaf and w.requires_grad
    (w * 2).sum().backward()
    assert w.grad.tolist() == [[2.0, 2.0, 2.0]]
    with pytest.raises(RuntimeError, match="require grad"):
        fiamma.zeros(2, requires_grad=True).resize_(4)


def test_setitem_with_range_key_has_gradient():
    x = fiamma.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    v = fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64, requires_grad=True)

    def f(x, v):
        y = x * 1
        y[range(3), [0, 1, 0]] = v * 3
        return (y * fiamma.arange(6.0, dtype=fiamma.float64).reshape(3, 2)).sum()

    assert gradcheck(f, (x.double(), v))
