"""fiamma.overrides: PyTorch's ``torch.overrides``, over fiamma's ``__torch_function__``.

fiamma dispatches as PyTorch does: a call of a ``fiamma.*`` function (``fiamma.linalg``,
``fft``, ``special``, ``nn.functional``, ``nn.init`` too), a Tensor method, operator or
property with an argument whose type overrides ``__torch_function__`` (a Tensor subclass, or
any class defining it) is handed to that ``__torch_function__(func, types, args, kwargs)``,
and inside ``with Mode():`` every such call goes to the innermost
:class:`TorchFunctionMode` first (popped while its handler runs). ``func`` is the public
function: ``fiamma.add``, ``Tensor.add`` (also for ``x + y``, as PyTorch passes it),
``Tensor.__getitem__``, ``fiamma.nn.functional.linear``. The default
``Tensor.__torch_function__`` keeps a subclass's type on the results; ``nn.Parameter`` opts out
(``__torch_function__ = torch._C._disabled_torch_function_impl``). How it costs plain tensors
nothing is in ``fiamma._torch_function``.

Differences from PyTorch: a Tensor method that is also a top-level function in fiamma (``add``,
``sum``, ...) is one function object, so ``Tensor.add is torch.add`` there; slot attributes
(``requires_grad``, ``grad_fn``, ``_base``) are not dispatched; a class that only defines
``__torch_function__`` (not a Tensor subclass) turns the protocol on when it is created under
``python -m fiamma.run``, or when it first meets :func:`has_torch_function`,
:func:`handle_torch_function`, :func:`is_tensor_like` or :func:`enable_torch_function`.

>>> import fiamma
>>> import fiamma.overrides as overrides
>>> class Count(overrides.TorchFunctionMode):
...     def __init__(self):
...         super().__init__()
...         self.names = []
...     def __torch_function__(self, func, types, args=(), kwargs=None):
...         self.names.append(func.__name__)
...         return func(*args, **(kwargs or {}))
>>> with Count() as m:
...     y = fiamma.ones(2) + 1
>>> m.names
['ones', 'add']
"""

import functools

from fiamma import _torch_function as _TF

__all__ = [
    "TorchFunctionMode", "is_tensor_like", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "handle_torch_function", "get_ignored_functions",
    "get_overridable_functions", "get_testing_overrides", "is_tensor_method_or_property",
    "wrap_torch_function", "resolve_name", "enable_reentrant_dispatch",
    "enable_torch_function", "disabled_torch_function_impl",
]

_state = _TF.state

# PyTorch's torch._C._disabled_torch_function_impl: a subclass that sets
# ``__torch_function__ = disabled_torch_function_impl`` opts out of the protocol (nn.Parameter,
# and fiamma's own subclasses in the sibling packages, so importing them leaves it off)
disabled_torch_function_impl = _TF.disabled_torch_function_impl


def _current_modes():
    """The modes entered in this thread, innermost last."""
    return list(_state.modes)


def _get_current_function_mode():
    return _state.modes[-1] if _state.modes else None


def _get_current_function_mode_stack():
    return list(_state.modes)


def _len_torch_function_stack():
    return len(_state.modes)


def _push_mode(mode):
    _state.modes.append(mode)
    _TF.mode_entered()


def _pop_mode():
    if not _state.modes:
        raise RuntimeError("_pop_mode: no torch function mode is active")
    mode = _state.modes.pop()
    _TF.mode_exited()
    return mode


class _pop_mode_temporarily:
    """Pop the innermost mode for the duration of the ``with`` block (PyTorch's helper)."""

    def __enter__(self):
        self._mode = _pop_mode()
        return self._mode

    def __exit__(self, *exc):
        _push_mode(self._mode)
        return False


class TorchFunctionMode:
    """PyTorch's base class of torch function modes: inside ``with Mode():`` every fiamma
    function, Tensor method and operator call goes to ``Mode.__torch_function__(func, types,
    args, kwargs)``; the mode is popped while its handler runs (so ``func(*args, **kwargs)``
    there runs the op, through any outer mode), modes nest, innermost first."""

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(
            f"{type(self).__name__}.__torch_function__: a TorchFunctionMode subclass defines it")

    def __enter__(self):
        _push_mode(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        stack = _state.modes
        if not stack or stack[-1] is not self:
            raise RuntimeError(
                f"TorchFunctionMode.__exit__: {type(self).__name__} is not the innermost "
                "active mode (modes must exit in the reverse order of entering)")
        _pop_mode()
        return None

    @classmethod
    def push(cls, *args, **kwargs):
        import warnings

        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just "
                      "`with Mode()`", DeprecationWarning, stacklevel=2)
        return cls(*args, **kwargs)


def enable_torch_function():
    """Turn the protocol on for good (what defining a Tensor subclass does). Needed only for a
    class that defines ``__torch_function__`` without subclassing Tensor, created outside
    ``python -m fiamma.run`` and passed to fiamma functions before anything else saw it."""
    _TF.activate_for_class()


def _seen(values):
    """Turn the protocol on when a tensor-like is passed to the functions below."""
    for a in values:
        if _TF._type_dispatches(type(a)):
            if not _TF._active["sticky"]:
                _TF.activate_for_class(type(a))
            return


def is_tensor_like(inp):
    """Whether ``inp`` is a Tensor (of any subclass) or its type defines
    ``__torch_function__``."""
    return type(inp) is _TF._TENSOR[0] or hasattr(type(inp), "__torch_function__")


def has_torch_function(relevant_args):
    """Whether a call with ``relevant_args`` must go through :func:`handle_torch_function`:
    a mode is active or one of them dispatches (a Tensor subclass or tensor-like)."""
    if _state.all_off:
        return False
    if _state.modes:
        return True
    if _state.sub_off:
        return False
    found = _TF.overloaded_args(relevant_args)
    if found:
        _seen(found)
        return True
    return False


def has_torch_function_unary(arg):
    return has_torch_function((arg,))


def has_torch_function_variadic(*args):
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Dispatch ``public_api(*args, **kwargs)`` to the active mode and the
    ``__torch_function__`` of ``relevant_args``' dispatching types (what a Python function
    calls after :func:`has_torch_function` said yes)."""
    overloaded = None if _state.sub_off else _TF.overloaded_args(relevant_args)
    if overloaded:
        _seen(overloaded)
    return _TF.handle(public_api, overloaded, args, kwargs)


def wrap_torch_function(dispatcher):
    """Decorator: the function dispatches through ``__torch_function__`` on the arguments
    ``dispatcher(*args, **kwargs)`` returns."""
    def decorator(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)

        return wrapped

    return decorator


class enable_reentrant_dispatch:
    """PyTorch's context manager for re-entering the dispatcher from a ``__torch_dispatch__``
    handler; fiamma has no ``__torch_dispatch__``, so it does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NAMESPACE_NAMES = {"fiamma": "torch", "fiamma.nn.functional": "torch.nn.functional",
                    "fiamma.linalg": "torch.linalg", "fiamma.fft": "torch.fft",
                    "fiamma.special": "torch.special", "fiamma.nn.init": "torch.nn.init"}


def resolve_name(f):
    """The PyTorch-style name of a dispatched function (``torch.add``, ``torch.Tensor.add``,
    ``torch.nn.functional.linear``), or None."""
    import sys

    T = _TF._TENSOR[0]
    if getattr(f, "__self__", None) is not None and type(f.__self__) is property:
        for name, attr in vars(T).items():
            if attr is f.__self__:
                return f"torch.Tensor.{name}.__get__"
    name = getattr(f, "__name__", None)
    if name is None:
        return None
    for modname, torch_name in _NAMESPACE_NAMES.items():
        mod = sys.modules.get(modname)
        if mod is not None and getattr(mod, name, None) is f:
            return f"{torch_name}.{name}"
    if vars(T).get(name) is f:
        return f"torch.Tensor.{name}"
    return None


def is_tensor_method_or_property(func):
    """Whether ``func`` is a method or property getter of Tensor (``Tensor.add``,
    ``Tensor.shape.__get__``)."""
    T = _TF._TENSOR[0]
    if getattr(func, "__self__", None) is not None and type(func.__self__) is property:
        return any(attr is func.__self__ for attr in vars(T).values())
    name = getattr(func, "__name__", None)
    return name is not None and vars(T).get(name) is func and not name.startswith("_")


def get_ignored_functions():
    """The public functions that never dispatch (not ops, or constructors of their own
    arguments): a set of function objects."""
    import sys

    out = set()
    for modname in _NAMESPACE_NAMES:
        mod = sys.modules.get(modname)
        if mod is None:
            continue
        for name in _TF._SKIP_FUNCTIONS:
            f = getattr(mod, name, None)
            if callable(f):
                out.add(f)
    T = _TF._TENSOR[0]
    for name in _TF._SKIP_METHODS:
        f = vars(T).get(name)
        if callable(f):
            out.add(f)
    return out


def get_overridable_functions():
    """``{namespace: [functions]}`` of everything that dispatches (``fiamma``,
    ``fiamma.nn.functional``, ``fiamma.linalg``, ``fiamma.fft``, ``fiamma.special``,
    ``fiamma.nn.init`` where imported, and ``fiamma.Tensor``)."""
    import sys

    with _TF._lock:
        _TF._build_all()
    out = {}
    entries = {id(e.fn) for e in _TF._entries.values()}
    for modname in _NAMESPACE_NAMES:
        mod = sys.modules.get(modname)
        if mod is None:
            continue
        fns = [f for n, f in vars(mod).items() if not n.startswith("_") and id(f) in entries]
        out[mod] = fns
    T = _TF._TENSOR[0]
    out[T] = [getattr(T, n) if not isinstance(vars(T)[n], property) else vars(T)[n].__get__
              for n in _TF._tensor_entries]
    return out


def get_testing_overrides():
    """``{function: a lambda of the same signature returning -1}``, PyTorch's table of dummy
    overrides for testing. Partial: built from the signatures of fiamma's dispatching
    functions (those whose signature can be read); every value returns -1."""
    import inspect

    out = {}
    for fns in get_overridable_functions().values():
        for f in fns:
            try:
                sig = inspect.signature(f)
            except (TypeError, ValueError):
                continue

            def dummy(*args, __sig=sig, **kwargs):
                __sig.bind(*args, **kwargs)
                return -1

            dummy.__signature__ = sig
            out[f] = dummy
    return out
