"""Elementwise ops with broadcasting and PyTorch's type promotion, and the Python operators.

Every binary op goes through ``binary``: promote, broadcast, cast operands to the compute dtype,
run the C kernel over strided operands (a Python scalar stays a scalar: the kernel reads it
through a zero stride). The operators have a fast path for the common case (same dtype, same
shape, contiguous, no autograd) that costs one allocation and one C call.
"""

import builtins

from fiamma import _dtype as D
from fiamma import _grad_hook as G
from fiamma._lib import check, lib
from fiamma._tensor import Tensor, _copy_into, install_methods, new_empty
from fiamma._ops._common import (as_operand, bcast_strides, broadcast_shapes, cast, check_out,
                                 is_scalar, overlaps, same_device)

__all__ = [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "maximum", "minimum", "neg", "negative", "exp", "relu",
]

_binary_c = lib.fm_binary
_binary_scalar_c = lib.fm_binary_scalar
_binary_contig_c = lib.fm_binary_contig
_unary_c = lib.fm_unary
_unary_contig_c = lib.fm_unary_contig

# op kinds: how the compute dtype and the output dtype follow from the promoted dtype
ARITH = 0      # compute and output in the promoted dtype
PREDICATE = 1  # compute in the promoted dtype, output bool
TRUEDIV = 2    # integers and bool promote to the default float dtype first


def _compute_dtype(kind, rt):
    if kind == TRUEDIV and rt.kind != 2:
        return D.get_default_dtype()
    return rt


def _unsupported(op, dt):
    raise TypeError(f"{op}: not implemented for dtype {dt}")


def binary(code, name, kind, a, b, out=None, record=True):
    """Run binary op ``code`` on tensors/scalars ``a`` and ``b``.

    ``out`` may be given (cast into it). Returns the result tensor.
    """
    a = as_operand(a, name)
    b = as_operand(b, name)
    ta = isinstance(a, Tensor)
    tb = isinstance(b, Tensor)
    if not (ta or tb):
        raise TypeError(f"{name}: expected at least one tensor operand")
    dev = same_device(name, a, b)
    rt = D.result_type(a, b)
    ct = _compute_dtype(kind, rt)
    od = D.bool if kind == PREDICATE else ct
    if ta and tb:
        shape = broadcast_shapes(a._shape, b._shape, op=name)
    else:
        shape = a._shape if ta else b._shape
    if out is not None:
        check_out(out, shape, od, name)
        dst = out if (out._dtype is od and not (ta and overlaps(out, a))
                      and not (tb and overlaps(out, b))) else None
    else:
        dst = None
    res = dst if dst is not None else new_empty(shape, od, dev)
    if res._numel:
        if ta and tb:
            ca, cb = cast(a, ct), cast(b, ct)
            rc = _binary_c(code, ct.code, len(shape), shape, res._ptr, res._stride,
                           ca._ptr, bcast_strides(ca, shape), cb._ptr, bcast_strides(cb, shape))
        else:
            t, s = (a, b) if ta else (b, a)
            t = cast(t, ct)
            sf, si = _scalar_args(s, ct, name)
            rc = _binary_scalar_c(code, ct.code, len(shape), shape, res._ptr, res._stride,
                                  t._ptr, bcast_strides(t, shape), sf, si, 0 if ta else 1)
        if rc:
            _raise(rc, name, ct)
    if out is not None and res is not out:
        _copy_into(out, res)
        res = out
    if record and ((ta and a.requires_grad) or (tb and b.requires_grad)):
        G.record(name, res, (a, b), {})
    return res


def _scalar_args(s, ct, name):
    """A Python scalar as (double, int64) for the C kernel."""
    if ct.kind == 2:
        return builtins.float(s), 0
    v = builtins.int(s)
    if not -(1 << 63) <= v < (1 << 63):
        raise RuntimeError(f"{name}: value {v} cannot be converted to type {ct} without overflow")
    return 0.0, v


def _raise(rc, name, dt):
    if rc == lib.FM_ERR_DTYPE:
        _unsupported(name, dt)
    if rc == lib.FM_ERR_VALUE:
        raise ZeroDivisionError(f"{name}: integer division by zero")
    check(rc, name)


def unary(code, name, x, out=None, p0=0.0, p1=0.0, p2=0.0, float_only=False, record=True,
          kwargs=None):
    """Run unary op ``code``. ``float_only`` ops promote integer/bool input to the default float
    dtype (torch.exp(int tensor) -> float32)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    src = x
    if float_only and x._dtype.kind != 2:
        src = cast(x, D.get_default_dtype())
    od_code = lib.fm_unary_out_dtype(code, src._dtype.code)
    if od_code < 0:
        _unsupported(name, src._dtype)
    od = D.BY_CODE[od_code]
    if out is not None:
        check_out(out, x._shape, od, name)
    res = out if (out is not None and out._dtype is od and not overlaps(out, src)) else \
        new_empty(x._shape, od, x._storage.device)
    if res._numel:
        if res._contig and src._contig and not (p0 or p1 or p2):
            rc = _unary_contig_c(code, src._dtype.code, res._numel, res._ptr, src._ptr)
        else:
            rc = _unary_c(code, src._dtype.code, len(x._shape), x._shape, res._ptr, res._stride,
                          src._ptr, src._stride, p0, p1, p2)
        if rc:
            _raise(rc, name, src._dtype)
    if out is not None and res is not out:
        _copy_into(out, res)
        res = out
    if record and x.requires_grad:
        G.record(name, res, (x,), kwargs or {})
    return res


def inplace_binary(code, name, kind, self, other):
    """``self op= other``: result cast into self (dtype must be castable), version bumped."""
    if not isinstance(self, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(self).__name__}")
    other = as_operand(other, name)
    rt = D.result_type(self, other)
    od = D.bool if kind == PREDICATE else _compute_dtype(kind, rt)
    if not D.can_cast(od, self._dtype):
        raise RuntimeError(f"{name}: result type {od} can't be cast to the desired output type "
                           f"{self._dtype}")
    if isinstance(other, Tensor):
        shape = broadcast_shapes(self._shape, other._shape, op=name)
        if shape != self._shape:
            raise RuntimeError(f"{name}: output with shape {list(self._shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")
    binary(code, name, kind, self, other, out=self, record=False)
    self._bump()
    if self.requires_grad or (isinstance(other, Tensor) and other.requires_grad):
        G.record_inplace(name, self, (self, other), {})
    return self


# ---- public binary ops ---------------------------------------------------------------------

def _alpha_scaled(name, b, alpha):
    if alpha == 1:
        return b
    if isinstance(b, Tensor):
        return binary(lib.FM_BIN_MUL, "mul", ARITH, b, alpha)
    return b * alpha


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other, with broadcasting and type promotion."""
    return binary(lib.FM_BIN_ADD, "add", ARITH, input, _alpha_scaled("add", other, alpha), out)


def sub(input, other, *, alpha=1, out=None):
    if isinstance(input, Tensor) and input._dtype is D.bool or \
            isinstance(other, Tensor) and other._dtype is D.bool:
        raise RuntimeError("sub: Subtraction, the `-` operator, with a bool tensor is not "
                           "supported. If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")
    return binary(lib.FM_BIN_SUB, "sub", ARITH, input, _alpha_scaled("sub", other, alpha), out)


def mul(input, other, *, out=None):
    return binary(lib.FM_BIN_MUL, "mul", ARITH, input, other, out)


def div(input, other, *, rounding_mode=None, out=None):
    """True division (integers promote to float); rounding_mode 'trunc' or 'floor'."""
    if rounding_mode is None:
        return binary(lib.FM_BIN_DIV, "div", TRUEDIV, input, other, out)
    if rounding_mode == "floor":
        from fiamma._ops import elementwise as E

        fd = getattr(E, "floor_divide", None)
        if fd is None:
            raise NotImplementedError("div: rounding_mode='floor' needs floor_divide")
        return fd(input, other, out=out)
    if rounding_mode == "trunc":
        from fiamma._ops import elementwise as E

        td = getattr(E, "_trunc_divide", None)
        if td is None:
            raise NotImplementedError("div: rounding_mode='trunc' needs _trunc_divide")
        return td(input, other, out=out)
    raise ValueError(f"div: expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found '{rounding_mode}'")


def _cmp(code, name):
    def op(input, other, *, out=None):
        return binary(code, name, PREDICATE, input, other, out)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} with broadcasting; returns a bool tensor."
    return op


eq = _cmp(lib.FM_BIN_EQ, "eq")
ne = _cmp(lib.FM_BIN_NE, "ne")
lt = _cmp(lib.FM_BIN_LT, "lt")
le = _cmp(lib.FM_BIN_LE, "le")
gt = _cmp(lib.FM_BIN_GT, "gt")
ge = _cmp(lib.FM_BIN_GE, "ge")


def maximum(input, other, *, out=None):
    if not isinstance(other, Tensor):
        raise TypeError(f"maximum: expected other to be a Tensor, got {type(other).__name__}")
    return binary(lib.FM_BIN_MAXIMUM, "maximum", ARITH, input, other, out)


def minimum(input, other, *, out=None):
    if not isinstance(other, Tensor):
        raise TypeError(f"minimum: expected other to be a Tensor, got {type(other).__name__}")
    return binary(lib.FM_BIN_MINIMUM, "minimum", ARITH, input, other, out)


subtract = sub
multiply = mul
divide = true_divide = div
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


# ---- public unary ops ----------------------------------------------------------------------

def neg(input, *, out=None):
    if isinstance(input, Tensor) and input._dtype is D.bool:
        raise RuntimeError("neg: Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    return unary(lib.FM_UN_NEG, "neg", input, out)


negative = neg


def exp(input, *, out=None):
    return unary(lib.FM_UN_EXP, "exp", input, out, float_only=True)


def relu(input):
    if isinstance(input, Tensor) and input._dtype is D.bool:
        _unsupported("relu", D.bool)
    return unary(lib.FM_UN_RELU, "relu", input)


# ---- operators with the fast path ----------------------------------------------------------

def _fast_binary(code, name, kind, fallback):
    """An operator method: one C call when both operands are same-dtype, same-shape,
    contiguous tensors that need no gradient; ``fallback(self, other)`` otherwise."""
    bc = _binary_contig_c
    predicate = kind == PREDICATE

    def method(self, other):
        if (type(other) is Tensor and other._dtype is self._dtype and other._shape ==
                self._shape and self._contig and other._contig and not
                (self.requires_grad or other.requires_grad) and
                other._storage.device is self._storage.device):
            dt = self._dtype
            if kind == TRUEDIV and dt.kind != 2:
                return fallback(self, other)
            res = new_empty(self._shape, D.bool if predicate else dt, self._storage.device)
            rc = bc(code, dt.code, self._numel, res._ptr, self._ptr, other._ptr)
            if rc:
                _raise(rc, name, dt)
            return res
        if not (isinstance(other, Tensor) or is_scalar(other)):
            return NotImplemented
        return fallback(self, other)

    method.__name__ = f"__{name}__"
    return method


def _reflected(fn):
    def method(self, other):
        if not is_scalar(other) and not isinstance(other, Tensor):
            return NotImplemented
        return fn(other, self)

    return method


def _inplace(code, name, kind):
    def method(self, other):
        return inplace_binary(code, name, kind, self, other)

    method.__name__ = name
    return method


install_methods({
    "add": lambda self, other, *, alpha=1: add(self, other, alpha=alpha),
    "sub": lambda self, other, *, alpha=1: sub(self, other, alpha=alpha),
    "mul": lambda self, other: mul(self, other),
    "div": lambda self, other, *, rounding_mode=None: div(self, other,
                                                           rounding_mode=rounding_mode),
    "add_": lambda self, other, *, alpha=1: inplace_binary(
        lib.FM_BIN_ADD, "add_", ARITH, self, _alpha_scaled("add_", other, alpha)),
    "sub_": lambda self, other, *, alpha=1: inplace_binary(
        lib.FM_BIN_SUB, "sub_", ARITH, self, _alpha_scaled("sub_", other, alpha)),
    "mul_": _inplace(lib.FM_BIN_MUL, "mul_", ARITH),
    "div_": _inplace(lib.FM_BIN_DIV, "div_", TRUEDIV),
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "maximum": maximum, "minimum": minimum, "neg": neg, "negative": neg, "exp": exp,
    "relu": relu,
    "__add__": _fast_binary(lib.FM_BIN_ADD, "add", ARITH, add),
    "__radd__": _reflected(add),
    "__iadd__": _inplace(lib.FM_BIN_ADD, "add_", ARITH),
    "__sub__": _fast_binary(lib.FM_BIN_SUB, "sub", ARITH, sub),
    "__rsub__": _reflected(sub),
    "__isub__": _inplace(lib.FM_BIN_SUB, "sub_", ARITH),
    "__mul__": _fast_binary(lib.FM_BIN_MUL, "mul", ARITH, mul),
    "__rmul__": _reflected(mul),
    "__imul__": _inplace(lib.FM_BIN_MUL, "mul_", ARITH),
    "__truediv__": _fast_binary(lib.FM_BIN_DIV, "div", TRUEDIV, div),
    "__rtruediv__": _reflected(div),
    "__itruediv__": _inplace(lib.FM_BIN_DIV, "div_", TRUEDIV),
    "__eq__": _fast_binary(lib.FM_BIN_EQ, "eq", PREDICATE, eq),
    "__ne__": _fast_binary(lib.FM_BIN_NE, "ne", PREDICATE, ne),
    "__lt__": _fast_binary(lib.FM_BIN_LT, "lt", PREDICATE, lt),
    "__le__": _fast_binary(lib.FM_BIN_LE, "le", PREDICATE, le),
    "__gt__": _fast_binary(lib.FM_BIN_GT, "gt", PREDICATE, gt),
    "__ge__": _fast_binary(lib.FM_BIN_GE, "ge", PREDICATE, ge),
    "__neg__": neg,
    "__pos__": lambda self: self,
})
# __eq__ without __hash__ would make tensors unhashable; keep identity hashing
Tensor.__hash__ = lambda self: id(self)
