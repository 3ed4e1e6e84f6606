"""``grad_fn._saved_<arg>`` / ``_saved_result`` (what a node saved, by PyTorch's argument
names) and pack hooks that compute with their argument (the autograd saved-tensors-hooks
tutorial)."""

import numpy as np
import pytest

import fiamma
from fiamma.autograd.graph import saved_tensors_hooks


def test_saved_self_other_are_the_inputs():
    a = fiamma.randn(5, requires_grad=True)
    b = fiamma.ones(5, requires_grad=True)
    y = a * b
    assert y.grad_fn._saved_self is a
    assert y.grad_fn._saved_other is b
    mm = fiamma.mm(a[None], b[:, None])
    assert mm.grad_fn._saved_mat2 is not None
    np.testing.assert_array_equal(mm.grad_fn._saved_mat2.detach().numpy(),
                                  b[:, None].detach().numpy())


def test_saved_result_equals_output_but_is_another_object():
    a = fiamma.randn(5, requires_grad=True)
    y = fiamma.exp(a)
    assert y.grad_fn._saved_result.equal(y)
    assert y.grad_fn._saved_result is not y


def test_missing_saved_attribute_raises():
    a = fiamma.randn(3, requires_grad=True)
    y = a + a  # add saves nothing
    with pytest.raises(AttributeError, match="_saved_self"):
        y.grad_fn._saved_self
    with pytest.raises(AttributeError, match="_saved_bogus"):
        (a * a).grad_fn._saved_bogus
    with pytest.raises(AttributeError, match="_saved_result"):
        (a * a).grad_fn._saved_result


def test_saved_after_backward_is_freed():
    a = fiamma.randn(3, requires_grad=True)
    y = a * a
    y.sum().backward()
    with pytest.raises(RuntimeError):
        y.grad_fn._saved_self


def test_saved_goes_through_unpack_hook():
    calls = []

    def unpack(x):
        calls.append(1)
        return x

    x = fiamma.ones(5, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, unpack):
        y = x.pow(2)
    y.grad_fn._saved_self
    assert calls


def test_pack_hook_computing_with_its_argument():
    # a pack hook that runs ops on a tensor requiring grad must not re-enter itself
    x = fiamma.randn(5, requires_grad=True)
    with saved_tensors_hooks(lambda t: t * 4, lambda t: t / 4):
        y = fiamma.pow(x, 2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    x.grad = None
    with saved_tensors_hooks(lambda t: t * 4, lambda t: t / 4):
        y = fiamma.exp(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()), rtol=1e-6)


@pytest.mark.parity
def test_saved_attrs_parity():
    torch = pytest.importorskip("torch")
    for lib in (fiamma, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        y = a * b
        assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
        assert lib.sigmoid(a).grad_fn._saved_result.equal(lib.sigmoid(a))
        with pytest.raises(AttributeError):
            (a + b).grad_fn._saved_self


def _edges(t):
    return [None if n is None else n.name() for n, _ in t.grad_fn.next_functions]


def test_reflected_add_mul_put_the_tensor_first():
    # ``2 * b`` is ``b.mul(2)``: the tensor is the node's first input, as PyTorch records it
    a = fiamma.linspace(0.0, 1.0, 5, requires_grad=True)
    b = fiamma.sin(a)
    assert _edges(2 * b) == ["SinBackward0", None]
    assert _edges(1 + b) == ["SinBackward0", None]
    assert _edges(2.5 * a) == ["AccumulateGrad", None]
    assert (2 * b).grad_fn._saved_other == 2
    np.testing.assert_array_equal((3 * a).detach().numpy(), (a * 3).detach().numpy())
    np.testing.assert_array_equal((3 + a).detach().numpy(), (a + 3).detach().numpy())
    i = fiamma.tensor([1, 2])
    assert (2 * i).dtype == fiamma.int64 and (2.5 * i).dtype == fiamma.float32
    assert (True + i).tolist() == [2, 3]
    ((2 * b) + (1 + b)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 3 * np.cos(a.detach().numpy()), rtol=1e-6)


@pytest.mark.parity
def test_reflected_operand_order_parity():
    torch = pytest.importorskip("torch")
    for lib in (fiamma, torch):
        a = lib.linspace(0.0, 1.0, 5, requires_grad=True)
        b = lib.sin(a)
        assert _edges(2 * b) == ["SinBackward0", None]
        assert _edges(1 + b) == ["SinBackward0", None]
