"""Derivatives of core's one-op ``nll_loss`` (``fiamma.fused.nll_loss``) and ``embedding``,
written in differentiable ops so that higher orders work.

nll_loss: with w_i the weight of element i's target (0 where ignored) and a the incoming
gradient (divided by the summed w for ``mean``), d loss / d x[i, t_i] = -a_i w_i, zero
elsewhere: a scatter into zeros. The target is an index and the weight is not differentiated.

embedding: the weight's gradient sums the output rows' gradients into the rows they were
read from (index_add), with the ``padding_idx`` row's contributions dropped and each divided by
its index's count under ``scale_grad_by_freq``; with ``sparse`` it is the uncoalesced sparse
COO tensor of those rows, as PyTorch's.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import linked
from fiamma.autograd_hook import ops


def _target_weights(target, weight, ii, dtype):
    """(target with ignored entries 0, each entry's class weight with ignored ones 0); the
    forward has already refused targets out of range."""
    t = target.detach().long()
    ignored = t == ii
    safe = t.masked_fill(ignored, 0)
    if weight is None:
        return safe, (~ignored).to(dtype)
    return safe, weight.detach()[safe].to(dtype).masked_fill(ignored, 0.0)


@derivative(ops.nll_loss, save="inputs")
def _nll_loss(ctx, grad):
    x, target, weight = ctx.inputs
    kw = ctx.kwargs
    reduction, ii = kw["reduction"], kw["ignore_index"]
    cdim = 0 if x.dim() == 1 else 1
    if kw.get("_plain"):  # no weight, every target a class: -grad (/ count) at each target
        t = target.detach()
        idx = (t if t.dtype is fiamma.int64 else t.long()).unsqueeze(cdim)
        if reduction == "none":
            src = grad.neg().unsqueeze(cdim)
        else:
            n = t.numel()
            src = (grad * (-1.0 / n) if reduction == "mean" else grad.neg()).expand(idx.shape)
    else:
        safe, w = _target_weights(target, weight, ii, x.dtype)
        if reduction == "mean":
            # every target ignored (summed weight 0): PyTorch's gradient is 0, not 0/0
            total = w.sum()
            grad = grad / total.masked_fill(total == 0, 1.0)
        src = (grad * w).neg().unsqueeze(cdim)
        idx = safe.unsqueeze(cdim)
    gx = fiamma.zeros_like(x)
    if fiamma.is_grad_enabled():  # create_graph: differentiable, and a function of x
        return linked(gx.scatter(cdim, idx, src), x), None, None  # (zero along x, as PyTorch)
    return gx.scatter_(cdim, idx, src), None, None


@derivative(ops.embedding, save="inputs", unsaved=(0,))
def _embedding(ctx, grad):
    indices = ctx.inputs[1]
    kw = ctx.kwargs
    n, dim = ctx.input_shapes[0]
    flat = indices.reshape(-1)
    if flat.dtype is not fiamma.int64:
        flat = flat.long()
    g = grad.reshape(flat.numel(), dim)  # not -1: dim may be 0
    p = kw["padding_idx"]
    if kw["scale_grad_by_freq"]:
        counts = fiamma.bincount(flat, minlength=n).index_select(0, flat)
        g = g / counts.to(g.dtype).unsqueeze(1)
    if kw["sparse"]:  # PyTorch's: the looked-up rows, padding_idx's left out, uncoalesced
        if p >= 0:
            keep = flat != p
            flat, g = flat[keep], g[keep]
        return fiamma.sparse_coo_tensor(flat.unsqueeze(0), g, (n, dim)), None
    if p >= 0:
        g = fiamma.where((flat == p).unsqueeze(1), fiamma.zeros((), dtype=g.dtype), g)
    gw = g.new_zeros((n, dim))  # (g's kind of tensor: a __torch_dispatch__ subclass's too)
    if fiamma.is_grad_enabled() and g.requires_grad:
        return gw.index_add(0, flat, g), None
    return gw.index_add_(0, flat, g), None
