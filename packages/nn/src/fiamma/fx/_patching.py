"""What a symbolic trace replaces while it runs (and restores afterwards)."""

import functools
import sys
import types
import weakref

from .proxy import has_proxy

# fiamma's function namespaces: while a trace runs, their functions record a node when called
# with a Proxy (PyTorch gets the same from __torch_function__; fiamma's Proxy does not use core's
# protocol, which would keep every function retargeted after the first trace)
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


# ---- Proxies used outside a trace ---------------------------------------------------------------
# PyTorch records ``torch.cat([p, q])`` for Proxies built by hand (``Proxy(node, tracer)``,
# ``GraphAppendingTracer``) through __torch_function__, at any time. fiamma's Proxy does not
# use core's protocol (see above): while at least one hand-made Proxy is alive, the function
# namespaces' functions are replaced by versions that record a call_function node in the tracer
# of the first Proxy argument (and call through otherwise); the originals come back when the
# last such Proxy dies.

_free = {"count": 0, "patcher": None}
tracing = [0]  # symbolic traces running (their own patches serve their Proxies)


def _first_proxy(a):
    from .node import map_aggregate
    from .proxy import Proxy

    found = []

    def check(x):
        if not found and isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate(a, check)
    return found[0] if found else None


class _RecordingAny:
    """``fn`` that records a call_function node in its first Proxy argument's tracer (and calls
    ``fn`` otherwise). It compares equal to ``fn`` and hashes like it, so code that looks
    functions up while it is installed (``if node.target in (F.relu, fiamma.relu)``, a dict of
    rules keyed by functions) finds them; graphs record ``fn`` itself as the target."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.__fx_original__ = fn

    def __call__(self, *args, **kwargs):
        p = _first_proxy((args, kwargs))
        fn = self.__fx_original__
        if p is not None:
            return p.tracer.create_proxy("call_function", fn, args, kwargs)
        return fn(*args, **kwargs)

    def __eq__(self, other):
        fn = self.__fx_original__
        return other is self or other is fn or getattr(other, "__fx_original__", None) is fn

    def __hash__(self):
        return hash(self.__fx_original__)

    def __repr__(self):
        return repr(self.__fx_original__)


def _recording_any(fn):
    if getattr(fn, "__fx_original__", None) is not None:
        return fn
    return _RecordingAny(fn)


def function_namespaces(extra=()):
    """The namespaces whose functions a trace replaces: fiamma's function modules (and
    ``extra``), each with the attribute dicts of the ``torch`` alias modules of
    ``python -m fiamma.run`` that stand for it (an alias keeps its own copy of each attribute
    once read, so the script's ``torch.tan`` must be replaced there too)."""
    mods = [sys.modules[m] for m in _FUNCTION_MODULES if m in sys.modules] + list(extra)
    out = [(m, vars(m)) for m in mods]
    by_id = {id(m): m for m in mods}
    for alias in list(sys.modules.values()):
        target = getattr(alias, "__dict__", {}).get("_fiamma_target") \
            if isinstance(alias, types.ModuleType) else None
        if target is not None and id(target) in by_id:
            out.append((alias.__dict__, dict(alias.__dict__)))
    return out


def _install_free():
    patcher = _Patcher()
    done = {}
    for obj, names in function_namespaces():
        for name, value in list(names.items()):
            if name.startswith("__") or not isinstance(
                    value, (types.FunctionType, types.BuiltinFunctionType)):
                continue
            w = done.get(id(value))
            if w is None:
                w = done[id(value)] = _recording_any(value)
            if w is not value:
                patcher.setattr(obj, name, w)
    _free["patcher"] = patcher


def _release_free():
    _free["count"] -= 1
    if _free["count"] == 0 and _free["patcher"] is not None:
        _free["patcher"].restore()
        _free["patcher"] = None


def hold(proxy):
    """Keep the recording functions installed while ``proxy`` (made outside a trace) lives."""
    if _free["count"] == 0 and _free["patcher"] is None:
        _install_free()
    _free["count"] += 1
    weakref.finalize(proxy, _release_free)
