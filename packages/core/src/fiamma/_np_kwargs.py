"""NumPy's keyword names on fiamma's functions and Tensor methods, as PyTorch accepts them.

PyTorch's argument parser takes ``axis=`` for any parameter named ``dim`` and ``keepdims=``
for ``keepdim`` on its native functions and methods (``x.mean(axis=0)``,
``torch.cat(ts, axis=1)``, ``x.sum(0, keepdims=True)``); libraries written against it use
them (timm's ``JsdCrossEntropy``). :func:`accept_numpy_names` wraps a function that has such a
parameter so the NumPy name is renamed before the call; functions without one are returned
unchanged (so elementwise ops keep their direct call). Giving both names is PyTorch's error.

>>> import fiamma
>>> fiamma.ones(2, 3).sum(axis=1, keepdims=True).tolist()
[[3.0], [3.0]]
"""

import functools
import types

__all__ = ["accept_numpy_names", "wrap_namespace"]

_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


def _params(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    n = code.co_argcount + code.co_kwonlyargcount
    return code.co_varnames[:n]


def accept_numpy_names(fn):
    """``fn``, or a wrapper of it that renames ``axis``/``keepdims`` to ``dim``/``keepdim``."""
    if not isinstance(fn, types.FunctionType) or getattr(fn, "__np_names__", False):
        return fn
    params = _params(fn)
    pairs = tuple((np_name, name) for np_name, name in _ALIASES
                  if name in params and np_name not in params)
    if not pairs:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for np_name, name in pairs:
                if np_name in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}(): got both '{name}' and its alias "
                                        f"'{np_name}'")
                    kwargs[name] = kwargs.pop(np_name)
        return fn(*args, **kwargs)

    wrapper.__np_names__ = True
    return wrapper


def wrap_namespace(ns, names):
    """Replace each of ``names`` in the module dict ``ns`` by :func:`accept_numpy_names` of it.
    A wrapper names that module as its home (pickle, FX code find it there)."""
    for name in names:
        fn = ns.get(name)
        wrapped = accept_numpy_names(fn)
        if wrapped is not fn:
            wrapped.__module__ = ns["__name__"]
            wrapped.__qualname__ = name
            ns[name] = wrapped
