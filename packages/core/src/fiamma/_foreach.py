"""``torch._foreach_*``: one op over a list of tensors (PyTorch's multi-tensor kernels).

Optimizers and EMA helpers (timm's ``ModelEmaV3``, its ``foreach`` optimizer paths) call
``torch._foreach_mul_(params, 0.9)``, ``torch._foreach_add_(a, b, alpha=0.1)``,
``torch._foreach_norm(grads)`` and the like. Here each is a loop of the single-tensor op, so
results, dtypes and autograd are exactly those of the per-tensor calls. The second operand
may be a scalar, a list of scalars, a list of tensors or (for add/sub/mul/div) one tensor, as
in PyTorch; lists must have the same length. Out-of-place forms return a tuple of new
tensors; in-place forms (trailing ``_``) update the tensors and return the list given.

>>> import fiamma
>>> ps = [fiamma.ones(2), fiamma.ones(3)]
>>> _ = fiamma._foreach_mul_(ps, 0.5)
>>> [p.tolist() for p in fiamma._foreach_add(ps, [fiamma.ones(2), fiamma.ones(3)], alpha=2)]
[[2.5, 2.5], [2.5, 2.5, 2.5]]
"""

import importlib
import numbers

__all__ = []  # filled below: the _foreach_* names


def _list(x, op, what="self"):
    if isinstance(x, (list, tuple)):
        return x
    raise TypeError(f"{op}(): argument '{what}' must be a list or tuple of Tensors, got "
                    f"{type(x).__name__}")


def _same_len(a, b, op):
    if len(a) != len(b):
        raise RuntimeError(f"{op}: Tensor lists must have the same number of tensors, got "
                           f"{len(a)} and {len(b)}")


def _operands(other, n, op, what="other"):
    """``other`` spread to one operand per tensor (a scalar or a tensor repeats)."""
    from fiamma._tensor import Tensor

    if isinstance(other, (list, tuple)):
        if len(other) != n:
            raise RuntimeError(f"{op}: Tensor lists must have the same number of tensors, got "
                               f"{n} and {len(other)}")
        return other
    if isinstance(other, (numbers.Number, Tensor)) and not isinstance(other, str):
        return [other] * n
    raise TypeError(f"{op}(): argument '{what}' must be a Number, a Tensor or a list of them, "
                    f"got {type(other).__name__}")


def _unary(name):
    op = f"_foreach_{name}"

    def fn(self):
        return tuple(getattr(t, name)() for t in _list(self, op))

    def fn_(self):
        for t in _list(self, op + "_"):
            getattr(t, name + "_")()
        return self
    fn.__name__, fn_.__name__ = op, op + "_"
    fn.__doc__ = f"``[t.{name}() for t in self]`` as a tuple."
    fn_.__doc__ = f"``t.{name}_()`` for each tensor of ``self``; returns ``self``."
    return fn, fn_


# a number as the other operand of maximum/minimum is a clamp (PyTorch's scalar overloads)
_SCALAR_FORM = {"maximum": "clamp_min", "minimum": "clamp_max"}


def _method(t, name, o):
    base = name.rstrip("_")
    if base in _SCALAR_FORM and isinstance(o, numbers.Number):
        return getattr(t, _SCALAR_FORM[base] + name[len(base):])
    if name != base and not hasattr(t, name):  # maximum_/minimum_: no Tensor method
        return lambda o: t.copy_(getattr(t, base)(o))
    return getattr(t, name)


def _binary(name, alpha=False):
    op = f"_foreach_{name}"

    if alpha:
        def fn(self, other, *, alpha=1):
            self = _list(self, op)
            return tuple(getattr(t, name)(o, alpha=alpha) if alpha != 1 else getattr(t, name)(o)
                         for t, o in zip(self, _operands(other, len(self), op)))

        def fn_(self, other, *, alpha=1):
            self = _list(self, op + "_")
            for t, o in zip(self, _operands(other, len(self), op + "_")):
                if alpha != 1:
                    getattr(t, name + "_")(o, alpha=alpha)
                else:
                    getattr(t, name + "_")(o)
            return self
    else:
        def fn(self, other):
            self = _list(self, op)
            return tuple(_method(t, name, o)(o)
                         for t, o in zip(self, _operands(other, len(self), op)))

        def fn_(self, other):
            self = _list(self, op + "_")
            for t, o in zip(self, _operands(other, len(self), op + "_")):
                _method(t, name + "_", o)(o)
            return self
    fn.__name__, fn_.__name__ = op, op + "_"
    fn.__doc__ = f"``t.{name}(o)`` per tensor ``t`` and operand ``o`` (a tuple)."
    fn_.__doc__ = f"``t.{name}_(o)`` per tensor and operand; returns ``self``."
    return fn, fn_


def _pointwise3(name):
    op = f"_foreach_{name}"

    def _values(self, t1, t2, value, op):
        self = _list(self, op)
        t1, t2 = _list(t1, op, "tensor1"), _list(t2, op, "tensor2")
        _same_len(self, t1, op)
        _same_len(self, t2, op)
        from fiamma._tensor import Tensor

        if isinstance(value, Tensor) and value.dim() == 1:
            value = value.tolist()  # PyTorch's "scalars" tensor: one value per tensor
        return self, t1, t2, _operands(value, len(self), op, "value")

    def fn(self, tensor1, tensor2, value=1):
        self, t1, t2, vs = _values(self, tensor1, tensor2, value, op)
        return tuple(getattr(t, name)(a, b, value=v) for t, a, b, v in zip(self, t1, t2, vs))

    def fn_(self, tensor1, tensor2, value=1):
        self, t1, t2, vs = _values(self, tensor1, tensor2, value, op + "_")
        for t, a, b, v in zip(self, t1, t2, vs):
            getattr(t, name + "_")(a, b, value=v)
        return self
    fn.__name__, fn_.__name__ = op, op + "_"
    fn.__doc__ = f"``t.{name}(t1, t2, value=v)`` per tensor (a tuple)."
    fn_.__doc__ = f"``t.{name}_(t1, t2, value=v)`` per tensor; returns ``self``."
    return fn, fn_


def _lerp():
    op = "_foreach_lerp"

    def _args(self, ends, weight, op):
        self, ends = _list(self, op), _list(ends, op, "tensors1")
        _same_len(self, ends, op)
        return self, ends, _operands(weight, len(self), op, "weight")

    def fn(self, tensors1, weight):
        self, ends, ws = _args(self, tensors1, weight, op)
        return tuple(t.lerp(e, w) for t, e, w in zip(self, ends, ws))

    def fn_(self, tensors1, weight):
        self, ends, ws = _args(self, tensors1, weight, op + "_")
        for t, e, w in zip(self, ends, ws):
            t.lerp_(e, w)
        return self
    fn.__name__, fn_.__name__ = op, op + "_"
    return fn, fn_


_ns = globals()
for _name in ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp",
              "expm1", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg",
              "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan",
              "tanh", "trunc"):
    _ns[f"_foreach_{_name}"], _ns[f"_foreach_{_name}_"] = _unary(_name)
for _name, _alpha in (("add", True), ("sub", True), ("mul", False), ("div", False),
                      ("maximum", False), ("minimum", False), ("clamp_min", False),
                      ("clamp_max", False)):
    _ns[f"_foreach_{_name}"], _ns[f"_foreach_{_name}_"] = _binary(_name, _alpha)
for _name in ("addcmul", "addcdiv"):
    _ns[f"_foreach_{_name}"], _ns[f"_foreach_{_name}_"] = _pointwise3(_name)
_foreach_lerp, _foreach_lerp_ = _lerp()


def _foreach_pow(self, exponent):
    """``t ** e`` per tensor; ``self`` may be a scalar base with a list of exponents."""
    if isinstance(self, numbers.Number):
        fiamma = importlib.import_module("fiamma")  # by name: the package imports this module

        return tuple(fiamma.pow(self, e) for e in _list(exponent, "_foreach_pow", "exponent"))
    self = _list(self, "_foreach_pow")
    return tuple(t.pow(e) for t, e in zip(self, _operands(exponent, len(self), "_foreach_pow",
                                                          "exponent")))


def _foreach_pow_(self, exponent):
    self = _list(self, "_foreach_pow_")
    for t, e in zip(self, _operands(exponent, len(self), "_foreach_pow_", "exponent")):
        t.pow_(e)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """The vector norm of each tensor (0-d tensors, a tuple)."""
    linalg = importlib.import_module("fiamma.linalg")  # by name (see _foreach_pow)

    return tuple(linalg.vector_norm(t, ord, dtype=dtype)
                 for t in _list(self, "_foreach_norm"))


def _foreach_max(self):
    """The largest element of each tensor (0-d tensors, a tuple)."""
    return tuple(t.max() for t in _list(self, "_foreach_max"))


def _foreach_clone(self):
    return tuple(t.clone() for t in _list(self, "_foreach_clone"))


def _foreach_copy_(self, src, non_blocking=False):
    """``t.copy_(s)`` per pair; returns ``self``."""
    self, src = _list(self, "_foreach_copy_"), _list(src, "_foreach_copy_", "src")
    _same_len(self, src, "_foreach_copy_")
    for t, s in zip(self, src):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_zero_(self):
    for t in _list(self, "_foreach_zero_"):
        t.zero_()
    return self


__all__ = sorted(n for n in _ns if n.startswith("_foreach_"))
