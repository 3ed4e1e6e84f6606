"""Derivatives of core's normalisation ops: batch_norm, layer_norm, group_norm, rms_norm (the
first derivative is core's fused C backward op) and of those backward ops (the double backward,
written in differentiable fiamma ops, so higher orders work too).

Notation for one normalisation group of m elements: c = x - mean(x) (rms: c = x),
r = 1/sqrt(mean(c^2) + eps), xh = c * r, y = xh * w + b. The Jacobian of xh is the symmetric
P(u) = r * (cen(u) - xh * mean(xh * u)) (cen(u) = u - mean(u); rms: cen = identity), so the
first backward is gx = P(g * w), gw = sum g * xh, gb = sum g. Its derivative along the
cotangents (A, Bw, Bb) of (gx, gw, gb):
    d_g = w * P(A) + xh * Bw + Bb
    d_w = sum g * P(A)
    d_x = P(g * Bw) - r^3 c / m * (S1 - 3 r^2 S2 S3) - r^3 S3 cen(g w) - r^3 S2 cen(A) / m
with S1 = sum(g w cen(A)), S2 = sum(g w c), S3 = mean(c A) over the group. Batch norm in eval
mode is the affine map (x - running_mean) * invstd * w + b with constant statistics.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _mask(ctx, n=3):
    # whether each of (input, weight, bias) gets a gradient: given (a tensor, so it has a
    # shape; the bias itself is not saved) and needing one
    shapes = ctx.input_shapes
    return tuple(_need(ctx, i) and (i == 0 or shapes[i] is not None) for i in range(n))


# ---- first derivatives: the fused C backward ops -------------------------------------------

# batch_norm's and group_norm's bias values are not needed: not saved (written in place before
# backward is allowed, as in PyTorch); layer_norm's is saved, as PyTorch does
@derivative(ops.batch_norm, save="inputs", unsaved=(2,))
def _batch_norm(ctx, grad):
    x, w, b = ctx.inputs
    kw = ctx.kwargs
    mask = _mask(ctx)
    if not any(mask):
        return None, None, None
    return fiamma.batch_norm_backward(grad, x, w, kw["mean"], kw["invstd"], kw["training"],
                                      kw["eps"], output_mask=mask)


@derivative(ops.layer_norm, save="inputs")
def _layer_norm(ctx, grad):
    x, w, b = ctx.inputs
    kw = ctx.kwargs
    mask = _mask(ctx)
    if not any(mask):
        return None, None, None
    return fiamma.layer_norm_backward(grad, x, kw["normalized_shape"], w, kw["mean"],
                                      kw["rstd"], kw["eps"], output_mask=mask)


@derivative(ops.group_norm, save="inputs", unsaved=(2,))
def _group_norm(ctx, grad):
    x, w, b = ctx.inputs
    kw = ctx.kwargs
    mask = _mask(ctx)
    if not any(mask):
        return None, None, None
    return fiamma.group_norm_backward(grad, x, kw["num_groups"], w, kw["mean"], kw["rstd"],
                                      kw["eps"], output_mask=mask)


@derivative(ops.rms_norm, save="inputs")
def _rms_norm(ctx, grad):
    x, w = ctx.inputs
    kw = ctx.kwargs
    mask = _mask(ctx, 2)
    if not any(mask):
        return None, None
    return fiamma.rms_norm_backward(grad, x, kw["normalized_shape"], w, kw["rstd"], kw["eps"],
                                    output_mask=mask)


# ---- double backward -----------------------------------------------------------------------

def _double(g, x, wb, A, Bw, Bb, dims, m, center, eps, need_g, need_x, need_w):
    """(d_g, d_x, d_w before the per-channel sum) for one layout: ``dims`` are the group's
    dims of x (keepdim sums), ``wb``/``Bw``/``Bb`` per-channel tensors broadcast to x (or
    None)."""
    def mean(t):
        return t.sum(dim=dims, keepdim=True) / m

    def cen(t):
        return t - mean(t) if center else t

    c = cen(x)
    r = fiamma.rsqrt(mean(c * c) + eps)
    xh = c * r

    def P(u):
        return r * (cen(u) - xh * mean(xh * u))

    gh = g if wb is None else g * wb
    PA = P(A) if A is not None else None
    d_g = d_x = d_w = None
    if need_g:
        terms = []
        if PA is not None:
            terms.append(PA if wb is None else PA * wb)
        if Bw is not None:
            terms.append(xh * Bw)
        if Bb is not None:
            terms.append(Bb + fiamma.zeros_like(x))
        d_g = _total(terms, x)
    if need_x:
        terms = []
        if Bw is not None:
            terms.append(P(g * Bw))
        if A is not None:
            cA = cen(A)
            r3 = r * r * r
            S1 = (gh * cA).sum(dim=dims, keepdim=True)
            S2 = (gh * c).sum(dim=dims, keepdim=True)
            S3 = mean(c * A)
            terms.append(-(r3 / m) * c * (S1 - 3.0 * r * r * S2 * S3))
            terms.append(-r3 * S3 * cen(gh))
            terms.append(-(r3 / m) * S2 * cA)
        d_x = _total(terms, x)
    if need_w and PA is not None:
        d_w = g * PA
    return d_g, d_x, d_w


def _total(terms, like):
    if not terms:
        return fiamma.zeros_like(like)
    t = terms[0]
    for u in terms[1:]:
        t = t + u
    return t


def _grads3(grad):
    if isinstance(grad, fiamma.Tensor):
        return grad, None, None
    grad = tuple(grad) + (None,) * (3 - len(grad))
    return grad[0], grad[1], grad[2]


@derivative(ops.batch_norm_backward, save="inputs")
def _batch_norm_backward(ctx, grad):
    g, x, w = ctx.inputs
    kw = ctx.kwargs
    A, Bw, Bb = _grads3(grad)
    nd = len(x.shape)
    C = x.shape[1]
    bshape = (1, C) + (1,) * (nd - 2)

    def bc(t):
        return None if t is None else t.reshape(bshape)

    dims = (0,) + tuple(range(2, nd))
    wb = bc(w)
    if kw["training"]:
        m = x.numel() // C if C else 1
        d_g, d_x, d_w = _double(g, x, wb, A, bc(Bw), bc(Bb), dims, m, True, kw["eps"],
                                _need(ctx, 0), _need(ctx, 1), _need(ctx, 2) and w is not None)
    else:
        inv = bc(kw["invstd"])
        xh = (x - bc(kw["mean"])) * inv
        terms = []
        if A is not None:
            terms.append(A * inv if wb is None else A * wb * inv)
        if Bw is not None:
            terms.append(xh * bc(Bw))
        if Bb is not None:
            terms.append(bc(Bb) + fiamma.zeros_like(x))
        d_g = _total(terms, x) if _need(ctx, 0) else None
        d_x = g * bc(Bw) * inv if Bw is not None and _need(ctx, 1) else None
        d_w = g * A * inv if A is not None and _need(ctx, 2) and w is not None else None
    if d_w is not None:
        d_w = d_w.sum(dim=dims).reshape(tuple(w.shape))
    return d_g, d_x, d_w


def _row_double(ctx, grad, k, center):
    g, x, w = ctx.inputs
    kw = ctx.kwargs
    A, Bw, Bb = _grads3(grad)
    nd = len(x.shape)
    dims = tuple(range(nd - k, nd))
    m = 1
    for s in x.shape[nd - k:]:
        m *= s
    d_g, d_x, d_w = _double(g, x, w, A, Bw, Bb, dims, m, center, kw["eps"], _need(ctx, 0),
                            _need(ctx, 1), _need(ctx, 2) and w is not None)
    if d_w is not None and nd > k:
        d_w = d_w.sum(dim=tuple(range(nd - k)))
    return d_g, d_x, d_w


@derivative(ops.layer_norm_backward, save="inputs")
def _layer_norm_backward(ctx, grad):
    return _row_double(ctx, grad, len(ctx.kwargs["normalized_shape"]), True)


@derivative(ops.rms_norm_backward, save="inputs")
def _rms_norm_backward(ctx, grad):
    return _row_double(ctx, grad, len(ctx.kwargs["normalized_shape"]), False)


@derivative(ops.group_norm_backward, save="inputs")
def _group_norm_backward(ctx, grad):
    g, x, w = ctx.inputs
    kw = ctx.kwargs
    A, Bw, Bb = _grads3(grad)
    shape = tuple(x.shape)
    N, C = shape[0], shape[1]
    Gs = kw["num_groups"]
    P = C // Gs
    S = 1
    for s in shape[2:]:
        S *= s
    gshape = (N, Gs, P, S)

    def rs(t):
        return None if t is None else t.reshape(gshape)

    def bc(t):
        return None if t is None else t.reshape((1, Gs, P, 1))

    d_g, d_x, d_w = _double(rs(g), rs(x), bc(w), rs(A), bc(Bw), bc(Bb), (2, 3), P * S, True,
                            kw["eps"], _need(ctx, 0), _need(ctx, 1),
                            _need(ctx, 2) and w is not None)
    if d_g is not None:
        d_g = d_g.reshape(shape)
    if d_x is not None:
        d_x = d_x.reshape(shape)
    if d_w is not None:
        d_w = d_w.sum(dim=(0, 3)).reshape(tuple(w.shape))
    return d_g, d_x, d_w
