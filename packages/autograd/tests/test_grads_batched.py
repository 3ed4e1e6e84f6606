"""``autograd.grad(..., is_grads_batched=True)``: one vector-Jacobian product per row of the
grad_outputs (zuko's exact CNF trace takes the full Jacobian this way)."""

import pytest

import fiamma


def test_full_jacobian_and_its_derivative():
    x = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    A = fiamma.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]])
    y = A @ (x ** 2)
    (jac,) = fiamma.autograd.grad(y, x, fiamma.eye(3), is_grads_batched=True, create_graph=True)
    # d y_i / d x_j = A_ij * 2 x_j
    assert fiamma.allclose(jac, A * 2 * x.detach())
    # the trace stays differentiable: d/dx sum_i A_ii 2 x_i = 2 diag(A)
    (g,) = fiamma.autograd.grad(fiamma.einsum("ii", jac), x)
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_several_inputs_unused_and_materialized():
    x = fiamma.ones(2, requires_grad=True)
    z = fiamma.ones(4, requires_grad=True)
    v = fiamma.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    gx, gz = fiamma.autograd.grad(x * 3, [x, z], v, is_grads_batched=True, allow_unused=True,
                                  retain_graph=True)
    assert gx.tolist() == [[3.0, 0.0], [0.0, 3.0], [3.0, 3.0]] and gz is None
    gx, gz = fiamma.autograd.grad(x * 3, [x, z], v, is_grads_batched=True,
                                  materialize_grads=True)
    assert gz.shape == (3, 4) and gz.abs().sum().item() == 0.0


def test_batch_sizes_must_agree():
    x = fiamma.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="same size in the batched"):
        fiamma.autograd.grad([x * x, x.sum()], x, [fiamma.eye(3), fiamma.ones(2)],
                             is_grads_batched=True)
    with pytest.raises(RuntimeError, match="is_grads_batched=True expected a grad_outputs"):
        fiamma.autograd.grad(x * x, x, is_grads_batched=True)
