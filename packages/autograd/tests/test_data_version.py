"""``.data`` has its own version counter (PyTorch): writes through it leave the saved tensors
of a graph valid. torchdiffeq's Runge-Kutta step fills its stage buffer this way
(``scratch.data[index] = value`` inside a custom Function) while earlier stages, sliced from the
same buffer, are saved by the graph."""

import pytest

import fiamma


class _UncheckedAssign(fiamma.autograd.Function):
    @staticmethod
    def forward(ctx, scratch, value, index):
        ctx.index = index
        scratch.data[index] = value
        return scratch

    @staticmethod
    def backward(ctx, grad_scratch):
        return grad_scratch, grad_scratch[ctx.index], None


def test_writes_through_data_keep_saved_slices_valid():
    x = fiamma.tensor([1.0, 2.0], requires_grad=True)
    dt = fiamma.tensor(0.5, requires_grad=True)
    k = fiamma.empty(2, 3)
    k = _UncheckedAssign.apply(k, x * 2, (..., 0))
    total = 0
    for i in range(2):
        # the product saves the slice k[..., :i+1] (dt needs its gradient)
        y = x + (k[..., :i + 1] * dt).sum(-1)
        k = _UncheckedAssign.apply(k, y * y, (..., i + 1))
        total = total + y.sum()
    total.backward()
    # the same computation written without the buffer
    x2 = fiamma.tensor([1.0, 2.0], requires_grad=True)
    dt2 = fiamma.tensor(0.5, requires_grad=True)
    stages = [x2 * 2]
    total2 = 0
    for i in range(2):
        y2 = x2 + (fiamma.stack(stages, -1) * dt2).sum(-1)
        stages.append(y2 * y2)
        total2 = total2 + y2.sum()
    total2.backward()
    assert fiamma.allclose(x.grad, x2.grad) and fiamma.allclose(dt.grad, dt2.grad)


def test_in_place_through_data_is_quiet_elsewhere_checked():
    a = fiamma.ones(3, requires_grad=True)
    b = fiamma.ones(3)
    y = a * b
    b.data.add_(1)          # through .data: not an in-place change for autograd
    b.data[0] = 5.0
    b.data.fill_(2.0)
    y.sum().backward()      # reads b as it is now (PyTorch does the same)
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
    a.grad = None
    y = a * b
    b.add_(1)               # directly: the saved b is stale
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y = a * b
    b[0] = 3.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_mul_and_div_check_only_the_operand_they_read():
    # d(a*b)/da reads b only: a changed in place afterwards is fine when b needs no gradient
    a = fiamma.ones(3, requires_grad=True)
    s = a * 1.0
    c = fiamma.full((3,), 2.0)
    y = s * c
    z = s / c
    s2 = s.detach()
    s2.add_(1)              # shares s's memory and version
    (y.sum() + z.sum()).backward()
    assert a.grad.tolist() == [2.5, 2.5, 2.5]
    # the other way round the gradient needs the stale operand: refused
    w = fiamma.ones(3, requires_grad=True)
    d = fiamma.ones(3)
    y = d * w
    d.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    d = fiamma.ones(3)
    y = w / d
    d.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
