"""Reductions, cumulative scans and softmax with PyTorch's names and semantics.

Every reduction takes ``dim`` as None (all dimensions), an int or a tuple of ints (negative ok),
``keepdim`` and, where PyTorch has them, ``dtype=`` and ``out=``. The C kernel (csrc/reduce.c)
reduces any set of dimensions of a strided tensor in one call and writes its result in the
accumulator dtype (int64 for integer sums, float32 for the 16-bit floats); this module picks the
op, checks arguments, and casts the result to PyTorch's result dtype.

>>> import fiamma
>>> x = fiamma.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
>>> x.sum(1).tolist(), x.max(dim=1).indices.tolist()
([9.0, 12.0], [1, 2])
"""

import builtins
import collections

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K, cpu as _cpu
from fiamma._ops._common import cast, check_out
from fiamma._storage import CPU
from fiamma._tensor import (
    Tensor,
    _copy_into,
    contiguous_strides,
    new_empty,
    wrap_dim,
)

__all__ = [
    "all",
    "amax",
    "amin",
    "aminmax",
    "any",
    "argmax",
    "argmin",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "log_softmax",
    "logsumexp",
    "max",
    "mean",
    "min",
    "nanmean",
    "nansum",
    "norm",
    "prod",
    "return_types",
    "softmax",
    "std",
    "std_mean",
    "sum",
    "var",
    "var_mean",
]

_tuple_new = tuple.__new__
_INF = float("inf")

# C output dtype of every (op, dtype), -1 where unsupported
_OUT = [[_cpu.reduce_out_dtype(op, d) for d in range(K.NDTYPES)]
        for op in range(K.NRED)]
_SUM = K.RED_SUM


class return_types:
    """Named result tuples, like ``torch.return_types`` (``values, indices = x.max(0)``)."""

    max = collections.namedtuple("max", ["values", "indices"])
    min = collections.namedtuple("min", ["values", "indices"])
    aminmax = collections.namedtuple("aminmax", ["min", "max"])


class EmptyReductionError(IndexError, RuntimeError):
    """A reduction without an identity (max, argmax, ...) over an empty dimension."""


# ---- helpers ---------------------------------------------------------------------------------

def _check_tensor(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor as input, got {type(x).__name__}")


def _mask(dim, nd, name):
    """The bit mask of reduced dims for ``dim`` None / int / sequence (empty means all)."""
    if dim is None:
        return (1 << nd) - 1
    if type(dim) is int and -nd <= dim < nd:
        return 1 << (dim + nd if dim < 0 else dim)
    if isinstance(dim, (tuple, list)):
        if not dim:
            return (1 << nd) - 1
        m = 0
        for d in dim:
            w = wrap_dim(d, nd, name)
            if nd and m >> w & 1:
                raise RuntimeError(f"{name}: dim {w} appears multiple times in the list of dims")
            m |= 1 << w
        return m if nd else 0
    d = wrap_dim(dim, nd, name)
    return (1 << d) if nd else 0


def _dims_of(mask, nd):
    return tuple(d for d in range(nd) if mask >> d & 1)


def _reduced_count(x, mask):
    n = 1
    for d, s in enumerate(x._shape):
        if mask >> d & 1:
            n *= s
    return n


def _out_shape(shape, mask, keepdim):
    if keepdim:
        return tuple([1 if mask >> d & 1 else n for d, n in enumerate(shape)])
    return tuple([n for d, n in enumerate(shape) if not mask >> d & 1])


_LAYOUTS = {}


def _layout(shape, mask, keepdim):
    """(result shape, the result's contiguous strides spread over the input's ndim with 0 at
    reduced dims), cached: ops on the same shapes repeat."""
    key = (shape, mask, keepdim)
    r = _LAYOUTS.get(key)
    if r is None:
        oshape = _out_shape(shape, mask, keepdim)
        ost = iter(contiguous_strides(oshape))
        so = tuple([0 if (mask >> d & 1 and not keepdim) else next(ost)
                    for d in range(len(shape))])
        r = (oshape, so)
        if len(_LAYOUTS) < 4096:
            _LAYOUTS[key] = r
    return r


def _unsupported(name, dt):
    raise TypeError(f"{name}: not implemented for dtype {dt}")


def _raise(rc, name, x):
    if rc == K.ERR_DTYPE:
        _unsupported(name, x._dtype)
    if rc == K.ERR_VALUE:
        raise EmptyReductionError(f"{name}: the reduction has no identity and a reduced "
                                  "dimension is empty")
    check(rc, name)


def _require_nonempty(x, mask, name):
    """max/argmax/... have no identity: PyTorch refuses empty reduced dims."""
    if x._numel:
        return
    if mask == (1 << len(x._shape)) - 1:
        raise EmptyReductionError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument.")
    for d, s in enumerate(x._shape):
        if mask >> d & 1 and s == 0:
            raise EmptyReductionError(
                f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _run(code, name, x, mask, keepdim, p=0.0, center=None):
    """Run C reduction ``code`` of ``x`` over the dims in ``mask``: a new tensor in the C output
    dtype (``center``: the per-output operand of var/std/logsumexp, keepdim-shaped)."""
    dt = x._dtype
    if dt._kind == 3 and code in _CX_RED:
        return _run_complex(code, x, mask, keepdim)
    odc = _OUT[code][dt.code]
    if odc < 0:
        _unsupported(name, dt)
    oshape, so = _layout(x._shape, mask, keepdim)
    res = new_empty(oshape, D.BY_CODE[odc], x._storage.device)
    if res._numel:
        rc = res._storage.backend.reduce(code, x, mask, res, so, center,
                                         None if center is None else center._stride, p)
        if rc:
            _raise(rc, name, x)
    return res


# complex reductions: computed by the device's array module (pairwise sums, as NumPy)
_CX_RED = {K.RED_SUM: "sum", K.RED_PROD: "prod", K.RED_MEAN: "mean", K.RED_NANSUM: "nansum"}


def _run_complex(code, x, mask, keepdim):
    from fiamma._ops.complex_ops import arr, xp_of

    oshape, _ = _layout(x._shape, mask, keepdim)
    res = new_empty(oshape, x._dtype, x._storage.device)
    if res._numel:
        axes = tuple(d for d in range(len(x._shape)) if mask >> d & 1)
        v = getattr(xp_of(x), _CX_RED[code])(arr(x), axis=axes, keepdims=keepdim)
        arr(res)[...] = v
    return res


def _to(res, dt):
    return res if res._dtype is dt else cast(res, dt)


def _finish(res, out, name, x, mask, keepdim, **extra):
    """Copy into ``out`` if given; record for autograd if ``x`` requires grad."""
    if out is not None:
        check_out(out, res._shape, res._dtype, name)
        _copy_into(out, res)
        res = out
    if x.requires_grad:
        G.record(name, res, (x,), {"dim": _dims_of(mask, len(x._shape)), "keepdim": keepdim,
                                   **extra})
    return res


def _dtype_arg(dtype, name):
    return None if dtype is None else D.to_dtype(dtype, name)


# ---- sums and products -----------------------------------------------------------------------

def _sum_like(code, name, input, dim, keepdim, dtype, out):
    _check_tensor(input, name)
    dt = _dtype_arg(dtype, name)
    x = input if dt is None else cast(input, dt)
    rdt = dt or (D.int64 if x._dtype._kind < 2 else x._dtype)
    if (dim is None and not keepdim and out is None and x._cpu_contig and
            not input.requires_grad):
        # the common x.sum() on the CPU: one C call over contiguous memory
        odc = _OUT[code][x._dtype.code]
        if odc >= 0:  # (complex: below)
            res = new_empty((), D.BY_CODE[odc], CPU)
            rc = _cpu.reduce_all(code, x, res)
            if rc:
                _raise(rc, name, x)
            return _to(res, rdt)
    mask = _mask(dim, len(x._shape), name)
    res = _to(_run(code, name, x, mask, keepdim), rdt)
    if out is None and not input.requires_grad:
        return res
    return _finish(res, out, name, input, mask, keepdim, dtype=dt)


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum of elements over ``dim`` (None: all). Integer and bool inputs sum to int64 unless
    ``dtype`` is given (the input is cast to ``dtype`` first). Floating sums are pairwise.

    >>> import fiamma
    >>> fiamma.tensor([[1, 2], [3, 4]]).sum(0).tolist()
    [4, 6]
    """
    if type(input) is not Tensor and getattr(input, "_layout_alt", False):
        if out is not None:
            raise NotImplementedError("sum: out= is not supported for sparse or nested tensors")
        if input.is_nested:
            return input.sum(dim, keepdim, dtype=dtype)
        from fiamma._sparse_ops import sparse_sum

        return sparse_sum(input, dim, keepdim, dtype=dtype)
    return _sum_like(_SUM, ops.sum, input, dim, keepdim, dtype, out)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum treating NaN as zero."""
    return _sum_like(K.RED_NANSUM, ops.nansum, input, dim, keepdim, dtype, out)


def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Product of elements over ``dim`` (integers and bool give int64, wrapping on overflow)."""
    return _sum_like(K.RED_PROD, ops.prod, input, dim, keepdim, dtype, out)


def _mean_input(input, dtype, name):
    _check_tensor(input, name)
    dt = _dtype_arg(dtype, name)
    if dt is not None:
        if dt._kind < 2:
            raise RuntimeError(f"{name}(): could not infer output dtype. Optional dtype must be "
                               f"either a floating point or complex dtype. Got: {dt}")
        return cast(input, dt), dt
    if input._dtype._kind < 2:
        raise RuntimeError(f"{name}(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {input._dtype}")
    return input, None


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Arithmetic mean over ``dim``; needs a floating input or ``dtype``.

    >>> import fiamma
    >>> fiamma.tensor([1.0, 2.0, 6.0]).mean().item()
    3.0
    """
    x, dt = _mean_input(input, dtype, "mean")
    mask = _mask(dim, len(x._shape), "mean")
    res = _to(_run(K.RED_MEAN, "mean", x, mask, keepdim), x._dtype)
    if out is None and not input.requires_grad:
        return res
    return _finish(res, out, ops.mean, input, mask, keepdim, dtype=dt)


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean of the non-NaN elements (NaN where all are NaN)."""
    from fiamma._ops.elementwise import div

    _check_tensor(input, "nanmean")
    if input._dtype._kind != 2 and dtype is None:
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{input._dtype}")
    x, dt = _mean_input(input, dtype, "nanmean")
    mask = _mask(dim, len(x._shape), "nanmean")
    total = _run(K.RED_NANSUM, "nanmean", x, mask, keepdim)
    count = _run(K.RED_NANCOUNT, "nanmean", x, mask, keepdim)
    res = _to(div(total, count), x._dtype)
    return _finish(res, out, ops.nanmean, input, mask, keepdim, dtype=dt)


# ---- max / min / argmax ----------------------------------------------------------------------

def _extreme(code, arg_code, name, pair, input, dim, keepdim, out):
    """max/min: no dim -> 0-d tensor; dim -> (values, indices); a tensor -> maximum/minimum."""
    if isinstance(dim, Tensor):
        from fiamma._ops import elementwise as E

        fn = E.maximum if code == K.RED_MAX else E.minimum
        return fn(input, dim) if out is None else fn(input, dim, out=out)
    _check_tensor(input, name)
    nd = len(input._shape)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}(): keepdim needs dim")
        mask = (1 << nd) - 1
        _require_nonempty(input, mask, name)
        res = _run(code, name, input, mask, False)
        if out is None and not input.requires_grad:
            return res
        return _finish(res, out, name, input, mask, False)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}(): dim must be an int, got {type(dim).__name__} (use "
                        f"a{name}() to reduce several dims)")
    mask = _mask(dim, nd, name)
    _require_nonempty(input, mask, name)
    values, indices = _arg_run(arg_code, name, input, mask, keepdim, True)
    res = _tuple_new(pair, (values, indices))
    if out is not None:
        ov, oi = out
        check_out(ov, values._shape, values._dtype, name)
        check_out(oi, indices._shape, indices._dtype, name)
        _copy_into(ov, values)
        _copy_into(oi, indices)
        res = pair(ov, oi)
    if input.requires_grad:
        G.record(name, res, (input,), {"dim": mask.bit_length() - 1 if mask else 0,
                                       "keepdim": keepdim})
    return res


def _arg_run(code, name, x, mask, keepdim, want_values):
    dev = x._storage.device
    oshape, so = _layout(x._shape, mask, keepdim)
    idx = new_empty(oshape, D.int64, dev)
    values = new_empty(oshape, x._dtype, dev) if want_values else None
    if idx._numel:
        rc = idx._storage.backend.reduce(code, x, mask, values, so, idx, so, 0.0)
        if rc:
            _raise(rc, name, x)
    return values, idx


def max(input, dim=None, keepdim=False, *, out=None):
    """The largest element (0-d tensor); with ``dim`` a named tuple ``(values, indices)`` (first
    occurrence on ties); with a tensor as second argument the elementwise maximum. NaN
    propagates.

    >>> import fiamma
    >>> v, i = fiamma.tensor([[1, 7, 7], [9, 0, 2]]).max(1)
    >>> v.tolist(), i.tolist()
    ([7, 9], [1, 0])
    """
    return _extreme(K.RED_MAX, K.RED_ARGMAX, ops.max, return_types.max, input, dim,
                    keepdim, out)


def min(input, dim=None, keepdim=False, *, out=None):
    """The smallest element; see ``max`` for the forms."""
    return _extreme(K.RED_MIN, K.RED_ARGMIN, ops.min, return_types.min, input, dim,
                    keepdim, out)


def _amax_like(code, name, input, dim, keepdim, out):
    _check_tensor(input, name)
    mask = _mask(dim, len(input._shape), name)
    _require_nonempty(input, mask, name)
    res = _run(code, name, input, mask, keepdim)
    if out is None and not input.requires_grad:
        return res
    return _finish(res, out, name, input, mask, keepdim)


def amax(input, dim=(), keepdim=False, *, out=None):
    """Maximum over ``dim`` (an int or a tuple; () or None: all dims), values only."""
    return _amax_like(K.RED_MAX, ops.amax, input, dim, keepdim, out)


def amin(input, dim=(), keepdim=False, *, out=None):
    """Minimum over ``dim`` (an int or a tuple; () or None: all dims), values only."""
    return _amax_like(K.RED_MIN, ops.amin, input, dim, keepdim, out)


def _argext(code, name, input, dim, keepdim):
    _check_tensor(input, name)
    nd = len(input._shape)
    if dim is None:
        if input._numel == 0:
            raise EmptyReductionError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        x = input.contiguous()
        flat = x._view((x._numel,), (1,), op=ops.view) if nd != 1 else x
        _, idx = _arg_run(code, name, flat, 1, False, False)
        if keepdim:
            idx = idx._view((1,) * nd, (1,) * nd, op=ops.view)
        return idx
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{name}(): dim must be an int or None, got {type(dim).__name__}")
    mask = _mask(dim, nd, name)
    _require_nonempty(input, mask, name)
    return _arg_run(code, name, input, mask, keepdim, False)[1]


def argmax(input, dim=None, keepdim=False):
    """Index of the largest element along ``dim`` (None: of the flattened tensor); the first
    occurrence wins ties, a NaN wins over numbers.

    >>> import fiamma
    >>> fiamma.tensor([[3, 9, 9], [4, 1, 0]]).argmax(dim=1).tolist()
    [1, 0]
    """
    return _argext(K.RED_ARGMAX, "argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the smallest element along ``dim`` (None: of the flattened tensor)."""
    return _argext(K.RED_ARGMIN, "argmin", input, dim, keepdim)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """``(min, max)`` over ``dim`` (None: all) as a named tuple."""
    _check_tensor(input, "aminmax")
    nd = len(input._shape)
    mask = (1 << nd) - 1 if dim is None else _mask(dim, nd, "aminmax")
    if _reduced_count(input, mask) == 0:
        raise EmptyReductionError("aminmax(): cannot compute aminmax over an empty dimension as "
                                  "the operation has no identity.")
    lo = _run(K.RED_MIN, "aminmax", input, mask, keepdim)
    hi = _run(K.RED_MAX, "aminmax", input, mask, keepdim)
    res = return_types.aminmax(lo, hi)
    if out is not None:
        for o, r in zip(out, res):
            check_out(o, r._shape, r._dtype, "aminmax")
            _copy_into(o, r)
        res = return_types.aminmax(*out)
    if input.requires_grad:
        G.record(ops.aminmax, res, (input,), {"dim": dim, "keepdim": keepdim})
    return res


# ---- variance, norms, logsumexp --------------------------------------------------------------

def _correction(name, unbiased, correction):
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}(): cannot specify both unbiased and correction")
    if correction is not None:
        return builtins.float(correction)
    return 1.0 if unbiased is None or unbiased else 0.0


def _var_core(name, input, dim, unbiased, keepdim, correction, want_mean):
    _check_tensor(input, name)
    if isinstance(dim, builtins.bool):  # var(x, True): the legacy unbiased argument
        dim, unbiased = None, dim
    if input._dtype._kind == 3:
        return _var_complex(name, input, dim, unbiased, keepdim, correction, want_mean)
    if input._dtype._kind != 2:
        raise RuntimeError(f"{name}(): std and var only support floating point dtypes, got "
                           f"{input._dtype}")
    corr = _correction(name, unbiased, correction)
    nd = len(input._shape)
    mask = _mask(dim, nd, name)
    center = _run(K.RED_MEAN, name, input, mask, True)
    code = K.RED_STD if name.startswith("std") else K.RED_VAR
    res = _to(_run(code, name, input, mask, keepdim, corr, center), input._dtype)
    m = None
    if want_mean:
        m = _to(center, input._dtype)
        if not keepdim:
            m = m._view(res._shape, res._stride, op=ops.view)
    return res, m, {"mask": mask, "correction": corr}


def _var_complex(name, input, dim, unbiased, keepdim, correction, want_mean):
    """var/std of complex values: real, the sum of the parts' variances (the mean squared
    magnitude of the deviations, as PyTorch)."""
    from fiamma._ops.complex_ops import imag_, real_

    vname = name.replace("std", "var")
    vr, _, info = _var_core(vname, real_(input), dim, unbiased, keepdim, correction, False)
    vi, _, _ = _var_core(vname, imag_(input), dim, unbiased, keepdim, correction, False)
    res = vr + vi
    if name.startswith("std"):
        res = res.sqrt()
    m = _run_complex(K.RED_MEAN, input, info["mask"], keepdim) if want_mean else None
    return res, m, info


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Variance over ``dim`` with ``correction`` (default 1: Bessel's; ``unbiased=False`` is
    correction 0). Computed in two passes (mean, then squared deviations).

    >>> import fiamma
    >>> fiamma.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
    1.6666666269302368
    """
    res, _, kw = _var_core("var", input, dim, unbiased, keepdim, correction, False)
    return _finish(res, out, ops.var, input, kw["mask"], keepdim, correction=kw["correction"])


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Standard deviation over ``dim`` (see ``var``)."""
    res, _, kw = _var_core("std", input, dim, unbiased, keepdim, correction, False)
    return _finish(res, out, ops.std, input, kw["mask"], keepdim, correction=kw["correction"])


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``."""
    res, m, kw = _var_core("var_mean", input, dim, unbiased, keepdim, correction, True)
    if input.requires_grad:
        G.record(ops.var_mean, (res, m), (input,), {"dim": _dims_of(kw["mask"], len(input._shape)),
                                                  "correction": kw["correction"],
                                                  "keepdim": keepdim})
    return res, m


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``."""
    res, m, kw = _var_core("std_mean", input, dim, unbiased, keepdim, correction, True)
    if input.requires_grad:
        G.record(ops.std_mean, (res, m), (input,), {"dim": _dims_of(kw["mask"], len(input._shape)),
                                                  "correction": kw["correction"],
                                                  "keepdim": keepdim})
    return res, m


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """Vector norm over ``dim`` (None: all elements): ``p`` is 'fro' (= 2), a number, inf or
    -inf (max / min of absolute values) or 0 (count of non-zeros).

    >>> import fiamma
    >>> fiamma.tensor([3.0, 4.0]).norm().item()
    5.0
    """
    _check_tensor(input, "norm")
    if p is None:  # PyTorch's parser: None is the 2-norm
        p = 2
    dt = _dtype_arg(dtype, "norm")
    x = input if dt is None else cast(input, dt)
    if x._dtype._kind == 3:  # the norm of complex values is the norm of their magnitudes
        return norm(x.abs(), p, dim, keepdim, out)
    if x._dtype._kind != 2:
        raise RuntimeError(f"norm(): input dtype should be floating point, got {x._dtype}")
    nd = len(x._shape)
    if isinstance(p, str):
        if p == "nuc":  # matrix norm: computed by fiamma.linalg (SVD through NumPy)
            from fiamma.linalg import matrix_norm

            return matrix_norm(input, "nuc", (-2, -1) if dim is None else builtins.tuple(dim),
                               keepdim, dtype=dtype, out=out)
        if p != "fro":
            raise ValueError(f"norm(): unsupported norm type {p!r}")
        if isinstance(dim, (tuple, list)) and len(dim) > 2:
            raise RuntimeError(f"norm(): p='fro' expects at most 2 dims, got {tuple(dim)}")
        p = 2.0
    p = builtins.float(p)
    if p == _INF:
        code = K.RED_NORMINF
    elif p == -_INF:
        code = K.RED_NORMNINF
    else:
        code = {0.0: K.RED_NORM0, 1.0: K.RED_NORM1,
                2.0: K.RED_NORM2}.get(p, K.RED_NORMP)
    mask = _mask(dim, nd, "norm")
    if code in (K.RED_NORMINF, K.RED_NORMNINF) and _reduced_count(x, mask) == 0:
        raise EmptyReductionError(f"norm(): cannot compute the {p} norm on an empty tensor "
                                  "because the operation does not have an identity")
    res = _to(_run(code, "norm", x, mask, keepdim, p), x._dtype)
    return _finish(res, out, ops.norm, input, mask, keepdim, p=p, dtype=dt)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """``log(sum(exp(x)))`` over ``dim``, computed stably (shifted by the max). Integer inputs
    are computed in the default float dtype."""
    _check_tensor(input, "logsumexp")
    if input._dtype._kind == 3:
        return _logsumexp_complex(input, dim, keepdim, out)
    x = input if input._dtype._kind == 2 else cast(input, D.get_default_dtype())
    nd = len(x._shape)
    mask = _mask(dim, nd, "logsumexp")
    if _reduced_count(x, mask) == 0:
        from fiamma._creation import full

        res = full(_out_shape(x._shape, mask, keepdim), -_INF, dtype=x._dtype)
    else:
        center = _to(_run(K.RED_MAX, "logsumexp", x, mask, True),
                     D.BY_CODE[_OUT[K.RED_LSE][x._dtype.code]])
        res = _to(_run(K.RED_LSE, "logsumexp", x, mask, keepdim, 0.0, center), x._dtype)
    return _finish(res, out, ops.logsumexp, input, mask, keepdim)


def _logsumexp_complex(z, dim, keepdim, out):
    """log(sum(exp(z))) of complex values (the principal log, as PyTorch), shifted by the
    largest real part; composed of differentiable ops."""
    from fiamma._ops.elementwise import where

    nd = len(z._shape)
    dims = tuple(range(nd)) if dim is None or dim == () else \
        ((dim,) if isinstance(dim, int) else tuple(dim))
    m = z.detach().real.amax(dims, keepdim=True) if z._numel else None
    if m is not None:
        m = where(m.isfinite(), m, 0.0)
        res = (z - m).exp().sum(dims, keepdim=True).log() + m
    else:
        res = z.sum(dims, keepdim=True).log()
    if not keepdim:
        res = res.squeeze(dims) if nd else res
    if out is not None:
        out.copy_(res)
        return out
    return res


# ---- logical reductions, counts ---------------------------------------------------------------

def _logical(code, name, input, dim, keepdim, out):
    _check_tensor(input, name)
    nd = len(input._shape)
    mask = _mask(dim, nd, name)
    x = input != 0 if input._dtype._kind == 3 else input  # complex: nonzero if either part is
    res = _run(code, name, x, mask, keepdim)
    if input._dtype is D.uint8:  # PyTorch keeps uint8 for uint8 input
        res = res._view_dtype(D.uint8)
    return _finish(res, out, name, input, mask, keepdim)


def all(input, dim=None, keepdim=False, *, out=None):
    """Whether every element over ``dim`` is non-zero (bool; uint8 for uint8 input)."""
    return _logical(K.RED_ALL, ops.all, input, dim, keepdim, out)


def any(input, dim=None, keepdim=False, *, out=None):
    """Whether some element over ``dim`` is non-zero (bool; uint8 for uint8 input)."""
    return _logical(K.RED_ANY, ops.any, input, dim, keepdim, out)


def count_nonzero(input, dim=None):
    """Number of non-zero elements over ``dim`` (int64)."""
    _check_tensor(input, "count_nonzero")
    mask = _mask(dim, len(input._shape), "count_nonzero")
    x = input != 0 if input._dtype._kind == 3 else input
    return _run(K.RED_COUNTNZ, "count_nonzero", x, mask, False)


# ---- cumulative scans ------------------------------------------------------------------------

def _scan(code, name, input, dim, dtype, out):
    _check_tensor(input, name)
    dt = _dtype_arg(dtype, name)
    x = input if dt is None else cast(input, dt)
    nd = len(x._shape)
    d = wrap_dim(dim, nd, name)
    if x._dtype._kind == 3:  # complex: the device's array module
        from fiamma._ops.complex_ops import arr, xp_of

        odt = x._dtype
        res = new_empty(x._shape, odt, x._storage.device)
        if res._numel:
            fn = xp_of(x).cumsum if code == K.SCAN_CUMSUM else xp_of(x).cumprod
            arr(res)[...] = fn(arr(x), axis=d if nd else None).reshape(x._shape)
    else:
        odt = D.BY_CODE[_cpu.scan_out_dtype(code, x._dtype.code)]
        res = new_empty(x._shape, odt, x._storage.device)
        if res._numel:
            rc = res._storage.backend.scan(code, x, res, d)
            if rc:
                _raise(rc, name, x)
    res = _to(res, dt or odt)
    if out is not None:
        check_out(out, res._shape, res._dtype, name)
        _copy_into(out, res)
        res = out
    if input.requires_grad:
        G.record(name, res, (input,), {"dim": d, "dtype": dt})
    return res


def cumsum(input, dim, *, dtype=None, out=None):
    """Inclusive cumulative sum along ``dim`` (integers and bool give int64).

    >>> import fiamma
    >>> fiamma.tensor([1, 2, 3]).cumsum(0).tolist()
    [1, 3, 6]
    """
    return _scan(K.SCAN_CUMSUM, ops.cumsum, input, dim, dtype, out)


def cumprod(input, dim, *, dtype=None, out=None):
    """Inclusive cumulative product along ``dim`` (integers and bool give int64)."""
    return _scan(K.SCAN_CUMPROD, ops.cumprod, input, dim, dtype, out)


# ---- softmax ---------------------------------------------------------------------------------

def _softmax(log, name, input, dim, dtype):
    _check_tensor(input, name)
    dt = _dtype_arg(dtype, name)
    x = input if dt is None else cast(input, dt)
    nd = len(x._shape)
    if dim is None:  # PyTorch's legacy implicit dim
        dim = 0 if nd in (0, 1, 3) else 1
    d = wrap_dim(dim, nd, name)
    if x._dtype._kind != 2:
        raise TypeError(f"{name}: not implemented for dtype {x._dtype} (pass a floating dtype= "
                        "or convert the input)")
    res = new_empty(x._shape, x._dtype, x._storage.device)
    if res._numel:
        rc = res._storage.backend.softmax(log, x, res, d)
        if rc:
            _raise(rc, name, x)
    if input.requires_grad:
        G.record(name, res, (input,), {"dim": d, "dtype": dt})
    return res


def softmax(input, dim=None, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim``, computed stably in one fused pass per row.

    >>> import fiamma
    >>> [round(v, 4) for v in fiamma.tensor([1.0, 2.0, 3.0]).softmax(0).tolist()]
    [0.09, 0.2447, 0.6652]
    """
    return _softmax(0, ops.softmax, input, dim, dtype)


def log_softmax(input, dim=None, dtype=None):
    """``x - logsumexp(x)`` along ``dim`` (fused, numerically stable)."""
    return _softmax(1, ops.log_softmax, input, dim, dtype)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "sum": sum, "nansum": nansum, "prod": prod, "mean": mean, "nanmean": nanmean,
    "max": max, "min": min, "amax": amax, "amin": amin, "argmax": argmax, "argmin": argmin,
    "aminmax": aminmax, "std": std, "var": var, "norm": norm, "logsumexp": logsumexp,
    "all": all, "any": any, "count_nonzero": count_nonzero, "cumsum": cumsum,
    "cumprod": cumprod, "softmax": softmax, "log_softmax": log_softmax,
}
