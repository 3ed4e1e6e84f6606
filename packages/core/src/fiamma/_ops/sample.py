"""Resampling ops: upsampling, grid sampling, pixel/channel shuffles.

The kernels (csrc/sample.c) follow PyTorch's coordinate conventions: ``align_corners``, scale
factors used for the coordinate mapping when given, bicubic with A = -0.75 and clamped borders,
grid_sample's zeros/border/reflection padding. ``fiamma.nn.functional.interpolate`` and
``grid_sample`` are the user-facing entry points; these are the core ops they call.

>>> import fiamma
>>> x = fiamma.arange(4.0).reshape(1, 1, 2, 2)
>>> fiamma.upsample(x, (4, 4), "nearest")[0, 0, 0].tolist()
[0.0, 0.0, 1.0, 1.0]
"""

import builtins
import operator

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = ["upsample", "upsample_backward", "grid_sampler", "grid_sampler_backward",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]

_MODES = {"nearest": K.SAMPLE_NEAREST, "nearest-exact": K.SAMPLE_NEAREST_EXACT,
          "linear": K.SAMPLE_LINEAR, "cubic": K.SAMPLE_CUBIC}
# torch.grid_sampler's integer codes -> the C modes
_GRID_MODES = {0: K.SAMPLE_LINEAR, 1: K.SAMPLE_NEAREST, 2: K.SAMPLE_CUBIC}
_GRID_NAMES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PAD_NAMES = {0: "zeros", 1: "border", 2: "reflection"}


def _tensor(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor as {name}, got {type(x).__name__}")
    return x


def _same_device(op, a, b):
    if a._storage.device != b._storage.device:
        raise RuntimeError(f"{op}: expected all tensors on one device, got "
                           f"{a._storage.device} and {b._storage.device}")


def _compute_dtype(x, op, integer_ok=False):
    """The dtype the kernel runs in: float32/float64 as is, the 16-bit floats via float32,
    integers via float64 where the op is exact on them (nearest)."""
    dt = x._dtype
    if dt is D.float32 or dt is D.float64:
        return dt
    if dt is D.float16 or dt is D.bfloat16:
        return D.float32
    if integer_ok and dt is not D.bool:
        return D.float64
    raise TypeError(f"{op}: not implemented for dtype {dt}")


def _ints(v, n, op, what):
    if isinstance(v, int):
        v = (v,) * n
    try:
        v = tuple(operator.index(s) for s in v)
    except TypeError:
        raise TypeError(f"{op}: {what} must be a sequence of {n} ints, got {v!r}") from None
    if len(v) != n:
        raise ValueError(f"{op}: {what} must have {n} elements (one per spatial dim), got {v}")
    return v


def _scales(scales, n, op):
    if scales is None:
        return (0.0,) * n
    if not isinstance(scales, (tuple, list)):
        scales = (scales,) * n
    if len(scales) != n:
        raise ValueError(f"{op}: scales must have {n} elements, got {tuple(scales)}")
    return tuple(0.0 if s is None else builtins.float(s) for s in scales)


def _mode(mode, op):
    m = _MODES.get(mode)
    if m is None:
        raise ValueError(f"{op}: mode must be one of {sorted(_MODES)}, got {mode!r}")
    return m


def _check_spatial(op, shape, nsp, what="input"):
    if len(shape) != nsp + 2:
        raise ValueError(f"{op}: expected a {nsp + 2}-D {what} (N, C, {nsp} spatial dims) for "
                         f"{nsp} output sizes, got shape {tuple(shape)}")
    if builtins.any(s <= 0 for s in shape[1:]):
        raise ValueError(f"{op}: {what} sizes must be > 0 except the batch, got "
                         f"{tuple(shape)}")


def upsample(input, size, mode="nearest", align_corners=False, scales=None):
    """Resample the spatial dims of ``input`` (N, C, *spatial; 1 to 3 spatial dims) to ``size``.

    ``mode``: "nearest", "nearest-exact", "linear" (linear/bilinear/trilinear by the number of
    dims) or "cubic" (A = -0.75, borders clamped). ``scales``: the scale factor per dim the
    output size came from, or None; when given it drives the coordinate mapping (PyTorch's rule
    for ``scale_factor`` without ``recompute_scale_factor``). ``align_corners`` applies to
    linear and cubic. Differentiable (the backward is ``upsample_backward``).

    >>> import fiamma
    >>> fiamma.upsample(fiamma.tensor([[[0.0, 1.0]]]), (4,), "linear").tolist()
    [[[0.0, 0.25, 0.75, 1.0]]]
    """
    op = "upsample"
    _tensor(input, op)
    m = _mode(mode, op)
    nsp = len(size) if isinstance(size, (tuple, list)) else input.ndim - 2
    size = _ints(size, nsp, op, "size")
    if not 1 <= nsp <= 3:
        raise ValueError(f"{op}: expected 1 to 3 spatial sizes, got {size}")
    _check_spatial(op, input._shape, nsp)
    if builtins.any(s <= 0 for s in size):
        raise ValueError(f"{op}: output sizes must be > 0, got {size}")
    sc = _scales(scales, nsp, op)
    ac = bool(align_corners) and m >= K.SAMPLE_LINEAR
    cdt = _compute_dtype(input, op, integer_ok=m <= K.SAMPLE_NEAREST_EXACT)
    x = cast(input, cdt)
    n, c = input._shape[:2]
    res = new_empty((n, c) + size, cdt, input._storage.device)
    if res._numel:
        check(res._storage.backend.upsample(m, ac, nsp, n, c, input._shape[2:], size, sc, x,
                                            x._stride, res), op,
              f"input {tuple(input._shape)}, size {size}")
    res = cast(res, input._dtype)
    if input.requires_grad:
        G.record(ops.upsample, res, (input,), {"size": size, "mode": mode,
                                             "align_corners": ac, "scales": scales})
    return res


def upsample_backward(grad_output, input_size, mode="nearest", align_corners=False,
                      scales=None):
    """The gradient of ``upsample`` w.r.t. its input: ``grad_output`` (N, C, *out) summed back
    onto an input of shape ``input_size`` (N, C, *in). Differentiable (linear in
    ``grad_output``: its own backward is ``upsample``)."""
    op = "upsample_backward"
    _tensor(grad_output, op, "grad_output")
    m = _mode(mode, op)
    input_size = _ints(input_size, len(input_size), op, "input_size")
    nsp = len(input_size) - 2
    if not 1 <= nsp <= 3:
        raise ValueError(f"{op}: input_size must be (N, C, *spatial) with 1 to 3 spatial dims, "
                         f"got {input_size}")
    _check_spatial(op, input_size, nsp, "input_size")
    gs = grad_output._shape
    if len(gs) != nsp + 2 or tuple(gs[:2]) != input_size[:2]:
        raise ValueError(f"{op}: grad_output of shape {tuple(gs)} does not match input_size "
                         f"{input_size}")
    sc = _scales(scales, nsp, op)
    ac = bool(align_corners) and m >= K.SAMPLE_LINEAR
    cdt = _compute_dtype(grad_output, op)
    g = cast(grad_output, cdt).contiguous()
    n, c = input_size[:2]
    dev = grad_output._storage.device
    res = new_empty(input_size, cdt, dev)
    if res._numel:
        if g._numel:
            check(res._storage.backend.upsample_backward(m, ac, nsp, n, c, input_size[2:],
                                                         tuple(gs[2:]), sc, g, res), op,
                  f"input_size {input_size}")
        else:
            res = new_empty(input_size, cdt, dev, zero=True)
    res = cast(res, grad_output._dtype)
    if grad_output.requires_grad:
        G.record(ops.upsample_backward, res, (grad_output,),
                 {"input_size": input_size, "mode": mode, "align_corners": ac,
                  "scales": scales})
    return res


# ---- grid sampling ---------------------------------------------------------------------------

def _grid_args(input, grid, interpolation_mode, padding_mode, op):
    _tensor(input, op)
    _tensor(grid, op, "grid")
    nd = input.ndim
    if nd not in (4, 5):
        raise ValueError(f"{op}: expected a 4-D or 5-D input, got shape {tuple(input.shape)}")
    nsp = nd - 2
    gshape = grid._shape
    if len(gshape) != nd or gshape[-1] != nsp or gshape[0] != input._shape[0]:
        raise ValueError(f"{op}: expected grid of shape (N={input._shape[0]}, *out, {nsp}) for "
                         f"input {tuple(input._shape)}, got {tuple(gshape)}")
    if builtins.any(s <= 0 for s in input._shape[2:]):
        raise ValueError(f"{op}: input spatial sizes must be > 0, got {tuple(input._shape)}")
    if interpolation_mode not in _GRID_MODES:
        raise ValueError(f"{op}: interpolation_mode must be 0 (bilinear), 1 (nearest) or "
                         f"2 (bicubic), got {interpolation_mode!r}")
    if interpolation_mode == 2 and nsp != 2:
        raise ValueError(f"{op}: bicubic interpolation needs a 4-D input, got "
                         f"{tuple(input._shape)}")
    if padding_mode not in _PAD_NAMES:
        raise ValueError(f"{op}: padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), "
                         f"got {padding_mode!r}")
    _same_device(op, input, grid)
    if input._dtype is not grid._dtype:
        raise TypeError(f"{op}: expected grid to have the dtype of input ({input._dtype}), "
                        f"got {grid._dtype}")
    return nsp, _compute_dtype(input, op)


def grid_sampler(input, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    """Sample ``input`` (N, C, H, W) or (N, C, D, H, W) at the normalized coordinates in
    ``grid`` (N, Ho, Wo, 2) or (N, Do, Ho, Wo, 3), last dim ordered x, y[, z] in [-1, 1]
    (torch.grid_sampler's signature: interpolation_mode 0 bilinear, 1 nearest, 2 bicubic;
    padding_mode 0 zeros, 1 border, 2 reflection). Differentiable w.r.t. input and grid.

    >>> import fiamma
    >>> x = fiamma.arange(4.0).reshape(1, 1, 2, 2)
    >>> g = fiamma.tensor([[[[0.0, 0.0]]]])
    >>> fiamma.grid_sampler(x, g, 0, 0, True).item()
    1.5
    """
    op = "grid_sampler"
    nsp, cdt = _grid_args(input, grid, interpolation_mode, padding_mode, op)
    x = cast(input, cdt)
    gr = cast(grid, cdt).contiguous()
    n, c = input._shape[:2]
    osz = tuple(grid._shape[1:-1])
    res = new_empty((n, c) + osz, cdt, input._storage.device)
    if res._numel:
        check(res._storage.backend.grid_sample(nsp, _GRID_MODES[interpolation_mode],
                                               padding_mode, bool(align_corners), n, c,
                                               input._shape[2:], osz, x, x._stride, gr, res), op)
    res = cast(res, input._dtype)
    if input.requires_grad or grid.requires_grad:
        G.record(ops.grid_sampler, res, (input, grid),
                 {"interpolation_mode": interpolation_mode, "padding_mode": padding_mode,
                  "align_corners": bool(align_corners)})
    return res


def grid_sampler_backward(grad_output, input, grid, interpolation_mode=0, padding_mode=0,
                          align_corners=False, output_mask=(True, True)):
    """The gradients of ``grid_sampler`` w.r.t. input and grid, ``(grad_input, grad_grid)``
    (None where ``output_mask`` is False). Each is recorded for autograd: grad_input is linear
    in grad_output (its backward is grid_sampler again); grad_grid is differentiated through
    a composite of the sampling in fiamma-autograd (identically zero for nearest)."""
    op = "grid_sampler_backward"
    nsp, cdt = _grid_args(input, grid, interpolation_mode, padding_mode, op)
    _tensor(grad_output, op, "grad_output")
    n, c = input._shape[:2]
    osz = tuple(grid._shape[1:-1])
    if tuple(grad_output._shape) != (n, c) + osz:
        raise ValueError(f"{op}: expected grad_output of shape {(n, c) + osz}, got "
                         f"{tuple(grad_output._shape)}")
    want_x, want_g = bool(output_mask[0]), bool(output_mask[1])
    x = cast(input, cdt)
    gr = cast(grid, cdt).contiguous()
    gy = cast(grad_output, cdt).contiguous()
    _same_device(op, input, grad_output)
    dev = input._storage.device
    gx = new_empty(input._shape, cdt, dev, zero=True) if want_x else None
    gg = new_empty(grid._shape, cdt, dev, zero=True) if want_g else None
    if gy._numel and input._numel and (want_x or want_g):
        check(x._storage.backend.grid_sample_backward(
            nsp, _GRID_MODES[interpolation_mode], padding_mode, bool(align_corners), n, c,
            input._shape[2:], osz, gy, x, x._stride, gr, gx, gg), op)
    kw = {"interpolation_mode": interpolation_mode, "padding_mode": padding_mode,
          "align_corners": bool(align_corners)}
    if want_x:
        gx = cast(gx, input._dtype)
        if grad_output.requires_grad or grid.requires_grad:
            G.record(ops.grid_sampler_backward_input, gx, (grad_output, input, grid), kw)
    if want_g:
        gg = cast(gg, grid._dtype)
        if grad_output.requires_grad or input.requires_grad or grid.requires_grad:
            G.record(ops.grid_sampler_backward_grid, gg, (grad_output, input, grid), kw)
    return gx, gg


# ---- shuffles (views and one copy, differentiable through reshape/permute) ------------------

def _int_arg(v, op, name):
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__}") from None
    if v <= 0:
        raise ValueError(f"{op}: {name} must be > 0, got {v}")
    return v


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r), PyTorch's element order.

    >>> import fiamma
    >>> fiamma.pixel_shuffle(fiamma.arange(4.0).reshape(1, 4, 1, 1), 2).reshape(-1).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    op = "pixel_shuffle"
    _tensor(input, op)
    r = _int_arg(upscale_factor, op, "upscale_factor")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dims, got shape "
                         f"{tuple(input.shape)}")
    *b, c, h, w = input._shape
    if c % (r * r):
        raise ValueError(f"{op}: the channel count {c} is not divisible by upscale_factor "
                         f"squared ({r * r})")
    oc = c // (r * r)
    nb = len(b)
    t = input.reshape(*b, oc, r, r, h, w)
    t = t.permute(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    return t.reshape(*b, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of ``pixel_shuffle``."""
    op = "pixel_unshuffle"
    _tensor(input, op)
    r = _int_arg(downscale_factor, op, "downscale_factor")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dims, got shape "
                         f"{tuple(input.shape)}")
    *b, c, h, w = input._shape
    if h % r or w % r:
        raise ValueError(f"{op}: the spatial sizes ({h}, {w}) are not divisible by "
                         f"downscale_factor {r}")
    nb = len(b)
    t = input.reshape(*b, c, h // r, r, w // r, r)
    t = t.permute(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    return t.reshape(*b, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, C, *) with C = g * k -> channels reordered as (k, g): PyTorch's channel_shuffle."""
    op = "channel_shuffle"
    _tensor(input, op)
    g = _int_arg(groups, op, "groups")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dims, got shape "
                         f"{tuple(input.shape)}")
    n, c, *rest = input._shape
    if c % g:
        raise ValueError(f"{op}: the channel count {c} is not divisible by groups {g}")
    t = input.reshape(n, g, c // g, *rest).transpose(1, 2)
    return t.reshape(n, c, *rest)

