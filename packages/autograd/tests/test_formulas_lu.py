"""Derivatives of the LU functions (linalg.lu, lu_factor, lu_factor_ex, lu_solve, lu_unpack):
finite differences of first and second derivatives (float64), complex gradcheck, and the
gradients PyTorch computes."""

import numpy as np
import pytest
from _formula_check import check

import fiamma
from fiamma.autograd import gradcheck

L = pytest.importorskip("fiamma.linalg")
pytestmark = pytest.mark.skipif(not hasattr(L, "lu_factor"), reason="no linalg.lu_factor")

SHAPES = [(3, 3), (3, 5), (5, 3), (2, 4, 4), (2, 2, 4)]


def _real(shape, seed=0, shift=0.0):
    a = np.random.default_rng(seed).standard_normal(shape)
    if shift and shape[-1] == shape[-2]:
        a = a + shift * np.eye(shape[-1])
    return a


def _cplx(shape, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if shift and shape[-1] == shape[-2]:
        a = a + shift * np.eye(shape[-1])
    return a


def _leaf(a):
    dt = fiamma.complex128 if np.iscomplexobj(a) else fiamma.float64
    return fiamma.tensor(a, dtype=dt).requires_grad_()


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_and_lu_factor(shape):
    a = _leaf(_real(shape, seed=1))
    check(lambda t: L.lu(t)[1:], a)
    check(lambda t: L.lu_factor(t)[0], a)
    check(lambda t: L.lu_factor_ex(t).LU, a)
    check(lambda t: fiamma.lu(t)[0], a)          # torch.lu (old API)
    check(lambda t: t.lu()[0], a)                 # Tensor.lu


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_unpack(shape):
    lu = _leaf(_real(shape, seed=2))
    piv = L.lu_factor(lu.detach())[1]
    check(lambda t: fiamma.lu_unpack(t, piv)[1:], lu)
    check(lambda t: fiamma.lu_unpack(t, piv)[2], lu)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(left, adjoint):
    lu, piv = L.lu_factor(fiamma.tensor(_real((2, 3, 3), seed=3, shift=3.0)))
    lu = lu.to(fiamma.float64).requires_grad_()
    b = _leaf(_real((3, 2) if left else (2, 3), seed=4))
    check(lambda x, y: L.lu_solve(x, piv, y, left=left, adjoint=adjoint), lu, b)
    if left and not adjoint:
        check(lambda x, y: fiamma.lu_solve(y, x, piv), lu, b)  # torch.lu_solve(b, LU, piv)
        check(lambda x, y: y.lu_solve(x, piv), lu, b)


def test_through_the_factorisation():
    """lu_factor then lu_solve: the gradient of A^-1 B w.r.t. A and B."""
    a = _leaf(_real((3, 3), seed=5, shift=3.0))
    b = _leaf(_real((3, 2), seed=6))
    check(lambda x, y: L.lu_solve(*L.lu_factor(x), y), a, b)
    x = L.lu_solve(*L.lu_factor(a), b)
    ga, gb = fiamma.autograd.grad(x.sum(), (a, b))
    x2 = L.solve(a, b)
    ga2, gb2 = fiamma.autograd.grad(x2.sum(), (a, b))
    np.testing.assert_allclose(ga.numpy(), ga2.numpy(), atol=1e-12)
    np.testing.assert_allclose(gb.numpy(), gb2.numpy(), atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 3), (2, 3, 3)])
def test_complex(shape):
    a = _leaf(_cplx(shape, seed=7))
    assert gradcheck(lambda t: L.lu(t)[1:], (a,))
    assert gradcheck(lambda t: L.lu_factor(t)[0], (a,))
    piv = L.lu_factor(a.detach())[1]
    assert gradcheck(lambda t: fiamma.lu_unpack(t, piv)[1:], (a,))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_complex_lu_solve(left, adjoint):
    lu, piv = L.lu_factor(fiamma.tensor(_cplx((3, 3), seed=8, shift=3.0)))
    lu = lu.detach().requires_grad_()
    b = _leaf(_cplx((3, 2) if left else (2, 3), seed=9))
    assert gradcheck(lambda x, y: L.lu_solve(x, piv, y, left=left, adjoint=adjoint), (lu, b))


def test_outputs_that_carry_no_gradient():
    a = _leaf(_real((3, 3), seed=10))
    P, low, up = L.lu(a)
    assert not P.requires_grad and low.requires_grad and up.requires_grad
    LU, piv, info = L.lu_factor_ex(a)
    assert LU.requires_grad and not piv.requires_grad and not info.requires_grad
    P2, L2, _ = fiamma.lu_unpack(LU, piv)
    assert not P2.requires_grad and L2.requires_grad
    with fiamma.no_grad():
        assert not L.lu(a)[1].requires_grad


def test_singular_u_raises_in_backward():
    a = fiamma.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=fiamma.float64, requires_grad=True)
    _, low, up = L.lu(a)  # the forward is fine
    with pytest.raises(L.LinAlgError, match="linalg.lu: the derivative .* zero on its diagonal"):
        (low.sum() + up.sum()).backward()


@pytest.mark.parity
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cplx", [False, True])
def test_gradients_match_torch(shape, cplx):
    torch = pytest.importorskip("torch")
    a = (_cplx if cplx else _real)(shape, seed=11)
    rng = np.random.default_rng(12)
    k = min(shape[-2:])
    lead = shape[:-2]
    gl = rng.standard_normal(lead + (shape[-2], k))
    gu = rng.standard_normal(lead + (k, shape[-1]))
    glu = rng.standard_normal(shape)
    if cplx:
        gl, gu, glu = gl + 1j * gl[..., ::-1, :], gu + 0.5j, glu - 1j * glu
    A, T = _leaf(a), torch.tensor(a, requires_grad=True)
    _, low, up = L.lu(A)
    mine = fiamma.autograd.grad([low, up], A, [fiamma.tensor(gl), fiamma.tensor(gu)])[0]
    _, tl, tu = torch.linalg.lu(T)
    theirs = torch.autograd.grad([tl, tu], T, [torch.tensor(gl), torch.tensor(gu)])[0]
    np.testing.assert_allclose(mine.numpy(), theirs.resolve_conj().numpy(), atol=1e-10)
    mine = fiamma.autograd.grad(L.lu_factor(A)[0], A, fiamma.tensor(glu))[0]
    theirs = torch.autograd.grad(torch.linalg.lu_factor(T)[0], T, torch.tensor(glu))[0]
    np.testing.assert_allclose(mine.numpy(), theirs.resolve_conj().numpy(), atol=1e-10)


@pytest.mark.parity
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("cplx", [False, True])
def test_lu_solve_gradients_match_torch(left, adjoint, cplx):
    torch = pytest.importorskip("torch")
    make = _cplx if cplx else _real
    a = make((2, 4, 4), seed=13, shift=3.0)
    b = make((4, 3) if left else (3, 4), seed=14)
    g = make((2, 4, 3) if left else (2, 3, 4), seed=15)
    tlu, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    tlu.requires_grad_()
    tb = torch.tensor(b, requires_grad=True)
    tx = torch.linalg.lu_solve(tlu, tpiv, tb, left=left, adjoint=adjoint)
    tga, tgb = torch.autograd.grad(tx, (tlu, tb), torch.tensor(g))
    lu = _leaf(tlu.detach().numpy())
    piv = fiamma.tensor(tpiv.numpy(), dtype=fiamma.int32)
    fb = _leaf(b)
    x = L.lu_solve(lu, piv, fb, left=left, adjoint=adjoint)
    ga, gb = fiamma.autograd.grad(x, (lu, fb), fiamma.tensor(g))
    np.testing.assert_allclose(x.detach().numpy(), tx.detach().resolve_conj().numpy(), atol=1e-10)
    np.testing.assert_allclose(ga.numpy(), tga.resolve_conj().numpy(), atol=1e-10)
    np.testing.assert_allclose(gb.numpy(), tgb.resolve_conj().numpy(), atol=1e-10)


@pytest.mark.parity
def test_lu_unpack_gradients_match_torch():
    torch = pytest.importorskip("torch")
    for shape in [(4, 4), (3, 5), (5, 3)]:
        a = _real(shape, seed=16)
        tlu, tpiv = torch.linalg.lu_factor(torch.tensor(a))
        tlu.requires_grad_()
        rng = np.random.default_rng(17)
        k = min(shape)
        gl, gu = rng.standard_normal((shape[0], k)), rng.standard_normal((k, shape[1]))
        _, tl, tu = torch.lu_unpack(tlu, tpiv)
        tg = torch.autograd.grad([tl, tu], tlu, [torch.tensor(gl), torch.tensor(gu)])[0]
        lu = _leaf(tlu.detach().numpy())
        _, fl, fu = fiamma.lu_unpack(lu, fiamma.tensor(tpiv.numpy(), dtype=fiamma.int32))
        g = fiamma.autograd.grad([fl, fu], lu, [fiamma.tensor(gl), fiamma.tensor(gu)])[0]
        np.testing.assert_allclose(g.numpy(), tg.resolve_conj().numpy(), atol=1e-12)
