"""Derivatives of core's resampling ops: upsample, grid_sampler and their backward ops.

Upsampling is linear in its input, so its backward (``upsample_backward``) is linear in the
incoming gradient and the backward of that is the forward resampling again. grid_sampler's
gradient w.r.t. input is linear in grad_output (its derivative w.r.t. grad_output is
grid_sampler, w.r.t. grid the grid gradient of grid_sampler at input = the incoming gradient);
the gradient w.r.t. grid has no derivative (PyTorch has none either), except for nearest,
where it is identically zero.
"""

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


@derivative(ops.grid_sampler_backward_grid, save="none")
def _grid_sampler_backward_grid(ctx, grad):
    mode = ctx.kwargs["interpolation_mode"]
    if mode == 1:  # nearest: the grid gradient is identically zero
        return None, None, None
    raise RuntimeError(
        "grid_sample: the derivative of the gradient w.r.t. grid (double backward through "
        "grid) is not implemented (PyTorch does not implement it either); use "
        "create_graph=True only for the input gradient, or mode='nearest'")
