"""``fiamma.compiler``: PyTorch's ``torch.compiler`` namespace over fiamma's eager execution.

``compile`` is :func:`fiamma.compile`; ``reset``, ``disable``, ``allow_in_graph``,
``assume_constant_result`` and ``is_compiling`` are :mod:`fiamma._dynamo`'s. fiamma has no
graph compiler, so ``is_dynamo_compiling``/``is_exporting`` are False, ``set_stance`` records
the stance (every stance runs eagerly, which ``force_eager`` asks for anyway),
``cudagraph_mark_step_begin`` has no CUDA graphs to mark, and ``list_backends`` gives
PyTorch's default names, which ``compile`` accepts (a callable backend gets an fx graph).
``UserError`` is the error of graph capture that the program can fix (``fiamma.cond``'s and
``fiamma.export``'s; PyTorch's ``torch._dynamo.exc.UserError``).

>>> import fiamma
>>> fiamma.compiler.reset()
>>> with fiamma.compiler.set_stance("force_eager"):
...     fiamma.compiler.is_compiling()
False
"""

import functools

from fiamma._compat_ops import compile
from fiamma._cond import UserError
from fiamma._dynamo import allow_in_graph, assume_constant_result, disable, is_compiling, reset

__all__ = ["compile", "reset", "allow_in_graph", "assume_constant_result", "disable",
           "list_backends", "set_stance", "cudagraph_mark_step_begin", "is_compiling",
           "is_dynamo_compiling", "is_exporting", "get_default_backend", "set_default_backend",
           "UserError"]

_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile",
            "eager_then_compile", "aot_eager_then_compile")
_BACKENDS = ["cudagraphs", "inductor", "openxla", "tvm"]
_DEBUG_BACKENDS = ["aot_eager", "eager"]
_state = {"stance": "default", "backend": "inductor"}


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names ``compile`` accepts (PyTorch's defaults; with ``exclude_tags=()``
    also the debug ones, ``eager`` and ``aot_eager``)."""
    names = list(_BACKENDS)
    if "debug" not in (exclude_tags or ()):
        names += _DEBUG_BACKENDS
    return sorted(names)


def is_dynamo_compiling():
    """Whether dynamo is tracing the caller: never in fiamma."""
    return False


def is_exporting():
    """Whether ``torch.export`` is tracing the caller: never in fiamma's eager execution."""
    return False


def cudagraph_mark_step_begin():
    """Mark the start of an inference or training step for CUDA graphs: fiamma records none."""


def get_default_backend():
    return _state["backend"]


def set_default_backend(backend):
    if not isinstance(backend, str) and not callable(backend):
        raise TypeError(f"set_default_backend: expected a backend name or a callable, got "
                        f"{type(backend).__name__}")
    _state["backend"] = backend


class _StanceContext:
    def __init__(self, prev):
        self._prev = prev

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _state["stance"] = self._prev
        return False

    def __call__(self, fn):
        stance = _state["stance"]
        _state["stance"] = self._prev  # as a decorator it applies inside fn only

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _state["stance"]
            _state["stance"] = stance
            try:
                return fn(*args, **kwargs)
            finally:
                _state["stance"] = prev
        return wrapper


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """Set how compiled functions run (PyTorch's stances: ``default``, ``force_eager``,
    ``eager_on_recompile``, ``fail_on_recompile``, ``eager_then_compile``,
    ``aot_eager_then_compile``). A call sets it; ``with set_stance(...)`` and
    ``@set_stance(...)`` set it for a block or a function. fiamma runs every stance eagerly."""
    if stance not in _STANCES:
        raise RuntimeError(f"set_stance: invalid stance {stance!r}, expected one of "
                           f"{list(_STANCES)}")
    if force_backend is not None and stance != "default":
        raise RuntimeError("set_stance: force_backend is only allowed with stance 'default'")
    prev = _state["stance"]
    _state["stance"] = stance
    return _StanceContext(prev)
