"""LayerNorm, GroupNorm, LocalResponseNorm, RMSNorm (PyTorch's parameters, defaults and
repr)."""

import numbers

import fiamma
from fiamma.nn import functional as F, init
from fiamma.nn.modules.module import Module
from fiamma.nn.parameter import Parameter

__all__ = ["LayerNorm", "GroupNorm", "LocalResponseNorm", "CrossMapLRN2d", "RMSNorm"]


def register_affine(module, shape, affine, bias, factory):
    """The optional per-element ``weight`` (and ``bias``) of a normalisation layer: parameters
    of ``shape`` when ``affine``, else registered as None (PyTorch's names)."""
    module.register_parameter("weight", Parameter(fiamma.empty(shape, **factory)) if affine
                              else None)
    module.register_parameter("bias", Parameter(fiamma.empty(shape, **factory))
                              if affine and bias else None)


def reset_affine(module):
    """Weight 1 and bias 0, where the layer has them."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


def _shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dims, with a learnable elementwise
    ``weight`` (ones) and ``bias`` (zeros).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.LayerNorm(4)(fiamma.randn(2, 4)).shape
    fiamma.Size([2, 4])
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        register_affine(self, self.normalized_shape, elementwise_affine, bias, f)
        self.reset_parameters()

    def reset_parameters(self):
        reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Split the channels into ``num_groups`` groups and normalise each sample's group; a
    per-channel affine (``affine=True``)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        f = {"device": device, "dtype": dtype}
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        register_affine(self, num_channels, affine, bias, f)
        self.reset_parameters()

    def reset_parameters(self):
        reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """Normalise each channel by the squares of its ``size`` neighbouring channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


_CROSS_MAP_LRN = None


def _cross_map_lrn_function():
    """The autograd Function of CrossMapLRN2d, built on first use (importing fiamma.nn stays
    free of fiamma.autograd's Function machinery)."""
    global _CROSS_MAP_LRN
    if _CROSS_MAP_LRN is not None:
        return _CROSS_MAP_LRN
    from fiamma.autograd import Function, once_differentiable

    def window(channels, lo, hi, device, dtype):
        # (C, C) 0/1 matrix: row c sums the channels lo[c]..hi[c] (clipped to the channels)
        c = fiamma.arange(channels, device=device)
        return ((c[None, :] >= lo[:, None]) & (c[None, :] <= hi[:, None])).to(dtype)

    class CrossMapLRN(Function):
        @staticmethod
        def forward(ctx, input, size, alpha, beta, k):
            if input.dim() != 4:
                raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                                 "instead.")
            C = input.shape[1]
            pre = int((size - 1) / 2 + 1)
            c = fiamma.arange(C, device=input.device)
            # the legacy (Lua Torch) running window: channel c sums the squares of channels
            # up to c + pre - 1; from c = pre + 1 on, channels 1 .. c - pre leave the window
            # again, but channel 0 never does (PyTorch's forward, kept for its results)
            upto = window(C, fiamma.zeros_like(c), c + pre - 1, input.device, input.dtype)
            leave = window(C, fiamma.ones_like(c), c - pre, input.device, input.dtype)
            w = upto - leave * (c > pre).to(input.dtype)[:, None]
            sq = input * input
            scale = fiamma.einsum("cd,ndhw->nchw", w, sq) * (alpha / size) + k
            output = scale.pow(-beta) * input
            ctx.save_for_backward(input, output, scale)
            ctx.params = size, alpha, beta
            return output

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            input, output, scale = ctx.saved_tensors
            size, alpha, beta = ctx.params
            C = input.shape[1]
            # PyTorch's legacy backward: channel c gathers the ratios g * y / scale of the
            # channels c - p .. c + size - 1 - p, p = size - (size - 1) // 2
            p = int(size - (size - 1) / 2)
            c = fiamma.arange(C, device=input.device)
            w = window(C, c - p, c + size - 1 - p, input.device, input.dtype)
            ratio = grad_output * output / scale
            accum = fiamma.einsum("cd,ndhw->nchw", w, ratio)
            grad = scale.pow(-beta) * grad_output - (2 * alpha * beta / size) * input * accum
            return grad, None, None, None, None

    _CROSS_MAP_LRN = CrossMapLRN
    return CrossMapLRN


class CrossMapLRN2d(Module):
    """The legacy (Lua Torch) local response normalisation across the channels of a 4-d input,
    as PyTorch's ``nn.CrossMapLRN2d``: ``y = x * (k + alpha / size * s) ** -beta`` with ``s``
    the squares summed over a running channel window. Forward and backward reproduce
    PyTorch's, including its quirks: the window is not the symmetric one of
    :class:`LocalResponseNorm` (the first channel stays in every window, see the source),
    and the backward pass is PyTorch's legacy formula, which is not the exact gradient of
    the forward. Prefer :class:`LocalResponseNorm` in new code.

    >>> import fiamma
    >>> from fiamma import nn
    >>> y = nn.CrossMapLRN2d(3, alpha=1.0, beta=1.0, k=1.0)(fiamma.ones(1, 2, 1, 1))
    >>> [round(v, 4) for v in y.flatten().tolist()]
    [0.6, 0.6]
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return _cross_map_lrn_function().apply(input, self.size, self.alpha, self.beta,
                                               self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last ``len(normalized_shape)`` dims
    (``eps=None``: the input dtype's machine epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(fiamma.empty(self.normalized_shape, **f))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
