"""fiamma._foreach_* (``torch._foreach_*``): list-of-tensor ops as loops of the single ops."""

import numpy as np
import pytest

import fiamma


def _ts():
    return [fiamma.tensor([1.0, -2.0]), fiamma.tensor([[0.5, 4.0], [9.0, -1.0]])]


def test_binary_forms_scalar_list_and_tensor_operands():
    a = _ts()
    assert [t.tolist() for t in fiamma._foreach_mul(a, 2.0)] == [[2.0, -4.0],
                                                                 [[1.0, 8.0], [18.0, -2.0]]]
    assert [t.tolist() for t in fiamma._foreach_add(a, [1.0, 2.0])] == [[2.0, -1.0],
                                                                        [[2.5, 6.0], [11.0, 1.0]]]
    r = fiamma._foreach_sub(a, [fiamma.ones(2), fiamma.ones(2, 2)], alpha=3)
    assert isinstance(r, tuple) and r[0].tolist() == [-2.0, -5.0]
    assert fiamma._foreach_add(a, fiamma.tensor(3.0), alpha=2)[0].tolist() == [7.0, 4.0]
    assert fiamma._foreach_maximum(a, 0.0)[0].tolist() == [1.0, 0.0]
    assert fiamma._foreach_minimum(a, [0.0, 1.0])[1].tolist() == [[0.5, 1.0], [1.0, -1.0]]
    b = _ts()
    fiamma._foreach_maximum_(b, [fiamma.zeros(2), fiamma.zeros(2, 2)])
    assert b[0].tolist() == [1.0, 0.0]
    assert fiamma._foreach_clamp_max(a, 1.0)[1].tolist() == [[0.5, 1.0], [1.0, -1.0]]
    assert a[0].tolist() == [1.0, -2.0]  # out-of-place left the inputs alone


def test_in_place_forms_update_and_return_the_list():
    a = _ts()
    r = fiamma._foreach_mul_(a, 0.5)
    assert r is a and a[0].tolist() == [0.5, -1.0]
    fiamma._foreach_lerp_(a, [fiamma.zeros(2), fiamma.zeros(2, 2)], 0.5)
    assert a[0].tolist() == [0.25, -0.5]
    fiamma._foreach_addcmul_(a, a, a, value=2.0)
    assert a[0].tolist() == [0.375, 0.0]
    fiamma._foreach_addcdiv_(a, [fiamma.ones(2), fiamma.ones(2, 2)], [fiamma.full((2,), 4.0),
                                                                     fiamma.full((2, 2), 4.0)],
                             fiamma.tensor([4.0, 0.0]))
    assert a[0].tolist() == [1.375, 1.0] and a[1][0, 0].item() == pytest.approx(0.15625)
    fiamma._foreach_sqrt_(a[:1])
    assert a[0].tolist() == pytest.approx([1.375 ** 0.5, 1.0])
    fiamma._foreach_copy_(a, _ts())
    assert a[1].tolist() == [[0.5, 4.0], [9.0, -1.0]]
    fiamma._foreach_zero_(a)
    assert all(float(t.abs().sum()) == 0 for t in a)


def test_reductions_pow_and_errors():
    a = _ts()
    n = fiamma._foreach_norm(a)
    assert [t.item() for t in n] == pytest.approx([5 ** 0.5, (0.25 + 16 + 81 + 1) ** 0.5])
    assert [t.item() for t in fiamma._foreach_norm(a, 1)] == [3.0, 14.5]
    assert [t.item() for t in fiamma._foreach_max(a)] == [1.0, 9.0]
    assert fiamma._foreach_pow(2.0, [fiamma.tensor([3.0])])[0].tolist() == [8.0]
    assert fiamma._foreach_pow(a, 2)[0].tolist() == [1.0, 4.0]
    assert fiamma._foreach_neg(a)[0].tolist() == [-1.0, 2.0]
    with pytest.raises(RuntimeError, match="_foreach_add: Tensor lists must have the same "
                                           "number of tensors, got 2 and 1"):
        fiamma._foreach_add(a, [fiamma.ones(2)])
    with pytest.raises(TypeError, match="_foreach_mul.*must be a Number, a Tensor"):
        fiamma._foreach_mul(a, "x")
    with pytest.raises(TypeError, match="_foreach_exp.*list or tuple of Tensors"):
        fiamma._foreach_exp(fiamma.ones(2))


def test_out_of_place_forms_record_gradients():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    w = fiamma.tensor([1.0, 2.0], requires_grad=True)
    (r,) = fiamma._foreach_mul([w], 3.0)
    (r * r).sum().backward()
    assert w.grad.tolist() == [18.0, 36.0]


@pytest.mark.parity
def test_foreach_parity_with_torch():
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(0)
    arrs = [rs.randn(3).astype(np.float32), rs.randn(2, 4).astype(np.float32)]
    others = [rs.rand(3).astype(np.float32) + 0.5, rs.rand(2, 4).astype(np.float32) + 0.5]
    for lib in (fiamma, torch):
        ts = [lib.tensor(a) for a in arrs]
        os_ = [lib.tensor(o) for o in others]
        lib._foreach_mul_(ts, 0.9)
        lib._foreach_add_(ts, os_, alpha=0.1)
        lib._foreach_addcdiv_(ts, os_, lib._foreach_sqrt(os_), value=-0.01)
        lib._foreach_lerp_(ts, os_, 0.25)
        res = [t.numpy() for t in ts] + [t.numpy() for t in lib._foreach_norm(ts)]
        if lib is fiamma:
            mine = res
    for a, b in zip(mine, res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
