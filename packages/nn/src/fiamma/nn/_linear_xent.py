"""``F.linear_cross_entropy``: ``cross_entropy(linear(input, weight, bias), target)``, and its
chunked form that never materialises the ``(N, num_classes)`` logits (PyTorch 2.13's
``torch.nn.functional.linear_cross_entropy``)."""

import warnings

import fiamma

__all__ = ["linear_cross_entropy"]

_CHUNKED = None  # the autograd Functions, built on first use


def _chunk_pieces(x, w, b, t, cls_weight, ignore_index, acc, rows_per_chunk, want_grads,
                  grad_rows=None):
    """Loop over row chunks: per-row losses, per-row weights and (when asked) the gradients
    of ``sum(row_scale * loss)`` for input, linear weight and bias, where row_scale is
    ``grad_rows`` (None: 1). Only one (chunk, C) block of logits exists at a time."""
    n, c = x.shape[0], w.shape[0]
    wa = w.to(acc)
    ba = None if b is None else b.to(acc)
    losses, row_w = [], []
    gi = fiamma.empty(x.shape, dtype=acc) if want_grads[0] else None
    gw = fiamma.zeros(w.shape, dtype=acc) if want_grads[1] else None
    gb = fiamma.zeros((c,), dtype=acc) if (want_grads[2] and b is not None) else None
    need = any(g is not None for g in (gi, gw, gb))
    for lo in range(0, n, rows_per_chunk):
        hi = min(n, lo + rows_per_chunk)
        xr = x[lo:hi].to(acc)
        z = xr @ wa.T
        if ba is not None:
            z = z + ba
        tr = t[lo:hi]
        valid = tr != ignore_index
        tc = fiamma.where(valid, tr, 0)
        bad = (tc < 0) | (tc >= c)
        if bool(bad.any()):
            raise IndexError(f"linear_cross_entropy: Target {int(tr[bad][0])} is out of bounds "
                             f"(num_classes {c})")
        wt = valid.to(acc) if cls_weight is None else cls_weight.to(acc)[tc] * valid.to(acc)
        lse = fiamma.logsumexp(z, 1)
        picked = z.gather(1, tc[:, None])[:, 0]
        losses.append((lse - picked) * wt)
        row_w.append(wt)
        if need:
            dz = (z - lse[:, None]).exp_()
            dz.scatter_add_(1, tc[:, None], -fiamma.ones((hi - lo, 1), dtype=acc))
            scale = wt if grad_rows is None else wt * grad_rows[lo:hi].to(acc)
            dz.mul_(scale[:, None])
            if gi is not None:
                gi[lo:hi] = dz @ wa
            if gw is not None:
                gw.add_(dz.T @ xr)
            if gb is not None:
                gb.add_(dz.sum(0))
        del z
    loss = fiamma.cat(losses) if losses else fiamma.zeros((0,), dtype=acc)
    weights = fiamma.cat(row_w) if row_w else fiamma.zeros((0,), dtype=acc)
    return loss, weights, gi, gw, gb


def _functions():
    global _CHUNKED
    if _CHUNKED is not None:
        return _CHUNKED
    from fiamma.autograd import Function, once_differentiable

    class Reduced(Function):
        """mean/sum: the gradients are computed in the forward pass, chunk by chunk, and
        scaled by the incoming (scalar) gradient in backward."""

        @staticmethod
        def forward(ctx, x, w, t, b, cls_weight, reduction, ignore_index, rows, acc, wants):
            with fiamma.no_grad():
                loss, weights, gi, gw, gb = _chunk_pieces(x, w, b, t, cls_weight, ignore_index,
                                                          acc, rows, wants)
                total = loss.sum()
                if reduction == "mean":
                    denom = weights.sum()
                    total = total / denom
                    gi, gw, gb = (None if g is None else g / denom for g in (gi, gw, gb))
            ctx.grads = tuple(None if g is None else g.to(d) for g, d in
                              ((gi, x.dtype), (gw, w.dtype), (gb, None if b is None else b.dtype)))
            return total.to(x.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            gi, gw, gb = ctx.grads
            return (None if gi is None else gi * grad, None if gw is None else gw * grad, None,
                    None if gb is None else gb * grad, None, None, None, None, None, None)

    class Unreduced(Function):
        """reduction='none': per-row losses; backward recomputes the chunks with the
        incoming per-row gradients."""

        @staticmethod
        def forward(ctx, x, w, t, b, cls_weight, ignore_index, rows, acc):
            with fiamma.no_grad():
                loss, _, _, _, _ = _chunk_pieces(x, w, b, t, cls_weight, ignore_index, acc,
                                                 rows, (False, False, False))
            ctx.save_for_backward(x, w, t, b, cls_weight)
            ctx.params = ignore_index, rows, acc
            return loss.to(x.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            x, w, t, b, cls_weight = ctx.saved_tensors
            ignore_index, rows, acc = ctx.params
            wants = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[3]
            _, _, gi, gw, gb = _chunk_pieces(x, w, b, t, cls_weight, ignore_index, acc, rows,
                                             wants, grad_rows=grad)
            return (None if gi is None else gi.to(x.dtype),
                    None if gw is None else gw.to(w.dtype), None,
                    None if gb is None else gb.to(b.dtype), None, None, None, None)

    _CHUNKED = Reduced, Unreduced
    return _CHUNKED


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``
    (``torch.nn.functional.linear_cross_entropy``).

    ``input`` is ``(in_features)`` or ``(N, in_features)``; ``linear_weight`` is
    ``(C, in_features)`` or ``(C, d_1, ..., d_K, in_features)`` (a K-dimensional loss, batched
    input only), ``linear_bias`` ``(C, d_1, ..., d_K)``; ``target`` holds class indices or,
    with the logits' shape, class probabilities; ``ignore_index=None`` means -100 (refused
    with probabilities). ``options=None`` computes the logits and calls ``cross_entropy``;
    a :class:`~fiamma.nn.LinearCrossEntropyOptions` selects the chunked computation
    (mean/sum/none, int64 class indices, no label smoothing, 2-d weight; otherwise it warns
    and falls back), which holds one ``(chunk, C)`` block of logits at a time and gives the
    same loss and gradients (first order only).

    >>> import fiamma
    >>> from fiamma.nn import functional as F, LinearCrossEntropyOptions
    >>> x, w = fiamma.randn(6, 4), fiamma.randn(50, 4)
    >>> t = fiamma.tensor([1, 7, 3, 49, 0, 7])
    >>> a = F.linear_cross_entropy(x, w, t)
    >>> b = F.linear_cross_entropy(x, w, t, options=LinearCrossEntropyOptions(batch_chunk_size=2))
    >>> bool(fiamma.allclose(a, b))
    True
    """
    from fiamma.nn import functional as F
    from fiamma.overrides import handle_torch_function, has_torch_function_variadic

    if has_torch_function_variadic(input, linear_weight, target, linear_bias, weight):
        return handle_torch_function(
            linear_cross_entropy, (input, linear_weight, target, linear_bias, weight), input,
            linear_weight, target, linear_bias=linear_bias, weight=weight, reduction=reduction,
            ignore_index=ignore_index, label_smoothing=label_smoothing, options=options)
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"linear_cross_entropy: expected input with dimensionality 1 or 2, "
                           f"got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError("linear_cross_entropy: expected linear_weight with dimensionality at "
                           f"least 2, got {linear_weight.dim()}")
    batch = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("linear_cross_entropy: expected equal input and linear_weight last "
                           f"dimensions (in_features), got {in_features} and "
                           f"{linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"linear_cross_entropy: expected linear_bias shape "
                           f"{(num_classes, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise RuntimeError(f"linear_cross_entropy: K-dimensional loss defined by linear_weight "
                           f"shape {tuple(linear_weight.shape)} requires batched input, "
                           f"(N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batch, num_classes, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("linear_cross_entropy: ignore_index cannot be specified when target "
                           "contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None:
        chunkable = (not out_features and reduction in ("mean", "sum", "none")
                     and label_smoothing == 0.0 and target.dtype == fiamma.int64)
        if not chunkable:
            warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs "
                          "reduction in {'mean','sum','none'}, label_smoothing == 0, "
                          "target.dtype == int64, out_features == (). Got "
                          f"reduction={reduction!r}, label_smoothing={label_smoothing}, "
                          f"target.dtype={target.dtype}, out_features={out_features}.",
                          stacklevel=2)
        else:
            return _chunked(input, linear_weight, target, linear_bias, weight, reduction,
                            ignore_index, options)
    w2 = linear_weight.reshape(-1, in_features) if out_features else linear_weight
    b2 = linear_bias.reshape(-1) if (out_features and linear_bias is not None) else linear_bias
    logits = F.linear(input, w2, b2).reshape(logits_shape)
    return F.cross_entropy(logits, target, weight=weight, reduction=reduction,
                           ignore_index=ignore_index, label_smoothing=label_smoothing)


def _chunked(input, w, target, bias, weight, reduction, ignore_index, options):
    unbatched = input.dim() == 1
    x = input[None] if unbatched else input
    t = target.reshape(1) if unbatched else target
    if t.dim() != 1 or t.shape[0] != x.shape[0]:
        raise ValueError(f"linear_cross_entropy: expected target of shape ({x.shape[0]},), got "
                         f"{tuple(target.shape)}")
    if weight is not None and tuple(weight.shape) != (w.shape[0],):
        raise RuntimeError(f"linear_cross_entropy: expected weight of shape ({w.shape[0]},), "
                           f"got {tuple(weight.shape)}")
    rows = options._chunk_rows(x.shape[0], x.shape[1], w.shape[0])
    acc = options._acc_dtype(input.dtype)
    reduced, unreduced = _functions()
    grad_on = fiamma.is_grad_enabled()
    if reduction == "none":
        out = unreduced.apply(x, w, t, bias, weight, ignore_index, rows, acc)
        return out[0] if unbatched else out
    wants = (grad_on and input.requires_grad, grad_on and w.requires_grad,
             grad_on and bias is not None and bias.requires_grad)
    return reduced.apply(x, w, t, bias, weight, reduction, ignore_index, rows, acc, wants)
