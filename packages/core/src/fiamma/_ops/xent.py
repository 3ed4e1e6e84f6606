"""Fused cross entropy over class-index targets: ``log_softmax`` and the negative log
likelihood in one backend call forward (csrc/xent.c on the CPU) and one backward, recorded as
one autograd op (the composition records four: log_softmax, gather, mean/sum, neg).

>>> import fiamma
>>> x = fiamma.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
>>> round(fiamma.cross_entropy_loss(x, fiamma.tensor([0, 2])).item(), 4)
0.6691
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._ops.elementwise import where
from fiamma._storage import CPU
from fiamma._tensor import Tensor, new_empty

__all__ = ["cross_entropy_loss", "cross_entropy_loss_backward"]

_REDUCTIONS = ("none", "mean", "sum")


def _rows(input, target, weight, reduction, label_smoothing, op):
    """Checks; (x (M, C) contiguous in the compute dtype, t (M,) int64, w (C,) or None)."""
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected input and target to be Tensors, got "
                        f"{type(input).__name__} and {type(target).__name__}")
    if input._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating point input, got dtype {input._dtype}")
    if target._dtype._kind != 1:
        raise RuntimeError(f"{op}: expected target of an integer dtype (class indices), got "
                           f"{target._dtype}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    nd = len(input._shape)
    if nd == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got 0-d")
    cdim = 0 if nd == 1 else 1
    c = input._shape[cdim]
    expect = tuple(input._shape[:cdim]) + tuple(input._shape[cdim + 1:])
    if tuple(target._shape) != expect:
        raise ValueError(f"{op}: expected target of shape {list(expect)} for input of shape "
                         f"{list(input._shape)}, got {list(target._shape)}")
    if c == 0:
        raise ValueError(f"{op}: input has no classes (class dimension of size 0)")
    dev = input._storage.device
    for t, name in ((target, "target"), (weight, "weight")):
        if t is not None and t._storage.device is not dev and t._storage.device != dev:
            raise RuntimeError(f"{op}: expected all tensors on one device, got input on "
                               f"{input.device} and {name} on {t.device}")
    cd = D.float64 if input._dtype is D.float64 else D.float32
    x = input.detach()
    if nd == 1:
        x = x.reshape(1, c)
    elif nd > 2:
        x = x.movedim(1, -1).reshape(-1, c)
    x = cast(x, cd).contiguous()
    t = cast(target.detach().reshape(-1), D.int64).contiguous()
    w = None
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight._shape) != (c,):
            raise RuntimeError(f"{op}: weight tensor should be defined either for all {c} "
                               f"classes or no classes but got weight tensor of shape: "
                               f"{list(getattr(weight, 'shape', ()))}")
        w = cast(weight.detach(), cd).contiguous()
    return x, t, w


def _bad_target(t, c, ignore_index, op):
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    v = t[bad].reshape(-1)
    value = v[0].item() if v.numel() else "?"
    return IndexError(f"{op}: Target {value} is out of bounds (expected 0 <= target < {c}).")


def cross_entropy_loss(input, target, weight=None, reduction="mean", ignore_index=-100,
                       label_smoothing=0.0):
    """``nll_loss(log_softmax(input, class dim), target)`` with PyTorch's ``cross_entropy``
    semantics for class-index targets: input (C,), (N, C) or (N, C, d1, ...), target of the
    input's shape without C; class ``weight``; targets equal to ``ignore_index`` count
    nothing (``mean`` divides by the summed weights of the others); ``label_smoothing`` mixes
    the uniform distribution into the target. One fused pass each way (float16/bfloat16
    compute in float32). The weight is not differentiated (it may not require grad).

    >>> import fiamma
    >>> fiamma.cross_entropy_loss(fiamma.zeros(2, 4), fiamma.tensor([1, 3]),
    ...                           reduction="none").tolist() == [1.3862943649291992] * 2
    True
    """
    op = ops.cross_entropy_loss
    x, t, w = _rows(input, target, weight, reduction, label_smoothing, op)
    if weight is not None and weight.requires_grad and G.state.enabled:
        raise RuntimeError(f"{op}: the derivative for 'weight' is not implemented (use "
                           "fiamma.nn.functional.cross_entropy, which composes it)")
    m, c = x._shape
    dev = input._storage.device
    if dev is CPU:
        loss = new_empty((m,), x._dtype, dev)
        wt = new_empty((m,), x._dtype, dev)
    else:  # one buffer: the mean's two sums are one reduction (one kernel launch, not two)
        lw = new_empty((2, m), x._dtype, dev)
        loss, wt = lw[0], lw[1]
    be = x._storage.backend
    rc = be.xent_fwd(m, c, x, t, w, int(ignore_index), float(label_smoothing), loss, wt)
    if rc == K.ERR_INDEX:
        raise _bad_target(t, c, ignore_index, op)
    check(rc, op)
    if reduction == "none":
        out = loss.reshape(tuple(target._shape))
    elif reduction == "sum":
        out = loss.sum()
    elif dev is CPU:
        out = loss.sum() / wt.sum()
    else:  # one launch where the backend has the kernel (the division stays on the device)
        out = new_empty((), x._dtype, dev)
        f = getattr(be, "xent_mean", None)
        if f is None or not f(m, lw, out):
            s = lw.sum(1)
            out = s[0] / s[1]
    out = cast(out, input._dtype)
    if input.requires_grad and G.state.enabled:
        G.record(op, out, (input, target, weight),
                 {"reduction": reduction, "ignore_index": int(ignore_index),
                  "label_smoothing": float(label_smoothing)})
    return out


def cross_entropy_loss_backward(grad_output, input, target, weight=None, reduction="mean",
                                ignore_index=-100, label_smoothing=0.0):
    """The gradient of :func:`cross_entropy_loss` w.r.t. ``input`` for ``grad_output`` (a
    scalar for ``mean``/``sum``, the target's shape for ``none``), in one fused pass; not
    recorded (autograd differentiates the loss through a composition when ``create_graph``).

    >>> import fiamma
    >>> g = fiamma.cross_entropy_loss_backward(fiamma.tensor(1.0), fiamma.zeros(1, 2),
    ...                                        fiamma.tensor([0]))
    >>> g.tolist()
    [[-0.5, 0.5]]
    """
    op = "cross_entropy_loss_backward"
    x, t, w = _rows(input, target, weight, reduction, label_smoothing, op)
    m, c = x._shape
    if not isinstance(grad_output, Tensor):
        raise TypeError(f"{op}: expected grad_output to be a Tensor")
    gshape = tuple(target._shape) if reduction == "none" else ()
    if tuple(grad_output._shape) != gshape:
        raise ValueError(f"{op}: expected grad_output of shape {list(gshape)}, got "
                         f"{list(grad_output._shape)}")
    g = cast(grad_output.detach().reshape(-1), x._dtype).contiguous()
    scale = 1.0
    if reduction == "mean":
        be = x._storage.backend
        dev = input._storage.device
        f = None if dev is CPU else getattr(be, "xent_gscale", None)
        if dev is not CPU and w is None and be.known_in(t, 0, c) and \
                not 0 <= ignore_index < c:
            scale = 1.0 / m if m else float("nan")  # every target counts: no device read
        elif f is not None and f(m, c, t, w, int(ignore_index), g,
                                 g1 := new_empty((1,), x._dtype, dev)):
            g = g1  # g / the kept rows' summed weights, in one launch on the device
        else:
            kept = t != ignore_index
            if w is None:
                denom = kept.sum()
            else:
                denom = (w[t.clamp(0, c - 1)] * kept).sum()
            if dev is CPU:
                denom = denom.item()
                scale = 1.0 / denom if denom else float("nan")
            else:  # the division stays on the device (a host read would wait for the GPU)
                denom = cast(denom, x._dtype)
                g = g * where(denom != 0, denom.reciprocal(), float("nan"))
    gx = new_empty((m, c), x._dtype, input._storage.device)
    rc = x._storage.backend.xent_bwd(m, c, x, t, w, int(ignore_index), float(label_smoothing),
                                     g, 1 if reduction == "none" else 0, scale, gx)
    if rc == K.ERR_INDEX:
        raise _bad_target(t, c, ignore_index, op)
    check(rc, op)
    nd = len(input._shape)
    if nd == 1:
        gx = gx.reshape(c)
    elif nd > 2:
        s = tuple(input._shape)
        gx = gx.reshape((s[0],) + s[2:] + (c,)).movedim(-1, 1).contiguous()
    return cast(gx, input._dtype)
