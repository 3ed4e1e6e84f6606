"""default_collate and default_convert (``torch.utils.data``)."""

import collections.abc
import re

import numpy as np

import fiamma

__all__ = ["default_collate", "default_convert"]

_STRING_DTYPES = re.compile(r"[SaUO]")
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


def default_collate(batch):
    """Stack a list of samples into a batch, recursively: tensors and NumPy arrays are stacked
    along a new first dimension, Python floats become a float64 tensor, ints an int64 tensor,
    strings stay a list, and dicts, named tuples and sequences are collated per field.

    >>> import fiamma
    >>> out = default_collate([{"x": fiamma.ones(2), "y": 1}, {"x": fiamma.zeros(2), "y": 0}])
    >>> out["x"].tolist(), out["y"].tolist()
    ([[1.0, 1.0], [0.0, 0.0]], [1, 0])
    """
    elem = batch[0]
    if isinstance(elem, fiamma.Tensor):
        return fiamma.stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if _STRING_DTYPES.search(elem.dtype.str):
            raise TypeError(_ERR.format(elem.dtype))
        return fiamma.stack([fiamma.as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return fiamma.as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return fiamma.tensor(batch, dtype=fiamma.bool)
    if isinstance(elem, float):
        return fiamma.tensor(batch, dtype=fiamma.float64)
    if isinstance(elem, int):
        return fiamma.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_ERR.format(type(elem)))
