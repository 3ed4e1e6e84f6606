"""Normalisation ops with PyTorch's names: batch_norm, instance_norm, layer_norm, group_norm,
rms_norm, and their fused backward ops (grad_input, grad_weight and grad_bias in one C call).

The C kernels (csrc/norm.c) compute in float32 or float64; float16/bfloat16 inputs are computed
in float32 and the result cast back (as PyTorch's CPU kernels do). Statistics are one pass of
shifted sums accumulated in double. Each forward records itself for autograd with its saved
statistics; the backward ops record themselves too, so second derivatives work.

>>> import fiamma
>>> x = fiamma.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
>>> [round(v, 4) for v in fiamma.layer_norm(x, (3,))[0].tolist()]
[-1.2247, 0.0, 1.2247]
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = [
    "batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
    "batch_norm_backward", "layer_norm_backward", "group_norm_backward", "rms_norm_backward",
]



# ---- argument helpers ----------------------------------------------------------------------

def _check_float(x, op, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor, got {type(x).__name__}")
    if x._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating point {what}, got dtype {x._dtype}")


def _compute_dtype(x):
    return D.float64 if x._dtype is D.float64 else D.float32


def _param(t, n, cd, op, what):
    """A per-channel parameter as a contiguous (n,) tensor of dtype cd (None stays None)."""
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor or None, got {type(t).__name__}")
    if t._dtype is cd and t._contig and t._numel == n:
        return t  # C only reads it; requires_grad does not matter there
    if t._numel != n:
        raise ValueError(f"{op}: expected {what} with {n} elements, got shape {tuple(t._shape)}")
    t = cast(t.detach() if t.requires_grad else t, cd)
    if not t._contig:
        t = t.contiguous()
    return t


def _merged(shape, stride):
    """The single stride of dims that merge into one (None if they do not); size-1 dims are
    free."""
    st = None
    expect = None
    for n, s in zip(reversed(shape), reversed(stride)):
        if n == 1:
            continue
        if st is None:
            st, expect = s, s * n
        elif s != expect:
            return None
        else:
            expect = s * n
    return 1 if st is None else st


def _prod(xs):
    p = 1
    for v in xs:
        p *= v
    return p


def _as_ncs(x):
    """(x, (sN, sC, sS)) with x viewed as (N, C, S); copies when the trailing dims do not merge
    into a unit stride (a strided inner loop per channel, e.g. channels-last, sweeps the whole
    tensor once per channel: 6x slower than one copy)."""
    sh, st = x._shape, x._stride
    ss = _merged(sh[2:], st[2:]) if len(sh) > 2 else 1
    S = _prod(sh[2:])
    # (N, C) data (S == 1) is swept row by row, vectorised over unit-stride channels
    if ss is None or x._numel > 4096 and (ss != 1 if S > 1 else st[1] != 1 and sh[1] > 1):
        x = x.detach().contiguous()
        st = x._stride
        ss = 1
    return x, (st[0], 1 if sh[1] == 1 else st[1], ss)


def _rows(x, k):
    """(x, row stride) with x viewed as (M, K) rows over its last k dims, unit inner stride."""
    sh, st = x._shape, x._stride
    if x._contig:
        return x, _prod(sh[len(sh) - k:])
    inner = _merged(sh[len(sh) - k:], st[len(st) - k:]) if k else 1
    outer = _merged(sh[:len(sh) - k], st[:len(st) - k])
    if inner != 1 or outer is None:
        x = x.detach().contiguous()
        return x, _prod(sh[len(sh) - k:])
    return x, outer


def _device(op, x, *ts):
    """x's device, after checking every tensor of ts (None skipped) is on it."""
    dev = x._storage.device
    for t in ts:
        if isinstance(t, Tensor) and t._storage.device is not dev:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {dev} and "
                               f"{t._storage.device}")
    return dev


def _grad_on(*ts):
    return G.state.enabled and G.any_requires_grad(*ts)


# ---- batch norm ----------------------------------------------------------------------------

def _running(t, c, cd, op, what):
    if t is None:
        return None, None
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor or None, got {type(t).__name__}")
    if t._numel != c or len(t._shape) != 1:
        raise ValueError(f"{op}: expected {what} of shape ({c},), got {tuple(t._shape)}")
    if t._dtype is cd:
        return t, None
    tmp = cast(t, cd)
    return tmp, t


def _native(be, dt):
    """Whether backend be's batch norm takes 16-bit dtype dt's activations as they are."""
    f = getattr(be, "bn_native", None)
    return f is not None and f(dt)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation over every dim but 1 (channels).

    ``training``: normalise by the batch's mean and biased variance and update the running
    stats in place (``r = (1 - momentum) * r + momentum * stat``, unbiased variance); else
    normalise by the running stats. Running stats may be None in training.

    >>> import fiamma
    >>> x = fiamma.tensor([[1.0], [3.0]])
    >>> rm, rv = fiamma.zeros(1), fiamma.ones(1)
    >>> [round(v, 4) for v in fiamma.batch_norm(x, rm, rv, training=True).flatten().tolist()]
    [-1.0, 1.0]
    >>> rm.tolist(), rv.tolist()  # momentum 0.1, unbiased variance 2
    ([0.20000000298023224], [1.100000023841858])
    """
    op = ops.batch_norm
    _check_float(input, op)
    if len(input._shape) < 2:
        raise ValueError(f"{op}: expected input with at least 2 dims (N, C, ...), "
                         f"got shape {tuple(input._shape)}")
    training = bool(training)
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: running_mean and running_var must be given when not training")
    cd = _compute_dtype(input)
    shape = input._shape
    N, C, S = shape[0], shape[1], _prod(shape[2:])
    w = _param(weight, C, cd, op, "weight")
    b = _param(bias, C, cd, op, "bias")
    rm, rm_back = _running(running_mean, C, cd, op, "running_mean")
    rv, rv_back = _running(running_var, C, cd, op, "running_var")
    dev = _device(op, input, weight, bias, running_mean, running_var)
    be = input._storage.backend
    # 16-bit activations the backend normalises as they are (float32 statistics), else widened
    xd = input._dtype if input._dtype is not cd and _native(be, input._dtype) else cd
    src = input.detach() if input.requires_grad else input
    mean = new_empty((C,), cd, dev)
    invstd = new_empty((C,), cd, dev)
    mom = 0.0 if momentum is None else float(momentum)
    upd = training and input._numel > 0
    while True:
        x, xs = _as_ncs(cast(src, xd))
        y = new_empty(shape, xd, dev)
        rc = be.batch_norm_fwd(
            N, C, S, x, xs, y, w, b, mean, invstd, rm if upd or not training else None,
            rm._stride[0] if rm is not None else 0, rv if upd or not training else None,
            rv._stride[0] if rv is not None else 0, int(training), mom, float(eps))
        if rc != K.ERR_DTYPE or xd is cd:
            break
        xd = cd  # the 16-bit kernel declined (or failed to build): widen, as without it
    check(rc, op, f"input shape {tuple(shape)}")
    if upd:
        for r, back in ((rm, rm_back), (rv, rv_back)):
            if r is not None:
                if back is not None:
                    back.copy_(r)
                else:
                    r._bump()
    if input._dtype is not cd:
        y = cast(y, input._dtype)
    if _grad_on(input, weight, bias):
        G.record(op, y, (input, weight, bias),
                 {"mean": mean, "invstd": invstd, "training": training, "eps": float(eps)})
    return y


def batch_norm_backward(grad_output, input, weight, mean, invstd, training, eps=1e-5,
                        output_mask=(True, True, True)):
    """Fused backward of :func:`batch_norm`: ``(grad_input, grad_weight, grad_bias)`` (None
    where ``output_mask`` is False) from the statistics batch_norm used (``mean``, ``invstd``:
    the batch's in training, the running stats' otherwise)."""
    op = ops.batch_norm_backward
    _check_float(input, op)
    _check_float(grad_output, op, "grad_output")
    if tuple(grad_output._shape) != tuple(input._shape):
        raise ValueError(f"{op}: grad_output shape {tuple(grad_output._shape)} != input shape "
                         f"{tuple(input._shape)}")
    cd = _compute_dtype(input)
    shape = input._shape
    N, C, S = shape[0], shape[1], _prod(shape[2:])
    w = _param(weight, C, cd, op, "weight")
    m = _param(mean, C, cd, op, "mean")
    iv = _param(invstd, C, cd, op, "invstd")
    dev = _device(op, input, grad_output, weight, mean, invstd)
    be = input._storage.backend
    xd = input._dtype if (input._dtype is not cd and grad_output._dtype is input._dtype and
                          _native(be, input._dtype)) else cd
    xsrc = input.detach() if input.requires_grad else input
    gsrc = grad_output.detach() if grad_output.requires_grad else grad_output
    gw = new_empty((C,), cd, dev) if output_mask[1] else None
    gb = new_empty((C,), cd, dev) if output_mask[2] else None
    while True:
        x, xs = _as_ncs(cast(xsrc, xd))
        g, gs = _as_ncs(cast(gsrc, xd))
        gx = new_empty(shape, xd, dev) if output_mask[0] else None
        rc = be.batch_norm_bwd(N, C, S, g, gs, x, xs, w, m, iv, int(bool(training)), gx, gw, gb)
        if rc != K.ERR_DTYPE or xd is cd:
            break
        xd = cd
    check(rc, op, f"input shape {tuple(shape)}")
    outs = _cast_outs((gx, gw, gb), (input, weight, weight))
    if _grad_on(grad_output, input, weight):
        G.record(op, outs, (grad_output, input, weight),
                 {"mean": mean, "invstd": invstd, "training": bool(training), "eps": eps})
    return outs


def _cast_outs(outs, likes):
    res = []
    for o, like in zip(outs, likes):
        if o is not None and like is not None and like._dtype is not o._dtype:
            o = cast(o, like._dtype)
        res.append(o)
    return tuple(res)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalisation: each (sample, channel) over its spatial dims. The running stats
    (when given and ``use_input_stats``) are updated with the statistics averaged over the
    batch, as PyTorch does; with ``use_input_stats=False`` the running stats normalise."""
    op = "instance_norm"
    _check_float(input, op)
    if len(input._shape) < 2:
        raise ValueError(f"{op}: expected input with at least 2 dims (N, C, ...), "
                         f"got shape {tuple(input._shape)}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: running_mean and running_var must be given when "
                         "use_input_stats is False")
    shape = tuple(input._shape)
    N, C = shape[0], shape[1]
    x = input.reshape((1, N * C) + shape[2:])
    rep = [t.repeat(N) if t is not None else None for t in (weight, bias)]
    rm = running_mean.repeat(N) if running_mean is not None else None
    rv = running_var.repeat(N) if running_var is not None else None
    y = batch_norm(x, rm, rv, rep[0], rep[1], use_input_stats, momentum, eps)
    if use_input_stats and input._numel:
        if rm is not None:
            running_mean.copy_(rm.view(N, C).mean(0))
        if rv is not None:
            running_var.copy_(rv.view(N, C).mean(0))
    return y.reshape(shape)


# ---- row norms: layer, group, RMS ----------------------------------------------------------

def _norm_shape(normalized_shape, op):
    if type(normalized_shape) is tuple and normalized_shape:
        return normalized_shape
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    try:
        ns = tuple(int(s) for s in normalized_shape)
    except TypeError:
        raise TypeError(f"{op}: normalized_shape must be an int or a sequence of ints, "
                        f"got {normalized_shape!r}") from None
    if not ns:  # PyTorch's refusal (an empty shape would normalise over nothing)
        raise RuntimeError(f"{op}: Expected normalized_shape to be at least 1-dimensional, "
                           "i.e., containing at least one element, but got normalized_shape = []")
    return ns


def _row_forward(op, rms, input, k, weight, bias, Gs, P, Sp, eps, wshape):
    cd = _compute_dtype(input)
    shape = input._shape
    K = _prod(shape[len(shape) - k:])
    M = input._numel // K if K else _prod(shape[:len(shape) - k])
    nw = Gs * P
    w = _param(weight, nw, cd, op, "weight")
    b = _param(bias, nw, cd, op, "bias")
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and wshape is not None and tuple(t._shape) != wshape:
            raise ValueError(f"{op}: expected {what} of shape {wshape}, got {tuple(t._shape)}")
    dev = _device(op, input, weight, bias)
    x, sx = _rows(input if input._dtype is cd else cast(input, cd), k)
    y = new_empty(shape, cd, dev)
    mean = None if rms else new_empty((M,), cd, dev)
    rstd = new_empty((M,), cd, dev)
    if input._numel:
        rc = y._storage.backend.row_norm_fwd(int(rms), M, K, x, sx, y, w, b, Gs, P, Sp, mean,
                                             rstd, float(eps))
        check(rc, op, f"input shape {tuple(shape)}")
    if input._dtype is not cd:
        y = cast(y, input._dtype)
    return y, mean, rstd


def _row_backward(op, rms, grad_output, input, k, weight, mean, rstd, Gs, P, Sp, output_mask,
                  wshape, has_bias=True):
    _check_float(input, op)
    _check_float(grad_output, op, "grad_output")
    if tuple(grad_output._shape) != tuple(input._shape):
        raise ValueError(f"{op}: grad_output shape {tuple(grad_output._shape)} != input shape "
                         f"{tuple(input._shape)}")
    cd = _compute_dtype(input)
    shape = input._shape
    K = _prod(shape[len(shape) - k:])
    M = input._numel // K if K else _prod(shape[:len(shape) - k])
    nw = Gs * P
    w = _param(weight, nw, cd, op, "weight")
    mu = _param(mean, M, cd, op, "mean") if not rms else None
    rs = _param(rstd, M, cd, op, "rstd")
    x, sx = _rows(cast(input.detach() if input.requires_grad else input, cd), k)
    g, sg = _rows(cast(grad_output.detach() if grad_output.requires_grad else grad_output, cd),
                  k)
    dev = _device(op, input, grad_output, weight, mean, rstd)
    gx = new_empty(shape, cd, dev) if output_mask[0] else None
    wsh = tuple(weight._shape) if weight is not None else wshape
    # the backend accumulates into gw, gb, unless it declares that it writes them whole
    zero = not (input._numel and getattr(type(x._storage.backend), "row_norm_wb_writes", False))
    gw = new_empty(wsh, cd, dev, zero=zero) if output_mask[1] else None
    gb = new_empty(wsh, cd, dev, zero=zero) if has_bias and output_mask[2] else None
    if input._numel:
        rc = x._storage.backend.row_norm_bwd(int(rms), M, K, g, sg, x, sx, w, Gs, P, Sp, mu, rs,
                                             gx, gw, gb)
        check(rc, op, f"input shape {tuple(shape)}")
    return _cast_outs((gx, gw, gb), (input, weight, weight))


def _check_trailing(input, ns, op):
    k = len(ns)
    if len(input._shape) < k or tuple(input._shape[len(input._shape) - k:]) != ns:
        raise ValueError(f"{op}: normalized_shape {list(ns)} does not match the trailing dims "
                         f"of input shape {tuple(input._shape)}")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the last ``len(normalized_shape)`` dims, with an optional
    elementwise affine (``weight``, ``bias`` of ``normalized_shape``).

    >>> import fiamma
    >>> fiamma.layer_norm(fiamma.tensor([[0.0, 2.0]]), (2,), eps=0.0).tolist()
    [[-1.0, 1.0]]
    """
    op = ops.layer_norm
    _check_float(input, op)
    ns = _norm_shape(normalized_shape, op)
    _check_trailing(input, ns, op)
    K = _prod(ns)
    y, mean, rstd = _row_forward(op, False, input, len(ns), weight, bias, 1, K, 1, eps, ns)
    if _grad_on(input, weight, bias):
        G.record(op, y, (input, weight, bias),
                 {"normalized_shape": ns, "mean": mean, "rstd": rstd, "eps": float(eps)})
    return y


def layer_norm_backward(grad_output, input, normalized_shape, weight, mean, rstd, eps=1e-5,
                        output_mask=(True, True, True)):
    """Fused backward of :func:`layer_norm`: ``(grad_input, grad_weight, grad_bias)``."""
    op = ops.layer_norm_backward
    ns = _norm_shape(normalized_shape, op)
    K = _prod(ns)
    outs = _row_backward(op, False, grad_output, input, len(ns), weight, mean, rstd, 1, K, 1,
                         output_mask, ns)
    if _grad_on(grad_output, input, weight):
        G.record(op, outs, (grad_output, input, weight),
                 {"normalized_shape": ns, "mean": mean, "rstd": rstd, "eps": eps})
    return outs


def _group_dims(input, num_groups, op):
    if len(input._shape) < 2:
        raise ValueError(f"{op}: expected input with at least 2 dims (N, C, ...), "
                         f"got shape {tuple(input._shape)}")
    C = input._shape[1]
    num_groups = int(num_groups)
    if num_groups <= 0 or C % num_groups:
        raise ValueError(f"{op}: expected the number of channels ({C}) to be divisible by "
                         f"num_groups, got num_groups={num_groups}")
    return C, num_groups, C // num_groups, _prod(input._shape[2:])


def _group_input(input):
    """(N, G, C/G * S) rows need the whole input contiguous."""
    return input if input._contig else input.contiguous()


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation: the channels are split into ``num_groups`` groups, each sample's
    group normalised over its channels and spatial dims; per-channel affine.

    >>> import fiamma
    >>> fiamma.group_norm(fiamma.tensor([[0.0, 2.0]]), 1, eps=0.0).tolist()
    [[-1.0, 1.0]]
    """
    op = ops.group_norm
    _check_float(input, op)
    C, Gs, P, S = _group_dims(input, num_groups, op)
    x = _group_input(input.detach() if input.requires_grad else input)
    y, mean, rstd = _row_forward(op, False, _rows_view(x, Gs), 1, weight, bias, Gs, P, S,
                                 eps, (C,))
    y = y.view(tuple(input._shape))
    if _grad_on(input, weight, bias):
        G.record(op, y, (input, weight, bias),
                 {"num_groups": Gs, "mean": mean, "rstd": rstd, "eps": float(eps)})
    return y


def _rows_view(x, Gs):
    """x (N, C, ...) contiguous viewed as (N * G, C/G * S) rows."""
    C = x._shape[1]
    return x.view(x._shape[0] * Gs, (C // Gs) * _prod(x._shape[2:]))


def group_norm_backward(grad_output, input, num_groups, weight, mean, rstd, eps=1e-5,
                        output_mask=(True, True, True)):
    """Fused backward of :func:`group_norm`: ``(grad_input, grad_weight, grad_bias)``."""
    op = ops.group_norm_backward
    _check_float(input, op)
    C, Gs, P, S = _group_dims(input, num_groups, op)
    x = _group_input(input.detach() if input.requires_grad else input)
    g = _group_input(grad_output.detach() if grad_output.requires_grad else grad_output)
    gx, gw, gb = _row_backward(op, False, _rows_view(g, Gs), _rows_view(x, Gs), 1, weight,
                               mean, rstd, Gs, P, S, output_mask, (C,))
    outs = (gx.view(tuple(input._shape)) if gx is not None else None, gw, gb)
    if _grad_on(grad_output, input, weight):
        G.record(op, outs, (grad_output, input, weight),
                 {"num_groups": Gs, "mean": mean, "rstd": rstd, "eps": eps})
    return outs


def _rms_eps(eps, dt):
    return D.finfo(dt).eps if eps is None else float(eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the last ``len(normalized_shape)`` dims:
    ``x / sqrt(mean(x^2) + eps) * weight``; ``eps=None`` uses ``finfo(input.dtype).eps``.

    >>> import fiamma
    >>> fiamma.rms_norm(fiamma.tensor([[3.0, 4.0]]), (2,), eps=0.0).tolist()[0][0]
    0.8485281467437744
    """
    op = ops.rms_norm
    _check_float(input, op)
    ns = _norm_shape(normalized_shape, op)
    _check_trailing(input, ns, op)
    e = _rms_eps(eps, input._dtype)
    y, _, rstd = _row_forward(op, True, input, len(ns), weight, None, 1, _prod(ns), 1, e, ns)
    if _grad_on(input, weight):
        G.record(op, y, (input, weight), {"normalized_shape": ns, "rstd": rstd, "eps": e})
    return y


def rms_norm_backward(grad_output, input, normalized_shape, weight, rstd, eps=None,
                      output_mask=(True, True)):
    """Fused backward of :func:`rms_norm`: ``(grad_input, grad_weight)``."""
    op = ops.rms_norm_backward
    ns = _norm_shape(normalized_shape, op)
    gx, gw, _ = _row_backward(op, True, grad_output, input, len(ns), weight, None, rstd, 1,
                              _prod(ns), 1, (output_mask[0], output_mask[1], False), ns, False)
    outs = (gx, gw)
    if _grad_on(grad_output, input, weight):
        G.record(op, outs, (grad_output, input, weight),
                 {"normalized_shape": ns, "rstd": rstd, "eps": _rms_eps(eps, input._dtype)})
    return outs

