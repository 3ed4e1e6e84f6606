"""A leaf's .grad assigned something other than a tensor fails with a clear error at the next
backward (the "Learning PyTorch with Examples" polynomial_autograd tutorial sets a.grad = 0.)."""

import pytest

import fiamma


def test_non_tensor_grad_named_at_backward():
    a = fiamma.ones(3, requires_grad=True)
    (a * 2).sum().backward()
    a.grad = 0.0
    with pytest.raises(TypeError, match="must be a Tensor or None.*got float"):
        (a * 2).sum().backward()
    a.grad = None
    (a * 2).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
