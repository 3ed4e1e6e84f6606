"""The size limits of a tensor, checked before memory is allocated for one.

As in PyTorch, a size, an element count and a byte count must each fit in int64 (the C kernels
take them as int64_t, the allocator as size_t). ``check_shape`` is the one check: creation
functions call it on the shape they are given, naming themselves; every op's result is
allocated by ``new_empty``, which calls ``allocation_error`` only when allocating failed (so the
hot path pays nothing) and names the public function the user called, found on the stack.
"""

import sys

__all__ = ["MAX_SIZE", "check_shape", "allocation_error"]

MAX_SIZE = 2**63 - 1  # int64's largest value: the limit on a size, a numel and a byte count


def check_shape(shape, op, dtype=None):
    """Raise a RuntimeError naming ``op`` if ``shape`` has a negative size, a size or element
    count beyond int64, or (with ``dtype``) more bytes than int64 can count."""
    n = 1
    for s in shape:
        if s < 0:
            raise RuntimeError(f"{op}: Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
        if s > MAX_SIZE:
            raise RuntimeError(f"{op}: size {s} of shape {list(shape)} is beyond the limit of "
                               f"{MAX_SIZE} (2**63 - 1) per dimension")
        n *= s
    if n > MAX_SIZE:
        raise RuntimeError(f"{op}: a tensor of shape {list(shape)} would have {n} elements, "
                           f"beyond the limit of {MAX_SIZE} (2**63 - 1)")
    if dtype is not None and n * dtype.itemsize > MAX_SIZE:
        raise RuntimeError(f"{op}: a tensor of shape {list(shape)} and dtype {dtype.name} would "
                           f"take {n * dtype.itemsize} bytes, beyond the limit of {MAX_SIZE} "
                           f"bytes (2**63 - 1)")


# frames that only pass a call on (Module.__call__ and friends): the op is what they call
_PLUMBING = frozenset({"__call__", "_call_impl", "_wrapped_call_impl", "<lambda>", "<module>",
                       "<genexpr>", "<listcomp>", "wrapper", "decorate_context", "inner"})


def calling_op(depth=2):
    """The name of the outermost fiamma function on the caller's stack: the op the user called
    (``repeat``, ``contiguous``, ``conv2d``), dunders and the private functions behind Tensor
    methods by their plain names (``__add__``, ``_tile_method``: ``add``, ``tile``). Used only
    on error paths."""
    f = sys._getframe(depth)
    name = None
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod != "fiamma" and not mod.startswith("fiamma."):
            break
        code = f.f_code.co_name
        if code == "fn" and isinstance(f.f_locals.get("name"), str):
            name = f.f_locals["name"]  # an op made by a factory (_unary's _op): its name
        elif code not in _PLUMBING:
            name = code
        f = f.f_back
    if name is None:
        return "tensor allocation"
    if name.startswith("__") and name.endswith("__"):
        return name[2:-2]
    # Tensor methods installed from private functions (_repeat, _tile_method)
    name = name.lstrip("_")
    return name[:-len("_method")] if name.endswith("_method") else name


def allocation_error(shape, dtype, nbytes, dev, op=None):
    """The exception for a failed allocation of a ``shape``/``dtype`` result: a RuntimeError
    if the shape is beyond the limits, else a MemoryError (the device is out of memory); both
    name the op, the shape and the limit or byte count."""
    op = op or calling_op(3)
    try:
        check_shape(shape, op, dtype)
    except RuntimeError as e:
        return e
    return MemoryError(f"{op}: cannot allocate {nbytes} bytes for a tensor of shape "
                       f"{list(shape)} and dtype {dtype.name} on {dev}: out of memory")
