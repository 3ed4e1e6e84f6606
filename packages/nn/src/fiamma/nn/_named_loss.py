"""Losses as single autograd nodes with PyTorch's names (``MseLossBackward0``, ...).

fiamma's losses are compositions of core ops, so their graphs end in ``MeanBackward0`` and the
like, where PyTorch's end in one node named after the loss: ``loss.grad_fn`` prints
``<MseLossBackward0 ...>`` and ``loss.grad_fn.next_functions`` leads straight to the layer that
made the input (the 60-minute blitz prints both). :func:`as_node` runs a composite loss as one
node of that name: the forward runs without recording, the backward re-runs the composite with
recording on and differentiates it, so values and gradients (also higher-order ones, under
``create_graph=True``) are exactly those of the composite.
"""

import threading

import fiamma

__all__ = ["as_node"]

_CLASSES = {}
_CALL = threading.local()  # the composite and its other arguments, for the forward to pick up


def _node_class(name):
    cls = _CLASSES.get(name)
    if cls is None:
        from fiamma.autograd import Function

        class _Loss(Function):
            @staticmethod
            def forward(ctx, *tensors):
                fn, slots, rest = _CALL.value
                ctx.fn, ctx.slots, ctx.rest = fn, slots, rest
                ctx.save_for_backward(*tensors)
                return fn(*_fill(slots, tensors), *rest)

            @staticmethod
            def backward(ctx, grad):
                inputs = ctx.saved_tensors
                need = [i for i in range(len(inputs)) if ctx.needs_input_grad[i]]
                create = fiamma.is_grad_enabled()  # backward(create_graph=True)
                with fiamma.enable_grad():
                    if create:  # differentiate through the inputs themselves: double backward
                        xs = list(inputs)
                    else:
                        xs = [t.detach().requires_grad_(i in need) for i, t in enumerate(inputs)]
                    out = ctx.fn(*_fill(ctx.slots, xs), *ctx.rest)
                    got = fiamma.autograd.grad(out, [xs[i] for i in need], grad,
                                               create_graph=create, allow_unused=True)
                res = [None] * len(inputs)
                for i, g in zip(need, got):
                    res[i] = g
                return tuple(res)

        _Loss._backward_cls.__name__ = _Loss._backward_cls.__qualname__ = name
        cls = _CLASSES[name] = _Loss
    return cls


def _fill(slots, tensors):
    """The composite's tensor arguments: ``tensors`` at the places ``slots`` marks True, None
    at the others (optional tensors not given)."""
    it = iter(tensors)
    return [next(it) if s else None for s in slots]


def as_node(name, fn, tensors, *rest):
    """``fn(*tensors, *rest)`` recorded as one autograd node called ``name`` when a tensor in
    ``tensors`` (None allowed: an optional tensor not given) needs a gradient; plain ``fn``
    otherwise (no cost). The node's inputs are the given tensors, in order."""
    if fiamma.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        slots = [t is not None for t in tensors]
        _CALL.value = (fn, slots, rest)
        try:
            return _node_class(name).apply(*(t for t in tensors if t is not None))
        finally:
            _CALL.value = None
    return fn(*tensors, *rest)
