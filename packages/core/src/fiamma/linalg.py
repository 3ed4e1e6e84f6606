"""fiamma.linalg: PyTorch's ``torch.linalg`` (norms, inverses, decompositions, solvers).

Computed by NumPy's LAPACK on zero-copy views of the inputs (``tensor.numpy()``), batched over
the leading dimensions; results are copied into fresh fiamma tensors of the input's dtype. On
another device the same code runs on the device's arrays: the backend's array module computes
(``backend.get`` views the inputs as its arrays, NumPy's functions dispatch to CuPy's through
``__array_function__``, results are written with ``backend.put`` into tensors on the input's
device), inside ``backend.linalg_errors()`` so that singular input raises there too.
float32 and float64 are supported; float16 / bfloat16 raise (as PyTorch does on the CPU) and
integer inputs raise where PyTorch does. A singular / non-positive-definite input raises
:class:`LinAlgError` (a RuntimeError) naming the op and the batch element.

fiamma has no complex dtype, so ``eig`` / ``eigvals`` (complex results for general matrices)
raise; use ``eigh`` / ``eigvalsh`` for symmetric matrices.

Autograd: ops computed in NumPy record ``"linalg_<name>"`` (``linalg_inv``, ``linalg_det``, ...)
with their inputs and keyword arguments; vector_norm, vecdot, multi_dot and matmul are composed
of core ops and record those.

>>> import fiamma
>>> A = fiamma.tensor([[2.0, 0.0], [0.0, 4.0]])
>>> fiamma.linalg.inv(A).tolist()
[[0.5, 0.0], [0.0, 0.25]]
>>> fiamma.linalg.det(A).item()
8.0
"""

import builtins
import collections
import contextvars
import functools
import math

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._ops.matmul import matmul
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = ["LinAlgError", "vector_norm", "matrix_norm", "norm", "cond", "inv", "inv_ex", "pinv",
           "det", "slogdet", "solve", "solve_ex", "solve_triangular", "lstsq", "cholesky",
           "cholesky_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh", "eig", "eigvals",
           "matrix_rank", "matrix_power", "multi_dot", "cross", "vecdot", "matmul", "diagonal",
           "lu_factor", "lu_factor_ex", "lu", "lu_solve"]


class LinAlgError(RuntimeError):
    """A linear-algebra error (singular or non-positive-definite input), like
    ``torch.linalg.LinAlgError``."""


SlogdetResult = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])
QRResult = collections.namedtuple("linalg_qr", ["Q", "R"])
SVDResult = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
EighResult = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
EigResult = collections.namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
LstsqResult = collections.namedtuple("linalg_lstsq",
                                     ["solution", "residuals", "rank", "singular_values"])
InvExResult = collections.namedtuple("linalg_inv_ex", ["inverse", "info"])
CholeskyExResult = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])
SolveExResult = collections.namedtuple("linalg_solve_ex", ["result", "info"])

_NAMES = {D.float16: "Half", D.bfloat16: "BFloat16", D.float32: "Float", D.float64: "Double",
          D.int64: "Long", D.int32: "Int", D.int16: "Short", D.int8: "Char", D.uint8: "Byte",
          D.bool: "Bool", D.complex64: "ComplexFloat", D.complex128: "ComplexDouble",
          D.uint16: "UInt16", D.uint32: "UInt32", D.uint64: "UInt64"}


# ---- conversions -----------------------------------------------------------------------------

# the device the running public function computes on (None: the CPU); set by _on_device
_DEVICE = contextvars.ContextVar("fiamma_linalg_device", default=None)


def _on_device(fn):
    """Run ``fn`` on the device of its first tensor argument: there the module's NumPy code
    computes on the device's arrays (see the module docstring). CPU inputs take the plain
    path."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        t = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(t, (tuple, list)) and t:
            t = t[0]
        if not isinstance(t, Tensor) or t._storage.device is CPU or _DEVICE.get() is not None:
            return fn(*args, **kwargs)
        token = _DEVICE.set(t._storage.device)
        try:
            if t._storage.device.type == "meta":
                # shape-only results: the NumPy code runs on stand-ins of the inputs' shapes
                # (see _arr) and _tensor makes meta results of the shapes it computes
                return fn(*args, **kwargs)
            with t._storage.backend.linalg_errors():
                return fn(*args, **kwargs)
        finally:
            _DEVICE.reset(token)

    return run


def _check(A, op, name="A"):
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{op}: expected {name} to be a Tensor, got {type(A).__name__}")
    dev = _DEVICE.get() or CPU
    if A._storage.device != dev:
        raise RuntimeError(f"linalg.{op}: Expected all tensors to be on the same device, but "
                           f"found at least two devices, {dev} and {A.device}!")


def _arr(t):
    """The array of a float32/float64 tensor on the device computed on (NumPy on the CPU)."""
    t = t.detach()
    if t._storage.device is CPU:
        return t.numpy()
    if t._storage.device.type == "meta":
        return _meta_stand_in(t)
    return t._storage.backend.get(t)


def _meta_stand_in(t):
    """A NumPy array of a meta tensor's shape and dtype for the shape-only path: identity
    matrices (non-singular, positive definite, so every decomposition succeeds), and for
    integer tensors (LU pivots) the pivots of no row exchange. Only the shapes of what is
    computed from it are used."""
    shape, dt = tuple(t._shape), np.dtype(t._dtype._np or np.float32)
    if not shape:
        return np.ones((), dt)
    if np.issubdtype(dt, np.integer):
        return np.ascontiguousarray(np.broadcast_to(np.arange(1, shape[-1] + 1, dtype=dt), shape))
    if len(shape) == 1:
        return np.ones(shape, dt)
    return np.ascontiguousarray(np.broadcast_to(np.eye(shape[-2], shape[-1], dtype=dt), shape))


def _host(a):
    """A NumPy copy of a device array (error paths that loop on the host)."""
    return a if isinstance(a, np.ndarray) else a.get()


def _float_np(A, op, name="A", complex_ok=False):
    """The array view of a float32/float64 tensor (and complex64/complex128 with
    ``complex_ok``: the functions that compute on complex matrices); PyTorch's dtype errors
    otherwise."""
    _check(A, op, name)
    dt = A._dtype
    if dt in (D.float16, D.bfloat16):
        raise RuntimeError(f"linalg.{op}: Low precision dtypes not supported. Got {_NAMES[dt]}")
    if dt._kind == 3 and not complex_ok:
        raise RuntimeError(f"linalg.{op}: complex input ({dt}) is not supported")
    if dt._kind < 2:
        raise RuntimeError(f"linalg.{op}: Expected a floating point or complex tensor as input. "
                           f"Got {_NAMES[dt]}")
    return _arr(A)


def _matrix_np(A, op, square=False, name="A", complex_ok=False):
    a = _float_np(A, op, name, complex_ok)
    if a.ndim < 2:
        raise RuntimeError(f"linalg.{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.{op}: {name} must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")
    return a


def _host(v):
    """v as a host value (a CuPy result copied back; NumPy values as they are): lstsq gathers
    per-matrix results into host arrays, and CuPy refuses implicit conversion."""
    return v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v


def _tensor(arr, dt=None):
    """A fresh fiamma tensor holding a copy of array ``arr`` (cast to ``dt``), on the device
    computed on."""
    dev = _DEVICE.get()
    if dev is None:
        arr = np.asarray(arr)
        if dt is None:
            dt = D.from_numpy_dtype(arr.dtype)
        if dt is D.bfloat16:  # NumPy has no bfloat16: through float32, rounded once
            return _tensor(arr, D.float32).to(dt)
        res = new_empty(arr.shape, dt)
        if res._numel:
            res.numpy()[...] = arr
        return res
    if dev.type == "meta":  # the shape-only path (see _meta_stand_in)
        arr = np.asarray(arr)
        return new_empty(arr.shape, D.from_numpy_dtype(arr.dtype) if dt is None else dt, dev)
    from fiamma._backend import backend_for

    be = backend_for(dev)
    arr = be.asarray(arr)
    if dt is None:
        dt = D.from_numpy_dtype(np.dtype(arr.dtype))
    res = new_empty(arr.shape, dt, dev)
    if res._numel:
        be.put(res, arr)
    return res


def _result(arr, like, out=None, op=""):
    res = _tensor(arr, like)
    if out is not None:
        return _into(out, res, op)
    return res


def _into(out, res, op):
    if not isinstance(out, Tensor):
        raise TypeError(f"linalg.{op}: out must be a Tensor, got {type(out).__name__}")
    if out._shape != res._shape:
        if out._numel:
            raise RuntimeError(f"linalg.{op}: out has shape {list(out._shape)} but the result "
                               f"has shape {list(res._shape)}")
        from fiamma._tensor import _init

        fresh = new_empty(res._shape, out._dtype, out._storage.device)
        _init(out, fresh._storage, fresh._dtype, fresh._shape, fresh._stride, 0, True)
    _copy_into(out, res)
    out._bump()
    return out


def _record(op, res, inputs, kwargs=None):
    """Record ``res`` for autograd as ``op`` (a key of fiamma.autograd_hook.ops)."""
    if builtins.any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        G.record(op, res, inputs, kwargs or {})
    return res


def _flat_shape(a):
    """(number of matrices, rows, cols) of a batch (reshape(-1, ...) fails when empty)."""
    return (math.prod(a.shape[:-2]),) + a.shape[-2:]


def _batch_label(shape, flat):
    if not shape:
        return ""
    idx = np.unravel_index(flat, shape)
    return "(Batch element %s): " % ", ".join(str(int(i)) for i in idx) if len(shape) > 1 \
        else f"(Batch element {int(idx[0])}): "


def _svd_np(a, op, **kw):
    """numpy.linalg.svd, guarded: NumPy's bundled LAPACK (gesdd) loops forever on a matrix
    holding +-inf when it computes U and V, and raises its own error on NaN. A non-finite
    input raises LinAlgError here first, with PyTorch's message for NaN. Without U and V
    (``compute_uv=False``) an input with infinities but no NaN gives NaN singular values for
    those matrices, as PyTorch does, without reaching LAPACK."""
    fin = np.isfinite(a)
    if fin.all():
        return np.linalg.svd(a, **kw)
    nan = np.isnan(a)
    if kw.get("compute_uv", True) or nan.any():
        raise LinAlgError(f"linalg.{op}: The algorithm failed to converge because the input "
                          "matrix contained non-finite values.")
    bad = ~fin.all(axis=(-2, -1))
    s = np.linalg.svd(np.where(bad[..., None, None], 0, a), **kw)
    s[bad] = np.nan
    return s


def _first_failure(a, fn):
    """Index of the first batch element on which ``fn`` raises numpy's LinAlgError."""
    flat = _host(a).reshape(_flat_shape(a))
    for i in range(flat.shape[0]):
        try:
            fn(flat[i])
        except np.linalg.LinAlgError:
            return i
    return 0


def _singular(op, a):
    i = _first_failure(a, np.linalg.inv)
    raise LinAlgError(f"linalg.{op}: {_batch_label(a.shape[:-2], i)}The diagonal element "
                      f"{_zero_pivot(_host(a).reshape(_flat_shape(a))[i])} is zero, the "
                      "inversion could not be completed because the input matrix is singular.")


def _zero_pivot(m):
    """1-based index of the first zero pivot of LU with partial pivoting (LAPACK's info; the
    last index when rounding, not an exact zero, made the matrix singular)."""
    info = int(_lu_np(np.asarray(m)[None])[2][0])
    return info or m.shape[0]


# ---- norms ---------------------------------------------------------------------------------

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The vector ``ord``-norm over ``dim`` (None: all elements): any real ord, inf, -inf, 0.

    >>> import fiamma
    >>> fiamma.linalg.vector_norm(fiamma.tensor([3.0, -4.0])).item()
    5.0
    """
    _check(x, "vector_norm", "x")
    if x._dtype._kind == 3 and (dtype is None or dtype._kind == 3):
        # the norm of complex values is the norm of their magnitudes (real, as PyTorch)
        x = x.abs()
        dtype = None if dtype is None else dtype.to_real
    dt = x._dtype if dtype is None else dtype
    if dt._kind != 2:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_NAMES[dt]}")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    from fiamma._ops.reduce import norm as _norm

    if isinstance(dim, builtins.list):
        dim = builtins.tuple(dim)
    return _norm(x, p=builtins.float(ord), dim=dim, keepdim=keepdim, dtype=dtype, out=out)


def _mnorm_np(a, ord, op):
    """Matrix norms over the last two axes of NumPy array ``a``."""
    if ord == "fro":
        return np.sqrt(np.sum(np.square(np.abs(a)), axis=(-2, -1)))
    if ord == "nuc":
        return np.sum(_svd_np(a, op, compute_uv=False), axis=-1) if a.size else \
            np.zeros(a.shape[:-2], a.dtype)
    # over an empty axis a max gives 0 and a min raises (PyTorch's rule)
    if ord in (2, -2):
        if 0 in a.shape[-2:]:
            if ord == -2:
                raise RuntimeError(f"linalg.{op}: Expected a non-empty matrix for ord=-2")
            return np.zeros(a.shape[:-2], a.dtype)
        s = _svd_np(a, op, compute_uv=False)
        return s[..., 0] if ord == 2 else s[..., -1]
    if ord in (1, -1, math.inf, -math.inf):
        ax = -2 if ord in (1, -1) else -1  # column sums for 1, row sums for inf
        s = np.sum(np.abs(a), axis=ax)
        if s.shape[-1] == 0:
            if ord < 0:
                raise RuntimeError(f"linalg.{op}: Expected reduction dim to have non-zero size "
                                   f"(the {ord} norm of an empty matrix)")
            return np.zeros(s.shape[:-1], a.dtype)
        return np.max(s, axis=-1) if ord > 0 else np.min(s, axis=-1)
    raise RuntimeError(f"linalg.{op}: Order {ord} not supported.")


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The matrix norm over the two dims ``dim``: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2.

    >>> import fiamma
    >>> fiamma.linalg.matrix_norm(fiamma.tensor([[1.0, 2.0], [3.0, 4.0]]), ord=1).item()
    6.0
    """
    _check(A, "matrix_norm")
    src = A if dtype is None else A.to(dtype)
    if src._dtype in (D.float16, D.bfloat16) and ord not in ("nuc", 2, -2):
        # as PyTorch: the norms without an SVD take half / bfloat16 (computed in float32,
        # rounded once to the input's dtype)
        a = _arr(src.to(D.float32))
    else:
        a = _float_np(src, "matrix_norm", complex_ok=True)
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    dims = builtins.tuple(dim) if isinstance(dim, (tuple, list)) else None
    if dims is None or len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = (d % a.ndim if -a.ndim <= d < a.ndim else None for d in dims)
    if d0 is None or d1 is None:
        raise IndexError(f"linalg.matrix_norm: Dimension out of range (expected to be in range "
                         f"of [{-a.ndim}, {a.ndim - 1}], but got {dims})")
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if not (isinstance(ord, str) and ord in ("fro", "nuc")) and \
            ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    r = _mnorm_np(np.moveaxis(a, (d0, d1), (-2, -1)), ord, "matrix_norm")
    if keepdim:
        for d in sorted((d0, d1)):
            r = np.expand_dims(r, d)
    res = _result(r, src._dtype.to_real, out, "matrix_norm")
    return _record(ops.linalg_matrix_norm, res, (A,), {"ord": ord, "dim": dim, "keepdim": keepdim,
                                             "dtype": dtype})


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """A vector or matrix norm, as ``torch.linalg.norm``: a 2-tuple ``dim`` (or 2-d input with
    dim=None and ord given, or a string ord) means a matrix norm, otherwise a vector norm
    (ord=None: the 2-norm of the flattened input)."""
    _check(A, "norm")
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = (dim,)
    if isinstance(ord, str):
        if dim is None:
            if A.ndim != 2:
                raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                                   f"must be 1D or 2D. Got {A.ndim}D.")
            dim = (-2, -1)
        return matrix_norm(A, ord, builtins.tuple(dim), keepdim, dtype=dtype, out=out)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(A, "fro", builtins.tuple(dim), keepdim, dtype=dtype, out=out)
        return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
    if dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {A.ndim}D.")
        dim = builtins.tuple(range(A.ndim))
    if len(dim) == 2:
        return matrix_norm(A, ord, builtins.tuple(dim), keepdim, dtype=dtype, out=out)
    return vector_norm(A, ord, dim, keepdim, dtype=dtype, out=out)


def cond(A, p=None, *, out=None):
    """The condition number of A in the ``p`` norm (None / 2: ratio of extreme singular
    values; 'fro', 'nuc', inf, -inf, 1, -1: norm(A) * norm(inv(A)))."""
    a = _matrix_np(A, "cond", square=p in ("fro", "nuc"), complex_ok=True)
    if 0 in a.shape[-2:]:
        r = np.zeros(a.shape[:-2], a.real.dtype)  # PyTorch: 0 for empty matrices
    elif p not in (None, 2, -2) and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.cond: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")
    elif p in (None, 2, -2):
        s = _svd_np(a, "cond", compute_uv=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        try:
            ia = np.linalg.inv(a)
        except np.linalg.LinAlgError:
            ia = np.full_like(a, np.inf)
        r = _mnorm_np(a, p, "cond") * _mnorm_np(ia, p, "cond")
    return _record(ops.linalg_cond, _result(r, A._dtype.to_real, out, "cond"), (A,), {"p": p})


# ---- inverses and determinants ---------------------------------------------------------------

def inv(A, *, out=None):
    """The inverse of square matrices (batched); LinAlgError when singular.

    >>> import fiamma
    >>> fiamma.linalg.inv(fiamma.tensor([[0.0, 1.0], [1.0, 0.0]])).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    a = _matrix_np(A, "inv", square=True, complex_ok=True)
    try:
        r = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        _singular("inv", a)
    return _record(ops.linalg_inv, _result(r, A._dtype, out, "inv"), (A,))


def inv_ex(A, *, check_errors=False, out=None):
    """``(inverse, info)``: info (int32, one per matrix) is 0 or the 1-based index of the zero
    pivot; the inverse of a singular matrix is left unspecified (no error unless
    check_errors)."""
    a = _matrix_np(A, "inv_ex", square=True, complex_ok=True)
    flat = a.reshape(_flat_shape(a))
    inv_flat = np.empty_like(flat)
    info = np.zeros(flat.shape[0], np.int32)
    for i in range(flat.shape[0]):
        try:
            inv_flat[i] = np.linalg.inv(flat[i])
        except np.linalg.LinAlgError:
            info[i] = _zero_pivot(flat[i])
            inv_flat[i] = np.nan
    if check_errors and info.any():
        _singular("inv_ex", a)
    res = _tensor(inv_flat.reshape(a.shape), A._dtype)
    _record(ops.linalg_inv_ex, res, (A,))
    return InvExResult(res, _tensor(info.reshape(a.shape[:-2]), D.int32))


def _tol(s, m, n, atol, rtol, dt, op):
    """PyTorch's tolerance for pinv / matrix_rank: max(atol, rtol * s_max)."""
    def val(v):
        return _arr(v.to(D.float64))[..., None] if isinstance(v, Tensor) else v

    eps = np.finfo(dt._np).eps
    if rtol is None:
        rtol = eps * builtins.max(m, n) if atol is None or \
            (not isinstance(atol, Tensor) and atol <= 0) else 0.0
    atol = 0.0 if atol is None else val(atol)
    smax = s[..., :1] if s.shape[-1] else np.zeros(s.shape[:-1] + (1,), s.dtype)
    return np.maximum(atol, val(rtol) * np.abs(smax))


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The Moore-Penrose pseudo-inverse by SVD (or eigh when ``hermitian``); singular values
    below max(atol, rtol * s_max) count as zero (``rcond`` is the old name of rtol)."""
    a = _matrix_np(A, "pinv", complex_ok=True)
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError("linalg.pinv: rcond and rtol cannot both be given")
        rtol = rcond
    m, n = a.shape[-2:]
    if hermitian:
        w, v = np.linalg.eigh(a)
        order = np.argsort(-np.abs(w), axis=-1)
        w = np.take_along_axis(w, order, -1)
        v = np.take_along_axis(v, order[..., None, :], -1)
        tol = _tol(np.abs(w), m, n, atol, rtol, A._dtype, "pinv")
        with np.errstate(divide="ignore"):
            wi = np.where(np.abs(w) > tol, 1.0 / np.where(w == 0, 1, w), 0.0).astype(a.dtype)
        r = (v * wi[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
    else:
        if a.size == 0:
            r = np.zeros(a.shape[:-2] + (n, m), a.dtype)
        else:
            u, s, vh = _svd_np(a, "pinv", full_matrices=False)
            tol = _tol(s, m, n, atol, rtol, A._dtype, "pinv")
            with np.errstate(divide="ignore"):
                si = np.where(s > tol, 1.0 / np.where(s == 0, 1, s), 0.0).astype(a.dtype)
            r = np.conj(np.swapaxes(vh, -1, -2)) @ (si[..., :, None] *
                                                    np.conj(np.swapaxes(u, -1, -2)))
    return _record(ops.linalg_pinv, _result(r, A._dtype, out, "pinv"), (A,),
                   {"atol": atol, "rtol": rtol, "hermitian": hermitian})


def det(A, *, out=None):
    """The determinant of square matrices (batched)."""
    a = _matrix_np(A, "det", square=True, complex_ok=True)
    return _record(ops.linalg_det, _result(np.linalg.det(a), A._dtype, out, "det"), (A,))


def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` of the determinant (sign 0 and logabsdet -inf when singular)."""
    a = _matrix_np(A, "slogdet", square=True, complex_ok=True)
    s, l = np.linalg.slogdet(a)  # complex A: sign = det / |det| (complex), logabsdet real
    res = SlogdetResult(_tensor(s, A._dtype), _tensor(l, A._dtype.to_real))
    if out is not None:
        res = SlogdetResult(_into(out[0], res[0], "slogdet"), _into(out[1], res[1], "slogdet"))
    return _record(ops.linalg_slogdet, res, (A,))


def matrix_power(A, n, *, out=None):
    """A to the integer power ``n`` (negative powers through the inverse; n = 0: identity)."""
    _check(A, "matrix_power")
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if A.ndim < 2 or A._shape[-1] != A._shape[-2]:
        raise RuntimeError("linalg.matrix_power: expected a tensor of square matrices, got "
                           f"shape {list(A._shape)}")
    if n < 0:
        a = _arr(inv(A.detach()))  # LinAlgError naming inv when singular
        r = np.linalg.matrix_power(a, -n)
    else:
        a = A.detach()
        a = _arr(a.to(D.float32)) if A._dtype is D.bfloat16 else _arr(a)
        r = np.linalg.matrix_power(a, n)
    return _record(ops.linalg_matrix_power, _result(r, A._dtype, out, "matrix_power"), (A,),
                   {"n": n})


# ---- solvers -------------------------------------------------------------------------------

def _solve_np(a, b, left, op, vec_ok=True):
    vec = vec_ok and (b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]))
    if not left:
        a = np.swapaxes(a, -1, -2)
        if not vec:
            b = np.swapaxes(b, -1, -2)
    bb = b[..., None] if vec else b
    if bb.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"linalg.{op}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({'x'.join(map(str, a.shape[-2:]))} "
                           f"and {'x'.join(map(str, b.shape[-2:] if not vec else b.shape[-1:]))})")
    try:
        np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    except ValueError:
        raise RuntimeError(f"linalg.{op}: the batch dimensions of A {list(a.shape[:-2])} and B "
                           f"{list(bb.shape[:-2])} are not broadcastable") from None
    try:
        x = np.linalg.solve(a, bb)
    except np.linalg.LinAlgError:
        _singular(op, np.broadcast_to(a, np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
                                      + a.shape[-2:]))
    if vec:
        return x[..., 0]
    return x if left else np.swapaxes(x, -1, -2)


def solve(A, B, *, left=True, out=None):
    """The solution X of AX = B (``left``) or XA = B, batched with broadcasting. B may be a
    vector (B.ndim == 1, or B.shape == A.shape[:-1]).

    >>> import fiamma
    >>> A = fiamma.tensor([[3.0, 1.0], [1.0, 2.0]])
    >>> fiamma.linalg.solve(A, fiamma.tensor([9.0, 8.0])).tolist()
    [2.0, 3.0]
    """
    a = _matrix_np(A, "solve", square=True, complex_ok=True)
    b = _float_np(B, "solve", "B", complex_ok=True)
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {_NAMES[A._dtype]} and B of type {_NAMES[B._dtype]}")
    r = _solve_np(a, b, left, "solve")
    return _record(ops.linalg_solve, _result(r, A._dtype, out, "solve"), (A, B), {"left": left})


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``(result, info)`` of :func:`solve`; info is nonzero for singular matrices."""
    a = _matrix_np(A, "solve_ex", square=True, complex_ok=True)
    try:
        return SolveExResult(solve(A, B, left=left),
                             _tensor(np.zeros(a.shape[:-2], np.int32), D.int32))
    except LinAlgError:
        if check_errors:
            raise
    _, info = inv_ex(A)
    # the shape solve would have given: A's and B's batch dims broadcast, then B's own
    b = _arr(B)
    vec = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    bb = b.shape + (1,) if vec else b.shape
    shape = np.broadcast_shapes(a.shape[:-2], bb[:-2]) + (bb[-2:-1] if vec else bb[-2:])
    nan = np.full(shape, np.nan)
    return SolveExResult(_tensor(nan, A._dtype), info)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """The solution X of AX = B (or XA = B) for triangular A (only the ``upper`` / lower
    triangle of A is read; ``unitriangular``: its diagonal is taken as ones)."""
    a = _matrix_np(A, "solve_triangular", square=True, complex_ok=True)
    b = _matrix_np(B, "solve_triangular", name="B", complex_ok=True)
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, "
                           f"but found A of type {_NAMES[A._dtype]} and B of type "
                           f"{_NAMES[B._dtype]}")
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t.copy()
        idx = np.arange(t.shape[-1])
        t[..., idx, idx] = 1
    r = _solve_np(t, b, left, "solve_triangular", vec_ok=False)  # B is always a matrix
    return _record(ops.linalg_solve_triangular,
                   _result(r, A._dtype, out, "solve_triangular"), (A, B),
                   {"upper": upper, "left": left, "unitriangular": unitriangular})


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of AX = B (batched): ``(solution, residuals, rank,
    singular_values)`` as PyTorch: residuals (squared, per column of B) only when m > n, the
    driver is not the default 'gelsy' and every A has full rank; rank for drivers other than
    'gels'; singular values for 'gelsd' and 'gelss' (empty tensors otherwise). Computed by SVD
    (LAPACK gelsd) for every driver."""
    a = _matrix_np(A, "lstsq", complex_ok=True)
    b = _float_np(B, "lstsq", "B", complex_ok=True)
    if A._dtype is not B._dtype:
        raise RuntimeError(f"linalg.lstsq: Expected A and B to have the same dtype, but found "
                           f"A of type {_NAMES[A._dtype]} and B of type {_NAMES[B._dtype]}")
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"linalg.lstsq: parameter `driver` should be one of (gels, gelsy, "
                           f"gelsd, gelss), got {driver!r}")
    driver = driver or "gelsy"
    vec = b.ndim == a.ndim - 1
    bb = b[..., None] if vec else b
    m, n = a.shape[-2:]
    if bb.shape[-2] != m:
        raise RuntimeError(f"linalg.lstsq: A and B must have the same number of rows, got "
                           f"{m} and {bb.shape[-2]}")
    batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    aa = np.broadcast_to(a, batch + a.shape[-2:]).reshape((math.prod(batch), m, n))
    bf = np.broadcast_to(bb, batch + bb.shape[-2:]).reshape((math.prod(batch), m, bb.shape[-1]))
    k = bb.shape[-1]
    sol = np.zeros((aa.shape[0], n, k), a.dtype)
    res = np.zeros((aa.shape[0], k), a.real.dtype)  # residuals, singular values: real
    rank = np.zeros(aa.shape[0], np.int64)
    sv = np.zeros((aa.shape[0], builtins.min(m, n)), a.real.dtype)
    rc = np.finfo(a.dtype).eps * builtins.max(m, n) if rcond is None else rcond
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        # NumPy's gelsd loops forever on +-inf (and fails on NaN); PyTorch's drivers return
        # NaNs or fail an internal assert
        raise LinAlgError("linalg.lstsq: The algorithm failed to converge because the input "
                          "matrix contained non-finite values.")
    for i in range(aa.shape[0]):
        if m == 0 or n == 0:
            continue
        x, r, rk, s = (_host(v) for v in np.linalg.lstsq(aa[i], bf[i], rcond=rc))
        sol[i], rank[i], sv[i] = x, rk, s
        if r.size:
            res[i] = r
    full = m > n and bool(np.all(rank == n))
    out_sol = sol.reshape(batch + (n, k))
    if vec:
        out_sol = out_sol[..., 0]
    rdt = A._dtype.to_real
    full = full and driver != "gelsy"  # PyTorch's gelsy gives no residuals
    residuals = _tensor(res.reshape(batch + (k,)) if full else np.zeros(0, res.dtype), rdt)
    if vec and full:
        residuals = _tensor(res.reshape(batch + (k,))[..., 0], rdt)
    ranks = _tensor(rank.reshape(batch) if driver != "gels" else np.zeros(0, np.int64),
                    D.int64)
    svals = _tensor(sv.reshape(batch + (builtins.min(m, n),)) if driver in ("gelsd", "gelss")
                    else np.zeros(0, sv.dtype), rdt)
    sol = _tensor(out_sol, A._dtype)
    _record(ops.linalg_lstsq, sol, (A, B), {"rcond": rcond, "driver": driver})
    if residuals._numel and sol.requires_grad:
        # differentiable residuals (as PyTorch's): ||A X - B||^2 per column, recomputed from
        # the recorded solution (the path through X contributes nothing at the LS optimum)
        d = matmul(A, sol.unsqueeze(-1) if vec else sol) - (B.unsqueeze(-1) if vec else B)
        d = d.abs() if d.is_complex() else d
        residuals = (d * d).sum(-2)
        if vec:
            residuals = residuals[..., 0]
    elif sol.requires_grad:  # empty residuals require grad too (PyTorch's), gradient-free
        G.record(ops.no_gradient, residuals, (A, B), {})
    return LstsqResult(sol, residuals, ranks, svals)


# ---- decompositions --------------------------------------------------------------------------

def _not_pd(op, a):
    flat = a.reshape(_flat_shape(a))
    i = _first_failure(a, np.linalg.cholesky)
    order = _pd_order(flat[i])
    raise LinAlgError(f"linalg.{op}: {_batch_label(a.shape[:-2], i)}The factorization could "
                      "not be completed because the input is not positive-definite (the "
                      f"leading minor of order {order} is not positive-definite).")


def _pd_order(m):
    for k in range(1, m.shape[0] + 1):
        try:
            np.linalg.cholesky(m[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return m.shape[0]


def cholesky(A, *, upper=False, out=None):
    """The Cholesky factor L (A = L L^T) of symmetric positive-definite matrices, or U = L^T
    with ``upper``. Only the lower triangle of A is read (the upper one with ``upper``, as
    PyTorch). LinAlgError when not PD. Complex Hermitian matrices: A = L L^H, and ``upper``
    gives U = L^H."""
    a = _matrix_np(A, "cholesky", square=True, complex_ok=True)
    if upper:  # factor A^H, whose lower triangle is A's upper one
        a = np.conj(np.swapaxes(a, -1, -2))
    try:
        r = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        _not_pd("cholesky", a)
    if upper:
        r = np.conj(np.swapaxes(r, -1, -2))
    return _record(ops.linalg_cholesky, _result(r, A._dtype, out, "cholesky"), (A,),
                   {"upper": upper})


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``(L, info)``: info (int32 per matrix) is 0 or the order of the first leading minor that
    is not positive-definite. Reads the triangle :func:`cholesky` reads."""
    a = _matrix_np(A, "cholesky_ex", square=True, complex_ok=True)
    if upper:
        a = np.conj(np.swapaxes(a, -1, -2))
    flat = a.reshape(_flat_shape(a))
    L = np.zeros_like(flat)
    info = np.zeros(flat.shape[0], np.int32)
    for i in range(flat.shape[0]):
        try:
            L[i] = np.linalg.cholesky(flat[i])
        except np.linalg.LinAlgError:
            info[i] = _pd_order(flat[i])
    if check_errors and info.any():
        _not_pd("cholesky_ex", a)
    L = L.reshape(a.shape)
    if upper:
        L = np.conj(np.swapaxes(L, -1, -2))
    res = _tensor(L, A._dtype)
    _record(ops.linalg_cholesky_ex, res, (A,), {"upper": upper})
    return CholeskyExResult(res, _tensor(info.reshape(a.shape[:-2]), D.int32))


def qr(A, mode="reduced", *, out=None):
    """The QR decomposition ``(Q, R)``: mode 'reduced' (Q m x k), 'complete' (Q m x m) or 'r'
    (R only; Q is an empty tensor)."""
    a = _matrix_np(A, "qr", complex_ok=True)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected one "
                           "of 'reduced' (default), 'r', or 'complete'")
    if mode == "r":
        res = QRResult(_tensor(np.zeros(0, a.dtype), A._dtype),
                       _tensor(np.linalg.qr(a, mode="r"), A._dtype))
    else:
        q, r = np.linalg.qr(a, mode=mode)
        res = QRResult(_tensor(q, A._dtype), _tensor(r, A._dtype))
    return _record(ops.linalg_qr, res, (A,), {"mode": mode})


def svd(A, full_matrices=True, *, driver=None, out=None):
    """The singular value decomposition ``(U, S, Vh)`` with A = U diag(S) Vh, S descending."""
    a = _matrix_np(A, "svd", complex_ok=True)
    m, n = a.shape[-2:]
    if a.size == 0:
        k = builtins.min(m, n)
        u = np.broadcast_to(np.eye(m, m if full_matrices else k, dtype=a.dtype),
                            a.shape[:-2] + (m, m if full_matrices else k))
        vh = np.broadcast_to(np.eye(n if full_matrices else k, n, dtype=a.dtype),
                             a.shape[:-2] + (n if full_matrices else k, n))
        s = np.zeros(a.shape[:-2] + (k,), a.real.dtype)
    else:
        u, s, vh = _svd_np(a, "svd", full_matrices=full_matrices)
    # the singular values are real (float32 for complex64 input)
    res = SVDResult(_tensor(u, A._dtype), _tensor(s, A._dtype.to_real), _tensor(vh, A._dtype))
    return _record(ops.linalg_svd, res, (A,), {"full_matrices": full_matrices})


def svdvals(A, *, driver=None, out=None):
    """The singular values of A, descending."""
    a = _matrix_np(A, "svdvals", complex_ok=True)
    s = _svd_np(a, "svdvals", compute_uv=False) if a.size else \
        np.zeros(a.shape[:-2] + (builtins.min(a.shape[-2:]),), a.real.dtype)
    return _record(ops.linalg_svdvals, _result(s, A._dtype.to_real, out, "svdvals"), (A,))


def _uplo(UPLO, op):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.{op}: Expected UPLO argument to be 'L' or 'U', but got "
                           f"{UPLO}")
    return UPLO


def _into_pair(out, res, op):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"linalg.{op}: out must be a tuple of two tensors, got {out!r}")
    return type(res)(_into(out[0], res[0], op), _into(out[1], res[1], op))


def eigh(A, UPLO="L", *, out=None):
    """Eigenvalues (ascending) and orthonormal eigenvectors of symmetric (complex: Hermitian)
    matrices; only the ``UPLO`` ('L' or 'U') triangle is read. The eigenvalues are real."""
    a = _matrix_np(A, "eigh", square=True, complex_ok=True)
    w, v = np.linalg.eigh(a, UPLO=_uplo(UPLO, "eigh"))
    res = EighResult(_tensor(w, A._dtype.to_real), _tensor(v, A._dtype))
    res = _record(ops.linalg_eigh, res, (A,), {"UPLO": UPLO})
    return res if out is None else _into_pair(out, res, "eigh")


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues (ascending, real) of symmetric (complex: Hermitian) matrices."""
    a = _matrix_np(A, "eigvalsh", square=True, complex_ok=True)
    w = np.linalg.eigvalsh(a, UPLO=_uplo(UPLO, "eigvalsh"))
    return _record(ops.linalg_eigvalsh, _result(w, A._dtype.to_real, out, "eigvalsh"), (A,),
                   {"UPLO": UPLO})


def _complex_tensor(z, dt):
    """A complex NumPy array as a complex tensor: complex64 for float32/complex64 input,
    complex128 for float64/complex128."""
    return _tensor(z, dt.to_complex)


def _eig_np(A, op, vectors):
    a = _matrix_np(A, op, square=True, complex_ok=True)
    try:
        return np.linalg.eig(a) if vectors else np.linalg.eigvals(a)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"linalg.{op}: {e}") from None


def eig(A, *, out=None):
    """Eigenvalues and eigenvectors of general (non-symmetric) square matrices, real or complex.

    The results are complex tensors (complex64 for float32/complex64 input, complex128 for
    float64/complex128), as PyTorch's: eigenvalues ``(..., n)`` and eigenvectors ``(..., n, n)``;
    column ``k`` of the eigenvectors (unit norm, LAPACK's geev normalisation) belongs to
    eigenvalue ``k``. ``fiamma.view_as_real`` gives the (real, imag) pair layout.
    Differentiable as PyTorch's: the loss must not depend on the eigenvectors' phases, and the
    gradients are infinite for repeated eigenvalues.

    >>> import fiamma
    >>> w, v = fiamma.linalg.eig(fiamma.tensor([[0.0, -1.0], [1.0, 0.0]]))
    >>> w.tolist()  # a rotation by 90 degrees: eigenvalues +i and -i
    [1j, -1j]
    """
    w, v = _eig_np(A, "eig", True)
    res = EigResult(_complex_tensor(w, A._dtype), _complex_tensor(v, A._dtype))
    res = _record(ops.linalg_eig, res, (A,))
    if out is None:
        return res
    return EigResult(*_into_pair(out, res, "eig"))


def eigvals(A, *, out=None):
    """The eigenvalues of general square matrices, as a complex tensor (see :func:`eig`)."""
    res = _record(ops.linalg_eigvals, _complex_tensor(_eig_np(A, "eigvals", False), A._dtype), (A,))
    if out is None:
        return res
    return _into(out, res, "eigvals")


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The number of singular values above max(atol, rtol * s_max) (``tol``: the old name of
    atol), as int64."""
    a = _matrix_np(A, "matrix_rank", complex_ok=True)
    if tol is not None:
        atol, rtol = tol, 0.0 if rtol is None else rtol
    m, n = a.shape[-2:]
    if a.size == 0:
        r = np.zeros(a.shape[:-2], np.int64)
    else:
        s = np.abs(np.linalg.eigvalsh(a)) if hermitian else \
            _svd_np(a, "matrix_rank", compute_uv=False)
        if hermitian:
            s = -np.sort(-s, axis=-1)
        r = np.sum(s > _tol(s, m, n, atol, rtol, A._dtype, "matrix_rank"), axis=-1)
    return _result(r, D.int64, out, "matrix_rank")


# ---- products ------------------------------------------------------------------------------

def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices in the cheapest order (the first may be a row vector
    and the last a column vector, as 1-d tensors). Built from ``fiamma.matmul``."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"linalg.multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        _check(t, "multi_dot", f"tensors[{i}]")
        if t.ndim not in (1, 2) or (t.ndim == 1 and 0 < i < len(ts) - 1):
            raise RuntimeError(f"linalg.multi_dot(): tensor {i} must be 2D"
                               + (" or 1D" if i in (0, len(ts) - 1) else "")
                               + f" but got {t.ndim}D")
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError(f"linalg.multi_dot(): all tensors must have be the same dtype "
                               f"but tensor 0 is {ts[0]._dtype} and tensor {i} is {t._dtype}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(1)
    for i in range(len(ts) - 1):
        if ts[i]._shape[1] != ts[i + 1]._shape[0]:
            raise RuntimeError(f"linalg.multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(ts[i]._shape)} and {list(ts[i + 1]._shape)} cannot be "
                               "multiplied")
    dims = [ts[0]._shape[0]] + [t._shape[1] for t in ts]
    n = len(ts)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def prod(i, j):
        if i == j:
            return ts[i]
        k = split[i][j]
        return matmul(prod(i, k), prod(k + 1, j))

    r = prod(0, n - 1)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _into(out, r, "multi_dot") if out is not None else r


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along ``dim`` (broadcast over the other dims)."""
    _check(input, "cross", "input")
    _check(other, "cross", "other")
    from fiamma._ops._common import broadcast_shapes

    if len(input._shape) != len(other._shape):
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got "
                           f"{len(input._shape)} and {len(other._shape)}")

    shape = broadcast_shapes(input._shape, other._shape, op="linalg.cross")
    nd = len(shape)
    if not -nd <= dim < nd:
        raise IndexError(f"linalg.cross: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    d = dim % nd
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input._shape[d - nd] if len(input._shape) >= nd - d else 1} and "
                           f"{other._shape[d - nd] if len(other._shape) >= nd - d else 1}")
    dt = D.result_type(input, other)

    def arr(t):
        t = t.detach()
        t = t if t._dtype is dt else t.to(dt)
        return _arr(t.to(D.float32)) if dt is D.bfloat16 else _arr(t)

    a = np.broadcast_to(arr(input), shape)
    b = np.broadcast_to(arr(other), shape)
    r = np.cross(a, b, axis=d) if shape[d] else np.zeros(shape)
    return _record(ops.linalg_cross, _result(r, dt, out, "cross"), (input, other), {"dim": dim})


def vecdot(x, y, *, dim=-1, out=None):
    """The dot product of vectors along ``dim`` (broadcast): ``(x.conj() * y).sum(dim)`` (x is
    conjugated when complex, as PyTorch)."""
    _check(x, "vecdot", "x")
    _check(y, "vecdot", "y")
    from fiamma._ops.complex_ops import conj
    from fiamma._ops.elementwise import mul
    from fiamma._ops.reduce import sum as _sum

    return _sum(mul(conj(x), y), dim, out=out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices in A (``A.diagonal(offset, dim1, dim2)``)."""
    _check(A, "diagonal")
    nd = A.ndim
    if not (-nd <= dim1 < nd and -nd <= dim2 < nd):
        raise IndexError(f"linalg.diagonal: Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim1}, {dim2})")
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"linalg.diagonal: dim1 and dim2 cannot be equal, got {dim1}")
    n1, n2 = A._shape[d1], A._shape[d2]
    size = builtins.max(0, builtins.min(n1, n2 - offset) if offset >= 0 else
                        builtins.min(n1 + offset, n2))
    start = A._offset + (offset * A._stride[d2] if offset >= 0 else -offset * A._stride[d1])
    keep = [i for i in range(nd) if i not in (d1, d2)]
    shape = [A._shape[i] for i in keep] + [size]
    stride = [A._stride[i] for i in keep] + [A._stride[d1] + A._stride[d2]]
    return A.as_strided(shape, stride, start if size else A._offset)


# ---- LU factorisation ---------------------------------------------------------------------

LUFactorResult = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = collections.namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = collections.namedtuple("lu_unpack", ["P", "L", "U"])


def _constant_p(res):
    """(P, L, U) with P detached from the graph that recording gave it: the permutation is
    piecewise constant in A, so (as in PyTorch) it does not require grad."""
    P = res[0]
    if P.requires_grad and P.grad_fn is not None:
        return type(res)(P.detach(), *res[1:])
    return res


def _lu_np(a):
    """LU with partial pivoting (LAPACK getrf's algorithm and conventions) of a batch
    (..., m, n): (LU packed, pivots (..., k) int32 1-based, info (...) int32: the 1-based
    index of the first exactly zero pivot, 0 when none). Complex pivots by |re| + |im|, as
    LAPACK does."""
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    flat = np.array(_host(a).reshape(_flat_shape(a)), copy=True)
    b = flat.shape[0]
    piv = np.zeros((b, k), np.int32)
    info = np.zeros(b, np.int32)
    rows = np.arange(b)
    for j in range(k):
        col = flat[:, j:, j]
        size = np.abs(col.real) + np.abs(col.imag) if np.iscomplexobj(col) else np.abs(col)
        p = j + np.argmax(size, axis=1)
        piv[:, j] = p + 1
        swap = flat[rows, p].copy()
        flat[rows, p] = flat[:, j]
        flat[:, j] = swap
        d = flat[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        if j + 1 < m:
            scale = np.where(zero, 1, d)[:, None]
            flat[:, j + 1:, j] = np.where(zero[:, None], flat[:, j + 1:, j],
                                          flat[:, j + 1:, j] / scale)
            flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j, None] * flat[:, j, None, j + 1:]
    lead = a.shape[:-2]
    return flat.reshape(a.shape), piv.reshape(lead + (k,)), info.reshape(lead)


def _lu_input(A, op, pivot):
    if not pivot:
        raise RuntimeError(f"linalg.{op}: LU without pivoting is not implemented on the CPU")
    return _matrix_np(A, op, complex_ok=True)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``(LU, pivots, info)``: the LU factorisation with partial pivoting of A (..., m, n)
    packed as LAPACK's getrf (L unit lower below the diagonal, U on and above it), the 1-based
    int32 row interchanges, and info (int32, one per matrix: 0, or the 1-based index of the
    first zero pivot of U; no error unless ``check_errors``). Rectangular A is allowed.

    >>> import fiamma
    >>> LU, piv, info = fiamma.linalg.lu_factor_ex(fiamma.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv.tolist(), info.item()
    ([2, 2], 0)
    """
    a = _lu_input(A, "lu_factor_ex", pivot)
    lu, piv, info = _lu_np(a)
    if check_errors and info.any():
        _lu_singular("lu_factor_ex", info)
    res = LUFactorExResult(_tensor(lu, A._dtype), _tensor(piv, D.int32),
                           _tensor(info, D.int32))
    return _record(ops.linalg_lu_factor_ex, _lu_out(out, res, "lu_factor_ex"), (A,),
                   {"pivot": pivot})


def _lu_singular(op, info):
    flat = info.reshape(-1)
    i = int(np.flatnonzero(flat)[0])
    label = _batch_label(info.shape, i)
    j = int(flat[i])  # 1-based, as LAPACK's info and PyTorch's message
    raise LinAlgError(f"torch.linalg.{op}: {label}U[{j},{j}] is zero and using it on lu_solve "
                      "would result in a division by zero. If you still want to perform the "
                      "factorization, consider calling linalg.lu(A, pivot) or "
                      "linalg.lu_factor_ex(A, pivot)")


def _lu_out(out, res, op):
    if out is None:
        return res
    if not isinstance(out, (tuple, list)) or len(out) != len(res):
        raise TypeError(f"linalg.{op}: out must be a tuple of {len(res)} tensors")
    return type(res)(*(_into(o, r, op) for o, r in zip(out, res)))


def lu_factor(A, *, pivot=True, out=None):
    """``(LU, pivots)`` of :func:`lu_factor_ex`; a matrix whose U has a zero on its diagonal
    raises (PyTorch's error), as lu_solve could not use it.

    >>> import fiamma
    >>> LU, piv = fiamma.linalg.lu_factor(fiamma.tensor([[4.0, 3.0], [6.0, 3.0]]))
    >>> LU.tolist(), piv.tolist()
    ([[6.0, 3.0], [0.6666666865348816, 1.0]], [2, 2])
    """
    a = _lu_input(A, "lu_factor", pivot)
    lu, piv, info = _lu_np(a)
    if info.any():
        _lu_singular("lu_factor", info)
    res = LUFactorResult(_tensor(lu, A._dtype), _tensor(piv, D.int32))
    return _record(ops.linalg_lu_factor, _lu_out(out, res, "lu_factor"), (A,), {"pivot": pivot})


def _perm_np(piv, m):
    """The row order perm (..., m) that the interchanges ``piv`` (1-based) apply: rows
    perm[i] of A are row i of L @ U."""
    lead, k = piv.shape[:-1], piv.shape[-1]
    flat = piv.reshape(math.prod(lead), k).astype(np.int64) - 1
    perm = np.broadcast_to(np.arange(m), (flat.shape[0], m)).copy()
    rows = np.arange(flat.shape[0])
    for j in range(k):
        p = flat[:, j]
        tmp = perm[rows, p].copy()
        perm[rows, p] = perm[:, j]
        perm[:, j] = tmp
    return perm.reshape(lead + (m,))


def _check_pivots(piv, m, op):
    if piv.size and (piv.min() < 1 or piv.max() > m):
        raise RuntimeError(f"{op}: pivots must be 1-based row indices in [1, {m}], got values "
                           f"from {int(piv.min())} to {int(piv.max())}")


def _unpack_np(lu, piv, want_lu, want_p):
    m, n = lu.shape[-2:]
    k = builtins.min(m, n)
    L = U = P = None
    if want_lu:
        L = np.tril(lu[..., :, :k], -1)
        idx = np.arange(k)
        L[..., idx, idx] = 1
        U = np.triu(lu[..., :k, :])
    if want_p:
        perm = _perm_np(piv, m)
        P = np.zeros(lu.shape[:-2] + (m, m), lu.dtype)
        np.put_along_axis(P, perm[..., None], 1, axis=-1)  # P[i, perm[i]] = 1: P A = L U
        P = np.swapaxes(P, -1, -2)  # its transpose: A = P @ L @ U
    return P, L, U


def lu(A, *, pivot=True, out=None):
    """``(P, L, U)`` with A = P @ L @ U: P a permutation matrix, L (..., m, k) unit lower
    triangular, U (..., k, n) upper triangular, k = min(m, n). Singular A is fine.

    >>> import fiamma
    >>> A = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> P, L, U = fiamma.linalg.lu(A)
    >>> (P @ L @ U).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    a = _lu_input(A, "lu", pivot)
    lu_, piv, _ = _lu_np(a)
    P, L, U = _unpack_np(lu_, piv, True, True)
    res = LUResult(_tensor(P, A._dtype), _tensor(L, A._dtype), _tensor(U, A._dtype))
    return _constant_p(_record(ops.linalg_lu, _lu_out(out, res, "lu"), (A,), {"pivot": pivot}))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """The solution X of A X = B (``left``; X A = B otherwise; A^H in place of A with
    ``adjoint``) from A's :func:`lu_factor` result, batched with broadcasting."""
    lu_ = _matrix_np(LU, "lu_solve", square=True, name="LU", complex_ok=True)
    b = _matrix_np(B, "lu_solve", name="B", complex_ok=True)
    if LU._dtype is not B._dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but "
                           f"found LU of type {_NAMES[LU._dtype]} and B of type "
                           f"{_NAMES[B._dtype]}")
    if not isinstance(pivots, Tensor) or pivots._dtype is not D.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be an int32 tensor, got "
                           f"{getattr(pivots, 'dtype', type(pivots).__name__)}")
    n = lu_.shape[-1]
    piv = _host(_arr(pivots)) if pivots._storage.device is not CPU else pivots.numpy()
    if piv.shape[:-1] != lu_.shape[:-2] or piv.shape[-1] != n:
        raise RuntimeError(f"linalg.lu_solve: pivots of shape {list(piv.shape)} do not match LU "
                           f"of shape {list(lu_.shape)} (expected {list(lu_.shape[:-1])})")
    _check_pivots(piv, n, "linalg.lu_solve")
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: LU is {n} x {n} but B has shape {list(b.shape)} "
                           f"({'rows' if left else 'columns'} must be {n})")
    P, L, U = _unpack_np(_host(lu_), piv, True, True)
    A = P @ L @ U
    if adjoint:
        A = np.conj(np.swapaxes(A, -1, -2))
    if left:
        x = np.linalg.solve(A, _host(b))
    else:
        x = np.swapaxes(np.linalg.solve(np.swapaxes(A, -1, -2), np.swapaxes(_host(b), -1, -2)),
                        -1, -2)
    return _record(ops.linalg_lu_solve,
                   _result(x.astype(_host(b).dtype, copy=False), B._dtype, out, "lu_solve"),
                   (LU, pivots, B), {"left": left, "adjoint": adjoint})


def _lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``(P, L, U)`` from a packed LU and its pivots (:func:`lu_factor`); the parts not
    asked for (``unpack_data`` False: L and U; ``unpack_pivots`` False: P) are empty
    tensors."""
    lu_ = _matrix_np(LU_data, "lu_unpack", name="LU_data", complex_ok=True)
    if not isinstance(LU_pivots, Tensor) or LU_pivots._dtype is not D.int32:
        raise RuntimeError("lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "torch.int32 dtype, got "
                           f"{getattr(LU_pivots, 'dtype', type(LU_pivots).__name__)}")
    m, n = lu_.shape[-2:]
    piv = LU_pivots.numpy() if LU_pivots._storage.device is CPU else _host(_arr(LU_pivots))
    if piv.shape != lu_.shape[:-2] + (builtins.min(m, n),):
        raise RuntimeError(f"lu_unpack: LU_pivots of shape {list(piv.shape)} do not match "
                           f"LU_data of shape {list(lu_.shape)}")
    _check_pivots(piv, m, "lu_unpack")
    P, L, U = _unpack_np(_host(lu_), piv, unpack_data, unpack_pivots)
    empty = np.zeros(0, _host(lu_).dtype)
    dt = LU_data._dtype
    res = LUUnpackResult(_tensor(empty if P is None else P, dt),
                         _tensor(empty if L is None else L, dt),
                         _tensor(empty if U is None else U, dt))
    res = _lu_out(out, res, "lu_unpack")
    if not unpack_data:
        return res
    return _constant_p(_record(ops.lu_unpack, res, (LU_data, LU_pivots),
                               {"unpack_data": unpack_data, "unpack_pivots": unpack_pivots}))


# every public function computes on its input's device
for _name in __all__:
    _f = globals()[_name]
    if callable(_f) and not isinstance(_f, type) and _name != "matmul":
        globals()[_name] = _on_device(_f)
del _name, _f
_lu_unpack = _on_device(_lu_unpack)  # torch.lu_unpack (top level only: fiamma.lu_unpack)


# composed of differentiable ops (fiamma._ops.linalg_extra)
from fiamma._ops.linalg_extra import (  # noqa: E402
    householder_product,
    matrix_exp,
    tensorinv,
    tensorsolve,
    vander,
)

__all__ += ["householder_product", "matrix_exp", "tensorinv", "tensorsolve", "vander"]
from fiamma._ops.ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: E402

__all__ += ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

from fiamma import _torch_function  # noqa: E402

_torch_function.register_namespace(__name__)  # __torch_function__ (once it is active)
