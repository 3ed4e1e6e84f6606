"""Gradients of registered operators: ``register_autograd``'s formula run as an
``autograd.Function`` (fiamma-autograd, imported when first needed)."""

import importlib

from fiamma._tensor import Tensor

from ._op import below_autograd

__all__ = ["apply"]


class _Spec:
    """How the Function's flat inputs map back to the schema's arguments: a ``Tensor[]``
    argument is one flat input per element (so each element gets its gradient)."""

    def __init__(self, op, pos, kw):
        self.op = op
        self.names = [a.name for a in op._schema.arguments]
        self.kw_names = list(kw)
        self.counts = []
        flat = []
        for v in list(pos) + list(kw.values()):
            if isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v):
                self.counts.append(len(v))
                flat.extend(v)
            else:
                self.counts.append(None)
                flat.append(v)
        self.flat = flat
        self.npos = len(pos)
        self.kinds = [type(v) for v in list(pos) + list(kw.values())]

    def unflatten(self, flat):
        vals, i = [], 0
        for c, k in zip(self.counts, self.kinds):
            if c is None:
                vals.append(flat[i])
                i += 1
            else:
                seq = list(flat[i:i + c])
                vals.append(tuple(seq) if k is tuple else seq)
                i += c
        return vals[:self.npos], dict(zip(self.kw_names, vals[self.npos:]))

    def regroup(self, flags):
        out, i = [], 0
        for c in self.counts:
            if c is None:
                out.append(flags[i])
                i += 1
            else:
                out.append(any(flags[i:i + c]))
                i += c
        return tuple(out[:self.npos])  # one per positional input, as the gradients

    def flatten_grads(self, grads):
        name = self.op.name()
        n = len(self.counts)
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        grads = list(grads)
        if len(grads) == self.npos and n > self.npos:
            grads += [None] * (n - self.npos)  # keyword-only inputs: no gradient needed
        if len(grads) != n:
            raise RuntimeError(f"{name}: the backward registered with register_autograd "
                               f"returned {len(grads)} gradient(s); expected one per input, "
                               f"{n} ({', '.join(self.names)}), None for inputs that need "
                               "none")
        flat = []
        for g, c, nm in zip(grads, self.counts, self.names):
            if c is None:
                flat.append(g)
            elif g is None:
                flat.extend([None] * c)
            else:
                if not isinstance(g, (list, tuple)) or len(g) != c:
                    raise RuntimeError(f"{name}: the gradient of the list input {nm!r} must "
                                       f"be a list of {c} gradients (or None), got "
                                       f"{type(g).__name__}")
                flat.extend(g)
        return flat


def _function_class(op):
    e = op._entry
    if e._fn_cls is not None:
        return e._fn_cls
    Function = importlib.import_module("fiamma.autograd").Function
    qual = op.name()

    def forward(ctx, spec, *flat):
        pos, kw = spec.unflatten(flat)
        ctx._lib_spec = spec
        out = below_autograd(op, pos, kw)
        reg = e.autograd
        if reg is not None and reg[1] is not None:
            setup = reg[1]
            if kw:  # keyword-only arguments come separately, as in PyTorch
                setup(ctx, inputs=tuple(pos), keyword_only_inputs=dict(kw), output=out)
            else:
                setup(ctx, tuple(pos), out)
        return out

    def backward(ctx, *grads):
        spec = ctx._lib_spec
        reg = e.autograd
        if reg is None:
            raise RuntimeError(f"Trying to backward through {op} but no autograd formula was "
                               "registered. Please use register_autograd to add one.")
        res = reg[0](ctx, *grads)
        return (None,) + tuple(spec.flatten_grads(res))

    name = qual.split("::")[1].replace(".", "_")
    cls = type(name, (Function,), {"forward": staticmethod(forward),
                                   "backward": staticmethod(backward)})

    def needs_input_grad(self):
        spec = getattr(self, "_lib_spec", None)
        flags = self._needs[1:]
        return spec.regroup(flags) if spec is not None else flags
    cls._backward_cls.needs_input_grad = property(needs_input_grad)
    e._fn_cls = cls
    return cls


def apply(op, pos, kw):
    """The op with gradients: its ``register_autograd`` formula (or, without one, outputs
    whose backward raises as PyTorch's do)."""
    spec = _Spec(op, pos, kw)
    return _function_class(op).apply(spec, *spec.flat)
