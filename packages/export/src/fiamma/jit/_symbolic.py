"""Symbolic sizes: sizes read from traced tensors stay expressions of the inputs' shapes.

While a trace runs, ``x.shape`` / ``x.size()`` of a traced tensor give :class:`SymInt` values:
ints that also remember where they came from (``("dim", value, axis)``) and the arithmetic done
on them (``("mul", a, b)``, ...). The ops that take sizes (``view``/``reshape``/``expand``, the
``*_as`` forms, ``zeros``/``ones``/``full``/``empty`` and their ``new_*``/``*_like`` forms,
``arange``) are wrapped: given a SymInt they run as usual and their result is recorded as a
node whose ``symsize`` keyword holds the expressions. The runner (and the ONNX converters, as
Shape/Gather/arithmetic nodes) recompute those sizes from the actual inputs, so
``x.view(x.size(0), -1)`` follows the batch size as in PyTorch's tracer.

An expression is an int or a tuple ``(op, ...)``: ``("dim", Value, axis)``, ``("add"|"sub"|
"mul"|"floordiv"|"mod"|"min"|"max", a, b)``, ``("neg", a)``; after ``_resolve`` the Value is a
tensor. ``fiamma.sym_min``/``sym_max`` of a SymInt give ``min``/``max`` expressions (a top-k
count ``sym_min(k, n)`` follows ``n``).

A SymInt turned into a plain Python number by the model's code (``int(n)``, ``float(n)``,
arithmetic with a float or a tensor: ``(n - 2.5) * w``) and ``len(x)`` of a traced tensor are
baked into the trace at this trace's value: they warn with a
:class:`~fiamma.jit.TracerWarning` naming the model's line (fiamma's own code converting sizes
for its checks does not warn).
"""

import builtins
import operator
import sys
import types
import warnings

import fiamma
from fiamma import Tensor

from ._errors import TracerWarning, TracingError
from ._graph import Value

__all__ = ["SymInt", "evaluate", "sizes", "patch_sizes"]

_BIG = 2 ** 63 - 1  # a slice without a stop

_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
        "floordiv": operator.floordiv, "mod": operator.mod, "min": builtins.min,
        "max": builtins.max}

_ACTIVE = []  # the tracer whose trace is running (for the warnings on conversions)


def _warn_baked(what, sym=None):
    """A TracerWarning when the model's code (not fiamma's) turns a size into a number
    (fiamma.export: the size is specialised, a guard ``size == value``)."""
    if not _ACTIVE:
        return
    tr = _ACTIVE[-1]
    if not tr.here() or tr.paused or tr.in_library(3):
        return
    if tr.export is not None and sym is not None:
        tr.export.guard("eq", sym.expr, int.__int__(sym), True, baked=tr.source(3))
        return
    warnings.warn(f"{what}: the trace records this size as a constant, so the traced function "
                  f"may not generalize to other input sizes ({tr.source(3)})", TracerWarning,
                  stacklevel=3)


class SymInt(int):
    """An int read from a traced tensor's shape, with the expression that computes it."""

    def __new__(cls, value, expr):
        o = int.__new__(cls, value)
        o.expr = expr
        return o

    def __repr__(self):
        return int.__repr__(self)

    def __neg__(self):
        return SymInt(-int(self), ("neg", self.expr))

    def __pos__(self):
        return self

    def __int__(self):
        _warn_baked("int() of a size read from a traced tensor's shape", self)
        return int.__int__(self)

    def __float__(self):
        _warn_baked("float() of a size read from a traced tensor's shape", self)
        return int.__float__(self)

    def __sym_min__(self, other):
        return _minmax("min", self, other)

    def __sym_max__(self, other):
        return _minmax("max", self, other)


def _minmax(name, a, b):
    fn = _OPS[name]
    if not isinstance(b, int) or isinstance(b, bool):
        return fn(int.__int__(a), b)
    return SymInt(fn(int.__int__(a), int.__int__(b)), (name, _expr(a), _expr(b)))


def _expr(v):
    return v.expr if isinstance(v, SymInt) else int.__int__(v)


def _binop(name, swap=False):
    fn = _OPS[name]

    def method(self, other):
        me = int.__int__(self)
        if not isinstance(other, int):  # floats, tensors, sequences: as a plain int
            if isinstance(other, (float, Tensor)):
                _warn_baked(f"a size read from a traced tensor's shape in arithmetic with a "
                            f"{'tensor' if isinstance(other, Tensor) else 'float'}", self)
            return fn(other, me) if swap else fn(me, other)
        a, b = (other, me) if swap else (me, other)
        a, b = int.__int__(a), int.__int__(b)
        sa, sb = (other, self) if swap else (self, other)
        return SymInt(fn(a, b), (name, _expr(sa), _expr(sb)))
    return method


for _n in _OPS:
    setattr(SymInt, f"__{_n}__", _binop(_n))
    setattr(SymInt, f"__r{_n}__", _binop(_n, swap=True))


def _compare(name):
    fn = getattr(operator, name)

    def method(self, other):
        me = int.__int__(self)
        if isinstance(other, SymInt):
            r = fn(me, int.__int__(other))
        else:
            r = fn(me, other)
        # fiamma.export: a comparison of sizes is a guard the exported program relies on
        if _ACTIVE and _ACTIVE[-1].export is not None and isinstance(other, int) and \
                not isinstance(other, bool) and isinstance(r, bool):
            tr = _ACTIVE[-1]
            if tr.here() and not tr.paused:
                tr.export.guard(name, self.expr, _expr(other), r, baked=tr.source(2))
        return r
    return method


for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(SymInt, f"__{_n}__", _compare(_n))
SymInt.__hash__ = int.__hash__


def evaluate(e):
    """The value of an expression whose Values were resolved to tensors."""
    if isinstance(e, tuple):
        op = e[0]
        if op == "dim":
            return int(e[1].shape[e[2]])
        if op == "neg":
            return -evaluate(e[1])
        if op not in _OPS or len(e) != 3:
            raise RuntimeError(f"fiamma.jit: unknown size expression {op!r} in the graph")
        return _OPS[op](evaluate(e[1]), evaluate(e[2]))
    if not isinstance(e, int):
        raise RuntimeError(f"fiamma.jit: malformed size expression {e!r} in the graph")
    return e


def sizes(arg, symsize):
    """Concrete sizes: ``arg`` (as traced) with each symbolic entry recomputed."""
    return tuple(a if s is None else evaluate(s) for a, s in zip(arg, symsize))


def first_dim_source(e):
    """A tensor an expression reads a shape from (its device is the node's), or None."""
    if isinstance(e, tuple):
        if e[0] == "dim":
            return e[1]
        for x in e[1:]:
            r = first_dim_source(x)
            if r is not None:
                return r
    if isinstance(e, (list,)):
        for x in e:
            r = first_dim_source(x)
            if r is not None:
                return r
    return None


def _has_sym(xs):
    return any(isinstance(v, SymInt) for v in xs)


def _size_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _plain(xs):
    return tuple(int(v) if isinstance(v, int) else v for v in xs)


def _symsize(xs):
    return [v.expr if isinstance(v, SymInt) else None for v in xs]


def _rebind_imported(orig, fn, saved):
    """Model code that imported a wrapped function by name (``from torch import arange``, as
    x-transformers does) holds the original in its module's globals: those bindings are
    pointed at the wrapper too for the trace (and restored with the rest). fiamma's own
    modules keep theirs (their sizes are the library's, not the model's)."""
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        mname = getattr(mod, "__name__", None) or ""
        if d is None or mname == "fiamma" or mname.startswith("fiamma."):
            continue
        try:
            hits = [k for k, v in d.items() if v is orig]
        except (RuntimeError, TypeError):  # a module dict changing under us, or a proxy
            continue
        for k in hits:
            saved.append((mod, k, orig))
            setattr(mod, k, fn)


def patch_sizes(tracer):
    """Wrap the size readers and size takers for the trace; returns what to restore."""
    saved = []
    _ACTIVE.append(tracer)

    def put(owner, name, fn, is_property=False):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        saved.append((owner, name, orig))
        setattr(owner, name, property(fn) if is_property else fn)
        if isinstance(owner, types.ModuleType):
            _rebind_imported(orig, fn, saved)
        return orig.fget if is_property else orig

    def live():
        # the traced thread, recording (not inside a leaf op's own forward or no_grad code,
        # whose ops the trace does not see)
        return tracer.here() and not tracer.paused and fiamma.is_grad_enabled()

    def mine(t):
        return id(t) in tracer.vals and live()

    def sym_shape(t):
        name = tracer.vals[id(t)]
        v = Value(name)
        return fiamma.Size(SymInt(n, ("dim", v, i)) for i, n in enumerate(t._shape))

    shape_get = None

    def shape(self):
        return sym_shape(self) if mine(self) else shape_get(self)

    shape_get = put(Tensor, "shape", shape, is_property=True)
    size_orig = Tensor.__dict__["size"]

    def size(self, dim=None):
        if not mine(self):
            return size_orig(self, dim)
        s = sym_shape(self)
        if dim is None:
            return s
        return s[self._wrap_dim(dim, "size")]

    put(Tensor, "size", size)
    len_orig = Tensor.__dict__["__len__"]

    def length(self):
        if mine(self) and not tracer.in_library() and tracer.export is not None and \
                self.dim() > 0:
            n = sym_shape(self)[0]  # fiamma.export: len(x) specialises x.shape[0]
            tracer.export.guard("eq", n.expr, int.__int__(n), True, baked=tracer.source())
        elif mine(self) and not tracer.in_library():
            warnings.warn("len() of a traced tensor is a plain int: the trace records it as a "
                          "constant, so the traced function may not generalize to other input "
                          f"sizes (use x.shape[0] / x.size(0)) ({tracer.source()})",
                          TracerWarning, stacklevel=2)
        return len_orig(self)

    put(Tensor, "__len__", length)

    def record(op, src, out, arg, syms, **extra):
        """``out`` is ``op(src)`` with symbolic sizes: one node replaces what core recorded."""
        kw = {k: int(v) if isinstance(v, SymInt) else v for k, v in extra.items()}
        kw["arg" if op in ("reshape", "expand") else "size"] = _plain(arg)
        kw["symsize"] = syms
        return record_node(op, src, out, kw)

    def record_node(op, src, out, kw):
        try:
            args = [] if src is None else [tracer.ref(src, op)]
        except TracingError:
            return out  # a view the trace does not follow: core's own recording decides
        name = tracer.new_name()
        from ._graph import Node

        tracer.g.nodes.append(Node(op, args, kw, [name], tracer.source()))
        if id(out) in tracer.vals:
            tracer.vals[id(out)] = name
            tracer.g.meta[name] = (tuple(out._shape), str(out._dtype).split(".")[-1])
        else:
            tracer.bind(out, name)
        return out

    def view_like(meth, op):
        orig = Tensor.__dict__[meth]

        def fn(self, *shape):
            arg = _size_arg(shape)
            # sizes read from shapes, or a -1 (a size inferred at run time): the target as the
            # caller wrote it, not the sizes of this trace
            if not (live() and (_has_sym(arg) or (op == "reshape" and -1 in arg))) or \
                    (len(shape) == 1 and isinstance(shape[0], fiamma.dtype)):
                return orig(self, *shape)
            out = orig(self, _plain(arg))
            if out is self:
                return out
            return record(op, self, out, arg, _symsize(arg))
        put(Tensor, meth, fn)

    flatten_orig = Tensor.__dict__["flatten"]

    def flatten(self, start_dim=0, end_dim=-1):
        out = flatten_orig(self, start_dim, end_dim)
        nd = len(self._shape)
        if out is self or nd == 0 or not mine(self):
            return out
        s, e = start_dim % nd, end_dim % nd
        shape = sym_shape(self)
        arg = tuple(shape[:s]) + (-1,) + tuple(shape[e + 1:])
        return record("reshape", self, out, arg, _symsize(arg))

    put(Tensor, "flatten", flatten)

    def record_chain(src, out, steps):
        try:
            cur = tracer.ref(src, steps[0][0])
        except TracingError:
            return out
        from ._graph import Node

        where = tracer.source()
        for op, kw in steps[:-1]:
            name = tracer.new_name()
            tracer.g.nodes.append(Node(op, [cur], kw, [name], where))
            cur = Value(name)
        op, kw = steps[-1]
        name = tracer.new_name()
        tracer.g.nodes.append(Node(op, [cur], kw, [name], where))
        if id(out) in tracer.vals:
            tracer.vals[id(out)] = name
            tracer.g.meta[name] = (tuple(out._shape), str(out._dtype).split(".")[-1])
        else:
            tracer.bind(out, name)
        return out

    from types import SimpleNamespace

    from ._dynamic import patch_dynamic
    from ._logical import patch_logical

    helpers = SimpleNamespace(put=put, live=live, mine=mine, record_node=record_node,
                              record_chain=record_chain, tracer=tracer)
    patch_logical(helpers)
    patch_dynamic(helpers)
    view_like("view", "reshape")
    view_like("reshape", "reshape")
    view_like("expand", "expand")

    def as_like(meth, target):
        orig = Tensor.__dict__[meth]

        def fn(self, other):
            if mine(other):
                return getattr(self, target)(other.shape)
            return orig(self, other)
        put(Tensor, meth, fn)

    as_like("view_as", "view")
    as_like("reshape_as", "reshape")
    as_like("expand_as", "expand")

    def factory(name, fill):
        orig = getattr(fiamma, name)

        def fn(*size, **kw):
            if name == "full":
                arg, value = tuple(size[0]) if size else tuple(kw.get("size", ())), \
                    size[1] if len(size) > 1 else kw.get("fill_value")
            else:
                arg, value = _size_arg(size), fill
            if not (live() and _has_sym(arg)) or kw.get("out") is not None:
                return orig(*size, **kw)
            if name == "full":
                out = orig(_plain(arg), *size[1:], **kw)
            else:
                out = orig(_plain(arg), **kw)
            return record("full", None, out, arg, _symsize(arg), fill_value=value,
                          dtype=out.dtype)
        put(fiamma, name, fn)

    for n, v in (("zeros", 0), ("ones", 1), ("empty", 0), ("full", None)):
        factory(n, v)

    def new_factory(meth, fill):
        orig = Tensor.__dict__[meth]

        def fn(self, *size, **kw):
            if meth == "new_full":
                arg, value = tuple(size[0]), size[1] if len(size) > 1 else kw.get("fill_value")
            else:
                arg, value = _size_arg(size), fill
            if not (live() and _has_sym(arg)):
                return orig(self, *size, **kw)
            out = orig(self, _plain(arg), *size[1:], **kw) if meth == "new_full" else \
                orig(self, _plain(arg), **kw)
            return record("full", None, out, arg, _symsize(arg), fill_value=value,
                          dtype=out.dtype)
        put(Tensor, meth, fn)

    for m, v in (("new_zeros", 0), ("new_ones", 1), ("new_empty", 0), ("new_full", None)):
        new_factory(m, v)

    def like(name, fill):
        orig = getattr(fiamma, name)

        def fn(input, *a, **kw):
            out = orig(input, *a, **kw)
            if not mine(input) or id(out) in tracer.vals:
                return out
            value = fill if fill is not None else (a[0] if a else kw.get("fill_value"))
            s = sym_shape(input)
            return record("full", None, out, s, _symsize(s), fill_value=value,
                          dtype=out.dtype)
        put(fiamma, name, fn)

    for n, v in (("zeros_like", 0), ("ones_like", 1), ("empty_like", 0), ("full_like", None)):
        like(n, v)

    arange_orig = fiamma.arange

    def arange(start=0, end=None, step=1, **kw):
        if not (live() and _has_sym((start, end, step))) or kw.get("out") is not None:
            return arange_orig(start, end, step, **kw)
        plain = [int(v) if isinstance(v, SymInt) else v for v in (start, end, step)]
        out = arange_orig(*plain, **kw)
        if end is None:
            start, end = 0, start
        vals = (start, end, step)
        return record("arange", None, out, vals, _symsize(vals), dtype=out.dtype)

    put(fiamma, "arange", arange)

    import fiamma.nn.functional as F

    def sym_kwarg(op, key, symkey, orig):
        """``orig`` (F.interpolate / F.pad) whose size argument (``size=`` read from a skip
        connection's ``shape[2:]``, pad amounts like ``x.shape[-1] % 8``) holds expressions:
        the recorded node gets them as its ``symkey`` keyword."""
        def fn(input, *a, **kw):
            out = orig(input, *a, **kw)
            arg = a[0] if a else kw.get(key)
            vals = tuple(arg) if isinstance(arg, (tuple, list)) else (arg,)
            if not (live() and _has_sym(vals)) or id(out) not in tracer.vals:
                return out
            name = tracer.vals[id(out)]
            for node in reversed(tracer.g.nodes):
                if node.outputs == [name]:
                    if node.op == op and len(node.kwargs.get(key, ())) == len(vals):
                        node.kwargs[symkey] = _symsize(vals)
                    break
            return out
        return fn

    put(F, "interpolate", sym_kwarg("upsample", "size", "symsize", F.interpolate))
    pad = sym_kwarg("pad", "pad", "sympad", F.pad)
    put(F, "pad", pad)
    return saved


def unpatch_sizes(saved):
    if _ACTIVE:
        _ACTIVE.pop()
    for owner, name, orig in reversed(saved):
        setattr(owner, name, orig)
