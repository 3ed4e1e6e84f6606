"""First and second derivatives of core's pools against finite differences (float64, inputs
without ties): max / avg / adaptive pools in 1-3 dims with stride, padding, dilation and
ceil_mode, max_unpool, lp pools, and the backward ops themselves. Skipped where core does not
have the pooling ops yet."""

import numpy as np
import pytest
from _formula_check import check, noncontig

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "max_pool2d"),
                                reason="core's pooling ops are not available")


def distinct(*shape, seed=0, transposed=False, positive=False):
    """A float64 leaf of distinct values at least 0.05 apart (finite differences never swap a
    max), optionally a transposed view."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    a = (rng.permutation(n) - n / 2) * 0.05 + rng.uniform(0, 0.01, n)
    if positive:
        a = np.abs(a) + 0.3
    a = a.reshape(shape)
    if transposed:
        t = fiamma.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    else:
        t = fiamma.tensor(a)
    return t.detach().requires_grad_()


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_pool(nd):
    pool = getattr(fiamma, f"max_pool{nd}d")
    sp = {1: (7,), 2: (5, 4), 3: (4, 3, 4)}[nd]
    x = distinct(2, 2, *sp, seed=nd, transposed=True)
    check(lambda t: pool(t, 2), x)
    check(lambda t: pool(t, 3, 1, 1), x)  # overlapping windows: the backward accumulates
    check(lambda t: pool(t, 2, 2, 1, 1, True, return_indices=True), x)
    check(lambda t: pool(t, 2, 1, 0, 2), x)  # dilation
    check(lambda t: pool(t, 2), distinct(3, *sp, seed=9))  # unbatched


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_max_pool(nd):
    pool = getattr(fiamma, f"adaptive_max_pool{nd}d")
    x = distinct(2, *(5,) * nd, seed=10 + nd, transposed=True)
    check(lambda t: pool(t, 3), x)
    check(lambda t: pool(t, 2, return_indices=True), x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_avg_pool(nd):
    pool = getattr(fiamma, f"avg_pool{nd}d")
    sp = {1: (7,), 2: (5, 4), 3: (4, 3, 4)}[nd]
    x = noncontig(2, 2, *sp, rng=np.random.default_rng(nd))
    check(lambda t: pool(t, 2), x)
    check(lambda t: pool(t, 3, 2, 1, True, False), x)
    check(lambda t: pool(t, 3, 1, 1, False, True), x)
    check(lambda t: pool(t, 2, 1, 1, True, True, divisor_override=3), x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_avg_pool(nd):
    pool = getattr(fiamma, f"adaptive_avg_pool{nd}d")
    x = noncontig(2, 2, *(5,) * nd, rng=np.random.default_rng(20 + nd))
    check(lambda t: pool(t, 3), x)
    check(lambda t: pool(t, 1), x)
    check(lambda t: pool(t, 7), x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool(nd):
    unpool = getattr(fiamma, f"max_unpool{nd}d")
    x = distinct(2, *(4,) * nd, seed=30 + nd)
    with fiamma.no_grad():
        v, i = getattr(fiamma, f"max_pool{nd}d")(x, 2, return_indices=True)
    v = v.detach().requires_grad_()
    check(lambda t: unpool(t, i, 2), v)
    check(lambda t: unpool(t, i, 2, output_size=(5,) * nd), v)


def test_backward_ops():
    x = distinct(2, 3, 6, 6, seed=40)
    with fiamma.no_grad():
        v, i = fiamma.max_pool2d(x, 3, 1, return_indices=True)
    g = distinct(*v.shape, seed=41)
    check(lambda t: fiamma.max_pool_backward(t, i, (6, 6)), g)
    g = distinct(2, 3, 3, 3, seed=42)
    check(lambda t: fiamma.avg_pool_backward(t, (6, 6), 3, 2, 1, False, False), g)
    check(lambda t: fiamma.avg_pool_backward(t, (6, 5), 2, 2, 0, False, True, 5),
          distinct(2, 3, 3, 2, seed=43))
    check(lambda t: fiamma.adaptive_avg_pool_backward(t, (7, 5)), g)
    check(lambda t: fiamma.avg_pool_backward(t, (7,), 2, 2, 0, True),
          distinct(2, 4, seed=44))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_lp_pool(nd):
    pool = getattr(fiamma, f"lp_pool{nd}d")
    x = distinct(2, *(4,) * nd, seed=50 + nd, positive=True)
    check(lambda t: pool(t, 2, 2), x)
    check(lambda t: pool(t, 3, 2, 1), x)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_pool_values_modified_in_place_keep_backward(nd):
    # MaxPool then ReLU(inplace=True) (the spatial transformer tutorial's localization net):
    # the backward needs only the indices, as PyTorch's, so the in-place ReLU is allowed
    pool = getattr(fiamma, f"max_pool{nd}d")
    x = fiamma.tensor(distinct(2, 3, *([6] * nd)), dtype=fiamma.float64, requires_grad=True)
    y = pool(x * 1.0, 2)
    y.relu_()
    y.sum().backward()
    ref = fiamma.tensor(x.detach().numpy(), requires_grad=True)
    pool(ref * 1.0, 2).relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ref.grad.numpy())


def test_max_pool_indices_modified_in_place_still_raise():
    x = fiamma.tensor(distinct(1, 2, 4, 4), dtype=fiamma.float64, requires_grad=True)
    v, i = fiamma.max_pool2d(x * 1.0, 2, return_indices=True)
    i.zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        v.sum().backward()
