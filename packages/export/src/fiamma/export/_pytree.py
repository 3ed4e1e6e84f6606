"""Flattening the inputs and outputs of an exported program (PyTorch's pytree, reduced).

A spec is a JSON-able nest: ``["leaf"]`` (a tensor or a constant), ``["tuple", [specs]]``,
``["list", [specs]]``, ``["dict", [keys], [specs]]``, ``["none"]``, ``["namedtuple", name,
[fields], [specs]]`` and ``["dataclass", name, [fields], [specs]]`` (classes registered with
:func:`register_dataclass`). Namedtuple and dataclass types are kept beside the spec in
memory (``types``); a loaded program rebuilds registered dataclasses by name and namedtuples
as plain tuples.
"""

import dataclasses

__all__ = ["flatten", "unflatten", "register_dataclass", "same_structure", "leaf_paths"]

_DATACLASSES = {}  # qualified name -> class


def _qual(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def register_dataclass(cls, *, serialized_type_name=None):
    """Let a dataclass be an input or output of an exported program: its fields are flattened
    (PyTorch's ``torch.export.register_dataclass``)."""
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        raise TypeError(f"register_dataclass: expected a dataclass type, got {cls!r}")
    _DATACLASSES[serialized_type_name or _qual(cls)] = cls
    cls.__fiamma_export_name__ = serialized_type_name or _qual(cls)
    return cls


def flatten(x, types=None):
    """``(leaves, spec)``; ``types`` (a dict) collects the classes of namedtuples/dataclasses by
    name."""
    leaves = []
    types = {} if types is None else types

    def walk(v):
        if v is None:
            return ["none"]
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            name = _qual(type(v))
            types[name] = type(v)
            return ["namedtuple", name, list(v._fields), [walk(e) for e in v]]
        if type(v) is tuple:
            return ["tuple", [walk(e) for e in v]]
        if type(v) is list:
            return ["list", [walk(e) for e in v]]
        if isinstance(v, dict):
            return ["dict", list(v), [walk(e) for e in v.values()]]
        name = getattr(type(v), "__fiamma_export_name__", None)
        if name is not None and _DATACLASSES.get(name) is type(v):
            types[name] = type(v)
            fields = [f.name for f in dataclasses.fields(v)]
            return ["dataclass", name, fields, [walk(getattr(v, f)) for f in fields]]
        leaves.append(v)
        return ["leaf"]

    spec = walk(x)
    return leaves, spec


def unflatten(leaves, spec, types=None):
    """The nest of ``spec`` with its leaves taken in order from ``leaves``."""
    it = iter(leaves)
    types = types or {}

    def build(s):
        kind = s[0]
        if kind == "leaf":
            return next(it)
        if kind == "none":
            return None
        if kind == "tuple":
            return tuple(build(e) for e in s[1])
        if kind == "list":
            return [build(e) for e in s[1]]
        if kind == "dict":
            return {k: build(e) for k, e in zip(s[1], s[2])}
        if kind == "namedtuple":
            vals = [build(e) for e in s[3]]
            cls = types.get(s[1])
            return cls(*vals) if cls is not None else tuple(vals)
        if kind == "dataclass":
            vals = [build(e) for e in s[3]]
            cls = types.get(s[1]) or _DATACLASSES.get(s[1])
            if cls is None:
                return dict(zip(s[2], vals))
            return cls(**dict(zip(s[2], vals)))
        raise RuntimeError(f"fiamma.export: malformed tree spec {s!r}")

    return build(spec)


def same_structure(a, b):
    """Whether two specs nest the same way (dict keys compared as sets, as PyTorch's
    keyword matching)."""
    if a[0] != b[0]:
        return False
    if a[0] in ("leaf", "none"):
        return True
    if a[0] in ("tuple", "list"):
        return len(a[1]) == len(b[1]) and all(same_structure(x, y) for x, y in zip(a[1], b[1]))
    if a[0] == "dict":
        return list(a[1]) == list(b[1]) and all(same_structure(x, y)
                                                 for x, y in zip(a[2], b[2]))
    return a[1] == b[1] and a[2] == b[2] and all(same_structure(x, y)
                                                 for x, y in zip(a[3], b[3]))


def leaf_paths(spec):
    """The path of each leaf, in order: tuples of positions and keys."""
    out = []

    def walk(s, path):
        kind = s[0]
        if kind == "leaf":
            out.append(path)
        elif kind in ("tuple", "list"):
            for i, e in enumerate(s[1]):
                walk(e, path + (i,))
        elif kind == "dict":
            for k, e in zip(s[1], s[2]):
                walk(e, path + (k,))
        elif kind in ("namedtuple", "dataclass"):
            for k, e in zip(s[2], s[3]):
                walk(e, path + (k,))

    walk(spec, ())
    return out
