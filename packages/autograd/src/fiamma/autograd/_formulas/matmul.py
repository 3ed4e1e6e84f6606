"""Derivatives of the matrix products: matmul (all of its 1-D/batched forms), mm, bmm, mv,
dot/vdot and the fused ``beta * input + alpha * product`` ops (addmm, addmv, addr, baddbmm,
addbmm). Batch broadcasting is summed back to each operand's shape."""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import reduce_to
from fiamma.autograd_hook import ops


def _scaled(g, s):
    return g if s == 1 else g * s


def _matmul_grads(a, b, g, need_a, need_b):
    """Gradients of ``a @ b`` (torch.matmul's rules) for result gradient ``g``."""
    da, db = a.ndim, b.ndim
    ga = gb = None
    if da == 1 and db == 1:  # dot
        if need_a:
            ga = g * b
        if need_b:
            gb = g * a
        return ga, gb
    if da == 1:  # (k) @ (..., k, n) -> (..., n)
        if need_a:
            ga = reduce_to(fiamma.matmul(g.unsqueeze(-2), b.mT).squeeze(-2), a.shape)
        if need_b:
            gb = reduce_to(fiamma.matmul(a.unsqueeze(-1), g.unsqueeze(-2)), b.shape)
        return ga, gb
    if db == 1:  # (..., m, k) @ (k) -> (..., m)
        if need_a:
            ga = reduce_to(fiamma.matmul(g.unsqueeze(-1), b.unsqueeze(-2)), a.shape)
        if need_b:
            gb = reduce_to(fiamma.matmul(a.mT, g.unsqueeze(-1)).squeeze(-1), b.shape)
        return ga, gb
    if da == 2 and db == 2:
        # each gradient in its input's memory order: a transposed input (linear's weight.t())
        # gets a transposed gradient, so the transpose's backward hands the leaf a contiguous
        # gradient it can keep without a copy
        if need_a:
            ga = fiamma.mm(b, g.mT).mT if _col_major(a) else fiamma.mm(g, b.mT)
        if need_b:
            gb = fiamma.mm(g.mT, a).mT if _col_major(b) else fiamma.mm(a.mT, g)
        return ga, gb
    if need_a:
        ga = reduce_to(fiamma.matmul(g, b.mT), a.shape)
    if need_b:
        gb = reduce_to(fiamma.matmul(a.mT, g), b.shape)
    return ga, gb


def _col_major(t):
    """A 2-D tensor laid out column by column (the transpose of a contiguous matrix)."""
    s0, s1 = t.stride()
    return s0 == 1 and s1 == t.shape[0] and t.shape[0] > 1 and t.shape[1] > 1


@derivative(ops.matmul, ops.mm, ops.bmm, ops.mv, ops.dot, ops.vdot, save="inputs")
def _matmul(ctx, grad):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    return _matmul_grads(a, b, grad, need[0], need[1])


# the added input's value is not needed (only its shape): not saved, so it may be written in
# place before backward (linear's bias after an optimizer step), as in PyTorch
@derivative(ops.addmm, ops.addmv, ops.baddbmm, ops.addmm_, ops.addmv_, ops.baddbmm_,
            save="inputs", unsaved=(0,))
def _addmm(ctx, grad):
    c, a, b = ctx.inputs
    need = ctx.needs_input_grad
    alpha = ctx.kwargs.get("alpha", 1)
    beta = ctx.kwargs.get("beta", 1)
    gc = reduce_to(_scaled(grad, beta), ctx.input_shapes[0]) if need[0] else None
    ga, gb = _matmul_grads(a, b, _scaled(grad, alpha), need[1], need[2])
    return gc, ga, gb


@derivative(ops.addr, ops.addr_, save="inputs", unsaved=(0,))
def _addr(ctx, grad):
    c, a, b = ctx.inputs
    need = ctx.needs_input_grad
    alpha = ctx.kwargs.get("alpha", 1)
    beta = ctx.kwargs.get("beta", 1)
    gc = reduce_to(_scaled(grad, beta), ctx.input_shapes[0]) if need[0] else None
    g = _scaled(grad, alpha)
    ga = fiamma.mv(g, b.to(g.dtype)) if need[1] else None
    gb = fiamma.mv(g.mT, a.to(g.dtype)) if need[2] else None
    return gc, ga, gb


@derivative(ops.addbmm, ops.addbmm_, save="inputs", unsaved=(0,))
def _addbmm(ctx, grad):
    c, a, b = ctx.inputs
    need = ctx.needs_input_grad
    alpha = ctx.kwargs.get("alpha", 1)
    beta = ctx.kwargs.get("beta", 1)
    gc = reduce_to(_scaled(grad, beta), ctx.input_shapes[0]) if need[0] else None
    g = _scaled(grad, alpha).unsqueeze(0).expand((a.shape[0],) + tuple(grad.shape))
    ga = fiamma.bmm(g, b.mT) if need[1] else None
    gb = fiamma.bmm(a.mT, g) if need[2] else None
    return gc, ga, gb


@derivative(ops.inner, save="inputs")
def _inner(ctx, grad):
    """``inner(a, b)``: the product over the last dim, result ``a.shape[:-1] + b.shape[:-1]``."""
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    k = a.shape[-1]
    a2, b2 = a.reshape(-1, k), b.reshape(-1, k)
    g2 = grad.reshape(a2.shape[0], b2.shape[0])
    ga = fiamma.mm(g2, b2).reshape(a.shape) if need[0] else None
    gb = fiamma.mm(g2.mT, a2).reshape(b.shape) if need[1] else None
    return ga, gb


# products with a sparse CSR matrix P (core's C kernel): ``sparse_csr_mm(values, d)`` is P @ d
# (trans False) or P^T @ d (trans True), P = the recorded pattern holding ``values``;
# ``sparse_csr_sddmm(a, bt)`` is dot(a[row(e)], bt[col(e)]) at P's entries e. Both derivatives
# are these two products again, so create_graph differentiates them once more.
@derivative(ops.sparse_csr_mm, save="inputs")
def _sparse_csr_mm(ctx, grad):
    v, d = ctx.inputs
    p = ctx.kwargs["pattern"]
    trans = ctx.kwargs["trans"]
    need = ctx.needs_input_grad
    gv = gd = None
    if need[0]:
        # P @ d: dv[e] = dot(grad[row], d[col]); P^T @ d: dv[e] = dot(d[row], grad[col])
        a, b = (d, grad) if trans else (grad, d)
        gv = fiamma.sparse.sampled_addmm(p.detach(), a, b.mT, beta=0).values()
    if need[1]:
        gd = (p.mT @ grad) if not trans else (p @ grad)
    return gv, gd


@derivative(ops.sparse_csr_sddmm, save="inputs")
def _sparse_csr_sddmm(ctx, grad):
    a, bt = ctx.inputs
    p = ctx.kwargs["pattern"]
    need = ctx.needs_input_grad
    g = fiamma.sparse_csr_tensor(p.crow_indices(), p.col_indices(), grad, tuple(p.shape))
    ga = (g @ bt) if need[0] else None
    gb = (g.mT @ a) if need[1] else None
    return ga, gb
