"""The array API standard's ``linalg`` extension over fiamma.linalg, and the linear algebra
functions of the main namespace (matmul, matrix_transpose, tensordot, vecdot)."""

import builtins
import math
from collections import namedtuple

import fiamma
from fiamma import linalg as _la
from fiamma.array_api._dtypes import binary, check_array
from fiamma.array_api._statistical import accumulation_dtype, norm_axes

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
    "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]

EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
QRResult = namedtuple("QRResult", "Q R")
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
SVDResult = namedtuple("SVDResult", "U S Vh")


def _matrices(x, op):
    check_array(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a stack of matrices (at least 2 dimensions), got "
                         f"shape {tuple(x.shape)}")
    return x


def _float(x):
    return x if x._dtype._kind >= 2 else x.to(fiamma.get_default_dtype())


def matmul(x1, x2, /):
    """The matrix product (NumPy's rules for 1-D operands and broadcast stacks).

    >>> import fiamma.array_api as xp
    >>> xp.matmul(xp.asarray([[1, 2]]), xp.asarray([[3], [4]])).tolist()
    [[11]]
    """
    a, b = binary(check_array(x1, "matmul"), check_array(x2, "matmul"), "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension")
    return fiamma.matmul(a, b)


def matrix_transpose(x, /):
    """The transpose of the last two axes (a view).

    >>> import fiamma.array_api as xp
    >>> tuple(xp.matrix_transpose(xp.zeros((2, 3, 4))).shape)
    (2, 4, 3)
    """
    return _matrices(x, "matrix_transpose").mT


def tensordot(x1, x2, /, *, axes=2):
    """The sum of products over ``axes`` (an int: last/first axes, or two sequences).

    >>> import fiamma.array_api as xp
    >>> tuple(xp.tensordot(xp.ones((2, 3)), xp.ones((3, 4)), axes=1).shape)
    (2, 4)
    """
    a, b = binary(x1, x2, "tensordot")
    if isinstance(axes, builtins.int):
        if axes < 0:
            raise ValueError(f"tensordot: axes must be non-negative, got {axes}")
        return fiamma.tensordot(a, b, dims=axes)
    return fiamma.tensordot(a, b, dims=(list(axes[0]), list(axes[1])))


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product of vectors along ``axis`` (the first operand conjugated), broadcast.

    >>> import fiamma.array_api as xp
    >>> xp.vecdot(xp.asarray([[1, 2], [3, 4]]), xp.asarray([1, 1])).tolist()
    [3, 7]
    """
    a, b = binary(check_array(x1, "vecdot"), check_array(x2, "vecdot"), "vecdot")
    nd = builtins.max(a.ndim, b.ndim)
    if not -nd <= axis < nd:
        raise IndexError(f"vecdot: axis {axis} is out of range for {nd} dimensions")
    ax = axis - nd if axis >= 0 else axis
    if builtins.min(a.ndim, b.ndim) < -ax or a.shape[ax] != b.shape[ax]:
        raise ValueError(f"vecdot: the arrays' sizes along axis {axis} differ or are "
                         f"missing ({tuple(a.shape)} and {tuple(b.shape)})")
    if a._dtype._kind == 3:
        a = fiamma.conj_physical(a)
    return fiamma.sum(a * b, dim=ax, dtype=a._dtype)


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of symmetric (Hermitian) positive-definite matrices.

    >>> import fiamma.array_api as xp
    >>> xp.linalg.cholesky(xp.asarray([[4.0, 2.0], [2.0, 2.0]])).tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    x = _float(_matrices(x, "cholesky"))
    if x._dtype._kind != 3:
        return _la.cholesky(x, upper=upper)
    low = _cholesky_complex(x)
    return fiamma.conj_physical(low).mT.contiguous() if upper else low


def _cholesky_complex(a):
    # column by column (Cholesky-Banachiewicz), each step vectorised over the stack
    n = a.shape[-1]
    if a.shape[-2] != n:
        raise ValueError(f"cholesky: expected square matrices, got shape {tuple(a.shape)}")
    low = fiamma.zeros_like(a)
    for j in range(n):
        row = low[..., j, :j]
        d = fiamma.real(a[..., j, j]) - fiamma.sum(fiamma.abs(row) ** 2, dim=-1)
        if not builtins.bool(fiamma.all(d > 0)):
            raise _la.LinAlgError("linalg.cholesky: the input is not positive-definite (the "
                                  f"leading minor of order {j + 1} is not positive)")
        djj = fiamma.sqrt(d)
        low[..., j, j] = djj.to(a._dtype)
        if j + 1 < n:
            below = a[..., j + 1:, j] - fiamma.matmul(
                low[..., j + 1:, :j], fiamma.conj_physical(row).unsqueeze(-1)).squeeze(-1)
            low[..., j + 1:, j] = below / djj.unsqueeze(-1).to(a._dtype)
    return low


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (broadcast)."""
    a, b = binary(x1, x2, "cross")
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError(f"cross: axis {axis} must have size 3 in both arrays")
    a, b = fiamma.broadcast_tensors(a, b)
    return _la.cross(a, b, dim=axis)


def det(x, /):
    """The determinant of each matrix."""
    return _la.det(_float(_matrices(x, "det")))


def diagonal(x, /, *, offset=0):
    """The ``offset``-th diagonal of each matrix (the last two axes)."""
    return _la.diagonal(_matrices(x, "diagonal"), offset=offset)


def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of symmetric (Hermitian) matrices."""
    w, v = _la.eigh(_float(_matrices(x, "eigh")))
    return EighResult(w, v)


def eigvalsh(x, /):
    """Eigenvalues (ascending) of symmetric (Hermitian) matrices."""
    return _la.eigvalsh(_float(_matrices(x, "eigvalsh")))


def inv(x, /):
    """The inverse of each square matrix."""
    return _la.inv(_float(_matrices(x, "inv")))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """A matrix norm ('fro', 'nuc', inf, -inf, 1, -1, 2, -2) of each matrix (a real array).

    >>> import fiamma.array_api as xp
    >>> xp.linalg.matrix_norm(xp.asarray([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    x = _float(_matrices(x, "matrix_norm"))
    if x._dtype._kind != 3:
        return _la.matrix_norm(x, ord=ord, keepdim=keepdims)
    if ord in ("fro", 1, -1, math.inf, -math.inf):
        # these norms depend only on the entries' moduli
        return _la.matrix_norm(fiamma.abs(x), ord=ord, keepdim=keepdims)
    if ord not in (2, -2, "nuc"):
        raise ValueError(f"matrix_norm: unsupported ord {ord!r}")
    s = _la.svdvals(x)
    r = fiamma.sum(s, dim=-1) if ord == "nuc" else (
        fiamma.amax(s, dim=-1) if ord == 2 else fiamma.amin(s, dim=-1))
    return r.unsqueeze(-1).unsqueeze(-1) if keepdims else r


def matrix_power(x, n, /):
    """Each square matrix raised to the integer power ``n`` (inverse for n < 0)."""
    _matrices(x, "matrix_power")
    return _la.matrix_power(_float(x) if n < 0 else x, n)


def _cutoff(x, s, rtol):
    # rtol (default: max(M, N) * eps) times the largest singular value, per matrix
    if rtol is None:
        rtol = builtins.max(x.shape[-2:]) * fiamma.finfo(x._dtype).eps
    smax = fiamma.amax(s, dim=-1, keepdim=True)
    if isinstance(rtol, fiamma.Tensor):
        rtol = rtol.to(s._dtype).unsqueeze(-1)
    return smax * rtol


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above ``rtol`` times the largest.

    >>> import fiamma.array_api as xp
    >>> xp.linalg.matrix_rank(xp.asarray([[1.0, 2.0], [2.0, 4.0]])).item()
    1
    """
    x = _float(_matrices(x, "matrix_rank"))
    if x._dtype._kind != 3:
        return _la.matrix_rank(x, rtol=rtol)
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        return fiamma.zeros(x.shape[:-2], dtype=fiamma.int64, device=x.device)
    s = _la.svdvals(x)
    return fiamma.sum((s > _cutoff(x, s, rtol)).to(fiamma.int64), dim=-1)


def outer(x1, x2, /):
    """The outer product of two 1-D arrays."""
    a, b = binary(x1, x2, "outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("outer: expected two 1-D arrays")
    return fiamma.outer(a, b)


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse of each matrix.

    >>> import fiamma.array_api as xp
    >>> xp.linalg.pinv(xp.asarray([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    x = _float(_matrices(x, "pinv"))
    if x._dtype._kind != 3:
        return _la.pinv(x, rtol=rtol)
    m, n = x.shape[-2:]
    if m == 0 or n == 0:
        return fiamma.zeros(x.shape[:-2] + (n, m), dtype=x._dtype, device=x.device)
    u, s, vh = _la.svd(x, full_matrices=False)
    keep = s > _cutoff(x, s, rtol)
    sinv = fiamma.where(keep, 1.0 / fiamma.where(keep, s, fiamma.ones_like(s)),
                        fiamma.zeros_like(s))
    v = fiamma.conj_physical(vh).mT * sinv.to(x._dtype).unsqueeze(-2)
    return fiamma.matmul(v, fiamma.conj_physical(u).mT)


def qr(x, /, *, mode="reduced"):
    """The QR factorisation ('reduced' or 'complete') of each matrix."""
    q, r = _la.qr(_float(_matrices(x, "qr")), mode=mode)
    return QRResult(q, r)


def slogdet(x, /):
    """The sign (a unit complex number for complex matrices) and the log of the absolute
    value of each determinant.

    >>> import fiamma.array_api as xp
    >>> r = xp.linalg.slogdet(xp.asarray([[-2.0, 0.0], [0.0, 3.0]]))
    >>> r.sign.item(), round(r.logabsdet.item(), 4)
    (-1.0, 1.7918)
    """
    x = _float(_matrices(x, "slogdet"))
    if x._dtype._kind != 3:
        s, ld = _la.slogdet(x)
        return SlogdetResult(s, ld)
    n = x.shape[-1]
    if x.shape[-2] != n:
        raise ValueError(f"slogdet: expected square matrices, got shape {tuple(x.shape)}")
    real = x._dtype.to_real
    if n == 0:
        return SlogdetResult(fiamma.ones(x.shape[:-2], dtype=x._dtype, device=x.device),
                             fiamma.zeros(x.shape[:-2], dtype=real, device=x.device))
    # det(x) = det(Q) prod(diag(R)) with |det(Q)| = 1: no overflow for large determinants
    q, r = _la.qr(x)
    d = fiamma.diagonal(r, 0, -2, -1)
    mod = fiamma.abs(d)
    zero = fiamma.any(mod == 0, dim=-1)
    phase = fiamma.prod(d / fiamma.where(mod == 0, fiamma.ones_like(mod), mod).to(x._dtype),
                        dim=-1)
    sign = _la.det(q) * phase
    sign = sign / fiamma.abs(sign).to(x._dtype)
    logabs = fiamma.sum(fiamma.log(mod), dim=-1)
    sign = fiamma.where(zero, fiamma.zeros_like(sign), sign)
    return SlogdetResult(sign, logabs.to(real))


def solve(x1, x2, /):
    """The solution ``X`` of ``x1 @ X = x2`` (``x2`` 1-D: a vector)."""
    a, b = binary(_matrices(x1, "solve"), check_array(x2, "solve"), "solve")
    a, b = _float(a), _float(b)
    if b.ndim == 1:
        return _la.solve(a, b.unsqueeze(-1)).squeeze(-1)
    return _la.solve(a, b)


def svd(x, /, *, full_matrices=True):
    """The singular value decomposition ``U @ diag(S) @ Vh`` of each matrix."""
    u, s, vh = _la.svd(_float(_matrices(x, "svd")), full_matrices=full_matrices)
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """The singular values (descending) of each matrix."""
    return _la.svdvals(_float(_matrices(x, "svdvals")))


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the ``offset``-th diagonal of each matrix (sum's dtype rules)."""
    _matrices(x, "trace")
    dt = accumulation_dtype(x, dtype)
    return fiamma.sum(_la.diagonal(x, offset=offset).to(dt), dim=-1, dtype=dt)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector ``ord``-norm over ``axis`` (all axes, flattened, when None).

    >>> import fiamma.array_api as xp
    >>> xp.linalg.vector_norm(xp.asarray([3.0, 4.0])).item()
    5.0
    """
    check_array(x, "vector_norm")
    x = _float(x)
    if x.ndim == 0:
        return fiamma.abs(x).to(x._dtype.to_real)
    axes = norm_axes(axis, x.ndim, "vector_norm")
    if not axes:
        return fiamma.abs(x).to(x._dtype.to_real)
    r = _la.vector_norm(x, ord=ord, dim=axes, keepdim=keepdims)
    return r
