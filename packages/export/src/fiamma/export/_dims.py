"""``Dim`` and ``dynamic_shapes``: which input sizes an exported program accepts.

Every input dimension is static (the program accepts only the example's size) unless
``dynamic_shapes`` marks it: a named :class:`Dim` (a symbol with a range; the same Dim in two
places means equal sizes; ``2 * d`` / ``d + 1`` are derived dims), ``Dim.AUTO`` (dynamic unless
the model specialises it), ``Dim.DYNAMIC`` (dynamic; an error if the model specialises it) or
``Dim.STATIC`` / ``None``. A dimension is described by an int (static) or
``[symbol, a, b]`` meaning ``a * symbol + b``.
"""

import inspect

import fiamma

from ._errors import ConstraintViolationError, UserError

__all__ = ["Dim", "dims", "ShapesCollection", "resolve_dynamic_shapes", "Range"]

INF = float("inf")


class Range:
    """A symbol's allowed sizes, ``lower <= n <= upper`` (printed like PyTorch's ``VR[..]``)."""

    def __init__(self, lower, upper):
        self.lower, self.upper = lower, upper

    def __repr__(self):
        up = "int_oo" if self.upper in (None, INF) else self.upper
        return f"VR[{self.lower}, {up}]"

    def __eq__(self, other):
        return isinstance(other, Range) and (self.lower, self.upper) == (other.lower,
                                                                        other.upper)

    def __contains__(self, n):
        return self.lower <= n and (self.upper in (None, INF) or n <= self.upper)


class _DimHint:
    def __init__(self, kind, min=None, max=None):
        self.kind, self.min, self.max = kind, min, max

    def __call__(self, min=None, max=None):
        return _DimHint(self.kind, min, max)

    def __repr__(self):
        return f"DimHint({self.kind})"

    def __eq__(self, other):
        return isinstance(other, _DimHint) and (self.kind, self.min, self.max) == \
            (other.kind, other.min, other.max)

    def __hash__(self):
        return hash((self.kind, self.min, self.max))


class _DimMeta(type):
    AUTO = _DimHint("AUTO")
    STATIC = _DimHint("STATIC")
    DYNAMIC = _DimHint("DYNAMIC")


class Dim(metaclass=_DimMeta):
    """A named dynamic dimension: ``Dim("batch", min=2, max=64)`` (PyTorch's
    ``torch.export.Dim``). ``min`` defaults to 0 and ``max`` to unbounded; the example's size
    must lie in the range and not be 0 or 1 (sizes 0 and 1 are specialised, as in PyTorch).
    ``2 * d``, ``d * 2``, ``d + 1``, ``d - 1`` are derived dims (sizes that follow ``d``).
    ``Dim.AUTO``, ``Dim.DYNAMIC``, ``Dim.STATIC`` are the hints."""

    AUTO = _DimMeta.AUTO
    STATIC = _DimMeta.STATIC
    DYNAMIC = _DimMeta.DYNAMIC

    def __init__(self, name, *, min=None, max=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"Dim: the name must be a Python identifier, got {name!r}")
        lo = 0 if min is None else int(min)
        hi = INF if max is None else int(max)
        if lo < 0 or hi < lo:
            raise UserError(f"Dim {name}: expected 0 <= min <= max, got min={min}, max={max}")
        self.__name__ = name
        self.min, self.max = lo, hi

    def __repr__(self):
        parts = [repr(self.__name__)]
        if self.min != 2:  # PyTorch's repr leaves out min=2 (the least dynamic size)
            parts.append(f"min={self.min}")
        if self.max != INF:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"

    # derived dims: a * self + b
    def _derive(self, a, b):
        return _DerivedDim(self, a, b)

    def __mul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            raise UserError(f"Dim {self.__name__}: a derived dim multiplies by a positive int, "
                            f"got {k!r}")
        return self._derive(k, 0)

    __rmul__ = __mul__

    def __add__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            raise UserError(f"Dim {self.__name__}: a derived dim adds an int, got {k!r}")
        return self._derive(1, k)

    __radd__ = __add__

    def __sub__(self, k):
        return self + (-k)


class _DerivedDim(Dim):
    def __init__(self, root, a, b):
        self.root, self.a, self.b = root, a, b
        self.__name__ = _derived_name(root.__name__, a, b)
        self.min = a * root.min + b
        self.max = INF if root.max == INF else a * root.max + b

    def _derive(self, a, b):
        return _DerivedDim(self.root, self.a * a, self.b * a + b)

    def __repr__(self):
        return self.__name__


def _derived_name(name, a, b):
    s = name if a == 1 else f"{a}*{name}"
    if b:
        s += f" + {b}" if b > 0 else f" - {-b}"
    return s


def dims(*names, min=None, max=None):
    """One :class:`Dim` per name, sharing ``min``/``max`` (``torch.export.dims``)."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ShapesCollection:
    """Dynamic shapes given per tensor: ``sc[x] = {0: Dim("b")}`` then
    ``export(..., dynamic_shapes=sc.dynamic_shapes(m, args, kwargs))``."""

    def __init__(self):
        self._shapes = {}

    def __setitem__(self, t, shape):
        if not isinstance(t, fiamma.Tensor):
            raise TypeError(f"ShapesCollection: keys are tensors, got {type(t).__name__}")
        self._shapes[id(t)] = (t, shape)

    def __getitem__(self, t):
        return self._shapes[id(t)][1]

    def __len__(self):
        return len(self._shapes)

    def dynamic_shapes(self, m, args, kwargs=None):
        def walk(v):
            if isinstance(v, fiamma.Tensor):
                return self._shapes.get(id(v), (None, None))[1]
            if isinstance(v, (tuple, list)):
                return type(v)(walk(e) for e in v) if not hasattr(v, "_fields") else \
                    tuple(walk(e) for e in v)
            if isinstance(v, dict):
                return {k: walk(e) for k, e in v.items()}
            return None

        out = walk(tuple(args))
        if kwargs:
            names = _arg_names(m, args, kwargs)
            return dict(zip(names, list(out) + [walk(v) for v in kwargs.values()]))
        return out


def _arg_names(mod, args, kwargs):
    """The names of the positional then keyword inputs, as ``forward`` calls them."""
    fn = getattr(mod, "forward", mod)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    for i in range(len(args)):
        names.append(pos[i].name if i < len(pos) else f"{var}_{i - len(pos)}")
    names += list(kwargs)
    return names


def _per_tensor(value, spec, path, out):
    """Pairs each tensor leaf of ``value`` (flatten order) with its dims spec."""
    where = "".join(f"[{p!r}]" for p in path)
    if isinstance(value, fiamma.Tensor):
        if spec is not None and not isinstance(spec, (dict, tuple, list)):
            raise UserError(f"dynamic_shapes{where}: expected a dict {{dim: Dim}} or a "
                            f"tuple of Dims for a tensor, got {spec!r}")
        if isinstance(spec, (tuple, list)):
            if len(spec) != value.dim():
                raise UserError(f"dynamic_shapes{where}: the tensor has {value.dim()} dims "
                                f"but the spec lists {len(spec)}")
            spec = {i: d for i, d in enumerate(spec)}
        spec = dict(spec or {})
        for k in spec:
            if not isinstance(k, int) or not -value.dim() <= k < value.dim():
                raise UserError(f"dynamic_shapes{where}: dim {k!r} is out of range for a "
                                f"tensor with {value.dim()} dims")
        out.append({k % value.dim(): v for k, v in spec.items()})
        return
    if isinstance(value, (tuple, list)):
        if spec is not None and (not isinstance(spec, (tuple, list)) or len(spec) != len(value)):
            raise UserError(f"dynamic_shapes{where}: expected a tuple/list of {len(value)} "
                            f"specs, got {spec!r}")
        for i, v in enumerate(value):
            _per_tensor(v, None if spec is None else spec[i], path + (i,), out)
        return
    if isinstance(value, dict):
        if spec is not None and (not isinstance(spec, dict) or set(spec) != set(value)):
            raise UserError(f"dynamic_shapes{where}: expected a dict with keys "
                            f"{sorted(value)}, got {spec!r}")
        for k, v in value.items():
            _per_tensor(v, None if spec is None else spec[k], path + (k,), out)
        return
    if hasattr(value, "__fiamma_export_name__"):
        import dataclasses

        for f in dataclasses.fields(value):
            sub = None if spec is None else (spec.get(f.name) if isinstance(spec, dict)
                                             else getattr(spec, f.name, None))
            _per_tensor(getattr(value, f.name), sub, path + (f.name,), out)
        return
    if spec is not None:
        raise UserError(f"dynamic_shapes{where}: the input is a {type(value).__name__}, not a "
                        f"tensor; its spec must be None, got {spec!r}")


def resolve_dynamic_shapes(mod, args, kwargs, dynamic_shapes, tensors):
    """Per tensor input (flatten order), its dims: ``[int | [symbol, a, b], ...]``; the
    symbols' ranges; how each symbol was declared (``"named"`` / ``"AUTO"`` / ``"DYNAMIC"``,
    and the Dim's name)."""
    names = _arg_names(mod, args, kwargs)
    values = list(args) + list(kwargs.values())
    if isinstance(dynamic_shapes, ShapesCollection):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    if dynamic_shapes is None:
        specs = [None] * len(values)
    elif isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise UserError(f"dynamic_shapes: keys {unknown} are not inputs of forward "
                            f"(its inputs here are {names}); use the argument names, or a "
                            "tuple of specs in input order")
        specs = [dynamic_shapes.get(n) for n in names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(values):
            raise UserError(f"dynamic_shapes: expected {len(values)} specs (one per input: "
                            f"{names}), got {len(dynamic_shapes)}")
        specs = list(dynamic_shapes)
    else:
        raise UserError(f"dynamic_shapes: expected a dict, tuple or list, got "
                        f"{type(dynamic_shapes).__name__}")
    per = []
    for name, v, s in zip(names, values, specs):
        _per_tensor(v, s, (name,), per)
    assert len(per) == len(tensors)

    symbols, ranges, decl, roots = {}, {}, {}, {}
    shapes = []
    for t, spec in zip(tensors, per):
        shape = []
        for ax, n in enumerate(t.shape):
            n = int(n)
            d = spec.get(ax)
            if isinstance(d, int) and not isinstance(d, bool):
                if d != n:  # a static size given as an int must be the example's
                    raise UserError(f"dynamic_shapes: dim {ax} is given as the static size {d}, "
                                    f"but the example's size is {n}")
                d = None
            if d is None or (isinstance(d, _DimHint) and d.kind == "STATIC"):
                shape.append(n)
                continue
            if isinstance(d, _DimHint):
                if n in (0, 1):
                    if d.kind == "AUTO":
                        shape.append(n)
                        continue
                    raise ConstraintViolationError(
                        f"Constraints violated! The size of dim {ax} of an input marked "
                        f"Dim.DYNAMIC is {n} in the example: sizes 0 and 1 are specialised "
                        "(use an example of size >= 2, or Dim.AUTO)")
                sym = f"s{len(ranges)}"
                lo = max(2, d.min if d.min is not None else 2)
                hi = INF if d.max is None else d.max
                ranges[sym] = Range(lo, hi)
                decl[sym] = (d.kind, None)
                shape.append([sym, 1, 0])
                continue
            if not isinstance(d, Dim):
                raise UserError(f"dynamic_shapes: dim {ax} has spec {d!r}; expected a Dim, "
                                "Dim.AUTO/DYNAMIC/STATIC or None")
            root, a, b = (d.root, d.a, d.b) if isinstance(d, _DerivedDim) else (d, 1, 0)
            if (n - b) % a:
                raise ConstraintViolationError(
                    f"Constraints violated ({root.__name__})! The example's size {n} is not "
                    f"{d.__name__} for an integer {root.__name__}")
            v = (n - b) // a
            if root.__name__ not in roots:
                if v in (0, 1):
                    raise ConstraintViolationError(
                        f"Constraints violated ({root.__name__})! You marked "
                        f"{root.__name__} as dynamic but your code specialized it to be a "
                        f"constant ({v}): the example's size is {v}, and sizes 0 and 1 are "
                        f"specialised. Use an example of size >= 2, or Dim.STATIC.")
                if v not in Range(root.min, root.max):
                    raise ConstraintViolationError(
                        f"Constraints violated ({root.__name__})! The example's size {v} is "
                        f"outside {root!r}")
                sym = f"s{len(ranges)}"
                roots[root.__name__] = (sym, v, root)
                ranges[sym] = Range(max(root.min, 2), root.max)
                decl[sym] = ("named", root.__name__)
            sym, v0, _ = roots[root.__name__]
            if v != v0:
                raise ConstraintViolationError(
                    f"Constraints violated ({root.__name__})! {root.__name__} is used for "
                    f"sizes that differ in the example ({v0} and {v}, after derivation)")
            shape.append([sym, a, b])
        shapes.append(shape)
    symbols = {s: decl[s][1] or s for s in ranges}
    return shapes, ranges, decl, symbols
