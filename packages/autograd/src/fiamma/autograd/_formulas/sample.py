"""Derivatives of core's resampling ops: upsample, grid_sampler and their backward ops.

Upsampling is linear in its input, so its backward (``upsample_backward``) is linear in the
incoming gradient and the backward of that is the forward resampling again. grid_sampler's
gradient w.r.t. input is linear in grad_output (its derivative w.r.t. grad_output is
grid_sampler, w.r.t. grid the grid gradient of grid_sampler at input = the incoming gradient);
the gradient w.r.t. grid is differentiated through a composite re-implementation of the
sampling in differentiable ops (unnormalize, pad by clamp or reflection, the 2^d bilinear or
16 bicubic tap weights, gathers), which gives the same values as the kernel; for nearest it is
identically zero.
"""

import itertools

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


@derivative(ops.upsample, save="none")
def _upsample(ctx, grad):
    k = ctx.kwargs
    return (fiamma.upsample_backward(grad, tuple(ctx.input_shapes[0]), k["mode"],
                                     k["align_corners"], k["scales"]),)


@derivative(ops.upsample_backward, save="none")
def _upsample_backward(ctx, grad):
    k = ctx.kwargs
    out_size = tuple(ctx.input_shapes[0])[2:]
    return (fiamma.upsample(grad, out_size, k["mode"], k["align_corners"], k["scales"]),)


def _args(ctx):
    k = ctx.kwargs
    return k["interpolation_mode"], k["padding_mode"], k["align_corners"]


@derivative(ops.grid_sampler, save="inputs")
def _grid_sampler(ctx, grad):
    x, grid = ctx.inputs
    gx, gg = fiamma.grid_sampler_backward(grad, x, grid, *_args(ctx),
                                          output_mask=(_need(ctx, 0), _need(ctx, 1)))
    return gx, gg


@derivative(ops.grid_sampler_backward_input, save="inputs")
def _grid_sampler_backward_input(ctx, grad):
    # grad_input = J(grid)^T grad_output: <grad, J^T g> = <grid_sampler(grad, grid), g>
    g, x, grid = ctx.inputs
    mode, pad, ac = _args(ctx)
    dg = fiamma.grid_sampler(grad, grid, mode, pad, ac) if _need(ctx, 0) else None
    dgrid = None
    if _need(ctx, 2) and mode != 1:
        dgrid = fiamma.grid_sampler_backward(g, grad, grid, mode, pad, ac,
                                             output_mask=(False, True))[1]
    return dg, None, dgrid


def _reflect(c, size, align_corners):
    """Reflect unnormalized coordinates into the input (before clipping), differentiably."""
    lo2, hi2 = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
    if lo2 == hi2:
        return c * 0
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    a = (c - mn).abs()
    flips = (a.detach() / span).floor()
    extra = a - flips * span
    return fiamma.where(flips.remainder(2) == 0, extra + mn, span - extra + mn)


def _pad_coord(c, size, padding_mode, align_corners):
    """An unnormalized coordinate after the padding rule (border: clipped; reflection:
    reflected, then clipped); zeros padding leaves it as is."""
    if padding_mode == 2:
        c = _reflect(c, size, align_corners)
    if padding_mode in (1, 2):
        c = c.clamp(0, size - 1)
    return c


def _cubic_weights(t):
    """The four cubic-convolution weights (A = -0.75) of taps -1, 0, 1, 2 at fraction t."""
    a = -0.75

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _composite_grid_sample(x, grid, mode, padding_mode, align_corners):
    """grid_sampler's bilinear/trilinear (mode 0) or bicubic (mode 2) sampling in
    differentiable ops (the kernel's values)."""
    n, c = x.shape[:2]
    sp = tuple(x.shape[2:])
    d = len(sp)
    out_sp = tuple(grid.shape[1:-1])
    p = 1
    for v in out_sp:
        p *= v
    coords = []
    for k in range(d):
        size = sp[d - 1 - k]
        g = grid[..., k]
        cc = (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2
        if mode == 0:  # bicubic pads each tap's integer coordinate instead
            cc = _pad_coord(cc, size, padding_mode, align_corners)
        coords.append(cc.reshape(n, p))
    lo = [cc.detach().floor() for cc in coords]
    frac = [cc - lk for cc, lk in zip(coords, lo)]
    if mode == 0:
        offsets, weights = (0, 1), [[1 - f, f] for f in frac]
    else:
        offsets, weights = (-1, 0, 1, 2), [_cubic_weights(f) for f in frac]
    xf = x.reshape(n, c, -1)
    out = None
    for corner in itertools.product(range(len(offsets)), repeat=d):
        w = None
        idx = None
        stride = 1
        for k in range(d):
            size = sp[d - 1 - k]
            i = lo[k] + offsets[corner[k]]
            if mode == 2:
                i = _pad_coord(i, size, padding_mode, align_corners)
            wk = weights[k][corner[k]]
            wk = wk * ((i >= 0) & (i <= size - 1)).to(wk.dtype)
            w = wk if w is None else w * wk
            ik = i.clamp(0, size - 1).long() * stride
            idx = ik if idx is None else idx + ik
            stride *= size
        vals = xf.gather(2, idx.unsqueeze(1).expand(n, c, p))
        term = vals * w.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape((n, c) + out_sp)


@derivative(ops.grid_sampler_backward_grid, save="inputs")
def _grid_sampler_backward_grid(ctx, grad):
    mode, pad, ac = _args(ctx)
    if mode == 1:  # nearest: the grid gradient is identically zero
        return None, None, None
    # grad_grid = J_grid(input, grid)^T grad_output, differentiated through the composite
    # sampling: <grad_grid, grad> w.r.t. (grad_output, input, grid)
    go, x, grid = ctx.inputs
    create = fiamma.is_grad_enabled()
    want = [_need(ctx, i) for i in range(3)]
    with fiamma.enable_grad():
        leaves = [t.view_as(t) if create and t.requires_grad else t.detach().requires_grad_(True)
                  for t in (go, x, grid)]
        g0, x0, grid0 = leaves
        out = _composite_grid_sample(x0, grid0, mode, pad, ac)
        (gg,) = fiamma.autograd.grad(out, grid0, g0, create_graph=True)
        res = fiamma.autograd.grad(gg, [t for t, w in zip(leaves, want) if w], grad,
                                   create_graph=create, allow_unused=True)
    it = iter(res)
    out = [next(it) if w else None for w in want]
    return tuple(r if r is None or create else r.detach() for r in out)
