"""Fused kernels that other fiamma packages build on (public, stable API).

Each function updates a whole list of tensors in one backend call (on the CPU one C call, one
pass over each tensor's memory), on whatever device the tensors are (all on one). They are the
fast paths of ``fiamma.optim``; the arithmetic matches the op-by-op reference update to
rounding (fiamma-optim tests the equivalence).

>>> import fiamma
>>> from fiamma import fused
>>> p, g = fiamma.ones(4), fiamma.full((4,), 0.5)
>>> fused.sgd_([p], [g], lr=0.1)
>>> p.tolist()
[0.949999988079071, 0.949999988079071, 0.949999988079071, 0.949999988079071]
"""

import numpy as np

from fiamma._backend import check, codes as K
from fiamma._dtype import float32, float64
from fiamma._ops.activations import activation, activation_backward
from fiamma._ops.losses import loss, loss_backward
from fiamma._ops.nll_embedding import nll_loss
from fiamma._tensor import Tensor

__all__ = ["Int8PackedWeight", "activation", "activation_backward", "adam_", "int8_matmul",
           "int8_matmul_available", "loss", "loss_backward", "nll_loss", "sgd_", "supports"]


def supports(tensors):
    """Whether the fused kernels can update these tensors: all float32 or all float64,
    dense and contiguous, of one dtype, on one device."""
    dt = dev = None
    for t in tensors:
        # _layout_alt: a class attribute, True on the sparse and nested subclasses
        if not isinstance(t, Tensor) or t._layout_alt or not t._contig:
            return False
        if dt is None:
            dt = t._dtype
            if dt is not float32 and dt is not float64:
                return False
            dev = t._storage.device
        elif t._dtype is not dt:
            return False
        else:
            d = t._storage.device
            if d is not dev and d != dev:
                return False
    return True


def _checked(op, name, tensors, ref, allow_none=False):
    """The tensors, each checked against its parameter's layout."""
    if len(tensors) != len(ref):
        raise ValueError(f"{op}: expected {len(ref)} {name} tensors, got {len(tensors)}")
    for i, (t, p) in enumerate(zip(tensors, ref)):
        if t is None and allow_none:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name}[{i}] must be a Tensor, got {type(t).__name__}")
        if t._dtype is not p._dtype:
            raise TypeError(f"{op}: {name}[{i}] has dtype {t._dtype}, expected {p._dtype}")
        if t._shape != p._shape:
            raise ValueError(f"{op}: {name}[{i}] has shape {list(t._shape)}, expected "
                             f"{list(p._shape)}")
        if not t._contig:
            raise ValueError(f"{op}: {name}[{i}] must be a contiguous tensor")
        d = t._storage.device
        if d is not p._storage.device and d != p._storage.device:
            raise RuntimeError(f"{op}: {name}[{i}] is on {d}, its parameter on "
                               f"{p._storage.device}")
    return tensors


def _params(op, params):
    params = list(params)
    if not supports(params):
        raise TypeError(f"{op}: parameters must be contiguous tensors on one device, all float32 "
                        "or all float64")
    return params


def adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs=None, *, steps, lr, beta1,
          beta2, eps, weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False):
    """In-place Adam/AdamW update of every parameter (``steps``: each one's step count, already
    incremented for this update). ``decoupled`` applies AdamW's weight decay."""
    op = "fused.adam_"
    params = _params(op, params)
    if not params:
        return
    gp = _checked(op, "grads", list(grads), params)
    mp = _checked(op, "exp_avgs", list(exp_avgs), params)
    vp = _checked(op, "exp_avg_sqs", list(exp_avg_sqs), params)
    vmp = _checked(op, "max_exp_avg_sqs", list(max_exp_avg_sqs), params) if amsgrad else None
    steps = list(steps)
    if len(steps) != len(params):
        raise ValueError(f"{op}: expected {len(params)} step counts, got {len(steps)}")
    st = [float(s) for s in steps]
    flags = ((K.OPT_MAXIMIZE if maximize else 0) | (K.OPT_AMSGRAD if amsgrad else 0)
             | (K.OPT_DECOUPLED if decoupled else 0))
    check(params[0]._storage.backend.adam_step(params, gp, mp, vp, vmp, st, float(lr),
                                               float(beta1), float(beta2), float(eps),
                                               float(weight_decay), flags), op)
    for ts in (params, mp, vp):
        for t in ts:
            t._storage.version += 1  # Tensor._bump, without a method call per tensor


def sgd_(params, grads, momentum_buffers=None, *, lr, momentum=0.0, dampening=0.0,
         weight_decay=0.0, nesterov=False, maximize=False, first=False):
    """In-place SGD update; ``first``: the momentum buffers are set to the gradient (the first
    step of a fresh buffer) instead of being decayed."""
    op = "fused.sgd_"
    params = _params(op, params)
    if not params:
        return
    gp = _checked(op, "grads", list(grads), params)
    bp = None
    if momentum != 0:
        if momentum_buffers is None:
            raise ValueError(f"{op}: momentum {momentum} needs momentum_buffers")
        bp = _checked(op, "momentum_buffers", list(momentum_buffers), params)
    flags = ((K.OPT_MAXIMIZE if maximize else 0) | (K.OPT_NESTEROV if nesterov else 0)
             | (K.OPT_FIRST if first else 0))
    check(params[0]._storage.backend.sgd_step(params, gp, bp, float(lr), float(momentum),
                                              float(dampening), float(weight_decay), flags), op)
    for t in params:
        t._storage.version += 1  # Tensor._bump, without a method call per tensor
    if momentum != 0:
        for t in bp:
            t._storage.version += 1


# ---- int8 products for dynamic quantization -------------------------------------------------
# fiamma-nn's dynamically quantized Linear/LSTM/GRU compute their products here: a uint8
# activation matrix times a packed int8 weight, summed exactly in int32. The operands are NumPy
# arrays (the quantized modules work on NumPy buffers); every shape and dtype is checked before
# the C kernel (csrc/qgemm.c) touches memory.

def _qgemm_kernels():
    try:
        from fiamma._backend.cpu import fused as cpu_fused
    except (ImportError, OSError):  # pragma: no cover - a core without its C library
        return None
    return cpu_fused if hasattr(cpu_fused.lib, "fm_qgemm_u8s8") else None


def int8_matmul_available():
    """Whether this fiamma-core build has the int8 GEMM (:func:`int8_matmul`)."""
    return _qgemm_kernels() is not None


def _matrix(op, a, dtype, what):
    """``a``, checked to be a 2-d NumPy array of ``dtype``."""
    name = np.dtype(dtype).name
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{op}: expected a NumPy {name} array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{op}: expected dtype {name}, got {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{op}: expected a 2-d {what}, got {a.ndim} dimensions")
    return a


class Int8PackedWeight:
    """An int8 weight (``n x k``, one row per output) packed once for :func:`int8_matmul`.

    >>> import numpy as np
    >>> from fiamma import fused
    >>> w = fused.Int8PackedWeight(np.array([[1, -2, 3]], dtype=np.int8))
    >>> fused.int8_matmul(np.array([[4, 5, 6]], dtype=np.uint8), w).tolist()
    [[12]]
    """

    __slots__ = ("n", "k", "_buf", "_addr")

    def __init__(self, weight):
        op = "fused.Int8PackedWeight"
        lib = _qgemm_kernels()
        if lib is None:
            raise RuntimeError(f"{op}: this fiamma-core build has no int8 GEMM")
        w = _matrix(op, weight, np.int8, "(n x k) weight")
        n, k = (int(d) for d in w.shape)
        if n < 1 or k < 1:
            raise ValueError(f"{op}: expected a non-empty weight, got shape {list(w.shape)}")
        w = np.ascontiguousarray(w)
        buf = np.empty(int(lib.qgemm_packed_bytes(n, k)), dtype=np.int8)
        rc = lib.qgemm_pack_b(n, k, w.ctypes.data, buf.ctypes.data)
        if rc != 0:
            raise RuntimeError(f"{op}: packing a {n} x {k} weight failed (status {rc})")
        self.n, self.k, self._buf, self._addr = n, k, buf, buf.ctypes.data

    def __repr__(self):
        return f"Int8PackedWeight(n={self.n}, k={self.k})"


def int8_matmul(a, weight, *, out=None):
    """``a @ W.T`` summed exactly in int32: ``a`` a uint8 matrix (``m x k``), ``weight`` an
    :class:`Int8PackedWeight` of ``W`` (``n x k``); returns (or fills ``out``, int32
    ``m x n`` C-contiguous) the int32 products. Inputs whose values are all at most 127
    (activations quantized with ``reduce_range``) take a faster AVX2 kernel where the CPU has
    no VNNI."""
    op = "fused.int8_matmul"
    if not isinstance(weight, Int8PackedWeight):
        raise TypeError(f"{op}: weight must be an Int8PackedWeight, got {type(weight).__name__}")
    _matrix(op, a, np.uint8, "(m x k) input")
    m, k = (int(d) for d in a.shape)
    n = weight.n
    if k != weight.k:
        raise ValueError(f"{op}: input has {k} columns, the weight {weight.k}")
    if out is None:
        out = np.empty((m, n), dtype=np.int32)
    else:
        if not isinstance(out, np.ndarray) or out.dtype != np.int32:
            raise TypeError(f"{op}: out must be a NumPy int32 array")
        if out.shape != (m, n):
            raise ValueError(f"{op}: out has shape {list(out.shape)}, expected {[m, n]}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError(f"{op}: out must be a writeable C-contiguous array")
    if m == 0:
        return out
    k4 = 4 * ((k + 3) // 4)  # the kernel reads rows of whole 4-byte groups, zero past k
    if k4 != k:
        ap = np.zeros((m, k4), dtype=np.uint8)
        ap[:, :k] = a
    else:
        ap = np.ascontiguousarray(a)
    a7 = 1 if int(ap.max()) <= 127 else 0  # checked, never promised: no silent saturation
    rc = _qgemm_kernels().qgemm_u8s8(m, n, k, ap.ctypes.data, k4, weight._addr, out.ctypes.data,
                                 a7)
    if rc != 0:
        raise RuntimeError(f"{op}: the int8 GEMM failed (status {rc})")
    return out
