"""Derivatives of core's convolutions: ``convolution`` (plain and transposed, what conv*d and
conv_transpose*d record), ``convolution_backward_weight`` (its weight gradient, so double
backward works), and the column ops ``im2col``/``col2im`` (adjoints of each other).

A convolution is bilinear in (input, weight): its input gradient is the transposed convolution
of the output gradient with the same weight (and vice versa), its weight gradient is
``convolution_backward_weight``; both are recorded ops, so ``create_graph=True`` differentiates
them again.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _out_pad(big, small, k, s, p, d):
    """output_padding making a transposed convolution of ``small`` come out ``big``."""
    return tuple(big[i] - ((small[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1)
                 for i in range(len(big)))


def _fit(t, shape):
    """``t`` cut to ``shape`` along the spatial dims (a transposed convolution with
    output_padding >= stride makes positions no input reached)."""
    for i, n in enumerate(shape[2:]):
        if t.shape[2 + i] != n:
            t = t.narrow(2 + i, 0, n)
    return t


def _transpose_to(grad, w, big_shape, s, p, d, g):
    k = tuple(w.shape[2:])
    op = _out_pad(tuple(big_shape[2:]), tuple(grad.shape[2:]), k, s, p, d)
    return fiamma.convolution(grad, w, None, s, p, d, True, op, g)


# the bias's value is not needed (only whether there is one): not saved, so it may be written
# in place before backward, as in PyTorch
@derivative(ops.convolution, save="inputs", unsaved=(2,))
def _convolution(ctx, grad):
    x, w, b = ctx.inputs
    kw = ctx.kwargs
    s, p, d, g = kw["stride"], kw["padding"], kw["dilation"], kw["groups"]
    gx = gw = gb = None
    if not kw["transposed"]:
        if _need(ctx, 0):
            gx = _transpose_to(grad, w, ctx.input_shapes[0], s, p, d, g)
        if _need(ctx, 1):
            gw = fiamma.convolution_backward_weight(x, grad, tuple(w.shape), s, p, d, g)
    else:
        if _need(ctx, 0):
            gx = _fit(fiamma.convolution(grad, w, None, s, p, d, False, 0, g),
                      ctx.input_shapes[0])
        if _need(ctx, 1):
            gw = fiamma.convolution_backward_weight(grad, x, tuple(w.shape), s, p, d, g)
    if ctx.input_shapes[2] is not None and _need(ctx, 2):
        gb = grad.sum(dim=(0,) + tuple(range(2, grad.dim())))
    return gx, gw, gb


@derivative(ops.convolution_backward_weight, save="inputs")
def _convolution_backward_weight(ctx, grad):
    x, gy, _ = ctx.inputs
    kw = ctx.kwargs
    s, p, d, g = kw["stride"], kw["padding"], kw["dilation"], kw["groups"]
    gx = ggy = None
    if _need(ctx, 0):
        gx = _transpose_to(gy, grad, ctx.input_shapes[0], s, p, d, g)
    if _need(ctx, 1):
        ggy = _fit(fiamma.convolution(x, grad, None, s, p, d, False, 0, g), ctx.input_shapes[1])
    return gx, ggy, None


@derivative(ops.im2col, save="none")
def _im2col(ctx, grad):
    kw = ctx.kwargs
    big = tuple(ctx.input_shapes[0][2:])
    return (fiamma.col2im(grad, big, kw["kernel_size"], kw["dilation"], kw["padding"],
                          kw["stride"]),)


@derivative(ops.col2im, save="none")
def _col2im(ctx, grad):
    kw = ctx.kwargs
    return (fiamma.im2col(grad, kw["kernel_size"], kw["dilation"], kw["padding"], kw["stride"]),)
