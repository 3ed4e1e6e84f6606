"""Multi-channel beamforming on complex STFTs (torchaudio.functional): psd, mvdr_weights_souden,
mvdr_weights_rtf, rtf_evd, rtf_power, apply_beamforming; and frechet_distance."""

import fiamma

__all__ = ["psd", "mvdr_weights_souden", "mvdr_weights_rtf", "rtf_evd", "rtf_power",
           "apply_beamforming", "frechet_distance"]


def _check_complex(op, name, x, min_dim):
    if not isinstance(x, fiamma.Tensor) or not x.is_complex():
        raise TypeError(f"{op}: {name} must be a complex tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() < min_dim:
        raise ValueError(f"{op}: {name} must have at least {min_dim} dims, got {tuple(x.shape)}")


def _check_square(op, name, m, channels=None):
    _check_complex(op, name, m, 3)
    if m.shape[-1] != m.shape[-2] or (channels is not None and m.shape[-1] != channels):
        raise ValueError(f"{op}: {name} must be (..., freq, channel, channel)"
                         + (f" with {channels} channels" if channels is not None else "")
                         + f", got {tuple(m.shape)}")


def _trace(m):
    return m.diagonal(dim1=-2, dim2=-1).sum(-1)


def _tik_reg(m, reg=1e-7, eps=1e-8):
    """Diagonal loading: ``m + (reg * trace(m).real + eps) I``."""
    C = m.shape[-1]
    load = _trace(m).real * reg + eps
    eye = fiamma.eye(C, dtype=m.dtype)
    return m + load[..., None, None].to(m.dtype) * eye


def _ref_select(op, mat_cols, reference_channel, C, dtype):
    """Column ``reference_channel`` (int) of (..., C1, C2) matrices, or their combination with a
    (..., C) reference weight tensor (e.g. one-hot)."""
    if isinstance(reference_channel, fiamma.Tensor):
        if reference_channel.shape[-1] != C:
            raise ValueError(f"{op}: reference_channel must be (..., {C}), got "
                             f"{tuple(reference_channel.shape)}")
        r = reference_channel.to(dtype)
        return (mat_cols * r[..., None, None, :]).sum(-1)
    if isinstance(reference_channel, bool) or not isinstance(reference_channel, int):
        raise TypeError(f"{op}: reference_channel must be an int or a tensor, got "
                        f"{type(reference_channel).__name__}")
    if not -C <= reference_channel < C:
        raise ValueError(f"{op}: reference_channel {reference_channel} out of range for {C} "
                         "channels")
    return mat_cols[..., :, reference_channel]


def psd(specgram, mask=None, normalize=True, eps=1e-10):
    """Power spectral density (spatial covariance) matrices of a multi-channel STFT ``specgram``
    (..., channel, freq, time): ``sum_t m[f, t] X[:, f, t] X[:, f, t]^H``, shape
    (..., freq, channel, channel). ``mask`` (..., freq, time) weights the frames (divided by its
    sum over time + ``eps`` when ``normalize``); without a mask every frame has weight 1.

    >>> x = fiamma.ones(2, 3, 4, dtype=fiamma.complex64)
    >>> psd(x).shape, psd(x)[0, 0, 1].item()
    (fiamma.Size([3, 2, 2]), (4+0j))
    """
    op = "fiamma.audio.functional.psd"
    _check_complex(op, "specgram", specgram, 3)
    X = specgram.transpose(-3, -2)  # (..., freq, channel, time)
    if mask is not None:
        if tuple(mask.shape[:-1]) != tuple(specgram.shape[:-3]) + (specgram.shape[-2],) \
                or mask.shape[-1] != specgram.shape[-1]:
            raise ValueError(f"{op}: mask must be (..., freq, time) = "
                             f"{tuple(specgram.shape[:-3]) + tuple(specgram.shape[-2:])}, got "
                             f"{tuple(mask.shape)}")
        if normalize:
            mask = mask / (mask.sum(-1, keepdim=True) + eps)
        Xw = X * mask.unsqueeze(-2).to(X.dtype)
    else:
        Xw = X
    return fiamma.matmul(Xw, X.conj().transpose(-1, -2))


def mvdr_weights_souden(psd_s, psd_n, reference_channel, diagonal_loading=True, diag_eps=1e-7,
                        eps=1e-8):
    """MVDR weights by Souden et al.'s solution: ``(Phi_n^-1 Phi_s / trace(Phi_n^-1 Phi_s)) u``
    with ``u`` the reference channel (int, or a (..., channel) weight tensor). ``psd_s``/
    ``psd_n`` are (..., freq, channel, channel); returns (..., freq, channel).
    ``diagonal_loading`` adds ``diag_eps * trace`` to Phi_n's diagonal first."""
    op = "fiamma.audio.functional.mvdr_weights_souden"
    _check_square(op, "psd_s", psd_s)
    _check_square(op, "psd_n", psd_n, psd_s.shape[-1])
    if diagonal_loading:
        psd_n = _tik_reg(psd_n, diag_eps)
    num = fiamma.linalg.solve(psd_n, psd_s)
    ws = num / (_trace(num)[..., None, None] + eps)
    return _ref_select(op, ws, reference_channel, psd_s.shape[-1], psd_s.dtype)


def mvdr_weights_rtf(rtf, psd_n, reference_channel=None, diagonal_loading=True, diag_eps=1e-7,
                     eps=1e-8):
    """MVDR weights from a relative transfer function ``rtf`` (..., freq, channel):
    ``Phi_n^-1 h / (h^H Phi_n^-1 h)``, scaled by ``conj(h[ref])`` when a ``reference_channel``
    (int or (..., channel) tensor) is given. Returns (..., freq, channel)."""
    op = "fiamma.audio.functional.mvdr_weights_rtf"
    _check_complex(op, "rtf", rtf, 2)
    _check_square(op, "psd_n", psd_n, rtf.shape[-1])
    if diagonal_loading:
        psd_n = _tik_reg(psd_n, diag_eps)
    num = fiamma.linalg.solve(psd_n, rtf.unsqueeze(-1)).squeeze(-1)
    den = (rtf.conj() * num).sum(-1)
    w = num / (den.real.unsqueeze(-1) + eps).to(num.dtype)
    if reference_channel is not None:
        # conj(h) combined by the reference: (..., freq, 1, channel) rows -> (..., freq)
        scale = _ref_select(op, rtf.conj().unsqueeze(-2), reference_channel, rtf.shape[-1],
                            rtf.dtype)
        w = w * scale.reshape(tuple(w.shape[:-1]) + (1,))
    return w


def rtf_evd(psd_s):
    """Relative transfer function as the principal eigenvector (largest eigenvalue) of the
    speech PSD (..., freq, channel, channel); returns (..., freq, channel)."""
    _check_square("fiamma.audio.functional.rtf_evd", "psd_s", psd_s)
    _, v = fiamma.linalg.eigh(psd_s)
    return v[..., -1]


def rtf_power(psd_s, psd_n, reference_channel, n_iter=3, diagonal_loading=True, diag_eps=1e-7):
    """Relative transfer function by ``n_iter`` power iterations of ``Phi_n^-1 Phi_s`` started
    from the reference channel (int or (..., channel) tensor); the last step multiplies by
    Phi_s (with one iteration: ``Phi_s u``). Returns (..., freq, channel)."""
    op = "fiamma.audio.functional.rtf_power"
    _check_square(op, "psd_s", psd_s)
    _check_square(op, "psd_n", psd_n, psd_s.shape[-1])
    if n_iter <= 0:
        raise ValueError(f"{op}: n_iter must be positive, got {n_iter}")
    if diagonal_loading:
        psd_n = _tik_reg(psd_n, diag_eps)
    phi = fiamma.linalg.solve(psd_n, psd_s)
    h = _ref_select(op, phi, reference_channel, psd_s.shape[-1], psd_s.dtype).unsqueeze(-1)
    if n_iter >= 2:
        for _ in range(n_iter - 2):
            h = fiamma.matmul(phi, h)
        h = fiamma.matmul(psd_s, h)
    else:
        h = fiamma.matmul(psd_n, h)
    return h.squeeze(-1)


def apply_beamforming(beamform_weights, specgram):
    """Beamformed single-channel STFT ``sum_c conj(w[f, c]) X[c, f, t]`` of weights
    (..., freq, channel) and ``specgram`` (..., channel, freq, time): (..., freq, time)."""
    op = "fiamma.audio.functional.apply_beamforming"
    _check_complex(op, "beamform_weights", beamform_weights, 2)
    _check_complex(op, "specgram", specgram, 3)
    if beamform_weights.shape[-2:] != (specgram.shape[-2], specgram.shape[-3]):
        raise ValueError(f"{op}: weights (..., freq, channel) {tuple(beamform_weights.shape)} do "
                         f"not match specgram (..., channel, freq, time) {tuple(specgram.shape)}")
    w = beamform_weights.conj().transpose(-1, -2).unsqueeze(-1)  # (..., channel, freq, 1)
    return (w * specgram).sum(-3)


def frechet_distance(mu_x, sigma_x, mu_y, sigma_y):
    """Fréchet distance between the Gaussians N(mu_x, sigma_x) and N(mu_y, sigma_y) (as in FID/
    FAD): ``|mu_x - mu_y|^2 + tr(sigma_x) + tr(sigma_y) - 2 tr(sqrt(sigma_x sigma_y))``, the last
    term from the eigenvalues of sigma_x sigma_y. mu (N,), sigma (N, N); returns a 0-d tensor.

    >>> round(frechet_distance(fiamma.zeros(2), fiamma.eye(2), fiamma.ones(2),
    ...                        fiamma.eye(2) * 4).item(), 6)
    4.0
    """
    op = "fiamma.audio.functional.frechet_distance"
    if mu_x.dim() != 1 or mu_y.shape != mu_x.shape:
        raise ValueError(f"{op}: mu_x and mu_y must be 1-D of one length, got "
                         f"{tuple(mu_x.shape)} and {tuple(mu_y.shape)}")
    N = mu_x.shape[0]
    if tuple(sigma_x.shape) != (N, N) or tuple(sigma_y.shape) != (N, N):
        raise ValueError(f"{op}: sigma_x and sigma_y must be ({N}, {N}), got "
                         f"{tuple(sigma_x.shape)} and {tuple(sigma_y.shape)}")
    a = ((mu_x - mu_y) ** 2).sum()
    b = _trace(sigma_x) + _trace(sigma_y)
    c = fiamma.linalg.eigvals(fiamma.matmul(sigma_x, sigma_y)).sqrt().real.sum()
    return a + b - 2 * c
