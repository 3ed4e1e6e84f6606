"""First and second derivatives of the matrix products against finite differences (float64):
every 1-D/2-D/batched form of matmul with batch broadcasting, non-contiguous operands, the
fused add* ops with alpha/beta and a broadcast input, and their in-place forms."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((2, 3), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (2, 3, 4)), ((2, 2, 3), (3,)),
    ((0, 3), (3, 2)), ((2, 0), (0, 3)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    check(fiamma.matmul, rand(*sa, rng=rng), rand(*sb, rng=rng))


def test_matmul_noncontiguous_and_operator():
    rng = np.random.default_rng(1)
    check(lambda a, b: a @ b, noncontig(2, 3, rng=rng), noncontig(3, 4, rng=rng))
    check(lambda a, b: a @ b, noncontig(2, 2, 3, rng=rng), noncontig(3, rng=rng))
    a = rand(3, 3, rng=rng)
    check(lambda t: t @ t, a)  # one tensor on both sides


def test_mm_bmm_mv_dot():
    rng = np.random.default_rng(2)
    check(fiamma.mm, rand(2, 3, rng=rng), noncontig(3, 4, rng=rng))
    check(fiamma.bmm, rand(2, 2, 3, rng=rng), noncontig(2, 3, 4, rng=rng))
    check(fiamma.mv, noncontig(2, 3, rng=rng), rand(3, rng=rng))
    check(fiamma.dot, rand(4, rng=rng), noncontig(4, rng=rng))
    check(fiamma.vdot, rand(4, rng=rng), rand(4, rng=rng))
    check(fiamma.outer, rand(3, rng=rng), rand(2, rng=rng))
    check(fiamma.inner, rand(2, 3, rng=rng), rand(4, 3, rng=rng))
    check(fiamma.inner, rand(3, rng=rng), rand(2, 2, 3, rng=rng))


@pytest.mark.parametrize("alpha,beta", [(1, 1), (0.5, -2.0), (2, 0)])
def test_add_products(alpha, beta):
    rng = np.random.default_rng(3)
    kw = dict(alpha=alpha, beta=beta)
    check(lambda c, a, b: fiamma.addmm(c, a, b, **kw), rand(2, 4, rng=rng),
          rand(2, 3, rng=rng), noncontig(3, 4, rng=rng))
    check(lambda c, a, b: fiamma.addmm(c, a, b, **kw), rand(4, rng=rng), rand(2, 3, rng=rng),
          rand(3, 4, rng=rng))
    check(lambda c, a, b: fiamma.addmv(c, a, b, **kw), rand(1, rng=rng), rand(2, 3, rng=rng),
          rand(3, rng=rng))
    check(lambda c, a, b: fiamma.addr(c, a, b, **kw), rand(2, 1, rng=rng), rand(2, rng=rng),
          rand(3, rng=rng))
    check(lambda c, a, b: fiamma.baddbmm(c, a, b, **kw), rand(2, 4, rng=rng),
          rand(3, 2, 2, rng=rng), rand(3, 2, 4, rng=rng))
    check(lambda c, a, b: fiamma.addbmm(c, a, b, **kw), rand(2, 4, rng=rng),
          rand(3, 2, 2, rng=rng), noncontig(3, 2, 4, rng=rng))


@pytest.mark.parametrize("op,shapes", [
    ("addmm_", ((2, 4), (2, 3), (3, 4))), ("addmv_", ((2,), (2, 3), (3,))),
    ("addr_", ((2, 3), (2,), (3,))), ("baddbmm_", ((3, 2, 4), (3, 2, 2), (3, 2, 4))),
    ("addbmm_", ((2, 4), (3, 2, 2), (3, 2, 4))),
])
def test_inplace_add_products(op, shapes):
    rng = np.random.default_rng(4)
    c, a, b = (rand(*s, rng=rng) for s in shapes)

    def f(c, a, b):
        y = c * 1.0
        getattr(y, op)(a, b, beta=0.5, alpha=2.0)
        return y

    check(f, c, a, b)


def test_inner_formula():
    """``inner`` records under its own name only through ``out=`` paths; its formula is checked
    directly against the gradients of the equivalent matmul."""
    from fiamma.autograd._formulas import lookup

    rng = np.random.default_rng(5)
    a, b = rand(2, 2, 3, rng=rng), rand(4, 3, rng=rng)
    g = rand(2, 2, 4, rng=rng).detach()

    class Ctx:
        op = "inner"
        inputs = (a.detach(), b.detach())
        needs_input_grad = (True, True)
        kwargs = {}

    ga, gb = lookup("inner")[0](Ctx, g)
    ea, eb = fiamma.autograd.grad(fiamma.matmul(a, b.t()), (a, b), g)
    np.testing.assert_allclose(ga.numpy(), ea.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), eb.numpy(), rtol=1e-12)


def test_float32_matches_float64():
    rng = np.random.default_rng(6)
    a64, b64 = rand(2, 3, 4, rng=rng), rand(4, 5, rng=rng)
    a32, b32 = (t.detach().to(fiamma.float32).requires_grad_() for t in (a64, b64))
    g64 = fiamma.autograd.grad((a64 @ b64).tanh().sum(), (a64, b64))
    g32 = fiamma.autograd.grad((a32 @ b32).tanh().sum(), (a32, b32))
    for x, y in zip(g32, g64):
        assert x.dtype is fiamma.float32
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
