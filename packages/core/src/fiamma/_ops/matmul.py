"""Matrix products with PyTorch's names and rules: matmul (``@``), mm, bmm, mv, dot, vdot,
inner, outer/ger, and the fused ``beta * input + alpha * product`` forms addmm, addmv, addr,
baddbmm, addbmm (and their in-place methods).

Every product is one call of the C kernel ``fm_matmul`` (or ``fm_mm`` without a batch): it
takes the operands with their strides as they are (transposed and sliced views included, batch
dims broadcast through zero strides), so no operand is copied here. float32 runs on fiamma's
own AVX-512 kernel or OpenBLAS, float64 on OpenBLAS, float16/bfloat16 in float32, integers in
int64 (wrapping like PyTorch), bool as OR of ANDs. Threads: ``fiamma.set_num_threads`` sets
them for both kernels. The kernels are the backend's ``mm`` / ``matmul`` primitives.
"""

import builtins
import importlib as _importlib
import numbers

import numpy as np

from fiamma import _autocast as _AC, _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._backend.cpu import operators as _cpu_operators
from fiamma._ops._common import bcast_strides, broadcast_shapes, same_device
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm",
           "addmv", "addr", "addbmm", "baddbmm"]

_F32 = D.float32
_AC_ON = False  # True while an autocast region is enabled (fiamma._autocast keeps it)


# ---- argument checks -------------------------------------------------------------------------

def _tensor_arg(x, op, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(x).__name__}")
    return x


def _dims(x, nd, op, name):
    if len(x._shape) != nd:
        raise RuntimeError(f"{op}: {name} must be a {nd}D tensor, but got a "
                           f"{len(x._shape)}D tensor of shape {list(x._shape)}")


def _same_dtype(op, *ts):
    same_device(op, *ts)
    dt = ts[0]._dtype
    for t in ts[1:]:
        if t._dtype is not dt:
            if len(ts) == 2:
                raise RuntimeError(f"{op}: expected m1 and m2 to have the same dtype, but got: "
                                   f"{dt} != {t._dtype}")
            raise RuntimeError(f"{op}: expected input, mat1 and mat2 to have the same dtype, "
                               "but got " + ", ".join(str(x._dtype) for x in ts))
    return dt


def _fmt(shape):
    return "x".join(str(s) for s in shape) if shape else "()"


def _mismatch(op, sa, sb):
    raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({_fmt(sa)} and "
                       f"{_fmt(sb)})")


def _coefs(dt, beta, alpha, op):
    """(alpha, beta, ialpha, ibeta) for the kernel: floats use the first pair, integers and
    bool the second (PyTorch refuses float coefficients for integer tensors)."""
    if dt._kind == 2:
        return builtins.float(alpha), builtins.float(beta), 0, 0
    vals = []
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, Tensor):
            v = v.item()
        if not isinstance(v, numbers.Integral):
            raise RuntimeError(f"{op}: for integral input tensors, argument {name} must not be "
                               f"a floating point number, got {v!r}")
        vals.append(builtins.int(v))
    a, b = vals
    if dt is D.bool:
        a, b = builtins.int(a != 0), builtins.int(b != 0)
    for name, v in (("alpha", a), ("beta", b)):
        if not -(1 << 63) <= v < (1 << 63):
            raise RuntimeError(f"{op}: {name}={v} does not fit in int64")
    return 0.0, 0.0, a, b


_PLAIN = ((0.0, 0.0, 1, 0), (1.0, 0.0, 0, 0))  # alpha 1, beta 0: (integer, float) kernel args


def _dest(out, shape, dt, op, inputs):
    """The tensor the kernel writes: ``out`` itself when it is contiguous and shares no memory
    with an input, else a fresh one (copied into ``out`` afterwards)."""
    dev = inputs[0]._storage.device
    if out is None:
        return new_empty(shape, dt, dev)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
    if out._dtype is not dt:
        raise RuntimeError(f"{op}: expected out tensor to have dtype {dt}, but got "
                           f"{out._dtype} instead")
    if out._shape != shape:
        from fiamma._ops._common import resize_out

        resize_out(out, shape, op)
    if out._contig and not builtins.any(t._storage is out._storage for t in inputs):
        return out
    return new_empty(shape, dt, dev)


def _finish(res, out, op, inputs, kwargs=None):
    if out is not None and res is not out:
        _copy_into(out, res)
        res = out
    if out is not None:
        out._bump()  # results written through out= are not recorded for autograd
        return res
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad:
            G.record(op, res, inputs, kwargs or {})
            break
    return res


def _strides2(t):
    """(row stride, column stride) of a matrix, or of a vector seen as a 1 x k row."""
    st = t._stride
    return (st[-2], st[-1]) if len(st) >= 2 else (0, st[0] if st else 1)


# ---- the core product ------------------------------------------------------------------------

def _product(op, a, b, out, c_in=None, beta=0, alpha=1, record=True, kw=None, rec=None):
    """``alpha * (a @ b) + beta * c_in`` by matmul's rules: a and b at least 1-D, a 1-D ``a``
    is a row and a 1-D ``b`` a column (their dims dropped from the result), batch dims
    broadcast. ``c_in`` is broadcast to the result shape (ignored when beta is 0)."""
    sa_, sb_ = a._shape, b._shape
    da, db = len(sa_), len(sb_)
    dt = a._dtype
    m = sa_[-2] if da >= 2 else 1
    k = sa_[-1]
    kb = sb_[-2] if db >= 2 else sb_[0]
    n = sb_[-1] if db >= 2 else 1
    if k != kb:
        if da == 1 and db == 1:
            raise RuntimeError(f"{op}: inconsistent tensor size, expected tensor [{k}] and src "
                               f"[{kb}] to have the same number of elements, but got {k} and "
                               f"{kb} elements respectively")
        _mismatch(op, sa_, sb_)
    ba, bb = sa_[:-2], sb_[:-2]
    batch = ba if ba == bb else broadcast_shapes(ba, bb, op=op)
    shape = batch + ((m,) if da >= 2 else ()) + ((n,) if db >= 2 else ())
    if dt._kind == 3:
        res = _product_complex(op, a, b, out, shape, c_in, beta, alpha)
        inputs = (a, b) if c_in is None else (c_in, a, b)
        return _finish(res, out, rec or op, inputs, kw) if record else res
    if c_in is None and alpha == 1:
        fa, fb, ia, ib = _PLAIN[dt._kind == 2]
    else:
        fa, fb, ia, ib = _coefs(dt, beta, alpha, op)
    use_c = c_in is not None and (fb != 0.0 or ib != 0)
    inputs = (a, b) if c_in is None else (c_in, a, b)
    res = (new_empty(shape, dt, a._storage.device) if out is None else
           _dest(out, shape, dt, op, (a, b)))
    if (use_c and out is None and fa == 1.0 and fb == 1.0 and da == 2 and db == 2 and
            dt._kind == 2 and c_in._dtype is dt and c_in._shape == (n,) and
            c_in._stride == (1,) and res._numel and
            (dt is D.float32 if c_in._storage.device is CPU else
             c_in._storage.device is res._storage.device is a._storage.device is
             b._storage.device)):
        # a linear layer's bias: added by the kernel as it stores C (no copy into C first; the
        # cuda backend writes the bias rows in one launch, then the product with beta = 1)
        rc = res._storage.backend.mm_bias(m, n, k, res, res._stride[0], a, a._stride[0],
                                          a._stride[1], b, b._stride[0], b._stride[1], c_in)
        if rc == 0:
            return _finish(res, out, rec or op, inputs, kw) if record else res
        if rc != K.ERR_OP:
            check(rc, op, f"dtype {dt}")
    if use_c and not (res is c_in or (res._storage is c_in._storage and
                                      res._offset == c_in._offset and
                                      res._stride == c_in._stride and
                                      res._shape == c_in._shape)):
        if c_in._storage is res._storage:  # c_in aliases out in another layout
            res = new_empty(shape, dt, res._storage.device)
        cs = bcast_strides(c_in, shape)
        if res._numel:
            check(res._storage.backend.copy_region(shape, res, 0, res._stride, c_in, 0, cs), op)
    if not use_c:
        fb, ib = 0.0, 0
    # the result's row and column strides (for a dim dropped by a 1-D operand: any value)
    nb = len(batch)
    rst = res._stride
    scm = rst[nb] if da >= 2 else 0
    scn = rst[-1] if db >= 2 else 1
    sam, sak = _strides2(a)
    if db >= 2:
        sbk, sbn = b._stride[-2], b._stride[-1]
    else:
        sbk, sbn = b._stride[0], 0
    if nb == 0:
        rc = res._storage.backend.mm(m, n, k, res, scm, scn, a, sam, sak, b, sbk, sbn, fa, fb,
                                     ia, ib)
    else:
        # size-1 batch dims are dropped in C: their strides do not matter
        bs_a = a._stride[:-2] if ba == batch else _batch_strides(a, batch, da)
        bs_b = b._stride[:-2] if bb == batch else _batch_strides(b, batch, db)
        rc = res._storage.backend.matmul(batch, m, n, k, res, rst[:nb] + (scm, scn), a,
                                         bs_a + (sam, sak), b, bs_b + (sbk, sbn), fa, fb, ia, ib)
    if rc:
        check(rc, op, f"dtype {dt}")
    if not record:
        return res
    return _finish(res, out, rec or op, inputs, kw)


def _product_complex(op, a, b, out, shape, c_in, beta, alpha):
    """_product for complex operands: the array module's matmul (NumPy's is BLAS's cgemm /
    zgemm), written into the result."""
    from fiamma._ops.complex_ops import arr, xp_of

    dt = a._dtype
    res = new_empty(shape, dt, a._storage.device) if out is None else \
        _dest(out, shape, dt, op, (a, b))
    if not res._numel:
        return res
    xp = xp_of(a)
    if xp is np and alpha == 1 and (c_in is None or beta == 0):
        np.matmul(arr(a), arr(b), out=arr(res))  # straight into the result
        return res
    v = xp.matmul(arr(a), arr(b))
    if alpha != 1:
        v = v * dt._np.type(alpha)
    if c_in is not None and beta != 0:
        c = arr(c_in)
        v = v + (c if beta == 1 else c * dt._np.type(beta))
    arr(res)[...] = v
    return res


def _batch_strides(t, batch, nd):
    """Strides of t's batch dims broadcast to ``batch`` (0 where broadcast or absent)."""
    if nd <= 2:
        return (0,) * len(batch)
    bt = t._shape[:-2]
    off = len(batch) - len(bt)
    st = [0] * len(batch)
    for i, s in enumerate(bt):
        if s != 1:
            st[off + i] = t._stride[i]
    return tuple(st)


# ---- public ops ------------------------------------------------------------------------------

def matmul(input, other, *, out=None):
    """Matrix product by ``torch.matmul``'s rules.

    1-D @ 1-D is a dot product (0-d result); 2-D @ 2-D a matrix product; a 1-D first operand is
    a row vector and a 1-D second operand a column vector, their dim removed from the result;
    with more dims the leading (batch) dims broadcast.

    >>> import fiamma
    >>> a = fiamma.arange(6.).reshape(2, 3)
    >>> (a @ a.T).tolist()
    [[5.0, 14.0], [14.0, 50.0]]
    >>> fiamma.matmul(fiamma.ones(4, 2, 3), fiamma.ones(3)).shape
    fiamma.Size([4, 2])
    """
    if _AC_ON and out is None:  # on autocast's lower-precision list
        input, other = _AC.cast_lower(None, input, other)
    a = _tensor_arg(input, "matmul", "input")
    b = _tensor_arg(other, "matmul", "other")
    if a._layout_alt or b._layout_alt:
        if a.is_nested or b.is_nested:
            if out is not None:
                raise NotImplementedError("matmul: out= is not supported for nested tensors")
            return _importlib.import_module("fiamma._nested")._matmul(a, b)
        from fiamma._sparse_ops import matmul as sparse_matmul

        return sparse_matmul(a, b, out=out)
    if out is None:
        r = _fast(a, b, "matmul")
        if r is not None:
            return r
    return _matmul(a, b, out)


def _matmul(a, b, out):
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        _tensor_arg(a, "matmul", "input")
        _tensor_arg(b, "matmul", "other")
    if not a._shape or not b._shape:
        raise RuntimeError(f"matmul: both arguments to matmul need to be at least 1D, but they "
                           f"are {len(a._shape)}D and {len(b._shape)}D")
    _same_dtype("matmul", a, b)
    return _product(ops.matmul, a, b, out)


def mm(input, mat2, *, out=None):
    """Product of two matrices: (n x m) @ (m x p) -> (n x p).

    >>> import fiamma
    >>> fiamma.mm(fiamma.ones(2, 3), fiamma.ones(3, 4)).shape
    fiamma.Size([2, 4])
    """
    if _AC_ON and out is None:  # on autocast's lower-precision list
        input, mat2 = _AC.cast_lower(None, input, mat2)
    a = _tensor_arg(input, "mm", "input")
    b = _tensor_arg(mat2, "mm", "mat2")
    if a._layout_alt or b._layout_alt:  # sparse (COO, compressed) or nested
        from fiamma._sparse_ops import mm as sparse_mm

        return sparse_mm(a, b, out=out)
    _dims(a, 2, "mm", "self")
    _dims(b, 2, "mm", "mat2")
    if out is None:
        r = _fast(a, b, "mm")
        if r is not None:
            return r
    _same_dtype("mm", a, b)
    return _product(ops.mm, a, b, out)


def bmm(input, mat2, *, out=None):
    """Batched product of 3-D tensors: (b x n x m) @ (b x m x p) -> (b x n x p), no broadcasting.

    >>> import fiamma
    >>> fiamma.bmm(fiamma.ones(5, 2, 3), fiamma.ones(5, 3, 4)).shape
    fiamma.Size([5, 2, 4])
    """
    if _AC_ON and out is None:  # on autocast's lower-precision list
        input, mat2 = _AC.cast_lower(None, input, mat2)
    a = _tensor_arg(input, "bmm", "input")
    b = _tensor_arg(mat2, "bmm", "mat2")
    _dims(a, 3, "bmm", "batch1")
    _dims(b, 3, "bmm", "batch2")
    _same_dtype("bmm", a, b)
    _check_batch("bmm", a, b)
    return _product(ops.bmm, a, b, out)


def _check_batch(op, a, b):
    if b._shape[0] != a._shape[0] or b._shape[1] != a._shape[2]:
        raise RuntimeError(f"{op}: Expected size for first two dimensions of batch2 tensor to "
                           f"be: [{a._shape[0]}, {a._shape[2]}] but got: "
                           f"[{b._shape[0]}, {b._shape[1]}] (batch1 {_fmt(a._shape)}, batch2 "
                           f"{_fmt(b._shape)})")


def mv(input, vec, *, out=None):
    """Matrix-vector product: (n x m) @ (m,) -> (n,).

    >>> import fiamma
    >>> fiamma.mv(fiamma.ones(2, 3), fiamma.arange(3.)).tolist()
    [3.0, 3.0]
    """
    a = _tensor_arg(input, "mv", "input")
    v = _tensor_arg(vec, "mv", "vec")
    if len(a._shape) != 2 or len(v._shape) != 1:
        raise RuntimeError(f"mv: vector + matrix @ vector expected, got {len(a._shape)}D "
                           f"and {len(v._shape)}D")
    if a._layout_alt and getattr(a, "_compressed", False):
        if out is not None:
            return _importlib.import_module("fiamma._sparse_compressed_ops")._dense_out(
                "mv", out, a.mv(v))
        return a.mv(v)
    _same_dtype("mv", a, v)
    if a._shape[1] != v._shape[0]:
        raise RuntimeError(f"mv: size mismatch, got mat ({_fmt(a._shape)}), "
                           f"vec ({v._shape[0]})")
    return _product(ops.mv, a, v, out)


def _vecs(op, a, b):
    a = _tensor_arg(a, op, "input")
    b = _tensor_arg(b, op, "other")
    if len(a._shape) != 1 or len(b._shape) != 1:
        raise RuntimeError(f"{op}: 1D tensors expected, but got {len(a._shape)}D and "
                           f"{len(b._shape)}D tensors")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"{op}: expected both vectors to have same dtype, but found "
                           f"{a._dtype} and {b._dtype}")
    return a, b


def dot(input, other, *, out=None):
    """Dot product of two 1-D tensors of the same dtype (a 0-d tensor).

    >>> import fiamma
    >>> fiamma.dot(fiamma.tensor([2., 3.]), fiamma.tensor([2., 1.])).item()
    7.0
    """
    a, b = _vecs("dot", input, other)
    return _product(ops.dot, a, b, out)


def vdot(input, other, *, out=None):
    """Dot product of two 1-D tensors, the first conjugated (complex dtypes)."""
    a, b = _vecs("vdot", input, other)
    if a._dtype._kind == 3:
        from fiamma._ops.complex_ops import conj

        return _product(ops.vdot, conj(a), b, out)
    return _product(ops.vdot, a, b, out)


def inner(input, other, *, out=None):
    """Inner product over the last dimension: result shape ``input.shape[:-1] +
    other.shape[:-1]``; a 0-d operand multiplies elementwise.

    >>> import fiamma
    >>> fiamma.inner(fiamma.ones(2, 3), fiamma.ones(4, 3)).shape
    fiamma.Size([2, 4])
    """
    a = _tensor_arg(input, "inner", "input")
    b = _tensor_arg(other, "inner", "other")
    if not a._shape or not b._shape:
        from fiamma._ops.elementwise import mul

        return mul(a, b, out=out)
    if a._shape[-1] != b._shape[-1]:
        raise RuntimeError(f"inner: the last dimension must match on both input tensors but got "
                           f"shapes {list(a._shape)} and {list(b._shape)}")
    _same_dtype("inner", a, b)
    k = a._shape[-1]
    shape = a._shape[:-1] + b._shape[:-1]
    a2 = a.reshape(-1, k) if len(a._shape) != 2 else a
    b2 = b.reshape(-1, k) if len(b._shape) != 2 else b
    if out is None:
        return _product(ops.inner, a2, b2.transpose(0, 1), None, rec=ops.mm).view(shape)
    r = _product(ops.inner, a2, b2.transpose(0, 1), None, record=False).view(shape)
    res = _dest(out, shape, a._dtype, "inner", ())
    _copy_into(res, r)
    return _finish(res, out, ops.inner, (a, b))


def outer(input, vec2, *, out=None):
    """Outer product of two 1-D tensors: (n,) x (m,) -> (n x m), with type promotion.

    >>> import fiamma
    >>> fiamma.outer(fiamma.arange(3), fiamma.arange(2)).tolist()
    [[0, 0], [0, 1], [0, 2]]
    """
    a = _tensor_arg(input, "outer", "input")
    b = _tensor_arg(vec2, "outer", "vec2")
    for name, t in (("self", a), ("vec2", b)):
        if len(t._shape) != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got "
                               f"{len(t._shape)}-D")
    from fiamma._ops.elementwise import mul

    return mul(a.unsqueeze(1), b.unsqueeze(0), out=out)


ger = outer


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)``; input broadcasts to the (n x p) result. With
    beta == 0 input is ignored (its NaNs do not propagate).

    >>> import fiamma
    >>> fiamma.addmm(fiamma.ones(2, 2), fiamma.ones(2, 3), fiamma.ones(3, 2), beta=2).tolist()
    [[5.0, 5.0], [5.0, 5.0]]
    """
    if out is None:
        if _AC_ON:  # on autocast's lower-precision list
            input, mat1, mat2 = _AC.cast_lower(None, input, mat1, mat2)
        elif (beta.__class__ is int and alpha.__class__ is int and beta == 1 and alpha == 1 and
              isinstance(input, Tensor) and isinstance(mat1, Tensor) and
              isinstance(mat2, Tensor)):
            r = _addmm_fast(input, mat1, mat2)  # a linear layer's product and bias
            if r is not None:
                return r
    c, a, b = (_tensor_arg(t, "addmm", n) for t, n in
               ((input, "input"), (mat1, "mat1"), (mat2, "mat2")))
    if a._layout_alt or b._layout_alt or c._layout_alt:  # sparse (COO, compressed) or nested
        from fiamma._sparse_ops import addmm as sparse_addmm

        return sparse_addmm(c, a, b, beta=beta, alpha=alpha, out=out)
    _dims(a, 2, "addmm", "mat1")
    _dims(b, 2, "addmm", "mat2")
    _same_dtype("addmm", c, a, b)
    if a._shape[1] != b._shape[0]:
        _mismatch("addmm", a._shape, b._shape)
    _check_input("addmm", c, (a._shape[0], b._shape[1]))
    return _product(ops.addmm, a, b, out, c, beta, alpha, kw={"beta": beta, "alpha": alpha})


def _check_input(op, c, shape):
    """input must broadcast to the result shape (not the other way round)."""
    ok = len(c._shape) <= len(shape) and builtins.all(
        s == 1 or s == t for s, t in zip(reversed(c._shape), reversed(shape)))
    if not ok:
        raise RuntimeError(f"{op}: input of shape {list(c._shape)} cannot be broadcast to the "
                           f"result shape {list(shape)}")


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat @ vec)``; input broadcasts to (n,)."""
    c, a, v = (_tensor_arg(t, "addmv", n) for t, n in
               ((input, "input"), (mat, "mat"), (vec, "vec")))
    if len(a._shape) != 2 or len(v._shape) != 1:
        raise RuntimeError(f"addmv: vector + matrix @ vector expected, got {len(a._shape)}D "
                           f"and {len(v._shape)}D")
    _same_dtype("addmv", c, a, v)
    if a._shape[1] != v._shape[0]:
        raise RuntimeError(f"addmv: size mismatch, got input ({_fmt(c._shape)}), mat "
                           f"({_fmt(a._shape)}), vec ({v._shape[0]})")
    _check_input("addmv", c, (a._shape[0],))
    return _product(ops.addmv, a, v, out, c, beta, alpha, kw={"beta": beta, "alpha": alpha})


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * outer(vec1, vec2)``, with type promotion; input broadcasts to
    (n x m). For bool tensors, beta and alpha act as logical and, + as logical or."""
    c, a, b = (_tensor_arg(t, "addr", n) for t, n in
               ((input, "input"), (vec1, "vec1"), (vec2, "vec2")))
    for name, t in (("vec1", a), ("vec2", b)):
        if len(t._shape) != 1:
            raise RuntimeError(f"addr: {name} must be a vector, but got a {len(t._shape)}D "
                               "tensor")
    dt = D.result_type(c, a, b)
    from fiamma._ops._common import cast

    shape = (a._shape[0], b._shape[0])
    _check_input("addr", c, shape)
    ca, cb, cc = cast(a, dt), cast(b, dt), cast(c, dt)
    # outer product = (n x 1) @ (1 x m)
    res = _product(ops.addr, ca.unsqueeze(1), cb.unsqueeze(0), out, cc, beta, alpha, record=False)
    return _finish(res, out, ops.addr, (c, a, b), {"beta": beta, "alpha": alpha})


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * bmm(batch1, batch2)``; input broadcasts to (b x n x p)."""
    if _AC_ON and out is None:  # on autocast's lower-precision list
        input, batch1, batch2 = _AC.cast_lower(None, input, batch1, batch2)
    c, a, b = (_tensor_arg(t, "baddbmm", n) for t, n in
               ((input, "input"), (batch1, "batch1"), (batch2, "batch2")))
    _dims(a, 3, "baddbmm", "batch1")
    _dims(b, 3, "baddbmm", "batch2")
    _same_dtype("baddbmm", c, a, b)
    _check_batch("baddbmm", a, b)
    _check_input("baddbmm", c, (a._shape[0], a._shape[1], b._shape[2]))
    return _product(ops.baddbmm, a, b, out, c, beta, alpha, kw={"beta": beta, "alpha": alpha})


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``; input broadcasts to (n x p)."""
    if _AC_ON and out is None:  # on autocast's lower-precision list
        input, batch1, batch2 = _AC.cast_lower(None, input, batch1, batch2)
    c, a, b = (_tensor_arg(t, "addbmm", n) for t, n in
               ((input, "input"), (batch1, "batch1"), (batch2, "batch2")))
    _dims(a, 3, "addbmm", "batch1")
    _dims(b, 3, "addbmm", "batch2")
    _same_dtype("addbmm", c, a, b)
    _check_batch("addbmm", a, b)
    nb, n, m = a._shape
    p = b._shape[2]
    _check_input("addbmm", c, (n, p))
    # the sum of the batch's products is one product over the concatenated k dimension
    a2 = a.permute(1, 0, 2).reshape(n, nb * m)
    b2 = b.reshape(nb * m, p)
    res = _product(ops.addbmm, a2, b2, out, c, beta, alpha, record=False)
    return _finish(res, out, ops.addbmm, (c, a, b), {"beta": beta, "alpha": alpha})


# ---- Tensor methods --------------------------------------------------------------------------

# the CPU backend's one-call product of small CPU operands (None where it does not apply)
_fast = _cpu_operators.mm_simple
_addmm_fast = _cpu_operators.addmm_simple


def _matmul_method(self, other):
    if _AC_ON:
        return matmul(self, other) if isinstance(other, Tensor) else NotImplemented
    if type(other) is Tensor:
        r = _fast(self, other, "matmul")
        if r is not None:
            return r
    if not isinstance(other, Tensor):
        return NotImplemented
    return _matmul(self, other, None)


def _rmatmul_method(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul(other, self)


def _inplace(fn, name):
    def method(self, *args, beta=1, alpha=1):
        if self.requires_grad:
            G.check_inplace(self, name)
        fn(self, *args, beta=beta, alpha=alpha, out=self)
        if self.requires_grad or builtins.any(getattr(t, "requires_grad", False) for t in args):
            G.record_inplace(name, self, (self,) + args, {"beta": beta, "alpha": alpha})
        return self

    method.__name__ = name
    return method


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "matmul": lambda self, other: matmul(self, other),
    "__matmul__": _matmul_method,
    "__rmatmul__": _rmatmul_method,
    "mm": lambda self, mat2: mm(self, mat2),
    "bmm": lambda self, mat2: bmm(self, mat2),
    "mv": lambda self, vec: mv(self, vec),
    "dot": lambda self, other: dot(self, other),
    "vdot": lambda self, other: vdot(self, other),
    "inner": lambda self, other: inner(self, other),
    "outer": lambda self, vec2: outer(self, vec2),
    "ger": lambda self, vec2: outer(self, vec2),
    "addmm": lambda self, mat1, mat2, *, beta=1, alpha=1: addmm(self, mat1, mat2, beta=beta,
                                                                 alpha=alpha),
    "addmv": lambda self, mat, vec, *, beta=1, alpha=1: addmv(self, mat, vec, beta=beta,
                                                               alpha=alpha),
    "addr": lambda self, vec1, vec2, *, beta=1, alpha=1: addr(self, vec1, vec2, beta=beta,
                                                               alpha=alpha),
    # PyTorch's parameter names (programs pass them by keyword: batch1=, batch2=)
    "baddbmm": lambda self, batch1, batch2, *, beta=1, alpha=1: baddbmm(
        self, batch1, batch2, beta=beta, alpha=alpha),
    "addbmm": lambda self, batch1, batch2, *, beta=1, alpha=1: addbmm(
        self, batch1, batch2, beta=beta, alpha=alpha),
    "addmm_": _inplace(addmm, ops.addmm_),
    "addmv_": _inplace(addmv, ops.addmv_),
    "addr_": _inplace(addr, ops.addr_),
    "baddbmm_": _inplace(baddbmm, ops.baddbmm_),
    "addbmm_": _inplace(addbmm, ops.addbmm_),
}


_AC.listen(globals())
