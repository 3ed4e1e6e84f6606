"""fft, stft and linalg on complex tensors, against NumPy (and PyTorch in the parity test)."""

import numpy as np
import pytest

import fiamma as fm
from fiamma import fft as F

RNG = np.random.default_rng(1)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def close(t, want, rtol=1e-10, atol=1e-10):
    got = t.numpy()
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype, \
        (got.shape, got.dtype, np.shape(want), np.asarray(want).dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_fft_complex_in_complex_out(name, norm):
    a = crand(6, 5)
    t = fm.tensor(a)
    f, npf = getattr(F, name), getattr(np.fft, name)
    close(f(t, norm=norm), npf(a, norm=norm))
    close(f(t, dim=0, norm=norm), npf(a, axis=0, norm=norm))
    close(f(t, n=8, norm=norm), npf(a, n=8, norm=norm))
    close(f(t[:, ::2], norm=norm), npf(a[:, ::2], norm=norm))  # non-contiguous
    a32 = a.astype(np.complex64)
    close(f(fm.tensor(a32), norm=norm), npf(a32, norm=norm).astype(np.complex64), 1e-4, 1e-4)


def test_nd_and_real_output_transforms():
    a = crand(4, 6, 5)
    t = fm.tensor(a)
    close(F.fft2(t), np.fft.fft2(a))
    close(F.ifft2(t, dim=(0, 2)), np.fft.ifft2(a, axes=(0, 2)))
    close(F.fftn(t), np.fft.fftn(a))
    close(F.ifftn(t, s=(3, 4), dim=(1, 2)), np.fft.ifftn(a, s=(3, 4), axes=(1, 2)))
    h = np.fft.rfft(RNG.standard_normal(10))
    close(F.irfft(fm.tensor(h)), np.fft.irfft(h))
    close(F.hfft(fm.tensor(h)), np.fft.hfft(h))
    close(F.irfftn(fm.tensor(a)), np.fft.irfftn(a))
    # a round trip and the old layout through view_as_real
    x = fm.tensor(a)
    close(F.ifft(F.fft(x)), np.fft.ifft(np.fft.fft(a)))
    r = fm.randn(16, dtype=fm.float64)
    z = F.fft(r)  # a real input gives a complex result too (PyTorch)
    assert z.shape == (16,) and z.dtype is fm.complex128
    close(z, np.fft.fft(r.numpy()))
    close(fm.view_as_real(z), np.stack([z.numpy().real, z.numpy().imag], -1))
    out = fm.empty(4, 6, 5, dtype=fm.complex128)
    F.fft(t[0], out=out[0])
    close(out[0], np.fft.fft(a[0]))
    with pytest.raises(RuntimeError, match="real input"):
        F.rfft(t)


def test_stft_return_complex_and_istft():
    x = fm.randn(2, 400, dtype=fm.float64)
    w = fm.hann_window(64, dtype=fm.float64)
    c = fm.stft(x, 64, 16, window=w, return_complex=True)
    assert c.dtype is fm.complex128 and c.shape == (2, 33, 26)
    p = fm.stft(x, 64, 16, window=w)
    np.testing.assert_array_equal(fm.view_as_real(c).numpy(), p.numpy())
    y = fm.istft(c, 64, 16, window=w, length=400)
    np.testing.assert_allclose(y.numpy(), x.numpy(), atol=1e-10)


def test_linalg_on_complex():
    a = crand(3, 4, 4) + 4 * np.eye(4)
    b = crand(3, 4, 2)
    A, B = fm.tensor(a), fm.tensor(b)
    close(fm.linalg.inv(A), np.linalg.inv(a), 1e-9, 1e-9)
    close(fm.linalg.det(A), np.linalg.det(a), 1e-9, 1e-9)
    close(fm.linalg.solve(A, B), np.linalg.solve(a, b), 1e-9, 1e-9)
    q, r = fm.linalg.qr(A)
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-10)
    u, s, vh = fm.linalg.svd(A, full_matrices=False)
    assert s.dtype is fm.float64 and u.dtype is fm.complex128
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-10)
    recon = (u * s.to(fm.complex128).unsqueeze(-2)) @ vh
    np.testing.assert_allclose(recon.numpy(), a, atol=1e-10)
    assert fm.linalg.svdvals(A.to(fm.complex64)).dtype is fm.float32
    w, v = fm.linalg.eig(A)
    assert w.dtype is fm.complex128 and w.shape == (3, 4)
    np.testing.assert_allclose((A @ v).numpy(), (v * w.unsqueeze(-2)).numpy(), atol=1e-9)
    w2 = fm.linalg.eigvals(fm.tensor([[0.0, -1.0], [1.0, 0.0]]))
    assert w2.dtype is fm.complex64 and sorted(w2.tolist(), key=lambda z: z.imag) == [-1j, 1j]
    assert fm.linalg.vecdot(A[0], B[0, :, :1].expand(4, 4)).numpy().tolist() == \
        (np.conj(a[0]) * b[0, :, :1]).sum(-1).tolist()
    # the conjugate transposes conjugate complex tensors
    np.testing.assert_array_equal(A.mH.numpy(), np.conj(np.swapaxes(a, -1, -2)))
    np.testing.assert_array_equal(A[0].H.numpy(), a[0].conj().T)
    np.testing.assert_array_equal(A.adjoint().numpy(), np.conj(np.swapaxes(a, -1, -2)))


def test_more_linalg_on_complex():
    a = crand(2, 3, 3)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + 3 * np.eye(3)  # Hermitian positive-definite
    A, H = fm.tensor(a), fm.tensor(h)
    L = fm.linalg
    close(L.cholesky(H), np.linalg.cholesky(h), 1e-9, 1e-9)
    close(L.cholesky(H, upper=True), np.conj(np.swapaxes(np.linalg.cholesky(h), -1, -2)),
          1e-9, 1e-9)
    lo, info = L.cholesky_ex(H)
    close(lo, np.linalg.cholesky(h), 1e-9, 1e-9)
    assert info.tolist() == [0, 0]
    w, v = L.eigh(H)
    assert w.dtype is fm.float64 and v.dtype is fm.complex128
    close(w, np.linalg.eigvalsh(h), 1e-9, 1e-9)
    np.testing.assert_allclose((v @ (w.to(fm.complex128).unsqueeze(-1) * v.mH)).numpy(), h,
                               atol=1e-9)
    close(L.eigvalsh(H, UPLO="U"), np.linalg.eigvalsh(h, UPLO="U"), 1e-9, 1e-9)
    sign, logabs = L.slogdet(A)
    ws, wl = np.linalg.slogdet(a)
    close(sign, ws, 1e-9, 1e-9)
    close(logabs, wl, 1e-9, 1e-9)
    r = crand(4, 3)
    close(L.pinv(fm.tensor(r)), np.linalg.pinv(r), 1e-9, 1e-9)
    close(L.pinv(H, hermitian=True), np.linalg.pinv(h, hermitian=True), 1e-9, 1e-9)
    b = crand(4, 2)
    sol = L.lstsq(fm.tensor(r), fm.tensor(b), driver="gelsd")
    ref = np.linalg.lstsq(r, b, rcond=None)
    close(sol.solution, ref[0], 1e-9, 1e-9)
    close(sol.residuals, ref[1], 1e-9, 1e-9)
    close(sol.singular_values, ref[3], 1e-9, 1e-9)
    for o in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        close(L.matrix_norm(A, o), np.linalg.norm(a, o, axis=(-2, -1)), 1e-9, 1e-9)
    close(L.cond(A), np.linalg.cond(a), 1e-8, 1e-8)
    assert L.matrix_rank(A).tolist() == [3, 3]
    tri = np.triu(a)
    close(L.solve_triangular(fm.tensor(tri), fm.tensor(a), upper=True),
          np.linalg.solve(tri, a), 1e-9, 1e-9)
    close(L.matrix_power(A, 3), np.linalg.matrix_power(a, 3), 1e-9, 1e-9)
    close(L.matrix_power(A, -2), np.linalg.matrix_power(np.linalg.inv(a), 2), 1e-8, 1e-8)
    with pytest.raises(RuntimeError, match="same dtype"):
        L.solve_triangular(fm.tensor(tri), fm.tensor(a.real), upper=True)


@pytest.mark.parity
def test_parity_with_torch_spectral():
    torch = pytest.importorskip("torch")
    a = crand(8, dtype=np.complex64)
    np.testing.assert_allclose(F.fft(fm.tensor(a)).numpy(),
                               torch.fft.fft(torch.tensor(a)).numpy(), rtol=1e-5, atol=1e-5)
    m = np.array([[2.0, -1.0], [1.0, 3.0]], np.float32)
    assert str(torch.linalg.eig(torch.tensor(m))[0].dtype).endswith(
        fm.linalg.eig(fm.tensor(m))[0].dtype.name)
    x = RNG.standard_normal(300).astype(np.float32)
    tw = torch.hann_window(32)
    want = torch.stft(torch.tensor(x), 32, 8, window=tw, return_complex=True).numpy()
    got = fm.stft(fm.tensor(x), 32, 8, window=fm.hann_window(32), return_complex=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
