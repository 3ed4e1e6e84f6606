"""Fractional max pooling (Graham, "Fractional Max-Pooling", 2014): PyTorch's
``F.fractional_max_pool2d/3d`` and their ``_with_indices`` forms.

Each plane (sample and channel) gets pooling regions of a fixed size placed at pseudo-random
starts: along a dimension of input size ``n``, output size ``m`` and kernel ``k``, with the
plane's sample ``u`` in [0, 1) and ``alpha = (n - k) / (m - 1)``, the i-th window starts at
``int((i + u) alpha) - int(u alpha)`` and the last at ``n - k``; the starts are computed in the
input's floating dtype, as PyTorch's kernels do, so given the same ``_random_samples`` the
regions, values and indices are PyTorch's. Samples are (N, C, nd): (W, H) for 2-d and
(T, H, W) for 3-d, the orders PyTorch's kernels read them in. The result is the window's
maximum (a NaN wins) and, with ``return_indices``, its flat index in the plane; the gradient
flows to that element. One difference: PyTorch 2.13's 3-d kernel also refuses an output that
exactly fills a dimension (``output + kernel - 1 == input``); fiamma takes it.

>>> import fiamma
>>> x = fiamma.arange(16.0).reshape(1, 1, 4, 4)
>>> s = fiamma.full((1, 1, 2), 0.5)
>>> fractional_max_pool2d(x, 2, output_size=2, _random_samples=s).tolist()
[[[[5.0, 7.0], [13.0, 15.0]]]]
"""

import numpy as np

import fiamma

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]


def _tuple(v, nd, what, op):
    if isinstance(v, (list, tuple)):
        if len(v) != nd:
            raise ValueError(f"{op}: {what} must be an int or a tuple of {nd}, got {v!r}")
        return tuple(v)
    return (v,) * nd


def _starts(sample, n, m, k, dtype):
    """The window starts along one dimension for one plane (the input dtype's arithmetic)."""
    if m == 1:
        return [n - k]
    ft = np.float32 if dtype in (fiamma.float32, fiamma.float16, fiamma.bfloat16) else np.float64
    alpha = ft(n - k) / ft(m - 1)
    u = ft(sample)
    base = int(u * alpha)
    return [int((ft(i) + u) * alpha) - base for i in range(m - 1)] + [n - k]


def _fractional(op, nd, input, kernel_size, output_size, output_ratio, _random_samples):
    if not isinstance(input, fiamma.Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: Expected {nd + 1}D or {nd + 2}D tensor, but got "
                           f"{list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {input.dtype}")
    batched = input.dim() == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    sizes = tuple(x.shape[2:])
    k = _tuple(kernel_size, nd, "kernel_size", op)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = _tuple(output_ratio, nd, "output_ratio", op)
        out = tuple(int(s * r) for s, r in zip(sizes, ratio))
    else:
        out = _tuple(output_size, nd, "output_size", op)
    for d, (s, o, kk) in enumerate(zip(sizes, out, k)):
        if o < 1 or kk < 1:
            raise RuntimeError(f"{op}: output size and kernel size must be positive, got "
                               f"output {list(out)} and kernel {list(k)}")
        if o + kk - 1 > s:
            raise RuntimeError(f"{op}: output size {o} + kernel size {kk} - 1 is too large for "
                               f"the input size {s} at spatial dim {d} (input {list(sizes)})")
    if _random_samples is None:
        samples = fiamma.rand(n, c, nd, dtype=x.dtype, device=x.device)
    else:
        samples = _random_samples
        if tuple(samples.shape) != (n, c, nd):
            raise RuntimeError(f"{op}: expected _random_samples of shape {[n, c, nd]}, got "
                               f"{list(samples.shape)}")
    sv = samples.detach().to(fiamma.float64).cpu().numpy()
    # per plane and dim the starts; the samples' last axis is (W, H) in 2-d and (T, H, W) in
    # 3-d, as PyTorch's kernels read it
    order = (1, 0) if nd == 2 else (0, 1, 2)
    starts = np.empty((n, c, nd), dtype=object)
    for b in range(n):
        for ch in range(c):
            for d in range(nd):
                starts[b, ch, d] = _starts(sv[b, ch, order[d]], sizes[d], out[d], k[d],
                                           x.dtype)
    # flat in-plane index of every window element: (N, C, *out, prod(k))
    strides = [int(np.prod(sizes[d + 1:])) for d in range(nd)]
    offs = np.zeros(k, dtype=np.int64)
    for d in range(nd):
        shape = [1] * nd
        shape[d] = k[d]
        offs = offs + np.arange(k[d]).reshape(shape) * strides[d]
    offs = offs.reshape(-1)
    idx = np.empty((n, c) + out + (offs.size,), dtype=np.int64)
    for b in range(n):
        for ch in range(c):
            base = np.zeros(out, dtype=np.int64)
            for d in range(nd):
                shape = [1] * nd
                shape[d] = out[d]
                base = base + np.asarray(starts[b, ch, d]).reshape(shape) * strides[d]
            idx[b, ch] = base[..., None] + offs
    index = fiamma.from_numpy(idx).to(x.device)
    flat = x.reshape(n, c, -1)
    vals = flat.gather(2, index.reshape(n, c, -1)).reshape((n, c) + out + (offs.size,))
    res, arg = vals.max(dim=-1)
    where = index.gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    if not batched:
        res, where = res.squeeze(0), where.squeeze(0)
    return res, where


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """2-D fractional max pooling of (N, C, H, W) or (C, H, W): ``(values, indices)``."""
    return _fractional("fractional_max_pool2d", 2, input, kernel_size, output_size,
                       output_ratio, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """2-D fractional max pooling (see the module's docstring); ``output_size`` or
    ``output_ratio`` (of the input size) sets the output."""
    res, idx = fractional_max_pool2d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, return_indices, _random_samples)
    return (res, idx) if return_indices else res


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """3-D fractional max pooling of (N, C, T, H, W) or (C, T, H, W): ``(values, indices)``."""
    return _fractional("fractional_max_pool3d", 3, input, kernel_size, output_size,
                       output_ratio, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """3-D fractional max pooling (see the module's docstring)."""
    res, idx = fractional_max_pool3d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, return_indices, _random_samples)
    return (res, idx) if return_indices else res
