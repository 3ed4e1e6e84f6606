"""PyTorch names that real scripts use and that are composed from fiamma's own ops (so autograd
records them with no extra formulas): constants, the process-wide switches (determinism,
matmul precision, default device), the old linear-algebra names (``torch.det``,
``torch.inverse``, ``torch.svd``, ...), a few elementwise and statistics ops, the ``*_copy``
and ``*_scatter`` forms of the view ops, and predicates.

Everything here is public at ``fiamma.<name>`` (and as a Tensor method where PyTorch has one).
"""

import builtins
import importlib
import math
from collections import namedtuple

import numpy as np

from fiamma import _dtype as D
from fiamma._ops.complex_ops import (  # noqa: F401  (re-exported: PyTorch's top-level names)
    angle,
    conj,
    conj_physical,
    conj_physical_,
    imag,
    is_complex,
    is_conj,
    real,
    resolve_conj,
    resolve_neg,
    sgn,
)
from fiamma._ops.einsum import _chebyshev
from fiamma._ops.matmul import matmul
from fiamma._tensor import Tensor, wrap_dim as _wrap_dim

__all__ = [
    "pi", "e", "inf", "nan", "newaxis",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "set_default_device", "get_default_device",
    "set_warn_always", "is_warn_always_enabled", "compile",
    "det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "svd", "qr", "cholesky",
    "chain_matmul", "lu", "lu_unpack", "lu_solve", "svd_lowrank", "pca_lowrank",
    "geqrf", "ormqr", "eig", "symeig", "lstsq", "solve", "matrix_rank",
    "deg2rad", "rad2deg", "deg2rad_", "rad2deg_", "heaviside", "ldexp", "gcd", "lcm",
    "isin", "isreal", "logcumsumexp", "quantile", "nanquantile", "cov", "corrcoef",
    "trapezoid", "trapz", "cumulative_trapezoid", "gradient", "dist", "renorm", "unravel_index",
    "cosine_similarity", "pairwise_distance", "pdist",
    "fill", "fill_", "zero_", "is_complex", "is_conj", "is_neg", "is_nonzero", "is_same_size",
    "is_distributed",
    "is_signed", "is_storage", "is_inference", "typename", "get_device",
    "conj", "conj_physical", "resolve_conj", "resolve_neg", "real", "angle",
    "split_with_sizes", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
    "alias_copy", "as_strided_copy", "detach_copy", "diagonal_copy", "expand_copy",
    "permute_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy",
    "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
    "unsqueeze_copy", "view_copy",
    "diagonal_scatter", "select_scatter", "slice_scatter", "as_strided_scatter",
    "frombuffer", "histogram", "histogramdd", "igamma", "igammac", "gcd_", "lcm_", "ldexp_",
    "frexp", "nextafter", "detach_", "resize_as_", "as_strided_",
    "get_num_interop_threads", "set_num_interop_threads", "sym_min", "sym_max",
    "sym_float", "sym_int", "sym_not", "sym_ite", "sym_sqrt", "sym_sum", "sym_fresh_size",
    "SymInt", "SymFloat", "SymBool",
    # PyTorch's private run-time checks that library code calls
    "_check", "_check_with", "_check_index", "_check_value", "_check_type",
    "_check_not_implemented", "_check_is_size", "_check_tensor_all", "_check_tensor_all_with",
    "_assert_async", "_shape_as_tensor",
    "nonzero_static", "addmv_", "frobenius_norm", "nuclear_norm", "empty_permuted",
    "hash_tensor", "get_device_module", "while_loop", "fork", "wait", "sym_constrain_range",
    "sym_constrain_range_for_size", "init_num_threads", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "batch_norm_update_stats", "prelu", "has_lapack",
    "has_mkl", "has_openmp", "has_spectral", "is_vulkan_available", "set_flush_denormal",
    "cudnn_is_acceptable",
    "index_reduce", "to_dlpack",
]

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None


# PyTorch's named results (torch.return_types.*)
_SVD = namedtuple("svd", ["U", "S", "V"])
_Histogram = namedtuple("histogram", ["hist", "bin_edges"])
_HistogramDD = namedtuple("histogramdd", ["hist", "bin_edges"])
_Frexp = namedtuple("frexp", ["mantissa", "exponent"])
_Geqrf = namedtuple("geqrf", ["a", "tau"])


def _F():
    import fiamma

    return fiamma


# ---- process-wide switches ------------------------------------------------------------------

class _Flags:
    deterministic = False
    warn_only = False
    matmul_precision = "highest"
    warn_always = False


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Ask for deterministic algorithms. fiamma's CPU kernels are all deterministic (same inputs,
    same threads: same bits), so this records the setting and changes no result.

    >>> import fiamma
    >>> fiamma.use_deterministic_algorithms(True); fiamma.are_deterministic_algorithms_enabled()
    True
    >>> fiamma.use_deterministic_algorithms(False)
    """
    if not isinstance(mode, builtins.bool):
        raise TypeError(f"use_deterministic_algorithms: expected a bool, got "
                        f"{type(mode).__name__}")
    _Flags.deterministic = mode
    _Flags.warn_only = builtins.bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _Flags.deterministic


def is_deterministic_algorithms_warn_only_enabled():
    return _Flags.warn_only


def set_deterministic_debug_mode(debug_mode):
    """0/'default', 1/'warn', 2/'error', as PyTorch (sets use_deterministic_algorithms)."""
    modes = {"default": 0, "warn": 1, "error": 2}
    m = modes.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if m not in (0, 1, 2):
        raise RuntimeError(f"set_deterministic_debug_mode: invalid mode {debug_mode!r}, expected "
                           "one of 0, 1, 2, 'default', 'warn', 'error'")
    use_deterministic_algorithms(m != 0, warn_only=m == 1)


def get_deterministic_debug_mode():
    if not _Flags.deterministic:
        return 0
    return 1 if _Flags.warn_only else 2


def set_float32_matmul_precision(precision):
    """Record the float32 matmul precision ('highest', 'high', 'medium'). fiamma's CPU matmul
    always computes in float32 ('highest'); lower settings are accepted and change nothing
    (PyTorch's CPU does the same without TF32/bfloat16 hardware paths)."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: invalid precision {precision!r}, "
                           "expected 'highest', 'high' or 'medium'")
    _Flags.matmul_precision = precision


def get_float32_matmul_precision():
    return _Flags.matmul_precision


def set_default_device(device):
    """Set the device new tensors are made on when a creation function is given none (also
    what ``with fiamma.device(...)`` does for its block). ``None`` or 'cpu' restores the CPU.
    A device without a backend here (cuda without a GPU) raises, saying why.

    >>> import fiamma
    >>> fiamma.set_default_device("meta")
    >>> fiamma.zeros(2).device
    device(type='meta')
    >>> fiamma.set_default_device(None)
    """
    from fiamma import _backend
    from fiamma._storage import _DEFAULT_DEVICE, device as _device

    if device is None:
        _DEFAULT_DEVICE.dev = None
        return
    d = _device(device)
    if d.type == "cpu":
        _DEFAULT_DEVICE.dev = None
        return
    _backend.backend_for(d, "set_default_device")  # raises naming why it is not usable
    _DEFAULT_DEVICE.dev = d


def get_default_device():
    """The device new tensors are made on when none is given (the CPU unless
    :func:`set_default_device` or a ``with fiamma.device(...)`` block says otherwise)."""
    from fiamma._storage import _DEFAULT_DEVICE, CPU

    return _DEFAULT_DEVICE.dev or CPU


def set_warn_always(b):
    _Flags.warn_always = builtins.bool(b)


def is_warn_always_enabled():
    return _Flags.warn_always


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """PyTorch's ``torch.compile`` entry point. fiamma runs eagerly: with a named backend
    (``"inductor"``, ``"eager"``, ...) the module or function comes back unchanged (results
    are those of eager mode, as with ``backend='eager'``). A callable ``backend`` is called
    as PyTorch calls one, ``backend(gm, example_inputs)`` with a ``fiamma.fx.GraphModule``
    of the captured code, and what it returns runs the calls (see ``fiamma.fx._compile``;
    needs fiamma-nn). Usable as ``compile(fn)``, ``compile(**opts)(fn)`` and ``@compile``.

    >>> import fiamma
    >>> f = fiamma.compile(lambda x: x * 2)
    >>> f(fiamma.ones(2)).tolist()
    [2.0, 2.0]
    """
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not callable(model):
        raise RuntimeError(f"compile: expected a callable (module or function), got "
                           f"{type(model).__name__}")
    if disable or backend is None or isinstance(backend, str):
        return model
    if not callable(backend):
        raise TypeError(f"compile: backend must be a name or a callable, got "
                        f"{type(backend).__name__}")
    try:
        from fiamma.fx._compile import compile_with_backend
    except ImportError as e:
        raise RuntimeError("compile: a callable backend is given an FX graph, which needs "
                           "fiamma.fx (the fiamma-nn package)") from e
    return compile_with_backend(model, backend)


# ---- old linear-algebra names ----------------------------------------------------------------

def _L():
    import fiamma.linalg

    return fiamma.linalg


def det(input):
    """``linalg.det``."""
    return _L().det(input)


def slogdet(input):
    """``linalg.slogdet``: (sign, log|det|)."""
    return _L().slogdet(input)


def logdet(input):
    """log(det(input)): nan for a negative determinant, -inf for a singular matrix.

    >>> import fiamma
    >>> round(fiamma.logdet(fiamma.tensor([[2.0, 0.0], [0.0, 3.0]])).item(), 4)
    1.7918
    """
    sign, logabs = _L().slogdet(input)
    f = _F()
    return f.where(sign < 0, f.full_like(logabs, math.nan), logabs)


def inverse(input):
    """``linalg.inv``."""
    return _L().inv(input)


def pinverse(input, rcond=1e-15):
    """``linalg.pinv`` with PyTorch's old ``rcond`` (relative cut-off of singular values)."""
    return _L().pinv(input, rtol=rcond)


def matrix_power(input, n):
    """``linalg.matrix_power``."""
    return _L().matrix_power(input, n)


def svd(input, some=True, compute_uv=True):
    """PyTorch's old ``torch.svd``: (U, S, V) with V (not V^H); ``some=False`` gives the full
    U and V. Without ``compute_uv``, U and V are zeros (PyTorch's shapes).

    >>> import fiamma
    >>> u, s, v = fiamma.svd(fiamma.tensor([[3.0, 0.0], [0.0, 2.0]]))
    >>> s.tolist()
    [3.0, 2.0]
    """
    L = _L()
    if not compute_uv:
        s = L.svdvals(input)
        m, n = input.shape[-2], input.shape[-1]
        f = _F()
        bs = tuple(input.shape[:-2])
        return _SVD(f.zeros(*bs, m, m, dtype=input.dtype), s,
                    f.zeros(*bs, n, n, dtype=input.dtype))
    u, s, vh = L.svd(input, full_matrices=not some)
    return _SVD(u, s, vh.mT)


def qr(input, some=True):
    """PyTorch's old ``torch.qr``: ``linalg.qr`` with mode 'reduced' (``some``) or
    'complete'."""
    return _L().qr(input, mode="reduced" if some else "complete")


def geqrf(input, *, out=None):
    """LAPACK's geqrf (``torch.geqrf``): ``(a, tau)``, the QR factorisation of ``input``
    (``(*, m, n)``) packed as Householder reflectors: ``R`` is the upper triangle of ``a``,
    ``Q = H_1 ... H_k`` with ``H_i = I - tau_i v_i v_i^H`` and ``v_i`` below the diagonal of
    column ``i`` (unit leading entry); ``linalg.householder_product(a, tau)`` gives ``Q``.
    No gradient (PyTorch has none either).

    >>> import fiamma
    >>> a, tau = fiamma.geqrf(fiamma.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> [round(v, 4) for v in a[0].tolist()], round(tau[0].item(), 4)
    ([-5.0, -2.2], 1.6)
    """
    f = _F()
    if input.dim() < 2:
        raise RuntimeError(f"geqrf: input must have at least 2 dimensions, got {input.dim()}")
    if input.dtype not in (D.float32, D.float64, D.complex64, D.complex128):
        raise RuntimeError(f"geqrf: expected a float, double, cfloat or cdouble tensor, got "
                           f"{input.dtype}")
    dev = input.device
    if dev.type == "meta":  # shape-only
        k = min(input.shape[-2], input.shape[-1])
        res = _Geqrf(f.empty(input.shape, dtype=input.dtype, device=dev),
                     f.empty(tuple(input.shape[:-2]) + (k,), dtype=input.dtype, device=dev))
        if out is not None:
            for o, r in zip(out, res):
                o.resize_(r.shape)
            return out
        return res
    x = input.detach().cpu().numpy()  # LAPACK on the host (any device's tensor comes back)
    m, n = x.shape[-2:]
    if x.size == 0:
        h = np.zeros(x.shape, x.dtype)
        tau = np.zeros(x.shape[:-2] + (min(m, n),), x.dtype)
    else:
        h, tau = np.linalg.qr(x, mode="raw")  # h: the packed factor, transposed
        h = np.swapaxes(h, -1, -2)
    res = _Geqrf(f.from_numpy(np.ascontiguousarray(h).astype(x.dtype)).to(dev),
                 f.from_numpy(np.ascontiguousarray(tau).astype(x.dtype)).to(dev))
    if out is not None:
        for o, r in zip(out, res):
            o.resize_(r.shape).copy_(r)
        return out
    return res


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):
    """``op(Q) @ other`` (``left``) or ``other @ op(Q)`` for ``Q`` given as Householder
    reflectors ``(input, tau)`` (what ``geqrf`` returns); ``op`` is the conjugate transpose
    when ``transpose`` (``torch.ormqr``). ``Q`` is square (``m x m`` with ``left``, else
    ``n x n`` for ``other`` of shape ``(*, m, n)``); differentiable through
    ``linalg.householder_product``.

    >>> import fiamma
    >>> A = fiamma.tensor([[3.0, 1.0], [4.0, 2.0]])
    >>> a, tau = fiamma.geqrf(A)
    >>> R = fiamma.ormqr(a, tau, A, transpose=True)   # Q^T A = R
    >>> [[round(v, 4) + 0.0 for v in row] for row in R.tolist()]
    [[-5.0, -2.2], [0.0, 0.4]]
    """
    f = _F()
    if input.dim() < 2 or other.dim() < 2 or tau.dim() < 1:
        raise RuntimeError(f"ormqr: expected input and other of at least 2 dimensions and tau "
                           f"of at least 1, got {input.dim()}, {other.dim()} and {tau.dim()}")
    size = other.shape[-2] if left else other.shape[-1]
    k = tau.shape[-1]
    if input.shape[-2] != size:
        raise RuntimeError(f"ormqr: input.shape[-2] must equal other.shape["
                           f"{-2 if left else -1}] ({size}), got {input.shape[-2]}")
    if k > input.shape[-1] or k > size:
        raise RuntimeError(f"ormqr: tau.shape[-1] ({k}) must be at most input.shape[-1] "
                           f"({input.shape[-1]}) and {size}")
    if input.dtype is not other.dtype or tau.dtype is not input.dtype:
        raise RuntimeError(f"ormqr: expected input, tau and other of one dtype, got "
                           f"{input.dtype}, {tau.dtype} and {other.dtype}")
    vs = input[..., :k]
    if k < size:  # pad the reflectors with identities (tau 0) for the square Q
        vs = f.cat([vs, f.zeros(*vs.shape[:-1], size - k, dtype=vs.dtype, device=vs.device)], -1)
        tau = f.cat([tau, f.zeros(*tau.shape[:-1], size - k, dtype=tau.dtype,
                                   device=tau.device)], -1)
    q = _L().householder_product(vs, tau)
    if transpose:
        q = q.mH
    res = q @ other if left else other @ q
    if out is not None:
        out.resize_(res.shape).copy_(res)
        return out
    return res


def _removed(name, message):
    def removed(*args, **kwargs):
        raise RuntimeError(f"{name}: torch.{name} was deprecated in PyTorch 1.9 and is "
                           f"removed (it raises there too); {message}")
    removed.__name__ = name
    removed.__doc__ = (f"Removed from PyTorch (it raises there too): {message}")
    return removed


eig = _removed("eig", "use fiamma.linalg.eig (complex eigenvalues and eigenvectors).")
symeig = _removed("symeig", "use fiamma.linalg.eigh (eigenvalues in ascending order; it reads "
                            "the lower triangle by default, symeig read the upper).")
lstsq = _removed("lstsq", "use fiamma.linalg.lstsq(A, B) (note the reversed arguments; it "
                          "returns a named tuple without the QR factorisation).")
solve = _removed("solve", "use fiamma.linalg.solve(A, B) (note the reversed arguments; it "
                          "does not return the LU factorisation).")
matrix_rank = _removed("matrix_rank", "use fiamma.linalg.matrix_rank (its 'hermitian' "
                                      "argument was 'symmetric' here).")


def cholesky(input, upper=False):
    """PyTorch's old ``torch.cholesky`` (lower factor unless ``upper``)."""
    return _L().cholesky(input, upper=upper)


def lu(A, pivot=True, get_infos=False, out=None):
    """PyTorch's old ``torch.lu`` (``torch.functional.lu``): ``(LU, pivots)`` of
    ``linalg.lu_factor_ex``, with ``get_infos`` also its info tensor.

    >>> import fiamma
    >>> LU, piv = fiamma.lu(fiamma.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> piv.tolist()
    [2, 2]
    """
    res = _L().lu_factor_ex(A, pivot=pivot, out=out)
    return tuple(res) if get_infos else (res[0], res[1])


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``(P, L, U)`` with A = P @ L @ U from a packed LU factorisation and its pivots
    (``linalg.lu_factor``); the parts not asked for (``unpack_data`` False: L and U;
    ``unpack_pivots`` False: P) are empty tensors."""
    return _L()._lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, out=out)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """PyTorch's old ``torch.lu_solve(b, LU_data, LU_pivots)``: ``linalg.lu_solve(LU_data,
    LU_pivots, b)``."""
    return _L().lu_solve(LU_data, LU_pivots, b, out=out)


def chain_matmul(*matrices):
    """``linalg.multi_dot`` of the arguments."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if len(matrices) == 1:
        return matrices[0].clone()
    return _L().multi_dot(list(matrices))


# ---- elementwise and statistics -----------------------------------------------------------------

def _float_of(x):
    """x as a floating (or complex) tensor: integers and bools become the default float."""
    return x if x.dtype.is_floating_point or x.dtype.is_complex else \
        x.to(D.get_default_dtype())


def _no_complex(x, op):
    if x.dtype.is_complex:
        raise RuntimeError(f"{op} is not supported for complex tensors (as in PyTorch)")


def deg2rad(input):
    """Degrees to radians (integers become the default float dtype)."""
    _no_complex(input, "deg2rad")
    return _float_of(input) * (math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees."""
    _no_complex(input, "rad2deg")
    return _float_of(input) * (180.0 / math.pi)


def deg2rad_(input):
    return input.mul_(math.pi / 180.0)


def rad2deg_(input):
    return input.mul_(180.0 / math.pi)


def heaviside(input, values):
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0 (nan stays nan).

    >>> import fiamma
    >>> fiamma.heaviside(fiamma.tensor([-1.0, 0.0, 2.0]), fiamma.tensor(0.5)).tolist()
    [0.0, 0.5, 1.0]
    """
    f = _F()
    if not isinstance(values, Tensor):
        raise TypeError("heaviside: values must be a Tensor")
    dt = D.promote_types(input.dtype, values.dtype)
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different dtypes "
                           f"(got {input.dtype} and {values.dtype})")
    one = f.ones((), dtype=dt)
    zero = f.zeros((), dtype=dt)
    out = f.where(input == 0, values.to(dt), f.where(input > 0, one, zero))
    return f.where(f.isnan(input), input.to(dt), out) if dt.is_floating_point else out


def ldexp(input, other):
    """input * 2 ** other; the result has the operands' promoted dtype (the default float
    dtype when that is an integer or bool)."""
    f = _F()
    dt = D.result_type(input, other)
    if dt._kind < 2:
        dt = D.get_default_dtype()
    # 2 ** other in at least float32 (a bfloat16 power of two of a fractional exponent would
    # round before the product), then the result dtype
    hp = D.promote_types(dt, D.float32)
    x = input.to(hp) if isinstance(input, Tensor) else input
    e = other.to(hp) if isinstance(other, Tensor) else other
    res = x * f.pow(2.0, e)
    return res if res.dtype is dt else res.to(dt)


def _np_binary_int(name, fn, a, b):
    f = _F()
    a = a if isinstance(a, Tensor) else f.tensor(a)
    b = b if isinstance(b, Tensor) else f.tensor(b)
    dt = D.result_type(a, b)  # a 0-d operand promotes as in the other binary ops
    if dt._kind != 1:  # bool with an integer promotes to it; bool with bool has no gcd
        raise RuntimeError(f"{name}: expected integer tensors, got {a.dtype} and {b.dtype}")
    # np.array, not np.ascontiguousarray: that one makes a 0-d result 1-d
    return f.from_numpy(np.array(fn(a.numpy(), b.numpy()), order="C")).to(dt)


def gcd(input, other):
    """Elementwise greatest common divisor of integer tensors (gcd(0, 0) = 0).

    >>> import fiamma
    >>> fiamma.gcd(fiamma.tensor([12, -9, 0]), fiamma.tensor([8, 6, 5])).tolist()
    [4, 3, 5]
    """
    return _np_binary_int("gcd", np.gcd, input, other)


def lcm(input, other):
    """Elementwise least common multiple of integer tensors."""
    return _np_binary_int("lcm", np.lcm, input, other)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Boolean tensor of ``elements``' shape: which elements occur in ``test_elements``.

    >>> import fiamma
    >>> fiamma.isin(fiamma.tensor([1, 2, 3]), fiamma.tensor([2, 5])).tolist()
    [False, True, False]
    """
    f = _F()

    def arr(x):
        if not isinstance(x, Tensor):
            return np.asarray(x)
        x = x.detach().cpu()
        return (x.float() if x.dtype is D.bfloat16 else x).numpy()  # bfloat16 exact in float32

    a, b = arr(elements), arr(test_elements)
    # np.require keeps a 0-d result 0-d (np.ascontiguousarray makes it 1-d)
    return f.from_numpy(np.require(
        np.isin(a, b, assume_unique=assume_unique, invert=invert), requirements="C"))


def isreal(input):
    """True where the element is real: everywhere for a real dtype, where the imaginary part
    is 0 for a complex one."""
    if input.is_complex():
        return input.imag == 0
    return _F().ones(input.shape, dtype=D.bool)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input), dim)), computed without overflow (shifted by the max along dim).

    >>> import fiamma
    >>> [round(v, 4) for v in fiamma.logcumsumexp(fiamma.tensor([0.0, 0.0]), 0).tolist()]
    [0.0, 0.6931]
    """
    f = _F()
    x = input if input.dtype.is_complex else _float_of(input)
    if x.ndim == 0 or x.numel() == 0:
        x.size(dim) if x.ndim else _wrap_dim(dim, 0, "logcumsumexp")  # checked here too
        return x.clone()
    m = (x.detach().real if x.dtype.is_complex else x.detach()).amax(dim, keepdim=True)
    m = f.where(f.isfinite(m), m, f.zeros_like(m))
    return f.log(f.cumsum(f.exp(x - m), dim)) + m


_INTERP = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, op, ignore_nan):
    f = _F()
    if interpolation not in _INTERP:
        raise ValueError(f"{op}: interpolation must be one of {_INTERP}, got "
                         f"{interpolation!r}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: input tensor must be either float or double dtype, got "
                           f"{input.dtype}")
    scalar_q = not isinstance(q, Tensor)
    if not scalar_q and q.dtype is not input.dtype:
        raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor (got "
                           f"{q.dtype} and {input.dtype})")
    qt = f.tensor(q, dtype=input.dtype) if scalar_q else q
    if qt.ndim > 1:
        raise RuntimeError(f"{op}: q must be a scalar or 1D tensor, got {qt.ndim}D")
    qv = qt.reshape(-1)
    if qv.numel() and builtins.bool(((qv < 0) | (qv > 1)).any()):
        raise RuntimeError(f"{op}: q values must be in the range [0, 1]")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else dim % builtins.max(x.ndim, 1)
    if x.ndim == 0:
        x = x.reshape(1)
    s = f.sort(x, dim=d).values  # nan sorts last
    n = x.shape[d]
    if ignore_nan:
        cnt = (~f.isnan(x)).sum(d, keepdim=True)
    else:
        cnt = f.full_like(x.sum(d, keepdim=True), n, dtype=D.int64)
    last = (cnt - 1).clamp(min=0).to(input.dtype)
    # a NaN makes the result NaN by picking it (PyTorch's ranks: the last sorted element, where
    # NaN sorts; with ignore_nan and no number at all, the first), so the gradient reaches it
    nan_rank = None if ignore_nan else f.isnan(s).any(d, keepdim=True)
    outs = []
    # a q tensor that requires grad enters as a tensor: the linear interpolation's weight
    # (pos - floor(pos)) carries its gradient, (b - a) * (size - 1), as PyTorch's
    q_grad = not scalar_q and qv.requires_grad
    for i, qi in enumerate(qv.tolist()):
        pos = last * (qv[i] if q_grad else qi)
        if nan_rank is not None:
            pos = f.where(nan_rank, builtins.float(n - 1), pos)
        lo = pos.floor()
        hi = pos.ceil()
        if interpolation == "lower":
            pos2 = lo
        elif interpolation == "higher":
            pos2 = hi
        elif interpolation == "nearest":
            pos2 = pos.round()  # half to even, as PyTorch
        else:
            pos2 = None
        if pos2 is not None:
            r = f.take_along_dim(s, pos2.long(), d)
        else:
            a = f.take_along_dim(s, lo.long(), d)
            b = f.take_along_dim(s, hi.long(), d)
            r = a + (b - a) * (0.5 if interpolation == "midpoint" else pos - lo)
        if not keepdim or not input.ndim:  # a 0-d input keeps its 0 dims (as PyTorch)
            r = r.squeeze(d)
        elif dim is None:
            r = r.reshape((1,) * input.ndim)
        outs.append(r)
    return outs[0] if scalar_q else f.stack(outs)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The ``q``-th quantiles of ``input`` (over all elements, or along ``dim``); a nan in a
    slice makes that result nan. ``q`` a tensor stacks the results on a new first dim.

    >>> import fiamma
    >>> fiamma.quantile(fiamma.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
    2.5
    """
    r = _quantile(input, q, dim, keepdim, interpolation, "quantile", False)
    return r if out is None else out.copy_(r)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """``quantile`` ignoring nans (a slice of only nans gives nan)."""
    r = _quantile(input, q, dim, keepdim, interpolation, "nanquantile", True)
    return r if out is None else out.copy_(r)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (observations in the columns).

    >>> import fiamma
    >>> fiamma.cov(fiamma.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    f = _F()
    if input.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    if input.dtype is D.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = _float_of(input)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    n = x.shape[1]
    # PyTorch's order of operations and dtypes (the weights are not cast: float64 weights give
    # a float64 result; the weights multiply the right-hand factor of the final product)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.sum(1, keepdim=True) / n
        norm = f.tensor(n - correction, dtype=x.dtype.to_real)
    else:
        wsum = w.sum()
        avg = (x * w).sum(1, keepdim=True) / wsum
        if aweights is not None and correction != 0:
            norm = wsum - correction * (w * aweights).sum() / wsum
        else:
            norm = wsum - correction
    if bool(norm <= 0):
        import warnings

        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        norm = f.clamp(norm, min=0)
    xm = x - avg
    c = (xm @ ((xm * w) if w is not None else xm).mH) / norm
    return c.squeeze()  # one variable: a 0-d result, whatever the input's rank (PyTorch)


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input`` (clipped to [-1, 1])."""
    f = _F()
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = f.diagonal(c)
    if c.dtype.is_complex:  # the variances are real; parts clipped to [-1, 1] (PyTorch)
        sd = f.sqrt(d.real)
        c = c / sd.reshape(-1, 1) / sd.reshape(1, -1)
        return f.complex(c.real.clamp(-1, 1), c.imag.clamp(-1, 1))
    sd = f.sqrt(d)
    c = c / sd.reshape(-1, 1) / sd.reshape(1, -1)
    return c.clamp(-1, 1)


def _dx_and_y(y, x, dx, dim, op):
    f = _F()
    if x is not None and dx is not None:
        raise RuntimeError(f"{op}: cannot pass both x and dx")
    y = _float_of(y)
    n = y.shape[dim]
    a = y.narrow(dim, 0, builtins.max(n - 1, 0))
    b = y.narrow(dim, 1, builtins.max(n - 1, 0)) if n else a
    if x is not None:
        if not isinstance(x, Tensor):
            x = f.tensor(x, dtype=y.dtype)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[dim] = x.shape[0]
            x = x.reshape(shape)
        xn = x.shape[dim]
        dxs = x.narrow(dim, 1, builtins.max(xn - 1, 0)) - x.narrow(dim, 0, builtins.max(xn - 1, 0))
        return (a + b) * dxs / 2
    return (a + b) * ((1.0 if dx is None else dx) / 2)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """Integral of ``y`` along ``dim`` by the trapezoid rule, with sample points ``x`` or
    spacing ``dx`` (default 1).

    >>> import fiamma
    >>> fiamma.trapezoid(fiamma.tensor([1.0, 2.0, 3.0])).item()
    4.0
    """
    return _dx_and_y(y, x, dx, dim, "trapezoid").sum(dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of ``trapezoid``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoid integral along ``dim`` (one element fewer than ``y``)."""
    return _dx_and_y(y, x, dx, dim, "cumulative_trapezoid").cumsum(dim)


def _gradient_1d(f, n, d, coords, h, edge_order):
    """The derivative of ``f`` along dim ``d`` (size ``n``): second-order central differences
    inside, one-sided ones of ``edge_order`` at the two ends (NumPy's and PyTorch's formulas);
    ``coords``: the sample points (a 1-D tensor), else the uniform spacing ``h``."""
    fm = _F()

    def sl(start, length):
        return f.narrow(d, start, length)

    def col(t):  # a 1-D tensor of per-point factors shaped to broadcast along d
        shape = [1] * f.ndim
        shape[d] = t.shape[0]
        return t.reshape(shape)

    if coords is None:
        inner = (sl(2, n - 2) - sl(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (sl(1, 1) - sl(0, 1)) / h
            last = (sl(n - 1, 1) - sl(n - 2, 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2.0 * sl(1, 1) - 0.5 * sl(2, 1)) / h
            last = (0.5 * sl(n - 3, 1) - 2.0 * sl(n - 2, 1) + 1.5 * sl(n - 1, 1)) / h
        return fm.cat([first, inner, last], d)
    dx = coords[1:] - coords[:-1]
    dx1, dx2 = dx[:-1], dx[1:]
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    inner = col(a) * sl(0, n - 2) + col(b) * sl(1, n - 2) + col(c) * sl(2, n - 2)
    if edge_order == 1:
        first = (sl(1, 1) - sl(0, 1)) / col(dx[:1])
        last = (sl(n - 1, 1) - sl(n - 2, 1)) / col(dx[-1:])
    else:
        p, q = dx[:1], dx[1:2]
        first = (col(-(2.0 * p + q) / (p * (p + q))) * sl(0, 1) + col((p + q) / (p * q))
                 * sl(1, 1) + col(-p / (q * (p + q))) * sl(2, 1))
        p, q = dx[-2:-1], dx[-1:]
        last = (col(q / (p * (p + q))) * sl(n - 3, 1) + col(-(q + p) / (p * q)) * sl(n - 2, 1)
                + col((2.0 * q + p) / (q * (p + q))) * sl(n - 1, 1))
    return fm.cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The numerical derivative of ``input`` along each of ``dim`` (default: every dimension),
    one tensor per dimension: central differences inside, one-sided differences of
    ``edge_order`` (1 or 2) at the ends. ``spacing``: one number for all dimensions (None: 1),
    one per dimension, or one 1-D tensor of sample coordinates per dimension (the result takes
    their dtype promoted with the input's). Integer input gives the default float dtype.

    >>> import fiamma
    >>> fiamma.gradient(fiamma.tensor([1.0, 4.0, 9.0, 16.0]))[0].tolist()
    [3.0, 4.0, 6.0, 7.0]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"gradient: expected a Tensor input, got {type(input).__name__}")
    if input.dtype is D.bool:  # PyTorch: its differences subtract bools, which it refuses
        raise RuntimeError("gradient: bool input is not supported (subtraction of two bool "
                           "tensors; convert it to a number dtype first)")
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got "
                           f"{edge_order}")
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, int):
        dims = [dim]
    else:
        dims = list(dim)
    dims = [_wrap_dim(d, input.ndim, "gradient") for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"gradient: dim {list(dim)} contains a dimension more than once")
    if spacing is None:  # PyTorch's None: unit spacing
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(
                f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing "
                f"and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(spacing)} and a dim argument of length {len(dims)}.")
        per_dim = list(spacing)
        if any(isinstance(sp, Tensor) for sp in per_dim):
            # PyTorch: a list holding tensors is a list of coordinates, all of them 1-D
            for i, sp in enumerate(per_dim):
                if not isinstance(sp, Tensor):
                    raise TypeError(f"gradient: expected Tensor as element {i} of spacing (a "
                                    f"list of coordinate tensors), got {type(sp).__name__}")
                if sp.ndim != 1:
                    raise RuntimeError(
                        f"torch.gradient expected each element of spacing to have one "
                        f"dimension, but got an element with {sp.ndim} dimensions!")
    else:
        per_dim = [spacing] * len(dims)
    f = _float_of(input)
    out = []
    for d, sp in zip(dims, per_dim):
        n = f.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
        if isinstance(sp, Tensor) and sp.ndim == 1:
            if sp.shape[0] != n:
                raise RuntimeError(f"gradient: the coordinates of dimension {d} hold "
                                   f"{sp.shape[0]} points, the input has {n} there")
            dt = D.promote_types(f.dtype, sp.dtype)  # float64 coordinates: a float64 result
            out.append(_gradient_1d(f.to(dt), n, d, sp.to(dt), None, edge_order))
        else:
            h = sp.item() if isinstance(sp, Tensor) else sp
            if not isinstance(h, (int, float)) or isinstance(h, bool):
                raise TypeError(f"gradient: spacing must be numbers or 1-D tensors, got "
                                f"{type(sp).__name__}")
            out.append(_gradient_1d(f, n, d, None, float(h), edge_order))
    return tuple(out)


def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast)."""
    return _L().vector_norm(_float_of(input) - other, p)


def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm
    ``maxnorm`` (PyTorch's 1e-7 in the divisor)."""
    f = _F()
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = dim % input.ndim
    others = [i for i in range(input.ndim) if i != d]
    norms = _L().vector_norm(input, p, dim=others, keepdim=True)
    scale = f.where(norms > maxnorm, maxnorm / (norms + 1e-7), f.ones_like(norms))
    return input * scale


def unravel_index(indices, shape):
    """Flat indices into ``shape`` as a tuple of coordinate tensors (C order).

    >>> import fiamma
    >>> [t.tolist() for t in fiamma.unravel_index(fiamma.tensor([4, 1]), (2, 3))]
    [[1, 0], [1, 1]]
    """
    f = _F()
    idx = indices if isinstance(indices, Tensor) else f.tensor(indices)
    if idx.dtype.is_floating_point or idx.dtype is D.bool:
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, got "
                        f"{idx.dtype}")
    shape = (shape,) if isinstance(shape, builtins.int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {shape}")
    total = math.prod(shape)
    if idx.numel() and (builtins.bool((idx < -total).any()) or
                        builtins.bool((idx >= total).any())):
        raise RuntimeError(f"unravel_index: index out of bounds for shape {shape}")
    idx = f.where(idx < 0, idx + total, idx).long()
    out = []
    for s in reversed(shape):
        out.append(f.remainder(idx, s) if s else idx * 0)
        idx = f.div(idx, s, rounding_mode="floor") if s else idx
    return tuple(reversed(out))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (the two broadcast; integer
    inputs in the default dtype), each norm clamped at ``eps`` (the clamp passes gradients
    through, as in PyTorch).

    >>> import fiamma
    >>> fiamma.cosine_similarity(fiamma.tensor([[1.0, 0.0]]), fiamma.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
    """
    if eps < 0:
        raise RuntimeError(f"cosine_similarity: eps must be non-negative, got: {eps}")
    f = _F()
    if not x1.dtype.is_floating_point:
        x1 = x1.to(f.get_default_dtype())
    if not x2.dtype.is_floating_point:
        x2 = x2.to(f.get_default_dtype())
    shape = f.broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    L = _L()
    n1 = L.vector_norm(x1, 2, dim=dim, keepdim=True)
    n2 = L.vector_norm(x2, 2, dim=dim, keepdim=True)
    n1 = n1 + (n1.detach().clamp(min=eps) - n1.detach())
    n2 = n2 + (n2.detach().clamp(min=eps) - n2.detach())
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm of ``x1 - x2 + eps`` along the last dim."""
    return _L().vector_norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-D ``input`` (upper triangle, row-major)."""
    f = _F()
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    n = input.shape[0]
    i, j = f.triu_indices(n, n, 1, device=input.device)
    diff = input[i] - input[j]
    if p == math.inf:  # every coordinate at the maximum gets the full gradient (PyTorch's)
        return _chebyshev(diff)
    return _L().vector_norm(diff, p, dim=-1)


# ---- small functional forms and predicates ---------------------------------------------------

def fill(input, value):
    """A new tensor like ``input`` filled with ``value`` (a number or a 0-d tensor). As in
    PyTorch, it requires grad when ``input`` or ``value`` does: zero gradient for ``input``,
    the gradient's sum for ``value``."""
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill: only supports a 0-dimension value tensor, got one with "
                           f"{value.ndim} dimensions")
    if input.requires_grad or (isinstance(value, Tensor) and value.requires_grad):
        return input.clone().fill_(value)
    return _F().full_like(input, value.item() if isinstance(value, Tensor) else value)


def fill_(input, value):
    return input.fill_(value)


def zero_(input):
    return input.zero_()


def is_neg(input):
    return False


def is_nonzero(input):
    """The truth of a one-element tensor (RuntimeError for any other size)."""
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if
                           input.numel() == 0 else
                           "Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.item())


def sym_min(a, b):
    """``min(a, b)`` that keeps a size symbolic: while fiamma.jit traces, sizes read from
    ``x.shape`` remember how they were computed, and ``sym_min(k, x.shape[0])`` stays a
    function of the input's size where the builtin ``min`` would fix this trace's choice.

    >>> import fiamma
    >>> fiamma.sym_min(1000, 3), fiamma.sym_max(2.5, 1)
    (3, 2.5)
    """
    if hasattr(type(a), "__sym_min__"):
        return a.__sym_min__(b)
    if hasattr(type(b), "__sym_min__"):
        return b.__sym_min__(a)
    return builtins.min(a, b)


def sym_max(a, b):
    """``max(a, b)`` that keeps a size symbolic (see :func:`sym_min`)."""
    if hasattr(type(a), "__sym_max__"):
        return a.__sym_max__(b)
    if hasattr(type(b), "__sym_max__"):
        return b.__sym_max__(a)
    return builtins.max(a, b)


def sym_float(a):
    """``float(a)`` (``torch.sym_float``; PyTorch keeps a symbolic size symbolic, fiamma's
    traced sizes are ints with their history)."""
    if hasattr(type(a), "__sym_float__"):
        return a.__sym_float__()
    return float(a)


def sym_int(a):
    """``int(a)``, truncating toward zero (``torch.sym_int``)."""
    if hasattr(type(a), "__sym_int__"):
        return a.__sym_int__()
    return int(a)


class _SymbolicNumber:
    """Base of PyTorch's symbolic numbers (``torch.SymInt``/``SymFloat``/``SymBool``: sizes
    and values that torch.compile/export tracing keeps symbolic). fiamma's tracers hand out
    plain Python numbers (fiamma.jit's traced sizes are ``int`` subclasses), so no value is one
    of these: the classes exist for the ``isinstance(n, (int, torch.SymInt))`` checks of
    library code, and cannot be made."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        raise TypeError(f"fiamma.{cls.__name__} cannot be created: fiamma has no symbolic "
                        "numbers (its traced sizes are Python ints)")


class SymInt(_SymbolicNumber):
    """PyTorch's symbolic int (see :class:`_SymbolicNumber`: never made by fiamma).

    >>> import fiamma
    >>> isinstance(3, (int, fiamma.SymInt)), isinstance(3, fiamma.SymInt)
    (True, False)
    """

    __slots__ = ()


class SymFloat(_SymbolicNumber):
    """PyTorch's symbolic float (never made by fiamma)."""

    __slots__ = ()


class SymBool(_SymbolicNumber):
    """PyTorch's symbolic bool (never made by fiamma)."""

    __slots__ = ()


def sym_not(a):
    """``not a`` (``torch.sym_not``)."""
    if hasattr(type(a), "__sym_not__"):
        return a.__sym_not__()
    return not a


def sym_ite(b, t, f):
    """``t if b else f`` (``torch.sym_ite``)."""
    return t if b else f


def sym_sqrt(a):
    """``math.sqrt(a)`` (``torch.sym_sqrt``)."""
    if hasattr(type(a), "__sym_sqrt__"):
        return a.__sym_sqrt__()
    return math.sqrt(a)


def sym_sum(args):
    """The sum of an iterable of numbers (``torch.sym_sum``).

    >>> import fiamma
    >>> fiamma.sym_sum([1, 2, 3]), fiamma.sym_int(-3.7), fiamma.sym_ite(False, 1, 2)
    (6, -3, 2)
    """
    return builtins.sum(args)


def sym_fresh_size(expr):
    """The value of a size expression (``torch.sym_fresh_size``: PyTorch's eager result is
    ``tensor(expr).item()``)."""
    return _F().tensor(expr).item()


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` padded with ``fill_value`` or truncated to exactly ``size`` rows:
    shape ``(size, input.dim())``, int64 (``torch.nonzero_static``).

    >>> import fiamma
    >>> fiamma.nonzero_static(fiamma.tensor([0, 1, 0, 2]), size=3).tolist()
    [[1], [3], [-1]]
    """
    f = _F()
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be a non-negative integer, got {size}")
    nz = f.nonzero(input)
    k = nz.shape[0]
    if k >= size:
        return nz[:size].clone()
    pad = f.full((size - k, input.dim()), fill_value, dtype=D.int64)
    return f.cat([nz, pad], 0)


def addmv_(input, mat, vec, *, beta=1, alpha=1):
    """In-place ``addmv``: ``input = beta * input + alpha * (mat @ vec)``."""
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


def frobenius_norm(input, dim, keepdim=False, *, out=None):
    """The 2-norm over ``dim`` (PyTorch's deprecated ``torch.frobenius_norm``:
    ``linalg.vector_norm(input, 2, dim, keepdim)``); warns as PyTorch's."""
    import warnings

    warnings.warn("frobenius_norm is deprecated (as in PyTorch); use "
                  "linalg.vector_norm(A, 2., dim, keepdim)", UserWarning, stacklevel=2)
    return _L().vector_norm(input, 2, dim, keepdim, out=out)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):
    """The nuclear norm (sum of singular values) of the matrices over ``dim`` (default the
    last two), PyTorch's deprecated ``torch.nuclear_norm``:
    ``linalg.matrix_norm(input, 'nuc', dim, keepdim)``; warns as PyTorch's."""
    import warnings

    warnings.warn("nuclear_norm is deprecated (as in PyTorch); use "
                  "linalg.matrix_norm(A, 'nuc', dim, keepdim)", UserWarning, stacklevel=2)
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim) in PyTorch's other overload
        dim, keepdim = None, dim
    return _L().matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim,
                            out=out)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised dense tensor of ``size`` whose dimensions lie in memory in the order
    ``physical_layout`` (outermost first): ``empty_permuted((N, C, H, W), (0, 2, 3, 1))`` is
    channels-last (``torch.empty_permuted``).

    >>> import fiamma
    >>> fiamma.empty_permuted((2, 3, 4, 5), (0, 2, 3, 1)).stride()
    (60, 1, 15, 3)
    """
    f = _F()
    size = tuple(int(s) for s in size)
    perm = tuple(int(p) for p in physical_layout)
    if len(perm) != len(size):
        raise RuntimeError(f"empty_permuted: physical_layout has {len(perm)} dims, size has "
                           f"{len(size)}")
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout must be a permutation of the "
                           f"dims 0..{len(size) - 1}, got {perm} (duplicate dim not allowed)")
    phys = f.empty(tuple(size[p] for p in perm), dtype=dtype, device=device)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    out = phys.permute(*inv) if perm else phys
    return out.requires_grad_(True) if requires_grad else out


def hash_tensor(input, dim=None, *, keepdim=False, mode=0):
    """A hash of the elements (``torch.hash_tensor``): mode 0 XORs the elements' 64-bit
    patterns (floating-point values widened to float64, integers and bools to int64) over
    ``dim`` (default all), giving uint64.

    >>> import fiamma
    >>> fiamma.hash_tensor(fiamma.tensor([[1, 2], [3, 4]]), dim=1).tolist()
    [3, 7]
    """
    f = _F()
    if mode != 0:
        raise RuntimeError(f"hash_tensor: Unknown hash_tensor mode: {mode}")
    dt = input.dtype
    if dt.is_complex or dt is D.uint64:
        raise RuntimeError(f"hash_tensor: xor reduction is not implemented for {dt}")
    x = input.detach()
    arr = (x.double() if dt.is_floating_point else x.long()).numpy().view(np.uint64)
    if dim is None:
        if arr.size == 0:
            raise RuntimeError("hash_tensor: Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
        axes = tuple(range(arr.ndim))
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = tuple(_wrap_dim(d, max(arr.ndim, 1)) for d in dims)
        for a in axes:
            if arr.ndim and arr.shape[a] == 0:
                raise IndexError(f"hash_tensor: Expected reduction dim {a} to have non-zero "
                                 "size.")
    res = np.bitwise_xor.reduce(arr, axis=axes, keepdims=keepdim) if arr.ndim else arr
    return f.from_numpy(np.array(res, dtype=np.uint64))  # (0-d stays 0-d)


def get_device_module(device=None):
    """The module of a device type: ``fiamma.cpu``, ``fiamma.cuda``, ``fiamma.mps`` or
    ``fiamma.xpu`` (``torch.get_device_module``); no argument: the current accelerator's,
    else ``fiamma.cpu``."""
    if device is None:
        acc = importlib.import_module("fiamma.accelerator").current_accelerator()
        kind = "cpu" if acc is None else acc.type
    elif isinstance(device, str):
        kind = device.split(":")[0]
    elif hasattr(device, "type"):
        kind = device.type
    else:
        raise RuntimeError(f"get_device_module: invalid value of device '{device}', expect "
                           "torch.device, str, or None")
    if kind not in ("cpu", "cuda", "mps", "xpu", "meta"):
        raise RuntimeError(f"get_device_module: device '{kind}' does not have a corresponding "
                           "module registered as 'fiamma.{kind}'.")
    if kind == "meta":
        raise RuntimeError("get_device_module: device 'meta' does not have a corresponding "
                           "module registered as 'fiamma.meta'.")
    return importlib.import_module("fiamma." + kind)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` is true and return the
    final ``carried`` tuple (``torch.while_loop``, eagerly; ``cond_fn`` returns a bool or a
    one-element bool tensor, ``body_fn`` a tuple of the same length).

    >>> import fiamma
    >>> fiamma.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2),
    ...                   (fiamma.tensor(0), fiamma.ones(2)))
    (tensor(3), tensor([8., 8.]))
    """
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"while_loop: carried_inputs must be a tuple or list, got "
                           f"{type(carried_inputs).__name__}")
    carried = tuple(carried_inputs)
    while True:
        c = cond_fn(*carried)
        if isinstance(c, Tensor):
            if c.numel() != 1 or c.dtype is not D.bool:
                raise RuntimeError(f"while_loop: cond_fn must return a boolean scalar, got a "
                                   f"{c.dtype} tensor of shape {tuple(c.shape)}")
            c = bool(c)
        if not c:
            return carried
        out = body_fn(*carried)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(carried):
            raise RuntimeError(f"while_loop: body_fn returned {len(out)} values for "
                               f"{len(carried)} carried inputs")
        carried = out


def fork(func, *args, **kwargs):
    """Call ``func(*args, **kwargs)`` and return a completed ``fiamma.futures.Future`` of its
    result (``torch.jit.fork`` outside TorchScript, which also runs it at once); an error is
    kept in the future and raised by :func:`wait`."""
    fut = importlib.import_module("fiamma.futures").Future()
    try:
        fut.set_result(func(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 (kept for wait, as an asynchronous call would)
        fut.set_exception(e)
    return fut


def wait(future):
    """The result of a Future returned by :func:`fork`."""
    return future.wait()


def sym_constrain_range(size, *, min=None, max=None):
    """Check that a size lies in ``[min, max]`` (``torch.sym_constrain_range``; with a plain
    int there is nothing symbolic to constrain)."""
    if isinstance(size, Tensor):
        size = size.item()
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    if not lo <= size <= hi:
        raise RuntimeError(f"sym_constrain_range: Invalid value range for {size} between "
                           f"[{lo}, {hi}].")


def sym_constrain_range_for_size(size, *, min=None, max=None):
    """``sym_constrain_range`` for a size: ``min`` defaults to 0."""
    sym_constrain_range(size, min=0 if min is None else min, max=max)


def init_num_threads():
    """Nothing to do: fiamma's thread pool starts itself (``torch.init_num_threads``)."""


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight * x`` (``torch.prelu``, ``F.prelu``): a weight of
    C values applies per channel (dimension 1), one value everywhere. The gradient at 0 is the
    slope, as PyTorch's. On autocast's lower-precision list.

    >>> import fiamma
    >>> fiamma.prelu(fiamma.tensor([-2.0, 0.0, 3.0]), fiamma.tensor([0.25])).tolist()
    [-0.5, 0.0, 3.0]
    """
    f = _F()
    input, weight = f.amp.cast_lower(None, input, weight)
    if weight.numel() != 1:
        if input.dim() < 2 or input.shape[1] != weight.numel():
            raise RuntimeError(f"prelu: Mismatch of parameter numbers and input channel size. "
                               f"Found parameter numbers = {weight.numel()} and channel size = "
                               f"{input.shape[1] if input.dim() > 1 else 1}.")
        shape = [1] * input.dim()
        shape[1] = weight.numel()
        weight = weight.reshape(shape)
    elif weight.dim() > input.dim():  # one slope on a 0-d input: the result keeps shape ()
        weight = weight.reshape(())
    return f.where(input > 0, input, weight * input)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """``(output, mean, rstd)`` of layer normalisation over the trailing ``normalized_shape``
    dims (``torch.native_layer_norm``); ``mean`` and ``rstd = 1/sqrt(var + eps)`` (biased
    variance) keep those dims as size 1. Differentiable."""
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if tuple(input.shape[input.dim() - k:]) != shape:
        raise RuntimeError(f"native_layer_norm: normalized_shape {list(shape)} does not match "
                           f"the input's trailing dims {list(input.shape)}")
    dims = tuple(range(input.dim() - k, input.dim()))
    mean = input.mean(dims, keepdim=True)
    var = (input - mean).pow(2).mean(dims, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = (input - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """``(output, mean, rstd)`` of group normalisation (``torch.native_group_norm``): the
    input viewed as ``(N, group, C/group * HxW)``; ``mean`` and ``rstd`` are ``(N, group)``.
    Differentiable."""
    if C % group:
        raise RuntimeError(f"native_group_norm: channels ({C}) must be divisible by group "
                           f"({group})")
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"native_group_norm: input of {input.numel()} elements is not "
                           f"N * C * HxW = {N} * {C} * {HxW}")
    x = input.reshape(N, group, -1)
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = ((x - mean) * rstd).reshape(input.shape)
    affine_shape = (1, C) + (1,) * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(affine_shape)
    if bias is not None:
        out = out + bias.reshape(affine_shape)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def _bn_dims(input):
    return (0,) + tuple(range(2, input.dim()))


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                      eps):
    """``(output, save_mean, save_invstd)`` of batch normalisation over dim 1
    (``torch.native_batch_norm``). Training: batch statistics (biased variance) normalise,
    and the running statistics (when given) are updated in place with the unbiased variance;
    otherwise the running statistics normalise and ``save_mean``/``save_invstd`` are empty,
    as in PyTorch. Differentiable."""
    f = _F()
    shape = (1, input.shape[1]) + (1,) * (input.dim() - 2)
    if training:
        dims = _bn_dims(input)
        mean = input.mean(dims)
        var = (input - mean.reshape(shape)).pow(2).mean(dims)
        invstd = (var + eps).rsqrt()
        if running_mean is not None or running_var is not None:
            batch_norm_update_stats(input.detach(), running_mean, running_var, momentum)
        out = (input - mean.reshape(shape)) * invstd.reshape(shape)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("native_batch_norm: running_mean and running_var must be "
                               "defined in evaluation mode")
        out = (input - running_mean.reshape(shape)) * (running_var + eps).rsqrt().reshape(shape)
        mean = f.empty(0, dtype=input.dtype)
        invstd = f.empty(0, dtype=input.dtype)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean, invstd


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    """``(mean, var)`` of ``input`` per channel (dim 1; biased variance), updating the running
    statistics in place: ``r = (1 - momentum) r + momentum * stat`` with the unbiased variance
    for ``running_var`` (``torch.batch_norm_update_stats``)."""
    dims = _bn_dims(input)
    with _F().no_grad():
        x = input.detach()
        mean = x.mean(dims)
        n = x.numel() // max(x.shape[1], 1)
        shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
        var = (x - mean.reshape(shape)).pow(2).mean(dims)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = var * (n / (n - 1)) if n > 1 else var * float("inf")
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return mean, var


# build facts PyTorch publishes as torch.has_*: fiamma's linear algebra runs on LAPACK (through
# NumPy), its FFTs exist, its C kernels are threaded with OpenMP, and its BLAS is not MKL (the
# same answers as fiamma.backends.mkl / openmp)
has_lapack = True
has_spectral = True
has_openmp = True
has_mkl = False


def is_vulkan_available():
    """False: fiamma has no Vulkan backend (``torch.is_vulkan_available``)."""
    return False


def set_flush_denormal(mode):
    """Whether denormal flushing could be set as asked (``torch.set_flush_denormal``): fiamma's
    kernels cannot flush denormals to zero, so turning it on returns False (unsupported, as
    PyTorch answers on CPUs without SSE3) and turning it off returns True."""
    return not mode


def cudnn_is_acceptable(tensor):
    """Whether cuDNN would take ``tensor`` (``torch.cudnn_is_acceptable``): a CUDA tensor of a
    float dtype with cuDNN loaded and enabled."""
    if not tensor.is_cuda or tensor.dtype not in (D.float16, D.bfloat16, D.float32,
                                                  D.float64):
        return False
    cudnn = importlib.import_module("fiamma.backends.cudnn")
    return bool(cudnn.is_available() and cudnn.enabled)


def _no_device(kind, title):
    def move(self, device=None, non_blocking=False, memory_format=None):
        raise RuntimeError(f"Tensor.{kind}: fiamma has no {title} backend, so no {kind} device "
                           "is available (as in a PyTorch build without it)")
    move.__name__ = kind
    move.__doc__ = f"Always raises: fiamma has no {title} backend."
    return move


def is_distributed(input):
    """False: PyTorch's legacy flag for tensors of its old distributed backend (always False
    there too; fiamma.distributed works on ordinary tensors)."""
    return False


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input):
    return input.dtype.is_signed


def is_storage(obj):
    from fiamma._storage_api import TypedStorage, UntypedStorage

    return isinstance(obj, (TypedStorage, UntypedStorage))


def is_inference(input):
    return False


def typename(obj):
    """'fiamma.FloatTensor' for a tensor (by dtype), else the object's qualified type name."""
    if isinstance(obj, Tensor):
        return obj.type()
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def get_device(input):
    return input.get_device()


# ---- view ops as copies, and scatters into views ----------------------------------------------

def _set_real(self, value):
    real(self).copy_(value)


def _set_imag(self, value):
    imag(self).copy_(value)


def split_with_sizes(input, split_sizes, dim=0):
    """``split`` with a list of sizes."""
    return _F().split(input, list(split_sizes), dim)


def unsafe_chunk(input, chunks, dim=0):
    return _F().chunk(input, chunks, dim)


def unsafe_split(input, split_size, dim=0):
    return _F().split(input, split_size, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return split_with_sizes(input, split_sizes, dim)


def _copies(r):
    """A contiguous copy of a view (or of each view of a tuple)."""
    if isinstance(r, (tuple, list)):
        return tuple(_copies(t) for t in r)
    return r.clone().contiguous()


def alias_copy(input):
    return input.clone()


def as_strided_copy(input, size, stride, storage_offset=None):
    return _copies(input.as_strided(size, stride, storage_offset))


def detach_copy(input):
    return input.detach().clone()


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return _copies(input.diagonal(offset, dim1, dim2))


def expand_copy(input, size, *, implicit=False):
    return _copies(input.expand(*size))


def permute_copy(input, dims):
    return _copies(input.permute(*dims))


def select_copy(input, dim, index):
    if getattr(input, "_compressed", False):  # a sparse compressed tensor (blocks allowed)
        return input._select_copy(dim, index)
    return _copies(input.select(dim, index))


def _slice(input, dim, start, end, step):
    idx = [builtins.slice(None)] * input.ndim
    idx[dim] = builtins.slice(start, end, step)
    return input[tuple(idx)]


def slice_copy(input, dim=0, start=None, end=None, step=1):
    return _copies(_slice(input, dim, start, end, step))


def split_copy(input, split_size, dim=0):
    return _copies(_F().split(input, split_size, dim))


def split_with_sizes_copy(input, split_sizes, dim=0):
    return _copies(split_with_sizes(input, split_sizes, dim))


def squeeze_copy(input, dim=None):
    return _copies(input.squeeze(dim))


def t_copy(input):
    return _copies(input.t())


def transpose_copy(input, dim0, dim1):
    return _copies(input.transpose(dim0, dim1))


def unbind_copy(input, dim=0):
    return _copies(input.unbind(dim))


def unfold_copy(input, dimension, size, step):
    return _copies(input.unfold(dimension, size, step))


def unsqueeze_copy(input, dim):
    return _copies(input.unsqueeze(dim))


def view_copy(input, *size, dtype=None):
    if dtype is not None:
        raise RuntimeError("view_copy: the dtype form is not supported; use view(dtype).clone()")
    return _copies(input.view(*size))


def _scatter_into(input, src, view_of, op):
    out = input.clone()
    v = view_of(out)
    if tuple(v.shape) != tuple(src.shape):
        raise RuntimeError(f"{op}: expected src to have a size equal to the slice of self. "
                           f"src size = {list(src.shape)}, slice size = {list(v.shape)}")
    v.copy_(src)
    return out


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` with its diagonal (``offset``, ``dim1``, ``dim2``) set to ``src``.

    >>> import fiamma
    >>> fiamma.diagonal_scatter(fiamma.zeros(2, 2), fiamma.ones(2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return _scatter_into(input, src, lambda t: t.diagonal(offset, dim1, dim2),
                         "diagonal_scatter")


def select_scatter(input, src, dim, index):
    """A copy of ``input`` with ``input.select(dim, index)`` set to ``src``."""
    return _scatter_into(input, src, lambda t: t.select(dim, index), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` with the slice ``start:end:step`` of ``dim`` set to ``src``."""
    return _scatter_into(input, src, lambda t: _slice(t, dim, start, end, step),
                         "slice_scatter")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` with ``as_strided(size, stride, storage_offset)`` set to ``src``."""
    f = _F()
    base = f.empty_like(input).copy_(input).contiguous()
    return _scatter_into(base, src, lambda t: t.as_strided(size, stride, storage_offset),
                         "as_strided_scatter")


# ---- NumPy-backed odds and ends (no gradient: integer or piecewise-constant results) ----------

def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the bytes of a Python buffer (``bytes``, ``bytearray``, ``memoryview``,
    ``array``), sharing a writable buffer's memory as PyTorch does; ``count`` elements
    (-1: all) after ``offset`` bytes.

    >>> import fiamma
    >>> fiamma.frombuffer(bytearray(b"\\x01\\x00\\x02\\x00"), dtype=fiamma.int16).tolist()
    [1, 2]
    """
    f = _F()
    dt = D.to_dtype(dtype, "frombuffer")
    nbytes = memoryview(buffer).nbytes
    if offset < 0 or offset > nbytes:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no "
                         f"greater than buffer length ({nbytes} bytes) minus 1")
    avail = (nbytes - offset) // dt.itemsize
    if count == 0 or (count < 0 and avail == 0):
        raise ValueError(f"frombuffer: both buffer length ({nbytes}) and count ({count}) "
                         "must not be 0")
    n = avail if count < 0 else count
    if n > avail:
        raise ValueError(f"frombuffer: requested buffer length ({n} * {dt.itemsize} bytes) "
                         f"after offset ({offset} bytes) must not be greater than actual "
                         f"buffer length ({nbytes} bytes)")
    np_dt = np.uint16 if dt is D.bfloat16 else np.dtype(dt.name)
    arr = np.frombuffer(buffer, dtype=np_dt, count=n, offset=offset)
    # a read-only buffer (bytes) is copied: PyTorch shares it and calls writes undefined
    t = f.from_numpy(arr) if arr.flags.writeable else f.from_numpy(arr.copy())
    if dt is D.bfloat16:
        t = t.view(D.bfloat16)
    return t.requires_grad_(requires_grad) if requires_grad else t


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of ``input``'s values: ``bins`` equal bins over ``range`` (default:
    min..max) or the given edges tensor, as ``numpy.histogram``."""
    f = _F()
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"histogram: input tensor and bins tensors should have the same "
                           f"floating-point dtype, got {input.dtype}")
    def arr(t):  # the values (a tensor requiring grad too: histogram has no gradient)
        t = t.detach()
        return (t.float() if t.dtype is D.bfloat16 else t).numpy()

    b = arr(bins) if isinstance(bins, Tensor) else bins
    w = None if weight is None else arr(weight).reshape(-1)
    h, edges = np.histogram(arr(input).reshape(-1), bins=b, range=range, weights=w,
                            density=density)
    res = _Histogram(f.tensor(h, dtype=input.dtype), f.tensor(edges, dtype=input.dtype))
    if out is not None:
        out[0].copy_(res[0])
        out[1].copy_(res[1])
        return out
    return res


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of the points ``input`` of shape ``(..., D)``: a D-dimensional
    histogram (``torch.histogramdd``). ``bins`` is one int for every dimension, D ints, or D
    1-d tensors of increasing edges; ``range`` is ``[min_0, max_0, ..., min_{D-1},
    max_{D-1}]`` (default: each dimension's min..max, widened by 0.5 on both sides when they
    are equal); ``weight`` (``input.shape[:-1]``) weighs the points; ``density`` divides by
    the total weight and the bin volumes. Each bin holds ``[left, right)``, the last one
    ``[left, right]``; points outside the edges are not counted. ``bin_edges`` is a tuple of
    D tensors of ``input``'s dtype.

    >>> import fiamma
    >>> pts = fiamma.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.2]])
    >>> h, edges = fiamma.histogramdd(pts, bins=[2, 2])
    >>> h.tolist(), edges[0].tolist()
    ([[1.0, 0.0], [1.0, 1.0]], [0.0, 0.5, 1.0])
    """
    f = _F()
    op = "histogramdd"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {input.dtype}")
    if input.dim() < 2:
        raise RuntimeError(f"{op}: expected input to have at least 2 dimensions (points of "
                           f"shape (..., D)), got shape {tuple(input.shape)}")
    nd = input.shape[-1]

    def arr(t):
        t = t.detach()
        return (t.float() if t.dtype in (D.bfloat16, D.float16) else t).numpy()

    pts = arr(input).reshape(-1, nd).astype(np.float64)
    if isinstance(bins, int):
        bins = [bins] * nd
    bins = list(bins)
    if any(isinstance(b, Tensor) for b in bins) and not all(isinstance(b, Tensor) for b in bins):
        raise TypeError(f"{op}: bins must be an int, a sequence of ints or a sequence of "
                        "tensors (one per dimension), not a mix of tensors and ints")
    if len(bins) != nd:
        raise RuntimeError(f"{op}: expected {nd} sequences of bin edges or bin counts for the "
                           f"{nd} dimensions of input, got {len(bins)}")
    if range is not None:
        range = [float(v) for v in range]
        if len(range) != 2 * nd:
            raise RuntimeError(f"{op}: expected range to have {2 * nd} elements (min and max of "
                               f"each of the {nd} dimensions), got {len(range)}")
    edges = []
    for k, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.dim() != 1 or b.numel() < 1:
                raise RuntimeError(f"{op}: bins tensor {k} must be 1-d with at least 1 edge, "
                                   f"got shape {tuple(b.shape)}")
            if b.dtype is not input.dtype:
                raise RuntimeError(f"{op}: input tensor and bins tensors should have the same "
                                   f"dtype, got {input.dtype} and {b.dtype}")
            e = arr(b).astype(np.float64)
            if np.any(np.diff(e) < 0):
                raise RuntimeError(f"{op}: bin edges of dimension {k} must be non-decreasing")
            edges.append(e)
            continue
        b = int(b)
        if b <= 0:
            raise RuntimeError(f"{op}: bins must be > 0, got {b} for dimension {k}")
        if range is not None:
            lo, hi = range[2 * k], range[2 * k + 1]
            if lo > hi:
                raise RuntimeError(f"{op}: max must be larger than min, got min {lo} and max "
                                   f"{hi} for dimension {k}")
        elif pts.shape[0]:
            lo, hi = float(pts[:, k].min()), float(pts[:, k].max())
        else:
            lo, hi = 0.0, 0.0
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"{op}: range of [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        # the edges in the input's dtype, as PyTorch's linspace computes them
        edges.append(f.linspace(lo, hi, b + 1, dtype=input.dtype).double().numpy())
    w = None
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise RuntimeError(f"{op}: expected weight to have shape {tuple(input.shape[:-1])}"
                               f" (input.shape[:-1]), got {tuple(weight.shape)}")
        w = arr(weight).reshape(-1).astype(np.float64)
    hist, _ = np.histogramdd(pts, bins=edges, weights=w, density=False)
    if density:
        total = hist.sum()
        vol = np.ones(())
        for e in edges:
            vol = np.multiply.outer(vol, np.diff(e))
        with np.errstate(invalid="ignore", divide="ignore"):
            hist = hist / total / vol
    return _HistogramDD(f.tensor(hist, dtype=input.dtype),
                        tuple(f.tensor(e, dtype=input.dtype) for e in edges))


def igamma(input, other, *, out=None):
    """The regularized lower incomplete gamma function: ``fiamma.special.gammainc``."""
    return importlib.import_module("fiamma.special").gammainc(input, other, out=out)


def igammac(input, other, *, out=None):
    """The regularized upper incomplete gamma function: ``fiamma.special.gammaincc``."""
    return importlib.import_module("fiamma.special").gammaincc(input, other, out=out)


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1)
    (exponent int32); the mantissa has a gradient, as in PyTorch."""
    f = _F()
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"frexp only supports floating-point dtypes, got {input.dtype}")
    _, ex = np.frexp(input.detach().float().numpy() if input.dtype is D.bfloat16 else
                     input.detach().numpy())
    exponent = f.tensor(ex.astype(np.int32))
    # the mantissa as input / 2**exponent: exact, and differentiable (d/dx = 2**-exponent)
    return _Frexp(input / f.pow(2.0, exponent.to(input.dtype)), exponent)


def nextafter(input, other):
    """The next representable value after ``input`` towards ``other`` (float32/float64/float16/
    bfloat16 after type promotion)."""
    f = _F()
    dt = D.result_type(input, other)
    if dt not in (D.float32, D.float64, D.float16, D.bfloat16):
        raise RuntimeError(f"nextafter: expected floating (not complex) operands, got "
                           f"{input.dtype} and {other.dtype}")
    if dt in (D.float16, D.bfloat16):  # one step in that format, from the float32 bits
        return _nextafter_lowp(input.to(dt), other.to(dt), dt)
    input, other = input.to(dt), other.to(dt)
    # np.asarray, not np.ascontiguousarray: that one makes a 0-d result 1-d
    res = np.asarray(np.nextafter(input.detach().numpy(), other.detach().numpy()))
    out = f.from_numpy(res if res.flags.c_contiguous else res.copy())
    # PyTorch's derivative: 1 with respect to input, 0 with respect to other
    return input + (out - input).detach() if input.requires_grad else out


def _nextafter_lowp(x, y, dt):
    f = _F()
    bits = (x.detach().to(D.float32).view(D.int32) >> 16) if dt is D.bfloat16 else \
        x.detach().view(D.int16).to(D.int32)
    bits = bits & 0xFFFF
    up = y > x
    pos = (bits & 0x8000) == 0
    step = f.where(up == pos, 1, -1)
    zero = x == 0
    nb = f.where(zero, f.where(up, 1, 0x8001), bits + step)  # from +-0: the smallest denormal
    nb = f.where(x == y, bits, nb)
    if dt is D.bfloat16:
        res = (nb << 16).to(D.int32).view(D.float32).to(dt)
    else:
        res = nb.to(D.int16).view(D.float16)
    res = f.where(f.isnan(x) | f.isnan(y), x + y, f.where(x == y, y, res))
    return x + (res - x).detach() if x.requires_grad else res


def detach_(input):
    return input.detach_()


def resize_as_(input, the_template, *, memory_format=None):
    return input.resize_as_(the_template)


def as_strided_(input, size, stride, storage_offset=None):
    return input.as_strided_(size, stride, storage_offset)


_interop = [1]


def get_num_interop_threads():
    """Threads for running independent ops at once: fiamma runs ops one after the other, so
    this is the recorded setting (1 unless set)."""
    return _interop[0]


def set_num_interop_threads(num):
    if not isinstance(num, builtins.int) or num <= 0:
        raise RuntimeError(f"set_num_interop_threads: expected a positive int, got {num!r}")
    _interop[0] = num


def _set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Make this tensor show ``source``'s memory: another tensor (its storage and layout) or a
    storage (with ``storage_offset``, ``size``, ``stride``); no argument: an empty tensor."""
    from fiamma._storage_api import TypedStorage, UntypedStorage
    from fiamma._tensor_api import _take_layout, _view_of

    if self.requires_grad:
        raise RuntimeError("set_: cannot set the storage of a tensor that requires grad")
    if source is None:
        _take_layout(self, _F().empty(0, dtype=self.dtype), "set_")
        return self
    if isinstance(source, Tensor):
        if source.dtype is not self.dtype:
            raise RuntimeError(f"set_: expected {self.dtype} source, got {source.dtype}")
        _take_layout(self, source, "set_")
        return self
    if isinstance(source, TypedStorage):
        source = source.untyped()
    if not isinstance(source, UntypedStorage):
        raise TypeError(f"set_: expected a Tensor or a storage, got {type(source).__name__}")
    n = source.nbytes() // self.dtype.itemsize
    if size is None:
        size, stride = (n - storage_offset,), (1,)
    size = tuple(size)
    if stride is None:
        from fiamma._tensor import contiguous_strides

        stride = contiguous_strides(size)
    need = storage_offset + builtins.sum((s - 1) * st for s, st in zip(size, stride)) + 1 \
        if all(size) else 0
    if need > n:
        raise RuntimeError(f"set_: size {list(size)} with stride {list(stride)} and offset "
                           f"{storage_offset} needs {need} elements, the storage has {n}")
    _take_layout(self, _view_of(source._st, self.dtype, size, stride, storage_offset), "set_")
    return self


# ---- Tensor methods ---------------------------------------------------------------------------

def _fill_diagonal_(self, fill_value, wrap=False):
    """Fill the main diagonal in place (all dims of equal size for ndim > 2; for a tall 2-D
    matrix, ``wrap`` restarts the diagonal every ncols + 1 rows, as NumPy and PyTorch)."""
    if self.ndim < 2:
        raise RuntimeError("fill_diagonal_: dimensions must larger than 1")
    n = self.shape[0]
    if self.ndim > 2 and any(s != n for s in self.shape):
        raise RuntimeError("fill_diagonal_: all dimensions of input must be of equal length")
    if self.ndim == 2:
        rows, cols = self.shape
        self.diagonal().fill_(fill_value)
        if wrap and rows > cols + 1:
            start = cols + 1
            while start < rows:
                sub = self[start:]
                sub.diagonal().fill_(fill_value)
                start += cols + 1
        return self
    st = builtins.sum(self.stride())
    self.as_strided((n,), (st,), self.storage_offset()).fill_(fill_value)
    return self


def _sum_to_size(self, *size):
    """Sum this tensor down to ``size`` (which it must broadcast from)."""
    from fiamma._tensor import _shape_arg

    shape = tuple(_shape_arg(size))
    if len(shape) > self.ndim:
        raise RuntimeError(f"sum_to_size: size {list(shape)} is not expandable to size "
                           f"{list(self.shape)}")
    lead = self.ndim - len(shape)
    x = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    for i, s in enumerate(shape):
        if s != 1 and s != x.shape[i]:
            raise RuntimeError(f"sum_to_size: size {list(shape)} is not expandable to size "
                               f"{list(self.shape)}")
    return x.sum(dims, keepdim=True) if dims else x


def _apply_(self, callable):
    """Apply a Python function to every element in place (CPU; slow; for quick scripts)."""
    vals = [callable(v) for v in self.reshape(-1).tolist()]
    self.copy_(_F().tensor(vals, dtype=self.dtype).reshape(self.shape))
    return self


def _map_(self, tensor, callable):
    """``self[i] = callable(self[i], tensor[i])`` in place (``tensor`` broadcast to self)."""
    other = tensor.expand_as(self).reshape(-1).tolist()
    vals = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other)]
    self.copy_(_F().tensor(vals, dtype=self.dtype).reshape(self.shape))
    return self


def _map2_(self, x, y, callable):
    """``self[i] = callable(self[i], x[i], y[i])`` in place (``x`` and ``y`` broadcast to
    self; CPU, a Python loop, as PyTorch's)."""
    xs = x.expand_as(self).reshape(-1).tolist()
    ys = y.expand_as(self).reshape(-1).tolist()
    vals = [callable(a, b, c) for a, b, c in zip(self.reshape(-1).tolist(), xs, ys)]
    self.copy_(_F().tensor(vals, dtype=self.dtype).reshape(self.shape))
    return self


def _resize(self, *sizes):
    """Deprecated out-of-place ``resize``: the tensor's elements in a new shape with the same
    number of elements (a differentiable reshape, sharing memory when contiguous); warns as
    PyTorch's."""
    import warnings

    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    n = 1
    for d in sizes:
        n *= int(d)
    if n != self.numel():
        raise RuntimeError(f"resize: requested resize to {'x'.join(map(str, sizes))} ({n} "
                           f"elements in total), but the given tensor has a size of "
                           f"{'x'.join(map(str, self.shape))} ({self.numel()} elements); the "
                           "out-of-place resize can only change the shape, keeping the number "
                           "of elements (use resize_ to change it)")
    return self.contiguous().view(*sizes)


def _resize_as(self, tensor):
    """Deprecated out-of-place ``resize_as``: ``resize(tensor.shape)``; warns as PyTorch's."""
    import warnings

    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    n = tensor.numel()
    if n != self.numel():
        raise RuntimeError(f"resize_as: the tensor has {self.numel()} elements, the target "
                           f"shape {tuple(tensor.shape)} has {n}")
    return self.contiguous().view(tensor.shape)


def _volatile_get(self):
    import warnings

    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


def _volatile_set(self, value):
    import warnings

    warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                  "instead.", UserWarning, stacklevel=2)


def _reinforce(self, reward):
    raise RuntimeError("reinforce() was removed (as in PyTorch): sample from a "
                       "fiamma.distributions distribution and minimise "
                       "-dist.log_prob(action) * reward instead")


def _module_load(self, other, assign=False):
    """How ``load_state_dict`` turns the state-dict value ``other`` into this parameter's new
    value when parameters are swapped (``torch.Tensor.module_load``): ``other.detach()`` with
    ``assign``, else ``self.copy_(other).detach()``. Tensor subclasses override it."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


def _new(self, *args, **kwargs):
    """Legacy ``x.new(...)``: ``fiamma.Tensor(...)`` with x's dtype."""
    from fiamma._creation import _legacy_tensor_new

    kwargs.setdefault("dtype", self.dtype)
    return _legacy_tensor_new(*args, **kwargs)


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    return _F().empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                              device=device, requires_grad=requires_grad)


def _dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory (by stride, ties by position)."""
    st = self.stride()
    return tuple(sorted(range(self.ndim), key=lambda i: (-st[i], i)))


def _is_pinned(self, device=None):
    from fiamma._device_copy import is_pinned

    return is_pinned(self)


def _pin_memory(self, device=None):
    from fiamma._device_copy import pin_memory

    return pin_memory(self)


def _inplace(fn):
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    return method


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


# Tensor methods of this module: attached by fiamma._methods (the one place that does)

# ---- index_reduce ------------------------------------------------------------------------------

_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def _index_reduce_args(op, self, dim, index, source, reduce):
    if not isinstance(self, Tensor) or not isinstance(source, Tensor) or \
            not isinstance(index, Tensor):
        raise TypeError(f"{op}(): expected Tensors for self, index and source, got "
                        f"{type(self).__name__}, {type(index).__name__} and "
                        f"{type(source).__name__}")
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"{op}(): Expected reduce to be one of prod, mean, amax or amin but "
                           f"got {reduce}.")
    if index._dtype is not D.int64 and index._dtype is not D.int32:
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: "
                           f"{index._dtype}")
    if index.dim() > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got shape "
                         f"{list(index.shape)}")
    if self._dtype is not source._dtype:
        raise RuntimeError(f"{op}(): self ({self._dtype}) and source ({source._dtype}) must "
                           "have the same scalar type")
    nd = max(self.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}(): Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    d = dim % nd
    sshape = list(self.shape) or [1]
    srcshape = list(source.shape) or [1]
    n = index.numel()
    if len(srcshape) != len(sshape) or srcshape[d] != n or \
            any(a != b for k, (a, b) in enumerate(zip(sshape, srcshape)) if k != d):
        raise RuntimeError(f"{op}(): source of shape {list(source.shape)} does not fit self of "
                           f"shape {list(self.shape)} with {n} indices along dim {d} (expected "
                           f"source's shape to be self's with size {n} at dim {d})")
    idx = index.reshape(-1)
    if n and bool(((idx < 0) | (idx >= sshape[d])).any()):  # no negative indices, as PyTorch
        bad = idx[(idx < 0) | (idx >= sshape[d])][0].item()
        raise IndexError(f"{op}(): index {bad} is out of range for dimension {d} with size "
                         f"{sshape[d]} (expected 0 <= index < {sshape[d]})")
    idx = idx.long()
    view = [1] * len(srcshape)
    view[d] = n
    return d, idx.reshape(view).expand(srcshape), source.reshape(srcshape)


def _index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """Reduce the slices of ``source`` into the slices of ``self`` named by ``index`` along
    ``dim``, in place: ``reduce`` is 'prod', 'mean', 'amax' or 'amin'; ``include_self=False``
    leaves ``self``'s values at the indexed slices out (PyTorch's ``Tensor.index_reduce_``).

    >>> import fiamma
    >>> x = fiamma.ones(3, 2)
    >>> x.index_reduce_(0, fiamma.tensor([0, 0, 2]), fiamma.full((3, 2), 3.0), "prod").tolist()
    [[9.0, 9.0], [1.0, 1.0], [3.0, 3.0]]
    """
    d, idx, src = _index_reduce_args("index_reduce_", self, dim, index, source, reduce)
    target = self if self.dim() else self.reshape(1)
    target.scatter_reduce_(d, idx, src, reduce, include_self=include_self)
    return self


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """Out-of-place :meth:`Tensor.index_reduce_` (``torch.index_reduce``).

    >>> import fiamma
    >>> fiamma.index_reduce(fiamma.zeros(2), 0, fiamma.tensor([1, 1]), fiamma.tensor([2.0, 6.0]),
    ...                     "mean", include_self=False).tolist()
    [0.0, 4.0]
    """
    d, idx, src = _index_reduce_args("index_reduce", input, dim, index, source, reduce)
    target = input if input.dim() else input.reshape(1)
    res = target.scatter_reduce(d, idx, src, reduce, include_self=include_self)
    res = res.reshape(input.shape)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"index_reduce(): argument 'out' must be Tensor, not "
                            f"{type(out).__name__}")
        if tuple(out.shape) != tuple(res.shape):
            out.resize_(res.shape)
        out.copy_(res)
        return out
    return res


def _top_inplace(fn):
    def inplace(input, other):
        return input.copy_(fn(input, other))
    inplace.__name__ = fn.__name__ + "_"
    inplace.__doc__ = f"In-place ``fiamma.{fn.__name__}``: writes into ``input`` and returns it."
    return inplace


gcd_ = _top_inplace(gcd)
lcm_ = _top_inplace(lcm)
ldexp_ = _top_inplace(ldexp)


def to_dlpack(tensor):
    """A DLPack capsule sharing ``tensor``'s memory (``torch.to_dlpack``; see
    ``fiamma.utils.dlpack``)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a fiamma.Tensor, got {type(tensor).__name__}")
    return tensor.__dlpack__()

METHODS = {
    **{n: _method(globals()[n]) for n in (
        "det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "svd", "qr",
        "cholesky", "lu", "lu_solve", "deg2rad", "rad2deg", "heaviside", "ldexp", "gcd", "lcm",
        "isreal", "geqrf", "ormqr", "eig", "symeig", "lstsq", "solve",
        "logcumsumexp", "quantile", "nanquantile", "cov", "corrcoef", "dist", "renorm",
        "is_nonzero", "is_same_size", "is_distributed", "conj", "conj_physical", "resolve_conj",
        "resolve_neg",
        "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
        "diagonal_scatter", "select_scatter", "slice_scatter", "as_strided_scatter")},
    "deg2rad_": deg2rad_, "rad2deg_": rad2deg_,
    **{n + "_": _inplace(globals()[n]) for n in ("heaviside", "ldexp", "gcd", "lcm", "renorm")},
    "conj_physical_": conj_physical_, "is_conj": is_conj,
    "cfloat": lambda self: self.to(D.complex64), "cdouble": lambda self: self.to(D.complex128),
    "is_neg": is_neg,
    "real": property(real, _set_real, doc="The real part (a view; see fiamma.real)."),
    "imag": property(imag, _set_imag, doc="The imaginary part (a view; see fiamma.imag)."),
    "angle": angle, "sgn": sgn, "sgn_": lambda self: self.copy_(sgn(self)),
    "fill_diagonal_": _fill_diagonal_, "sum_to_size": _sum_to_size, "apply_": _apply_,
    "hash_tensor": _method(hash_tensor), "prelu": _method(prelu),
    "xpu": _no_device("xpu", "XPU (Intel GPU)"), "ipu": _no_device("ipu", "IPU"),
    "mtia": _no_device("mtia", "MTIA"),
    "nonzero_static": lambda self, *, size, fill_value=-1: nonzero_static(
        self, size=size, fill_value=fill_value),
    "map_": _map_, "map2_": _map2_, "resize": _resize, "resize_as": _resize_as,
    "volatile": property(_volatile_get, _volatile_set,
                         doc="Always False (removed from PyTorch; warns)."),
    "reinforce": _reinforce, "module_load": _module_load, "new": _new,
    "new_empty_strided": _new_empty_strided,
    "dim_order": _dim_order, "is_pinned": _is_pinned, "pin_memory": _pin_memory,
    "const_data_ptr": lambda self: self.data_ptr(),
    "histogram": _method(histogram), "igamma": _method(igamma), "igammac": _method(igammac),
    "igamma_": _inplace(igamma), "igammac_": _inplace(igammac), "frexp": _method(frexp),
    "nextafter": _method(nextafter),
    "nextafter_": _inplace(nextafter), "set_": _set_,
    "stft": lambda self, *a, **k: _F().stft(self, *a, **k),
    "istft": lambda self, *a, **k: _F().istft(self, *a, **k),
    "name": property(lambda self: None, doc="None (PyTorch's answer for an unnamed tensor)."),
    "output_nr": property(lambda self: 0 if self._ag is None else self._ag.output_nr,
                          doc="Which output of its grad_fn this tensor is."),
    "cumsum_": lambda self, dim, *, dtype=None: self.copy_(self.cumsum(dim, dtype=dtype)),
    "cumprod_": lambda self, dim, *, dtype=None: self.copy_(self.cumprod(dim, dtype=dtype)),
    "index_reduce_": _index_reduce_,
    "index_reduce": lambda self, dim, index, source, reduce, *, include_self=True:
        index_reduce(self, dim, index, source, reduce, include_self=include_self),
}


# ---- randomized low-rank SVD / PCA (torch.svd_lowrank, torch.pca_lowrank) -------------------
# Halko, Martinsson and Tropp, "Finding structure with randomness" (2009): an orthonormal basis
# Q of A's range from A applied to a Gaussian test matrix, refined by ``niter`` subspace (power)
# iterations with re-orthonormalisation after every product (their Algorithm 4.4), then the exact
# SVD of the small matrix Q^H A (Algorithm 5.1); a wide matrix goes through its adjoint, so the
# basis is built on the long side. Composed of differentiable ops (matmul, linalg.qr,
# linalg.svd): the results carry gradients w.r.t. A (and M), the test matrix being a constant;
# as for linalg.svd they are defined where the computed singular values are distinct, and
# linalg.qr's derivative needs q <= min(m, n).

def _lowrank_dense(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected A to be a Tensor, got {type(A).__name__}")
    if A.is_sparse:
        A = A.to_dense()
    if A.ndim < 2:
        raise RuntimeError(f"{op}: expected A of shape (*, m, n) with at least 2 dimensions, "
                           f"got shape {list(A.shape)}")
    if not (A.is_floating_point() or A.is_complex()):
        raise RuntimeError(f"{op}: expected a floating point or complex tensor A, got {A.dtype}")
    return A


def _lowrank_count(v, name, op, default):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{op}: {name}(={v!r}) must be a non-negative integer")
    return v


def _range_basis(A, M, q, niter):
    """An orthonormal (..., m, q') basis (q' = min(m, q)) of the range of A - M (Halko et al.,
    Algorithm 4.4: Gaussian test matrix, niter subspace iterations)."""
    from fiamma._random import randn

    qr = _L().qr

    def times(Z):
        X = matmul(A, Z)
        return X if M is None else X - matmul(M, Z)

    def adj_times(Z):
        X = matmul(A.mH, Z)
        return X if M is None else X - matmul(M.mH, Z)

    R = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    Q = qr(times(R)).Q
    for _ in range(niter):
        Q = qr(adj_times(Q)).Q
        Q = qr(times(Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M, op):
    m, n = A.shape[-2:]
    if M is not None:
        if not isinstance(M, Tensor):
            raise TypeError(f"{op}: expected M to be a Tensor or None, got {type(M).__name__}")
        if M.is_sparse:
            M = M.to_dense()
        try:
            M = M.broadcast_to(A.shape)
        except RuntimeError:
            raise RuntimeError(f"{op}: M of shape {list(M.shape)} does not broadcast to A's "
                               f"shape {list(A.shape)}") from None
    wide = m < n
    if wide:  # work on the adjoint: the basis is built on the long side
        A = A.mH
        M = None if M is None else M.mH
    Q = _range_basis(A, M, q, niter)
    B = matmul(Q.mH, A)
    if M is not None:
        B = B - matmul(Q.mH, M)
    U, S, Vh = _L().svd(B, full_matrices=False)
    U = matmul(Q, U)
    V = Vh.mH
    return (V, S, U) if wide else (U, S, V)


def svd_lowrank(A, q=6, niter=2, M=None):
    """``(U, S, V)`` with A - M ~= U diag(S) V^H (M: None, or a tensor broadcast to A's shape),
    for A of shape (*, m, n): U (*, m, k), S (*, k), V (*, n, k) with k = min(q, m, n), by the
    randomized range finder with ``niter`` subspace iterations (see above). ``q``
    (default 6) should slightly overestimate the rank; results are random (seed with
    ``fiamma.manual_seed``). A sparse COO A (or M) is made dense first.

    >>> import fiamma
    >>> _ = fiamma.manual_seed(0)
    >>> A = fiamma.randn(20, 3, dtype=fiamma.float64) @ fiamma.randn(3, 10, dtype=fiamma.float64)
    >>> U, S, V = fiamma.svd_lowrank(A, q=4)
    >>> U.shape, S.shape, V.shape
    (fiamma.Size([20, 4]), fiamma.Size([4]), fiamma.Size([10, 4]))
    >>> bool(((U[:, :3] * S[:3]) @ V[:, :3].mT - A).abs().max() < 1e-9)
    True
    """
    op = "svd_lowrank"
    A = _lowrank_dense(A, op)
    q = _lowrank_count(q, "q", op, 6)
    niter = _lowrank_count(niter, "niter", op, 2)
    return _svd_lowrank(A, q, niter, M, op)


def pca_lowrank(A, q=None, center=True, niter=2):
    """Principal components of the rows of A (*, m, n): ``(U, S, V)`` of :func:`svd_lowrank`
    applied to A minus its column means (``center``; A itself otherwise). ``q`` defaults to
    min(6, m, n) and may not exceed min(m, n). The columns of V are the principal
    directions; ``S**2 / (m - 1)`` the variances along them. A sparse COO A is made dense
    first."""
    op = "pca_lowrank"
    A = _lowrank_dense(A, op)
    m, n = A.shape[-2:]
    k = builtins.min(m, n)
    if q is None:
        q = builtins.min(6, k)
    elif isinstance(q, bool) or not isinstance(q, int) or not 0 <= q <= k:
        raise ValueError(f"{op}: q(={q!r}) must be non-negative integer and not greater than "
                         f"min(m, n)={k}")
    niter = _lowrank_count(niter, "niter", op, 2)
    if center:
        A = A - A.mean(dim=-2, keepdim=True)
    return _svd_lowrank(A, q, niter, None, op)


# PyTorch's private run-time check helpers that library code calls directly (``torch._check``,
# ``torch._assert_async``, ...); fiamma runs eagerly, so each check is evaluated on the spot
_CHECK_DEFAULT = ("Expected cond to be True, but got False. (Could this error message be improved? "
            "If so, please report an enhancement request to PyTorch.)")


def _check_with(error_type, cond, message=None):
    """Raise ``error_type`` when the Python bool ``cond`` is False; ``message`` (a callable
    returning the text) is called only then."""
    if not isinstance(cond, builtins.bool):
        if isinstance(cond, Tensor):
            raise TypeError("cond must be a bool, but got a Tensor. For tensor conditions, "
                            "use torch._check_tensor_all() to assert that all elements are "
                            "true.")
        raise TypeError(f"cond must be a bool, but got {type(cond)}")
    if cond:
        return
    if message is None:
        text = _CHECK_DEFAULT
    elif not callable(message):
        raise TypeError("message must be a callable")
    else:
        text = str(message())
    raise error_type(text)


def _check(cond, message=None):
    """RuntimeError unless ``cond`` (a bool) is True.

    >>> import fiamma
    >>> fiamma._check(3 > 2)
    >>> fiamma._check(1 > 2, lambda: "too small")
    Traceback (most recent call last):
    RuntimeError: too small
    """
    _check_with(RuntimeError, cond, message)


def _check_index(cond, message=None):
    """IndexError unless ``cond`` is True."""
    _check_with(IndexError, cond, message)


def _check_value(cond, message=None):
    """ValueError unless ``cond`` is True."""
    _check_with(ValueError, cond, message)


def _check_type(cond, message=None):
    """TypeError unless ``cond`` is True."""
    _check_with(TypeError, cond, message)


def _check_not_implemented(cond, message=None):
    """NotImplementedError unless ``cond`` is True."""
    _check_with(NotImplementedError, cond, message)


def _check_is_size(i, message=None, *, max=None):
    """RuntimeError unless ``i`` (an int) is a valid size: ``0 <= i`` (and ``i <= max``)."""
    _check(i >= 0, message)
    if max is not None:
        _check(i <= max, message)


def _check_tensor_all_with(error_type, cond, message=None):
    """``error_type`` unless every element of the bool tensor ``cond`` is True."""
    if not isinstance(cond, Tensor):
        raise TypeError(f"cond must be a tensor, but got {type(cond)}")
    if cond.dtype is not D.bool:
        raise TypeError(f"cond tensor must have dtype torch.bool, but got {cond.dtype}")
    _check_with(error_type, builtins.bool(cond.all().item()), message)


def _check_tensor_all(cond, message=None):
    """RuntimeError unless every element of the bool tensor ``cond`` is True."""
    _check_tensor_all_with(RuntimeError, cond, message)


def _assert_async(input, assert_msg=None):
    """RuntimeError when the one-element tensor ``input`` is zero (False); the message is
    ``assert_msg`` when given. fiamma checks at once (PyTorch may defer the check on an
    accelerator).

    >>> import fiamma
    >>> fiamma._assert_async(fiamma.tensor(True))
    >>> fiamma._assert_async(fiamma.tensor(0), "was zero")
    Traceback (most recent call last):
    RuntimeError: was zero
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"_assert_async(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    n = input.numel()
    if n != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if n == 0
                           else "Boolean value of Tensor with more than one value is ambiguous")
    if not builtins.bool(input.item()):
        raise RuntimeError(assert_msg if assert_msg is not None else
                           "Expected Tensor with single nonzero value, but got zero")


def _shape_as_tensor(input):
    """The shape of ``input`` as a 1-D int64 tensor (on the CPU).

    >>> import fiamma
    >>> fiamma._shape_as_tensor(fiamma.zeros(2, 3))
    tensor([2, 3])
    """
    from fiamma._creation import tensor

    return tensor(list(input.shape), dtype=D.int64)  # on the CPU, as in PyTorch
