"""The derivative-formula registry.

A formula is registered for one or more recorded ops, named by their key objects in core's
table ``fiamma.autograd_hook.ops`` (never by strings), and says what the engine must save at
record time::

    from fiamma.autograd._formulas import derivative, sum_to_shape
    from fiamma.autograd_hook import ops

    @derivative(ops.mul, save="inputs")    # "inputs" | "output" | "both" | "none"
    def _mul(ctx, grad):
        a, b = ctx.inputs
        return grad * b, grad * a          # one entry per positional input; None: no gradient

``ctx`` (the graph node) has ``op``, ``inputs`` (as recorded; tensor positions hold the saved
tensors when inputs are saved, else None), ``kwargs``, ``output`` (when saved),
``needs_input_grad``, ``input_shapes`` and ``input_dtypes`` (None for non-tensor positions).
``grad`` is a Tensor for a single output, a tuple (None where an output got no gradient) for a
tuple output. The engine reduces a returned gradient to its input's shape (``sum_to_shape``) and
casts it to the input's dtype. Formulas are written in differentiable fiamma ops, so
``create_graph=True`` differentiates them again.

Every module in this package registers its formulas when imported; ``load_all`` imports them
all and ``check_complete`` then requires a formula for every differentiable op core declares
(both run when ``fiamma.autograd`` is imported). So a misspelled op is an ``AttributeError`` of
``ops`` while the formula's module is imported, a string or a key that core did not declare is a
``TypeError`` of ``derivative``, and a missing derivative makes importing fiamma.autograd fail.
A later registration for an op replaces an earlier one.
"""

import importlib
import pkgutil

from fiamma.autograd_hook import OpKey, ops

__all__ = ["derivative", "sum_to_shape", "lookup", "lookup_complex", "unsaved", "registered",
           "load_all", "check_complete", "SAVE_MODES"]

SAVE_MODES = ("inputs", "output", "both", "none")

# keyed by the op's name (a plain str, what core passes to record): the lookups stay str lookups
_REGISTRY = {}    # op name -> (formula, save)
_COMPLEX = {}     # op name -> (formula, save) used when the op's result is complex
_UNSAVED = {}     # op name -> input positions that save="inputs" does not save
_UNSAVED_OUT = {} # op name -> output positions that save="output" does not save
_listeners = []   # called with the op name when a registration changes


def derivative(*keys, save="inputs", complex=False, unsaved=(), unsaved_outputs=()):
    """Decorator registering ``fn(ctx, grad)`` as the derivative of the ops ``keys`` (keys of
    ``fiamma.autograd_hook.ops``: ``ops.mul``; declare an op core does not record with
    ``fiamma.autograd_hook.declare_op`` first).

    With ``complex=True`` the formula is used only for complex results, and gets the saved
    tensors as they are; an op without one runs its real formula on the saved tensors
    conjugated (PyTorch's convention for holomorphic ops with real coefficients).

    ``unsaved`` lists input positions whose values the formula does not read (only their
    shapes and dtypes, which every node keeps): with ``save="inputs"`` or ``"both"`` they are
    not saved, so ``ctx.inputs`` holds None there and writing into them in place before
    backward is allowed, as in PyTorch (addmm's ``input``: the bias of ``linear``). It may
    also be a function ``(inputs, kwargs) -> positions`` for ops whose needs depend on the
    call (``max`` with a ``dim``, ``lerp`` with a scalar weight).

    ``unsaved_outputs`` does the same for the outputs of a multi-output op saved with
    ``save="output"`` or ``"both"``: positions the formula does not read are not saved
    (``ctx.output`` holds None there), so writing into them in place before backward is
    allowed, as in PyTorch (``topk``'s values: its derivative needs only the indices)."""
    if not keys:
        raise TypeError("derivative: expected one or more op keys (fiamma.autograd_hook.ops.X)")
    for k in keys:
        if not isinstance(k, OpKey) or ops.get(k.name) is not k:
            raise TypeError(
                f"derivative: expected op keys of fiamma.autograd_hook.ops (ops.mul), got "
                f"{k!r} ({type(k).__name__}): op names are not accepted, declare an op that "
                "core does not record with fiamma.autograd_hook.declare_op")
    if save not in SAVE_MODES:
        raise ValueError(f"derivative: save must be one of {SAVE_MODES}, got {save!r}")
    names = [k.name for k in keys]
    unsaved = unsaved if callable(unsaved) else tuple(unsaved)

    def deco(fn):
        for n in names:
            (_COMPLEX if complex else _REGISTRY)[n] = (fn, save)
            if not complex:
                if unsaved:
                    _UNSAVED[n] = unsaved
                else:
                    _UNSAVED.pop(n, None)
                if unsaved_outputs:
                    _UNSAVED_OUT[n] = tuple(unsaved_outputs)
                else:
                    _UNSAVED_OUT.pop(n, None)
            for cb in _listeners:
                cb(n)
        return fn

    return deco


def lookup(op):
    """``(formula, save)`` registered for ``op`` (a key or its name), or None."""
    return _REGISTRY.get(op)


def unsaved(op):
    """The input positions ``op``'s formula does not save (``derivative(..., unsaved=...)``): a
    tuple, or a function of the recorded ``(inputs, kwargs)`` giving one."""
    return _UNSAVED.get(op, ())


def unsaved_outputs(op):
    """The output positions ``op``'s formula does not save
    (``derivative(..., unsaved_outputs=...)``): a tuple."""
    return _UNSAVED_OUT.get(op, ())


def lookup_complex(op):
    """``(formula, save)`` registered with ``complex=True`` for ``op`` (a key or its name), or
    None."""
    return _COMPLEX.get(op)


def check_complete(table=ops):
    """Raise ``LookupError`` naming every differentiable op of ``table`` (core's declared ops)
    that has no formula; run when fiamma.autograd is imported, after :func:`load_all`."""
    missing = sorted(k.name for k in table
                     if k.differentiable and k.name not in _REGISTRY and k.name not in _COMPLEX)
    if missing:
        raise LookupError(
            f"fiamma.autograd: no derivative formula is registered for the differentiable ops "
            f"{missing} that core records (register one with @derivative(ops.<name>), or "
            "declare the op with differentiable=False)")


def registered():
    """The sorted op names that have a formula."""
    return sorted(_REGISTRY)


def sum_to_shape(grad, shape):
    """Sum ``grad`` over the dimensions broadcasting added or expanded so it has ``shape``
    (differentiable: written in fiamma ops)."""
    shape = tuple(shape)
    gshape = tuple(grad.shape)
    if gshape == shape:
        return grad
    lead = len(gshape) - len(shape)
    if lead < 0:
        return grad.reshape(shape)  # e.g. a 1-element gradient for a 0-d input
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1)
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    if lead or tuple(grad.shape) != shape:
        grad = grad.reshape(shape)
    return grad


def load_all():
    """Import every formula module of this package (each registers itself)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")
