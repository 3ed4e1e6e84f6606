"""Deformable convolution v1/v2 (Dai et al. 2017, Zhu et al. 2019) with torchvision.ops'
``deform_conv2d`` signature and sampling rules.

Vectorised over batch, offset groups, kernel taps and output positions: the sampling positions
are fiamma tensors (so the result is differentiable in ``input``, ``offset``, ``mask``,
``weight`` and ``bias``), the four bilinear corners are fetched with ``gather`` into an
im2col-style (N, C_in * kh * kw, L) matrix and one grouped matmul with the weight finishes the
convolution; every step is a fiamma op, so it runs on any device.

    >>> import fiamma
    >>> from fiamma.vision.ops import deform_conv2d
    >>> x = fiamma.rand(1, 2, 5, 5)
    >>> w = fiamma.rand(3, 2, 3, 3)
    >>> off = fiamma.zeros(1, 18, 3, 3)              # zero offsets: an ordinary convolution
    >>> y = deform_conv2d(x, off, w)
    >>> bool((y - fiamma.nn.functional.conv2d(x, w)).abs().max() < 1e-5)
    True
"""
import math

import numpy as np

import fiamma
from fiamma import nn

__all__ = ["deform_conv2d", "DeformConv2d"]


def _pair(v, name):
    if isinstance(v, int):
        return v, v
    v = tuple(int(e) for e in v)
    if len(v) != 2:
        raise ValueError(f"deform_conv2d: {name} should be an int or a pair, got {v}")
    return v


def _shape_error(what, want, got):
    return ValueError(f"deform_conv2d: {what} should have shape {want}, got {list(got)}")


def deform_conv2d(input, offset, weight, bias=None, stride=(1, 1), padding=(0, 0),
                  dilation=(1, 1), mask=None):
    """Deformable 2-d convolution: tap ``(i, j)`` of output position ``(y, x)`` samples
    ``input`` bilinearly (zero outside) at ``(y * sh - ph + i * dh + dy, x * sw - pw + j * dw +
    dx)`` with ``(dy, dx)`` read from ``offset`` (N, 2 * offset_groups * kh * kw, Hout, Wout)
    (pairs ``dy, dx`` per tap, taps row-major, offset groups outermost), optionally scaled by
    ``mask`` (N, offset_groups * kh * kw, Hout, Wout) (DCNv2). ``weight`` (C_out,
    C_in / groups, kh, kw); groups and offset groups are inferred from the shapes as
    torchvision does. Returns (N, C_out, Hout, Wout)."""
    for name, t in (("input", input), ("offset", offset), ("weight", weight)):
        if not isinstance(t, fiamma.Tensor) or t.ndim != 4:
            raise ValueError(f"deform_conv2d: {name} should be a 4-d tensor, got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    n, cin, h, w = input.shape
    cout, cin_g, kh, kw = weight.shape
    if cin_g == 0 or cin % cin_g:
        raise ValueError(f"deform_conv2d: input channels ({cin}) must be a multiple of "
                         f"weight.shape[1] ({cin_g})")
    groups = cin // cin_g
    if cout % groups:
        raise ValueError(f"deform_conv2d: output channels ({cout}) must be a multiple of the "
                         f"groups ({groups})")
    k = kh * kw
    if offset.shape[1] == 0 or offset.shape[1] % (2 * k):
        raise ValueError(f"deform_conv2d: offset.shape[1] ({offset.shape[1]}) must be a "
                         f"positive multiple of 2 * kh * kw ({2 * k})")
    og = offset.shape[1] // (2 * k)
    if cin % og:
        raise ValueError(f"deform_conv2d: input channels ({cin}) must be a multiple of the "
                         f"offset groups ({og})")
    hout = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wout = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    if hout <= 0 or wout <= 0:
        raise ValueError(f"deform_conv2d: the output would be empty ({hout}x{wout}) for a "
                         f"{h}x{w} input and a {kh}x{kw} kernel")
    if tuple(offset.shape) != (n, 2 * og * k, hout, wout):
        raise _shape_error("offset", [n, 2 * og * k, hout, wout], offset.shape)
    if mask is not None and tuple(mask.shape) != (n, og * k, hout, wout):
        raise _shape_error("mask", [n, og * k, hout, wout], mask.shape)
    if bias is not None and tuple(bias.shape) != (cout,):
        raise _shape_error("bias", [cout], bias.shape)
    dtype = input.dtype
    L = hout * wout
    # base sampling positions (K, L): tap-major, output positions row-major
    ti, tj = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    oy, ox = np.meshgrid(np.arange(hout), np.arange(wout), indexing="ij")
    base_y = (oy.reshape(1, -1) * sh - ph + ti.reshape(-1, 1) * dh).astype(np.float64)
    base_x = (ox.reshape(1, -1) * sw - pw + tj.reshape(-1, 1) * dw).astype(np.float64)
    off = offset.to(dtype).reshape(n, og, k, 2, L)
    y = off[:, :, :, 0] + fiamma.from_numpy(base_y).to(dtype)          # (N, G, K, L)
    x = off[:, :, :, 1] + fiamma.from_numpy(base_x).to(dtype)
    inside = (y > -1) & (y < h) & (x > -1) & (x < w)
    y0 = fiamma.floor(y.detach())
    x0 = fiamma.floor(x.detach())
    ly, lx = y - y0, x - x0
    cg = cin // og
    src = input.reshape(n, og, cg, h * w)
    cols = None
    for a, wy in ((0, 1 - ly), (1, ly)):
        yy = y0 + a
        for b, wx in ((0, 1 - lx), (1, lx)):
            xx = x0 + b
            ok = inside & (yy >= 0) & (yy <= h - 1) & (xx >= 0) & (xx <= w - 1)
            idx = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).to(fiamma.int64)
            idx = idx.reshape(n, og, 1, k * L).expand(n, og, cg, k * L)
            vals = fiamma.gather(src, 3, idx)                            # (N, G, Cg, K*L)
            coef = (wy * wx * ok.to(dtype)).reshape(n, og, 1, k * L)
            term = vals * coef
            cols = term if cols is None else cols + term
    if mask is not None:
        cols = cols * mask.to(dtype).reshape(n, og, 1, k * L)
    # (N, C_in, K, L) -> per group (C_in/groups * K, L), multiplied by (C_out/groups, ...)
    cols = cols.reshape(n, groups, cin_g * k, L)
    wmat = weight.reshape(groups, cout // groups, cin_g * k)
    out = fiamma.matmul(wmat, cols).reshape(n, cout, hout, wout)
    if bias is not None:
        out = out + bias.reshape(1, cout, 1, 1)
    return out


class DeformConv2d(nn.Module):
    """:func:`deform_conv2d` with its own ``weight`` (C_out, C_in / groups, kh, kw) and
    ``bias``; ``forward(input, offset, mask=None)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True):
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.groups = groups
        self.weight = nn.Parameter(fiamma.empty(out_channels, in_channels // groups,
                                                *self.kernel_size))
        if bias:
            self.bias = nn.Parameter(fiamma.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * self.kernel_size[0] * self.kernel_size[1]
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input, offset, mask=None):
        return deform_conv2d(input, offset, self.weight, self.bias, stride=self.stride,
                             padding=self.padding, dilation=self.dilation, mask=mask)

    def __repr__(self):
        s = (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
             f"kernel_size={self.kernel_size}, stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s + ")"
