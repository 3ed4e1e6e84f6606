"""``torch.nn.grad``: the gradients of a convolution with respect to its input and its weight,
given the gradient of its output.

``convNd_input`` is the transposed convolution of ``grad_output`` with the weight (its
``output_padding`` chosen so that the result has ``input_size``); ``convNd_weight`` is the
weight gradient of ``F.convNd`` (the correlation of the input with ``grad_output``), computed
by the convolution's backward formula. Both are differentiable.

>>> import fiamma
>>> from fiamma.nn import grad
>>> x = fiamma.ones(1, 1, 3, 3)
>>> w = fiamma.ones(1, 1, 2, 2)
>>> go = fiamma.ones(1, 1, 2, 2)
>>> grad.conv2d_input(x.shape, w, go).tolist()
[[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
>>> grad.conv2d_weight(x, w.shape, go).tolist()
[[[[4.0, 4.0], [4.0, 4.0]]]]
"""

import fiamma
from fiamma.nn import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _tuple(v, n, what, op):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{op}: expected {what} to be an int or {n} ints, got {v}")
    return v


def _input_grad(n, input_size, weight, grad_output, stride, padding, dilation, groups):
    op = f"conv{n}d_input"
    size = tuple(int(s) for s in input_size)
    if len(size) != n + 2:
        raise ValueError(f"{op}: expected input_size of {n + 2} dims (N, C, spatial...), got "
                         f"{size}")
    if grad_output.dim() != n + 2 or weight.dim() != n + 2:
        raise ValueError(f"{op}: expected weight and grad_output of {n + 2} dims, got "
                         f"{weight.dim()} and {grad_output.dim()}")
    stride = _tuple(stride, n, "stride", op)
    padding = _tuple(padding, n, "padding", op)
    dilation = _tuple(dilation, n, "dilation", op)
    kernel = tuple(weight.shape[2:])
    out_pad = []
    for d in range(n):
        base = ((grad_output.shape[2 + d] - 1) * stride[d] - 2 * padding[d]
                + dilation[d] * (kernel[d] - 1) + 1)
        extra = size[2 + d] - base
        if not 0 <= extra < stride[d]:
            raise ValueError(f"{op}: input_size {size} does not match grad_output of shape "
                             f"{tuple(grad_output.shape)} (dimension {2 + d}: a convolution "
                             f"of an input of {size[2 + d]} gives {grad_output.shape[2 + d]} "
                             "outputs only if the sizes agree)")
        out_pad.append(extra)
    transpose = getattr(F, f"conv_transpose{n}d")
    return transpose(grad_output, weight, None, stride, padding, tuple(out_pad), groups,
                     dilation)


def _weight_grad(n, input, weight_size, grad_output, stride, padding, dilation, groups):
    op = f"conv{n}d_weight"
    size = tuple(int(s) for s in weight_size)
    if len(size) != n + 2 or input.dim() != n + 2 or grad_output.dim() != n + 2:
        raise ValueError(f"{op}: expected input, weight_size and grad_output of {n + 2} dims, "
                         f"got {input.dim()}, {len(size)} and {grad_output.dim()}")
    conv = getattr(F, f"conv{n}d")
    create = fiamma.is_grad_enabled() and (input.requires_grad or grad_output.requires_grad)
    with fiamma.enable_grad():
        w = fiamma.zeros(size, dtype=input.dtype, device=input.device, requires_grad=True)
        out = conv(input if create else input.detach(), w, None, stride, padding, dilation,
                   groups)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise ValueError(f"{op}: grad_output has shape {tuple(grad_output.shape)}, but the "
                             f"convolution gives {tuple(out.shape)}")
        (g,) = fiamma.autograd.grad(out, w, grad_output, create_graph=create)
    return g


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv1d`` with respect to an input of shape ``input_size``."""
    return _input_grad(1, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv1d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(1, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv2d`` with respect to an input of shape ``input_size``."""
    return _input_grad(2, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv2d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(2, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv3d`` with respect to an input of shape ``input_size``."""
    return _input_grad(3, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``F.conv3d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(3, input, weight_size, grad_output, stride, padding, dilation, groups)
