"""Fused elementwise losses (csrc/losses.c): nn.functional's mse_loss, l1_loss,
smooth_l1_loss, huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
soft_margin_loss and kl_div, each one C pass forward (the elementwise loss, or its mean or sum
summed in the same pass) and one backward (the input's and the target's gradients together),
recorded as one autograd op whose node has PyTorch's name (``MseLossBackward0``, ...). The
composition was two to eight recorded ops each way.

Operands broadcast (input, target, weight, pos_weight); a weight that is a trailing block of the
shape (``(C,)`` for ``(N, C)``) is read in place, anything else is expanded first.
float16/bfloat16 compute in float32 and round once; a backend without the kernels (cuda, the
NumPy reference device) computes the same formulas op by op, still recorded as one op.

>>> import fiamma
>>> from fiamma import fused
>>> fused.loss("mse_loss", fiamma.tensor([1.0, 2.0]), fiamma.tensor([0.0, 0.0])).item()
2.5
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import broadcast_shapes, cast
from fiamma._tensor import Tensor, new_empty

__all__ = []  # public as fiamma.fused.loss / loss_backward

_KINDS = {"mse_loss": K.LOSS_MSE, "l1_loss": K.LOSS_L1, "smooth_l1_loss": K.LOSS_SMOOTH_L1,
          "huber_loss": K.LOSS_HUBER, "binary_cross_entropy": K.LOSS_BCE,
          "binary_cross_entropy_with_logits": K.LOSS_BCE_LOGITS,
          "soft_margin_loss": K.LOSS_SOFT_MARGIN, "kl_div": K.LOSS_KL_DIV}
# the recorded ops (declared in _autograd_api; node names MseLossBackward0, ...)
_OPS = {"mse_loss": ops.mse_loss, "l1_loss": ops.l1_loss, "smooth_l1_loss": ops.smooth_l1_loss,
        "huber_loss": ops.huber_loss, "binary_cross_entropy": ops.binary_cross_entropy,
        "binary_cross_entropy_with_logits": ops.binary_cross_entropy_with_logits,
        "soft_margin_loss": ops.soft_margin_loss, "kl_div": ops.kl_div}
_BATCHMEAN = -1  # kl_div's: the sum divided by the input's first size (the kernel sums)
_REDUCTIONS = {"none": K.LOSS_NONE, "mean": K.LOSS_MEAN, "sum": K.LOSS_SUM,
               "batchmean": _BATCHMEAN}
_WEIGHTED = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
# PyTorch's floor on x (1 - x) in the BCE gradient: the C float 1e-12
_BCE_EPS = 9.999999960041972e-13


def _kind(name, param):
    kind = _KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"loss: unknown loss {name!r} (expected one of {sorted(_KINDS)})")
    if kind == K.LOSS_SMOOTH_L1 and not param > 0:
        raise ValueError(f"smooth_l1_loss: expected beta > 0, got {param} (beta 0 is l1_loss)")
    if kind == K.LOSS_HUBER and not param > 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if kind == K.LOSS_KL_DIV and param:
        kind = K.LOSS_KL_DIV_LOG
    return kind


def _check(name, input, target, weight, pos_weight, reduction):
    """(broadcast shape, result dtype, reduction code)."""
    for what, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected {what} to be a Tensor, got {type(t).__name__}")
        if t._dtype._kind != 2:
            raise TypeError(f"{name}: expected a floating point {what}, got dtype {t._dtype}")
    red = _REDUCTIONS.get(reduction) if isinstance(reduction, str) else None
    if red is None or (red == _BATCHMEAN and name != "kl_div"):
        raise ValueError(f"{name}: {reduction} is not a valid value for reduction")
    dev = input._storage.device
    d = target._storage.device
    if d is not dev and d != dev:
        raise RuntimeError(f"{name}: expected all tensors on one device, got input on "
                           f"{input.device} and target on {target.device}")
    shape = input._shape
    if target._shape != shape:
        shape = broadcast_shapes(shape, target._shape, op=name)
    if weight is not None or pos_weight is not None:
        for what, t in (("weight", weight), ("pos_weight", pos_weight)):
            if t is None:
                continue
            if not (name in _WEIGHTED if what == "weight" else name == _WEIGHTED[1]):
                raise TypeError(f"{name}: takes no {what}")
            if not isinstance(t, Tensor) or t._dtype._kind != 2:
                raise TypeError(f"{name}: expected {what} to be a floating point Tensor, got "
                                f"{getattr(t, 'dtype', type(t).__name__)}")
            d = t._storage.device
            if d is not dev and d != dev:
                raise RuntimeError(f"{name}: expected all tensors on one device, got input on "
                                   f"{input.device} and {what} on {t.device}")
            ws = t._shape
            if len(ws) > len(shape) or any(a != b and a != 1 for a, b in zip(
                    reversed(ws), reversed(shape))):
                shape = broadcast_shapes(shape, ws, op=name)  # the weight enlarges it
    dt = D.promote_types(input._dtype, target._dtype)
    return tuple(shape), dt, red


def _operand(x, cd, shape):
    """x broadcast to shape, contiguous, of dtype cd (the kernel only reads it)."""
    if x._shape != shape:
        x = x.detach().expand(shape)
    elif x._dtype is cd and x._contig:
        return x
    else:
        x = x.detach()
    return cast(x, cd).contiguous()


def _weight(w, cd, shape, n):
    """(w as the kernel reads it, its period): a weight that is a trailing block of the shape
    (leading 1s dropped) in place, anything else expanded to the shape."""
    if w is None:
        return None, 0
    ws = tuple(w._shape)
    i = 0
    while i < len(ws) and ws[i] == 1:
        i += 1
    ws = ws[i:]
    if ws == shape[len(shape) - len(ws):] and (ws or n):
        if w._dtype is not cd or not w._contig:
            w = cast(w.detach(), cd).contiguous()
        return w, w._numel  # (only read)
    return _operand(w, cd, shape), n


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _bce_range_error(x, t):
    if not bool(((x >= 0) & (x <= 1)).all()):
        return RuntimeError("binary_cross_entropy: all elements of input should be between 0 "
                            "and 1")
    if not bool(((t >= 0) & (t <= 1)).all()):
        return RuntimeError("binary_cross_entropy: all elements of target should be between 0 "
                            "and 1")
    return None


def loss(name, input, target, weight=None, pos_weight=None, reduction="mean", param=0.0):
    """The elementwise loss ``name`` of ``input`` against ``target``, reduced by ``reduction``
    (``'mean'``, ``'sum'`` or ``'none'``; kl_div also ``'batchmean'``, the sum divided by
    the input's first size), recorded as one op for autograd (gradients for the
    input and the target). ``name``: ``mse_loss``, ``l1_loss``, ``smooth_l1_loss`` (param:
    beta > 0), ``huber_loss`` (param: delta > 0), ``binary_cross_entropy`` (weight),
    ``binary_cross_entropy_with_logits`` (weight, pos_weight), ``soft_margin_loss``,
    ``kl_div`` (param: 1 for a log-space target). csrc/api_losses.h has the formulas (PyTorch's).
    The weights are not differentiated (they may not require grad). Floating-point operands.

    >>> import fiamma
    >>> from fiamma import fused
    >>> x = fiamma.tensor([1.0, -3.0])
    >>> fused.loss("l1_loss", x, fiamma.zeros(2), reduction="none").tolist()
    [1.0, 3.0]
    """
    kind = _kind(name, param)
    shape, dt, red = _check(name, input, target, weight, pos_weight, reduction)
    recording = G.state.enabled and (input.requires_grad or target.requires_grad)
    if G.state.enabled and G.state.tracer is None:
        for what, t in (("weight", weight), ("pos_weight", pos_weight)):
            if t is not None and t.requires_grad:
                raise RuntimeError(f"The function '{name}' is not differentiable with respect "
                                   f"to argument '{what}'. This input cannot have "
                                   "requires_grad True.")
    elif weight is not None or pos_weight is not None:
        recording = recording or any(t is not None and t.requires_grad
                                     for t in (weight, pos_weight))
    cd = D.float64 if dt is D.float64 else D.float32
    dev = input._storage.device
    f = getattr(input._storage.backend, "loss_fwd", None)
    out = None
    if f is not None:
        n = _numel(shape)
        x, t = _operand(input, cd, shape), _operand(target, cd, shape)
        w, wn = _weight(weight, cd, shape, n)
        pw, pn = _weight(pos_weight, cd, shape, n)
        out = new_empty(shape if red == K.LOSS_NONE else (), cd, dev)
        rc = f(kind, K.LOSS_SUM if red == _BATCHMEAN else red, x, t, w, wn, pw, pn,
               float(param), out)
        if rc == K.ERR_VALUE and kind == K.LOSS_BCE:
            raise _bce_range_error(x, t)
        if rc == K.ERR_DTYPE or rc == K.ERR_OP:
            out = None
        else:
            check(rc, name)
    if out is None:  # no kernel on this backend: the formula op by op in float32/float64
        from fiamma._grad_mode import no_grad

        with no_grad():
            x, t = cast(input.detach(), cd), cast(target.detach(), cd)
            if kind == K.LOSS_BCE:
                err = _bce_range_error(x, t)
                if err is not None:
                    raise err
            w = None if weight is None else cast(weight.detach(), cd)
            pw = None if pos_weight is None else cast(pos_weight.detach(), cd)
            out = _composed(kind, x, t, w, pw, float(param))
            if red == K.LOSS_MEAN:
                out = out.mean()
            elif red == K.LOSS_SUM or red == _BATCHMEAN:
                out = out.sum()
            elif tuple(out._shape) != shape:
                out = out.expand(shape).contiguous()
    if red == _BATCHMEAN and input._shape:  # (not recorded: out is a fresh result)
        out = out / input._shape[0]
    out = cast(out, dt)
    if recording:
        if G.state.tracer is None:  # the weights are no inputs of the node (as PyTorch's)
            G.record(_OPS[name], out, (input, target),
                     {"reduction": reduction, "param": param, "weight": weight,
                      "pos_weight": pos_weight})
        else:  # a trace follows them as the op's arguments
            G.record(_OPS[name], out, (input, target, weight, pos_weight),
                     {"reduction": reduction, "param": param})
    return out


def loss_backward(name, grad, input, target, weight=None, pos_weight=None, reduction="mean",
                  param=0.0, needs=(True, True), create_graph=False):
    """The gradients ``(grad_input, grad_target)`` of :func:`loss` for the incoming ``grad``
    (a scalar for ``mean``/``sum``, the loss's shape for ``none``), of the broadcast shape; one
    pass, not recorded. ``needs``: which of the two to compute (None for the other).
    ``create_graph=True``: the same formulas in differentiable ops, recorded (double
    backward).

    >>> import fiamma
    >>> from fiamma import fused
    >>> gx, gt = fused.loss_backward("mse_loss", fiamma.tensor(1.0), fiamma.tensor([1.0, 3.0]),
    ...                              fiamma.zeros(2))
    >>> gx.tolist(), gt.tolist()
    ([1.0, 3.0], [-1.0, -3.0])
    """
    kind = _kind(name, param)
    shape, dt, red = _check(name, input, target, weight, pos_weight, reduction)
    if not isinstance(grad, Tensor):
        raise TypeError(f"{name}_backward: expected grad to be a Tensor, got "
                        f"{type(grad).__name__}")
    gshape = shape if red == K.LOSS_NONE else ()
    if tuple(grad._shape) != gshape:
        raise ValueError(f"{name}_backward: expected grad of shape {list(gshape)}, got "
                         f"{list(grad._shape)}")
    n = _numel(shape)
    cd = D.float64 if dt is D.float64 else D.float32
    need_x, need_t = needs
    if create_graph:
        gx, gt = _derivative(kind, grad, input, target, weight, pos_weight, float(param),
                             _divisor(red, input, n), shape, need_x, need_t)
        return gx, gt
    dev = input._storage.device
    f = getattr(input._storage.backend, "loss_bwd", None)
    if f is not None:
        x, t = _operand(input, cd, shape), _operand(target, cd, shape)
        w, wn = _weight(weight, cd, shape, n)
        pw, pn = _weight(pos_weight, cd, shape, n)
        g = grad.detach()
        if g._dtype is not cd or not g._contig:
            g = cast(g, cd).contiguous()
        gx = new_empty(shape, cd, dev) if need_x else None
        gt = new_empty(shape, cd, dev) if need_t else None
        div = _divisor(red, input, n)
        scale = 1.0 / div if div else 1.0
        rc = f(kind, g, 0 if red != K.LOSS_NONE else 1, scale, x, t, w, wn, pw, pn,
               float(param), gx, gt)
        if rc != K.ERR_DTYPE and rc != K.ERR_OP:
            check(rc, f"{name}_backward")
            return (None if gx is None else cast(gx, dt)), (None if gt is None else cast(gt, dt))
    from fiamma._grad_mode import no_grad

    def c(v):
        return None if v is None else cast(v.detach(), cd)

    with no_grad():
        gx, gt = _derivative(kind, c(grad), c(input), c(target), c(weight), c(pos_weight),
                             float(param), _divisor(red, input, n), shape, need_x, need_t)
        if gx is not None:
            gx = cast(gx, dt)
        if gt is not None:
            gt = cast(gt, dt)
    return gx, gt


def _softplus_neg(x):
    """``log(1 + e^-x)`` (stable; its derivative ``-sigmoid(-x)`` exact everywhere)."""
    from fiamma._ops.activations import activation

    return -activation("log_sigmoid", x)


def _composed(kind, x, t, w, pw, p):
    """The elementwise loss in core ops (differentiable)."""
    from fiamma._ops import elementwise as E

    if kind == K.LOSS_MSE:
        d = x - t
        v = d * d
    elif kind == K.LOSS_L1:
        v = (x - t).abs()
    elif kind == K.LOSS_SMOOTH_L1:
        a = (x - t).abs()
        v = E.where(a < p, a * a * (0.5 / p), a - 0.5 * p)
    elif kind == K.LOSS_HUBER:
        a = (x - t).abs()
        v = E.where(a <= p, 0.5 * a * a, p * (a - 0.5 * p))
    elif kind == K.LOSS_BCE:
        v = (t - 1) * (-x).log1p().clamp(min=-100) - t * x.log().clamp(min=-100)
    elif kind == K.LOSS_BCE_LOGITS:
        sp = _softplus_neg(x)
        v = (1 - t) * x + (sp if pw is None else (1 + (pw - 1) * t) * sp)
    elif kind == K.LOSS_SOFT_MARGIN:
        v = _softplus_neg(t * x)
    elif kind == K.LOSS_KL_DIV:
        from fiamma._ops.special_ops import xlogy

        v = xlogy(t, t) - t * x
    else:  # KL_DIV_LOG
        v = t.exp() * (t - x)
    return v if w is None else v * w


def _divisor(red, input, n):
    """What the reduced loss was divided by (None: nothing)."""
    if red == K.LOSS_MEAN:
        return n
    if red == _BATCHMEAN and input._shape:
        return input._shape[0]
    return None


def _derivative(kind, grad, x, t, w, pw, p, div, shape, need_x=True, need_t=True):
    """``(grad_input, grad_target)`` of the loss in core ops, of the broadcast ``shape``
    (differentiable: autograd's double backward runs them)."""
    gx, gt = _derivative_terms(kind, grad, x, t, w, pw, p, div, need_x, need_t)
    if gx is not None and tuple(gx._shape) != shape:
        gx = gx.expand(shape)
    if gt is not None and tuple(gt._shape) != shape:
        gt = gt.expand(shape)
    return gx, gt


def _derivative_terms(kind, grad, x, t, w, pw, p, div, need_x, need_t):
    from fiamma._ops import elementwise as E

    c = grad if div is None else grad / div
    if w is not None:
        c = c * w
    gx = gt = None
    if kind <= K.LOSS_HUBER:
        d = x - t
        if kind == K.LOSS_MSE:
            s = 2 * d
        elif kind == K.LOSS_L1:
            s = d.sign()
        elif kind == K.LOSS_SMOOTH_L1:
            s = E.where(d < -p, -1.0, E.where(d > p, 1.0, d / p))
        else:
            s = d.clamp(-p, p)
        gx = c * s
        return gx if need_x else None, -gx if need_t else None
    if kind == K.LOSS_BCE:
        if need_x:
            gx = c * (x - t) / ((1 - x) * x).clamp(min=_BCE_EPS)
        if need_t:
            gt = c * ((-x).log1p().clamp(min=-100) - x.log().clamp(min=-100))
    elif kind == K.LOSS_BCE_LOGITS:
        if pw is None:
            gx = c * (x.sigmoid() - t) if need_x else None
            gt = -(c * x) if need_t else None
        else:
            if need_x:
                gx = c * ((1 + (pw - 1) * t) * x.sigmoid() - pw * t)
            if need_t:
                gt = c * ((pw - 1) * _softplus_neg(x) - x)
    elif kind == K.LOSS_SOFT_MARGIN:
        q = c * (-t * x).sigmoid()
        gx = -t * q if need_x else None
        gt = -x * q if need_t else None
    elif kind == K.LOSS_KL_DIV:
        gx = -(c * t) if need_x else None
        gt = c * (t.log() + 1 - x) if need_t else None
    else:  # KL_DIV_LOG
        e = t.exp()
        gx = -(c * e) if need_x else None
        gt = c * e * (t - x + 1) if need_t else None
    return gx, gt
