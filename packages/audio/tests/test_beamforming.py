"""Beamforming (psd, MVDR weights, RTF, apply_beamforming, the modules) and frechet_distance
against complex128 NumPy references written here and analytic properties."""

import numpy as np
import pytest

import fiamma
import fiamma.audio.functional as AF
import fiamma.audio.transforms as AT

rng = np.random.default_rng(11)


def crandn(*shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def c128(a):
    return fiamma.tensor(np.asarray(a, np.complex128))


def rand_psd(B, F, C):
    a = crandn(B, F, C, 2 * C)
    return a @ a.conj().swapaxes(-1, -2) / (2 * C)


def tik(m, reg=1e-7, eps=1e-8):
    tr = np.trace(m, axis1=-2, axis2=-1).real
    return m + (tr * reg + eps)[..., None, None] * np.eye(m.shape[-1])


def test_psd():
    X = crandn(2, 3, 5, 7)  # (batch, channel, freq, time)
    ref = np.einsum("bcft,beft->bfce", X, X.conj())
    np.testing.assert_allclose(AF.psd(c128(X)).numpy(), ref, atol=1e-12)
    m = rng.uniform(0, 1, (2, 5, 7))
    mn = m / (m.sum(-1, keepdims=True) + 1e-10)
    ref = np.einsum("bcft,beft,bft->bfce", X, X.conj(), mn)
    out = AF.psd(c128(X), fiamma.tensor(m)).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(out, out.conj().swapaxes(-1, -2), atol=1e-14)  # Hermitian
    ref = np.einsum("bcft,beft,bft->bfce", X, X.conj(), m)
    np.testing.assert_allclose(AF.psd(c128(X), fiamma.tensor(m), normalize=False).numpy(), ref,
                               atol=1e-12)
    mm = rng.uniform(0, 1, (2, 3, 5, 7))
    np.testing.assert_allclose(AT.PSD(multi_mask=True)(c128(X), fiamma.tensor(mm)).numpy(),
                               AF.psd(c128(X), fiamma.tensor(mm.mean(1)), eps=1e-15).numpy(),
                               atol=1e-12)
    with pytest.raises(ValueError, match="psd.*mask"):
        AF.psd(c128(X), fiamma.ones(2, 4, 7))
    with pytest.raises(TypeError, match="psd.*complex"):
        AF.psd(fiamma.ones(2, 3, 4))


def test_mvdr_weights_souden():
    ps, pn = rand_psd(2, 4, 3), rand_psd(2, 4, 3)
    num = np.linalg.solve(tik(pn), ps)
    ws = num / (np.trace(num, axis1=-2, axis2=-1)[..., None, None] + 1e-8)
    out = AF.mvdr_weights_souden(c128(ps), c128(pn), 1).numpy()
    np.testing.assert_allclose(out, ws[..., :, 1], rtol=1e-10, atol=1e-12)
    onehot = fiamma.tensor([0.0, 1.0, 0.0])
    np.testing.assert_allclose(AF.mvdr_weights_souden(c128(ps), c128(pn), onehot).numpy(), out,
                               atol=1e-12)
    raw = AF.mvdr_weights_souden(c128(ps), c128(pn), 1, diagonal_loading=False).numpy()
    num = np.linalg.solve(pn, ps)
    ref = (num / (np.trace(num, axis1=-2, axis2=-1)[..., None, None] + 1e-8))[..., :, 1]
    np.testing.assert_allclose(raw, ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="mvdr_weights_souden.*reference_channel"):
        AF.mvdr_weights_souden(c128(ps), c128(pn), 3)


def test_mvdr_weights_rtf_distortionless():
    pn = rand_psd(2, 4, 3)
    h = crandn(2, 4, 3)
    w = AF.mvdr_weights_rtf(c128(h), c128(pn), diagonal_loading=False).numpy()
    np.testing.assert_allclose(np.einsum("...c,...c->...", w.conj(), h), 1.0, atol=1e-10)
    ref = np.linalg.solve(pn, h[..., None])[..., 0]
    ref = ref / np.einsum("...c,...c->...", h.conj(), ref).real[..., None]
    np.testing.assert_allclose(w, ref, atol=1e-8)
    w0 = AF.mvdr_weights_rtf(c128(h), c128(pn), 0).numpy()
    np.testing.assert_allclose(np.einsum("...c,...c->...", w0.conj(), h), h[..., 0], atol=1e-6)
    wt = AF.mvdr_weights_rtf(c128(h), c128(pn), fiamma.tensor([1.0, 0.0, 0.0])).numpy()
    np.testing.assert_allclose(wt, w0, atol=1e-12)


def test_rtf_evd_and_power():
    ps, pn = rand_psd(1, 3, 4), rand_psd(1, 3, 4)
    v = AF.rtf_evd(c128(ps)).numpy()
    lam = np.linalg.eigvalsh(ps)[..., -1]
    np.testing.assert_allclose(ps @ v[..., None], lam[..., None, None] * v[..., None], atol=1e-10)
    phi = np.linalg.solve(tik(pn), ps)
    for n_iter in (1, 2, 3, 5):
        h = phi[..., :, 2][..., None]
        if n_iter == 1:
            ref = tik(pn) @ h
        else:
            for _ in range(n_iter - 2):
                h = phi @ h
            ref = ps @ h
        out = AF.rtf_power(c128(ps), c128(pn), 2, n_iter=n_iter).numpy()
        np.testing.assert_allclose(out, ref[..., 0], rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="rtf_power.*n_iter"):
        AF.rtf_power(c128(ps), c128(pn), 0, n_iter=0)


def test_apply_beamforming():
    w = crandn(2, 5, 3)
    X = crandn(2, 3, 5, 6)
    ref = np.einsum("bfc,bcft->bft", w.conj(), X)
    np.testing.assert_allclose(AF.apply_beamforming(c128(w), c128(X)).numpy(), ref, atol=1e-12)
    with pytest.raises(ValueError, match="apply_beamforming"):
        AF.apply_beamforming(c128(w), c128(crandn(2, 4, 5, 6)))


def scene(F=6, T=400, C=4):
    """Rank-1 speech from one direction plus diffuse noise, and the ideal masks."""
    h = crandn(F, C)
    h = h / h[:, :1]  # relative to channel 0
    s = crandn(F, T) * (rng.uniform(0, 1, (F, T)) > 0.6) * 3
    n = crandn(C, F, T) * 0.5
    speech = h.T[:, :, None] * s[None]  # (C, F, T)
    mask_s = (np.abs(s) > 0).astype(np.float64)
    return speech, n, mask_s


def snr_db(clean, est):
    return 10 * np.log10((np.abs(clean) ** 2).sum() / (np.abs(est - clean) ** 2).sum())


@pytest.mark.parametrize("solution", ["ref_channel", "stv_evd", "stv_power"])
def test_mvdr_module_enhances(solution):
    speech, noise, mask_s = scene()
    X = speech + noise
    out = AT.MVDR(ref_channel=0, solution=solution)(c128(X), fiamma.tensor(mask_s),
                                                    fiamma.tensor(1 - mask_s)).numpy()
    before = snr_db(speech[0], X[0])
    after = snr_db(speech[0], out)
    assert after > before + 3, (before, after)
    # float32 in, complex64 out
    o32 = AT.MVDR(solution=solution)(c128(X).to(fiamma.complex64), fiamma.tensor(mask_s).float(),
                                     fiamma.tensor(1 - mask_s).float())
    assert o32.dtype == fiamma.complex64


def test_mvdr_module_online_and_modules():
    speech, noise, mask_s = scene()
    X = c128(speech + noise)
    ms = fiamma.tensor(mask_s)
    m = AT.MVDR(online=True)
    first = m(X, ms, 1 - ms).numpy()
    second = m(X, ms, 1 - ms).numpy()  # the same statistics again: the same running PSDs
    np.testing.assert_allclose(first, second, atol=1e-8)
    with pytest.warns(UserWarning, match="mask_n"):
        AT.MVDR()(X, ms)
    with pytest.raises(ValueError, match="MVDR: solution"):
        AT.MVDR(solution="x")
    ps = AF.psd(X, ms)
    pn = AF.psd(X, 1 - ms)
    np.testing.assert_allclose(AT.SoudenMVDR()(X, ps, pn, 0).numpy(),
                               AF.apply_beamforming(AF.mvdr_weights_souden(ps, pn, 0), X).numpy())
    rtf = AF.rtf_evd(ps)
    np.testing.assert_allclose(AT.RTFMVDR()(X, rtf, pn, 0).numpy(),
                               AF.apply_beamforming(AF.mvdr_weights_rtf(rtf, pn, 0), X).numpy())


def test_frechet_distance():
    N = 5
    a = rng.standard_normal((N, 2 * N))
    b = rng.standard_normal((N, 2 * N))
    sx, sy = a @ a.T / N, b @ b.T / N
    mx, my = rng.standard_normal(N), rng.standard_normal(N)
    f64 = fiamma.tensor
    d = AF.frechet_distance(f64(mx), f64(sx), f64(my), f64(sy)).item()
    # sqrt(sx sy) has the eigenvalues of sqrt(sx^1/2 sy sx^1/2) (symmetric PSD route)
    w, v = np.linalg.eigh(sx)
    r = v @ np.diag(np.sqrt(w)) @ v.T
    tr_sqrt = np.sqrt(np.linalg.eigvalsh(r @ sy @ r)).sum()
    ref = ((mx - my) ** 2).sum() + np.trace(sx) + np.trace(sy) - 2 * tr_sqrt
    assert abs(d - ref) < 1e-9 * max(1, abs(ref))
    assert abs(AF.frechet_distance(f64(mx), f64(sx), f64(mx), f64(sx)).item()) < 1e-9
    with pytest.raises(ValueError, match="frechet_distance"):
        AF.frechet_distance(f64(mx), f64(sx), f64(my[:3]), f64(sy))


def test_frechet_distance_scipy():
    linalg = pytest.importorskip("scipy.linalg")
    N = 4
    a, b = rng.standard_normal((N, 8)), rng.standard_normal((N, 8))
    sx, sy = a @ a.T / 8, b @ b.T / 8
    mx, my = rng.standard_normal(N), rng.standard_normal(N)
    ref = ((mx - my) ** 2).sum() + np.trace(sx + sy - 2 * linalg.sqrtm(sx @ sy).real)
    d = AF.frechet_distance(*(fiamma.tensor(v) for v in (mx, sx, my, sy))).item()
    assert abs(d - ref) < 1e-8
