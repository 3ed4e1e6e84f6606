"""Helpers shared by the formula modules (no registrations here: ``unary`` registers what its
caller gives it).

Everything is written in public, differentiable fiamma ops so that a formula built from these
helpers can itself be differentiated (``create_graph=True``).
"""

import fiamma
from fiamma.autograd._formulas import derivative

__all__ = ["unreduce", "reduced_count", "scalar_like", "zeros_of", "flip", "gather_dim",
           "normalize_dims", "reduce_to", "is_tensor", "unary", "select_grad", "linked"]


def unary(name, save, fn):
    """Register ``fn(ctx, grad)`` (one gradient) as the derivative of the one-input op
    ``name``."""
    @derivative(name, save=save)
    def formula(ctx, grad):
        return (fn(ctx, grad),)

    formula.__name__ = f"_d_{name}"
    return formula


def is_tensor(x):
    return isinstance(x, fiamma.Tensor)


def normalize_dims(dim, nd):
    """``dim`` (None, an int or a sequence) as a sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, int):
        dim = (dim,)
    if len(dim) == 0:
        return tuple(range(nd))
    if nd == 0:
        return ()
    return tuple(sorted({d % nd for d in dim}))


def unreduce(g, shape, dims, keepdim):
    """A reduction's result gradient ``g`` broadcast back to the input ``shape`` (the reduced
    ``dims`` are re-inserted as size-1 dims unless ``keepdim``)."""
    shape = tuple(shape)
    if not keepdim and dims and len(shape):
        for d in sorted(dims):
            g = g.unsqueeze(d)
    if tuple(g.shape) != shape:
        g = g.expand(shape)
    return g


def reduced_count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def scalar_like(value, ref):
    """A 0-d tensor holding ``value`` with ref's dtype."""
    return fiamma.full((), value, dtype=ref.dtype, device=ref.device)


def zeros_of(shape, ref):
    return fiamma.zeros(tuple(shape), dtype=ref.dtype, device=ref.device)


def flip(t, dim):
    """``t`` reversed along ``dim`` (fiamma.flip: a strided copy with its own derivative, so
    differentiable to any order, on any device)."""
    if t.shape[dim] <= 1:
        return t
    return t.flip(dim)


def gather_dim(t, dim, index):
    """``t.gather(dim, index)`` for ``index`` of t's shape with size 1 along ``dim`` (keepdim
    layout): picks one element per row along dim, via a one-hot mask (differentiable)."""
    n = t.shape[dim]
    ar = fiamma.arange(n, device=t.device).reshape((n,) + (1,) * (t.ndim - dim - 1))
    mask = ar == index
    return fiamma.where(mask, t, 0.0).sum(dim, keepdim=True)


def select_grad(x, g, idx, dim, keepdim):
    """The gradient of an op that picks one element of ``x`` per row along ``dim`` (max / min /
    kthvalue / median / mode with a dim): ``g`` at the picked indices ``idx`` (the op's
    result shape, ``keepdim`` as the op's), zero elsewhere."""
    nd = x.ndim
    if nd == 0:
        return g
    d = dim % nd
    if not keepdim:
        g = g.unsqueeze(d)
        idx = idx.unsqueeze(d)
    n = x.shape[d]
    ar = fiamma.arange(n, device=g.device).reshape((n,) + (1,) * (nd - d - 1))
    return fiamma.where(ar == idx, g, 0.0)


def reduce_to(g, shape):
    """Sum ``g`` down to ``shape`` (broadcasting's inverse); ``shape`` may also have more dims
    than g if the extra leading dims are 1 (index_put/setitem values)."""
    shape = tuple(shape)
    gs = g._shape  # a hot slot (fiamma.autograd_hook.HOT_SLOTS): the plain tuple
    if gs == shape:
        return g
    if len(shape) > len(gs):
        return reduce_to(g, shape[len(shape) - len(gs):]).reshape(shape)
    lead = len(gs) - len(shape)
    inner = tuple(lead + i for i, s in enumerate(shape) if s == 1 and gs[lead + i] != 1)
    if not inner:
        if lead:  # only leading dims to sum (a bias): one sum, already of the right shape
            return g.sum(dim=tuple(range(lead)))
    else:
        g = g.sum(dim=tuple(range(lead)) + inner, keepdim=True)
    if tuple(g.shape) != shape:
        g = g.reshape(shape)
    return g


_LINK = None


def _zero_link():
    global _LINK
    if _LINK is None:
        from fiamma.autograd.function import Function

        class ZeroLinkBackward(Function):
            """``g`` unchanged, recorded as a function of ``anchors`` with a zero derivative
            along them."""

            @staticmethod
            def forward(ctx, g, *anchors):
                ctx.specs = [(tuple(a.shape), a.dtype, a.device) for a in anchors]
                return g.clone()

            @staticmethod
            def backward(ctx, grad):
                return (grad, *(fiamma.zeros(s, dtype=d, device=dev) for s, d, dev in ctx.specs))

        _LINK = ZeroLinkBackward
    return _LINK


def linked(g, *anchors):
    """A gradient that does not depend on the saved ``anchors`` (a piecewise-linear op's:
    relu's mask, a pool's window choice), kept in the graph under ``create_graph`` as
    PyTorch's is: it then requires grad and its derivative along the anchors is zero (instead
    of not requiring grad or not reaching them, which makes differentiating it again w.r.t.
    them raise). Free otherwise."""
    if g is None or not fiamma.is_grad_enabled():
        return g
    live = [a for a in anchors if isinstance(a, fiamma.Tensor) and a.requires_grad]
    if not live:
        return g
    return _zero_link().apply(g, *live)
