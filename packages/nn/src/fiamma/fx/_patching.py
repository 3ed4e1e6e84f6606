"""What a symbolic trace replaces while it runs (and restores afterwards)."""

import functools

from .proxy import has_proxy

# fiamma's function namespaces: while a trace runs, their functions record a node when called
# with a Proxy (PyTorch gets the same from __torch_function__)
_FUNCTION_MODULES = ("fiamma", "fiamma.nn.functional", "fiamma.linalg", "fiamma.special",
                     "fiamma.fft")


class _Patcher:
    """Replaces attributes while a trace runs and restores every one afterwards."""

    def __init__(self):
        self._saved = []
        self._patched_globals = set()

    def setattr(self, obj, name, value):
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)
                            if not isinstance(obj, dict) else obj.get(name, _MISSING)))
        if isinstance(obj, dict):
            obj[name] = value
        else:
            setattr(obj, name, value)

    def restore(self):
        for obj, name, old in reversed(self._saved):
            if isinstance(obj, dict):
                if old is _MISSING:
                    obj.pop(name, None)
                else:
                    obj[name] = old
            elif old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
        self._saved.clear()


_MISSING = object()


def _recording(tracer, fn):
    """``fn`` that records a call_function node when an argument is a Proxy."""
    if getattr(fn, "__fx_original__", None) is not None:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if has_proxy(args) or has_proxy(kwargs):
            return tracer.create_proxy("call_function", fn, args, kwargs)
        return fn(*args, **kwargs)
    wrapper.__fx_original__ = fn
    return wrapper
