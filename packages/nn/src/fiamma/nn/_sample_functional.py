"""Resampling functions of ``fiamma.nn.functional``: interpolate (and the deprecated upsample
aliases), grid_sample, affine_grid, pixel_shuffle, pixel_unshuffle, channel_shuffle.

The kernels are core's ``fiamma.upsample`` and ``fiamma.grid_sampler`` (C, with backward);
this module implements PyTorch's argument rules around them.

>>> import fiamma
>>> from fiamma.nn import functional as F
>>> x = fiamma.arange(4.0).reshape(1, 1, 2, 2)
>>> F.interpolate(x, scale_factor=2, mode="nearest").shape
fiamma.Size([1, 1, 4, 4])
"""

import functools
import math
import warnings

import numpy as np

import fiamma

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample",
           "affine_grid", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]

_KERNEL_MODE = {"nearest": "nearest", "nearest-exact": "nearest-exact", "linear": "linear",
                "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}
_MODE_NDIM = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}


def _cubic_aa(x, a=-0.5):
    x = np.abs(x)
    return np.where(x < 1.0, ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
                    np.where(x < 2.0, (((x - 5.0) * x + 8.0) * x - 4.0) * a, 0.0))


@functools.lru_cache(maxsize=128)
def _aa_matrix(n_in, n_out, mode, align_corners, scale):
    """(n_out, n_in) float64 weights of antialiased resampling along one axis, PyTorch's
    definition: the filter (triangle, or Keys cubic with a = -0.5) is stretched by the
    downscaling factor so every input pixel contributes, centred at scale * (i + 0.5), and each
    row is normalised to sum to 1."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None else n_in / n_out
    half = 1.0 if mode == "bilinear" else 2.0
    support = half * s if s >= 1.0 else half
    inv = 1.0 / s if s >= 1.0 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        x = (np.arange(lo, hi) - center + 0.5) * inv
        w = np.maximum(1.0 - np.abs(x), 0.0) if mode == "bilinear" else _cubic_aa(x)
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0.0 else w
    return m


def _interpolate_aa(input, output_size, mode, align_corners, scale_factors):
    """Antialiased bilinear/bicubic resize of (N, C, H, W): one weight-matrix product per axis
    (differentiable through matmul)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"interpolate: antialias=True needs a floating input, got "
                                  f"{input.dtype}")
    (h, w), (oh, ow) = input.shape[2:], output_size
    sh, sw = scale_factors if scale_factors is not None else (None, None)

    def weights(n_in, n_out, scale):
        m = _aa_matrix(n_in, n_out, mode, bool(align_corners), scale)
        return fiamma.from_numpy(m).to(input.dtype)

    out = fiamma.matmul(input, weights(w, ow, sw).t())
    return fiamma.matmul(weights(h, oh, sh), out)
_ALL_MODES = "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact"


def _is_seq(v):
    return isinstance(v, (list, tuple))


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of ``input`` (N, C, *spatial with 1 to 3 spatial dims) to
    ``size`` or by ``scale_factor``, as ``torch.nn.functional.interpolate``.

    Modes: nearest, nearest-exact, linear (3-D input), bilinear and bicubic (4-D), trilinear
    (5-D), area (adaptive average pooling). With ``scale_factor`` the output size is
    ``floor(in * scale)`` and, unless ``recompute_scale_factor=True``, the scale itself drives the
    coordinate mapping (PyTorch's rule). ``antialias=True`` (bilinear and bicubic, 4-D input)
    widens the filter by the downscaling factor so every input pixel counts, as PyTorch and
    Pillow do; upscaling is then bilinear/bicubic with weights renormalised at the borders.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.interpolate(fiamma.tensor([[[0.0, 1.0]]]), size=4, mode="linear").tolist()
    [[[0.0, 0.25, 0.75, 1.0]]]
    """
    if not isinstance(input, fiamma.Tensor):
        raise TypeError(f"interpolate: expected a Tensor as input, got {type(input).__name__}")
    if mode not in _KERNEL_MODE and mode != "area":
        raise NotImplementedError(f"interpolate: unknown mode {mode!r} (modes: {_ALL_MODES})")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if not 1 <= dim <= 3:
        raise NotImplementedError(
            f"interpolate: only 3D, 4D and 5D input tensors are supported (got {input.dim()}D) "
            f"for the modes: {_ALL_MODES} (got {mode})")
    scale_factors = None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if _is_seq(size):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size "
                    f"of {list(size)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                    "format and output size in (o1, o2, ...,oK) format.")
            output_size = [int(s) for s in size]
        else:
            output_size = [int(size)] * dim
    elif scale_factor is not None:
        output_size = None
        if _is_seq(scale_factor):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {list(scale_factor)}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if scale_factors is not None:
        for s in scale_factors:
            if not (s > 0 and math.isfinite(s)):
                raise ValueError(f"interpolate: scale_factor must be positive and finite, got "
                                 f"{scale_factors}")
        output_size = [int(math.floor(float(input.shape[i + 2]) * scale_factors[i]))
                       for i in range(dim)]
        if recompute_scale_factor:
            scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic") and input.dim() == 4):
        raise NotImplementedError("interpolate: anti-alias option is restricted to bilinear and "
                                  "bicubic modes and requires a 4-D tensor as input, got mode "
                                  f"{mode!r} and a {input.dim()}-D input")
    if any(s <= 0 for s in output_size):
        raise ValueError(f"interpolate: the output size must be > 0 in every spatial dim, got "
                         f"{output_size} for input of shape {list(input.shape)}")
    if mode == "area":
        pool = getattr(fiamma, f"adaptive_avg_pool{dim}d", None)
        if pool is None:
            raise NotImplementedError(f"interpolate(mode='area') needs "
                                      f"fiamma.adaptive_avg_pool{dim}d, missing in this core")
        return pool(input, output_size)
    need = _MODE_NDIM.get(mode)
    if need is not None and input.dim() != need:
        raise NotImplementedError(f"interpolate: got {input.dim()}D input, but {mode} mode "
                                  f"needs {need}D input")
    if antialias:
        return _interpolate_aa(input, output_size, mode, align_corners, scale_factors)
    return fiamma.upsample(input, tuple(output_size), _KERNEL_MODE[mode],
                           bool(align_corners), scale_factors)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of ``interpolate`` (as in PyTorch)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


_GRID_MODE = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_GRID_PAD = {"zeros": 0, "border": 1, "reflection": 2}


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) / (N, C, D, H, W) at the normalized (x, y[, z]) coordinates
    of ``grid`` (N, Ho, Wo, 2) / (N, Do, Ho, Wo, 3), as ``torch.nn.functional.grid_sample``.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> x = fiamma.arange(4.0).reshape(1, 1, 2, 2)
    >>> F.grid_sample(x, fiamma.zeros(1, 1, 1, 2), align_corners=True).item()
    1.5
    """
    if mode not in _GRID_MODE:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in _GRID_PAD:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" and input.dim() != 4:
        raise ValueError("nn.functional.grid_sample(): bicubic mode needs a 4-D input, got "
                         f"shape {list(input.shape)}")
    return fiamma.grid_sampler(input, grid, _GRID_MODE[mode], _GRID_PAD[padding_mode],
                               bool(align_corners))


def _base_coords(n, align_corners, dtype, device):
    if n <= 1:
        return fiamma.zeros(max(n, 0), dtype=dtype, device=device)
    v = fiamma.linspace(-1.0, 1.0, n, dtype=dtype, device=device)
    return v if align_corners else v * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) or (N, 3, 4) for an output of
    ``size`` (N, C, H, W) or (N, C, D, H, W), in grid_sample's normalized coordinates.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.affine_grid(fiamma.tensor([[[1.0, 0, 0], [0, 1, 0]]]), (1, 1, 1, 2), False).tolist()
    [[[[-0.5, 0.0], [0.5, 0.0]]]]
    """
    if not isinstance(theta, fiamma.Tensor) or not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got "
                         f"{getattr(theta, 'dtype', type(theta).__name__)}")
    size = [int(s) for s in size]
    align_corners = bool(align_corners)
    if len(size) == 4:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {list(theta.shape)}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError("Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {list(theta.shape)}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ValueError(f"affine_grid: theta has batch {theta.shape[0]}, size has {size[0]}")
    dt = theta.dtype
    nsp = len(spatial)
    # base[..., k]: coordinate k (x, y[, z], 1) at every output point, x varying fastest
    # x, y[, z]
    axes = [_base_coords(s, align_corners, dt, theta.device) for s in reversed(spatial)]
    full = tuple(spatial)
    cols = []
    for k, a in enumerate(axes):
        shape = [1] * nsp
        shape[nsp - 1 - k] = full[nsp - 1 - k]
        cols.append(a.reshape(shape).expand(full))
    cols.append(fiamma.ones(full, dtype=dt, device=theta.device))
    base = fiamma.stack(cols, -1).reshape(1, -1, nsp + 1)
    grid = fiamma.matmul(base, theta.transpose(1, 2))
    return grid.reshape(size[0], *full, nsp)


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    return fiamma.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    return fiamma.pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input, groups):
    """Reorder the channels of (N, g*k, *) as (k, g)."""
    return fiamma.channel_shuffle(input, groups)

