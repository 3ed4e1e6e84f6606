"""Manipulation and indexing functions of the array API standard."""

import builtins
import operator

import fiamma
from fiamma.array_api._dtypes import check_array, promote

__all__ = [
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    "take", "take_along_axis",
]


def _common(arrays, op):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{op}: expected at least one array")
    d = check_array(arrays[0], op)._dtype
    for a in arrays[1:]:
        d = promote(d, check_array(a, op)._dtype)
    return [a if a._dtype is d else a.to(d) for a in arrays]


def _axis(axis, ndim, op):
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise IndexError(f"{op}: axis {axis} is out of range for an array of {ndim} dimensions")
    return a % ndim if ndim else 0


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other (a list of views)."""
    return list(fiamma.broadcast_tensors(*[check_array(a, "broadcast_arrays") for a in arrays]))


def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape`` (a view)."""
    return fiamma.broadcast_to(check_array(x, "broadcast_to"), tuple(shape))


def concat(arrays, /, *, axis=0):
    """The arrays joined along ``axis`` (flattened first when ``axis=None``), promoted to
    their common dtype.

    >>> import fiamma.array_api as xp
    >>> xp.concat([xp.asarray([[1]]), xp.asarray([[2.5]])], axis=None).tolist()
    [1.0, 2.5]
    """
    arrays = _common(arrays, "concat")
    if axis is None:
        return fiamma.cat([a.reshape(-1) for a in arrays])
    return fiamma.cat(arrays, dim=axis)


def stack(arrays, /, *, axis=0):
    """The arrays (of one shape) joined along a new ``axis``, promoted to their common dtype."""
    return fiamma.stack(_common(arrays, "stack"), dim=axis)


def unstack(x, /, *, axis=0):
    """A tuple of the slices of ``x`` along ``axis``."""
    check_array(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack: the array must have at least one dimension")
    return tuple(fiamma.unbind(x, _axis(axis, x.ndim, "unstack")))


def expand_dims(x, /, axis=0):
    """``x`` with a new axis of size 1 at ``axis`` (in ``[-ndim-1, ndim]``).

    >>> import fiamma.array_api as xp
    >>> tuple(xp.expand_dims(xp.asarray([1, 2]), axis=-1).shape)
    (2, 1)
    """
    check_array(x, "expand_dims")
    nd = x.ndim
    if not -nd - 1 <= axis <= nd:
        raise IndexError(f"expand_dims: axis {axis} is out of range for an array of {nd} "
                         "dimensions")
    return x.unsqueeze(axis)


def flip(x, /, *, axis=None):
    """``x`` with the order of elements reversed along ``axis`` (all axes when None)."""
    check_array(x, "flip")
    if axis is None:
        axis = tuple(range(x.ndim))
    elif isinstance(axis, builtins.int):
        axis = (axis,)
    return fiamma.flip(x, tuple(_axis(a, x.ndim, "flip") for a in axis))


def moveaxis(x, source, destination, /):
    """``x`` with axes moved from ``source`` to ``destination`` (ints or tuples)."""
    return fiamma.moveaxis(check_array(x, "moveaxis"), source, destination)


def permute_dims(x, /, axes):
    """``x`` with its axes permuted (a view).

    >>> import fiamma.array_api as xp
    >>> tuple(xp.permute_dims(xp.zeros((2, 3, 4)), (2, 0, 1)).shape)
    (4, 2, 3)
    """
    return fiamma.permute(check_array(x, "permute_dims"), tuple(axes))


def reshape(x, /, shape, *, copy=None):
    """``x`` with a new shape (one dimension may be -1); ``copy=True`` always copies,
    ``copy=False`` raises ValueError when a view is impossible."""
    check_array(x, "reshape")
    shape = tuple(shape)
    if copy:
        return fiamma.reshape(x, shape).clone()
    if copy is False:
        try:
            return x.view(shape)
        except RuntimeError as e:
            raise ValueError(f"reshape: copy=False, but no view has shape {shape}: {e}") \
                from None
    return fiamma.reshape(x, shape)


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated ``repeats`` times (an int or a 1-D integer array) along
    ``axis`` (of the flattened array when None)."""
    check_array(x, "repeat")
    if axis is None:
        x, axis = x.reshape(-1), 0
    return fiamma.repeat_interleave(x, repeats, dim=axis)


def roll(x, /, shift, *, axis=None):
    """Elements shifted by ``shift`` along ``axis`` (of the flattened array when None)."""
    check_array(x, "roll")
    if axis is None:
        return fiamma.roll(x.reshape(-1), shift).reshape(x.shape)
    return fiamma.roll(x, shift, axis)


def squeeze(x, /, axis):
    """``x`` without the size-1 axes ``axis`` (ValueError when one is not of size 1)."""
    check_array(x, "squeeze")
    axes = (axis,) if isinstance(axis, builtins.int) else tuple(axis)
    axes = tuple(_axis(a, x.ndim, "squeeze") for a in axes)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    keep = [s for i, s in enumerate(x.shape) if i not in axes]
    return x.reshape(keep)


def tile(x, repetitions, /):
    """``x`` repeated ``repetitions`` times along each axis."""
    return fiamma.tile(check_array(x, "tile"), tuple(repetitions))


def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at integer ``indices`` along ``axis`` (required unless x is 1-D;
    negative indices count from the end)."""
    check_array(x, "take")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take: axis is required for arrays that are not 1-D")
        axis = 0
    axis = _axis(axis, x.ndim, "take")
    idx = indices.to(fiamma.int64)
    idx = fiamma.where(idx < 0, idx + x.shape[axis], idx)
    return fiamma.index_select(x, axis, idx)


def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of ``x`` at ``indices`` (of x's rank) along ``axis``."""
    check_array(x, "take_along_axis")
    axis = _axis(axis, x.ndim, "take_along_axis")
    idx = indices.to(fiamma.int64)
    idx = fiamma.where(idx < 0, idx + x.shape[axis], idx)
    return fiamma.take_along_dim(x, idx, dim=axis)
