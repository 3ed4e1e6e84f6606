"""Public API through which an autograd engine (``fiamma-autograd``) plugs into core.

Core runs without autograd: its ops check the ``requires_grad`` flag of their tensor inputs (a
slot read) and only when one is set and grad mode is on do they call the registered recorder.
``fiamma-autograd`` calls :func:`register_autograd` when it is imported; core imports it the
first time a tensor asks for gradients (:func:`autograd_module`).

The recorder is an object with these methods (all called by core):

``record(op, out, inputs, kwargs)``
    after an out-of-place op: ``op`` is the public op name ("add", "view", "sum", ...), ``out``
    the result (a Tensor or a tuple of Tensors), ``inputs`` the positional arguments as the op
    received them (tensors and non-tensors), ``kwargs`` the op's other arguments by name.
``record_new(op, out, inputs)`` (optional)
    ``record`` for the operator fast paths' results: ``out`` is a Tensor the op has just
    allocated (no view, not one of the inputs) and the op has no keyword arguments, so the
    recorder can skip the checks those need; without it core calls ``record``.
``inplace(fn, name, self, args, kwargs)``
    run the in-place op ``name`` (``"add_"``) whose out-of-place form is ``fn``: the recorder
    computes ``fn(self, *args, **kwargs)`` (recorded), writes it into ``self`` and makes
    ``self``'s history point at the result. Core's in-place methods call it when grad mode is on
    and a tensor argument requires grad.
``record_inplace(op, out, inputs, kwargs)``
    after an in-place op that overwrote ``out`` (``inputs[0]``) without reading its old values
    (``copy_``, ``__setitem__``, ``index_put_``, random fills); the version counter was bumped.
``check_inplace(tensor, op)``
    before an in-place op writes into ``tensor`` (one that requires grad, grad mode on): raise
    PyTorch's error for a leaf that requires grad or a view of one, before anything changes.
``requires_grad_(tensor, flag)``, ``backward(tensor, gradient, retain_graph, create_graph,
inputs)``, ``retain_grad(tensor)``, ``retains_grad(tensor)``, ``register_hook(tensor, hook)``,
``register_post_accumulate_grad_hook(tensor, hook)``
    the behaviour of the Tensor methods of the same names.

Tensor slots used by the recorder: ``requires_grad``, ``grad``, ``grad_fn`` and the
recorder's per-tensor data (:func:`get_meta`/:func:`set_meta`; core only initialises it to
None). A view made by a view op (``view``, ``transpose``, basic indexing, ...) has ``_base``,
the tensor whose memory it views (the root of a chain of views; unset on other tensors: read it
with ``getattr(t, "_base", None)``). :func:`version` (also ``Tensor._version``) is the version
counter shared by all views of a storage; in-place ops bump it.

The typed seam (``fiamma._autograd_api``, re-exported here): :data:`ops` declares every op core
records as an :class:`OpKey` (``ops.mul``; a ``str`` equal to the name core passes to
``record``), so an engine links formulas to key objects and a misspelled or missing derivative
fails when the engine is imported; :func:`declare_op` declares an op recorded by another
distribution. The accessors :func:`version`, :func:`same_storage`, :func:`get_meta`,
:func:`set_meta`, :func:`clear_base`, :func:`shape`, :func:`geometry` and :func:`owns_memory`
are what an engine reads and writes on tensors besides their public API; :data:`HOT_SLOTS`
lists the few slots it may read directly on its per-op and per-node paths, where a call would
cost more than the read.

The trace hook (used by fiamma.jit): :func:`set_trace_hook` installs, for this thread, an object
with ``record``, ``record_inplace``, ``check_inplace`` and ``inplace`` (the signatures above)
that receives those calls instead of the autograd recorder while it is installed; a hook with
a ``library_op(op, args, kwargs, run)`` method also receives each call of a
:mod:`fiamma.library` operator (``op`` its ``OpOverload``; ``args``/``kwargs`` every positional
and keyword-only argument of its schema; ``run()`` makes the call) and returns its result. A
tracer marks the tensors it follows by setting their ``requires_grad`` slot, so every op
depending on them calls it; with no tracer installed the recording path pays one thread-local read.

>>> import fiamma
>>> from fiamma import autograd_hook
>>> autograd_hook.is_grad_enabled()
True
"""

from fiamma._autograd_api import (  # noqa: F401
    HOT_SLOTS,
    OpKey,
    OpTable,
    clear_base,
    declare_op,
    geometry,
    get_meta,
    ops,
    owns_memory,
    same_storage,
    set_meta,
    shape,
    version,
)
from fiamma._grad_hook import (  # noqa: F401
    autograd_module,
    is_grad_enabled,
    is_inference_mode_enabled,
    register_autograd,
    set_grad_enabled_flag,
    set_trace_hook,
)
from fiamma._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401

__all__ = [
    "register_autograd", "autograd_module", "is_grad_enabled", "set_grad_enabled_flag",
    "is_inference_mode_enabled", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "registered_recorder", "set_trace_hook", "get_trace_hook",
    # the typed core/autograd seam (fiamma._autograd_api)
    "ops", "OpKey", "OpTable", "declare_op", "version", "same_storage", "get_meta", "set_meta",
    "clear_base", "shape", "geometry", "owns_memory", "HOT_SLOTS",
]


def get_trace_hook():
    """The trace hook installed in this thread (see :func:`set_trace_hook`), or None. Ops with
    a fused kernel that a tracer has no runner for (``fiamma.fused_attention``) let
    fiamma-nn compose them from core ops instead while one is installed."""
    from fiamma import _grad_hook
    return _grad_hook.state.tracer


def registered_recorder():
    """The recorder installed with :func:`register_autograd`, or None (imports nothing)."""
    from fiamma import _grad_hook

    return _grad_hook._recorder
