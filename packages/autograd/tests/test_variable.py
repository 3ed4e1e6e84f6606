"""torch.autograd.Variable: the legacy wrapper returns a detached alias with requires_grad set."""

import warnings

import numpy as np
import pytest

import fiamma
from fiamma.autograd import Variable


def test_variable_is_detached_alias():
    x = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    v = Variable(y)
    assert type(v) is fiamma.Tensor
    assert not v.requires_grad and v.grad_fn is None and v.is_leaf
    assert v.data_ptr() == y.data_ptr()
    np.testing.assert_array_equal(v.numpy(), [2.0, 4.0, 6.0])


def test_variable_requires_grad_trains():
    w = Variable(fiamma.tensor([1.0, -2.0]), requires_grad=True)
    assert w.requires_grad and w.is_leaf
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, -4.0])
    w2 = Variable(fiamma.ones(1), True)  # requires_grad by position
    assert w2.requires_grad


def test_variable_isinstance_and_default():
    assert isinstance(fiamma.zeros(2), Variable)
    assert isinstance(fiamma.zeros(2, requires_grad=True), Variable)
    assert not isinstance([1.0], Variable)
    e = Variable()
    assert tuple(e.shape) == (0,) and e.dtype == fiamma.get_default_dtype()


def test_variable_bad_input():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
    with pytest.raises(RuntimeError):
        Variable(fiamma.ones(2, dtype=fiamma.int64), requires_grad=True)
    with pytest.raises(TypeError, match="name"):
        Variable(fiamma.ones(1), name="x")


def test_variable_volatile_warns():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        v = Variable(fiamma.ones(2), volatile=True)
    assert any("volatile was removed" in str(x.message) for x in w)
    assert not v.requires_grad


@pytest.mark.parity
def test_variable_parity():
    torch = pytest.importorskip("torch")
    t = torch.autograd.Variable(torch.ones(2) * 2, requires_grad=True)
    f = Variable(fiamma.ones(2) * 2, requires_grad=True)
    assert t.requires_grad == f.requires_grad and t.is_leaf == f.is_leaf
    assert isinstance(torch.ones(1), torch.autograd.Variable)
