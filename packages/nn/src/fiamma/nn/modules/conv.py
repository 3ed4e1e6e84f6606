"""Conv1d/2d/3d and ConvTranspose1d/2d/3d with PyTorch's arguments, parameter names, default
initialisation and repr (checkpoints load by key)."""

import math

import fiamma
from fiamma.nn import functional as F, init
from fiamma.nn.modules.module import Module
from fiamma.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v, n, name):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"expected {name} to be an int or a tuple of {n} ints, got {v}")
        return tuple(v)
    return (v,) * n


class _ConvNd(Module):
    _nd = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        self.stride = _ntuple(stride, nd, "stride")
        self.dilation = _ntuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if self._transposed:
                raise ValueError(f"{name}: string padding is not supported")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd, "padding")
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        self.transposed = self._transposed
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's amounts for the non-zeros padding modes: last dim first, (left, right) each
        rp = []
        for i in reversed(range(nd)):
            if isinstance(self.padding, str):
                total = self.dilation[i] * (self.kernel_size[i] - 1) if padding == "same" else 0
                rp += [total // 2, total - total // 2]
            else:
                rp += [self.padding[i], self.padding[i]]
        self._reversed_padding_repeated_twice = rp
        f = {"device": device, "dtype": dtype}
        if self._transposed:
            wshape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            wshape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(fiamma.empty(*wshape, **f))
        if bias:
            self.bias = Parameter(fiamma.empty(out_channels, **f))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's default: Kaiming uniform (a = sqrt(5)) weight, bias uniform in
        +-1/sqrt(fan_in), fan_in from the weight's dims 1.. (also for transposed layers)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            for k in self.weight.shape[2:]:
                fan_in *= k
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        nd = self._nd
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, 0, device, dtype)

    def _conv_forward(self, input, weight, bias):
        fn = _CONV_FN[self._nd]
        if self.padding_mode != "zeros":
            return fn(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                      weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L). ``padding``: int, tuple, ``'valid'``
    or ``'same'``; ``padding_mode``: 'zeros', 'reflect', 'replicate' or 'circular'."""
    _nd = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) with PyTorch's arguments.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.Conv2d(3, 8, 3, padding=1)(fiamma.ones(2, 3, 5, 5)).shape
    fiamma.Size([2, 8, 5, 5])
    """
    _nd = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W)."""
    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        nd = self._nd
        non_spatial = 2 if input.dim() == nd + 2 else 1
        output_size = list(output_size)
        if len(output_size) == non_spatial + nd:
            output_size = output_size[non_spatial:]
        if len(output_size) != nd:
            raise ValueError(f"ConvTranspose{nd}D: for {input.dim()}D input, output_size must "
                             f"have {nd} or {non_spatial + nd} elements (got {len(output_size)})")
        res = []
        for d in range(nd):
            lo = ((input.shape[d + non_spatial] - 1) * self.stride[d] - 2 * self.padding[d]
                  + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            hi = lo + self.stride[d] - 1
            if not lo <= output_size[d] <= hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {lo} to {hi} (for an input of "
                                 f"{list(input.shape[non_spatial:])})")
            res.append(output_size[d] - lo)
        return tuple(res)

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return _CONVT_FN[self._nd](input, self.weight, self.bias, self.stride, self.padding, op,
                                   self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution; weight (C_in, C_out / groups, k). ``forward(input,
    output_size=None)``: ``output_size`` picks among the possible output lengths."""
    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution; weight (C_in, C_out / groups, kH, kW).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ConvTranspose2d(4, 2, 3, stride=2)(fiamma.ones(1, 4, 5, 5)).shape
    fiamma.Size([1, 2, 11, 11])
    """
    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution; weight (C_in, C_out / groups, kD, kH, kW)."""
    _nd = 3


_CONV_FN = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONVT_FN = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
