"""Operations on sparse compressed tensors (CSR, CSC, BSR, BSC).

Products: a 2-D CSR or CSC matrix (no blocks, no dense dims, float32/float64) times a dense
matrix runs the backend's ``csr_mm`` primitive (the C kernel ``fm_csr_mm``: one pass over the
rows, each row's output built from the dense rows its columns select), recorded for autograd
as ``sparse_csr_mm`` whose derivative is again ``csr_mm`` (the dense operand) and the sampled
product ``csr_sddmm`` (the values). CSC @ D and D @ CSR use the transposed kernel on the same
index arrays (a CSC matrix's arrays are the CSR arrays of its transpose). Everything else
(blocks, dense dims, other dtypes, a backend without the primitive) is composed of the COO
operations, which are differentiable dense ops.
"""

import builtins
import numbers
import sys

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check
from fiamma._layout import sparse_csc, sparse_csr
from fiamma._sparse_compressed import (
    SparseCompressed,
    SparseCSR,
    _blocks_of_dense,
    _entries,
    _grid,
    _is_coo,
    _make,
    _to_coo,
    _wrap,
    coo_to_compressed,
    unsupported,
)
from fiamma._tensor import Tensor

__all__ = ["binary", "mm", "matmul", "addmm", "sparse_sum", "sampled_addmm", "unary",
           "is_compressed", "hspmm", "sspaddmm", "saddmm", "dsmm", "hsmm", "segment_reduce"]


def _f():
    return sys.modules["fiamma"]


def is_compressed(x):
    return isinstance(x, SparseCompressed)


def _is_scalar(x):
    return isinstance(x, numbers.Number) and not isinstance(x, Tensor)


def _with_values(s, v):
    return _make(type(s), s._cp_ci, s._cp_pi, v, s._shape)


# ---- the kernel path --------------------------------------------------------------------------

def _plain_matrix(s):
    """Whether ``s`` is a 2-D CSR/CSC matrix without blocks or dense dims."""
    return not s._blocked and len(s._shape) == 2 and len(s._cp_ci._shape) == 1


def _as_csr(s):
    """(P, trans): P a CSR matrix with s's index arrays such that s = P (trans False) or s =
    P^T (trans True)."""
    if s.layout is sparse_csr:
        return s, False
    return _make(SparseCSR, s._cp_ci, s._cp_pi, s._cp_v, (s._shape[1], s._shape[0])), True


def _idx64(t):
    t = t if t._dtype is D.int64 else t.to(D.int64)
    return t if t.is_contiguous() else t.contiguous()


def csr_mm(p, d, trans, op="mm"):
    """P @ d (trans False) or P^T @ d for a 2-D CSR ``p`` and a dense 2-D ``d`` of its dtype;
    recorded for autograd as ``sparse_csr_mm``."""
    f = _f()
    m, k = p._shape
    v = p._cp_v
    rows_in, rows_out = (m, k) if trans else (k, m)
    if d._shape[0] != rows_in:
        a, b = (k, m) if trans else (m, k)
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({a}x{b} and "
                           f"{d._shape[0]}x{d._shape[1]})")
    n = d._shape[1]
    be = v._storage.backend
    fn = getattr(be, "csr_mm", None)
    if fn is None or v._dtype not in (D.float32, D.float64) or d._dtype is not v._dtype:
        return _composed_mm(p, d, trans)
    vc = v if v.is_contiguous() else v.contiguous()
    dc = d if d.is_contiguous() else d.contiguous()
    out = f.empty((rows_out, n), dtype=v._dtype, device=v.device)
    bad = []
    rc = fn(m, k, n, _idx64(p._cp_ci), _idx64(p._cp_pi), vc, dc, out, trans, bad)
    if rc:
        check(rc, op, _bad_detail(bad))
    if (vc.requires_grad or dc.requires_grad) and G.state.enabled:
        G.record(ops.sparse_csr_mm, out, (vc, dc),
                 {"pattern": _make(SparseCSR, p._cp_ci, p._cp_pi, vc, p._shape), "trans": trans})
    return out


def _bad_detail(bad):
    if not bad:
        return ""
    return f"{'crow_indices' if bad[0] == 0 else 'col_indices'} at position {bad[1]}"


def _composed_mm(p, d, trans):
    """P @ d or P^T @ d of dense differentiable ops (gather the dense rows, scale, scatter)."""
    f = _f()
    b, r, c, v = _entries(p)
    v = v.reshape(-1)
    src, dst = (r, c) if trans else (c, r)
    m, k = p._shape
    g = d[src] * v.unsqueeze(1)
    out = f.zeros(((k if trans else m), d._shape[1]), dtype=g.dtype, device=g.device)
    return out.index_put_((dst,), g, accumulate=True)


def csr_sddmm(p, a, bt, op="sampled_addmm"):
    """out[e] = dot(a[row(e)], bt[col(e)]) over the entries e of the 2-D CSR ``p``: a (m x n),
    bt (k x n); recorded as ``sparse_csr_sddmm``."""
    f = _f()
    m, k = p._shape
    if a._shape[0] != m or bt._shape[0] != k or a._shape[1] != bt._shape[1]:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                           f"({a._shape[0]}x{a._shape[1]} and {bt._shape[1]}x{bt._shape[0]}) "
                           f"for an input of size {m}x{k}")
    be = a._storage.backend
    fn = getattr(be, "csr_sddmm", None)
    if fn is None or a._dtype not in (D.float32, D.float64) or bt._dtype is not a._dtype:
        _, r, c, _v = _entries(p)
        return (a[r] * bt[c]).sum(-1)
    ac = a if a.is_contiguous() else a.contiguous()
    bc = bt if bt.is_contiguous() else bt.contiguous()
    out = f.empty((p._nnz(),), dtype=a._dtype, device=a.device)
    bad = []
    rc = fn(m, k, a._shape[1], _idx64(p._cp_ci), _idx64(p._cp_pi), ac, bc, out, bad)
    if rc:
        check(rc, op, _bad_detail(bad))
    if (ac.requires_grad or bc.requires_grad) and G.state.enabled:
        G.record(ops.sparse_csr_sddmm, out, (ac, bc), {"pattern": p.detach()})
    return out


# ---- products -----------------------------------------------------------------------------

def _check_dtypes(op, a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got: "
                           f"{a.dtype} != {b.dtype}")


def _compressed_dense(op, s, d):
    """compressed s @ dense d (d 1-D or 2-D; a batched s with a batched or 2-D d)."""
    _check_dtypes(op, s, d)
    if s.dense_dim():
        raise unsupported(f"{op} with dense dims", s.layout)
    nb = s._nbatch()
    if nb:
        return _batched(op, s, d)
    if d.ndim not in (1, 2):
        raise RuntimeError(f"{op}: the dense operand must be 1-D or 2-D for a 2-D sparse "
                           f"matrix, got shape {tuple(d.shape)}")
    m, k = s._shape
    if d._shape[0] != k:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and "
                           f"{'x'.join(map(str, d._shape))})")
    d = d.to(s.device)
    d2 = d.reshape(k, 1) if d.ndim == 1 else d
    if _plain_matrix(s) and s.layout in (sparse_csr, sparse_csc):
        p, trans = _as_csr(s)
        r = csr_mm(p, d2, trans, op)
    else:
        r = sys.modules["fiamma._sparse_ops"]._sparse_dense(op, _to_coo(s), d2)
    return r.reshape(m) if d.ndim == 1 else r


def _dense_compressed(op, d, s):
    """dense d @ compressed s (d 1-D or 2-D)."""
    _check_dtypes(op, d, s)
    if s._nbatch() or s.dense_dim():
        raise unsupported(f"{op} of a dense and a batched or hybrid sparse operand", s.layout)
    if d.ndim not in (1, 2):
        raise RuntimeError(f"{op}: the dense operand must be 1-D or 2-D, got shape "
                           f"{tuple(d.shape)}")
    k, n = s._shape
    if d._shape[-1] != k:
        raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, d._shape))} and {k}x{n})")
    d = d.to(s.device)
    d2 = d.reshape(1, k) if d.ndim == 1 else d
    if _plain_matrix(s) and s.layout in (sparse_csr, sparse_csc):
        p, trans = _as_csr(s)
        r = csr_mm(p, d2.mT, not trans, op).mT  # (S^T @ d^T)^T
    else:
        r = sys.modules["fiamma._sparse_ops"]._dense_sparse(op, d2, _to_coo(s))
    return r.reshape(n) if d.ndim == 1 else r


def _batched(op, s, d):
    f = _f()
    if s._nbatch() != 1:
        raise unsupported(f"{op} with more than one batch dim", s.layout)
    nb = s._shape[0]
    if d.ndim == 3 and d._shape[0] != nb:
        raise RuntimeError(f"{op}: batch sizes differ: {nb} (sparse) and {d._shape[0]} (dense)")
    if d.ndim not in (2, 3):
        raise RuntimeError(f"{op}: a batched sparse operand needs a 2-D or 3-D dense operand, "
                           f"got shape {tuple(d.shape)}")
    outs = []
    for i in range(nb):
        si = _make(type(s), s._cp_ci[i], s._cp_pi[i], s._cp_v[i], s._shape[1:])
        outs.append(_compressed_dense(op, si, d[i] if d.ndim == 3 else d))
    return f.stack(outs)


def _product(op, a, b):
    ca, cb = is_compressed(a), is_compressed(b)
    if ca and cb:
        if a._blocked or not _plain_matrix(a) or not _plain_matrix(b):
            raise unsupported(f"{op} of two sparse compressed operands", a.layout)
        return _compressed_dense(op, a, b.to_dense()).to_sparse(layout=a.layout)
    if _is_coo(a) or _is_coo(b):
        raise RuntimeError(f"{op}: a product of a sparse COO and a sparse compressed operand "
                           "is not supported; convert one of them")
    if ca:
        return _compressed_dense(op, a, b)
    return _dense_compressed(op, a, b)


def mm(input, mat2, *, out=None):
    """mm with a compressed operand: compressed @ dense and dense @ compressed are dense,
    compressed @ compressed is compressed (as torch.mm)."""
    for t, n in ((input, "input"), (mat2, "mat2")):
        if t.ndim != 2:
            raise RuntimeError(f"mm: {n} must be a matrix, got a {t.ndim}-D tensor")
    r = _product("mm", input, mat2)
    return r if out is None else _to_out("mm", out, r)


def matmul(input, other, *, out=None):
    if out is not None:
        return _to_out("matmul", out, matmul(input, other))
    if is_compressed(input) and not is_compressed(other):
        return _compressed_dense("matmul", input, other) if input._nbatch() or \
            other.ndim <= 2 else _unsupported_nd("matmul", input, other)
    if is_compressed(other) and not is_compressed(input) and input.ndim > 2:
        return _unsupported_nd("matmul", input, other)
    return _product("matmul", input, other)


def _unsupported_nd(op, a, b):
    raise NotImplementedError(f"{op}: a {a.ndim}-D and a {b.ndim}-D operand with a sparse "
                              "compressed one are not supported (2-D sparse matrices with 1-D "
                              "or 2-D dense operands, or a batched CSR with 2-D/3-D dense)")


def mv(input, vec):
    if not is_compressed(input) or vec.ndim != 1:
        raise RuntimeError("mv: expected a sparse compressed matrix and a 1-D vector")
    return _compressed_dense("mv", input, vec)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` with a compressed ``mat1`` or ``mat2`` (dense
    result); a compressed ``input`` is made dense."""
    if out is not None:
        return _dense_out("addmm", out, addmm(input, mat1, mat2, beta=beta, alpha=alpha))
    p = _product("addmm", mat1, mat2)
    if is_compressed(p):
        p = p.to_dense()
    if is_compressed(input):
        input = input.to_dense()
    if alpha != 1:
        p = p * alpha
    if beta == 0:
        return p
    return p + (input if beta == 1 else input * beta)


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` at ``input``'s stored positions (CSR result).
    Batched as PyTorch: ``mat1`` (``batch + (m, n)``) and ``mat2`` (``batch + (n, k)``) with the
    same batch; ``input`` has that batch too, or is 2-D (its pattern used for every batch)."""
    op = "sampled_addmm"
    if not is_compressed(input) or input.layout is not sparse_csr:
        raise RuntimeError(f"{op}: Expected result to have sparse csr layout, but got "
                           f"{getattr(input, 'layout', type(input).__name__)}")
    for t, n in ((mat1, "mat1"), (mat2, "mat2")):
        if not isinstance(t, Tensor) or is_compressed(t) or _is_coo(t):
            raise RuntimeError(f"{op}: {n} must be a dense tensor")
        if t.ndim < 2:
            raise RuntimeError(f"{op}: {n} must be a matrix or a batch of matrices, got a "
                               f"{t.ndim}-D tensor")
    if input.dense_dim():
        raise RuntimeError(f"{op}: Expected non-hybrid self tensor, got dense_dim "
                           f"{input.dense_dim()}")
    _check_dtypes(op, mat1, mat2)
    _check_dtypes(op, input, mat1)
    b1, b2 = tuple(mat1._shape[:-2]), tuple(mat2._shape[:-2])
    if b1 != b2:
        raise RuntimeError(f"{op}: Expected mat1 and mat2 to have the same batch size, but got "
                           f"{list(b1)} and {list(b2)}")
    nb = input._nbatch()
    bi = tuple(input._shape[:nb])
    if nb and bi != b1:
        raise RuntimeError(f"{op}: Expected self and mat1 to have the same batch size, but got "
                           f"{list(bi)} and {list(b1)}")
    m, k = input._shape[nb], input._shape[nb + 1]
    if mat1._shape[-2] != m or mat2._shape[-1] != k or mat1._shape[-1] != mat2._shape[-2]:
        raise RuntimeError(f"{op}: input of size {m}x{k} does not match mat1 @ mat2 of "
                           f"{mat1._shape[-2]}x{mat1._shape[-1]} and "
                           f"{mat2._shape[-2]}x{mat2._shape[-1]}")
    if not b1:
        prod = csr_sddmm(input, mat1, mat2.mT, op)
        vin = input._cp_v
        res_ci, res_pi = input._cp_ci, input._cp_pi
    else:
        f = _f()
        nbt = 1
        for x in b1:
            nbt *= x
        nnz = input._nnz()
        a3 = mat1.reshape(nbt, m, mat1._shape[-1])
        bt3 = mat2.mT.reshape(nbt, k, mat2._shape[-2])
        if nb:
            ci = input._cp_ci.reshape(nbt, m + 1)
            pi = input._cp_pi.reshape(nbt, nnz)
            vin = input._cp_v.reshape(nbt, nnz)
            pats = [_make(type(input), ci[i], pi[i], vin[i], (m, k)) for i in range(nbt)]
            vin = input._cp_v
            res_ci, res_pi = input._cp_ci, input._cp_pi
        else:  # one pattern for every batch
            pats = [input] * nbt
            vin = input._cp_v
            res_ci = input._cp_ci.expand(b1 + (m + 1,)).contiguous()
            res_pi = input._cp_pi.expand(b1 + (nnz,)).contiguous()
        prod = f.stack([csr_sddmm(pats[i], a3[i], bt3[i], op) for i in range(nbt)])
        prod = prod.reshape(b1 + (nnz,))
    if alpha != 1:
        prod = prod * alpha
    v = prod if beta == 0 else prod + (vin if beta == 1 else vin * beta)
    res = _make(SparseCSR, res_ci, res_pi, v, tuple(b1 or bi) + (m, k))
    if out is not None:
        return _compressed_out(op, out, res)
    return res


def _compressed_out(op, out, res):
    """Writes compressed ``res`` into compressed ``out`` (of its layout and dtype): ``out``
    takes ``res``'s pattern, values and size (PyTorch's out= replaces the pattern too)."""
    if not is_compressed(out) or out.layout is not res.layout:
        raise RuntimeError(f"{op}: Expected out to have {res.layout.name} layout, but got "
                           f"{getattr(out, 'layout', type(out).__name__)}")
    if out._dtype is not res._dtype:
        raise RuntimeError(f"{op}: Expected result and self to have the same dtype, but got "
                           f"{out._dtype} and {res._dtype}")
    out._cp_ci, out._cp_pi, out._cp_v = res._cp_ci, res._cp_pi, res._cp_v
    out._cp_leaf = False
    out._cp_gf = res._cp_gf
    out._shape = res._shape
    return out


def _dense_out(op, out, res):
    """Writes dense ``res`` into dense ``out`` (same dtype; an empty ``out`` is resized)."""
    if not isinstance(out, Tensor) or getattr(out, "_layout_alt", False):
        raise RuntimeError(f"{op}: out must be a dense (strided) tensor here, got "
                           f"{getattr(out, 'layout', type(out).__name__)}")
    if out._dtype is not res._dtype:
        raise RuntimeError(f"{op}: expected out to have dtype {res._dtype}, but got "
                           f"{out._dtype}")
    if tuple(out._shape) != tuple(res._shape):
        if out.numel():
            raise RuntimeError(f"{op}: out has size {tuple(out._shape)}, expected "
                               f"{tuple(res._shape)} (or an empty tensor)")
        out.resize_(res._shape)
    out.copy_(res)
    return out


def _to_out(op, out, res):
    return _compressed_out(op, out, res) if is_compressed(res) else _dense_out(op, out, res)


# ---- elementwise ----------------------------------------------------------------------------

def _same_shape(op, a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"{op}: expected the operands to have the same size, got "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")


def _dense_at(s, d, op):
    """The entries of dense ``d`` (s's shape) at s's stored positions, shaped as s's values."""
    _same_shape(op, s, d)
    b, r, c, _v = _entries(s)
    batch, nbt, rows, cols, bh, bw, dense = _grid(s)
    blocks = _blocks_of_dense(d.to(s.device), s._nbatch(), bh, bw, len(dense))
    return blocks[b, r, c].reshape(s._cp_v.shape)


def _add(op, a, b, alpha):
    ca, cb = is_compressed(a), is_compressed(b)
    if _is_scalar(a) or _is_scalar(b):
        raise unsupported(f"{op} of a sparse compressed tensor and a scalar",
                          (a if ca else b).layout)
    if ca and cb:
        _same_shape(op, a, b)
        if a.layout is not b.layout:
            raise RuntimeError(f"{op}: expected both operands to have the same layout, got "
                               f"{a.layout!r} and {b.layout!r}")
        if a is b:  # PyTorch 2.13 takes this for every compressed layout
            return _with_values(a, a._cp_v + (a._cp_v if alpha == 1 else a._cp_v * alpha))
        if a.layout is not sparse_csr:
            raise unsupported(op, a.layout)  # PyTorch 2.13 adds CSR tensors only
        dt = D.promote_types(a.dtype, b.dtype)
        ac, bc = _to_coo(a.to(dt)), _to_coo(b.to(dt))
        if alpha != 1:
            bc = bc * alpha
        s = (ac + bc).coalesce()
        return coo_to_compressed(s, a.layout, None, a.dense_dim(), op).to(a.device) \
            if a._nbatch() == 0 else _rebatch(s, a, op)
    f = _f()
    if cb:  # dense + compressed -> dense
        bd = b.to_dense()
        return f.add(a, bd, alpha=alpha) if alpha != 1 else a + bd
    ad = a.to_dense()
    return f.add(ad, b, alpha=alpha) if alpha != 1 else ad + b


def _rebatch(coo, like, op):
    return coo_to_compressed(coo, like.layout, None, like.dense_dim(), op)


def _mul(op, a, b):
    if is_compressed(b) and not is_compressed(a):
        a, b = b, a
    if _is_scalar(b) or (isinstance(b, Tensor) and not is_compressed(b) and
                         not _is_coo(b) and b.ndim == 0):
        return _with_values(a, a._cp_v * b)
    if is_compressed(b):
        if a.layout is not b.layout:
            raise RuntimeError(f"{op}: expected both operands to have the same layout, got "
                               f"{a.layout!r} and {b.layout!r}")
        return _mul_compressed(op, a, b)
    elif _is_coo(b):
        raise RuntimeError(f"{op}: a sparse compressed and a sparse COO operand are not "
                           "supported; convert one of them")
    return _with_values(a, a._cp_v * _dense_at(a, b, op))


def _mul_compressed(op, a, b):
    """a * b of two compressed tensors of one layout: the entries both store (PyTorch's
    intersection of the patterns)."""
    from fiamma._sparse_compressed import _build

    _same_shape(op, a, b)
    f = _f()
    bv = b._cp_v
    ones = _with_values(b, f.ones(bv._shape, dtype=D.bool, device=bv.device)).to_dense()
    bd = b.to_dense()
    ba, r, c, v = _entries(a)
    batch, nbt, rows, cols, bh, bw, dense = _grid(a)
    blocks = _blocks_of_dense(ones, a._nbatch(), bh, bw, len(dense))[ba, r, c]
    keep = blocks.reshape(blocks._shape[0], -1).any(1)
    idx = f.nonzero(keep).reshape(-1)
    vals = v[idx] * _blocks_of_dense(bd.to(v.dtype) if bd.dtype is not v.dtype else bd,
                                     a._nbatch(), bh, bw, len(dense))[ba[idx], r[idx], c[idx]]
    return _build(type(a), a._shape, a._nbatch(), bh, bw, ba[idx], r[idx], c[idx], vals, op,
                  index_dtype=a._cp_ci._dtype, presorted=True)


def _div(op, a, b, rounding_mode=None):
    if not is_compressed(a) or not (_is_scalar(b) or (isinstance(b, Tensor) and b.ndim == 0
                                                      and not is_compressed(b))):
        raise unsupported(f"{op} other than a sparse compressed tensor by a scalar",
                          (a if is_compressed(a) else b).layout)
    return _with_values(a, _f().div(a._cp_v, b, rounding_mode=rounding_mode))


def binary(name, a, b, out=None, alpha=1):
    """The elementwise binary op ``name`` with a compressed operand."""
    lay = (a if is_compressed(a) else b).layout
    if out is not None:
        raise unsupported(f"{name}(out=...)", lay)
    if name == "add":
        return _add(name, a, b, alpha)
    if name == "sub":
        return _add(name, a, b, -alpha)
    if name == "mul":
        return _mul(name, a, b)
    if name in ("div", "true_divide", "divide", "truediv"):
        return _div(name, a, b)
    raise unsupported(name, lay)


# unary ops that map 0 to 0, which PyTorch 2.13 runs on the values of a compressed tensor
ZERO_PRESERVING = frozenset("""
    abs absolute neg negative sin sqrt tanh sign sgn relu asin asinh atan atanh ceil floor round
    trunc fix expm1 log1p frac erf erfinv rad2deg deg2rad tan sinh angle isnan isinf isposinf
    isneginf signbit positive conj sinc_zero
""".split())


def unary(name, x, fn):
    """The unary op ``name`` on a compressed tensor: ``fn`` on its values when ``name`` maps
    zero to zero, else an error naming the op (as PyTorch's)."""
    if name not in ZERO_PRESERVING:
        raise RuntimeError(f"{name}: unsupported tensor layout {x.layout!r} (the op does not "
                           "map zero to zero; convert with .to_dense() first)")
    return _with_values(x, fn(x._cp_v))


# ---- reductions ------------------------------------------------------------------------------

def sparse_sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum of a compressed tensor: all of it (0-d dense), or over one sparse dim with
    ``keepdim=True`` (a CSR tensor holding the rows/columns that had entries, as PyTorch)."""
    v = input._cp_v if dtype is None else input._cp_v.to(dtype)
    if dim is None:
        return v.sum()
    if not keepdim:
        raise RuntimeError("sum: reduction operations on CSR tensors with keepdim=False is "
                           "unsupported")
    if not _plain_matrix(input) or input.layout is not sparse_csr:
        raise unsupported("sum over a dim", input.layout)
    f = _f()
    dims = [dim] if isinstance(dim, int) else list(dim)
    dims = sorted({_wrap(d, 2, "sum") for d in dims})
    dense = input.to_dense(dtype)
    if dims == [0, 1]:
        return dense.sum((0, 1), keepdim=True).to_sparse_csr()
    ci = input._cp_ci.to(D.int64)
    if dims == [1]:
        counts = ci[1:] - ci[:-1]
        keep = counts > 0
        rows = f.nonzero(keep).reshape(-1)
        crow = f.cat([f.zeros(1, dtype=D.int64), keep.to(D.int64).cumsum(0)])
        col = f.zeros(rows._shape[0], dtype=D.int64)
        vals = dense.sum(1)[rows]
        shape = (input._shape[0], 1)
    else:
        cols = f.unique(input._cp_pi.to(D.int64), sorted=True)
        crow = f.tensor([0, cols._shape[0]], dtype=D.int64)
        col = cols
        vals = dense.sum(0)[cols]
        shape = (1, input._shape[1])
    idt = input._cp_ci._dtype
    return _make(SparseCSR, crow.to(idt), col.to(idt), vals, shape)


# ---- the hybrid products of torch (hspmm, sspaddmm, saddmm, dsmm, hsmm) ------------------------

def _coo_arg(op, t, name):
    if not _is_coo(t):
        raise RuntimeError(f"{op}: {name} must be a sparse COO tensor, got layout "
                           f"{getattr(t, 'layout', type(t).__name__)}")
    if t.sparse_dim() != 2 or t.dense_dim() != 0:
        raise RuntimeError(f"{op}: {name} must be a 2-D sparse matrix (sparse_dim 2, dense_dim "
                           f"0), got sparse_dim {t.sparse_dim()} and dense_dim {t.dense_dim()}")


def hspmm(mat1, mat2, *, out=None):
    """Sparse COO ``mat1`` @ dense ``mat2`` as a hybrid COO tensor (sparse_dim 1, dense_dim 1):
    the rows of mat1 holding entries, with their dense product rows (``torch.hspmm``)."""
    make_coo = sys.modules["fiamma._sparse_coo"]._make
    op = "hspmm"
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported")
    _coo_arg(op, mat1, "mat1")
    p = mat1 @ mat2
    f = _f()
    rows = f.unique(mat1._sp_i[0], sorted=True) if mat1._nnz() else \
        f.zeros(0, dtype=D.int64, device=mat1.device)
    return make_coo(rows.reshape(1, -1), p[rows], tuple(p.shape), True)


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` with sparse COO ``input`` and ``mat1`` and a
    dense ``mat2``: a sparse COO result (``torch.sspaddmm``; entries of the product that are
    zero are not stored)."""
    op = "sspaddmm"
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported")
    _coo_arg(op, input, "input")
    _coo_arg(op, mat1, "mat1")
    p = mat1 @ mat2
    if tuple(p.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: input of size {tuple(input.shape)} does not match the "
                           f"product's {tuple(p.shape)}")
    ps = p.to_sparse()
    return (input * beta if beta != 1 else input) + (ps * alpha if alpha != 1 else ps)


def saddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``torch.saddmm``: the same as ``sspaddmm``."""
    return sspaddmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)


def dsmm(input, mat2):
    """Sparse COO ``input`` @ dense ``mat2``: dense (``torch.dsmm``)."""
    _coo_arg("dsmm", input, "input")
    return input @ mat2


def hsmm(mat1, mat2):
    """``torch.hsmm``: the same as ``hspmm``."""
    return hspmm(mat1, mat2)


# ---- segment_reduce -------------------------------------------------------------------------

_REDUCES = ("sum", "mean", "max", "min", "prod")


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduce consecutive segments of ``data`` along ``axis`` (``torch.segment_reduce``):
    ``lengths`` (segment sizes) or ``offsets`` (their boundaries, one more than segments), both
    with leading batch dims matching ``data``'s before ``axis``; ``reduce`` one of sum, mean,
    max, min, prod. An empty segment gives ``initial`` when given, else 0 (sum), 1 (prod),
    NaN (mean) or -inf/+inf (max/min); ``initial`` also takes part in every segment's
    reduction (mean: ``(sum + initial) / length``, PyTorch's rule). Differentiable w.r.t.
    ``data`` (max/min pass the gradient to every element equal to the result, shared evenly).

    >>> import fiamma
    >>> x = fiamma.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> fiamma.segment_reduce(x, "sum", lengths=fiamma.tensor([2, 0, 3])).tolist()
    [3.0, 0.0, 12.0]
    """
    op = "segment_reduce"
    f = _f()
    if reduce not in _REDUCES:
        raise RuntimeError(f"{op}: reduce must be one of {_REDUCES}, got {reduce!r}")
    if indices is not None:
        raise NotImplementedError(f"{op}: indices= is not supported (as PyTorch)")
    if (lengths is None) == (offsets is None):
        raise RuntimeError(f"{op}: exactly one of lengths and offsets must be given")
    if not isinstance(data, Tensor) or (_is_coo(data) or is_compressed(data)):
        raise TypeError(f"{op}: data must be a dense tensor")
    nd = data.ndim
    ax = _wrap(axis, nd, op)
    if offsets is not None:
        offsets = offsets if isinstance(offsets, Tensor) else f.tensor(offsets)
        if offsets._dtype not in (D.int32, D.int64):
            raise RuntimeError(f"{op}: offsets must be int32 or int64, got {offsets._dtype}")
        if offsets.ndim != ax + 1 or tuple(offsets._shape[:ax]) != tuple(data._shape[:ax]):
            raise RuntimeError(f"{op}: offsets must have shape {tuple(data._shape[:ax])} + "
                               f"(segments + 1,), got {tuple(offsets._shape)}")
        lengths = offsets[..., 1:] - offsets[..., :-1]
        start = offsets[..., :1].to(D.int64)
    else:
        lengths = lengths if isinstance(lengths, Tensor) else f.tensor(lengths)
        if lengths._dtype not in (D.int32, D.int64):
            raise RuntimeError(f"{op}: lengths must be int32 or int64, got {lengths._dtype}")
        if lengths.ndim != ax + 1 or tuple(lengths._shape[:ax]) != tuple(data._shape[:ax]):
            raise RuntimeError(f"{op}: lengths must have shape {tuple(data._shape[:ax])} + "
                               f"(segments,), got {tuple(lengths._shape)}")
        start = None
    lengths = lengths.to(D.int64)
    size = data._shape[ax]
    lb = lengths.reshape(-1, lengths._shape[-1]) if lengths.ndim else lengths.reshape(1, 1)
    if lengths.numel():
        if builtins.bool((lengths < 0).any()):
            raise RuntimeError(f"{op}: lengths must be nonnegative, got {lengths.tolist()}")
    totals = lb.sum(1)
    if start is not None:
        sb = start.reshape(-1)
        if builtins.bool((sb != 0).any()):
            raise RuntimeError(f"{op}: offsets must start at 0, got {sb.tolist()}")
    if not unsafe:
        if totals.numel() and builtins.bool((totals != size).any()):
            raise RuntimeError(f"{op}: the segments must cover dim {ax} of data exactly "
                               f"(size {size}), but their lengths add up to {totals.tolist()}")
    nseg = lengths._shape[-1]
    # data as (batch, size, rest); segment ids per batch row
    batch = tuple(data._shape[:ax])
    rest = tuple(data._shape[ax + 1:])
    nbt = 1
    for s in batch:
        nbt *= s
    x = data.reshape((nbt, size) + rest)
    ident = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"),
             "min": float("inf")}[reduce]
    dt = data._dtype
    outs = []
    for i in range(nbt):
        seg = f.repeat_interleave(f.arange(nseg, device=data.device), lb[i])
        xi = x[i]
        used = seg._shape[0]
        if used > size:
            raise RuntimeError(f"{op}: the lengths of batch {i} add up to {used}, more than "
                               f"dim {ax} of data (size {size})")
        if used < size:  # unsafe=True: the segments cover a prefix of the data
            xi = xi[:used]
        ix = seg.reshape((used,) + (1,) * len(rest)).expand((used,) + rest)
        base = f.full((nseg,) + rest, ident, dtype=dt, device=data.device)
        mode = {"sum": "sum", "mean": "sum", "prod": "prod", "max": "amax",
                "min": "amin"}[reduce]
        r = base.scatter_reduce(0, ix, xi, mode, include_self=reduce in ("sum", "mean", "prod"))
        li = lb[i].reshape((nseg,) + (1,) * len(rest))
        empty = (li == 0).expand(r.shape)
        if reduce == "mean":  # with initial: (sum + initial) / length, as PyTorch's
            r = (r / li.to(r.dtype)) if initial is None else \
                f.where(empty, f.full_like(r, initial), (r + initial) / li.to(r.dtype))
        elif initial is not None:
            if reduce in ("max", "min"):
                lim = f.full_like(r, initial)
                r = f.where(empty, lim, f.maximum(r, lim) if reduce == "max" else
                            f.minimum(r, lim))
            elif reduce == "sum":
                r = r + initial
            else:
                r = r * initial
        outs.append(r)
    res = f.stack(outs) if nbt > 1 or batch else outs[0].unsqueeze(0)
    return res.reshape(batch + (nseg,) + rest)


# ---- Tensor methods of the compressed classes -------------------------------------------------

def _method_table():
    def radd(self, other):
        return binary("add", other, self)

    def rsub(self, other):
        return binary("sub", other, self)

    def neg(self):
        return _with_values(self, -self._cp_v)

    def rmatmul(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        return matmul(other, self)

    def rtruediv(self, other):
        raise unsupported("div with a sparse divisor", self.layout)

    def method_sum(self, dim=None, keepdim=False, *, dtype=None):
        return sparse_sum(self, dim, keepdim, dtype=dtype)

    def mul_(self, other):
        self._cp_v = _mul("mul_", self, other)._cp_v.to(self._dtype)
        return self

    def div_(self, other):
        self._cp_v = _div("div_", self, other)._cp_v.to(self._dtype)
        return self

    def to_sparse_coo(self):
        return _to_coo(self)

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
        "sum": method_sum,
        "mm": lambda self, mat2: mm(self, mat2),
        "mv": lambda self, vec: mv(self, vec),
        "matmul": lambda self, other: matmul(self, other),
        "addmm": None,
        "to_sparse_coo": to_sparse_coo,
    }


for _name, _fn in _method_table().items():
    if _fn is None:
        continue
    if getattr(_fn, "__name__", "") == "<lambda>":
        _fn.__name__ = _name
    setattr(SparseCompressed, _name, _fn)
