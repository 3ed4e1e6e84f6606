"""default_collate and default_convert (``torch.utils.data``)."""

import collections.abc
import copy
import re

import numpy as np

import fiamma

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map",
           "collate_tensor_fn", "np_str_obj_array_pattern"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")   # NumPy dtypes that do not collate
_STRING_DTYPES = np_str_obj_array_pattern
_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """Turn NumPy arrays (and containers of them) into tensors; everything else unchanged.
    What the DataLoader applies to samples when it does not batch (``batch_size=None``)."""
    if isinstance(data, fiamma.Tensor):
        return data
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        if isinstance(data, np.ndarray) and _STRING_DTYPES.search(data.dtype.str):
            return data
        return fiamma.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stack tensors along a new first dimension (a tensor subclass's ``__torch_function__``
    sees the ``stack``, so subclasses stay subclasses)."""
    return fiamma.stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str):
        raise TypeError(_ERR.format(elem.dtype))
    return collate([fiamma.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return fiamma.as_tensor(np.array(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return fiamma.tensor(batch, dtype=fiamma.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return fiamma.tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


# type -> function(batch, *, collate_fn_map): what ``collate`` calls for a batch whose first
# element is of that type (exact type first, then the first isinstance match in order). Programs
# register their own types here (``default_collate_fn_map[MyTensor] = fn``), as in PyTorch.
default_collate_fn_map = {
    fiamma.Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch, *, collate_fn_map=None):
    """Collate a list of samples with the functions of ``collate_fn_map`` (a dict from types or
    tuples of types to ``fn(batch, *, collate_fn_map)``), recursing into mappings, named tuples
    and sequences (``torch.utils.data._utils.collate.collate``)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        fn = collate_fn_map.get(elem_type)
        if fn is not None:
            return fn(batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        out = {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map) for k in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            try:
                clone = copy.copy(elem)   # keeps the mapping's type and its other attributes
                clone.update(out)
                return clone
            except TypeError:
                return out
        try:
            return elem_type(out)
        except TypeError:
            return out
    if _is_namedtuple(elem):
        return elem_type(*(collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence) and not isinstance(elem, (str, bytes)):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return elem_type(columns)
        except TypeError:
            return columns
    raise TypeError(_ERR.format(elem_type))


def default_collate(batch):
    """Stack a list of samples into a batch, recursively: tensors and NumPy arrays are stacked
    along a new first dimension, Python floats become a float64 tensor, ints an int64 tensor,
    strings stay a list, and dicts, named tuples and sequences are collated per field. Types
    registered in ``default_collate_fn_map`` are collated by their function.

    >>> import fiamma
    >>> out = default_collate([{"x": fiamma.ones(2), "y": 1}, {"x": fiamma.zeros(2), "y": 0}])
    >>> out["x"].tolist(), out["y"].tolist()
    ([[1.0, 1.0], [0.0, 0.0]], [1, 0])
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
