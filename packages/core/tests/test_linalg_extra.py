"""torch.linalg.matrix_exp / householder_product / tensorinv / tensorsolve / vander,
torch.cholesky_solve / cholesky_inverse / triangular_solve / orgqr: values against NumPy
float64 references (and SciPy's expm when installed), errors, and parity with PyTorch."""

import numpy as np
import pytest

import fiamma
import fiamma.linalg as L


def _np_expm_taylor(a):
    """exp(a) by squaring a Taylor series (a float64 reference for moderate norms)."""
    s = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(0).max(), 1e-300)))) + 4)
    x = a / 2.0 ** s
    r = np.eye(a.shape[0], dtype=a.dtype)
    term = np.eye(a.shape[0], dtype=a.dtype)
    for k in range(1, 30):
        term = term @ x / k
        r = r + term
    for _ in range(s):
        r = r @ r
    return r


@pytest.mark.parametrize("scale", [0.01, 1.0, 20.0])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_matrix_exp_values(scale, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 4)) * scale
    if dtype is np.complex128:
        a = a + 1j * rng.standard_normal((3, 4, 4)) * scale
    got = L.matrix_exp(fiamma.tensor(a)).numpy()
    ref = np.stack([_np_expm_taylor(m) for m in a])
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
    assert np.allclose(fiamma.tensor(a).matrix_exp().numpy(), got)
    assert np.allclose(fiamma.matrix_exp(fiamma.tensor(a)).numpy(), got)


def test_matrix_exp_properties_and_errors():
    # exp of a nilpotent and of a rotation generator
    n = fiamma.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=fiamma.float64)
    assert np.allclose(L.matrix_exp(n).numpy(), [[1.0, 1.0], [0.0, 1.0]], rtol=0, atol=1e-15)
    r = L.matrix_exp(fiamma.tensor([[0.0, -np.pi / 2], [np.pi / 2, 0.0]], dtype=fiamma.float64))
    assert np.allclose(r.numpy(), [[0, -1], [1, 0]], atol=1e-15)
    assert L.matrix_exp(fiamma.zeros(0, 3, 3)).shape == (0, 3, 3)
    assert np.allclose(L.matrix_exp(fiamma.tensor([[2.0]])).numpy(), np.exp(2.0))
    f32 = L.matrix_exp(fiamma.eye(3)).numpy()
    assert f32.dtype == np.float32 and np.allclose(f32, np.e * np.eye(3))
    with pytest.raises(RuntimeError, match="square"):
        L.matrix_exp(fiamma.zeros(2, 3))
    with pytest.raises(RuntimeError, match="floating point"):
        L.matrix_exp(fiamma.eye(2, dtype=fiamma.int64))


def _householder_np(a, tau):
    m, n = a.shape
    q = np.eye(m, dtype=a.dtype)
    for i in range(len(tau)):
        v = np.zeros(m, dtype=a.dtype)
        v[i] = 1
        v[i + 1:] = a[i + 1:, i]
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v.conj()))
    return q[:, :n]


def test_householder_product_values_and_errors():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 3))
    tau = rng.standard_normal((2, 2))
    got = L.householder_product(fiamma.tensor(a), fiamma.tensor(tau)).numpy()
    ref = np.stack([_householder_np(a[i], tau[i]) for i in range(2)])
    assert np.abs(got - ref).max() < 1e-13
    assert np.allclose(fiamma.orgqr(fiamma.tensor(a), fiamma.tensor(tau)).numpy(), ref)
    assert np.allclose(fiamma.tensor(a).orgqr(fiamma.tensor(tau)).numpy(), ref)
    # QR's reflectors rebuild an orthonormal Q
    q = L.householder_product(fiamma.tensor(a[0]), fiamma.tensor(tau[0])).numpy()
    assert q.shape == (5, 3)
    with pytest.raises(RuntimeError, match="greater than or equal"):
        L.householder_product(fiamma.zeros(2, 3), fiamma.zeros(1))
    with pytest.raises(RuntimeError, match="tau"):
        L.householder_product(fiamma.zeros(4, 2), fiamma.zeros(3))


def test_cholesky_solve_inverse():
    rng = np.random.default_rng(2)
    m = rng.standard_normal((2, 3, 3))
    s = m @ m.transpose(0, 2, 1) + np.eye(3)
    lo = np.linalg.cholesky(s)
    b = rng.standard_normal((2, 3, 2))
    x = fiamma.cholesky_solve(fiamma.tensor(b), fiamma.tensor(lo)).numpy()
    assert np.abs(x - np.linalg.solve(s, b)).max() < 1e-12
    up = lo.transpose(0, 2, 1).copy()
    x = fiamma.tensor(b).cholesky_solve(fiamma.tensor(up), upper=True).numpy()
    assert np.abs(x - np.linalg.solve(s, b)).max() < 1e-12
    inv = fiamma.cholesky_inverse(fiamma.tensor(lo)).numpy()
    assert np.abs(inv - np.linalg.inv(s)).max() < 1e-12
    assert np.abs(fiamma.tensor(up).cholesky_inverse(True).numpy() - inv).max() < 1e-12
    with pytest.raises(RuntimeError, match="same dtype"):
        fiamma.cholesky_solve(fiamma.zeros(3, 1), fiamma.eye(3, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="Incompatible"):
        fiamma.cholesky_solve(fiamma.zeros(2, 1), fiamma.eye(3))
    with pytest.raises(TypeError, match="upper"):
        fiamma.cholesky_inverse(fiamma.eye(3), "sum")


def test_tensorinv_tensorsolve_vander():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 2, 3))
    inv = L.tensorinv(fiamma.tensor(a), ind=1).numpy()
    assert inv.shape == (2, 3, 6)
    assert np.abs(np.tensordot(a, inv, 2) - np.eye(6)).max() < 1e-12
    with pytest.raises(RuntimeError, match="prod"):
        L.tensorinv(fiamma.zeros(2, 3))
    a = rng.standard_normal((2, 3, 6))
    b = rng.standard_normal((2, 3))
    x = L.tensorsolve(fiamma.tensor(a), fiamma.tensor(b)).numpy()
    assert np.allclose(np.tensordot(a, x, 1), b)
    x = L.tensorsolve(fiamma.tensor(a.transpose(2, 0, 1).copy()), fiamma.tensor(b),
                      dims=(0,)).numpy()
    assert np.allclose(np.tensordot(a, x, 1), b)
    v = L.vander(fiamma.tensor([[1.0, 2.0, 3.0]], dtype=fiamma.float64), N=4).numpy()
    assert np.array_equal(v, np.vander([1.0, 2.0, 3.0], 4, increasing=True)[None])
    assert L.vander(fiamma.tensor([2, 3])).dtype == fiamma.int64
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        L.vander(fiamma.tensor([1.0]), N=1)
    with pytest.raises(RuntimeError, match="Bool"):
        L.vander(fiamma.tensor([True, False]))


def test_tensorsolve_dims_forms_and_checks():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 6, 3))
    b = rng.standard_normal(6)
    want = np.linalg.tensorsolve(a, b, axes=(0, 2))
    for dims in ((0, 2), [0, 2], (-3, -1)):
        got = L.tensorsolve(fiamma.tensor(a), fiamma.tensor(b), dims=dims).numpy()
        assert got.shape == (2, 3) and np.allclose(got, want), dims
    # only sizes count: B (3, 2) against A.shape[:2] == (2, 3) is solved flat, as in PyTorch
    a2 = rng.standard_normal((2, 3, 6))
    b2 = rng.standard_normal((3, 2))
    got = L.tensorsolve(fiamma.tensor(a2), fiamma.tensor(b2)).numpy()
    assert np.allclose(a2.reshape(6, 6) @ got, b2.reshape(6))
    with pytest.raises(IndexError, match="tensorsolve"):
        L.tensorsolve(fiamma.tensor(a), fiamma.tensor(b), dims=(3,))
    with pytest.raises(TypeError, match="tuple of ints"):
        L.tensorsolve(fiamma.tensor(a), fiamma.tensor(b), dims=0)
    with pytest.raises(RuntimeError, match="18 != 6"):
        L.tensorsolve(fiamma.tensor(a2), fiamma.tensor(b))
    with pytest.raises(RuntimeError, match="6 x 6"):
        L.tensorsolve(fiamma.zeros(2, 2, 6), fiamma.zeros(6, 1))


@pytest.mark.parity
def test_tensorsolve_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    for ashape, bshape, dims in (((2, 6, 3), (6,), (2, 0)), ((3, 2, 2, 3), (3, 2), None),
                                 ((6, 3, 2), (3, 2), (-3,)), ((6, 2, 3), (6,), ())):
        a, b = rng.standard_normal(ashape), rng.standard_normal(bshape)
        got = L.tensorsolve(fiamma.tensor(a), fiamma.tensor(b), dims=dims).numpy()
        ref = torch.linalg.tensorsolve(torch.tensor(a), torch.tensor(b), dims=dims).numpy()
        assert got.shape == ref.shape and np.allclose(got, ref), (ashape, dims)


def test_triangular_solve():
    rng = np.random.default_rng(4)
    u = np.triu(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    b = rng.standard_normal((3, 2))
    r = fiamma.triangular_solve(fiamma.tensor(b), fiamma.tensor(u))
    assert np.allclose(u @ r.solution.numpy(), b)
    assert np.array_equal(r.cloned_coefficient.numpy(), u)
    r = fiamma.tensor(b).triangular_solve(fiamma.tensor(u), transpose=True)
    assert np.allclose(u.T @ r.solution.numpy(), b)


@pytest.mark.parity
def test_parity_with_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 4, 4)) * 3
    assert np.allclose(L.matrix_exp(fiamma.tensor(a)).numpy(),
                       torch.linalg.matrix_exp(torch.tensor(a)).numpy(), rtol=1e-11, atol=1e-11)
    qa, qt = torch.geqrf(torch.tensor(rng.standard_normal((2, 5, 3))))
    assert np.allclose(L.householder_product(fiamma.tensor(qa.numpy()),
                                             fiamma.tensor(qt.numpy())).numpy(),
                       torch.linalg.householder_product(qa, qt).numpy(), atol=1e-13)
    x = rng.standard_normal((2, 3))
    assert np.array_equal(L.vander(fiamma.tensor(x), N=5).numpy(),
                          torch.linalg.vander(torch.tensor(x), N=5).numpy())
    a = rng.standard_normal((6, 2, 3))
    assert np.allclose(L.tensorinv(fiamma.tensor(a), ind=1).numpy(),
                       torch.linalg.tensorinv(torch.tensor(a), ind=1).numpy())


def _ldl_case(kind, n, rng, small_diag):
    if kind == "real":
        a = rng.standard_normal((n, n))
        a = a + a.T
    else:
        c = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
        a = c + (c.conj().T if kind == "herm" else c.T)
    if small_diag:
        a[np.diag_indices(n)] *= 0.01          # forces 2x2 pivots
    return a


@pytest.mark.parametrize("kind", ["real", "sym", "herm"])
def test_ldl_factor_reconstructs_and_solves(kind):
    from fiamma._ops.ldl import _unpack

    rng = np.random.default_rng(6)
    herm = kind == "herm"
    saw_2x2 = False
    for n in (1, 2, 3, 5, 8):
        for small in (False, True):
            a = _ldl_case(kind, n, rng, small)
            LD, piv = L.ldl_factor(fiamma.tensor(a), hermitian=herm)
            ld, pv = LD.numpy(), piv.numpy()
            assert piv.dtype == fiamma.int32 and np.all(np.triu(ld, 1) == 0)
            saw_2x2 |= bool((pv < 0).any())
            perm, lo, d = _unpack(ld, pv, herm)
            rec = lo @ d @ (lo.conj().T if herm else lo.T)
            assert np.abs(rec - a[perm][:, perm]).max() < 1e-12 * np.abs(a).max()
            b = rng.standard_normal((n, 2)) + (0 if kind == "real" else 1j)
            x = L.ldl_solve(LD, piv, fiamma.tensor(b), hermitian=herm).numpy()
            assert np.abs(a @ x - b).max() < 1e-10
    assert saw_2x2


def test_ldl_batched_ex_and_errors():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4, 4))
    a = a + a.transpose(0, 2, 1)
    LD, piv, info = L.ldl_factor_ex(fiamma.tensor(a))
    assert LD.shape == (3, 4, 4) and piv.shape == (3, 4) and info.tolist() == [0, 0, 0]
    b = rng.standard_normal((3, 4, 2))
    x = L.ldl_solve(LD, piv, fiamma.tensor(b)).numpy()
    assert np.abs(a @ x - b).max() < 1e-10
    z = L.ldl_factor_ex(fiamma.zeros(3, 3))
    assert z.info.item() == 1 and z.pivots.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match="not invertible"):
        L.ldl_factor(fiamma.zeros(3, 3))
    with pytest.raises(RuntimeError, match="square"):
        L.ldl_factor(fiamma.zeros(2, 3))
    with pytest.raises(RuntimeError, match="int32"):
        L.ldl_solve(LD, piv.long(), fiamma.tensor(b))


@pytest.mark.parity
@pytest.mark.parametrize("kind", ["real", "sym", "herm"])
def test_ldl_parity_with_torch(kind):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    herm = kind == "herm"
    for n in (2, 5, 9, 70):
        for small in (False, True):
            a = _ldl_case(kind, n, rng, small)
            LD, piv = L.ldl_factor(fiamma.tensor(a), hermitian=herm)
            tLD, tpiv = torch.linalg.ldl_factor(torch.tensor(a), hermitian=herm)
            assert piv.tolist() == tpiv.tolist()
            assert np.abs(LD.numpy() - tLD.numpy()).max() < 1e-11 * np.abs(tLD.numpy()).max()


def test_empty_householder_product_requires_grad_without_gradient():
    # PyTorch: no reflectors (tau empty) gives the identity, which still requires grad when
    # an input does, and backward leaves the inputs' .grad None
    pytest.importorskip("fiamma.autograd")
    for ashape in ((3, 2), (3, 0), (0, 0), (2, 3, 2)):
        A = fiamma.rand(*ashape, requires_grad=True)
        tau = fiamma.rand(*ashape[:-2], 0, requires_grad=True)
        q = L.householder_product(A, tau)
        assert q.requires_grad and q.shape == A.shape
        assert q.detach().numpy().tolist() == np.broadcast_to(
            np.eye(*ashape[-2:]), ashape).tolist()
        q.sum().backward()
        assert A.grad is None and tau.grad is None
    assert L.householder_product(fiamma.rand(3, 2), fiamma.rand(0, requires_grad=True)
                                 ).requires_grad
    assert not L.householder_product(fiamma.rand(3, 2), fiamma.rand(0)).requires_grad


def test_lstsq_empty_residuals_require_grad():
    # PyTorch: the residuals require grad with the solution, even when empty (gelsy, wide A)
    pytest.importorskip("fiamma.autograd")
    for shape, driver in (((4, 3), None), ((4, 3), "gelsy"), ((3, 4), "gelsd")):
        A = fiamma.rand(*shape, requires_grad=True)
        B = fiamma.rand(shape[0], 2, requires_grad=True)
        r = L.lstsq(A, B, driver=driver)
        assert r.residuals.shape == (0,) and r.residuals.requires_grad
        assert not r.rank.requires_grad and not r.singular_values.requires_grad
        (r.solution.sum() + r.residuals.sum()).backward()
        assert A.grad is not None and B.grad is not None
    r = L.lstsq(fiamma.rand(4, 3), fiamma.rand(4, 2))
    assert not r.residuals.requires_grad
