"""The operator registry and its dispatch: ``fiamma.ops.<ns>.<name>.<overload>`` objects.

A call goes, in order: an fx Proxy among the arguments records one ``call_function`` node;
a ``CompositeImplicitAutograd`` kernel runs as is; with gradients wanted, the ``Autograd``
kernel, the formula of ``register_autograd`` (an ``autograd.Function``), or (a ``custom_op``
without one) an output whose backward raises; then the kernel for the inputs' device
(``Meta``/fake on the meta device), else the default kernel.
"""

import threading

from fiamma import _grad_hook
from fiamma._tensor import Tensor

from ._schema import parse_schema

__all__ = ["OpOverload", "OpOverloadPacket", "lookup", "register_schema", "get_ctx"]

# "ns::name" -> OpOverloadPacket
_REGISTRY = {}

_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xp": "CPU"}
KNOWN_KEYS = ("CPU", "CUDA", "Meta", "Autograd", "AutogradCPU", "AutogradCUDA",
              "CompositeImplicitAutograd", "CompositeExplicitAutograd")


class _Entry:
    """What is registered for one overload."""

    def __init__(self, schema):
        self.schema = schema
        self.kernels = {}
        self.fake = None
        self.autograd = None  # (backward, setup_context)
        self.custom = None  # the CustomOpDef that defined it
        self.disabled = set()
        self._fn_cls = None
        # the positions of the arguments the op writes (their version counters move after a
        # call, so a tensor saved for backward before it is seen to be stale, as in PyTorch)
        self.written = [i for i, a in enumerate(schema.arguments) if a.is_write]


class OpOverload:
    """One overload of an operator (``fiamma.ops.mylib.foo.default``): call it like the op."""

    def __init__(self, packet, overload, entry):
        self._entry = entry
        self._schema = entry.schema
        self._overloadname = overload
        self.overloadpacket = packet
        self.op = self
        ns, name = packet._qualified_op_name.split("::")
        self.namespace = ns
        self.__name__ = f"{name}.{overload}"
        self.__qualname__ = self.__name__
        self.__module__ = f"fiamma.ops.{ns}"
        self._fx_expr = f"ops.{ns}.{name}.{overload}"  # how fx's generated code names it

    def name(self):
        return self.overloadpacket._qualified_op_name + (
            "" if self._overloadname == "default" else "." + self._overloadname)

    def __call__(self, /, *args, **kwargs):
        return dispatch(self, args, kwargs)

    def __repr__(self):
        ns, name = self.overloadpacket._qualified_op_name.split("::")
        return f"<OpOverload(op='{ns}.{name}', overload='{self._overloadname}')>"

    def __str__(self):
        return f"{self.namespace}.{self.__name__}"

    def __hash__(self):
        return id(self)

    def __reduce__(self):
        return (_resolve, (self.overloadpacket._qualified_op_name, self._overloadname))

    def __copy__(self):
        return self  # an operator is a registry entry: copies of a graph share it

    def __deepcopy__(self, memo):
        return self


def _resolve(qualname, overload):
    return getattr(lookup(qualname), overload)


class OpOverloadPacket:
    """All overloads of one operator (``fiamma.ops.mylib.foo``); calling it calls the
    ``default`` overload (or the only one)."""

    def __init__(self, qualname):
        self._qualified_op_name = qualname
        ns, name = qualname.split("::")
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = f"fiamma.ops.{ns}"
        self._overloads = {}
        self._fx_expr = f"ops.{ns}.{name}"

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        ovl = self.__dict__.get("_overloads", {}).get(overload)
        if ovl is None:
            raise AttributeError(f"The underlying op of '{self}' has no overload name "
                                 f"'{overload}' (it has {sorted(self._overloads)})")
        return ovl

    def overloads(self):
        return list(self._overloads)

    def _default(self):
        if "default" in self._overloads:
            return self._overloads["default"]
        if len(self._overloads) == 1:
            return next(iter(self._overloads.values()))
        raise RuntimeError(f"{self._qualified_op_name}: several overloads "
                           f"({sorted(self._overloads)}) and none is 'default': call one of "
                           "them by name")

    @property
    def _schemas(self):
        return {k: v._schema for k, v in self._overloads.items()}

    def __call__(self, /, *args, **kwargs):
        return self._default()(*args, **kwargs)

    def __repr__(self):
        ns, name = self._qualified_op_name.split("::")
        return f"<OpOverloadPacket(op='{ns}.{name}')>"

    def __str__(self):
        return self._qualified_op_name.replace("::", ".")

    def __reduce__(self):
        return (lookup, (self._qualified_op_name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def lookup(qualname):
    """The OpOverloadPacket of ``ns::name`` (KeyError if it is not defined)."""
    return _REGISTRY[qualname]


def register_schema(schema_text, ns=None):
    """Define the operator of ``schema_text``; returns its OpOverload."""
    schema = parse_schema(schema_text)
    if "::" not in schema.name:
        if ns is None:
            raise RuntimeError(f"schema {schema_text!r}: expected a name 'namespace::op'")
        schema.name = f"{ns}::{schema.name}"
    elif ns is not None and not schema.name.startswith(ns + "::"):
        raise ValueError(f"define: the schema's namespace {schema.name.split('::')[0]!r} is "
                         f"not this library's namespace {ns!r}")
    qualname = schema.name
    packet = _REGISTRY.get(qualname)
    overload = schema.overload_name or "default"
    if packet is not None and overload in packet._overloads:
        raise RuntimeError(f"Tried to register an operator ({schema}) with the same name and "
                           "overload name multiple times. Each overload's schema should only "
                           "be registered with a single call to def(). Original registration: "
                           f"{packet._overloads[overload]._schema}")
    if packet is None:
        packet = _REGISTRY[qualname] = OpOverloadPacket(qualname)
    op = OpOverload(packet, overload, _Entry(schema))
    packet._overloads[overload] = op
    return op


def _drop(op):
    """Remove ``op`` (an OpOverload) from the registry (``Library._destroy``)."""
    packet = op.overloadpacket
    packet._overloads.pop(op._overloadname, None)
    if not packet._overloads:
        _REGISTRY.pop(packet._qualified_op_name, None)


# ---- argument binding ---------------------------------------------------------------------

def _type_ok(arg, v):
    if v is None:
        return arg.is_optional or arg.type in ("Tensor?[]",)
    base = arg.base
    if arg.is_list:
        if isinstance(v, Tensor) or not isinstance(v, (list, tuple)):
            return base in ("SymInt", "int") and isinstance(v, int) and arg.fixed_size
        return all(_type_ok(_elem(arg), x) for x in v)
    if base == "Tensor":
        return isinstance(v, Tensor)
    if base in ("int", "SymInt"):
        return isinstance(v, int) or (isinstance(v, Tensor) and v.ndim == 0
                                      and not v.is_floating_point())
    if base in ("float", "SymFloat"):
        return isinstance(v, (int, float)) or (isinstance(v, Tensor) and v.ndim == 0)
    if base in ("bool", "SymBool"):
        return isinstance(v, bool)
    if base == "str":
        return isinstance(v, str)
    if base == "Scalar":
        return isinstance(v, (int, float, bool, complex)) or (
            isinstance(v, Tensor) and v.ndim == 0)
    return True


class _ElemArg:
    def __init__(self, base, optional):
        self.base = base
        self.is_optional = optional
        self.is_list = False
        self.type = base + ("?" if optional else "")
        self.fixed_size = None


def _elem(arg):
    return _ElemArg(arg.base, arg.type.startswith(arg.base + "?"))


def _typename(v):
    return "Tensor" if isinstance(v, Tensor) else type(v).__name__


class _Decl:
    """``Declaration: <schema>`` for error messages, formatted only when one is raised."""

    def __init__(self, schema):
        self.schema = schema

    def __format__(self, spec):
        return f"Declaration: {self.schema}"


def bind(schema, args, kwargs):
    """(positional values, keyword-only values) of a call, defaults filled in, checked
    against the schema as PyTorch's dispatcher checks them."""
    qual = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    pos_args = [a for a in schema.arguments if not a.kwarg_only]
    decl = _Decl(schema)
    if len(args) > len(pos_args):
        raise RuntimeError(f"{qual}() takes {len(pos_args)} positional argument(s) but "
                           f"{len(args)} was/were given.  {decl}")
    names = {a.name for a in schema.arguments}
    for k in kwargs:
        if k not in names:
            raise RuntimeError(f"Unknown keyword argument '{k}' for operator '{qual}'. "
                               f"Schema: {schema}")
    pos, kw = [], {}
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            if a.name in kwargs:
                raise RuntimeError(f"{qual}() got multiple values for argument '{a.name}'. "
                                   f"{decl}")
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        elif a.has_default_value:
            v = a.default_value
            if isinstance(v, list):
                v = list(v)
        else:
            raise RuntimeError(f"{qual}() is missing value for argument '{a.name}'. {decl}")
        if not _type_ok(a, v):
            raise RuntimeError(f"{qual}() Expected a value of type '{a.type}' for argument "
                               f"'{a.name}' but instead found type '{_typename(v)}'.\n"
                               f"Position: {i}\nValue: {v!r}\n{decl}")
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    return pos, kw


def iter_tensors(values):
    for v in values:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, Tensor):
                    yield x


def _find_proxy(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            p = _find_proxy(v)
            if p is not None:
                return p
        elif isinstance(v, dict):
            p = _find_proxy(list(v.values()))
            if p is not None:
                return p
        elif type(v).__module__.startswith("fiamma.fx") and hasattr(v, "tracer") \
                and hasattr(v, "node"):
            return v
    return None


# ---- fake implementations' context ---------------------------------------------------------

_state = threading.local()


class FakeImplCtx:
    """What ``get_ctx()`` gives inside a fake implementation."""

    def __init__(self, op, on_meta):
        self._op = op
        self._on_meta = on_meta

    def new_dynamic_size(self, *, min=0, max=None):
        """A size that depends on the data. On meta tensors there is no data:
        raises as PyTorch's (a traced run on real inputs gets a concrete int)."""
        if self._on_meta:
            raise RuntimeError(
                f"{self._op.name()}: You're trying to run this operator with meta Tensors "
                "(as opposed to FakeTensors), but this operator may return an output Tensor "
                "with data-dependent shape. Meta Tensors don't support operators with outputs "
                "that have data-dependent shapes but FakeTensors do. If your operator does not "
                "return an output with data-dependent shape, make sure the FakeTensor and/or "
                "meta kernel does not call ctx.new_dynamic_size(); otherwise run it on real "
                "tensors.")
        if min < 0:
            raise ValueError(f"new_dynamic_size: min must be >= 0, got {min}")
        size = self._size_hint
        if size is None:
            size = min
        if size < min or (max is not None and size > max):
            raise RuntimeError(f"new_dynamic_size: the size {size} is outside [{min}, {max}]")
        return size

    new_dynamic_size_hint = None
    _size_hint = None


class AutoDispatchBelowAutograd:
    """``with AutoDispatchBelowAutograd():`` calls of registered operators skip their autograd
    kernels and formulas (PyTorch's ``torch._C._AutoDispatchBelowAutograd``, used by an
    ``Autograd`` kernel to call the operator's backend kernel)."""

    def __enter__(self):
        self._prev = getattr(_state, "below", False)
        _state.below = True
        return self

    def __exit__(self, *exc):
        _state.below = self._prev
        return False


def get_ctx():
    """The context of the fake implementation that is running (``new_dynamic_size``)."""
    return getattr(_state, "ctx", None)


def run_fake(op, fn, args, kwargs, on_meta=True, size_hint=None):
    """Call a fake implementation with its ``get_ctx()`` set."""
    prev = getattr(_state, "ctx", None)
    ctx = FakeImplCtx(op, on_meta)
    ctx._size_hint = size_hint
    _state.ctx = ctx
    try:
        return fn(*args, **kwargs)
    finally:
        _state.ctx = prev


# ---- dispatch -----------------------------------------------------------------------------

def _device_type(values):
    for t in iter_tensors(values):
        return t.device.type
    return "cpu"


def _kernel_for(op, dev):
    e = op._entry
    key = _DEVICE_KEYS.get(dev, dev.upper())
    if dev not in e.disabled:
        k = e.kernels.get(key)
        if k is not None:
            return k
    return e.kernels.get("CompositeExplicitAutograd")


def below_autograd(op, pos, kw):
    """Run the kernel for the inputs' device (the fake implementation on the meta device)."""
    e = op._entry
    dev = _device_type(list(pos) + list(kw.values()))
    if dev == "meta":
        fn = e.kernels.get("Meta")
        if fn is not None:
            return fn(*pos, **kw)
        if e.fake is None:
            raise NotImplementedError(
                f"{op.name()}: attempted to run this operator with Meta tensors, but there "
                "was no fake impl or Meta kernel registered (register one with "
                "fiamma.library.register_fake).")
        return run_fake(op, e.fake, pos, kw)
    fn = _kernel_for(op, dev) or e.kernels.get("CompositeImplicitAutograd")
    if fn is None:
        key = _DEVICE_KEYS.get(dev, dev.upper())
        have = sorted(e.kernels) + (["fake"] if e.fake is not None else [])
        raise NotImplementedError(
            f"Could not run '{op.name()}' with arguments from the '{key}' backend: it has no "
            f"kernel for {key} (registered: {', '.join(have) or 'none'}).")
    out = fn(*pos, **kw)
    if e.written:
        values = list(pos) + list(kw.values())
        for t in iter_tensors([values[i] for i in e.written]):
            t._bump()
    if e.custom is not None:
        _check_outputs(op, pos, kw, out)
    return out


def _check_outputs(op, pos, kw, out):
    rets = op._schema.returns
    if not rets:
        if out is not None:
            raise RuntimeError(f"{op.name()}: the schema returns nothing ({op._schema}) but "
                               f"the implementation returned {type(out).__name__}")
        return
    outs = out if isinstance(out, (tuple, list)) and len(rets) > 1 else (out,)
    if len(rets) > 1 and (not isinstance(out, (tuple, list)) or len(out) != len(rets)):
        raise RuntimeError(f"{op.name()}: the schema returns {len(rets)} values "
                           f"({op._schema}) but the implementation returned "
                           f"{type(out).__name__}")
    for r, o in zip(rets, outs):
        if not _type_ok(r, o) or (o is None and not r.is_optional):
            raise RuntimeError(f"{op.name()}: the schema ({op._schema}) returns {r.type} but "
                               f"the implementation returned {_typename(o)}")
    ins = list(iter_tensors(list(pos) + list(kw.values())))
    seen = []
    for o in iter_tensors(outs):
        st = _storage_key(o)
        if any(o is t or (st is not None and st == _storage_key(t)) for t in ins + seen):
            fn = op._entry.custom._init_fn
            raise RuntimeError(
                f"{fn.__name__} (with implementation in {fn.__module__}): The output of this "
                "custom operator (1) must not also be an input to this custom operator and (2) "
                "may not alias any inputs to this custom operator or other returns. The most "
                "common way to trigger this error is if we have y = custom_op(x) and y and x "
                "are the same Tensor. Please instead return a clone of the offending output "
                "tensor(s) (e.g. return x.clone()) or refactor the custom operator to not "
                "return y.")
        seen.append(o)


def _storage_key(t):
    """What tells whether two tensors share memory (views share their storage object)."""
    st = getattr(t, "_storage", None)
    if st is None or t.numel() == 0 or t.device.type == "meta":
        return None
    return id(st)


def dispatch(op, args, kwargs):
    proxy = _find_proxy(list(args) + list(kwargs.values()))
    if proxy is not None:
        return proxy.tracer.create_proxy("call_function", op, tuple(args), dict(kwargs))
    pos, kw = bind(op._schema, args, kwargs)
    tracer = _grad_hook.state.tracer
    if tracer is not None and hasattr(tracer, "library_op"):
        # fiamma.jit.trace: one node for the operator, its inside not traced
        return tracer.library_op(op, pos, kw, lambda: dispatch_bound(op, pos, kw))
    return dispatch_bound(op, pos, kw)


def dispatch_bound(op, pos, kw):
    """The call of ``op`` on bound arguments (see the module docstring for the order)."""
    e = op._entry
    values = pos + list(kw.values())
    dev = _device_type(values)
    composite = e.kernels.get("CompositeImplicitAutograd")
    if composite is not None and _kernel_for(op, dev) is None and dev != "meta" \
            and "Autograd" not in e.kernels:
        return composite(*pos, **kw)
    if _grad_hook.is_grad_enabled() and not getattr(_state, "below", False) and \
            any(t.requires_grad for t in iter_tensors(values)):
        key = _DEVICE_KEYS.get(dev, dev.upper())
        k = e.kernels.get("Autograd" + key) or e.kernels.get("Autograd")
        if k is not None:
            return k(*pos, **kw)
        if e.autograd is not None or e.custom is not None:
            from ._autograd import apply

            return apply(op, pos, kw)
    return below_autograd(op, pos, kw)
