"""fiamma.utils.checkpoint: activation checkpointing (PyTorch's ``torch.utils.checkpoint``).

``checkpoint(fn, *args, use_reentrant=...)`` runs ``fn`` without keeping its intermediate
results and runs it again during backward to get them, trading compute for memory. The random
state is saved and restored around the recomputation (``preserve_rng_state=True``), so dropout
draws the same masks; the autocast state is replayed too.

* ``use_reentrant=False`` (recommended, as in PyTorch): the forward records the graph as usual
  but the tensors its ops save for backward are replaced by handles (saved-tensor hooks); the
  first backward that needs one recomputes ``fn`` once and hands out the recomputed tensors,
  checked against the originals' shapes and dtypes. Works when no input requires grad
  (parameters inside ``fn`` still get gradients), with keyword arguments and with
  ``fiamma.autograd.grad``.
* ``use_reentrant=True``: ``fn`` runs under ``no_grad`` inside a custom autograd Function whose
  backward recomputes it and runs a nested backward. Gradients of parameters used inside are
  accumulated into their ``.grad`` (so ``autograd.grad`` w.r.t. them is not supported), at
  least one tensor input should require grad, and keyword arguments are refused, as in PyTorch.

Not passing ``use_reentrant`` warns and uses ``True`` (PyTorch 2.13's behaviour).

>>> import fiamma
>>> from fiamma.utils.checkpoint import checkpoint
>>> x = fiamma.randn(4, 3, requires_grad=True)
>>> y = checkpoint(lambda t: (t.sin() * 2).sum(), x, use_reentrant=False)
>>> y.backward()
>>> bool(fiamma.allclose(x.grad, 2 * x.cos()))
True
"""

import contextlib
import warnings

import fiamma

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "detach_variable",
           "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation did not reproduce what the forward saved."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """Detached copies of the tensors in the tuple ``inputs`` keeping ``requires_grad``."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for x in inputs:
        if isinstance(x, fiamma.Tensor):
            d = x.detach()
            d.requires_grad_(x.requires_grad)
            out.append(d)
        else:
            out.append(x)
    return tuple(out)


def _autocast_state():
    return fiamma.amp.is_autocast_enabled("cpu"), fiamma.amp.get_autocast_dtype("cpu")


@contextlib.contextmanager
def _replay(rng_state, autocast_state):
    """The random and autocast state of the forward, for the recomputation."""
    with fiamma.random.fork_rng(enabled=rng_state is not None):
        if rng_state is not None:
            fiamma.set_rng_state(rng_state)
        enabled, dtype = autocast_state
        with fiamma.enable_grad(), fiamma.amp.autocast("cpu", dtype=dtype, enabled=enabled):
            yield


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` without storing its intermediates; recompute them in
    backward (see the module documentation for the two variants)."""
    if use_reentrant is None:
        warnings.warn("fiamma.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly; use_reentrant=False is recommended. Using True (PyTorch "
                      "2.13's default).", UserWarning, stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError("checkpoint: determinism_check should be 'default' or 'none', got "
                         f"{determinism_check!r}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("checkpoint: passing context_fn or debug is only supported when "
                             "use_reentrant=False.")
        if kwargs:
            raise ValueError("checkpoint: unexpected keyword arguments: "
                             + ",".join(kwargs))
        return _reentrant_function().apply(function, bool(preserve_rng_state), *args)
    return _checkpoint_with_hooks(function, args, kwargs, bool(preserve_rng_state),
                                  context_fn, determinism_check)


_REENTRANT = []


def _reentrant_function():
    """The autograd Function behind ``use_reentrant=True`` (made once fiamma.autograd is
    imported: core itself does not need it)."""
    if _REENTRANT:
        return _REENTRANT[0]
    from fiamma.autograd import Function

    class CheckpointFunction(Function):
        @staticmethod
        def forward(ctx, run_function, preserve_rng_state, *args):
            ctx.run_function = run_function
            ctx.rng_state = fiamma.get_rng_state() if preserve_rng_state else None
            ctx.autocast_state = _autocast_state()
            ctx.plain_args = [None if isinstance(a, fiamma.Tensor) else a for a in args]
            ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, fiamma.Tensor)]
            ctx.save_for_backward(*(a for a in args if isinstance(a, fiamma.Tensor)))
            if not any(getattr(a, "requires_grad", False) for a in args):
                warnings.warn("None of the inputs have requires_grad=True. Gradients will be "
                              "None", UserWarning, stacklevel=4)
            with fiamma.no_grad():
                return run_function(*args)

        @staticmethod
        def backward(ctx, *grads):
            from fiamma import autograd

            inputs = list(ctx.plain_args)
            for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
                inputs[i] = t
            inputs = detach_variable(tuple(inputs))
            with _replay(ctx.rng_state, ctx.autocast_state):
                outputs = ctx.run_function(*inputs)
            if isinstance(outputs, fiamma.Tensor):
                outputs = (outputs,)
            pairs = [(o, g) for o, g in zip(outputs, grads)
                     if isinstance(o, fiamma.Tensor) and o.requires_grad and g is not None]
            if not pairs:
                raise RuntimeError("none of output has requires_grad=True, this checkpoint() "
                                   "is not necessary")
            autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            return (None, None) + tuple(x.grad if isinstance(x, fiamma.Tensor) else None
                                        for x in inputs)

    _REENTRANT.append(CheckpointFunction)
    return CheckpointFunction


class _Frame:
    """What one non-reentrant checkpoint saved in its forward and recomputed in backward."""

    def __init__(self, function, args, kwargs, rng_state, autocast_state, recompute_ctx,
                 check):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state, self.autocast_state = rng_state, autocast_state
        self.recompute_ctx, self.check = recompute_ctx, check
        self.meta = []          # (shape, dtype) of each tensor the forward saved, in order
        self.recomputed = None

    def pack(self, t):
        self.meta.append((tuple(t.shape), t.dtype))
        return _Handle(self, len(self.meta) - 1)

    def recompute(self):
        saved = []

        def pack(t):
            saved.append(t.detach())
            return None

        from fiamma.autograd.graph import saved_tensors_hooks

        with _replay(self.rng_state, self.autocast_state), self.recompute_ctx, \
                saved_tensors_hooks(pack, lambda _: None):
            self.function(*self.args, **self.kwargs)
        if len(saved) != len(self.meta):
            raise CheckpointError(
                f"fiamma.utils.checkpoint: the recomputation saved {len(saved)} tensors for "
                f"backward, the forward saved {len(self.meta)}: the function must run the same "
                "ops when it is run again (no branching on global state that changed)")
        if self.check:
            for i, (t, (shape, dtype)) in enumerate(zip(saved, self.meta)):
                if tuple(t.shape) != shape or t.dtype is not dtype:
                    raise CheckpointError(
                        f"fiamma.utils.checkpoint: saved tensor {i} was shape {list(shape)} "
                        f"dtype {dtype} in the forward but is shape {list(t.shape)} dtype "
                        f"{t.dtype} in the recomputation")
        self.recomputed = saved
        self.args = self.kwargs = None  # the inputs are no longer needed


class _Handle:
    """What the graph keeps instead of a saved tensor (never a tuple: autograd reads a tuple
    as one handle per output)."""

    __slots__ = ("frame", "index")

    def __init__(self, frame, index):
        self.frame, self.index = frame, index


def _unpack(handle):
    frame, i = handle.frame, handle.index
    if frame.recomputed is None:
        if frame.args is None:
            raise CheckpointError("fiamma.utils.checkpoint: the saved tensors were already "
                                  "freed (backward through the graph a second time needs "
                                  "retain_graph=True on the first backward)")
        frame.recompute()
    return frame.recomputed[i]


def _checkpoint_with_hooks(function, args, kwargs, preserve_rng_state, context_fn,
                           determinism_check):
    from fiamma.autograd.graph import saved_tensors_hooks

    forward_ctx, recompute_ctx = context_fn()
    frame = _Frame(function, args, kwargs,
                   fiamma.get_rng_state() if preserve_rng_state else None, _autocast_state(),
                   recompute_ctx, determinism_check == "default")
    with saved_tensors_hooks(frame.pack, _unpack), forward_ctx:
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a ``Sequential`` (or a list of modules/functions) in ``segments`` chunks, each but the
    last checkpointed: only the chunk boundaries' activations are kept."""
    if use_reentrant is None:
        warnings.warn("fiamma.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly; use_reentrant=False is "
                      "recommended. Using True (PyTorch 2.13's default).", UserWarning,
                      stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("checkpoint_sequential: unexpected keyword arguments: "
                         + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got "
                         f"{segments!r}")
    if not functions:
        return input
    size = max(len(functions) // segments, 1)

    def run(start, end):
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        if end >= len(functions) - 1:
            end = start - 1
            break
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
