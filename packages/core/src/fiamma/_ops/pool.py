"""Pooling with PyTorch's names and semantics: max, average, adaptive and Lp pools over 1-3
spatial dims, max_unpool, and the backward ops their derivatives use.

Inputs are batched ``(N, C, *spatial)`` or unbatched ``(C, *spatial)``; every leading position is
one plane for the C kernels (csrc/pool.c), which read contiguous float32/float64 planes
(float16/bfloat16 are computed in float32). Max pools return flat per-plane indices of the
maxima (``h * W + w`` in 2-d), as PyTorch does, and ``max_unpool`` puts values back by them.

The backward kernels are ops too (``max_pool_backward``, ``avg_pool_backward``,
``adaptive_avg_pool_backward``): they record themselves, so gradients of gradients work.

>>> import fiamma
>>> x = fiamma.arange(16.0).reshape(1, 1, 4, 4)
>>> fiamma.max_pool2d(x, 2).tolist()
[[[[5.0, 7.0], [13.0, 15.0]]]]
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = [
    "max_pool1d", "max_pool2d", "max_pool3d",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "max_pool_backward", "avg_pool_backward", "adaptive_avg_pool_backward",
]

_ZERO3 = (0, 0, 0)
_ONE3 = (1, 1, 1)


# ---- argument checking -----------------------------------------------------------------------

def _ints(v, n, name, op, allow_none=False):
    """An int or a sequence of 1 or n ints -> a tuple of n ints."""
    if type(v) is int:
        return (v,) * n
    if type(v) is tuple and len(v) == n and all(type(e) is int for e in v):
        return v
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        v = tuple(v)
        if len(v) == 1:
            v = v * n
        if len(v) != n:
            raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    else:
        v = (v,) * n
    for e in v:
        if e is None and allow_none:
            continue
        if isinstance(e, bool) or not isinstance(e, int):
            try:
                if int(e) == e and not isinstance(e, (bool, float)):
                    continue
            except (TypeError, ValueError):
                pass
            raise TypeError(f"{op}: {name} must contain ints, got {v!r}")
    return tuple(e if e is None else int(e) for e in v)


def _input(x, nd, op):
    """Check ``x`` is a (C, *s) or (N, C, *s) tensor with nonzero non-batch sizes; returns the
    leading shape and the spatial shape."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor as input, got {type(x).__name__}")
    shp = x._shape
    if len(shp) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}D (unbatched) or {nd + 2}D (batched) "
                           f"input, got a {len(shp)}D input of shape {list(shp)}")
    for i, n in enumerate(shp):
        if n == 0 and not (len(shp) == nd + 2 and i == 0):
            raise RuntimeError(f"{op}: expected an input with non-zero sizes except an optional "
                               f"0 batch size, got shape {list(shp)}")
    if x._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating-point input, got {x._dtype}")
    return shp[:-nd], shp[-nd:]


def _plain(x, dt):
    """``x`` as a contiguous tensor of dtype ``dt`` (no copy when it already is one)."""
    if x._contig and x._dtype is dt:
        return x
    out = new_empty(x._shape, dt, x._storage.device)
    _copy_into(out, x)
    return out


def _compute_dtype(dt):
    return dt if dt is D.float64 or dt is D.float32 else D.float32


def _finish_dtype(t, dt):
    return t if t._dtype is dt else _plain(t, dt)


def _pad3(v, fill):
    """A 1- to 3-tuple of spatial parameters as the kernel's (D, H, W) triple."""
    return (fill,) * (3 - len(v)) + tuple(v)


def _out_len(n, k, s, p, d, ceil_mode):
    num = n + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        o = -(-num // s) + 1
        if (o - 1) * s >= n + p:  # the last window would start in the right padding
            o -= 1
    else:
        o = num // s + 1
    return o


_WINDOWS = {}


def _window_args(op, nd, spatial, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (kernel, stride, padding, dilation, output size) tuples; cached per arguments
    (the checks cost more than a small pool)."""
    try:
        key = (op, spatial, kernel_size, stride, padding, dilation, bool(ceil_mode))
        r = _WINDOWS.get(key)
    except TypeError:  # lists: not cached
        key, r = None, None
    if r is None:
        r = _window_args_uncached(op, nd, spatial, kernel_size, stride, padding, dilation,
                                  ceil_mode)
        if key is not None and len(_WINDOWS) < 1024:
            _WINDOWS[key] = r
    return r


def _window_args_uncached(op, nd, spatial, kernel_size, stride, padding, dilation, ceil_mode):
    k = _ints(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) \
        else _ints(stride, nd, "stride", op)
    p = _ints(padding, nd, "padding", op)
    d = _ints(dilation, nd, "dilation", op)
    if any(e <= 0 for e in k):
        raise ValueError(f"{op}: kernel_size must be greater than zero, got {k}")
    if any(e <= 0 for e in s):
        raise ValueError(f"{op}: stride must be greater than zero, got {s}")
    if any(e <= 0 for e in d):
        raise ValueError(f"{op}: dilation must be greater than zero, got {d}")
    if any(e < 0 for e in p) or any(pp > kk // 2 for pp, kk in zip(p, k)):
        raise ValueError(f"{op}: padding should be at least 0 and at most half of the kernel "
                         f"size, got padding={p} and kernel_size={k}")
    o = tuple(_out_len(n, kk, ss, pp, dd, ceil_mode)
              for n, kk, ss, pp, dd in zip(spatial, k, s, p, d))
    if any(e <= 0 for e in o):
        raise RuntimeError(f"{op}: given input size {tuple(spatial)}, the calculated output size "
                           f"{o} is too small (kernel_size={k}, stride={s}, padding={p}, "
                           f"dilation={d})")
    return k, s, p, d, o


def _adaptive_size(op, nd, spatial, output_size):
    o = _ints(output_size, nd, "output_size", op, allow_none=True)
    o = tuple(n if e is None else e for e, n in zip(o, spatial))
    if any(e < 0 for e in o):
        raise RuntimeError(f"{op}: output_size must not be negative, got {o}")
    return o


def _empty_pool(input, lead, sp, o):
    """The result of an adaptive pool to an output size with a 0 (PyTorch returns an empty
    tensor): an empty narrow of the input, reshaped, so autograd gives the input a zero
    gradient without running a kernel over no windows."""
    x = input
    base = len(lead)
    for i, e in enumerate(o):
        if e == 0:
            x = x.narrow(base + i, 0, 0)
    return x.reshape(lead + o)


def _nplanes(lead):
    n = 1
    for e in lead:
        n *= e
    return n


def _grad(x):
    return G.state.enabled and isinstance(x, Tensor) and x.requires_grad


# ---- max pools -------------------------------------------------------------------------------

def _max_pool(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    lead, sp = _input(input, nd, op)
    k, s, p, d, o = _window_args(op, nd, sp, kernel_size, stride, padding, dilation, ceil_mode)
    grad = _grad(input)
    values, indices = _max_core(op, input, lead, sp, o, 0, k, s, p, d,
                                return_indices or grad)
    if grad:
        G.record(op, (values, indices), (input,),
                 {"kernel_size": k, "stride": s, "padding": p, "dilation": d,
                  "ceil_mode": bool(ceil_mode)})
    return (values, indices) if return_indices else values


def _native(be, dt):
    """Whether backend be pools 16-bit dtype dt as it is (no float32 copies around it)."""
    f = getattr(be, "pool_native", None)
    return f is not None and f(dt)


def _max_core(op, x, lead, sp, o, adaptive, k, s, p, d, want_indices=True):
    dt = x._dtype
    cd = _compute_dtype(dt)
    be = x._storage.backend
    if cd is not dt and not adaptive and _native(be, dt):
        cd = dt
    idx = new_empty(lead + o, D.int64, x._storage.device) if want_indices else None
    while True:
        xc = _plain(x, cd)
        out = new_empty(lead + o, cd, x._storage.device)
        rc = be.pool_max(adaptive, _nplanes(lead), _pad3(sp, 1), _pad3(o, 1), _pad3(k, 1),
                         _pad3(s, 1), _pad3(p, 0), _pad3(d, 1), xc, out, idx)
        if rc != K.ERR_DTYPE or cd is _compute_dtype(dt):
            break
        cd = _compute_dtype(dt)  # the 16-bit kernel declined: widen, as without it
    check(rc, op)
    return _finish_dtype(out, dt), idx


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pool over the last dim of a (C, L) or (N, C, L) tensor (``stride`` defaults to
    ``kernel_size``; ``padding`` is implicit -inf, at most half the kernel). With
    ``return_indices`` also the int64 positions of the maxima within each length-L row."""
    return _max_pool(ops.max_pool1d, 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pool over the last two dims of a (C, H, W) or (N, C, H, W) tensor.

    ``stride`` defaults to ``kernel_size``; ``padding`` (implicit -inf) is at most half the
    kernel; ``ceil_mode`` rounds the output size up (a window never starts in the right
    padding). With ``return_indices`` also returns the flat ``h * W + w`` int64 indices of the
    maxima, as ``max_unpool2d`` takes them.

    >>> import fiamma
    >>> x = fiamma.tensor([[[1.0, 2.0, 0.0], [4.0, 3.0, 9.0]]])
    >>> v, i = fiamma.max_pool2d(x, 2, stride=1, return_indices=True)
    >>> v.tolist(), i.tolist()
    ([[[4.0, 9.0]]], [[[3, 5]]])
    """
    return _max_pool(ops.max_pool2d, 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pool over the last three dims of a (C, D, H, W) or (N, C, D, H, W) tensor
    (flat ``d * H * W + h * W + w`` indices with ``return_indices``)."""
    return _max_pool(ops.max_pool3d, 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """``max_pool1d(..., return_indices=True)``: (values, indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """``max_pool2d(..., return_indices=True)``: (values, indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """``max_pool3d(..., return_indices=True)``: (values, indices)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _adaptive_max(op, nd, input, output_size, return_indices):
    lead, sp = _input(input, nd, op)
    o = _adaptive_size(op, nd, sp, output_size)
    if 0 in o:
        values = _empty_pool(input, lead, sp, o)
        indices = new_empty(lead + o, D.int64, input._storage.device)
        return (values, indices) if return_indices else values
    grad = _grad(input)
    values, indices = _max_core(op, input, lead, sp, o, 1, _ONE3, _ONE3, _ZERO3, _ONE3,
                                return_indices or grad)
    if grad:
        G.record(op, (values, indices), (input,), {"output_size": o})
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=True):
    """Max over ``output_size`` windows that tile the last dim (window o covers
    ``[floor(o*L/out), ceil((o+1)*L/out))``) and their positions: ``(values, indices)`` as
    ``torch.adaptive_max_pool1d`` returns them; ``return_indices=False``: the values only (as
    ``nn.functional.adaptive_max_pool1d``'s default)."""
    return _adaptive_max(ops.adaptive_max_pool1d, 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Adaptive max pool to ``output_size`` (an int, or (H, W) with None keeping that size).

    >>> import fiamma
    >>> fiamma.adaptive_max_pool2d(fiamma.arange(16.0).reshape(1, 4, 4), 1).tolist()
    [[[15.0]]]
    """
    return _adaptive_max(ops.adaptive_max_pool2d, 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Adaptive max pool over the last three dims."""
    return _adaptive_max(ops.adaptive_max_pool3d, 3, input, output_size, return_indices)


# ---- scatter by indices: max_unpool and the max-pool backward --------------------------------

def _scatter(op, src, indices, lead, size, accumulate):
    if not isinstance(indices, Tensor) or indices._dtype is not D.int64:
        raise TypeError(f"{op}: expected int64 indices, got "
                        f"{getattr(indices, 'dtype', type(indices).__name__)}")
    if indices._shape != src._shape:
        raise RuntimeError(f"{op}: expected indices of the input's shape {list(src._shape)}, "
                           f"got {list(indices._shape)}")
    dt = src._dtype
    cd = _compute_dtype(dt)
    be = src._storage.backend
    if cd is not dt and accumulate and _native(be, dt):
        cd = dt
    ic = _plain(indices, D.int64)
    n = _nplanes(lead)
    ssize = src._numel // n if n else 0
    dsize = _nplanes(size)
    bad = [0]
    while True:
        sc = _plain(src, cd)
        out = new_empty(tuple(lead) + tuple(size), cd, src._storage.device)
        rc = be.pool_scatter(accumulate, n, ssize, dsize, sc, ic, out, bad)
        if rc != K.ERR_DTYPE or cd is _compute_dtype(dt):
            break
        cd = _compute_dtype(dt)
    if rc == K.ERR_INDEX:
        raise IndexError(f"{op}: index {bad[0]} is out of range for an output plane of "
                         f"{dsize} elements (size {tuple(size)})")
    check(rc, op)
    return _finish_dtype(out, dt)


def max_pool_backward(grad_output, indices, input_size):
    """The gradient of a max pool w.r.t. its input: each plane of ``grad_output`` added into a
    zero plane of spatial size ``input_size`` at ``indices`` (the pool's indices). Its own
    derivative (w.r.t. ``grad_output``) gathers by the same indices."""
    op = ops.max_pool_backward
    size = _ints(tuple(input_size), len(input_size), "input_size", op)
    nd = len(size)
    if not isinstance(grad_output, Tensor) or grad_output.dim() < nd:
        raise RuntimeError(f"{op}: expected a gradient with at least {nd} dims")
    lead = grad_output._shape[:-nd]
    res = _scatter(op, grad_output, indices, lead, size, 1)
    if _grad(grad_output):
        G.record(op, res, (grad_output, indices, size), {})
    return res


def _max_unpool(op, nd, input, indices, kernel_size, stride, padding, output_size):
    lead, sp = _input(input, nd, op)
    k = _ints(kernel_size, nd, "kernel_size", op)
    s = k if stride is None else _ints(stride, nd, "stride", op)
    p = _ints(padding, nd, "padding", op)
    default = tuple((n - 1) * ss - 2 * pp + kk for n, kk, ss, pp in zip(sp, k, s, p))
    if output_size is None:
        size = default
    else:
        size = tuple(output_size)
        if len(size) in (nd + 1, nd + 2):
            size = size[-nd:]
        if len(size) != nd:
            raise ValueError(f"{op}: output_size must have {nd}, {nd + 1} or {nd + 2} "
                             f"elements, got {tuple(output_size)}")
        size = _ints(size, nd, "output_size", op)
        for e, dft, ss in zip(size, default, s):
            if not dft - ss < e < dft + ss:
                raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (each size "
                                 f"must be between {tuple(a - b for a, b in zip(default, s))} "
                                 f"and {tuple(a + b for a, b in zip(default, s))}, exclusive)")
    if any(e <= 0 for e in size):
        raise RuntimeError(f"{op}: the output size {size} is too small")
    res = _scatter(op, input, indices, lead, size, 0)
    if _grad(input):
        G.record(op, res, (input, indices), {"output_size": size})
    return res


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of ``max_pool1d``: a zero tensor with the values put back at their indices
    (default output length ``(L - 1) * stride - 2 * padding + kernel_size``)."""
    return _max_unpool(ops.max_unpool1d, 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of ``max_pool2d``: zeros except the values at the pool's flat indices.

    >>> import fiamma
    >>> x = fiamma.tensor([[[1.0, 2.0], [4.0, 3.0]]])
    >>> v, i = fiamma.max_pool2d(x, 2, return_indices=True)
    >>> fiamma.max_unpool2d(v, i, 2).tolist()
    [[[0.0, 0.0], [4.0, 0.0]]]
    """
    return _max_unpool(ops.max_unpool2d, 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of ``max_pool3d``."""
    return _max_unpool(ops.max_unpool3d, 3, input, indices, kernel_size, stride, padding,
                       output_size)


# ---- average pools ---------------------------------------------------------------------------

def _avg_run(op, backward, adaptive, src, lead, isz, osz, k, s, p, cip, divo):
    """Forward (src: input planes -> osz) or backward (src: gradient planes -> isz)."""
    dt = src._dtype
    f = getattr(src._storage.backend, "pool_avg_any", None)
    if f is not None:  # (cuda) one kernel over src as it is: any layout, 16-bit not widened
        out = new_empty(tuple(lead) + tuple(isz if backward else osz), dt, src._storage.device)
        if f(backward, adaptive, len(isz), src, out, _pad3(isz, 1), _pad3(osz, 1), _pad3(k, 1),
             _pad3(s, 1), _pad3(p, 0), int(bool(cip)), int(divo or 0)) == 0:
            return out
    cd = _compute_dtype(dt)
    sc = _plain(src, cd)
    out = new_empty(tuple(lead) + tuple(isz if backward else osz), cd, src._storage.device)
    be = out._storage.backend
    fn = be.pool_avg_backward if backward else be.pool_avg
    check(fn(adaptive, _nplanes(lead), _pad3(isz, 1), _pad3(osz, 1), _pad3(k, 1), _pad3(s, 1),
             _pad3(p, 0), int(bool(cip)), int(divo or 0), sc, out), op)
    return _finish_dtype(out, dt)


def _avg_pool(op, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    lead, sp = _input(input, nd, op)
    k, s, p, _, o = _window_args(op, nd, sp, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or int(divisor_override) != divisor_override:
            raise TypeError(f"{op}: divisor_override must be an int, got {divisor_override!r}")
        if divisor_override == 0:
            raise RuntimeError(f"{op}: divisor must be not zero")
        divisor_override = int(divisor_override)
        if divisor_override < 0:
            raise RuntimeError(f"{op}: divisor_override must be positive, got "
                               f"{divisor_override}")
    res = _avg_run(op, 0, 0, input, lead, sp, o, k, s, p, count_include_pad, divisor_override)
    if _grad(input):
        G.record(op, res, (input,),
                 {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
                  "count_include_pad": bool(count_include_pad),
                  "divisor_override": divisor_override})
    return res


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, *, divisor_override=None):
    """1-d average pool over the last dim (``stride`` defaults to ``kernel_size``; zero padding
    counted in the divisor unless ``count_include_pad=False``)."""
    return _avg_pool(ops.avg_pool1d, 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pool over the last two dims of a (C, H, W) or (N, C, H, W) tensor.

    Each window's sum is divided by ``divisor_override`` if given, else by the window size
    including zero padding (``count_include_pad=True``) or by the number of input elements in
    it. ``ceil_mode`` rounds the output size up.

    >>> import fiamma
    >>> fiamma.avg_pool2d(fiamma.arange(16.0).reshape(1, 4, 4), 2).tolist()
    [[[2.5, 4.5], [10.5, 12.5]]]
    """
    return _avg_pool(ops.avg_pool2d, 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-d average pool over the last three dims."""
    return _avg_pool(ops.avg_pool3d, 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool_backward(grad_output, input_size, kernel_size, stride, padding, ceil_mode=False,
                      count_include_pad=True, divisor_override=None):
    """The gradient of an average pool w.r.t. its input (spatial size ``input_size``): each
    output's gradient spread evenly over its window. Linear; its derivative is the pool."""
    op = ops.avg_pool_backward
    nd = len(input_size)
    lead, o = grad_output._shape[:-nd], grad_output._shape[-nd:]
    sp = _ints(tuple(input_size), nd, "input_size", op)
    k, s, p, _, o2 = _window_args(op, nd, sp, kernel_size, stride, padding, 1, ceil_mode)
    if o2 != tuple(o):
        raise RuntimeError(f"{op}: expected a gradient of spatial size {o2}, got {tuple(o)}")
    res = _avg_run(op, 1, 0, grad_output, lead, sp, o, k, s, p, count_include_pad,
                   divisor_override)
    if _grad(grad_output):
        G.record(op, res, (grad_output, sp),
                 {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": bool(ceil_mode),
                  "count_include_pad": bool(count_include_pad),
                  "divisor_override": divisor_override})
    return res


def _adaptive_avg(op, nd, input, output_size):
    lead, sp = _input(input, nd, op)
    o = _adaptive_size(op, nd, sp, output_size)
    if 0 in o:
        return _empty_pool(input, lead, sp, o)
    res = _avg_run(op, 0, 1, input, lead, sp, o, _ONE3, _ONE3, _ZERO3, True, None)
    if _grad(input):
        G.record(op, res, (input,), {"output_size": o})
    return res


def adaptive_avg_pool1d(input, output_size):
    """Mean over ``output_size`` windows tiling the last dim (window o covers
    ``[floor(o*L/out), ceil((o+1)*L/out))``)."""
    return _adaptive_avg(ops.adaptive_avg_pool1d, 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Adaptive average pool to ``output_size`` (int or (H, W); None keeps that size).

    >>> import fiamma
    >>> fiamma.adaptive_avg_pool2d(fiamma.ones(2, 3, 5, 5), 1).shape
    fiamma.Size([2, 3, 1, 1])
    """
    return _adaptive_avg(ops.adaptive_avg_pool2d, 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """Adaptive average pool over the last three dims."""
    return _adaptive_avg(ops.adaptive_avg_pool3d, 3, input, output_size)


def adaptive_avg_pool_backward(grad_output, input_size):
    """The gradient of an adaptive average pool w.r.t. its input (spatial ``input_size``)."""
    op = ops.adaptive_avg_pool_backward
    nd = len(input_size)
    sp = _ints(tuple(input_size), nd, "input_size", op)
    lead, o = grad_output._shape[:-nd], grad_output._shape[-nd:]
    res = _avg_run(op, 1, 1, grad_output, lead, sp, o, _ONE3, _ONE3, _ZERO3, True, None)
    if _grad(grad_output):
        G.record(op, res, (grad_output, sp), {})
    return res


# ---- Lp pools (composed, so autograd comes from the parts) ----------------------------------

def _lp_pool(op, nd, input, norm_type, kernel_size, stride, ceil_mode):
    import fiamma as E

    k = _ints(kernel_size, nd, "kernel_size", op)
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[nd - 1]
    out = pool(E.pow(input, norm_type), k, stride, 0, ceil_mode)
    n = 1
    for e in k:
        n *= e
    return E.pow(E.mul(E.mul(E.sign(out), E.relu(E.abs(out))), n), 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pool: ``(sum over the window of x**p) ** (1/p)`` over the last dim."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-d power-average pool: ``(sum over the window of x**p) ** (1/p)``.

    >>> import fiamma
    >>> fiamma.lp_pool2d(fiamma.ones(1, 2, 2), 2, 2).tolist()
    [[[2.0]]]
    """
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-d power-average pool."""
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)
