"""fiamma.utils._python_dispatch: PyTorch's ``torch.utils._python_dispatch`` (dispatch modes).

Inside ``with Mode():`` every op reaches ``Mode.__torch_dispatch__(func, types, args, kwargs)``
as an ATen overload (``aten.add.Tensor``, ``aten.mm.default``: fiamma._python_dispatch says which
fiamma function reports which), below autograd: the ops of a backward pass run inside reach it
too. The mode is popped while its handler runs, so calling ``func`` there computes (or reaches
the next mode out). Nothing of this costs anything before a mode is entered.

>>> import fiamma
>>> from fiamma.utils._python_dispatch import TorchDispatchMode
>>> class Log(TorchDispatchMode):
...     def __init__(self):
...         super().__init__()
...         self.ops = []
...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
...         self.ops.append(str(func))
...         return func(*args, **(kwargs or {}))
>>> a, b = fiamma.ones(2, 3), fiamma.ones(3, 1)
>>> with Log() as log:
...     y = (a @ b).relu()
>>> log.ops
['aten.mm.default', 'aten.relu.default']
"""

import contextlib
import importlib
import warnings

from fiamma import _torch_function as _TF

__all__ = ["TorchDispatchMode", "BaseTorchDispatchMode", "_get_current_dispatch_mode",
           "_get_current_dispatch_mode_stack", "_push_mode", "_pop_mode",
           "_pop_mode_temporarily", "_disable_current_modes", "is_traceable_wrapper_subclass",
           "is_traceable_wrapper_subclass_type", "transform_subclass",
           "return_and_correct_aliasing", "_len_torch_dispatch_stack", "_detect_infra_mode",
           "is_in_torch_dispatch_mode"]


class TorchDispatchMode:
    """Base class of the dispatch modes: override ``__torch_dispatch__(func, types, args=(),
    kwargs=None)``; enter with ``with mode:``. Modes nest: the innermost sees an op first."""

    def __init__(self, _dispatch_key=None):
        if _dispatch_key is not None:
            raise NotImplementedError("TorchDispatchMode(_dispatch_key=): fiamma has no "
                                      "per-key mode stacks")
        self.old_dispatch_mode_flags = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{type(self).__name__} does not define __torch_dispatch__")

    def __enter__(self):
        _push_mode(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _pop_mode()
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just "
                      "`with Mode()`", stacklevel=2)
        return cls(*args, **kwargs)

    @classmethod
    def is_infra_mode(cls):
        return False

    @classmethod
    def ignore_compile_internals(cls):
        return False


class BaseTorchDispatchMode(TorchDispatchMode):
    """A mode whose handler runs the op as it is."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _get_current_dispatch_mode():
    """The innermost entered mode (None outside every mode, and inside the handler of the
    only one)."""
    modes = _TF.td_state.modes
    return modes[-1] if modes else None


def _get_current_dispatch_mode_stack():
    return list(_TF.td_state.modes)


def _len_torch_dispatch_stack():
    return len(_TF.td_state.modes)


def _get_dispatch_stack_at(i):
    return _TF.td_state.modes[i]


def _push_mode(mode, k=None):
    if k is not None:
        raise NotImplementedError("_push_mode(k=): fiamma has no per-key mode stacks")
    _TF.push_dispatch_mode(mode)


def _pop_mode(k=None):
    if k is not None:
        raise NotImplementedError("_pop_mode(k=): fiamma has no per-key mode stacks")
    if not _TF.td_state.modes:
        raise AssertionError("Trying to pop from an empty mode stack")
    return _TF.pop_dispatch_mode()


@contextlib.contextmanager
def _pop_mode_temporarily(k=None):
    old = _pop_mode(k)
    try:
        yield old
    finally:
        _push_mode(old, k)


@contextlib.contextmanager
def _disable_current_modes():
    """Pop every mode for the block (innermost first), and push them back after."""
    popped = []
    while _TF.td_state.modes:
        popped.append(_pop_mode())
    try:
        yield popped
    finally:
        for m in reversed(popped):
            _push_mode(m)


def _detect_infra_mode(key):
    return None


def is_in_torch_dispatch_mode(include_infra_modes=True):
    return bool(_TF.td_state.modes)


def is_traceable_wrapper_subclass(t):
    """Whether ``t`` is an instance of a Tensor subclass with ``__torch_dispatch__`` and the
    ``__tensor_flatten__``/``__tensor_unflatten__`` pair."""
    return is_traceable_wrapper_subclass_type(type(t))


def is_traceable_wrapper_subclass_type(t):
    Tensor = importlib.import_module("fiamma").Tensor
    return (isinstance(t, type) and issubclass(t, Tensor) and t is not Tensor
            and t in _TF.TD_TYPES and hasattr(t, "__tensor_flatten__")
            and hasattr(t, "__tensor_unflatten__"))


def transform_subclass(t, callback, outer_size=None, outer_stride=None):
    """Rebuild the traceable wrapper ``t`` with ``callback(name, inner)`` applied to each of
    its inner tensors (``__tensor_flatten__``/``__tensor_unflatten__``)."""
    outer_size = outer_size if outer_size is not None else t.size()
    outer_stride = outer_stride if outer_stride is not None else t.stride()
    names, ctx = t.__tensor_flatten__()
    inner = {n: callback(n, getattr(t, n)) for n in names}
    return type(t).__tensor_unflatten__(inner, ctx, outer_size, outer_stride)


def return_and_correct_aliasing(func, args, kwargs, out):
    """What a wrapper's ``__torch_dispatch__`` returns so that aliasing matches the op's schema:
    an in-place op (``aten.add_.Tensor``) or one writing ``out=`` returns the argument it
    wrote; a view op (``aten.view.default``) returns ``out`` recorded as a view of its input
    (``out._base``). fiamma's wrappers hold no storage, so no storage is shared."""
    kwargs = kwargs or {}
    schema = func._schema
    args_schema = schema.arguments
    written = [i for i, a in enumerate(args_schema) if a.alias_info is not None
               and a.alias_info.is_write]

    def arg(i):
        a = args_schema[i]
        return args[i] if i < len(args) else kwargs.get(a.name)

    if written:
        if len(written) == 1:
            return arg(written[0])
        return tuple(arg(i) for i in written)
    if getattr(func, "is_view", False):
        Tensor = importlib.import_module("fiamma").Tensor
        base = args[0] if args and isinstance(args[0], Tensor) else None
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if base is not None:
            for o in outs:
                if isinstance(o, Tensor) and o is not base and o._base is None:
                    o._base = base if base._base is None else base._base
    return out
