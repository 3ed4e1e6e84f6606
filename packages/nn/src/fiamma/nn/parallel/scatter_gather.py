"""``fiamma.nn.parallel.scatter_gather``: ``scatter`` / ``scatter_kwargs`` split inputs along a
dimension, one chunk per target device, and ``gather`` concatenates outputs back on one device
(``torch.nn.parallel.scatter_gather``). The chunks are differentiable (``chunk`` and ``to``).
Libraries call these even with one device (Captum's layer attributions do).

>>> import fiamma
>>> from fiamma.nn.parallel.scatter_gather import scatter, gather
>>> parts = scatter((fiamma.arange(4.0), "tag"), ["cpu", "cpu"])
>>> [(p[0].tolist(), p[1]) for p in parts]
[([0.0, 1.0], 'tag'), ([2.0, 3.0], 'tag')]
>>> gather([p[0] for p in parts], "cpu").tolist()
[0.0, 1.0, 2.0, 3.0]
"""

import fiamma

__all__ = ["scatter", "scatter_kwargs", "gather"]


def _device(d):
    if isinstance(d, int):
        return fiamma.device("cpu") if d == -1 else fiamma.device("cuda", d)
    return fiamma.device(d)


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def scatter(inputs, target_gpus, dim=0):
    """Split ``inputs`` into ``len(target_gpus)`` pieces: each tensor is chunked along ``dim``
    and each chunk moved to its device; tuples, lists, named tuples and dicts are split per
    element; anything else is repeated. Returns a list (one entry per piece; fewer when a
    tensor has fewer rows than devices)."""
    devices = [_device(d) for d in target_gpus]
    if not devices:
        raise ValueError("scatter: target_gpus is empty; expected at least one device")

    def split(obj):
        if isinstance(obj, fiamma.Tensor):
            return [c.to(d) for c, d in zip(obj.chunk(len(devices), dim), devices)]
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(split, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(split, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(x) for x in zip(*map(split, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(x) for x in zip(*map(split, obj.items()))]
        return [obj for _ in devices]

    return split(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """Scatter positional ``inputs`` and ``kwargs`` alike; returns two tuples of equal length
    (the shorter padded with ``()`` / ``{}``)."""
    scattered = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kw = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered) < len(scattered_kw):
        scattered.extend(() for _ in range(len(scattered_kw) - len(scattered)))
    elif len(scattered_kw) < len(scattered):
        scattered_kw.extend({} for _ in range(len(scattered) - len(scattered_kw)))
    return tuple(scattered), tuple(scattered_kw)


def gather(outputs, target_device, dim=0):
    """Concatenate the per-device ``outputs`` along ``dim`` on ``target_device`` (``-1``: the
    CPU), recursing into sequences and dicts as they were scattered; ``None`` stays ``None``."""
    device = _device(target_device)

    def join(outs):
        first = outs[0]
        if isinstance(first, fiamma.Tensor):
            if first.dim() == 0:   # scalars are stacked into a vector, as PyTorch does
                return fiamma.stack([o.to(device) for o in outs], 0)
            return fiamma.cat([o.to(device) for o in outs], dim)
        if first is None:
            return None
        if isinstance(first, dict):
            if any(len(o) != len(first) for o in outs):
                raise ValueError("gather: all dicts must have the same number of keys")
            return type(first)((k, join([o[k] for o in outs])) for k in first)
        if _is_namedtuple(first):
            return type(first)._make(map(join, zip(*outs)))
        return type(first)(map(join, zip(*outs)))

    return join(outputs)
