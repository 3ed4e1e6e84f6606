"""``torch.ops``: the operator namespaces. fiamma registers no operator library (no
``torch.library``, no custom C++ operators, no ``torch.ops.aten`` overloads: its ops are the
Python functions of ``fiamma``); what it has is the ``profiler`` namespace that graph code
uses to open and close a labelled range (torch.fx's profiling tracer emits these calls).

>>> import fiamma
>>> from fiamma.profiler import profile
>>> with profile() as prof:
...     h = fiamma.ops.profiler._record_function_enter("block")
...     y = fiamma.ones(2) + 1
...     fiamma.ops.profiler._record_function_exit(h)
>>> "block" in [e.name for e in prof.events()]
True
"""


class _Namespace:
    def __init__(self, name, doc):
        self.__name__ = f"fiamma.ops.{name}"
        self.__doc__ = doc

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        raise AttributeError(f"fiamma.ops.{self.__name__.rsplit('.', 1)[1]} has no operator "
                             f"{op!r} (fiamma.ops has only profiler._record_function_enter, "
                             "_record_function_enter_new and _record_function_exit)")


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
aten = _Namespace("aten", "ATen's operators: not provided (fiamma's ops are Python functions).")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"fiamma.ops has no namespace {name!r}: fiamma registers no operator "
                         "libraries (only fiamma.ops.profiler exists)")
