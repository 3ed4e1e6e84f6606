"""First and second derivatives of reductions, scans and softmax against finite differences
(float64): every dim form (None, int, tuple, keepdim), non-contiguous, 0-d and empty inputs,
zeros for prod/cumprod, ties for the extremes, the zero points of std and norm."""

import math

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

DIM_FORMS = [dict(), dict(dim=1), dict(dim=-1, keepdim=True), dict(dim=(0, 2)),
             dict(dim=(0, 2), keepdim=True), dict(dim=())]


def _all_forms(fn, rng, low=None, high=None, empty=True, zero_d=True, forms=DIM_FORMS):
    x = rand(2, 3, 2, rng=rng, low=low, high=high)
    for kw in forms:
        check(lambda t: fn(t, **kw), x)
    check(lambda t: fn(t, dim=0), noncontig(3, 2, rng=rng, low=low, high=high))
    if zero_d:
        check(lambda t: fn(t), rand(rng=rng, low=low, high=high))
        check(lambda t: fn(t, dim=0), rand(rng=rng, low=low, high=high))
    if empty:
        check(lambda t: fn(t, dim=1), rand(2, 0, rng=rng))
        check(lambda t: fn(t, dim=0), rand(0, 3, rng=rng))


def test_sum():
    _all_forms(fiamma.sum, np.random.default_rng(0))
    x = rand(3, seed=1)
    (g,) = fiamma.autograd.grad(x.sum(dtype=fiamma.float32) * 2, x)  # summed in float32
    assert g.dtype is fiamma.float64 and g.tolist() == [2.0, 2.0, 2.0]


def test_mean():
    _all_forms(fiamma.mean, np.random.default_rng(1), empty=False)


def test_prod_without_zeros():
    _all_forms(fiamma.prod, np.random.default_rng(2), low=0.5, high=1.5,
               forms=[dict(), dict(dim=1), dict(dim=-1, keepdim=True)])


def _with_zeros(shape, positions, seed):
    a = np.random.default_rng(seed).uniform(0.5, 1.5, size=shape)
    for p in positions:
        a[p] = 0.0
    return fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()


def test_prod_with_zeros():
    one = _with_zeros((3, 4), [(0, 1)], 3)
    two = _with_zeros((3, 4), [(1, 0), (1, 2), (2, 3)], 4)
    for x in (one, two):
        check(lambda t: t.prod(), x)
        check(lambda t: t.prod(1), x)
        check(lambda t: t.prod(0, keepdim=True), x)
    # exact values: the gradient at the zero is the product of the others
    x = fiamma.tensor([2.0, 0.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(x.prod(), x)
    assert g.tolist() == [0.0, 6.0, 0.0]
    check(lambda t: t.prod(), rand(seed=5))
    check(lambda t: t.prod(0), rand(0, 2, seed=5))


def test_nansum_nanmean():
    a = np.random.default_rng(6).standard_normal((3, 4))
    a[0, 1] = a[2, 2] = np.nan
    x = fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()
    for fn in (fiamma.nansum, fiamma.nanmean):
        check(lambda t: fn(t), x)
        check(lambda t: fn(t, dim=1), x)
        check(lambda t: fn(t, dim=0, keepdim=True), x)
        (g,) = fiamma.autograd.grad(fn(x), x)
        assert g[0, 1].item() == 0.0 and not math.isnan(g.sum().item())


# ---- scans --------------------------------------------------------------------------------

def test_cumsum():
    rng = np.random.default_rng(7)
    x = rand(3, 4, rng=rng)
    for d in (0, 1, -1):
        check(lambda t: t.cumsum(d), x)
    check(lambda t: t.cumsum(0), noncontig(3, 4, rng=rng))
    check(lambda t: t.cumsum(0), rand(rng=rng))
    check(lambda t: t.cumsum(1), rand(2, 0, rng=rng))
    check(lambda t: fiamma.cumsum(t, 0, dtype=fiamma.float64), rand(5, rng=rng))


def test_cumprod_without_zeros():
    rng = np.random.default_rng(8)
    x = rand(3, 4, rng=rng, low=0.5, high=1.5)
    for d in (0, 1, -1):
        check(lambda t: t.cumprod(d), x)
    check(lambda t: t.cumprod(1), noncontig(3, 4, rng=rng, low=0.5, high=1.5))
    check(lambda t: t.cumprod(0), rand(rng=rng))
    check(lambda t: t.cumprod(0), rand(1, rng=rng))
    check(lambda t: t.cumprod(1), rand(2, 0, rng=rng))


@pytest.mark.parametrize("zeros", [[(0, 0)], [(1, 2)], [(0, 3)], [(1, 1), (1, 3)],
                                   [(2, 0), (2, 1), (0, 2)]])
def test_cumprod_with_zeros(zeros):
    x = _with_zeros((3, 5), zeros, 9)
    check(lambda t: t.cumprod(1), x)
    check(lambda t: t.cumprod(0), x)
    check(lambda t: t.t().cumprod(0), x)


def test_cumprod_zero_exact():
    x = fiamma.tensor([2.0, 0.0, 3.0, 4.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(x.cumprod(0).sum(), x)
    # d/dx1 = x0 + x0*x2 + x0*x2*x3 = 2 + 6 + 24; after the zero everything is 0
    assert g.tolist() == [1.0, 32.0, 0.0, 0.0]


# ---- extremes -----------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin(op):
    _all_forms(getattr(fiamma, op), np.random.default_rng(10), empty=False)


def test_amax_ties_split_evenly():
    x = fiamma.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=fiamma.float64,
                      requires_grad=True)
    (g,) = fiamma.autograd.grad(x.amax(1).sum(), x)
    np.testing.assert_allclose(g.numpy(), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    (g,) = fiamma.autograd.grad(x.max(), x)
    np.testing.assert_allclose(g.numpy(), [[0, 0.5, 0.5], [0, 0, 0]])
    (g,) = fiamma.autograd.grad(x.amin(), x)
    np.testing.assert_allclose(g.numpy(), [[1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min(op):
    rng = np.random.default_rng(11)
    fn = getattr(fiamma, op)
    x = rand(3, 4, rng=rng)
    check(lambda t: fn(t), x)
    check(lambda t: fn(t, 1), x)
    check(lambda t: fn(t, 0, keepdim=True), noncontig(3, 4, rng=rng))
    check(lambda t: getattr(t, op)(dim=-1).values, x)
    check(lambda t: fn(t, 0), rand(rng=rng))
    check(lambda t: fn(t, 1), rand(0, 3, rng=rng))


def test_max_dim_ties_go_to_the_index():
    x = fiamma.tensor([[1.0, 3.0, 3.0]], dtype=fiamma.float64, requires_grad=True)
    v, i = x.max(1)
    (g,) = fiamma.autograd.grad(v.sum(), x)
    expected = [[0.0, 0.0, 0.0]]
    expected[0][i.item()] = 1.0
    assert g.tolist() == expected


def test_aminmax():
    rng = np.random.default_rng(12)
    x = rand(3, 4, rng=rng)
    check(lambda t: fiamma.aminmax(t), x)
    check(lambda t: fiamma.aminmax(t, dim=1), x)
    check(lambda t: fiamma.aminmax(t, dim=0, keepdim=True), noncontig(3, 4, rng=rng))
    check(lambda t: fiamma.aminmax(t, dim=0).max, x)


# ---- variance, norms ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std(op):
    rng = np.random.default_rng(13)
    fn = getattr(fiamma, op)
    x = rand(3, 4, rng=rng)
    for kw in (dict(), dict(dim=1), dict(dim=0, keepdim=True), dict(dim=(0, 1), correction=0),
               dict(dim=1, correction=2), dict(dim=1, unbiased=False)):
        check(lambda t: fn(t, **kw), x)
    check(lambda t: fn(t, 0), noncontig(3, 4, rng=rng))


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
def test_var_mean(op):
    rng = np.random.default_rng(14)
    fn = getattr(fiamma, op)
    x = rand(3, 4, rng=rng)
    check(lambda t: fn(t), x)
    check(lambda t: fn(t, 1), x)
    check(lambda t: fn(t, dim=0, keepdim=True, correction=0), noncontig(3, 4, rng=rng))
    check(lambda t: fn(t, 1)[1], x)


def test_std_of_constant_row_is_not_nan():
    x = fiamma.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]], dtype=fiamma.float64,
                      requires_grad=True)
    (g,) = fiamma.autograd.grad(x.std(1).sum(), x)
    assert not np.isnan(g.numpy()).any()
    assert g[0].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("p", [2, "fro", 1, 3, 1.5, 0.5, float("inf"), -float("inf"), 0])
def test_norm(p):
    rng = np.random.default_rng(15)
    x = rand(3, 4, rng=rng)
    check(lambda t: t.norm(p), x)
    check(lambda t: fiamma.norm(t, p, dim=1), x)
    check(lambda t: fiamma.norm(t, p, dim=0, keepdim=True), noncontig(3, 4, rng=rng))


def test_norm_at_zero_is_not_nan():
    for p in (2, 3, 1.5, 0.5):
        x = fiamma.zeros(3, dtype=fiamma.float64, requires_grad=True)
        (g,) = fiamma.autograd.grad(x.norm(p), x)
        assert g.tolist() == [0.0, 0.0, 0.0], p
    x = fiamma.tensor([0.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(x.norm(0.5), x)
    assert g[0].item() == 0.0 and math.isfinite(g[1].item())


def test_logsumexp():
    rng = np.random.default_rng(16)
    x = rand(2, 3, 2, rng=rng)
    for kw in (dict(dim=1), dict(dim=(0, 2)), dict(dim=-1, keepdim=True)):
        check(lambda t: fiamma.logsumexp(t, **kw), x)
    check(lambda t: t.logsumexp(0), noncontig(3, 4, rng=rng))
    check(lambda t: t.logsumexp(0), rand(rng=rng))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op):
    rng = np.random.default_rng(17)
    fn = getattr(fiamma, op)
    x = rand(2, 3, 4, rng=rng)
    for d in (0, 1, -1):
        check(lambda t: fn(t, d), x)
    check(lambda t: fn(t, 0), noncontig(3, 4, rng=rng))
    check(lambda t: fn(t, 0), rand(rng=rng))
    check(lambda t: fn(t, 1), rand(2, 0, rng=rng))
    check(lambda t: fn(t, 0, dtype=fiamma.float64), rand(3, rng=rng))


@pytest.mark.parametrize("fn", [
    lambda t: t.softmax(1) * t,
    lambda t: t.std(0) + t.logsumexp(1).sum(),
    lambda t: t.cumprod(1) + t.amax(0),
    lambda t: t.norm(dim=1) * t.prod(1),
])
def test_float32_matches_float64(fn):
    x64 = rand(3, 4, seed=20, low=0.5, high=1.5)
    x32 = x64.detach().to(fiamma.float32).requires_grad_()
    (g64,) = fiamma.autograd.grad(fn(x64).sum(), x64)
    (g32,) = fiamma.autograd.grad(fn(x32).sum(), x32)
    assert g32.dtype is fiamma.float32
    np.testing.assert_allclose(g32.numpy(), g64.numpy(), rtol=1e-4, atol=1e-5)
