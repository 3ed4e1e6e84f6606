"""The array API standard's ``fft`` extension over fiamma.fft.

fiamma.fft keeps PyTorch's functions but returns real inputs' transforms as (real, imag)
pairs; here every complex result is a complex array of the input's precision, and ``axis`` /
``axes`` replace ``dim``.
"""

import fiamma
from fiamma import fft as _fft
from fiamma.array_api._dtypes import check_array

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _norm(norm, op):
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be one of {_NORMS}, got {norm!r}")
    return norm


def _complex(x, op):
    check_array(x, op)
    if x._dtype._kind == 3:
        return x
    if x._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating or complex array, got {x._dtype}")
    return x.to(x._dtype.to_complex)


def _real(x, op):
    check_array(x, op)
    if x._dtype._kind != 2:
        raise TypeError(f"{op}: expected a real floating array, got {x._dtype}")
    return x


def _pairs_to_complex(t):
    # fiamma.fft gives real inputs' spectra as trailing (real, imag) pairs
    if t._dtype._kind == 3:
        return t
    return fiamma.view_as_complex(t.contiguous())


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """The 1-D discrete Fourier transform along ``axis`` (a complex array).

    >>> import fiamma.array_api as xp
    >>> xp.fft.fft(xp.asarray([1.0, 0.0, 0.0, 0.0])).dtype
    fiamma.complex64
    """
    return _fft.fft(_complex(x, "fft"), n=n, dim=axis, norm=_norm(norm, "fft"))


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of ``fft``."""
    return _fft.ifft(_complex(x, "ifft"), n=n, dim=axis, norm=_norm(norm, "ifft"))


def _axes(x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    return tuple(axes)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-D discrete Fourier transform over ``axes`` (sizes ``s``)."""
    x = _complex(x, "fftn")
    return _fft.fftn(x, s=s, dim=_axes(x, s, axes), norm=_norm(norm, "fftn"))


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of ``fftn``."""
    x = _complex(x, "ifftn")
    return _fft.ifftn(x, s=s, dim=_axes(x, s, axes), norm=_norm(norm, "ifftn"))


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The 1-D transform of a real array: the ``n//2 + 1`` non-negative frequencies.

    >>> import fiamma.array_api as xp
    >>> tuple(xp.fft.rfft(xp.ones(4)).shape)
    (3,)
    """
    r = _fft.rfft(_real(x, "rfft"), n=n, dim=axis, norm=_norm(norm, "rfft"))
    return _pairs_to_complex(r)


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of ``rfft``: a real array of length ``n`` (``2*(m - 1)`` by default)."""
    return _fft.irfft(_complex(x, "irfft"), n=n, dim=axis, norm=_norm(norm, "irfft"))


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-D transform of a real array (the last axis halved)."""
    x = _real(x, "rfftn")
    r = _fft.rfftn(x, s=s, dim=_axes(x, s, axes), norm=_norm(norm, "rfftn"))
    return _pairs_to_complex(r)


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of ``rfftn``."""
    x = _complex(x, "irfftn")
    return _fft.irfftn(x, s=s, dim=_axes(x, s, axes), norm=_norm(norm, "irfftn"))


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The transform of a Hermitian-symmetric signal given by its first half: real output."""
    return _fft.hfft(_complex(x, "hfft"), n=n, dim=axis, norm=_norm(norm, "hfft"))


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of ``hfft``: the first half of a Hermitian spectrum of a real array."""
    r = _fft.ihfft(_real(x, "ihfft"), n=n, dim=axis, norm=_norm(norm, "ihfft"))
    return _pairs_to_complex(r)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform with spacing ``d``."""
    return _fft.fftfreq(n, d, dtype=dtype or fiamma.get_default_dtype(), device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The non-negative sample frequencies of an ``n``-point real transform."""
    return _fft.rfftfreq(n, d, dtype=dtype or fiamma.get_default_dtype(), device=device)


def fftshift(x, /, *, axes=None):
    """``x`` with the zero frequency moved to the centre along ``axes`` (all when None)."""
    return _fft.fftshift(check_array(x, "fftshift"), dim=axes)


def ifftshift(x, /, *, axes=None):
    """The inverse of ``fftshift``."""
    return _fft.ifftshift(check_array(x, "ifftshift"), dim=axes)
