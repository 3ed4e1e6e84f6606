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


@pytest.mark.parametrize("op,shapes", [
    (fiamma.addmm, ((3,), (2, 4), (4, 3))),
    (fiamma.addmv, ((2,), (2, 4), (4,))),
    (fiamma.baddbmm, ((1, 3), (2, 2, 4), (2, 4, 3))),
    (fiamma.addr, ((2, 3), (2,), (3,))),
    (fiamma.addbmm, ((2, 3), (5, 2, 4), (5, 4, 3))),
])
def test_fused_add_input_not_saved(op, shapes):
    # the added input's value is not needed for backward (only its shape), so it is not saved:
    # writing into it in place after the forward pass (an optimizer step on linear's bias
    # between two backward passes, as GAN scripts do) is allowed, as in PyTorch; writing into
    # a factor still raises the version error
    rng = np.random.default_rng(0)
    c, a, b = (fiamma.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    y = op(c, a, b, beta=2.0)
    node = y.grad_fn
    assert node.inputs[0] is None and node.inputs[1] is not None
    with fiamma.no_grad():
        c.add_(1.0)
    g = fiamma.tensor(rng.standard_normal(tuple(y.shape)))
    y.backward(g, retain_graph=True)
    want_c = (2.0 * g).numpy()
    if want_c.ndim > c.dim():
        want_c = want_c.sum(axis=tuple(range(want_c.ndim - c.dim())))
    for ax, n in enumerate(c.shape):
        if n == 1 and want_c.shape[ax] != 1:
            want_c = want_c.sum(axis=ax, keepdims=True)
    np.testing.assert_allclose(c.grad.numpy(), want_c, rtol=1e-12)
    with fiamma.no_grad():
        b.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(g)


def test_unsaved_positions_on_the_one_and_two_input_paths():
    # derivative(unsaved=...) also applies to the written-out recording of 1- and 2-tensor ops
    from fiamma.autograd import _formulas as F
    from fiamma.autograd_hook import ops

    fn, save = F.lookup("mul")
    try:
        F.derivative(ops.mul, save="inputs", unsaved=(1,))(fn)
        a = fiamma.tensor([1.0, 2.0], requires_grad=True)
        b = fiamma.tensor([3.0, 4.0])
        y = a * b
        assert y.grad_fn.inputs[1] is None            # not kept (the formula would need it)
        assert F.unsaved("mul") == (1,)
    finally:
        F.derivative(ops.mul, save=save)(fn)
    assert F.unsaved("mul") == ()
    y = fiamma.tensor([1.0, 2.0], requires_grad=True) * fiamma.tensor([3.0, 4.0])
    assert y.grad_fn.inputs[1] is not None
    y.sum().backward()


def _pattern(rng, m, k, density=0.5):
    a = rng.standard_normal((m, k))
    a[rng.random((m, k)) >= density] = 0
    return fiamma.tensor(a).to_sparse_csr()


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_sparse_compressed_products(layout):
    # the C kernel's ops sparse_csr_mm / sparse_csr_sddmm: derivatives w.r.t. the stored values
    # and the dense operand, first and second order (CSC @ D and D @ CSR are the transposed
    # kernel)
    rng = np.random.default_rng(3)
    p = _pattern(rng, 4, 5)
    if layout == "csc":
        p = p.to_sparse_csc()
    ci, pi = (p.crow_indices(), p.col_indices()) if layout == "csr" else \
        (p.ccol_indices(), p.row_indices())
    ctor = fiamma.sparse_csr_tensor if layout == "csr" else fiamma.sparse_csc_tensor
    v = p.values().clone().requires_grad_()

    def s(vals):
        return ctor(ci, pi, vals, (4, 5))

    check(lambda vals, d: s(vals) @ d, v, noncontig(5, 3, rng=rng))
    check(lambda vals, d: d @ s(vals), v, rand(2, 4, rng=rng))
    check(lambda vals, d: fiamma.mv(s(vals), d), v, rand(5, rng=rng))
    csr = p.to_sparse_csr() if layout == "csc" else p
    check(lambda a, b: fiamma.sparse.sampled_addmm(csr, a, b, beta=0.5, alpha=2.0).values(),
          rand(4, 2, rng=rng), noncontig(2, 5, rng=rng))
