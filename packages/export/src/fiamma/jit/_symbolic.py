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
"mul"|"floordiv"|"mod", a, b)``, ``("neg", a)``; after ``_resolve`` the Value is a tensor.
"""

import operator

import fiamma
from fiamma import Tensor

from ._errors import TracingError
from ._graph import Value

__all__ = ["SymInt", "evaluate", "sizes", "patch_sizes"]

_BIG = 2 ** 63 - 1  # a slice without a stop

_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
        "floordiv": operator.floordiv, "mod": operator.mod}


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


def _expr(v):
    return v.expr if isinstance(v, SymInt) else int(v)


def _binop(name, swap=False):
    fn = _OPS[name]

    def method(self, other):
        if not isinstance(other, int):  # floats, tensors, sequences: as a plain int
            return fn(other, int(self)) if swap else fn(int(self), other)
        a, b = (other, self) if swap else (self, other)
        return SymInt(fn(int(a), int(b)), (name, _expr(a), _expr(b)))
    return method


for _n in _OPS:
    setattr(SymInt, f"__{_n}__", _binop(_n))
    setattr(SymInt, f"__r{_n}__", _binop(_n, swap=True))


def evaluate(e):
    """The value of an expression whose Values were resolved to tensors."""
    if isinstance(e, tuple):
        op = e[0]
        if op == "dim":
            return int(e[1].shape[e[2]])
        if op == "neg":
            return -evaluate(e[1])
        if op not in _OPS:
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


def patch_sizes(tracer):
    """Wrap the size readers and size takers for the trace; returns what to restore."""
    saved = []

    def put(owner, name, fn, is_property=False):
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        saved.append((owner, name, orig))
        setattr(owner, name, property(fn) if is_property else fn)
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

    def perm_like(meth):
        """The logical permutation (core records the strides, and a permutation that moves
        only size-1 dims looks like a reshape, which another size would not follow)."""
        orig = Tensor.__dict__[meth]

        def fn(self, *a):
            out = orig(self, *a)
            nd = len(self._shape)
            if out is self or nd < 2 or not mine(self):
                return out
            if meth == "permute":
                dims = tuple(int(d) % nd for d in _size_arg(a))
            elif meth == "t":
                dims = (1, 0)
            else:
                dims = list(range(nd))
                i, j = int(a[0]) % nd, int(a[1]) % nd
                dims[i], dims[j] = dims[j], dims[i]
                dims = tuple(dims)
            if dims == tuple(range(nd)):
                return out
            return record_node("permute", self, out, {"arg": dims})
        put(Tensor, meth, fn)

    for m in ("permute", "transpose", "swapaxes", "swapdims", "t"):
        perm_like(m)

    unsqueeze_orig, squeeze_orig = Tensor.__dict__["unsqueeze"], Tensor.__dict__["squeeze"]

    def unsqueeze(self, dim):
        """As itself: inserting a size-1 dim next to a size-1 batch looks like a reshape."""
        out = unsqueeze_orig(self, dim)
        if not mine(self):
            return out
        return record_node("unsqueeze", self, out, {"dim": int(dim) % (self.dim() + 1)})

    def squeeze(self, dim=None):
        out = squeeze_orig(self, dim)
        if out is self or not mine(self) or out.dim() == self.dim():
            return out
        nd = self.dim()
        ds = range(nd) if dim is None else \
            [int(d) % nd for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
        gone = tuple(sorted({d for d in ds if self._shape[d] == 1}))
        return record_node("squeeze", self, out, {"dim": gone})

    put(Tensor, "unsqueeze", unsqueeze)
    put(Tensor, "squeeze", squeeze)

    def tri_like(name):
        """tril/triu as themselves (core applies them as a where with a mask of this size)."""
        orig = getattr(fiamma, name)

        def fn(input, diagonal=0, **kw):
            out = orig(input, diagonal, **kw)
            if kw.get("out") is not None or not mine(input) or out is input:
                return out
            return record_node(name, input, out, {"diagonal": int(diagonal)})
        put(fiamma, name, fn)
        if Tensor.__dict__.get(name) is orig:
            put(Tensor, name, fn)

    tri_like("tril")
    tri_like("triu")

    getitem_orig = Tensor.__dict__["__getitem__"]

    def _is_int(i):
        return isinstance(i, int) and not isinstance(i, bool)

    def _from_end(v):
        return v is not None and (isinstance(v, SymInt) or (_is_int(v) and v < 0))

    def getitem(self, idx):
        """Basic indexing whose positions depend on the size: bounds read from shapes
        (nanoGPT's ``bias[:, :, :T, :T]``) or counted from the end (``out[:, -1]``,
        ``x[..., -3:]``), which the strides of this trace would fix to this size's positions."""
        out = getitem_orig(self, idx)
        if not live() or not isinstance(out, Tensor):
            return out
        items = idx if isinstance(idx, tuple) else (idx,)
        if not all(isinstance(i, slice) or i is Ellipsis or i is None or _is_int(i)
                   for i in items):
            return out  # tensor/bool/list indices: recorded by core
        if not any(_from_end(v) for i in items for v in (
                (i.start, i.stop) if isinstance(i, slice) else (i,) if _is_int(i) else ())):
            return out  # positions from the start: the same at every size
        real = [i for i in items if i is not None and i is not Ellipsis]
        if sum(i is Ellipsis for i in items) > 1 or len(real) > self.dim():
            return out
        if Ellipsis in items:
            k = items.index(Ellipsis)
            items = items[:k] + (slice(None),) * (self.dim() - len(real)) + items[k + 1:]
        arg, syms, drop, new = [], [], [], []
        ax = pos = 0
        for i in items:
            if i is None:
                new.append(pos)
                pos += 1
                continue
            if isinstance(i, slice):
                pos += 1
                if i == slice(None):
                    ax += 1
                    continue
                start = 0 if i.start is None else i.start
                stop = _BIG if i.stop is None else i.stop
                step = 1 if i.step is None else i.step
            else:
                start, step = i, 1
                stop = _BIG if (not isinstance(i, SymInt) and i == -1) else i + 1
                drop.append(ax)
            arg.append((ax, int(start), int(stop), int(step)))
            syms.append(tuple(v.expr if isinstance(v, SymInt) else None
                              for v in (start, stop)))
            ax += 1
        steps = [("slice", {"arg": tuple(arg), "symsize": syms})]
        if drop:
            steps.append(("squeeze", {"dim": tuple(drop)}))
        for p in new:
            steps.append(("unsqueeze", {"dim": p}))
        return record_chain(self, out, steps)

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

    put(Tensor, "__getitem__", getitem)
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

    interp_orig = F.interpolate

    def interpolate(input, size=None, *a, **kw):
        """``size=`` read from shapes (a skip connection's ``shape[2:]``): the recorded
        upsample node gets the expressions."""
        out = interp_orig(input, size, *a, **kw)
        sz = tuple(size) if isinstance(size, (tuple, list)) else (size,)
        if not (live() and _has_sym(sz)) or id(out) not in tracer.vals:
            return out
        name = tracer.vals[id(out)]
        for node in reversed(tracer.g.nodes):
            if node.outputs == [name]:
                if node.op == "upsample" and len(node.kwargs.get("size", ())) == len(sz):
                    node.kwargs["symsize"] = _symsize(sz)
                break
        return out

    put(F, "interpolate", interpolate)
    return saved


def unpatch_sizes(saved):
    for owner, name, orig in reversed(saved):
        setattr(owner, name, orig)
