"""``torch.ops``: the operator namespaces. ``fiamma.ops.<namespace>.<name>`` is an operator
defined with :mod:`fiamma.library` (``custom_op``, ``Library.define``): an
``OpOverloadPacket`` whose ``.default`` is the ``OpOverload``; both are callable. fiamma's own
ops are the Python functions of ``fiamma`` (``fiamma.ops.aten`` names them as ATen overloads for
``__torch_dispatch__``, see fiamma._aten); the
``profiler`` namespace holds the calls graph code uses to open and close a labelled range
(torch.fx's profiling tracer emits them).

>>> import fiamma
>>> from fiamma.profiler import profile
>>> with profile() as prof:
...     h = fiamma.ops.profiler._record_function_enter("block")
...     y = fiamma.ones(2) + 1
...     fiamma.ops.profiler._record_function_exit(h)
>>> "block" in [e.name for e in prof.events()]
True
>>> lib = fiamma.library.Library("ops_doc", "DEF")
>>> lib.define("double(Tensor x) -> Tensor")
'double'
>>> lib.impl("double", lambda x: x * 2, "CPU")
>>> fiamma.ops.ops_doc.double(fiamma.ones(2)).tolist()
[2.0, 2.0]
"""


import sys


def _registry():
    # the operators fiamma.library defined (none before it is imported: no import here)
    mod = sys.modules.get("fiamma.library._op")
    return {} if mod is None else mod._REGISTRY


class _Namespace:
    def __init__(self, name, doc):
        self.__name__ = f"fiamma.ops.{name}"
        self.__doc__ = doc

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        ns = self.__name__.rsplit(".", 1)[1]
        packet = _registry().get(f"{ns}::{op}")
        if packet is not None:
            return packet
        if ns == "aten":  # the ATen ops __torch_dispatch__ sees (fiamma._python_dispatch)
            import importlib

            importlib.import_module("fiamma._python_dispatch")
            return importlib.import_module("fiamma._aten").packet(op)
        raise AttributeError(f"fiamma.ops.{ns} has no operator {op!r} (define it with "
                             "fiamma.library.custom_op or Library.define)")

    def __repr__(self):
        return f"<module '{self.__name__}' from 'fiamma.ops'>"


def _enter(name, args=None):
    """Open a labelled range (as ``record_function(name).__enter__()``); returns its handle."""
    from fiamma.profiler import record_function

    r = record_function(name, args)
    r.__enter__()
    return r


def _exit(handle):
    """Close the range ``handle`` opened by ``_record_function_enter``."""
    from fiamma.profiler import record_function

    if not isinstance(handle, record_function):
        tracer = getattr(handle, "tracer", None) if type(handle).__module__.startswith(
            "fiamma.fx") else None
        if tracer is not None:  # a torch.fx Proxy: record the call in its graph
            return tracer.create_proxy("call_function", _exit, (handle,), {})
        raise TypeError("_record_function_exit: expected the handle _record_function_enter "
                        f"returned, got {type(handle).__name__}")
    handle.__exit__(None, None, None)


profiler = _Namespace("profiler", "Profiler ranges as operators.")
profiler._record_function_enter = _enter
profiler._record_function_enter_new = _enter
profiler._record_function_exit = _exit
aten = _Namespace("aten", "ATen's operators as __torch_dispatch__ sees them (fiamma._aten): "
                         "fiamma's ops are Python functions reported under ATen's names.")


_namespaces = {}


def __getattr__(name):
    """``fiamma.ops.<ns>``: the namespace of the operators defined in ``ns``. (PyTorch answers
    any name; fiamma only those of namespaces with operators, so that probes such as
    ``hasattr(fiamma.ops, "pytest_plugins")`` stay false.)"""
    if name.startswith("__") or not name.isidentifier():
        raise AttributeError(name)
    ns = _namespaces.get(name)
    if ns is None:
        if not any(q.startswith(name + "::") for q in _registry()):
            raise AttributeError(f"fiamma.ops has no namespace {name!r}: no operator is "
                                 f"defined in it (fiamma.library.custom_op('{name}::...') or "
                                 f"Library('{name}', 'DEF').define(...) define them)")
        ns = _namespaces[name] = _Namespace(name, f"Operators defined in the {name!r} "
                                            "namespace (fiamma.library).")
    return ns
