"""LU factorisation (linalg.lu_factor / lu_factor_ex / lu / lu_solve, torch.lu / lu_unpack /
lu_solve and the Tensor methods) against float64 NumPy checks written here (P @ L @ U == A,
the triangular shapes, LAPACK's pivots and info), the errors, and PyTorch (parity)."""

import numpy as np
import pytest

import fiamma
from fiamma import linalg as LA


def _rand(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if dtype in (fiamma.complex64, fiamma.complex128):
        a = a + 1j * rng.standard_normal(shape)
    return fiamma.tensor(a, dtype=dtype)


DTYPES = [fiamma.float32, fiamma.float64, fiamma.complex128]
TOL = {fiamma.float32: 1e-5, fiamma.float64: 1e-12, fiamma.complex128: 1e-12}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (2, 3, 6), (2, 6, 3), (1, 1), (0, 3, 3),
                                   (2, 0, 0)])
def test_factor_reconstructs(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    A = _rand(rng, shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)
    LU, piv, info = LA.lu_factor_ex(A)
    assert LU.shape == A.shape and LU.dtype == A.dtype
    assert piv.shape == shape[:-2] + (k,) and piv.dtype == fiamma.int32
    assert info.shape == shape[:-2] and (info.numpy() == 0).all()
    p = piv.numpy()
    if p.size:
        assert p.min() >= 1 and p.max() <= m
        # row j is swapped with a row at or below it (getrf's convention)
        assert (p >= np.arange(1, k + 1)).all()
    P, L, U = LA.lu(A)
    assert P.shape == shape[:-2] + (m, m) and L.shape == shape[:-2] + (m, k)
    assert U.shape == shape[:-2] + (k, n)
    a, Pn, Ln, Un = (t.numpy().astype(np.complex128) for t in (A, P, L, U))
    np.testing.assert_allclose(Pn @ Ln @ Un, a, atol=TOL[dtype] * 10, rtol=0)
    np.testing.assert_array_equal(np.triu(Ln, 1), 0)
    np.testing.assert_array_equal(np.diagonal(Ln, axis1=-2, axis2=-1), 1)
    np.testing.assert_array_equal(np.tril(Un, -1), 0)
    # partial pivoting chose the largest entry of each column: |L| <= 1 (complex: by
    # |re| + |im| as LAPACK, so |L| <= sqrt(2))
    bound = np.sqrt(2) if dtype is fiamma.complex128 else 1.0
    assert (np.abs(Ln) <= bound + 1e-6).all()
    # the packed form is L below the diagonal and U on and above it; lu_unpack gives them back
    P2, L2, U2 = fiamma.lu_unpack(LU, piv)
    np.testing.assert_array_equal(P2.numpy(), P.numpy())
    np.testing.assert_array_equal(L2.numpy(), L.numpy())
    np.testing.assert_array_equal(U2.numpy(), U.numpy())


def test_singular_info_and_errors():
    A = fiamma.tensor([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
    LU, piv, info = LA.lu_factor_ex(A)
    assert info.tolist() == [2, 0]
    P, L, U = LA.lu(A)  # no error for singular input
    np.testing.assert_allclose((P @ L @ U).numpy(), A.numpy())
    with pytest.raises(LA.LinAlgError, match=r"Batch element 0.*U\[2,2\] is zero"):
        LA.lu_factor(A)
    with pytest.raises(LA.LinAlgError, match="lu_factor_ex"):
        LA.lu_factor_ex(A, check_errors=True)
    assert fiamma.lu(A, get_infos=True)[2].tolist() == [2, 0]
    z = fiamma.zeros(3, 3)  # every pivot zero: info is the first, nothing divided by zero
    LU, piv, info = LA.lu_factor_ex(z)
    assert info.item() == 1 and np.isfinite(LU.numpy()).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_solve(dtype):
    rng = np.random.default_rng(7)
    A = _rand(rng, (3, 4, 4), dtype) + 4 * fiamma.eye(4, dtype=dtype)
    B = _rand(rng, (3, 4, 2), dtype)
    LU, piv = LA.lu_factor(A)
    a, b = A.numpy().astype(np.complex128), B.numpy().astype(np.complex128)
    tol = TOL[dtype] * 100
    np.testing.assert_allclose(LA.lu_solve(LU, piv, B).numpy(), np.linalg.solve(a, b), atol=tol)
    ah = np.conj(np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(LA.lu_solve(LU, piv, B, adjoint=True).numpy(),
                               np.linalg.solve(ah, b), atol=tol)
    Bt = _rand(rng, (3, 2, 4), dtype)
    x = LA.lu_solve(LU, piv, Bt, left=False).numpy()
    np.testing.assert_allclose(x @ a, Bt.numpy(), atol=tol)
    # the old argument order: torch.lu_solve(b, LU_data, LU_pivots) and the Tensor method
    np.testing.assert_array_equal(fiamma.lu_solve(B, LU, piv).numpy(),
                                  LA.lu_solve(LU, piv, B).numpy())
    np.testing.assert_array_equal(B.lu_solve(LU, piv).numpy(), LA.lu_solve(LU, piv, B).numpy())
    np.testing.assert_array_equal(A.lu()[0].numpy(), LU.numpy())


def test_unpack_parts_and_functional():
    A = fiamma.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    LU, piv = fiamma.lu(A)
    P, L, U = fiamma.lu_unpack(LU, piv, unpack_data=False)
    assert L.numel() == 0 and U.numel() == 0 and P.shape == (2, 2)
    P, L, U = fiamma.lu_unpack(LU, piv, unpack_pivots=False)
    assert P.numel() == 0 and L.shape == (2, 2) and U.shape == (2, 3)
    assert fiamma.functional.lu(A)[1].tolist() == piv.tolist()


def test_bad_input():
    A = fiamma.eye(3)
    LU, piv = LA.lu_factor(A)
    with pytest.raises(RuntimeError, match="without pivoting"):
        LA.lu_factor(A, pivot=False)
    with pytest.raises(RuntimeError, match="floating point"):
        LA.lu_factor(fiamma.ones(3, 3, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.lu(fiamma.ones(3))
    with pytest.raises(RuntimeError, match="int32"):
        LA.lu_solve(LU, piv.long(), fiamma.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"pivots must be 1-based row indices in \[1, 3\]"):
        LA.lu_solve(LU, fiamma.tensor([1, 2, 9], dtype=fiamma.int32), fiamma.ones(3, 1))
    with pytest.raises(RuntimeError, match="pivots"):
        fiamma.lu_unpack(LU, fiamma.tensor([0, 1, 2], dtype=fiamma.int32))
    with pytest.raises(RuntimeError, match="do not match"):
        LA.lu_solve(LU, piv[:2], fiamma.ones(3, 1))
    with pytest.raises(RuntimeError, match="rows must be 3"):
        LA.lu_solve(LU, piv, fiamma.ones(2, 1))
    with pytest.raises(RuntimeError, match="same dtype"):
        LA.lu_solve(LU, piv, fiamma.ones(3, 1, dtype=fiamma.float64))


@pytest.mark.parity
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (3, 6), (6, 3)])
def test_matches_torch(shape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape)
    a[..., 1, :] = a[..., 0, :] * 2  # a rank-deficient row pair: pivots and infos must agree
    A, T = fiamma.tensor(a), torch.tensor(a)
    LU, piv, info = LA.lu_factor_ex(A)
    tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(T)
    np.testing.assert_allclose(LU.numpy(), tLU.numpy(), atol=1e-12)
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    np.testing.assert_array_equal(info.numpy(), tinfo.numpy())
    for mine, theirs in zip(LA.lu(A), torch.linalg.lu(T)):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), atol=1e-12)
    for mine, theirs in zip(fiamma.lu_unpack(LU, piv), torch.lu_unpack(tLU, tpiv)):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), atol=1e-12)
    if shape[-1] == shape[-2]:
        b = rng.standard_normal(shape[:-1] + (2,))
        good = a + 5 * np.eye(shape[-1])
        LU, piv = LA.lu_factor(fiamma.tensor(good))
        tLU, tpiv = torch.linalg.lu_factor(torch.tensor(good))
        np.testing.assert_allclose(LA.lu_solve(LU, piv, fiamma.tensor(b)).numpy(),
                                   torch.linalg.lu_solve(tLU, tpiv, torch.tensor(b)).numpy(),
                                   atol=1e-10)


@pytest.mark.parity
def test_complex_pivots_match_torch():
    """Complex pivots are chosen by |re| + |im| (LAPACK's izamax), as PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6, 6)) + 1j * rng.standard_normal((4, 6, 6))
    LU, piv = LA.lu_factor(fiamma.tensor(a))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    np.testing.assert_allclose(LU.numpy(), tLU.numpy(), atol=1e-12)
