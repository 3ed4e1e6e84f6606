"""Derivatives of core's fused elementwise losses (``fiamma.fused.loss``: mse_loss, l1_loss,
smooth_l1_loss, huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
soft_margin_loss, kl_div): core's one-pass backward, which writes the input's and the
target's gradients together, or under ``create_graph`` the same formulas in differentiable ops
(so higher orders work). The weights are kwargs of the node, not inputs (as PyTorch's, whose
nodes have no edges to them); core refuses weights that require grad."""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


@derivative(ops.mse_loss, ops.l1_loss, ops.smooth_l1_loss, ops.huber_loss,
            ops.binary_cross_entropy, ops.binary_cross_entropy_with_logits,
            ops.soft_margin_loss, ops.kl_div, save="inputs")
def _loss(ctx, grad):
    x, t = ctx.inputs
    kw = ctx.kwargs
    gx, gt = fiamma.fused.loss_backward(ctx.op, grad, x, t, kw.get("weight"),
                                        kw.get("pos_weight"), kw["reduction"], kw["param"],
                                        needs=(ctx._needs(0), ctx._needs(1)),
                                        create_graph=fiamma.is_grad_enabled())
    return gx, gt
