"""fiamma.fft: discrete Fourier transforms with PyTorch's ``torch.fft`` names, arguments and
results.

Transforms with a complex result (fft, ifft, rfft, ihfft, fft2, ..., fftn, rfftn, ihfftn)
return a complex tensor (complex64 from float32 / complex64 input, complex128 from float64 /
complex128), for real and complex inputs alike, as PyTorch. The transforms that read a complex
spectrum (irfft, hfft and their 2-d / n-d forms) take a complex tensor; a real tensor there is
a spectrum with zero imaginary parts, as in PyTorch.

``complex_input=True`` (a fiamma extension on fft/ifft/fft2/ifft2/fftn/ifftn) reads a real
tensor whose last dimension is 2 as (real, imag) pairs (``fiamma.view_as_real``'s layout);
``fiamma.view_as_real`` of a result gives that layout back without a copy.

Computed with NumPy's pocketfft on zero-copy views (float32 stays float32). Integer and bool
inputs give the default float dtype; float16 and bfloat16 raise, as PyTorch does on the CPU.
Differentiable (fiamma-autograd), with complex gradients in PyTorch's convention.

>>> import fiamma
>>> X = fiamma.fft.fft(fiamma.tensor([1.0, 0.0, 0.0, 0.0]))
>>> X.dtype, X.shape
(fiamma.complex64, fiamma.Size([4]))
>>> fiamma.fft.ifft(X).real.tolist()
[1.0, 0.0, 0.0, 0.0]
"""

import builtins
import weakref

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift", "as_complex_layout", "is_complex_layout"]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}

# tensors marked as holding complex (real, imag) pairs (``as_complex_layout``; fftshift keeps
# their trailing pair unshifted): id -> weak reference (a WeakSet would
# compare tensors with the elementwise ==)
_COMPLEX = {}


def as_complex_layout(t):
    """Mark ``t`` (last dimension 2) as holding complex (real, imag) pairs; returns ``t``."""
    if not isinstance(t, Tensor) or not t._shape or t._shape[-1] != 2:
        raise ValueError("as_complex_layout: expected a tensor whose last dimension has size 2, "
                         f"got shape {list(getattr(t, 'shape', ()))}")
    k = id(t)
    _COMPLEX[k] = weakref.ref(t, lambda r, k=k: _COMPLEX.pop(k, None))
    return t


def is_complex_layout(t):
    """Whether ``t`` is marked as complex (real, imag) pairs (``as_complex_layout``)."""
    r = _COMPLEX.get(id(t))
    return r is not None and r() is t


# ---- conversions -----------------------------------------------------------------------------

def _float_src(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"fft.{op}: expected a Tensor, got {type(x).__name__}")
    x = x.detach()
    dt = x._dtype
    if dt in (D.float16, D.bfloat16):
        raise RuntimeError(f"fft.{op}: Unsupported dtype {dt} (use float32 or float64)")
    if dt._kind < 2:
        x = x.to(D.get_default_dtype())
    return x


class _DevSignal:
    """A tensor of a device other than the CPU standing in for the NumPy array of the CPU
    path: it has the signal's ``shape``/``ndim``, and _np_call runs the transform on its device
    (the backend's ``fft`` primitive: the device's array module's FFT)."""

    __slots__ = ("t", "cplx", "shape", "ndim", "conj")

    def __init__(self, t, cplx):
        self.t = t
        self.cplx = cplx
        self.shape = t._shape[:-1] if cplx else t._shape
        self.ndim = len(self.shape)
        self.conj = 0


def _real_np(x, op):
    if isinstance(x, Tensor) and x._dtype._kind == 3:
        raise RuntimeError(f"fft.{op}: expected a real input tensor, but got {x._dtype}")
    x = _float_src(x, op)
    if x._storage.device.type != "cpu":
        return _DevSignal(x, False)
    return x.numpy()


def _complex_np(x, op, pairs=False):
    """The complex NumPy array of a complex tensor, of a real one (zero imaginary parts), or
    with ``pairs`` of a (..., 2) (real, imag) tensor (a view when the pairs are contiguous)."""
    if isinstance(x, Tensor) and x._dtype._kind == 3:
        x = x.detach()
        if x._storage.device.type != "cpu":
            from fiamma._ops.complex_ops import view_as_real

            return _DevSignal(view_as_real(x), True)
        from fiamma._ops.complex_ops import arr

        return arr(x)
    x = _float_src(x, op)
    if not pairs:  # a real spectrum: the complex one with zero imaginary parts (PyTorch)
        return _complex_np(x.to(x._dtype.to_complex), op)
    if not x._shape or x._shape[-1] != 2:
        raise RuntimeError(f"fft.{op}: expected a complex input as (real, imag) pairs (last "
                           f"dimension of size 2), got shape {list(x._shape)}")
    if x._storage.device.type != "cpu":
        return _DevSignal(x, True)
    a = x.numpy()
    isz = a.itemsize
    if a.strides[-1] != isz or builtins.any(s % (2 * isz) for s in a.strides[:-1]):
        a = np.ascontiguousarray(a)
    return a.view(np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]


def _is_complex_input(x, complex_input, op):
    """Whether the input is a complex signal: a complex tensor, or (real, imag) pairs with
    ``complex_input=True``; any other real tensor is a real signal (PyTorch)."""
    if isinstance(x, Tensor) and x._dtype._kind == 3:
        return True
    return builtins.bool(complex_input)


def _out_real(arr, out, op):
    if isinstance(arr, Tensor):  # computed on its device
        return _finish(arr, out, op)
    arr = np.asarray(arr)
    res = new_empty(arr.shape, D.from_numpy_dtype(arr.dtype))
    if res._numel:
        res.numpy()[...] = arr
    return _finish(res, out, op)


def _out_complex(arr, out, op):
    """The transform's complex result as a complex tensor."""
    from fiamma._ops.complex_ops import arr as _arr, view_as_complex

    if isinstance(arr, Tensor):  # computed on its device: (..., 2) pairs
        return _finish(view_as_complex(arr), out, op)
    arr = np.asarray(arr)
    if arr.flags.c_contiguous and arr.flags.writeable and arr.flags.aligned and \
            arr.dtype in (np.complex64, np.complex128):
        from fiamma._interop import from_numpy

        res = from_numpy(arr)  # NumPy's fresh result becomes the tensor's memory
    else:
        res = new_empty(arr.shape, D.complex64 if arr.dtype == np.complex64 else D.complex128)
        if res._numel:
            _arr(res)[...] = arr
    return _finish(res, out, op)


def _finish(res, out, op):
    if out is None:
        return res
    if not isinstance(out, Tensor):
        raise TypeError(f"fft.{op}: out must be a Tensor, got {type(out).__name__}")
    if out._shape != res._shape:
        if out._numel == 0:
            from fiamma._tensor import _init

            fresh = new_empty(res._shape, out._dtype, out._storage.device)
            _init(out, fresh._storage, fresh._dtype, fresh._shape, fresh._stride, 0, True)
        else:
            raise RuntimeError(f"fft.{op}: out has shape {list(out._shape)} but the result has "
                               f"shape {list(res._shape)}")
    _copy_into(out, res)
    out._bump()
    return out


def _np_call(op, fn, *args, **kwargs):
    a = args[0]
    try:
        if isinstance(a, _DevSignal):
            from fiamma._backend import check

            rc, res = a.t._storage.backend.fft(fn.__name__, a.t, a.cplx, a.conj, kwargs)
            check(rc, "fft." + op)
            return res
        return fn(*args, **kwargs)
    except ValueError as e:  # e.g. a transform over an empty dimension
        raise RuntimeError(f"fft.{op}: {e}") from None


# ---- argument handling ---------------------------------------------------------------------

def _norm(norm, op):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"fft.{op}: Invalid normalization mode: {norm!r} (expected one of "
                         f"{', '.join(_NORMS)})")
    return norm


def _wrap(d, nd, op):
    if not isinstance(d, builtins.int) or isinstance(d, builtins.bool):
        raise TypeError(f"fft.{op}: dim must be an int, got {type(d).__name__}")
    if not -nd <= d < nd:
        raise IndexError(f"fft.{op}: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {d})")
    return d % nd


def _axes(nd, s, dim, op, default_all=True, two=False):
    """PyTorch's (s, dim) rules: dims default to the last len(s) dims (or all / the last two)."""
    if s is not None:
        s = [builtins.int(v) for v in (s if isinstance(s, (tuple, list)) else (s,))]
    if dim is None:
        if two:
            dims = [nd - 2, nd - 1] if s is None else list(range(nd - len(s), nd))
        elif s is not None:
            dims = list(range(nd - len(s), nd))
        else:
            dims = list(range(nd))
        if builtins.any(d < 0 for d in dims):
            raise RuntimeError(f"fft.{op}: got {len(dims)} transform dims for a "
                               f"{nd}-d signal")
    else:
        dlist = list(dim) if isinstance(dim, (tuple, list)) else [dim]
        dims = [_wrap(d, nd, op) for d in dlist]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"fft.{op}: dims must be unique, got {list(dim)}")
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"fft.{op}: When given, dim and shape arguments must have the "
                               f"same length, got s={s} and dim={list(dim)}")
    return s, dims


def _sizes(arr, s, dims, op, c2r=False):
    """``s`` with its -1 entries resolved: the input's size there (for a complex-to-real
    transform's last dim, the default output length 2 * (size - 1), as PyTorch)."""
    if s is None:
        return None
    out = []
    last = len(dims) - 1
    for i, (v, d) in enumerate(zip(s, dims)):
        if v == -1:
            v = 2 * (arr.shape[d] - 1) if c2r and i == last else arr.shape[d]
        if v < 1:
            raise RuntimeError(f"fft.{op}: Invalid number of data points ({v}) specified")
        out.append(v)
    return out


def _check_n(n, op):
    if n is not None and n < 1:
        raise RuntimeError(f"fft.{op}: Invalid number of data points ({n}) specified")


# the recorded op of each transform (fiamma.autograd_hook.ops; a name missing there fails here,
# at import)
_KEYS = {n: ops["fft_" + n] for n in (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2",
    "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")}


def _record(op, res, x, kwargs):
    if x.requires_grad:
        G.record(_KEYS[op], res, (x,), kwargs)
    return res


# ---- 1-d transforms ------------------------------------------------------------------------

def _c2c(op, npfn, input, n, dim, norm, out, complex_input):
    cplx = _is_complex_input(input, complex_input, op)
    a = _complex_np(input, op, pairs=True) if cplx else _real_np(input, op)
    if a.ndim == 0:
        raise IndexError(f"fft.{op}: expected a signal of at least one dimension, got a 0-d "
                         "tensor")
    _check_n(n, op)
    d = _wrap(dim, a.ndim, op)
    r = _np_call(op, npfn, a, n=n, axis=d, norm=_norm(norm, op))
    res = _out_complex(r, out, op)
    return _record(op, res, input, {"n": n, "dim": dim, "norm": norm, "complex_input": cplx})


def fft(input, n=None, dim=-1, norm=None, *, out=None, complex_input=None):
    """The 1-d discrete Fourier transform along ``dim`` (zero-padded / trimmed to ``n``).

    Returns a complex tensor (a real input is a real signal). ``norm``: 'backward' (default,
    no scaling), 'ortho' (1/sqrt(n)), 'forward' (1/n).

    >>> import fiamma
    >>> fiamma.fft.fft(fiamma.tensor([1.0, 2.0, 3.0, 4.0])).tolist()
    [(10+0j), (-2+2j), (-2+0j), (-2-2j)]
    """
    return _c2c("fft", np.fft.fft, input, n, dim, norm, out, complex_input)


def ifft(input, n=None, dim=-1, norm=None, *, out=None, complex_input=None):
    """The 1-d inverse DFT (``norm='backward'`` scales by 1/n); a complex tensor out."""
    return _c2c("ifft", np.fft.ifft, input, n, dim, norm, out, complex_input)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The DFT of a real signal: the n // 2 + 1 non-negative frequencies (complex).

    >>> import fiamma
    >>> fiamma.fft.rfft(fiamma.ones(4)).tolist()
    [(4+0j), 0j, 0j]
    """
    a = _real_np(input, "rfft")
    if a.ndim == 0:
        raise IndexError("fft.rfft: expected a signal of at least one dimension, got a 0-d tensor")
    _check_n(n, "rfft")
    r = _np_call("rfft", np.fft.rfft, a, n=n, axis=_wrap(dim, a.ndim, "rfft"),
                 norm=_norm(norm, "rfft"))
    return _record("rfft", _out_complex(r, out, "rfft"), input,
                   {"n": n, "dim": dim, "norm": norm})


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of :func:`rfft`: a complex half-spectrum to a real signal of length ``n``
    (default 2 * (m - 1))."""
    a = _complex_np(input, "irfft")
    if a.ndim == 0:
        raise IndexError("fft.irfft: expected a signal of at least one dimension")
    _check_n(n, "irfft")
    d = _wrap(dim, a.ndim, "irfft")
    if n is None and 2 * (a.shape[d] - 1) < 1:
        raise RuntimeError(f"fft.irfft: Invalid number of data points ({2 * (a.shape[d] - 1)}) "
                           "specified")
    r = _np_call("irfft", np.fft.irfft, a, n=n, axis=d, norm=_norm(norm, "irfft"))
    return _record("irfft", _out_real(r, out, "irfft"), input,
                   {"n": n, "dim": dim, "norm": norm})


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The DFT of a Hermitian-symmetric signal given by its first half (complex); the result
    is real, of length ``n`` (default 2 * (m - 1))."""
    a = _complex_np(input, "hfft")
    _check_n(n, "hfft")
    d = _wrap(dim, a.ndim, "hfft")
    r = _np_call("hfft", np.fft.hfft, a, n=n, axis=d, norm=_norm(norm, "hfft"))
    return _record("hfft", _out_real(r, out, "hfft"), input, {"n": n, "dim": dim, "norm": norm})


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of :func:`hfft`: a real signal to its (complex) half spectrum."""
    a = _real_np(input, "ihfft")
    _check_n(n, "ihfft")
    d = _wrap(dim, a.ndim, "ihfft")
    r = _np_call("ihfft", np.fft.ihfft, a, n=n, axis=d, norm=_norm(norm, "ihfft"))
    return _record("ihfft", _out_complex(r, out, "ihfft"), input,
                   {"n": n, "dim": dim, "norm": norm})


# ---- n-d transforms ------------------------------------------------------------------------

def _nd_c2c(op, npfn, input, s, dim, norm, out, complex_input, two):
    cplx = _is_complex_input(input, complex_input, op)
    a = _complex_np(input, op, pairs=True) if cplx else _real_np(input, op)
    s, dims = _axes(a.ndim, s, dim, op, two=two)
    s = _sizes(a, s, dims, op)
    r = _np_call(op, npfn, a, s=s, axes=dims, norm=_norm(norm, op))
    return _record(op, _out_complex(r, out, op), input,
                   {"s": s, "dim": dim, "norm": norm, "complex_input": cplx})


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None, complex_input=None):
    """The 2-d DFT over ``dim`` (default the last two); a complex tensor out."""
    return _nd_c2c("fft2", np.fft.fftn, input, s, dim, norm, out, complex_input, True)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None, complex_input=None):
    """The 2-d inverse DFT; a complex tensor out."""
    return _nd_c2c("ifft2", np.fft.ifftn, input, s, dim, norm, out, complex_input, True)


def fftn(input, s=None, dim=None, norm=None, *, out=None, complex_input=None):
    """The n-d DFT over ``dim`` (default: the last len(s) dims, or all); complex out."""
    return _nd_c2c("fftn", np.fft.fftn, input, s, dim, norm, out, complex_input, False)


def ifftn(input, s=None, dim=None, norm=None, *, out=None, complex_input=None):
    """The n-d inverse DFT; a complex tensor out."""
    return _nd_c2c("ifftn", np.fft.ifftn, input, s, dim, norm, out, complex_input, False)


def _rfftn(op, input, s, dim, norm, out, two, conj=False):
    a = _real_np(input, op)
    s, dims = _axes(a.ndim, s, dim, op, two=two)
    if not dims:
        raise RuntimeError(f"fft.{op}: must transform at least one axis")
    nrm = _norm(norm, op)
    dev = isinstance(a, _DevSignal)
    if conj and dev:
        a.conj = 2  # the device conjugates the result
    s = _sizes(a, s, dims, op)
    r = _np_call(op, np.fft.rfftn, a, s=s, axes=dims,
                 norm=_SWAP[nrm] if conj else nrm)
    if conj and not dev:
        r = np.conj(r)
    return _record(op, _out_complex(r, out, op), input, {"s": s, "dim": dim, "norm": norm})


def _irfftn(op, input, s, dim, norm, out, two, conj=False):
    a = _complex_np(input, op)
    s, dims = _axes(a.ndim, s, dim, op, two=two)
    if not dims:
        raise RuntimeError(f"fft.{op}: must transform at least one axis")
    sizes = s = _sizes(a, s, dims, op, c2r=True)
    if sizes is None:
        sizes = [a.shape[d] for d in dims[:-1]] + [2 * (a.shape[dims[-1]] - 1)]
        if sizes[-1] < 1:
            raise RuntimeError(f"fft.{op}: Invalid number of data points ({sizes[-1]}) "
                               "specified")
    nrm = _norm(norm, op)
    if conj and isinstance(a, _DevSignal):
        a.conj = 1  # the device conjugates the input
    elif conj:
        a = np.conj(a)
    r = _np_call(op, np.fft.irfftn, a, s=sizes, axes=dims, norm=_SWAP[nrm] if conj else nrm)
    return _record(op, _out_real(r, out, op), input, {"s": s, "dim": dim, "norm": norm})


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-d DFT of a real signal (half spectrum along the last of ``dim``)."""
    return _rfftn("rfft2", input, s, dim, norm, out, True)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of :func:`rfft2` (complex in, real out)."""
    return _irfftn("irfft2", input, s, dim, norm, out, True)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-d DFT of a real signal (half spectrum along the last of ``dim``)."""
    return _rfftn("rfftn", input, s, dim, norm, out, False)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of :func:`rfftn` (complex in, real out)."""
    return _irfftn("irfftn", input, s, dim, norm, out, False)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-d DFT of a Hermitian signal given as its (complex) half; real out."""
    return _irfftn("hfft2", input, s, dim, norm, out, True, conj=True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of :func:`hfft2`."""
    return _rfftn("ihfft2", input, s, dim, norm, out, True, conj=True)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-d DFT of a Hermitian signal given as its (complex) half; real out."""
    return _irfftn("hfftn", input, s, dim, norm, out, False, conj=True)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of :func:`hfftn`."""
    return _rfftn("ihfftn", input, s, dim, norm, out, False, conj=True)


# ---- helpers -------------------------------------------------------------------------------

def _freq_tensor(arr, dtype, requires_grad, device=None):
    dt = D.get_default_dtype() if dtype is None else dtype
    res = new_empty(arr.shape, dt)
    if res._numel:
        src = new_empty(arr.shape, D.float64)
        src.numpy()[...] = arr
        _copy_into(res, src)
    if device is None:
        from fiamma._storage import _DEFAULT_DEVICE

        device = _DEFAULT_DEVICE.dev
    if device is not None:
        res = res.to(device)
    if requires_grad:
        res.requires_grad_(True)
    return res


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point DFT with sample spacing ``d``.

    >>> import fiamma
    >>> fiamma.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    arr = np.fft.fftfreq(n, d) if n else np.empty(0)  # n = 0: empty, as PyTorch
    return _finish(_freq_tensor(arr, dtype, requires_grad, device), out, "fftfreq")


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The n // 2 + 1 non-negative sample frequencies of an n-point real DFT."""
    arr = np.fft.rfftfreq(n, d) if n else np.empty(0)  # n = 0: empty, as PyTorch
    return _finish(_freq_tensor(arr, dtype, requires_grad, device), out, "rfftfreq")


def _shift(op, input, dim, sign):
    if not isinstance(input, Tensor):
        raise TypeError(f"fft.{op}: expected a Tensor, got {type(input).__name__}")
    nd = len(input._shape)
    cplx = is_complex_layout(input)
    lnd = nd - 1 if cplx else nd  # a complex result: the trailing pair is not a signal dim
    if dim is None:
        dims = list(range(lnd))
    else:
        dims = [_wrap(d, lnd, op) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    if input._storage.device.type != "cpu":
        # on a device: a roll as the concatenation of two slices per dim (differentiable)
        from fiamma._ops.join import cat

        res = input
        for d in dims:
            n = input._shape[d]
            k = (sign * (n // 2)) % n if n else 0
            if k:
                res = cat([res.narrow(d, n - k, k), res.narrow(d, 0, n - k)], d)
        res = res.clone() if res is input else res
        return as_complex_layout(res) if cplx else res
    src = input if input._dtype is not D.bfloat16 else input.view(D.int16)
    a = src.detach().numpy()
    shifts = [sign * (a.shape[d] // 2) for d in dims]
    res = new_empty(input._shape, src._dtype)
    if res._numel:
        res.numpy()[...] = np.roll(a, shifts, dims) if dims else a
    if src is not input:
        res = res.view(D.bfloat16)
    if input.requires_grad:
        G.record(op, res, (input,), {"dim": dim})
    return as_complex_layout(res) if cplx else res


def fftshift(input, dim=None):
    """Move the zero frequency to the centre (roll by n // 2 along ``dim``, default all signal
    dims; a complex result's trailing (real, imag) pair is not shifted)."""
    return _shift(ops.fftshift, input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift` (roll by -(n // 2))."""
    return _shift(ops.ifftshift, input, dim, -1)

from fiamma import _torch_function  # noqa: E402

_torch_function.register_namespace(__name__)  # __torch_function__ (once it is active)
