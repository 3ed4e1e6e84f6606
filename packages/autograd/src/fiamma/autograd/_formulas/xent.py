"""Derivative of core's fused ``cross_entropy_loss``: core's fused backward, or under
``create_graph`` the same gradient written in differentiable ops (so higher orders work).

With p = softmax(x) over the class dim, w the class weights (1 without), W = sum(w), s the
label smoothing, C the classes and a the incoming gradient of a row (0 on ignored rows; divided
by the summed target weights for ``mean``):
  d loss / d x_j = a (((1 - s) w_t + s W / C) p_j - (1 - s) w_t [j == t] - s w_j / C).
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


def _composed(grad, x, target, weight, reduction, ii, s):
    nd = x.dim()
    cdim = 0 if nd == 1 else 1
    c = x.shape[cdim]
    cshape = [1] * nd
    cshape[cdim] = c
    t = target.long()
    kept = t != ii
    safe = fiamma.where(kept, t, fiamma.zeros_like(t))
    keptf = kept.to(x.dtype)
    if weight is None:
        wt = keptf
        big_w = float(c)
        wrow = 1.0
    else:
        w = weight.detach().to(x.dtype)
        wt = w[safe] * keptf
        big_w = w.sum()
        wrow = w.reshape(cshape)
    if reduction == "mean":
        a = grad / wt.sum()
    else:
        a = grad
    a = a * keptf
    cls = fiamma.arange(c, device=x.device).reshape(cshape)
    onehot = (cls == safe.unsqueeze(cdim)).to(x.dtype)
    k = ((1.0 - s) * wt + (s / c) * big_w * keptf).unsqueeze(cdim)
    q = (1.0 - s) * wt.unsqueeze(cdim) * onehot + (s / c) * wrow
    return a.unsqueeze(cdim) * (k * x.softmax(cdim) - q)


@derivative(ops.cross_entropy_loss, save="inputs")
def _cross_entropy_loss(ctx, grad):
    x, target, weight = ctx.inputs
    kw = ctx.kwargs
    args = (kw["reduction"], kw["ignore_index"], kw["label_smoothing"])
    if fiamma.is_grad_enabled():  # create_graph: a differentiable gradient
        return _composed(grad, x, target, weight, *args), None, None
    return fiamma.cross_entropy_loss_backward(grad, x, target, weight, *args), None, None
