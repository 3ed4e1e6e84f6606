"""``torch.library``: define operators in Python and give them kernels, fake (meta)
implementations and gradient formulas.

Operators live in ``fiamma.ops.<namespace>.<name>`` (an ``OpOverloadPacket``, whose
``.default`` is the ``OpOverload``). Two ways to make one, as in PyTorch:

- :func:`custom_op` wraps a Python function (the schema is inferred from its annotations) and
  returns a :class:`CustomOpDef` with ``register_kernel`` / ``register_fake`` /
  ``register_autograd``;
- :class:`Library` ``("ns", "DEF")`` with ``.define("foo(Tensor x, float a=1.0) -> Tensor")``
  and ``.impl("foo", fn, "CPU")`` (keys ``CPU``, ``CUDA``, ``Meta``, ``Autograd``,
  ``CompositeImplicitAutograd``, ``CompositeExplicitAutograd``).

A call dispatches as PyTorch's dispatcher would for these keys: a traced call (fx Proxies)
records one graph node; with inputs that require grad, the ``Autograd`` kernel or the
``register_autograd`` formula; then the kernel of the inputs' device (the fake
implementation on the meta device). :func:`opcheck` tests a registration. Gradients
(``register_autograd``: ``setup_context(ctx, inputs, output)`` and ``backward(ctx, *grads)``)
run as a ``fiamma.autograd.Function`` (fiamma-autograd).

>>> import fiamma
>>> from fiamma.library import custom_op
>>> @custom_op("docs::scale", mutates_args=())
... def scale(x: fiamma.Tensor, k: float) -> fiamma.Tensor:
...     return x * k
>>> @scale.register_fake
... def _(x, k):
...     return fiamma.empty_like(x)
>>> fiamma.ops.docs.scale(fiamma.ones(2), 3.0).tolist()
[3.0, 3.0]
>>> scale(fiamma.ones(4, device="meta"), 2.0).shape
fiamma.Size([4])
"""

import weakref

from . import _op
from ._custom_op import CustomOpDef, _check_backward_args, _check_name, _device_list, custom_op
from ._op import OpOverload, OpOverloadPacket, get_ctx
from ._opcheck import opcheck
from ._schema import FunctionSchema, infer_schema, parse_schema

__all__ = ["Library", "impl", "define", "fallthrough_kernel", "impl_abstract",
           "register_fake", "register_kernel", "register_autograd", "get_ctx", "custom_op",
           "infer_schema", "opcheck", "CustomOpDef", "OpOverload", "OpOverloadPacket",
           "FunctionSchema", "parse_schema"]

_KINDS = ("DEF", "FRAGMENT", "IMPL")
_DEF_NAMESPACES = set()


class Library:
    """A set of definitions and kernels in namespace ``ns``: ``kind`` is "DEF" (defines the
    namespace; one per namespace), "FRAGMENT" (defines more of it) or "IMPL" (kernels only);
    ``dispatch_key`` is the default key of :meth:`impl`.

    >>> import fiamma
    >>> lib = Library("docslib", "DEF")
    >>> lib.define("axpy(Tensor x, Tensor y, *, float alpha=1.0) -> Tensor")
    'axpy'
    >>> lib.impl("axpy", lambda x, y, *, alpha=1.0: x * alpha + y, "CPU")
    >>> fiamma.ops.docslib.axpy(fiamma.ones(2), fiamma.ones(2), alpha=2.0).tolist()
    [3.0, 3.0]
    """

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if not isinstance(ns, str) or not ns.isidentifier():
            raise ValueError(f"Library: the namespace must be an identifier, got {ns!r}")
        if ns in ("aten", "prim", "prims") and kind == "DEF":
            raise ValueError(f"Library: {ns!r} is reserved (fiamma's own operators are Python "
                             "functions, not ops of a library)")
        if kind == "DEF":
            if ns in _DEF_NAMESPACES:
                raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the "
                                   f"namespace {ns}; please put all of your definitions in a "
                                   "single TORCH_LIBRARY block (use kind='FRAGMENT' to add "
                                   "to it, 'IMPL' for kernels).")
            _DEF_NAMESPACES.add(ns)
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._op_defs = []
        self._registrations = []  # (entry, attribute, key, old value)
        self._destroyed = False
        # as PyTorch's: a library that is garbage collected takes its registrations with it
        self._finalizer = weakref.finalize(self, _undo, self._registrations, self._op_defs,
                                           ns if kind == "DEF" else None)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define the operator of ``schema`` (PyTorch's schema syntax); returns its name."""
        if self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}, 'IMPL') cannot define operators "
                               "(use 'DEF' or 'FRAGMENT')")
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        op = _op.register_schema(schema, ns=self.ns)
        self._op_defs.append(op)
        name = op.overloadpacket.__name__
        return name if op._overloadname == "default" else f"{name}.{op._overloadname}"

    def _resolve(self, op_name):
        if isinstance(op_name, (OpOverload, OpOverloadPacket, CustomOpDef)):
            return _as_overload(op_name)
        if not isinstance(op_name, str):
            raise TypeError(f"impl should be passed either a name or an OpOverload object as "
                            f"the first argument, got {type(op_name).__name__}")
        qual = op_name if "::" in op_name else f"{self.ns}::{op_name}"
        return _as_overload(qual)

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=True):
        """Register ``fn`` as the kernel of ``op_name`` for ``dispatch_key`` (default: the
        library's, else ``CompositeImplicitAutograd``)."""
        if not callable(fn):
            raise TypeError(f"Input function is required to be a callable but found type "
                            f"{type(fn).__name__}")
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        if key not in _op.KNOWN_KEYS:
            raise ValueError(f"Library.impl({op_name!r}): unknown dispatch key {key!r} "
                             f"(fiamma has {', '.join(_op.KNOWN_KEYS)})")
        op = self._resolve(op_name)
        if with_keyset:
            raise NotImplementedError("Library.impl(with_keyset=True): fiamma has no dispatch "
                                      "key sets")
        entry = op._entry
        if key == "Meta":
            self._remember(entry, "kernels", key)
            entry.kernels[key] = fn
            return
        if not allow_override and key in entry.kernels:
            raise RuntimeError(f"{op.name()}: a kernel for {key} is already registered")
        self._remember(entry, "kernels", key)
        entry.kernels[key] = fn

    def fallback(self, fn, dispatch_key="", *, with_keyset=False):
        raise NotImplementedError("Library.fallback: fiamma has no boxed fallback kernels")

    def _register_fake(self, op_name, fn, _stacklevel=1, *, allow_override=True):
        op = self._resolve(op_name)
        self._remember(op._entry, "fake", None)
        op._entry.fake = fn

    def _remember(self, entry, attr, key):
        old = entry.kernels.get(key) if attr == "kernels" else getattr(entry, attr)
        self._registrations.append((entry, attr, key, old))

    def _destroy(self):
        """Undo this library's registrations and definitions."""
        self._finalizer()
        self._destroyed = True


def _undo(registrations, op_defs, def_ns):
    for entry, attr, key, old in reversed(registrations):
        if attr == "kernels":
            if old is None:
                entry.kernels.pop(key, None)
            else:
                entry.kernels[key] = old
        else:
            setattr(entry, attr, old)
            if attr == "autograd":
                entry._fn_cls = None
    registrations.clear()
    for op in op_defs:
        _op._drop(op)
    op_defs.clear()
    if def_ns is not None:
        _DEF_NAMESPACES.discard(def_ns)


def fallthrough_kernel():
    """A dummy kernel (PyTorch registers it to fall through a dispatch key)."""
    raise NotImplementedError("fallthrough_kernel() should never be called.")


def _as_overload(op):
    if isinstance(op, CustomOpDef):
        return op._opoverload
    if isinstance(op, OpOverload):
        return op
    if isinstance(op, OpOverloadPacket):
        return op._default()
    if isinstance(op, str):
        qual, _, overload = op.partition(".")
        _check_name(qual, "fiamma.library")
        if qual.startswith(("aten::", "prims::")):
            raise NotImplementedError(
                f"{op}: fiamma's built-in operators are Python functions, not entries of an "
                "operator library: they cannot be given kernels or formulas through "
                "fiamma.library (define an operator of your own namespace instead)")
        try:
            packet = _op.lookup(qual)
        except KeyError:
            raise ValueError(f"operator {qual!r} is not defined (define it with "
                             "fiamma.library.define, Library.define or custom_op)") from None
        return getattr(packet, overload) if overload else packet._default()
    raise TypeError(f"expected an operator (a 'ns::name' string, an OpOverload or a "
                    f"CustomOpDef), got {type(op).__name__}")


_keep_alive = []  # libraries made by the module-level functions live as long as the process


def _lib_for(qual, lib):
    if lib is not None:
        return lib
    lib = Library(qual.split("::")[0], "FRAGMENT")
    _keep_alive.append(lib)
    return lib


def define(qualname, schema, *, lib=None, tags=()):
    """Define the operator ``qualname`` ("ns::name") with ``schema`` (the arguments and
    returns, ``"(Tensor x) -> Tensor"``)."""
    ns, name = _check_name(qualname, "define")
    _lib_for(qualname, lib).define(name + schema, tags=tags)


_DEVICE_TO_KEY = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "default":
                  "CompositeExplicitAutograd"}


def impl(qualname, types, func=None, *, lib=None):
    """Register ``func`` as the kernel of ``qualname`` for the device types ``types``
    ("cpu", "cuda", a list; "default": all). As PyTorch, also the older form
    ``impl(lib, name, dispatch_key)`` (a decorator)."""
    if isinstance(qualname, Library):
        library, name, key = qualname, types, func if isinstance(func, str) else ""

        def reg(fn):
            library.impl(name, fn, key)
            return fn
        return reg
    if isinstance(types, str):
        types = [types]

    def reg(fn):
        op = _as_overload(qualname)
        library = _lib_for(op.overloadpacket._qualified_op_name, lib)
        for t in types:
            key = _DEVICE_TO_KEY.get(t, t)
            library.impl(op.overloadpacket.__name__ + (
                "" if op._overloadname == "default" else "." + op._overloadname), fn, key)
        return fn
    if func is None:
        return reg
    reg(func)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register ``func`` as ``op``'s implementation for ``device_types`` (None: all)."""
    if isinstance(op, CustomOpDef):
        return op.register_kernel(device_types, func)

    def reg(fn):
        o = _as_overload(op)
        library = _lib_for(o.overloadpacket._qualified_op_name, lib)
        for d in _device_list(device_types, "register_kernel"):
            key = "CompositeExplicitAutograd" if d is None else _op._DEVICE_KEYS[d]
            library._remember(o._entry, "kernels", key)
            o._entry.kernels[key] = fn
        return fn
    return reg if func is None else reg(func)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1, allow_override=True):
    """Register ``func`` as ``op``'s fake implementation (outputs with the right metadata,
    used on the meta device and by :func:`opcheck`)."""
    if isinstance(op, CustomOpDef):
        return op.register_fake(func) if func is not None else op.register_fake

    def reg(fn):
        o = _as_overload(op)
        _lib_for(o.overloadpacket._qualified_op_name, lib)._register_fake(o, fn)
        return fn
    return reg if func is None else reg(func)


impl_abstract = register_fake


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Give ``op`` a gradient formula: ``setup_context(ctx, inputs, output)`` and
    ``backward(ctx, *grads)`` returning one gradient per input (see
    :meth:`CustomOpDef.register_autograd`)."""
    if isinstance(op, CustomOpDef):
        return op.register_autograd(backward, setup_context=setup_context)
    o = _as_overload(op)
    _check_backward_args(o.name(), backward, setup_context)
    library = _lib_for(o.overloadpacket._qualified_op_name, lib)
    library._remember(o._entry, "autograd", None)
    o._entry.autograd = (backward, setup_context)
    o._entry._fn_cls = None


def register_autocast(op, device_type, cast_inputs, /, *, lib=None):
    raise NotImplementedError("fiamma.library.register_autocast: fiamma has no autocast "
                              "dispatch for registered operators")


def register_vmap(op, func=None, /, *, lib=None):
    raise NotImplementedError("fiamma.library.register_vmap: fiamma.func.vmap does not "
                              "dispatch to registered operators")
