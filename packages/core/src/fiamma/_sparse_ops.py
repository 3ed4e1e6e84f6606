"""Operations on sparse COO tensors, composed of differentiable dense ops on indices/values.

Products gather and scatter: ``S @ D`` adds ``values[:, None] * D[cols]`` into the rows of
the result (``index_put(accumulate=True)``; cost and memory O(nnz * D's columns)); ``D @ S``
the same along D's columns. Gradients therefore reach the dense operand and the sparse
operand's values (a sparse leaf's ``.grad`` is sparse with its pattern).
"""

import importlib
import numbers
import sys

from fiamma import _dtype as D
from fiamma._sparse_coo import SparseCOO, _linear, _make, _wrap, unsupported
from fiamma._tensor import Tensor

__all__ = ["binary", "mm", "spmm", "smm", "matmul", "addmm", "sparse_sum", "softmax", "log_softmax"]


def _f():
    return sys.modules["fiamma"]


def _is_scalar(x):
    return isinstance(x, numbers.Number) and not isinstance(x, Tensor)


def _is_sp(x):
    return isinstance(x, SparseCOO)


def _compressed(*xs):
    """The compressed-layout ops module when one of ``xs`` is a CSR/CSC/BSR/BSC tensor."""
    for x in xs:
        if getattr(x, "_compressed", False):
            return importlib.import_module("fiamma._sparse_compressed_ops")
    return None


def _no_nested(op, *xs):
    for x in xs:
        if getattr(x, "is_nested", False):
            raise NotImplementedError(f"{op}: not supported for nested tensors")


def _gather_dense(s, d, op):
    """The entries of dense ``d`` (broadcast to s's shape) at s's sparse coordinates:
    ``(nnz,) + dense_shape``."""
    if tuple(d.shape) != tuple(s._shape):
        try:
            d = d.expand(s._shape)
        except RuntimeError:
            raise RuntimeError(f"{op}: the dense operand's shape {tuple(d.shape)} does not "
                               f"broadcast to the sparse operand's {tuple(s._shape)}") from None
    sd = s._sp_i._shape[0]
    rows = 1
    for n in s._shape[:sd]:
        rows *= n
    flat = d.reshape((rows,) + tuple(s._shape[sd:]))
    return flat[_linear(s._sp_i, s._shape[:sd])]


def _same_shape(op, a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"{op}: sizes of the sparse operands must match, got "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"{op}: sparse_dim of the operands must match, got {a.sparse_dim()} "
                           f"and {b.sparse_dim()}")


def _promoted(op, a, b):
    dt = D.promote_types(a.dtype, b.dtype)
    return a.to(dt), b.to(dt)


def _add(op, a, b, alpha):
    """a + alpha * b, either side sparse or dense (or a scalar with a 0-nnz-free error)."""
    f = _f()
    if _is_scalar(a) or _is_scalar(b):
        raise unsupported(f"{op} of a sparse tensor and a scalar")
    if _is_sp(a) and _is_sp(b):
        _same_shape(op, a, b)
        a, b = _promoted(op, a, b)
        bv = b._sp_v if alpha == 1 else b._sp_v * alpha
        i = f.cat([a._sp_i, b._sp_i.to(a.device)], 1)
        v = f.cat([a._sp_v, bv.to(a.device)], 0)
        out = _make(i, v, a._shape, False)
        return out.coalesce() if a._sp_c and b._sp_c else out
    if _is_sp(b):  # dense + sparse -> dense
        bd = b.to_dense()
        return f.add(a, bd, alpha=alpha) if alpha != 1 else a + bd
    # sparse + dense -> dense (PyTorch 2.13 refuses this order; the sum is the same)
    ad = a.to_dense()
    return f.add(ad, b, alpha=alpha) if alpha != 1 else ad + b


def _mul(op, a, b):
    if _is_sp(b) and not _is_sp(a):
        a, b = b, a
    if _is_scalar(b) or (isinstance(b, Tensor) and not _is_sp(b) and b.ndim == 0):
        return _make(a._sp_i, a._sp_v * b, a._shape, a._sp_c)
    if _is_sp(b):
        # the product is zero off a's pattern: a's entries times b's dense values there
        _same_shape(op, a, b)
        b = b.to_dense()
    return _make(a._sp_i, a._sp_v * _gather_dense(a, b, op), a._shape, a._sp_c)


def _div(op, a, b, rounding_mode=None):
    if not _is_sp(a) or _is_sp(b):
        raise unsupported(f"{op} with a sparse divisor")
    f = _f()
    if _is_scalar(b) or (isinstance(b, Tensor) and b.ndim == 0):
        return _make(a._sp_i, f.div(a._sp_v, b, rounding_mode=rounding_mode), a._shape,
                     a._sp_c)
    return _make(a._sp_i, f.div(a._sp_v, _gather_dense(a, b, op), rounding_mode=rounding_mode),
                 a._shape, a._sp_c)


def binary(name, a, b, out=None, alpha=1):
    """The elementwise binary op ``name`` with a sparse operand (dense ops hand over here)."""
    cm = _compressed(a, b)
    if cm is not None:
        return cm.binary(name, a, b, out, alpha)
    if out is not None:
        raise unsupported(f"{name}(out=...)")
    if name == "add":
        return _add(name, a, b, alpha)
    if name == "sub":
        return _add(name, a, b, -alpha)
    if name == "mul":
        return _mul(name, a, b)
    if name in ("div", "true_divide", "divide", "truediv"):
        return _div(name, a, b)
    raise unsupported(name)


# ---- products ------------------------------------------------------------------------------

def _check_matrix(op, s, what):
    if len(s._shape) != 2 or s.sparse_dim() != 2:
        raise RuntimeError(f"{op}: {what} must be a 2-D sparse matrix with sparse_dim 2, got "
                           f"shape {tuple(s._shape)} with sparse_dim {s.sparse_dim()}")


def _check_dtypes(op, a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got: "
                           f"{a.dtype} != {b.dtype}")


def _sparse_dense(op, s, d):
    """(M, K) sparse @ (K, N) or (K,) dense -> dense."""
    f = _f()
    _check_matrix(op, s, "the sparse operand")
    if _is_sp(d):
        raise RuntimeError(f"{op}: internal: dense operand expected")
    if d.ndim not in (1, 2):
        raise RuntimeError(f"{op}: the dense operand must be 1-D or 2-D, got shape "
                           f"{tuple(d.shape)}")
    _check_dtypes(op, s, d)
    m, k = s._shape
    if d.shape[0] != k:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and "
                           f"{'x'.join(map(str, d.shape))})")
    d = d.to(s.device)
    i, v = s._sp_i, s._sp_v
    g = d[i[1]]
    g = g * (v.unsqueeze(1) if d.ndim == 2 else v)
    out = f.zeros((m,) + tuple(d.shape[1:]), dtype=g.dtype, device=g.device)
    return out.index_put_((i[0],), g, accumulate=True)


def _dense_sparse(op, d, s):
    """(M, K) dense @ (K, N) sparse -> (M, N) dense; a 1-D dense operand is a row vector."""
    f = _f()
    _check_matrix(op, s, "the sparse operand")
    if d.ndim not in (1, 2):
        raise RuntimeError(f"{op}: the dense operand must be 1-D or 2-D, got shape "
                           f"{tuple(d.shape)}")
    _check_dtypes(op, d, s)
    k, n = s._shape
    if d.shape[-1] != k:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, d.shape))} and {k}x{n})")
    d = d.to(s.device)
    i, v = s._sp_i, s._sp_v
    g = d.t()[i[0]] * (v.unsqueeze(1) if d.ndim == 2 else v)  # (nnz, M): d's columns, scaled
    out = f.zeros((n,) + tuple(d.shape[:-1]), dtype=g.dtype, device=g.device)
    return out.index_put_((i[1],), g, accumulate=True).t()


def _product(op, a, b):
    if _is_sp(a) and _is_sp(b):
        return _sparse_dense(op, a, b.to_dense()).to_sparse()
    if _is_sp(a):
        return _sparse_dense(op, a, b)
    return _dense_sparse(op, a, b)


def mm(input, mat2, *, out=None):
    """mm with a sparse operand: sparse @ dense and dense @ sparse give dense, sparse @ sparse
    gives sparse (as ``torch.mm``)."""
    _no_nested("mm", input, mat2)
    cm = _compressed(input, mat2)
    if cm is not None:
        return cm.mm(input, mat2, out=out)
    if out is not None:
        raise unsupported("mm(out=...)")
    for t, n in ((input, "input"), (mat2, "mat2")):
        if not isinstance(t, Tensor):
            raise TypeError(f"mm: {n} must be a Tensor, got {type(t).__name__}")
        if t.ndim != 2:
            raise RuntimeError(f"mm: {n} must be a matrix, got a {t.ndim}-D tensor")
    return _product("mm", input, mat2)


def spmm(input, mat2):
    """``input @ mat2`` for a sparse COO ``input`` and a dense ``mat2`` (dense result; as
    ``torch.spmm``).

    >>> import fiamma
    >>> s = fiamma.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0], (2, 2))
    >>> fiamma.spmm(s, fiamma.ones(2, 3)).tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    """
    if not _is_sp(input) and _compressed(input) is None:
        raise TypeError(f"spmm: input must be a sparse tensor, got layout "
                        f"{getattr(input, 'layout', type(input).__name__)}")
    return mm(input, mat2)


def smm(input, mat):
    """Sparse ``input`` @ dense ``mat`` as a sparse tensor (``torch.smm``)."""
    if not _is_sp(input):
        raise TypeError("smm: input must be a sparse COO tensor")
    return mm(input, mat).to_sparse()


def matmul(input, other, *, out=None):
    """matmul with a sparse operand (2-D sparse with 1-D or 2-D dense)."""
    cm = _compressed(input, other)
    if cm is not None:
        return cm.matmul(input, other, out=out)
    if out is not None:
        raise unsupported("matmul(out=...)")
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise TypeError("matmul: both operands must be Tensors")
    if _is_sp(input) and not _is_sp(other) and other.ndim == 1:
        return _sparse_dense("matmul", input, other)
    if _is_sp(other) and not _is_sp(input) and input.ndim == 1:
        return _dense_sparse("matmul", input, other)
    if input.ndim != 2 or other.ndim != 2:
        raise unsupported(f"matmul of {input.ndim}-D and {other.ndim}-D operands")
    return _product("matmul", input, other)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` or ``mat2`` (dense
    result; a sparse ``input`` is densified)."""
    _no_nested("addmm", input, mat1, mat2)
    cm = _compressed(input, mat1, mat2)
    if cm is not None:
        return cm.addmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)
    if out is not None:
        raise unsupported("addmm(out=...)")
    p = _product("addmm", mat1, mat2)
    if _is_sp(p):
        p = p.to_dense()
    if _is_sp(input):
        input = input.to_dense()
    if alpha != 1:
        p = p * alpha
    if beta == 0:  # input is ignored (its NaNs do not propagate), as the dense addmm
        return p
    return p + (input if beta == 1 else input * beta)


# ---- reductions -----------------------------------------------------------------------------

def sparse_sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum of a sparse tensor: all of it (a 0-d dense tensor), or over ``dim``: sparse while
    sparse dims remain (coalesced), dense once every sparse dim is summed (as torch.sum and
    torch.sparse.sum)."""
    cm = _compressed(input)
    if cm is not None:
        return cm.sparse_sum(input, dim, keepdim, dtype=dtype)
    if keepdim:
        raise unsupported("sum(keepdim=True)")
    v = input._sp_v if dtype is None else input._sp_v.to(dtype)
    if dim is None:
        return v.sum()
    nd = len(input._shape)
    dims = [dim] if isinstance(dim, int) else list(dim)
    dims = sorted({_wrap(d, nd, "sum") for d in dims})
    sd = input.sparse_dim()
    ddims = [d - sd + 1 for d in dims if d >= sd]
    if ddims:
        v = v.sum(ddims)
    elif v.dtype._kind < 2:  # integers and bool sum to int64, as the dense sum
        v = v.to(D.int64)
    keep = [d for d in range(sd) if d not in dims]
    if not keep:
        return v.sum(0)
    f = _f()
    i = input._sp_i.index_select(0, f.tensor(keep, device=input._sp_i.device))
    shape = tuple(input._shape[d] for d in range(nd) if d not in dims)
    return _make(i, v, shape, False).coalesce()


# ---- softmax over the specified entries ------------------------------------------------------

def _softmax_parts(input, dim, dtype, op):
    f = _f()
    if not _is_sp(input):
        raise TypeError(f"{op}: expected a sparse COO tensor, got a dense one")
    s = input.coalesce()
    if dtype is not None:
        s = s.to(dtype)
    nd = len(s._shape)
    d = _wrap(dim, nd, op)
    sd = s.sparse_dim()
    if d >= sd:
        return s, None, None, d - sd + 1
    others = [k for k in range(sd) if k != d]
    if others:
        i = s._sp_i.index_select(0, f.tensor(others, device=s._sp_i.device))
        key = _linear(i, tuple(s._shape[k] for k in others))
    else:
        key = f.zeros(s._nnz(), dtype=D.int64, device=s.device)
    _, inv = f.unique(key, sorted=True, return_inverse=True)
    return s, inv, int(inv.max().item()) + 1 if s._nnz() else 0, None


def _group_softmax(s, inv, groups, log):
    f = _f()
    v = s._sp_v
    ix = inv.reshape((-1,) + (1,) * (v.ndim - 1)).expand(v.shape)
    # the shift only guards exp against overflow; softmax does not depend on it
    m = f.zeros((groups,) + tuple(v.shape[1:]), dtype=v.dtype, device=v.device)
    m = m.scatter_reduce(0, ix, v.detach(), "amax", include_self=False)
    z = v - m[inv]
    e = z.exp()
    den = f.zeros(m.shape, dtype=v.dtype, device=v.device).index_put_((inv,), e, accumulate=True)
    if log:
        return z - den.log()[inv]
    return e / den[inv]


def softmax(input, dim, *, dtype=None):
    """Softmax of a sparse tensor along ``dim`` over its specified entries only (the missing
    ones count as -inf): a sparse tensor with the coalesced pattern of ``input``.

    >>> import fiamma
    >>> s = fiamma.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [1.0, 1.0, 5.0], (2, 3))
    >>> fiamma.sparse.softmax(s, 1).to_dense().tolist()
    [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]
    """
    s, inv, groups, ddim = _softmax_parts(input, dim, dtype, "softmax")
    if ddim is not None:
        return _make(s._sp_i, s._sp_v.softmax(ddim), s._shape, True)
    return _make(s._sp_i, _group_softmax(s, inv, groups, False), s._shape, True)


def log_softmax(input, dim, *, dtype=None):
    """Log of ``softmax`` over the specified entries (a sparse tensor)."""
    s, inv, groups, ddim = _softmax_parts(input, dim, dtype, "log_softmax")
    if ddim is not None:
        return _make(s._sp_i, s._sp_v.log_softmax(ddim), s._shape, True)
    return _make(s._sp_i, _group_softmax(s, inv, groups, True), s._shape, True)


# ---- Tensor methods of the sparse class --------------------------------------------------------

def _method_table():
    def radd(self, other):
        return binary("add", other, self)

    def rsub(self, other):
        return binary("sub", other, self)

    def neg(self):
        return _make(self._sp_i, -self._sp_v, self._shape, self._sp_c)

    def rmatmul(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        return matmul(other, self)

    def rtruediv(self, other):
        raise unsupported("div with a sparse divisor")

    def sparse_method_sum(self, dim=None, keepdim=False, *, dtype=None):
        return sparse_sum(self, dim, keepdim, dtype=dtype)

    def mul_(self, other):
        self._sp_v = _mul("mul_", self, other)._sp_v.to(self._dtype)
        return self

    def div_(self, other):
        r = _div("div_", self, other)
        self._sp_v = r._sp_v.to(self._dtype)
        return self

    return {
        "__add__": lambda self, other: binary("add", self, other),
        "__radd__": radd,
        "__sub__": lambda self, other: binary("sub", self, other),
        "__rsub__": rsub,
        "__mul__": lambda self, other: _mul("mul", self, other),
        "__rmul__": lambda self, other: _mul("mul", other, self),
        "__truediv__": lambda self, other: _div("div", self, other),
        "__rtruediv__": rtruediv,
        "__neg__": neg,
        "__pos__": lambda self: self,
        "__matmul__": lambda self, other: matmul(self, other),
        "__rmatmul__": rmatmul,
        "add": lambda self, other, *, alpha=1: binary("add", self, other, alpha=alpha),
        "sub": lambda self, other, *, alpha=1: binary("sub", self, other, alpha=alpha),
        "mul": lambda self, other: _mul("mul", self, other),
        "div": lambda self, other, *, rounding_mode=None: _div("div", self, other,
                                                              rounding_mode),
        "true_divide": lambda self, other: _div("true_divide", self, other),
        "mul_": mul_,
        "div_": div_,
        "neg": neg,
        "negative": neg,
        "sum": sparse_method_sum,
        "mm": lambda self, mat2: mm(self, mat2),
        "matmul": lambda self, other: matmul(self, other),
        "smm": lambda self, mat2: smm(self, mat2),
        "softmax": lambda self, dim, dtype=None: softmax(self, dim, dtype=dtype),
        "log_softmax": lambda self, dim, dtype=None: log_softmax(self, dim, dtype=dtype),
    }


for _name, _fn in _method_table().items():
    if callable(_fn) and getattr(_fn, "__name__", "") == "<lambda>":
        _fn.__name__ = _name
    setattr(SparseCOO, _name, _fn)
