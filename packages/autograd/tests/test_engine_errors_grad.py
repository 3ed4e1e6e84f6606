"""A leaf's .grad assigned something other than a tensor of its size, dtype and device is refused
at the assignment, with PyTorch's errors (the "Learning PyTorch with Examples"
polynomial_autograd tutorial sets a.grad = 0.)."""

import pytest

import fiamma


def test_non_tensor_grad_refused_at_assignment():
    a = fiamma.ones(3, requires_grad=True)
    (a * 2).sum().backward()
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got "
                                        "grad of type float"):
        a.grad = 0.0
    assert a.grad.tolist() == [2.0, 2.0, 2.0]  # unchanged
    a.grad = None
    (a * 2).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]


def test_grad_of_wrong_size_or_dtype_refused():
    a = fiamma.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"gradient of size '\[2\]' to a tensor of size '\[3\]'"):
        a.grad = fiamma.ones(2)
    with pytest.raises(RuntimeError, match="dtype"):
        a.grad = fiamma.ones(3, dtype=fiamma.float64)
    a.grad = fiamma.full((3,), 5.0)
    (a * 2).sum().backward()
    assert a.grad.tolist() == [7.0, 7.0, 7.0]


def test_sparse_grad_of_the_same_size_accepted():
    w = fiamma.zeros(4, 2, requires_grad=True)
    w.grad = fiamma.sparse_coo_tensor([[1]], [[1.0, -1.0]], (4, 2))
    assert w.grad.to_dense()[1].tolist() == [1.0, -1.0]
