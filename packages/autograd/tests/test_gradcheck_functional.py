"""gradcheck / gradgradcheck and fiamma.autograd.functional on the engine's own ops."""

import pytest

import fiamma
import fiamma.autograd as A
from fiamma.autograd import Function
from fiamma.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp
from fiamma.autograd.gradcheck import GradcheckError
from fiamma.autograd_hook import ops


def f64(*values):
    return fiamma.tensor(values, dtype=fiamma.float64, requires_grad=True)


def test_gradcheck_passes_on_add_mul_sum():
    x, y = f64(0.3, -1.2, 2.0), f64(1.5, 0.7, -0.4)
    assert A.gradcheck(lambda a, b: (a * b + a * a).sum(), (x, y))
    assert A.gradcheck(lambda a, b: a * b + b, (x, y))


def test_gradcheck_on_non_contiguous_input():
    base = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=fiamma.float64)
    x = base.t().detach().requires_grad_()
    assert not x.is_contiguous()
    assert A.gradcheck(lambda a: (a * a * 0.5).sum(), (x,))


def test_gradgradcheck_passes():
    x, y = f64(0.3, -1.2), f64(1.5, 0.7)
    assert A.gradgradcheck(lambda a, b: a * a * b, (x, y))


class WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * 2.1  # wrong: should be 2


def test_gradcheck_catches_a_wrong_formula():
    x = f64(0.5, 1.5)
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to "
                                             "input 0"):
        A.gradcheck(WrongSquare.apply, (x,))
    assert A.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradcheck_catches_a_wrong_registered_formula():
    from fiamma.autograd._formulas import derivative, lookup

    saved = lookup("mul")

    @derivative(ops.mul, save="inputs")
    def _bad(ctx, grad):
        a, b = ctx.inputs
        return grad * b, grad * a * 0.5

    try:
        with pytest.raises(GradcheckError):
            A.gradcheck(lambda a, b: a * b, (f64(1.0, 2.0), f64(3.0, 4.0)))
    finally:
        derivative(ops.mul, save=saved[1])(saved[0])
    assert A.gradcheck(lambda a, b: a * b, (f64(1.0, 2.0), f64(3.0, 4.0)))


def test_jacobian_and_hessian():
    x = fiamma.tensor([1.0, 2.0], dtype=fiamma.float64)
    j = jacobian(lambda t: t * t, x)
    assert j.tolist() == [[2.0, 0.0], [0.0, 4.0]]
    ja, jb = jacobian(lambda a, b: a * b, (x, x * 3))
    assert ja.tolist() == [[3.0, 0.0], [0.0, 6.0]] and jb.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    h = hessian(lambda t: (t * t * t).sum(), x)
    assert h.tolist() == [[6.0, 0.0], [0.0, 12.0]]


def test_vjp_jvp_hvp():
    x = fiamma.tensor([1.0, 2.0], dtype=fiamma.float64)
    v = fiamma.tensor([1.0, -1.0], dtype=fiamma.float64)
    out, g = vjp(lambda t: t * t, x, v)
    assert out.tolist() == [1.0, 4.0] and g.tolist() == [2.0, -4.0]
    out, jv = jvp(lambda t: t * t * 3, x, v)
    assert jv.tolist() == [6.0, -12.0]
    out, hv = hvp(lambda t: (t * t * t).sum(), x, v)
    assert out.item() == 9.0 and hv.tolist() == [6.0, -12.0]
    out, vh = vhp(lambda t: (t * t * t).sum(), x, v)
    assert vh.tolist() == [6.0, -12.0]
    assert not g.requires_grad and not x.requires_grad


def test_gradcheck_rejects_overlapping_inputs():
    x = fiamma.tensor([1.0], dtype=fiamma.float64).expand(3).detach().requires_grad_()
    with pytest.raises(RuntimeError, match="stride 0"):
        A.gradcheck(lambda t: t * t, (x,))
