"""Image operations on fiamma tensors of shape (..., C, H, W), uint8 or floating point.

Heavy operations are written as a few large fiamma ops: resize and blur are two matrix products
with per-axis weight matrices built once in NumPy; geometric warps gather from an inverse-mapped
sampling grid. Integer images are processed in float32 and rounded back, as torchvision does.
"""

import math
from functools import lru_cache

import numpy as np

import fiamma

_INT_MAX = {
    fiamma.uint8: 255,
    fiamma.int8: 127,
    fiamma.int16: 32767,
    fiamma.int32: 2**31 - 1,
    fiamma.int64: 2**63 - 1,
    fiamma.bool: 1,
}


def max_value(dtype):
    """Largest intensity of an image of this dtype (1.0 for floating point)."""
    return _INT_MAX.get(dtype, 1.0)


def is_float(img):
    return img.is_floating_point()


def check_image(img, op):
    if not fiamma.is_tensor(img):
        raise TypeError(f"{op}: expected a fiamma Tensor image, got {type(img).__name__}")
    if img.ndim < 2:
        raise TypeError(
            f"{op}: tensor image should have at least 2 dimensions (..., H, W), "
            f"got shape {tuple(img.shape)}"
        )


def get_dimensions(img):
    check_image(img, "get_dimensions")
    c = 1 if img.ndim == 2 else img.shape[-3]
    return [c, img.shape[-2], img.shape[-1]]


def check_channels(img, allowed, op):
    c = get_dimensions(img)[0]
    if c not in allowed:
        raise TypeError(f"{op}: input image should have {allowed} channels, got {c}")


def _to_nchw(img):
    """(..., C, H, W) -> float32/float64 (N, C, H, W), plus what is needed to undo it."""
    shape = tuple(img.shape)
    squeeze = img.ndim == 2
    if squeeze:
        img = img.unsqueeze(0)
    x = img.reshape(-1, *img.shape[-3:])
    dtype = img.dtype
    if dtype not in (fiamma.float32, fiamma.float64):  # integers and half types compute in float32
        x = x.to(fiamma.float32)
    return x, (shape, dtype, squeeze)


def _from_nchw(x, state, clamp=True):
    shape, dtype, squeeze = state
    if x.dtype != dtype:
        if not dtype.is_floating_point:
            x = fiamma.round(x)
            if clamp and dtype != fiamma.bool:
                lo = 0 if dtype == fiamma.uint8 else -max_value(dtype) - 1
                x = x.clamp(lo, max_value(dtype))
        x = x.to(dtype)
    x = x.reshape(*shape[:-3], *x.shape[-3:]) if not squeeze else x.reshape(x.shape[-2:])
    return x


# ---------------------------------------------------------------- dtype conversion


def convert_image_dtype(image, dtype=fiamma.float32):
    check_image(image, "convert_image_dtype")
    if image.dtype == dtype:
        return image
    if is_float(image):
        if dtype.is_floating_point:
            return image.to(dtype)
        if (image.dtype == fiamma.float32 and dtype in (fiamma.int32, fiamma.int64)) or (
            image.dtype == fiamma.float64 and dtype == fiamma.int64
        ):
            raise RuntimeError(
                f"convert_image_dtype: the cast from {image.dtype} to {dtype} "
                "cannot be performed safely."
            )
        eps = 1e-3
        return image.mul(max_value(dtype) + 1.0 - eps).to(dtype)
    in_max = max_value(image.dtype)
    if dtype.is_floating_point:
        return image.to(dtype).div_(in_max)
    out_max = max_value(dtype)
    if in_max > out_max:
        factor = (in_max + 1) // (out_max + 1)
        return fiamma.div(image, factor, rounding_mode="floor").to(dtype)
    factor = (out_max + 1) // (in_max + 1)
    return image.to(dtype).mul_(factor)


# ---------------------------------------------------------------- geometry: crop / flip / pad


def hflip(img):
    return img.flip(-1)


def vflip(img):
    return img.flip(-2)


def _pad_index(n, before, after, mode):
    k = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(k, 0, n - 1)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(k)
        period = 2 * n - 2
        k = np.mod(k, period)
        return np.where(k >= n, period - k, k)
    period = 2 * n  # symmetric
    k = np.mod(k, period)
    return np.where(k >= n, period - 1 - k, k)


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad by (left, top, right, bottom); negative values crop."""
    check_image(img, "pad")
    left, top, right, bottom = padding
    h, w = img.shape[-2:]
    if padding_mode == "constant":
        # negative padding crops first
        img = img[..., max(-top, 0) : h - max(-bottom, 0), max(-left, 0) : w - max(-right, 0)]
        top, bottom, left, right = max(top, 0), max(bottom, 0), max(left, 0), max(right, 0)
        if top == bottom == left == right == 0:
            return img
        h, w = img.shape[-2:]
        out = fiamma.full(
            (*img.shape[:-2], h + top + bottom, w + left + right), fill, dtype=img.dtype
        )
        out[..., top : top + h, left : left + w] = img
        return out
    if padding_mode == "reflect" and (max(top, bottom) >= h or max(left, right) >= w):
        raise ValueError(
            f"pad: reflect padding {list(padding)} must be smaller than the image "
            f"size (H={h}, W={w})"
        )
    iy = fiamma.from_numpy(_pad_index(h, top, bottom, padding_mode))
    ix = fiamma.from_numpy(_pad_index(w, left, right, padding_mode))
    return img.index_select(-2, iy).index_select(-1, ix)


def crop(img, top, left, height, width):
    h, w = img.shape[-2:]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        inner = img[..., max(top, 0) : max(min(bottom, h), 0), max(left, 0) : max(min(right, w), 0)]
        return pad(inner, [max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0)])
    return img[..., top:bottom, left:right]


# ---------------------------------------------------------------- resize


def _cubic(x, a):
    x = np.abs(x)
    return np.where(
        x <= 1,
        ((a + 2) * x - (a + 3)) * x * x + 1,
        np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0.0),
    )


@lru_cache(maxsize=256)
def _resize_matrix(n_in, n_out, mode, antialias):
    """(n_out, n_in) float32 matrix M such that out = M @ in along one axis."""
    scale = n_in / n_out
    m = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    if antialias and mode in ("bilinear", "bicubic"):
        support = (1.0 if mode == "bilinear" else 2.0) * max(scale, 1.0)
        inv = 1.0 / max(scale, 1.0)
        center = scale * (rows + 0.5)
        lo = np.maximum((center - support + 0.5).astype(np.int64), 0)
        hi = np.minimum((center + support + 0.5).astype(np.int64), n_in)
        cols = lo[:, None] + np.arange(int(math.ceil(2 * support)) + 2)[None, :]
        x = (cols - center[:, None] + 0.5) * inv
        wts = np.maximum(1.0 - np.abs(x), 0.0) if mode == "bilinear" else _cubic(x, -0.5)
        wts = np.where(cols < hi[:, None], wts, 0.0)
        total = wts.sum(1, keepdims=True)
        wts = wts / np.where(total != 0, total, 1.0)
        np.add.at(m, (np.broadcast_to(rows[:, None], cols.shape), np.minimum(cols, n_in - 1)), wts)
        return m
    src = (rows + 0.5) * scale - 0.5
    if mode == "bilinear":
        src = np.maximum(src, 0.0)
        i0 = np.floor(src).astype(np.int64)
        i0 = np.minimum(i0, n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = src - i0
        np.add.at(m, (rows, i0), 1.0 - l1)
        np.add.at(m, (rows, i1), l1)
    else:  # bicubic without antialias (a = -0.75, borders replicated)
        i0 = np.floor(src).astype(np.int64)
        t = src - i0
        for k in range(-1, 3):
            np.add.at(m, (rows, np.clip(i0 + k, 0, n_in - 1)), _cubic(t - k, -0.75))
    return m


@lru_cache(maxsize=512)
def _weights(kind, n_in, n_out, mode, param, transpose, dtype):
    """Cached fiamma weight matrix (float64 maths, stored in the image's float dtype)."""
    m = (
        _resize_matrix(n_in, n_out, mode, param)
        if kind == "resize"
        else _blur_matrix(n_in, n_out, param)
    )
    if transpose:
        m = m.T
    return fiamma.from_numpy(np.ascontiguousarray(m)).to(dtype)


@lru_cache(maxsize=256)
def _nearest_index(n_in, n_out, exact):
    scale = np.float32(n_in) / np.float32(n_out)
    pos = np.arange(n_out, dtype=np.float32)
    if exact:
        pos = pos + np.float32(0.5)
    idx = np.minimum(np.floor(pos * scale).astype(np.int64), n_in - 1)
    return fiamma.from_numpy(idx)


@lru_cache(maxsize=512)
def _band_blocks(n_in, n_out, mode, antialias, dtype, chunk=32):
    """The weight matrix cut into blocks of `chunk` output rows, each keeping only the input
    columns its rows touch: (r0, r1, lo, hi, W[r0:r1, lo:hi], its transpose). None when the
    band is too wide (or the axis too short) for blocks to pay for their extra calls."""
    m = _resize_matrix(n_in, n_out, mode, antialias)
    if n_out < 2 * chunk:
        return None
    blocks, macs = [], 0
    for r0 in range(0, n_out, chunk):
        r1 = min(r0 + chunk, n_out)
        used = np.nonzero(m[r0:r1].any(0))[0]
        lo, hi = (int(used[0]), int(used[-1]) + 1) if used.size else (0, 1)
        sub = m[r0:r1, lo:hi]
        blocks.append(
            (
                r0,
                r1,
                lo,
                hi,
                fiamma.from_numpy(np.ascontiguousarray(sub)).to(dtype),
                fiamma.from_numpy(np.ascontiguousarray(sub.T)).to(dtype),
            )
        )
        macs += (r1 - r0) * (hi - lo)
    return blocks if macs * 2 < n_out * n_in else None


def _apply_axis(x, axis, n_in, n_out, mode, aa, dt):
    """Resample axis -2 (rows) or -1 (columns) of x with the weight matrix: one product, or one
    product per band block when the matrix is mostly zeros (downscaling by a few times)."""
    # with gradients (or under fiamma.jit's trace, which follows the tensors through the grad
    # flag) one product: the blocks are written in place into a fresh tensor
    blocks = None if x.requires_grad else _band_blocks(n_in, n_out, mode, aa, dt)
    if blocks is None:
        if axis == -2:
            return fiamma.matmul(_weights("resize", n_in, n_out, mode, aa, False, dt), x)
        return fiamma.matmul(x, _weights("resize", n_in, n_out, mode, aa, True, dt))
    shape = list(x.shape)
    shape[axis] = n_out
    out = fiamma.empty(shape, dtype=dt)
    if axis == -1:
        # all images and rows of the batch in one product per block
        x2, out2 = x.reshape(-1, n_in), out.reshape(-1, n_out)
        for r0, r1, lo, hi, w, wt in blocks:
            out2[:, r0:r1] = fiamma.matmul(x2[:, lo:hi], wt)
        return out
    for r0, r1, lo, hi, w, wt in blocks:
        out[..., r0:r1, :] = fiamma.matmul(w, x[..., lo:hi, :])
    return out


def resize(img, size, interpolation="bilinear", antialias=True):
    """Resize (..., C, H, W) to size=(h, w) with one weight-matrix product per axis."""
    oh, ow = size
    h, w = img.shape[-2:]
    if interpolation in ("nearest", "nearest-exact"):
        exact = interpolation == "nearest-exact"
        out = img
        if oh != h:
            out = out.index_select(-2, _nearest_index(h, oh, exact))
        if ow != w:
            out = out.index_select(-1, _nearest_index(w, ow, exact))
        return out
    if interpolation not in ("bilinear", "bicubic"):
        raise ValueError(
            f"resize: interpolation {interpolation!r} is not supported for tensors "
            "(nearest, nearest-exact, bilinear, bicubic)"
        )
    x, state = _to_nchw(img)
    dt = x.dtype
    aa = bool(antialias)
    # two products; the order with fewer multiply-adds goes first
    height_first = oh * h * w + oh * w * ow <= h * w * ow + oh * h * ow
    for axis in ("h", "w") if height_first else ("w", "h"):
        if axis == "h" and oh != h:
            x = _apply_axis(x, -2, h, oh, interpolation, aa, dt)
        elif axis == "w" and ow != w:
            x = _apply_axis(x, -1, w, ow, interpolation, aa, dt)
    return _from_nchw(x, state)


# ---------------------------------------------------------------- geometric warps


def _sample(img, ix, iy, mode, fill):
    """Gather img (..., C, H, W) at source pixel coordinates ix, iy (oh, ow) with zero padding.

    When fill is not None, out-of-image areas are blended with fill through a sampled
    validity mask, as torchvision does."""
    x, state = _to_nchw(img)
    n, c, h, w = x.shape
    oh, ow = ix.shape
    flat = x.reshape(n, c, h * w)
    if mode == "nearest":
        xi, yi = fiamma.round(ix), fiamma.round(iy)
        corners = [(xi, yi, None)]
    elif mode == "bilinear":
        x0, y0 = fiamma.floor(ix), fiamma.floor(iy)
        fx, fy = ix - x0, iy - y0
        corners = [
            (x0, y0, (1 - fx) * (1 - fy)),
            (x0 + 1, y0, fx * (1 - fy)),
            (x0, y0 + 1, (1 - fx) * fy),
            (x0 + 1, y0 + 1, fx * fy),
        ]
    else:
        raise ValueError(
            f"interpolation {mode!r} is not supported for tensor warps (nearest, bilinear)"
        )
    out = None
    mask = None
    for cx, cy, wt in corners:
        valid = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
        idx = (cy.clamp(0, h - 1) * w + cx.clamp(0, w - 1)).to(fiamma.int64).reshape(-1)
        vals = flat.index_select(2, idx).reshape(n, c, oh, ow)
        wv = valid.to(x.dtype) if wt is None else wt.to(x.dtype) * valid
        term = vals * wv
        out = term if out is None else out.add_(term)
        mask = wv if mask is None else mask.add_(wv)
    if fill is not None:
        fl = list(fill) if isinstance(fill, (list, tuple)) else [float(fill)]
        fv = fiamma.tensor(fl, dtype=x.dtype).reshape(1, len(fl), 1, 1)
        if mode == "nearest":
            out = fiamma.where(mask < 0.5, fv, out)
        else:
            out = out * mask + (1.0 - mask) * fv
    return _from_nchw(out, state)


def affine_size(matrix, w, h):
    # corners in centred coordinates, mapped, then shifted to [0, w] x [0, h] like PIL
    pts = np.array(
        [
            [-0.5 * w, -0.5 * h, 1.0],
            [-0.5 * w, 0.5 * h, 1.0],
            [0.5 * w, 0.5 * h, 1.0],
            [0.5 * w, -0.5 * h, 1.0],
        ],
        dtype=np.float32,
    )
    theta = np.array(matrix, dtype=np.float32).reshape(2, 3)
    new = pts @ theta.T
    shift = np.array([w * 0.5, h * 0.5], dtype=np.float32)
    tol = np.float32(1e-4)
    cmax = np.ceil(np.trunc((new.max(0) + shift) / tol) * tol)
    cmin = np.floor(np.trunc((new.min(0) + shift) / tol) * tol)
    size = cmax - cmin
    return int(size[0]), int(size[1])


def affine(img, matrix, interpolation="nearest", fill=None, out_size=None):
    """Warp with the inverse affine matrix [a, b, c, d, e, f] (output -> input, centred coords)."""
    h, w = img.shape[-2:]
    ow, oh = out_size if out_size is not None else (w, h)
    # same float32 path as an affine_grid + grid_sample(align_corners=False) pipeline, so that
    # nearest sampling rounds exactly-half coordinates the same way
    m = np.array(matrix, dtype=np.float32).reshape(2, 3)
    rx = (m[0] / np.float32(0.5 * w)).tolist()
    ry = (m[1] / np.float32(0.5 * h)).tolist()
    xs = fiamma.arange(ow, dtype=fiamma.float32).add_(0.5 - ow * 0.5).reshape(1, ow)
    ys = fiamma.arange(oh, dtype=fiamma.float32).add_(0.5 - oh * 0.5).reshape(oh, 1)
    gx = xs * rx[0] + ys * rx[1] + rx[2]
    gy = xs * ry[0] + ys * ry[1] + ry[2]
    return _sample(img, _unnormalize(gx, w), _unnormalize(gy, h), interpolation, fill)


def _unnormalize(g, size):
    return g.add_(1.0).mul_(float(size)).sub_(1.0).div_(2.0)


def perspective(img, coeffs, interpolation="bilinear", fill=None):
    h, w = img.shape[-2:]
    c = np.array(coeffs, dtype=np.float32)
    r1 = (c[0:3] / np.float32(0.5 * w)).tolist()
    r2 = (c[3:6] / np.float32(0.5 * h)).tolist()
    c6, c7 = float(c[6]), float(c[7])
    xs = fiamma.arange(w, dtype=fiamma.float32).add_(0.5).reshape(1, w)
    ys = fiamma.arange(h, dtype=fiamma.float32).add_(0.5).reshape(h, 1)
    den = xs * c6 + ys * c7 + 1.0
    gx = (xs * r1[0] + ys * r1[1] + r1[2]).div_(den).sub_(1.0)
    gy = (xs * r2[0] + ys * r2[1] + r2[2]).div_(den).sub_(1.0)
    return _sample(img, _unnormalize(gx, w), _unnormalize(gy, h), interpolation, fill)


# ---------------------------------------------------------------- filters


def _blur_matrix(n, ksize, sigma):
    """(n, n) matrix applying a reflect-padded 1-D Gaussian along an axis (out = in @ M)."""
    half = (ksize - 1) * 0.5
    x = np.linspace(-half, half, ksize)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    k = k / k.sum()
    m = np.zeros((n, n), dtype=np.float64)
    src = (
        _pad_index(n, ksize // 2, ksize // 2, "reflect")
        if n > 1
        else np.zeros(n + ksize - 1, dtype=np.int64)
    )
    cols = np.arange(n)[:, None]
    taps = np.arange(ksize)[None, :]
    np.add.at(
        m, (src[cols + taps], np.broadcast_to(cols, (n, ksize))), np.broadcast_to(k, (n, ksize))
    )
    return m


def gaussian_blur(img, kernel_size, sigma):
    kx, ky = kernel_size
    sx, sy = sigma
    x, state = _to_nchw(img)
    h, w = x.shape[-2:]
    mw = _weights("blur", w, kx, None, float(sx), False, x.dtype)
    mh = _weights("blur", h, ky, None, float(sy), True, x.dtype)
    x = fiamma.matmul(mh, fiamma.matmul(x, mw))
    return _from_nchw(x, state)


# ---------------------------------------------------------------- colour


def _blend(img1, img2, ratio):
    bound = max_value(img1.dtype)
    out = (
        (img1 * ratio + img2 * (1.0 - ratio))
        if is_float(img1)
        else (img1.to(fiamma.float32) * ratio + img2.to(fiamma.float32) * (1.0 - ratio))
    )
    return out.clamp(0, bound).to(img1.dtype)


def rgb_to_grayscale(img, num_output_channels=1):
    if img.ndim < 3:
        raise TypeError(f"rgb_to_grayscale: expected (..., C, H, W), got {tuple(img.shape)}")
    check_channels(img, [1, 3], "rgb_to_grayscale")
    if img.shape[-3] == 3:
        r, g, b = img.unbind(-3)
        if not is_float(img):
            r, g, b = r.to(fiamma.float32), g.to(fiamma.float32), b.to(fiamma.float32)
        gray = (r * 0.2989 + g * 0.587 + b * 0.114).to(img.dtype).unsqueeze(-3)
    else:
        gray = img.clone()
    if num_output_channels == 3:
        return gray.expand(*gray.shape[:-3], 3, *gray.shape[-2:]).contiguous()
    return gray


def adjust_brightness(img, factor):
    return _blend(img, fiamma.zeros_like(img), factor)


def adjust_contrast(img, factor):
    c = get_dimensions(img)[0]
    dtype = img.dtype if is_float(img) else fiamma.float32
    gray = rgb_to_grayscale(img) if c == 3 else img
    mean = gray.to(dtype).mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(img, mean, factor)


def adjust_saturation(img, factor):
    if get_dimensions(img)[0] == 1:
        return img
    return _blend(img, rgb_to_grayscale(img), factor)


def _rgb2hsv(img):
    r, g, b = img.unbind(-3)
    maxc = fiamma.maximum(fiamma.maximum(r, g), b)
    minc = fiamma.minimum(fiamma.minimum(r, g), b)
    eqc = maxc == minc
    cr = maxc - minc
    ones = fiamma.ones_like(maxc)
    s = cr / fiamma.where(eqc, ones, maxc)
    crd = fiamma.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / crd, (maxc - g) / crd, (maxc - b) / crd
    is_r = maxc == r
    is_g = (maxc == g) & ~is_r
    is_b = ~(maxc == g) & ~is_r
    hue = (
        is_r.to(img.dtype) * (bc - gc)
        + is_g.to(img.dtype) * (2.0 + rc - bc)
        + is_b.to(img.dtype) * (4.0 + gc - rc)
    )
    hue = fiamma.fmod(hue / 6.0 + 1.0, 1.0)
    return hue, s, maxc


def _hsv2rgb(h, s, v):
    i = fiamma.floor(h * 6.0)
    f = h * 6.0 - i
    i = fiamma.remainder(i.to(fiamma.int32), 6)
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    r, g, b = table[5]
    for k in range(4, -1, -1):
        m = i == k
        r = fiamma.where(m, table[k][0], r)
        g = fiamma.where(m, table[k][1], g)
        b = fiamma.where(m, table[k][2], b)
    return fiamma.stack([r, g, b], dim=-3)


def adjust_hue(img, hue_factor):
    check_channels(img, [1, 3], "adjust_hue")
    if get_dimensions(img)[0] == 1:
        return img
    orig = img.dtype
    x = convert_image_dtype(img, fiamma.float32)
    h, s, v = _rgb2hsv(x)
    h = fiamma.remainder(h + hue_factor, 1.0)
    return convert_image_dtype(_hsv2rgb(h, s, v), orig)


def adjust_gamma(img, gamma, gain=1.0):
    orig = img.dtype
    x = img if is_float(img) else convert_image_dtype(img, fiamma.float32)
    x = (x.pow(gamma) * gain).clamp(0, 1)
    return convert_image_dtype(x, orig)


def invert(img):
    check_channels(img, [1, 3], "invert")
    if img.dtype == fiamma.uint8:
        return fiamma.bitwise_not(img)
    return max_value(img.dtype) - img


def posterize(img, bits):
    if img.dtype != fiamma.uint8:
        raise TypeError(f"posterize: only uint8 image tensors are supported, got {img.dtype}")
    check_channels(img, [1, 3], "posterize")
    return fiamma.bitwise_and(img, (0xFF << (8 - bits)) & 0xFF)


def solarize(img, threshold):
    check_channels(img, [1, 3], "solarize")
    if threshold > max_value(img.dtype):
        raise TypeError("solarize: threshold should be less than the bound of the image dtype")
    return fiamma.where(img >= threshold, invert(img), img)


def adjust_sharpness(img, factor):
    check_channels(img, [1, 3], "adjust_sharpness")
    if img.shape[-1] <= 2 or img.shape[-2] <= 2:
        return img
    x, state = _to_nchw(img)
    s = None
    for dy in range(3):
        for dx in range(3):
            part = x[..., dy : dy + x.shape[-2] - 2, dx : dx + x.shape[-1] - 2]
            s = part.clone() if s is None else s.add_(part)
    s = s.add_(x[..., 1:-1, 1:-1] * 4.0).div_(13.0)
    deg = x.clone()
    deg[..., 1:-1, 1:-1] = s
    degenerate = _from_nchw(deg, state)
    return _blend(img, degenerate, factor)


def autocontrast(img):
    check_channels(img, [1, 3], "autocontrast")
    bound = max_value(img.dtype)
    dtype = img.dtype if is_float(img) else fiamma.float32
    lo = img.amin(dim=(-2, -1), keepdim=True).to(dtype)
    hi = img.amax(dim=(-2, -1), keepdim=True).to(dtype)
    same = hi == lo
    scale = bound / fiamma.where(same, fiamma.ones_like(hi), hi - lo)
    scale = fiamma.where(same, fiamma.ones_like(scale), scale)
    lo = fiamma.where(same, fiamma.zeros_like(lo), lo)
    return ((img.to(dtype) - lo) * scale).clamp(0, bound).to(img.dtype)


def _equalize_channel(ch):
    hist = fiamma.bincount(ch.reshape(-1).to(fiamma.int64), minlength=256).numpy()
    nz = hist[hist != 0]
    step = int(nz[:-1].sum()) // 255
    if nz.size <= 1 or step == 0:
        return ch
    lut = (np.cumsum(hist) + step // 2) // step
    lut = np.clip(np.concatenate([[0], lut[:-1]]), 0, 255).astype(np.uint8)
    return fiamma.from_numpy(lut).index_select(0, ch.reshape(-1).to(fiamma.int64)).reshape(ch.shape)


def equalize(img):
    if img.dtype != fiamma.uint8:
        raise TypeError(f"equalize: only uint8 image tensors are supported, got {img.dtype}")
    check_channels(img, [1, 3], "equalize")
    x = img.reshape(-1, *img.shape[-2:])
    return fiamma.stack([_equalize_channel(x[i]) for i in range(x.shape[0])]).reshape(img.shape)


def erase(img, i, j, h, w, v, inplace=False):
    if not inplace:
        img = img.clone()
    img[..., i : i + h, j : j + w] = v
    return img


def _key(v):
    if isinstance(v, (list, tuple)):
        return tuple(float(x) for x in v)
    if isinstance(v, (int, float)):
        return (float(v),)
    return tuple(np.ravel(np.asarray(v, dtype=np.float64)).tolist())


@lru_cache(maxsize=64)
def _mean_std(mean, std, dt):
    std_t = fiamma.tensor(list(std), dtype=dt)
    if bool((std_t == 0).any()):
        raise ValueError(
            f"Normalize: std evaluated to zero after conversion to {dt}, "
            "leading to division by zero."
        )
    return (fiamma.tensor(list(mean), dtype=dt).reshape(-1, 1, 1), std_t.reshape(-1, 1, 1))


def normalize(tensor, mean, std, inplace=False):
    if not is_float(tensor):
        raise TypeError(f"Normalize: input tensor should be a float tensor, got {tensor.dtype}")
    if tensor.ndim < 3:
        raise ValueError(
            f"Normalize: expected a tensor image of size (..., C, H, W), got {tuple(tensor.shape)}"
        )
    mean_t, std_t = _mean_std(_key(mean), _key(std), tensor.dtype)
    if mean_t.shape[0] not in (1, tensor.shape[-3]) or std_t.shape[0] not in (1, tensor.shape[-3]):
        raise ValueError(
            f"Normalize: mean and std need 1 or {tensor.shape[-3]} values (one per "
            f"channel), got {mean_t.shape[0]} and {std_t.shape[0]}"
        )
    if inplace:
        return tensor.sub_(mean_t).div_(std_t)
    return tensor.sub(mean_t).div_(std_t)
