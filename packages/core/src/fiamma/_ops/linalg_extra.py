"""Linear-algebra functions composed of differentiable core ops (torch.linalg.matrix_exp,
householder_product, tensorinv, tensorsolve, vander; torch.cholesky_solve, cholesky_inverse,
triangular_solve, orgqr).

Each is built from matmul, linalg.solve / solve_triangular / inv and shape ops, so autograd
differentiates them through those ops' formulas (no formula of their own).

>>> import fiamma
>>> fiamma.linalg.matrix_exp(fiamma.zeros(2, 2)).tolist()
[[1.0, 0.0], [0.0, 1.0]]
>>> fiamma.linalg.vander(fiamma.tensor([1, 2, 3])).tolist()
[[1, 1, 1], [1, 2, 4], [1, 3, 9]]
"""

import collections
import importlib
import math

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._tensor import Tensor, wrap_dim

__all__ = ["matrix_exp", "cholesky_solve", "cholesky_inverse", "orgqr", "triangular_solve"]


def _F():
    return importlib.import_module("fiamma")


def _L():
    return importlib.import_module("fiamma.linalg")


def _tensor_arg(x, op, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def _float_or_complex(A, op):
    dt = A._dtype
    if dt._kind < 2 or dt in (D.float16, D.bfloat16):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. "
                           f"Got {dt}")


def _square(A, op, name="A"):
    if A.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


# Pade [13/13] numerator coefficients of exp (Higham 2005) and the 1-norm bound under which
# the [13/13] approximant reaches double precision
_B13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
        129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
        40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    """The matrix exponential exp(A) = sum_k A^k / k! of square matrices (batched; real or
    complex): scaling and squaring with the [13/13] Pade approximant, the scaling chosen per
    matrix from its 1-norm. Differentiable (through matmul and linalg.solve).

    >>> import fiamma
    >>> round(fiamma.linalg.matrix_exp(fiamma.tensor([[0.0, 1.0], [0.0, 0.0]]))[0, 1].item(), 6)
    1.0
    """
    op = "linalg.matrix_exp"
    _tensor_arg(A, op, "A")
    _square(A, op)
    _float_or_complex(A, op)
    F = _F()
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    if n == 1:
        return F.exp(A)
    if A.device.type == "meta":  # no values: the unscaled approximant gives the shapes
        norm1 = np.zeros(tuple(A.shape[:-2]))
    else:
        a = A.detach().cpu().numpy() if A.device.type != "cpu" else A.detach().numpy()
        norm1 = np.abs(a).sum(axis=-2).max(axis=-1)        # 1-norm per matrix
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.ceil(np.log2(norm1 / _THETA13))
    s = np.where(np.isfinite(s) & (s > 0), s, 0).astype(np.int64)
    smax = int(s.max()) if s.size else 0
    scale = F.tensor(np.ldexp(1.0, -s), dtype=D.float64).to(
        dtype=D.float32 if A._dtype in (D.float32, D.complex64) else D.float64,
        device=A.device)
    X = A * scale[..., None, None]
    eye = F.eye(n, dtype=A._dtype, device=A.device)
    b = _B13
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2)
             + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = (X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2)
         + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye)
    R = _L().solve(V - U, V + U)
    if smax:
        steps = F.tensor(s, device=A.device)[..., None, None]
        for k in range(smax):
            if (s > k).all():
                R = R @ R
            else:
                R = F.where(steps > k, R @ R, R)
    return R


def cholesky_solve(B, L, upper=False, *, out=None):
    """The solution X of A X = B for A = L L^H (or U^H U with ``upper``) given its Cholesky
    factor (``torch.cholesky_solve(B, L, upper=False)``), broadcast over batch dimensions.

    >>> import fiamma
    >>> L = fiamma.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> fiamma.cholesky_solve(L @ L.T @ fiamma.ones(2, 1), L).flatten().tolist()
    [1.0, 1.0]
    """
    op = "cholesky_solve"
    _bool_arg(upper, op, "upper", 3)
    _tensor_arg(B, op, "input")
    _tensor_arg(L, op, "input2")
    if B.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions.")
    _square(L, op, "A")
    if B._dtype is not L._dtype:
        raise RuntimeError(f"{op}: Expected b and A to have the same dtype, but found b of type "
                           f"{B._dtype} and A of type {L._dtype} instead.")
    _float_or_complex(L, op)
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"{op}: Incompatible matrix sizes for cholesky_solve: each A matrix "
                           f"is {L.shape[-2]} by {L.shape[-1]} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    st = _L().solve_triangular
    if upper:
        Y = st(L.mH, B, upper=False)
        X = st(L, Y, upper=True)
    else:
        Y = st(L, B, upper=False)
        X = st(L.mH, Y, upper=True)
    if out is not None:
        return _out(out, X, op)
    return X


def cholesky_inverse(L, upper=False, *, out=None):
    """The inverse of A = L L^H (or U^H U with ``upper``) from its Cholesky factor (batched).

    >>> import fiamma
    >>> fiamma.cholesky_inverse(fiamma.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
    [[0.25, 0.0], [0.0, 1.0]]
    """
    op = "cholesky_inverse"
    _bool_arg(upper, op, "upper", 2)
    _tensor_arg(L, op, "input")
    _square(L, op, "input")
    _float_or_complex(L, op)
    eye = _F().eye(L.shape[-1], dtype=L._dtype, device=L.device)
    X = cholesky_solve(eye.expand(L.shape), L, upper)
    if out is not None:
        return _out(out, X, op)
    return X


def _bool_arg(v, op, name, pos):
    if not isinstance(v, bool):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be bool, not "
                        f"{type(v).__name__}")


def _out(out, res, op):
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
    if out.shape != res.shape:
        out.resize_(res.shape)
    out.copy_(res)
    return out


def householder_product(A, tau, *, out=None):
    """The first n columns of the product H_1 ... H_k of Householder reflectors
    H_i = I - tau_i v_i v_i^H, v_i the i-th column of A below the diagonal with a unit i-th
    entry (LAPACK's orgqr / ungqr). A: (*, m, n), m >= n; tau: (*, k), k <= n.

    >>> import fiamma
    >>> fiamma.linalg.householder_product(fiamma.eye(2), fiamma.zeros(1)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    op = "linalg.householder_product"
    _tensor_arg(A, op, "A")
    _tensor_arg(tau, op, "tau")
    if A.dim() < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    if tau.dim() < 1 or tau.shape[-1] > n:
        k = tau.shape[-1] if tau.dim() else 0
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1] (got {n} and {k})")
    if A.dim() - tau.dim() != 1:
        raise RuntimeError(f"{op}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {tau.dim()} and input.ndim is equal to "
                           f"{A.dim()}")
    if tuple(A.shape[:-2]) != tuple(tau.shape[:-1]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if A._dtype is not tau._dtype:
        raise RuntimeError(f"{op}: tau dtype {tau._dtype} does not match input dtype "
                           f"{A._dtype}")
    _float_or_complex(A, op)
    F = _F()
    k = tau.shape[-1]
    eye = F.eye(m, n, dtype=A._dtype, device=A.device)
    V = F.tril(A, -1) + eye
    Q = eye.expand(A.shape).clone() if A.dim() > 2 else eye
    for i in range(k - 1, -1, -1):
        v = V[..., :, i:i + 1]                                   # (*, m, 1)
        t = tau[..., i:i + 1, None] if tau.dim() > 1 else tau[i]
        Q = Q - (t * v) @ (v.mH @ Q)
    if k == 0 and (A.requires_grad or tau.requires_grad):
        # no reflectors: the identity, requiring grad as PyTorch's (no gradient flows back)
        G.record(ops.no_gradient, Q, (A, tau), {})
    if out is not None:
        return _out(out, Q, op)
    return Q


def orgqr(input, input2):
    """``torch.orgqr(input, tau)``: ``linalg.householder_product``."""
    return householder_product(input, input2)


def tensorinv(A, ind=2, *, out=None):
    """The tensor inverse of A: X with tensordot(A, X, ind) the identity; X has shape
    ``A.shape[ind:] + A.shape[:ind]``.

    >>> import fiamma
    >>> fiamma.linalg.tensorinv(fiamma.eye(4).reshape(4, 2, 2), ind=1).shape
    fiamma.Size([2, 2, 4])
    """
    op = "linalg.tensorinv"
    _tensor_arg(A, op, "A")
    if not isinstance(ind, int) or ind <= 0:
        raise RuntimeError(f"{op}: Expected a strictly positive integer for 'ind', but got "
                           f"{ind}")
    left, right = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    p, q = math.prod(left), math.prod(right)
    if p != q:
        raise RuntimeError(f"{op}: Expected self to satisfy the requirement "
                           f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {q} != "
                           f"{p}")
    res = _L().inv(A.reshape(p, q)).reshape(right + left)
    if out is not None:
        return _out(out, res, op)
    return res


def tensorsolve(A, B, dims=None, *, out=None):
    """The X with tensordot(A, X, X.ndim) = B; ``dims``: dimensions of A moved to the end
    first. X has shape ``A.shape[B.ndim:]``.

    >>> import fiamma
    >>> fiamma.linalg.tensorsolve(fiamma.eye(4).reshape(2, 2, 4), fiamma.ones(2, 2)).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    op = "linalg.tensorsolve"
    _tensor_arg(A, op, "A")
    _tensor_arg(B, op, "B")
    if dims is not None:
        if not isinstance(dims, (list, tuple)):
            raise TypeError(f"{op}: dims must be a tuple of ints, got {type(dims).__name__}")
        dims = [wrap_dim(d, A.dim(), op) for d in dims]
        A = A.movedim(dims, list(range(A.dim() - len(dims), A.dim())))
    # as PyTorch: only sizes count, B is flattened (its shape need not be A.shape[:B.ndim])
    xshape = tuple(A.shape[B.dim():])
    q, p = math.prod(xshape), B.numel()
    if p != q:
        raise RuntimeError(f"{op}: Expected self to satisfy the requirement "
                           f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                           f"but got {q} != {p}")
    if math.prod(A.shape[:B.dim()]) != p:
        raise RuntimeError(f"{op}: A of shape {list(A.shape)} cannot be viewed as a {p} x {q} "
                           f"matrix (B has {p} elements)")
    res = _L().solve(A.reshape(p, q), B.reshape(p)).reshape(xshape)
    if out is not None:
        return _out(out, res, op)
    return res


def vander(x, *, N=None):
    """The Vandermonde matrix of x along its last dimension: column j is x^j (j < N, N
    defaulting to x.shape[-1]); shape ``x.shape + (N,)``. Differentiable (a cumulative
    product).

    >>> import fiamma
    >>> fiamma.linalg.vander(fiamma.tensor([2.0]), N=3).tolist()
    [[1.0, 2.0, 4.0]]
    """
    op = "linalg.vander"
    _tensor_arg(x, op, "x")
    if x.dim() < 1:
        raise RuntimeError("N must be greater than 1.")
    if N is None:
        N = x.shape[-1]
    if isinstance(N, bool) or not isinstance(N, int):
        raise TypeError(f"vander(): argument 'N' must be int, not {type(N).__name__}")
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    F = _F()
    if x._dtype is D.bool:
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           "tensors, but got Bool")
    ones = F.ones_like(x).unsqueeze(-1)
    rep = x.unsqueeze(-1).expand(tuple(x.shape) + (N - 1,))
    return F.cat([ones, F.cumprod(rep, -1)], -1)


_TS = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """PyTorch's old ``torch.triangular_solve(b, A)``: ``(X, A.clone())`` with X solving
    op(A) X = b, op(A) = A or A^T (``transpose``), A upper or lower triangular."""
    op = "triangular_solve"
    _tensor_arg(b, op, "input")
    _tensor_arg(A, op, "A")
    if transpose:
        A2, up = A.mT, not upper
    else:
        A2, up = A, upper
    X = _L().solve_triangular(A2, b, upper=up, unitriangular=unitriangular)
    res = _TS(X, A.clone())
    if out is not None:
        _out(out[0], X, op)
        _out(out[1], res[1], op)
        return _TS(out[0], out[1])
    return res


METHODS = {
    "matrix_exp": matrix_exp,
    "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse,
    "orgqr": orgqr,
    "triangular_solve": triangular_solve,
}
