"""``fiamma.signal.windows``: PyTorch's ``torch.signal.windows`` (SciPy's window functions):
``bartlett``, ``blackman``, ``cosine``, ``exponential``, ``gaussian``, ``general_cosine``,
``general_hamming``, ``hamming``, ``hann``, ``kaiser``, ``nuttall``.

Each takes the length ``M`` and keywords ``sym`` (True: a symmetric window, for filter design;
False: a periodic one, the first ``M`` points of the symmetric window of length ``M + 1``, for
spectral analysis), ``dtype`` (default: the default float dtype), ``layout``, ``device`` and
``requires_grad``. ``M == 0`` gives an empty window and ``M == 1`` a single one. The values are
computed in float64 and then cast.

>>> from fiamma.signal import windows
>>> windows.hann(5).tolist()
[0.0, 0.5, 1.0, 0.5, 0.0]
>>> [round(v, 4) for v in windows.gaussian(4, std=1.0, sym=False).tolist()]
[0.1353, 0.6065, 1.0, 0.6065]
"""

import math

import numpy as np

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _check(name, M, dtype, layout):
    import fiamma

    if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if dtype is None:
        dtype = fiamma.get_default_dtype()
    if not dtype.is_floating_point:
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    if layout is not None and layout is not fiamma.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    return int(M), dtype


def _finish(values, dtype, device, requires_grad):
    import fiamma

    t = fiamma.tensor(np.ascontiguousarray(values, dtype=np.float64), dtype=dtype,
                      device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _window(name, M, sym, dtype, layout, device, requires_grad, fn):
    """``fn(n)``: the symmetric window of ``n`` points (n >= 2) as a float64 array."""
    M, dtype = _check(name, M, dtype, layout)
    if M <= 1:
        values = np.ones(M)
    else:
        values = fn(M) if sym else fn(M + 1)[:M]
    return _finish(values, dtype, device, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """``w[n] = sum_k (-1)^k a[k] cos(2 pi k n / (N - 1))``, a sum of cosines with
    coefficients ``a`` (a sequence of floats)."""
    if not isinstance(a, (list, tuple)) or not a:
        raise TypeError(f"general_cosine: coefficients a must be a non-empty list or tuple of "
                        f"floats, got {a!r}")
    coeffs = [float(c) for c in a]

    def fn(n):
        x = 2 * math.pi * np.arange(n) / (n - 1)
        return sum((-1) ** k * c * np.cos(k * x) for k, c in enumerate(coeffs))

    return _window("general_cosine", M, sym, dtype, layout, device, requires_grad, fn)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / (N - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window: ``general_hamming`` with ``alpha = 0.5``."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window: ``general_hamming`` with ``alpha = 0.54``."""
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window: ``general_cosine`` with ``a = [0.42, 0.5, 0.08]``."""
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window with zero ends: ``1 - |2 n / (N - 1) - 1|``."""
    def fn(n):
        return 1.0 - np.abs(2.0 * np.arange(n) / (n - 1) - 1.0)

    return _window("bartlett", M, sym, dtype, layout, device, requires_grad, fn)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sine window: ``sin(pi (n + 0.5) / N)``."""
    def fn(n):
        return np.sin(math.pi * (np.arange(n) + 0.5) / n)

    return _window("cosine", M, sym, dtype, layout, device, requires_grad, fn)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``exp(-(n - (N - 1) / 2)^2 / (2 std^2))``."""
    if std <= 0:
        raise ValueError(f"gaussian: standard deviation must be positive, got: {std}")

    def fn(n):
        x = np.arange(n) - (n - 1) / 2.0
        return np.exp(-(x ** 2) / (2.0 * std * std))

    return _window("gaussian", M, sym, dtype, layout, device, requires_grad, fn)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """``exp(-|n - center| / tau)``; ``center`` defaults to the middle (``(M - 1) / 2``, or
    ``M / 2`` for a periodic window) and may only be given for a periodic window, as in SciPy
    and PyTorch."""
    if tau <= 0:
        raise ValueError(f"exponential: Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("exponential: Center must be None for symmetric windows")
    M_, _ = _check("exponential", M, dtype, layout)
    # the middle of the symmetric window of M points, or of M + 1 points for a periodic one
    c = ((M_ - 1) / 2.0 if sym else M_ / 2.0) if center is None else float(center)

    def fn(n):
        return np.exp(-np.abs(np.arange(M_) - c) / tau)

    return _window("exponential", M, True, dtype, layout, device, requires_grad, fn)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``."""
    if beta < 0:
        raise ValueError(f"kaiser: beta must be non-negative, got: {beta} instead.")

    def fn(n):
        r = 2.0 * np.arange(n) / (n - 1) - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - r * r, 0.0, None))) / np.i0(beta)

    return _window("kaiser", M, sym, dtype, layout, device, requires_grad, fn)
