"""``torch._dynamo``'s user-facing switches, for programs that set them around ``torch.compile``.

fiamma has no graph compiler (``fiamma.compile`` returns its argument unchanged), so these are
what they mean for eager execution: ``disable`` and ``allow_in_graph`` return the function
unchanged, ``reset`` has no caches to clear, ``is_compiling`` is False, the ``mark_*`` shape
and address hints change nothing, and :mod:`fiamma._dynamo.config` takes flags without effect.

>>> import fiamma
>>> from fiamma._dynamo import config
>>> config.cache_size_limit
8
>>> fiamma._dynamo.disable(lambda x: x + 1)(1)
2
"""

from fiamma._dynamo import config

__all__ = ["config", "reset", "disable", "allow_in_graph", "is_compiling", "mark_dynamic",
           "mark_static", "assume_constant_result"]

# PyTorch's type of a compiled module's wrapper; fiamma.compile makes none (see eval_frame)
from fiamma._dynamo.eval_frame import OptimizedModule  # noqa: E402

__all__ += ["OptimizedModule"]


def reset():
    """Clear compiled code and guards: fiamma compiles nothing, so there is nothing to clear."""


def disable(fn=None, recursive=True, *, reason=None):
    """Run ``fn`` without compiling it (decorator or ``disable(fn)``): fiamma always does."""
    if fn is None:
        return lambda f: f
    if not callable(fn):
        raise TypeError(f"disable: expected a callable, got {type(fn).__name__}")
    return fn


def allow_in_graph(fn):
    """Mark ``fn`` to be kept whole in compiled graphs: there are none, ``fn`` comes back."""
    if not callable(fn) and not isinstance(fn, (list, tuple)):
        raise TypeError(f"allow_in_graph: expected a callable, got {type(fn).__name__}")
    return fn


def assume_constant_result(fn):
    """Treat ``fn``'s result as a constant when compiling: without a compiler, ``fn`` as is."""
    return fn


def is_compiling():
    """Whether the caller runs inside a compiled region: never in fiamma."""
    return False


def _check_tensor(t, op):
    from fiamma import Tensor

    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}")


def mark_dynamic(t, index, *, min=None, max=None, specialize_on=None):
    """Hint that dimension ``index`` of ``t`` varies between calls (no effect in eager mode)."""
    _check_tensor(t, "mark_dynamic")


def mark_static(t, index=None):
    """Hint that ``t``'s shape stays fixed between calls (no effect in eager mode)."""
    if not isinstance(t, type) and not callable(getattr(t, "forward", None)):
        _check_tensor(t, "mark_static")


__all__ += ["mark_static_address"]


def mark_static_address(t, guard=True):
    """Hint that ``t``'s memory stays at one address between calls (as a static key/value
    cache does; no effect in eager mode)."""
    _check_tensor(t, "mark_static_address")
