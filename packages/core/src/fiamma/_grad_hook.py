"""The autograd hook: how fiamma-autograd plugs into core (DESIGN.md, "Autograd hook").

Core runs without autograd. Every differentiable op in core, after computing its result, checks
the ``requires_grad`` flag of its tensor inputs (a slot read: the whole cost without autograd)
and, only if one is set and grad mode is on, calls ``record``. fiamma-autograd registers the
recorder with ``register_autograd``; core imports it the first time a tensor asks for gradients.

The recorder contract (public, used by fiamma-autograd):
    recorder.record(op, out, inputs, kwargs) -> None
        ``op`` is the public op name ("add", "view", "sum", ...), ``out`` the result (a Tensor or a
        tuple of Tensors), ``inputs`` the positional arguments as the op received them (tensors
        and non-tensors), ``kwargs`` the op's remaining arguments by name.
    recorder.record_new(op, out, inputs) -> None   (optional)
        ``record`` for the commonest case, which core's operator fast paths call through
        :func:`record_new`: ``out`` is a Tensor the op has just allocated (not a view, not one of
        its inputs, no ``_base``) and the op has no keyword arguments; a recorder without it
        gets ``record`` calls instead.
    recorder.record_inplace(op, out, inputs, kwargs) -> None
        the same for an in-place op; ``out`` is the modified tensor (``inputs[0]``), called after
        the version counter was bumped.
    recorder.inplace(fn, name, self, args, kwargs) -> None
        run the in-place op ``name`` whose out-of-place form is ``fn`` with gradients: the
        recorder computes ``fn(self, *args, **kwargs)``, writes it into ``self`` and rebases
        ``self``'s history on the result (see fiamma.autograd_hook).
    recorder.check_inplace(tensor, op) -> None
        called BEFORE an in-place op writes into ``tensor`` (which requires grad, grad mode on):
        raises PyTorch's error for a leaf that requires grad (or a view of one), so a refused
        write leaves the tensor unchanged.
    recorder.requires_grad_(tensor, flag) -> None
        set or clear requires_grad on a tensor (validating that it is allowed).

The trace hook (public through fiamma.autograd_hook.set_trace_hook, used by fiamma.jit): while
a tracer is installed in this thread, ``record``, ``record_inplace``, ``check_inplace`` and
``inplace`` go to it instead of the autograd recorder (same signatures). The tracer marks the
tensors it follows with the ``requires_grad`` slot, so every op depending on them reaches this
path; nothing changes on the ops' no-grad fast paths, and with no tracer the cost is one
thread-local read on the recording path.
"""

import threading

__all__ = [
    "register_autograd", "autograd_module", "is_grad_enabled", "set_grad_enabled_flag",
    "is_inference_mode_enabled", "record", "record_new", "record_inplace", "check_inplace",
    "any_requires_grad", "inplace", "set_trace_hook",
]

_recorder = None
_record_new = None  # the recorder's record_new (None: it has none)


class _State(threading.local):
    enabled = True
    inference = False
    tracer = None


state = _State()


def register_autograd(recorder):
    """Called by fiamma-autograd at import: install the object that records graphs."""
    global _recorder, _record_new
    _recorder = recorder
    _record_new = getattr(recorder, "record_new", None)


def autograd_module():
    """The registered recorder, importing fiamma-autograd on first use.

    Raises RuntimeError telling the user to install fiamma-autograd when it is missing.
    """
    if _recorder is None:
        try:
            import fiamma.autograd  # noqa: F401  (registers itself)
        except ImportError as e:
            raise RuntimeError(
                "gradients need the fiamma-autograd package: pip install fiamma-autograd "
                f"(import failed: {e})") from None
        if _recorder is None:
            raise RuntimeError("fiamma.autograd was imported but did not register with core")
    return _recorder


def is_grad_enabled():
    """Whether ops record graphs for autograd in this thread (True by default)."""
    return state.enabled


def set_grad_enabled_flag(flag):
    """Set this thread's grad mode; returns the previous value (context managers live in
    fiamma-autograd and in fiamma.no_grad)."""
    prev = state.enabled
    state.enabled = bool(flag)
    return prev


def is_inference_mode_enabled():
    return state.inference


def any_requires_grad(*xs):
    for x in xs:
        if getattr(x, "requires_grad", False):
            return True
    return False


def set_trace_hook(tracer):
    """Install ``tracer`` (or None) for this thread; returns the previous one."""
    prev = state.tracer
    state.tracer = tracer
    return prev


def record(op, out, inputs, kwargs=None):
    """Record ``op`` for autograd if grad mode is on (callers check requires_grad first).
    A tensor may require grad before fiamma-autograd was imported (``t.requires_grad = True``
    sets the slot directly): the recorder is then imported here."""
    if state.enabled:
        (state.tracer or _recorder or autograd_module()).record(op, out, inputs, kwargs or {})


def record_new(op, out, inputs):
    """``record(op, out, inputs)`` for a result the op has just allocated (a fresh Tensor, not a
    view) of an op without keyword arguments: the operators' fast paths, once per recorded op,
    so the recorder may skip the checks a view or a returned input needs."""
    st = state
    if st.enabled:
        if st.tracer is None and _record_new is not None:
            _record_new(op, out, inputs)
        else:
            (st.tracer or _recorder or autograd_module()).record(op, out, inputs, {})


def check_inplace(t, op):
    """Before ``op`` writes into ``t`` in place (callers check ``t.requires_grad`` first): the
    recorder's leaf check, so a refused write changes nothing."""
    if state.enabled:
        rec = state.tracer or _recorder or autograd_module()
        chk = getattr(rec, "check_inplace", None)
        if chk is not None:
            chk(t, op)


def record_inplace(op, out, inputs, kwargs=None):
    if state.enabled:
        (state.tracer or _recorder or autograd_module()).record_inplace(op, out, inputs,
                                                                        kwargs or {})


def inplace(fn, name, self, args, kwargs):
    """An in-place op with gradients (grad mode on, a tensor argument requires grad)."""
    (state.tracer or autograd_module()).inplace(fn, name, self, args, kwargs)
