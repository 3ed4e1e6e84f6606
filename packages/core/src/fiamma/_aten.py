"""ATen-style operator overloads for ``__torch_dispatch__`` (``fiamma.ops.aten.<op>.<overload>``).

fiamma's ops are Python functions; a tensor subclass defining ``__torch_dispatch__`` (or a
``TorchDispatchMode``) sees them as PyTorch's ATen overloads: ``aten.add.Tensor``,
``aten.mm.default``... (see fiamma._python_dispatch for which fiamma function reports which).
Each overload here prints as PyTorch's, has ``overloadpacket``, ``name()``, a parsed
``_schema`` (fiamma.library's parser, on first read), hashes by identity (a key in handler
tables) and, called, runs the computation through fiamma's public functions: on plain tensors
the op itself, on subclass instances a dispatch to them again (as calling an ATen op does).

>>> import fiamma
>>> add = fiamma.ops.aten.add.Tensor
>>> str(add), add.name(), add.overloadpacket is fiamma.ops.aten.add
('aten.add.Tensor', 'aten::add.Tensor', True)
>>> add(fiamma.ones(2), fiamma.ones(2), alpha=2).tolist()
[3.0, 3.0]
"""

import importlib

__all__ = ["OpOverload", "OpOverloadPacket", "packet", "overload", "PACKETS"]

PACKETS = {}  # name -> OpOverloadPacket


class OpOverload:
    """One ATen overload (``aten.add.Tensor``)."""

    __slots__ = ("overloadpacket", "_overloadname", "_text", "_parsed", "_impl", "__name__",
                 "__qualname__", "is_view", "is_inplace")

    def __init__(self, packet, overload, text, impl, is_view=False):
        self.overloadpacket = packet
        self._overloadname = overload
        self._text = text
        self._parsed = None
        self._impl = impl
        self.__name__ = f"{packet.__name__}.{overload}"
        self.__qualname__ = self.__name__
        self.is_view = is_view
        self.is_inplace = packet.__name__.endswith("_") and not packet.__name__.startswith("_")

    @property
    def __module__(self):
        return "fiamma.ops.aten"

    @property
    def op(self):
        return self

    @property
    def namespace(self):
        return "aten"

    @property
    def _schema(self):
        if self._parsed is None:
            S = importlib.import_module("fiamma.library._schema")
            self._parsed = S.parse_schema(f"aten::{self._text}")
        return self._parsed

    def name(self):
        n = f"aten::{self.overloadpacket.__name__}"
        return n if self._overloadname == "default" else f"{n}.{self._overloadname}"

    def __call__(self, /, *args, **kwargs):
        return self._impl(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='aten.{self.overloadpacket.__name__}', " \
               f"overload='{self._overloadname}')>"

    def __str__(self):
        return f"aten.{self.__name__}"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __reduce__(self):
        return (overload, (self.overloadpacket.__name__, self._overloadname))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class OpOverloadPacket:
    """All overloads of one ATen op (``aten.add``): ``aten.add.Tensor``; calling it calls the
    overload the arguments select (the first whose parameters bind)."""

    def __init__(self, name):
        self.__name__ = name
        self.__qualname__ = name
        self._overloads = {}

    @property
    def __module__(self):
        return "fiamma.ops.aten"

    @property
    def _qualified_op_name(self):
        return f"aten::{self.__name__}"

    def overloads(self):
        return list(self._overloads)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.__dict__["_overloads"][name]
        except KeyError:
            raise AttributeError(f"fiamma.ops.aten.{self.__name__} has no overload {name!r} "
                                 f"(fiamma has: {', '.join(self._overloads)})") from None

    def __call__(self, /, *args, **kwargs):
        ovs = self._overloads
        if len(ovs) == 1 or "default" in ovs:
            return (ovs.get("default") or next(iter(ovs.values())))(*args, **kwargs)
        raise TypeError(f"aten.{self.__name__}: call one of its overloads "
                        f"({', '.join(ovs)}), fiamma does not select one from the arguments")

    def __repr__(self):
        return f"<OpOverloadPacket(op='aten.{self.__name__}')>"

    def __str__(self):
        return f"aten.{self.__name__}"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __reduce__(self):
        return (packet, (self.__name__,))


def packet(name):
    """The packet ``aten.<name>`` (AttributeError naming it when fiamma reports no such op)."""
    p = PACKETS.get(name)
    if p is None:
        raise AttributeError(f"fiamma.ops.aten has no operator {name!r}: fiamma reports the ATen "
                             "ops listed in docs/porting.md (__torch_dispatch__)")
    return p


def overload(name, ov):
    return getattr(packet(name), ov)


def define(qual, args_text, impl, is_view=False):
    """Define ``aten.<name>.<overload>`` with schema ``name.overload(args_text)`` run by
    ``impl``; returns the overload."""
    name, _, ov = qual.partition(".")
    ov = ov or "default"
    p = PACKETS.get(name)
    if p is None:
        p = PACKETS[name] = OpOverloadPacket(name)
    head = name if ov == "default" else f"{name}.{ov}"
    o = OpOverload(p, ov, f"{head}{args_text}", impl, is_view)
    p._overloads[ov] = o
    return o


class _AnyMeta(type):
    def __instancecheck__(cls, obj):
        import sys

        lib = sys.modules.get("fiamma.library._op")
        kinds = (cls._aten,) + ((getattr(lib, cls.__name__),) if lib is not None else ())
        return isinstance(obj, kinds)

    def __subclasscheck__(cls, sub):
        import sys

        lib = sys.modules.get("fiamma.library._op")
        kinds = (cls._aten,) + ((getattr(lib, cls.__name__),) if lib is not None else ())
        return issubclass(sub, kinds)


class _AnyOverload(metaclass=_AnyMeta):
    """``torch._ops.OpOverload`` for isinstance checks: an ATen overload or a
    fiamma.library operator's."""

    _aten = OpOverload


class _AnyPacket(metaclass=_AnyMeta):
    """``torch._ops.OpOverloadPacket`` for isinstance checks."""

    _aten = OpOverloadPacket


_AnyOverload.__name__ = _AnyOverload.__qualname__ = "OpOverload"
_AnyPacket.__name__ = _AnyPacket.__qualname__ = "OpOverloadPacket"
ANY = {"OpOverload": _AnyOverload, "OpOverloadPacket": _AnyPacket}
