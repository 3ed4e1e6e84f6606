"""Short-time Fourier transform (stft / istft) and the window functions.

``stft(..., return_complex=True)`` returns a complex tensor (B?, n_freq, n_frames); otherwise
(the default) the spectrogram is a real tensor of shape ``(B?, n_freq, n_frames, 2)`` holding
(real, imag) pairs, the layout of PyTorch's ``torch.view_as_real(torch.stft(...,
return_complex=True))`` (and of its old ``return_complex=False`` output), the same memory as
the complex result. ``istft`` takes either.

NumPy's FFT is imported with the functions (``import fiamma`` stays fast).
"""

import builtins
import math

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._tensor import Tensor, new_empty

__all__ = ["stft", "stft_power", "istft", "hann_window", "hamming_window", "blackman_window",
           "bartlett_window", "kaiser_window"]


# ---- windows ---------------------------------------------------------------------------------

def _window(name, window_length, periodic, dtype, requires_grad, formula, device=None):
    import numpy as np

    from fiamma._storage import _DEFAULT_DEVICE, device as _device

    if isinstance(window_length, builtins.bool) or not isinstance(window_length, builtins.int):
        raise TypeError(f"{name}: window_length must be an int, got "
                        f"{type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name}: requires non-negative window_length, got "
                           f"window_length={window_length}")
    dt = D.get_default_dtype() if dtype is None else dtype
    if not isinstance(dt, D.dtype) or dt._kind != 2:
        raise RuntimeError(f"{name}: expected a floating point dtype, got {dt}")
    if window_length == 0:
        w = np.zeros(0)
    elif window_length == 1:
        w = np.ones(1)
    else:
        n = window_length + 1 if periodic else window_length
        w = formula(np.arange(n, dtype=np.float64), n)[:window_length]
    src = new_empty((window_length,), D.float64)
    if window_length:
        src.numpy()[...] = w
    res = src if dt is D.float64 else src.to(dt)
    dev = _DEFAULT_DEVICE.dev if device is None else _device(device)
    if dev is not None and dev.type != "cpu":
        res = res.to(dev)
    if requires_grad:
        res.requires_grad_(True)
    return res


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """The Hann window 0.5 - 0.5 cos(2 pi n / (N - 1)), N = window_length + 1 when periodic.

    >>> import fiamma
    >>> fiamma.hann_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    import numpy as np

    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   lambda n, N: 0.5 - 0.5 * np.cos(2 * math.pi * n / (N - 1)), device)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """The Hamming window alpha - beta cos(2 pi n / (N - 1))."""
    import numpy as np

    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   lambda n, N: alpha - beta * np.cos(2 * math.pi * n / (N - 1)), device)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The Blackman window 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    import numpy as np

    return _window("blackman_window", window_length, periodic, dtype, requires_grad,
                   lambda n, N: 0.42 - 0.5 * np.cos(2 * math.pi * n / (N - 1))
                   + 0.08 * np.cos(4 * math.pi * n / (N - 1)), device)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The Bartlett (triangular) window 1 - |2 n / (N - 1) - 1|."""
    import numpy as np

    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda n, N: 1.0 - np.abs(2.0 * n / (N - 1) - 1.0), device)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """The Kaiser window I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)."""
    import numpy as np

    def f(n, N):
        r = 2.0 * n / (N - 1) - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - r * r, 0.0, None))) / np.i0(beta)

    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, f, device)


# ---- stft / istft ------------------------------------------------------------------------------

_PAD = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def _window_np(window, win_length, n_fft, op, np):
    if window is None:
        w = np.ones(win_length)
    else:
        if not isinstance(window, Tensor) or len(window._shape) != 1 or \
                window._shape[0] != win_length:
            raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length="
                               f"{win_length}, but got window with size "
                               f"{list(getattr(window, 'shape', ()))}")
        w = window.detach().to(D.float64).cpu().numpy()  # n_fft values: a host copy
    left = (n_fft - win_length) // 2
    full = np.zeros(n_fft)
    full[left:left + win_length] = w
    return full


def _lengths(op, n_fft, hop_length, win_length):
    if not isinstance(n_fft, builtins.int) or n_fft <= 0:
        raise RuntimeError(f"{op}: expected 0 < n_fft, but got n_fft={n_fft}")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    return hop, win


def _no_complex(op, return_complex):
    if return_complex:
        raise RuntimeError(
            f"{op}: return_complex=True is not supported yet (the signal istft returns is "
            "real); pass return_complex=False")


_CPAD = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
# n_fft whose FFT length (n_fft / 2 when even) has a prime factor above this goes through
# NumPy's FFT (Bluestein) rather than the C kernel's O(p^2) butterfly for that factor.
_C_MAX_FACTOR = 127


def _stft_setup(op, input, n_fft, hop_length, win_length, center, pad_mode):
    """Validate; returns (signal as float tensor, hop, win, pad, n_frames)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if len(input._shape) not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1D or 2D tensor, got shape {list(input._shape)}")
    if input._dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"{op}: Unsupported dtype {input._dtype}")
    x = input if input._dtype._kind == 2 else input.to(D.get_default_dtype())
    hop, win = _lengths(op, n_fft, hop_length, win_length)
    length = x._shape[-1]
    pad = 0
    if center:
        if pad_mode not in _PAD:
            raise RuntimeError(f"{op}: unsupported pad_mode {pad_mode!r} (expected one of "
                               f"{', '.join(_PAD)})")
        pad = n_fft // 2
        if pad_mode == "reflect" and pad >= length:
            raise RuntimeError(f"{op}: reflect padding of {pad} needs a signal longer than "
                               f"{pad}, got length {length}")
        if pad and length == 0:
            raise RuntimeError(f"{op}: cannot pad an empty signal")
    padded = length + 2 * pad
    if not 0 < n_fft <= padded:
        raise RuntimeError(f"{op}: expected 0 < n_fft <= {padded} (the padded signal length), "
                           f"but got n_fft={n_fft}")
    return x, hop, win, pad, 1 + (padded - n_fft) // hop


def _use_c(x, n_fft):
    """Whether the backend's stft primitive runs it: always on a device other than the CPU
    (the array module's FFT takes any length), on the CPU when the C kernel's factors allow."""
    if x._storage.device.type != "cpu":
        return True
    from fiamma._backend import cpu

    return cpu.fft_largest_factor(n_fft // 2 if n_fft % 2 == 0 else n_fft) <= _C_MAX_FACTOR


def _stft_c(op, power, x, n_fft, hop, win, window, pad, pad_mode, onesided, scale, frames):
    """The C kernel: (B?, n_freq, frames, 2) pairs, or (B?, n_freq, frames) |X|^2 if power."""
    import numpy as np

    from fiamma._backend import check

    w = _window_np(window, win, n_fft, op, np).astype(
        np.float32 if x._dtype is D.float32 else np.float64)
    xc = x.contiguous()
    batch = 1 if len(xc._shape) == 1 else xc._shape[0]
    nfreq = n_fft // 2 + 1 if onesided else n_fft
    shape = (nfreq, frames) + (() if power else (2,))
    res = new_empty(shape if len(xc._shape) == 1 else (batch,) + shape, x._dtype,
                    x._storage.device)
    if res._numel:
        check(res._storage.backend.stft(1 if power else 0, xc, n_fft, hop, frames, pad,
                                        _CPAD.get(pad_mode, 0), w, builtins.int(onesided), scale,
                                        res), op)
    return res


def _stft_np(op, x, n_fft, hop, win, window, pad, pad_mode, onesided, scale):
    """NumPy's FFT: a complex ndarray (B?, n_freq, frames)."""
    import numpy as np

    a = x.detach().numpy()
    a2 = a[None] if a.ndim == 1 else a
    if pad:
        a2 = np.pad(a2, ((0, 0), (pad, pad)), mode=_PAD[pad_mode])
    w = _window_np(window, win, n_fft, op, np).astype(a.dtype)
    frames = np.lib.stride_tricks.sliding_window_view(a2, n_fft, axis=-1)[:, ::hop] * w
    spec = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    if scale != 1.0:
        spec = spec * scale
    spec = np.swapaxes(spec, -1, -2)
    return spec[0] if a.ndim == 1 else spec


def _record_stft(op, res, input, n_fft, hop, win, window, center, pad_mode, normalized, one):
    if input.requires_grad or (isinstance(window, Tensor) and window.requires_grad):
        G.record(op, res, (input,), {"n_fft": n_fft, "hop_length": hop, "win_length": win,
                                     "window": window, "center": center, "pad_mode": pad_mode,
                                     "normalized": normalized, "onesided": one})


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform of a real signal of shape (L,) or (B, L).

    Returns a complex tensor ``(B?, n_freq, n_frames)`` when ``return_complex=True`` (complex64
    for float32 input), else ``(B?, n_freq, n_frames, 2)``: (real, imag) pairs (the same memory:
    ``fiamma.view_as_real`` of the complex result), n_freq = n_fft // 2 + 1 when
    ``onesided`` (the default) else n_fft, n_frames = 1 + (L' - n_fft) // hop_length with L' the
    padded length (``center`` pads n_fft // 2 on both sides with ``pad_mode``). float32 and
    float64 signals are transformed in C (a mixed-radix FFT, many frames at a time); n_fft with
    a large prime factor goes through NumPy's FFT.

    >>> import fiamma
    >>> fiamma.stft(fiamma.ones(64), 16, window=fiamma.hann_window(16)).shape
    fiamma.Size([9, 17, 2])
    """
    x, hop, win, pad, frames = _stft_setup("stft", input, n_fft, hop_length, win_length,
                                           center, pad_mode)
    one = True if onesided is None else builtins.bool(onesided)
    scale = 1.0 / math.sqrt(n_fft) if normalized else 1.0
    if _use_c(x, n_fft):
        res = _stft_c("stft", False, x, n_fft, hop, win, window, pad, pad_mode, one, scale,
                      frames)
    else:
        import numpy as np

        spec = _stft_np("stft", x, n_fft, hop, win, window, pad, pad_mode, one, scale)
        res = new_empty(spec.shape + (2,), x._dtype)
        if res._numel:  # one pass: the pairs seen as complex numbers
            res.numpy().view(np.complex64 if x._dtype is D.float32 else np.complex128)[
                ..., 0] = spec
    from fiamma.fft import as_complex_layout

    _record_stft(ops.stft, res, input, n_fft, hop, win, window, center, pad_mode, normalized, one)
    if return_complex:
        from fiamma._ops.complex_ops import view_as_complex

        return view_as_complex(res)
    return as_complex_layout(res)


def stft_power(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
               pad_mode="reflect", normalized=False, onesided=True):
    """The power spectrogram ``|stft(...)|**2`` of shape ``(B?, n_freq, n_frames)``, without the
    complex intermediate: each frame's squared magnitudes are written straight from the FFT.

    The arguments are :func:`stft`'s. Equal to ``stft(...).pow(2).sum(-1)`` (and differentiable
    like it, to any order), about twice as fast and with a third of the memory traffic; it is
    what ``fiamma.audio``'s spectrogram transforms use for ``power=2``.

    >>> import fiamma
    >>> x = fiamma.randn(800)
    >>> p = fiamma.stft_power(x, 400, 160, window=fiamma.hann_window(400))
    >>> s = fiamma.stft(x, 400, 160, window=fiamma.hann_window(400))
    >>> bool(fiamma.allclose(p, s.pow(2).sum(-1), rtol=1e-4, atol=1e-4))
    True
    """
    x, hop, win, pad, frames = _stft_setup("stft_power", input, n_fft, hop_length, win_length,
                                           center, pad_mode)
    one = builtins.bool(onesided)
    scale = 1.0 / math.sqrt(n_fft) if normalized else 1.0
    if _use_c(x, n_fft):
        res = _stft_c("stft_power", True, x, n_fft, hop, win, window, pad, pad_mode, one,
                      scale, frames)
    else:
        spec = _stft_np("stft_power", x, n_fft, hop, win, window, pad, pad_mode, one, scale)
        res = new_empty(spec.shape, x._dtype)
        if res._numel:
            res.numpy()[...] = spec.real ** 2 + spec.imag ** 2
    _record_stft(ops.stft_power, res, input, n_fft, hop, win, window, center, pad_mode,
                 normalized, one)
    return res


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of :func:`stft` by windowed overlap-add (least squares).

    ``input``: a complex (B?, n_freq, n_frames) tensor or (B?, n_freq, n_frames, 2) (real, imag)
    pairs, as :func:`stft` returns. The
    result is real, of shape (B?, length) (default: the length stft was given when ``center``).
    """
    import numpy as np

    _no_complex("istft", return_complex)
    from fiamma.fft import _complex_np

    if not isinstance(input, Tensor):
        raise TypeError(f"istft: expected a Tensor, got {type(input).__name__}")
    dev = input._storage.device
    if dev.type != "cpu":
        # the overlap-add runs on the host: the spectrum goes there and the signal comes back
        # (both transfers are recorded, so gradients flow back to the device)
        from fiamma.fft import as_complex_layout

        w = window.cpu() if isinstance(window, Tensor) else window
        host = input.cpu()
        host = host if host._dtype._kind == 3 else as_complex_layout(host)
        return istft(host, n_fft, hop_length, win_length, w, center, normalized, onesided,
                     length, return_complex).to(dev)
    spec = _complex_np(input, "istft", pairs=input._dtype._kind != 3)
    if spec.ndim not in (2, 3):
        raise RuntimeError("istft: expected a (B?, n_freq, n_frames, 2) tensor, got shape "
                           f"{list(input._shape)}")
    hop, win = _lengths("istft", n_fft, hop_length, win_length)
    s3 = spec[None] if spec.ndim == 2 else spec
    nfreq, T = s3.shape[1], s3.shape[2]
    one = (nfreq != n_fft) if onesided is None else builtins.bool(onesided)
    want = n_fft // 2 + 1 if one else n_fft
    if nfreq != want:
        raise RuntimeError(f"istft: expected the frequency dimension (size {nfreq}) to be "
                           f"{want} (n_fft={n_fft}, onesided={one})")
    fr = np.swapaxes(s3, 1, 2)
    frames = np.fft.irfft(fr, n=n_fft, axis=-1) if one else np.fft.ifft(fr, axis=-1).real
    if normalized:
        frames = frames * math.sqrt(n_fft)
    rdt = np.float32 if spec.dtype == np.complex64 else np.float64
    w = _window_np(window, win, n_fft, "istft", np)
    frames = frames * w
    K = -(-n_fft // hop)
    B = frames.shape[0]
    padded = np.zeros((B, T, K * hop))
    padded[..., :n_fft] = frames
    padded = padded.reshape(B, T, K, hop)
    y = np.zeros((B, T + K - 1, hop))
    env = np.zeros((T + K - 1, hop))
    wp = np.zeros(K * hop)
    wp[:n_fft] = w * w
    wp = wp.reshape(K, hop)
    for k in range(K):
        y[:, k:k + T] += padded[:, :, k]
        env[k:k + T] += wp[k]
    total = n_fft + hop * (T - 1)
    y = y.reshape(B, -1)[:, :total]
    env = env.reshape(-1)[:total]
    start = n_fft // 2 if center else 0
    end = total - n_fft // 2 if (center and length is None) else total
    if length is not None:
        end = start + length
    end = min(end, total)
    if np.abs(env[start:end]).min(initial=np.inf) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the window envelope is (nearly) zero "
                           "somewhere in the output; choose a window / hop_length whose "
                           "overlap-add does not vanish")
    y = y[:, start:end] / env[start:end]
    if length is not None and y.shape[1] < length:
        y = np.pad(y, ((0, 0), (0, length - y.shape[1])))
    if spec.ndim == 2:
        y = y[0]
    res = new_empty(y.shape, D.float32 if rdt == np.float32 else D.float64)
    if res._numel:
        res.numpy()[...] = y
    if input.requires_grad:
        G.record(ops.istft, res, (input,), {"n_fft": n_fft, "hop_length": hop,
                                          "win_length": win, "window": window, "center": center,
                                          "normalized": normalized, "onesided": one,
                                          "length": length})
    return res



