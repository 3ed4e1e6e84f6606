"""fiamma.overrides: the names of PyTorch's ``torch.overrides`` that libraries import.

fiamma has no ``__torch_function__`` protocol: its functions never consult a tensor subclass's
``__torch_function__`` nor an active :class:`TorchFunctionMode`. A mode can be entered and
exited (libraries such as Lightning enter one around model construction), but its
``__torch_function__`` is not called; entering a mode class says so once with a
``UserWarning``, so a program whose results depend on the mode is told.

>>> import fiamma.overrides as overrides
>>> class Mode(overrides.TorchFunctionMode):
...     def __torch_function__(self, func, types, args=(), kwargs=None):
...         return func(*args, **(kwargs or {}))
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with Mode() as m:
...         overrides._current_modes() == [m]
True
"""

import threading
import warnings

__all__ = ["TorchFunctionMode", "is_tensor_like"]

_state = threading.local()
_warned = set()


def _current_modes():
    """The modes entered in this thread, innermost last."""
    return list(getattr(_state, "stack", ()))


class TorchFunctionMode:
    """PyTorch's base class of torch function modes (``with Mode(): ...``).

    Entering pushes the mode on this thread's stack and exiting pops it, as in PyTorch, but
    fiamma's functions do not dispatch to ``__torch_function__`` (see the module's docstring).
    """

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(
            f"{type(self).__name__}.__torch_function__: a TorchFunctionMode subclass defines it")

    def __enter__(self):
        cls = type(self)
        if cls not in _warned:
            _warned.add(cls)
            warnings.warn(
                f"fiamma does not dispatch to torch function modes: {cls.__name__}."
                "__torch_function__ will not be called for the functions run inside it",
                UserWarning, stacklevel=2)
        if not hasattr(_state, "stack"):
            _state.stack = []
        _state.stack.append(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        stack = getattr(_state, "stack", [])
        if not stack or stack[-1] is not self:
            raise RuntimeError(
                f"TorchFunctionMode.__exit__: {type(self).__name__} is not the innermost "
                "active mode (modes must exit in the reverse order of entering)")
        stack.pop()
        return None

    @classmethod
    def push(cls, *args, **kwargs):
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just "
                      "`with Mode()`", DeprecationWarning, stacklevel=2)
        return cls(*args, **kwargs)


def is_tensor_like(inp):
    """Whether ``inp`` is a fiamma tensor (of any subclass) or defines ``__torch_function__``."""
    import fiamma

    return isinstance(inp, fiamma.Tensor) or hasattr(inp, "__torch_function__")
