"""Derivative of core's ``fused_attention``: core's fused backward, or under ``create_graph``
the same gradients written in differentiable ops (so higher orders work).

With s = scale q k^T + mask, P = softmax(s) (0 on fully masked rows), D the dropout
multipliers (1 without) and g the incoming gradient:
  gv = (P D)^T g,  dP = (g v^T) D,  dS = P (dP - rowsum(P dP)),  gq = scale dS k,
  gk = scale dS^T q;  under grouped-query attention key/value head j gets the sum over the
  query heads that read it.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _composed(grad, q, k, v, mask, lse, drop, causal, scale, gqa):
    H = q.shape[-3] if q.dim() >= 3 else 1
    Hk = k.shape[-3] if k.dim() >= 3 else 1
    rep = H // Hk
    kr = k.repeat_interleave(rep, dim=-3) if rep > 1 else k
    vr = v.repeat_interleave(rep, dim=-3) if rep > 1 else v
    L, S = q.shape[-2], k.shape[-2]
    s = (q * scale) @ kr.transpose(-2, -1)
    if causal:
        s = s + fiamma.full((L, S), float("-inf"), dtype=s.dtype, device=s.device).triu(1)
    elif mask is not None:
        s = s.masked_fill(mask.logical_not(), float("-inf")) if mask.dtype is fiamma.bool \
            else s + mask.to(s.dtype)
    dead = lse.reshape(tuple(q.shape[:-1]) + (1,)).isinf().to(fiamma.bool)
    p = s.masked_fill(dead, 0.0).softmax(-1).masked_fill(dead, 0.0)
    d = None if drop is None else drop.reshape(tuple(q.shape[:-1]) + (S,)).to(s.dtype)
    pd = p if d is None else p * d
    gv = pd.transpose(-2, -1) @ grad
    dp = grad @ vr.transpose(-2, -1)
    if d is not None:
        dp = dp * d
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    gq = (ds @ kr) * scale
    gk = (ds.transpose(-2, -1) @ q) * scale
    if rep > 1:
        lead = tuple(k.shape[:-3])
        gk = gk.reshape(lead + (Hk, rep) + tuple(k.shape[-2:])).sum(-3)
        gv = gv.reshape(lead + (Hk, rep) + tuple(v.shape[-2:])).sum(-3)
    return gq, gk, gv


@derivative(ops.fused_attention, save="inputs")
def _fused_attention(ctx, grad):
    q, k, v, mask = ctx.inputs
    kw = ctx.kwargs
    args = (kw["logsumexp"], kw["dropout_mask"], kw["is_causal"], kw["scale"], kw["enable_gqa"])
    if fiamma.is_grad_enabled():  # create_graph: differentiable gradients
        gq, gk, gv = _composed(grad, q, k, v, mask, *args[:2], *args[2:])
        return gq, gk, gv, None
    need = (_need(ctx, 0), _need(ctx, 1), _need(ctx, 2))
    if not any(need):
        return None, None, None, None
    gq, gk, gv = fiamma.fused_attention_backward(
        grad, q, k, v, kw["logsumexp"], mask, kw["dropout_mask"], kw["is_causal"], kw["scale"],
        kw["enable_gqa"], output_mask=need)
    return gq, gk, gv, None
