"""Derivatives of reductions, cumulative scans and softmax.

Conventions (PyTorch's): amax/amin, max/min without dim and aminmax split the gradient evenly
among tied extremes; max/min with dim send it to the returned index; prod and cumprod are exact
with zeros in the input (prod through exclusive products from both ends; cumprod through the
first zero of each row, or an O(n^2) form when the backward itself must be differentiable);
std and the 2-norm give 0 (not NaN) where the result is 0.
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import (
    flip,
    normalize_dims,
    reduced_count,
    select_grad,
    unreduce,
)
from fiamma.autograd_hook import ops


def _dims(ctx):
    return normalize_dims(ctx.kwargs.get("dim"), len(ctx.input_shapes[0]))


def _kd(ctx):
    return bool(ctx.kwargs.get("keepdim", False))


def _expand(ctx, t):
    """A reduction's result-shaped tensor broadcast back to the input shape."""
    return unreduce(t, ctx.input_shapes[0], _dims(ctx), _kd(ctx))


def _keep(ctx, t):
    """A reduction's result-shaped tensor with the reduced dims kept (size 1)."""
    shape = ctx.input_shapes[0]
    if _kd(ctx) or not len(shape):
        return t
    for d in _dims(ctx):
        t = t.unsqueeze(d)
    return t


# ---- sums and means --------------------------------------------------------------------------

@derivative(ops.sum, save="none")
def _sum(ctx, grad):
    return (_expand(ctx, grad),)


@derivative(ops.nansum, save="inputs")
def _nansum(ctx, grad):
    x = ctx.inputs[0]
    return (fiamma.where(x.isnan(), 0.0, _expand(ctx, grad)),)


@derivative(ops.mean, save="none")
def _mean(ctx, grad):
    shape = ctx.input_shapes[0]
    n = reduced_count(shape, _dims(ctx))
    g = _expand(ctx, grad)
    return (g / n if n else g,)


@derivative(ops.nanmean, save="inputs")
def _nanmean(ctx, grad):
    x = ctx.inputs[0]
    nan = x.isnan()
    dims = _dims(ctx)
    count = (~nan).sum(dims, keepdim=True).to(grad.dtype) if dims else (~nan).to(grad.dtype)
    g = unreduce(_keep(ctx, grad) / count, x.shape, dims, True)
    return (fiamma.where(nan, 0.0, g),)


# ---- products --------------------------------------------------------------------------------

def _to_last(t, dims):
    """``t`` with ``dims`` moved to the end and flattened into one: (view, permutation)."""
    nd = t.ndim
    rest = [d for d in range(nd) if d not in dims]
    perm = rest + list(dims)
    tp = t.permute(perm) if perm != list(range(nd)) else t
    n = 1
    for d in dims:
        n *= t.shape[d]
    return tp.reshape(tuple(t.shape[d] for d in rest) + (n,)), perm


def _from_last(t, shape, perm):
    pshape = tuple(shape[d] for d in perm)
    t = t.reshape(pshape)
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return t.permute(inv) if inv != list(range(len(perm))) else t


def _exclusive_cumprod(t):
    """Along the last dim: [1, t0, t0*t1, ...] (differentiable)."""
    ones = fiamma.ones(tuple(t.shape[:-1]) + (1,), dtype=t.dtype, device=t.device)
    return fiamma.cat([ones, t[..., :-1]], -1).cumprod(-1)


def _prod_others(x, dims):
    """For each element, the product of the other elements of its reduced group (exact with
    zeros: exclusive cumulative products from both ends)."""
    xl, perm = _to_last(x, dims)
    left = _exclusive_cumprod(xl)
    right = flip(_exclusive_cumprod(flip(xl, xl.ndim - 1)), xl.ndim - 1)
    return _from_last(left * right, tuple(x.shape), perm)


@derivative(ops.prod, save="both")
def _prod(ctx, grad):
    x = ctx.inputs[0]
    if x.numel() == 0:
        return (fiamma.zeros_like(x).to(grad.dtype),)
    g = _expand(ctx, grad)
    if not bool((x == 0).any()):
        return (g * _expand(ctx, ctx.output) / x,)
    return (g * _prod_others(x, _dims(ctx)),)


def _cumprod_zero_rows(x, y, g):
    """cumprod's gradient along the last dim when x has zeros, in O(n) (first derivative only):
    before the first zero z of a row the division formula holds; at z the gradient is
    prod(x[:z]) * sum_{k>=z} g[k] * prod(x[z+1:k+1]); after z it is 0."""
    last = x.ndim - 1
    is_zero = x == 0
    zc = is_zero.cumsum(last)
    before = zc == 0
    first = is_zero & (zc == 1)
    w = y * g
    rev = flip(flip(w, last).cumsum(last), last)
    g_before = rev / fiamma.where(before, x, 1.0)
    after = fiamma.where(before | first, 1.0, x).cumprod(last)
    s = fiamma.where(zc >= 1, g * after, 0.0).sum(last, keepdim=True)
    left = fiamma.where(before, x, 1.0).prod(last, keepdim=True)
    return fiamma.where(before, g_before, fiamma.where(first, left * s, 0.0))


def _cumprod_quadratic(x, g):
    """cumprod's gradient along the last dim as an explicit sum (twice differentiable
    everywhere): grad[i] = sum_{k>=i} g[k] * prod_{j<=k, j!=i} x[j]."""
    n = x.shape[-1]
    ar = fiamma.arange(n, device=x.device)
    eye = ar.unsqueeze(1) == ar.unsqueeze(0)
    upper = ar.unsqueeze(0) >= ar.unsqueeze(1)  # [i, k]: k >= i
    t = fiamma.where(eye, 1.0, x.unsqueeze(-2).expand(tuple(x.shape[:-1]) + (n, n)))
    p = t.cumprod(-1)
    return fiamma.where(upper, p * g.unsqueeze(-2), 0.0).sum(-1)


@derivative(ops.cumprod, save="both")
def _cumprod(ctx, grad):
    x = ctx.inputs[0]
    y = ctx.output
    nd = x.ndim
    if x.numel() <= 1 or nd == 0:
        return (grad,)
    d = ctx.kwargs["dim"]
    if not bool((x == 0).any()):
        w = y * grad
        return (flip(flip(w, d).cumsum(d), d) / x,)
    last = nd - 1
    xt, yt, gt = (t.transpose(d, last) for t in (x, y, grad))
    if fiamma.is_grad_enabled():
        r = _cumprod_quadratic(xt, gt)
    else:
        r = _cumprod_zero_rows(xt, yt, gt)
    return (r.transpose(d, last),)


@derivative(ops.cumsum, save="none")
def _cumsum(ctx, grad):
    if grad.ndim == 0:
        return (grad,)
    d = ctx.kwargs["dim"]
    return (flip(flip(grad, d).cumsum(d), d),)


# ---- extremes --------------------------------------------------------------------------------

def _even_split(x, y_keep, g_keep, dims, nan_to_nan=False):
    """Gradient of an extreme over ``dims`` split evenly among the elements equal to it,
    ``(g / count) * mask`` as PyTorch's amax/amin: a NaN extreme (no element equal to it)
    gives NaN gradients over its slice. ``nan_to_nan`` (max()/min() over all elements,
    PyTorch's evenly_distribute_backward): a NaN extreme's gradient goes to the NaN
    elements instead."""
    mask = x == y_keep
    if nan_to_nan:
        mask = mask | (x.isnan() & y_keep.isnan())
    count = mask.sum(dims, keepdim=True).to(g_keep.dtype) if dims else mask.to(g_keep.dtype)
    return mask.to(g_keep.dtype) * (g_keep / count)


@derivative(ops.amax, ops.amin, save="both")
def _amax(ctx, grad):
    x = ctx.inputs[0]
    return (_even_split(x, _keep(ctx, ctx.output), _keep(ctx, grad), _dims(ctx)),)


class _Shaped:
    """What select_grad reads of an input it did not keep: its shape and number of dims."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def _max_unsaved(inputs, kwargs):
    # max/min along one dim route the gradient by the saved indices: the input's values are
    # not needed (as PyTorch, which does not save it); over all elements they are
    return (0,) if isinstance(kwargs.get("dim"), int) else ()


@derivative(ops.max, ops.min, save="both", unsaved=_max_unsaved)
def _max(ctx, grad):
    x = ctx.inputs[0]
    if not isinstance(grad, tuple):  # max(x): all elements
        return (_even_split(x, _keep(ctx, ctx.output), _keep(ctx, grad), _dims(ctx), True),)
    g = grad[0]
    if g is None:
        return (None,)
    if x is None:
        x = _Shaped(ctx.input_shapes[0])
    return (select_grad(x, g, ctx.output[1], ctx.kwargs["dim"], _kd(ctx)),)


@derivative(ops.aminmax, save="both")
def _aminmax(ctx, grad):
    x = ctx.inputs[0]
    nd = x.ndim
    dim = ctx.kwargs.get("dim")
    dims = tuple(range(nd)) if dim is None else normalize_dims(dim, nd)
    keepdim = bool(ctx.kwargs.get("keepdim", False))
    total = None
    for g, y in zip(grad, ctx.output):
        if g is None:
            continue
        if not keepdim and nd:
            for d in dims:
                g = g.unsqueeze(d)
                y = y.unsqueeze(d)
        part = _even_split(x, y, g, dims)
        total = part if total is None else total + part
    return (total,)


# ---- variance and std ------------------------------------------------------------------------

def _var_grad(ctx, x, g_keep):
    dims = _dims(ctx)
    n = reduced_count(tuple(x.shape), dims)
    dof = n - ctx.kwargs.get("correction", 1.0)
    scale = 2.0 / dof if dof > 0 else math.inf
    mean = x.mean(dims, keepdim=True) if dims else x
    return g_keep * (x - mean) * scale


def _std_to_var(y_keep, g_keep):
    safe = fiamma.where(y_keep == 0, 1.0, y_keep)
    return fiamma.where(y_keep == 0, 0.0, g_keep / (safe * 2))


@derivative(ops.var, save="inputs")
def _var(ctx, grad):
    return (_var_grad(ctx, ctx.inputs[0], _keep(ctx, grad)),)


@derivative(ops.std, save="both")
def _std(ctx, grad):
    g = _std_to_var(_keep(ctx, ctx.output), _keep(ctx, grad))
    return (_var_grad(ctx, ctx.inputs[0], g),)


@derivative(ops.var_mean, ops.std_mean, save="both")
@derivative(ops.var_mean, ops.std_mean, save="both", complex=True)  # the complex mean: x as saved
def _var_mean(ctx, grad):
    x = ctx.inputs[0]
    gv, gm = grad
    total = None
    if gv is not None:
        gv = _keep(ctx, gv)
        if ctx.op == ops.std_mean:
            gv = _std_to_var(_keep(ctx, ctx.output[0]), gv)
        total = _var_grad(ctx, x, gv)
    if gm is not None:
        n = reduced_count(tuple(x.shape), _dims(ctx))
        part = _expand(ctx, gm)
        part = part / n if n else part
        total = part if total is None else total + part
    return (total,)


# ---- norms, logsumexp, softmax -----------------------------------------------------------------

def _sgn(x):
    """sign(x); z/|z| for complex z."""
    return x.sign() if x._dtype._kind != 3 else x.sgn()


@derivative(ops.norm, save="both")
def _norm(ctx, grad):
    x = ctx.inputs[0]
    p = float(ctx.kwargs.get("p", 2.0))
    dims = _dims(ctx)
    n = _keep(ctx, ctx.output)
    g = _keep(ctx, grad)
    if p == 0.0:
        return (fiamma.zeros_like(x).to(grad.dtype),)
    if p == 1.0:
        return (_sgn(x) * g,)
    if math.isinf(p):
        return (_sgn(x) * _even_split(x.abs(), n, g, dims),)
    nz = n == 0
    if p == 2.0:
        return (x * fiamma.where(nz, 0.0, g / fiamma.where(nz, 1.0, n)),)
    scale = fiamma.where(nz, 0.0, g / fiamma.where(nz, 1.0, n).pow(p - 1))
    ax = x.abs()
    if p < 2.0:
        xz = x == 0
        mag = fiamma.where(xz, 0.0, fiamma.where(xz, 1.0, ax).pow(p - 1))
        return (_sgn(x) * mag * scale,)
    return (x * ax.pow(p - 2) * scale,)


@derivative(ops.logsumexp, save="both")
def _logsumexp(ctx, grad):
    x = ctx.inputs[0]
    return (_keep(ctx, grad) * (x - _keep(ctx, ctx.output)).exp(),)


@derivative(ops.softmax, save="output")
def _softmax(ctx, grad):
    y = ctx.output
    d = ctx.kwargs["dim"]
    if y.ndim == 0:
        return (grad * 0.0,)
    return (y * (grad - (grad * y).sum(d, keepdim=True)),)


@derivative(ops.log_softmax, save="output")
def _log_softmax(ctx, grad):
    y = ctx.output
    d = ctx.kwargs["dim"]
    if y.ndim == 0:
        return (grad * 0.0,)
    return (grad - y.exp() * grad.sum(d, keepdim=True),)
