"""Elementwise ops with broadcasting and PyTorch's type promotion, and the Python operators.

Every binary op has one driver (``binary_driver``): one fast test (same-dtype, same-shape
contiguous CPU tensors, or such a tensor and a Python number that needs no cast: one allocation
and one C call), compiled per op for its function, operator and in-place entries, and
``binary``, the general path: promote, broadcast, cast operands to the compute dtype, run the
backend's kernel over strided operands (a Python scalar stays a scalar: the kernel reads it
through a zero stride). ``unary`` and ``ternary`` do the same for one and three operands.
In-place forms (``x.add_(y)``, ``x += y``) outside the fast test run the op with ``out=x`` after
checking that the result can be cast to x's dtype and that broadcasting does not grow x; they
bump x's version counter.

The unary math functions (exp, sin, sigmoid, floor, isnan, ...) are in ``_unary.py``.
"""

import builtins
import importlib as _importlib

import numpy as np

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K, cpu as _cpu
from fiamma._backend.cpu import operators as _fast
from fiamma._ops import complex_ops as _cx
from fiamma._ops._common import (
    as_operand,
    bcast_strides,
    broadcast_pair,
    broadcast_shapes,
    cast,
    check_out,
    is_scalar,
    on_device,
    overlaps,
    same_device,
)
from fiamma._storage import CPU
from fiamma._tensor import Tensor, _copy_into, new_empty

_I64 = 1 << 63  # Python ints must lie in [-_I64, _I64) to pass as int64

# op kinds: how the compute dtype and the output dtype follow from the promoted dtype
ARITH = 0      # compute and output in the promoted dtype
PREDICATE = 1  # compute in the promoted dtype, output bool
TRUEDIV = 2    # integers and bool promote to the default float dtype first
DOUBLE = 3     # compute in float64 (float_power)


def _compute_dtype(kind, rt):
    if kind == TRUEDIV and rt._kind < 2:
        return D.get_default_dtype()
    if kind == DOUBLE:
        return D.complex128 if rt._kind == 3 else D.float64
    return rt


def _unsupported(op, dt):
    raise TypeError(f"{op}: not implemented for dtype {dt}")


def _raise(rc, name, dt):
    if rc == K.ERR_DTYPE and name == "sub" and dt is D.bool:
        _bool_sub_error(name)
    if rc == K.ERR_DTYPE:
        _unsupported(name, dt)
    if rc == K.ERR_VALUE:
        raise ZeroDivisionError(f"{name}: integer division or modulo by zero")
    check(rc, name)


def _scalar_args(s, ct, name):
    """A Python scalar as (double, int64) for the C kernel."""
    if ct._kind == 2:
        return builtins.float(s), 0
    v = builtins.int(s)
    if not -_I64 <= v < _I64:
        if ct is D.uint64 and _I64 <= v < 2 * _I64:
            return 0.0, v - 2 * _I64  # the C kernel takes the value's 64 bits as int64
        raise RuntimeError(f"{name}: value {v} cannot be converted to type {ct} without overflow")
    return 0.0, v


def _check_scalar_fits(s, dt, name):
    """PyTorch's check for scalar bounds of clamp/where on integer tensors: out-of-range values
    raise (negative values wrap for unsigned types, as in C)."""
    if dt._kind >= 2 or not is_scalar(s) or isinstance(s, builtins.float):
        return
    v = builtins.int(s)
    info = D.iinfo(dt)
    lo = -info.max if not dt.is_signed else info.min
    if v < lo or v > info.max:
        raise RuntimeError(f"{name}: value {v} cannot be converted to type {dt} without overflow")


def _result(out, shape, od, dev, name, inputs):
    """The tensor to write into: ``out`` itself when it has the result dtype and shares no
    memory with an input in a way that depends on evaluation order, else a fresh tensor."""
    if out is None:
        return new_empty(shape, od, dev)
    check_out(out, shape, od, name)
    if out._dtype is od and not builtins.any(isinstance(t, Tensor) and overlaps(out, t)
                                             for t in inputs):
        return out
    return new_empty(shape, od, dev)


def _finish(res, out):
    if out is None:
        return res
    if res is not out:
        _copy_into(out, res)
    out._bump()
    return out


def _any_grad(xs):
    for x in xs:
        if isinstance(x, Tensor) and x.requires_grad:
            return True
    return False


# ---- drivers -----------------------------------------------------------------------------

def _promote(a, b):
    """``result_type(a, b)`` with the common cases (same-dtype tensors, tensor and Python
    scalar) decided inline."""
    ta, tb = type(a), type(b)
    if ta is Tensor:
        da = a._dtype
        if tb is Tensor:
            if b._dtype is da:
                return da
        elif tb is float:
            return da if da._kind >= 2 else D.get_default_dtype()
        elif tb is int:
            return da if da._kind else D.int64
        elif tb is bool:
            return da
    elif tb is Tensor:
        db = b._dtype
        if ta is float:
            return db if db._kind >= 2 else D.get_default_dtype()
        if ta is int:
            return db if db._kind else D.int64
        if ta is bool:
            return db
    return D.result_type(a, b)


# which dtype codes each binary / ternary op supports (the CPU backend's tables are the ops'
# dtype semantics on every device)
_BIN_OK = [[_cpu.binary_out_dtype(op, d.code) >= 0 for d in D.ALL]
           for op in range(K.NBINARY)]
_TER_OK = [[_cpu.ternary_out_dtype(op, d.code) >= 0 for d in D.ALL]
           for op in range(K.NTERNARY)]


def binary(code, name, kind, a, b, out=None, record=True, params=None, kwargs=None):
    """The general path of binary op ``code`` on tensors/scalars ``a`` and ``b``: broadcasting,
    type promotion (``kind`` says how the compute and output dtypes follow from the promoted
    one), casts, devices; the op's driver (binary_driver) calls it for what its fast test does
    not take.

    ``out`` may be given (cast into it). ``params`` (p0, p1, p2) go to ops that take them.
    Returns the result tensor.
    """
    ta = isinstance(a, Tensor)
    tb = isinstance(b, Tensor)
    if (ta and a._layout_alt) or (tb and b._layout_alt):  # sparse/nested compute elsewhere
        if (ta and a.is_nested) or (tb and b.is_nested):  # this op on the dense parts
            return _importlib.import_module("fiamma._nested")._binary_function(
                name, a, b, out,
                lambda x, y: binary(code, name, kind, x, y, None, record, params, kwargs))
        from fiamma._sparse_ops import binary as sparse_binary

        return sparse_binary(name, a, b, out)
    if not ta and not is_scalar(a):
        a = as_operand(a, name)
        ta = isinstance(a, Tensor)
    if not tb and not is_scalar(b):
        b = as_operand(b, name)
        tb = isinstance(b, Tensor)
    if ta and tb:
        dev = a._storage.device
        if b._storage.device is not dev:
            dev = same_device(name, a, b)
            a, b = on_device(a, dev), on_device(b, dev)
        shape = a._shape if a._shape == b._shape else broadcast_pair(a._shape, b._shape, name)
        ct = a._dtype  # one dtype (m + bias): no promotion
        if b._dtype is not ct or kind == TRUEDIV or kind == DOUBLE:
            ct = _compute_dtype(kind, _promote(a, b))
    elif ta or tb:
        if code == K.BIN_SUB and (type(a) is builtins.bool or type(b) is builtins.bool):
            _bool_sub_error(name)  # a - True, as a bool tensor operand
        t = a if ta else b
        dev = t._storage.device
        shape = t._shape
        ct = _compute_dtype(kind, _promote(a, b))
    else:
        raise TypeError(f"{name}: expected at least one tensor operand")
    if not _BIN_OK[code][ct.code] and not (ct._kind == 3 and code in _cx.BINARY):
        _raise(K.ERR_DTYPE, name, ct)  # also for empty operands
    od = D.bool if kind == PREDICATE else ct
    res = new_empty(shape, od, dev) if out is None else _result(out, shape, od, dev, name, (a, b))
    if res._numel and ct._kind == 3:
        prev = G.set_grad_enabled_flag(False)  # operand views only: the op records below
        try:
            ea = cast(a, ct).expand(shape) if ta else a
            eb = cast(b, ct).expand(shape) if tb else b
        finally:
            G.set_grad_enabled_flag(prev)
        _cx.binary_into(code, res, ea, eb, ct, params)
    elif res._numel:
        be = res._storage.backend
        if ta and tb:
            ca = a if a._dtype is ct else cast(a, ct)
            cb = b if b._dtype is ct else cast(b, ct)
            sa, sb = bcast_strides(ca, shape), bcast_strides(cb, shape)
            if params is None:
                rc = be.binary(code, shape, res, ca, sa, cb, sb)
            else:
                rc = be.binary(code, shape, res, ca, sa, cb, sb, params)
        else:
            # the number goes to the backend as a float (floating ct) or an int64 value (no
            # op with params takes a number)
            sf, si = _scalar_args(b if ta else a, ct, name)
            s = sf if ct._kind == 2 else si
            if ta:
                ca = cast(a, ct)
                rc = be.binary(code, shape, res, ca, bcast_strides(ca, shape), s, None)
            else:
                cb = cast(b, ct)
                rc = be.binary(code, shape, res, s, None, cb, bcast_strides(cb, shape))
        if rc:
            _raise(rc, name, ct)
    if out is not None:
        res = _finish(res, out)
    if record and ((ta and a.requires_grad) or (tb and b.requires_grad)):
        if out is None and not kwargs:  # a result this call allocated
            G.record_new(name, res, (a, b))
        else:
            G.record(name, res, (a, b), kwargs or {})
    return res


def binary_driver(code, name, kind, variant="function", fallback=None, number_fast=True):
    """The entry of binary op ``code`` for ``variant`` (see _fast.compile_binary: "function"
    for ``fiamma.add(x, y)``, "operator"/"reflected"/"inplace"/"inplace_method" for the Tensor
    methods): the one fast test (contiguous CPU operands of one dtype and shape, or such a
    tensor and a Python number that needs no cast) and one C call, else ``fallback(self,
    other)``, or ``binary(code, name, kind, self, other)`` when ``fallback`` is None."""
    return _fast.compile_binary(code, name, kind, variant,
                                (binary,) if fallback is None else fallback, _raise, is_scalar,
                                predicate=kind == PREDICATE, truediv=kind == TRUEDIV,
                                number_fast=number_fast)


# output dtype of each unary op per input dtype code (None: unsupported)
_UN_OUT = [[D.BY_CODE[o] if o >= 0 else None
            for o in (_cpu.unary_out_dtype(op, d.code) for d in D.ALL)]
           for op in range(K.NUNARY)]


def unary(code, name, x, out=None, p0=0.0, p1=0.0, p2=0.0, float_only=False, record=True,
          kwargs=None):
    """Run unary op ``code``. ``float_only`` ops promote integer/bool input to the default float
    dtype (torch.exp(int tensor) -> float32)."""
    if type(x) is Tensor and out is None and x._cpu_contig and not (p0 or p1 or p2):
        # a contiguous CPU tensor (x.exp()): no cast, no out=, one C call
        od = _UN_OUT[code][x._dtype.code]
        if od is not None and (x._dtype._kind == 2 or not float_only):
            res = new_empty(x._shape, od, CPU)
            if res._numel:
                rc = _cpu.unary_contig(code, res, x)
                if rc:
                    _raise(rc, name, x._dtype)
            if record and x.requires_grad:
                if kwargs:
                    G.record(name, res, (x,), kwargs)
                else:
                    G.record_new(name, res, (x,))
            return res
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if x._layout_alt and x.is_nested:  # this op on the values / each component
        if out is not None:
            raise NotImplementedError(f"{name}: out= is not supported for nested tensors")
        return x.map_dense(lambda t: unary(code, name, t, None, p0, p1, p2, float_only, record,
                                           kwargs))
    if x._layout_alt and getattr(x, "_compressed", False):  # on the values, if 0 stays 0
        if out is not None:
            raise NotImplementedError(f"{name}: out= is not supported for sparse compressed "
                                      "tensors")
        return _importlib.import_module("fiamma._sparse_compressed_ops").unary(
            name, x, lambda t: unary(code, name, t, None, p0, p1, p2, float_only, record,
                                     kwargs))
    src = x
    if float_only and x._dtype._kind < 2:
        src = cast(x, D.get_default_dtype())
    cx = src._dtype._kind == 3
    od = _cx.unary_out_dtype(code, src._dtype) if cx else _UN_OUT[code][src._dtype.code]
    if od is None:
        _unsupported(name, src._dtype)
    res = new_empty(x._shape, od, x._storage.device) if out is None else \
        _result(out, x._shape, od, x._storage.device, name, (src,))
    if res._numel and cx:
        _cx.unary_into(code, res, src)
    elif res._numel:
        rc = res._storage.backend.unary(code, res, src, p0, p1, p2)
        if rc:
            _raise(rc, name, src._dtype)
    if out is not None:
        res = _finish(res, out)
    if record and x.requires_grad:
        G.record(name, res, (x,), kwargs or {})
    return res


def ternary(code, name, ct, a, b, c, out=None, p0=0.0, record=True, inputs=None, kwargs=None):
    """Run ternary op ``code`` computing in dtype ``ct``: ``a`` is a tensor (a bool condition
    for where, else cast to ct), ``b`` and ``c`` tensors or Python scalars. ``inputs`` is what
    autograd sees as the op's positional arguments (default (a, b, c))."""
    if not _TER_OK[code][ct.code]:
        _raise(K.ERR_DTYPE, name, ct)
    tensors = [t for t in (a, b, c) if isinstance(t, Tensor)]
    dev = same_device(name, *tensors)
    if dev is not CPU and builtins.any(t._storage.device != dev for t in tensors):
        a, b, c = on_device(a, dev), on_device(b, dev), on_device(c, dev)
        tensors = [t for t in (a, b, c) if isinstance(t, Tensor)]
    shape = broadcast_shapes(*(t._shape for t in tensors), op=name)
    res = _result(out, shape, ct, dev, name, tensors)
    if res._numel:
        ca = a if code == K.TER_WHERE else cast(a, ct)
        args = []
        for t in (b, c):
            if isinstance(t, Tensor):
                t = cast(t, ct)
                args.append((t, bcast_strides(t, shape), 0.0, 0))
            else:
                args.append((None, None) + _scalar_args(t, ct, name))
        (tb, sb, bf, bi), (tc, sc, cf, ci) = args
        rc = res._storage.backend.ternary(code, ct, shape, res, ca, bcast_strides(ca, shape), tb,
                                          sb, tc, sc, bf, bi, cf, ci, p0)
        if rc:
            _raise(rc, name, ct)
    res = _finish(res, out)
    if record and _any_grad(tensors):
        G.record(name, res, inputs if inputs is not None else (a, b, c), kwargs or {})
    return res


# ---- in-place machinery --------------------------------------------------------------------

def check_inplace(self, name, others=()):
    """Checks before writing an op's result into ``self``: it must be a tensor without internal
    overlap (an expanded view), and broadcasting the other tensors must not grow it."""
    if not isinstance(self, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(self).__name__}")
    for n, st in zip(self._shape, self._stride):
        if st == 0 and n > 1 and 0 not in self._shape:  # an empty tensor writes nothing
            raise RuntimeError(
                f"{name}: unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation.")
    shapes = [t._shape for t in others if isinstance(t, Tensor) and t._shape != self._shape]
    if shapes:
        shape = broadcast_shapes(self._shape, *shapes, op=name)
        if shape != self._shape:
            raise RuntimeError(f"{name}: output with shape {list(self._shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")


def make_inplace(fn, name):
    """The in-place method ``name`` (``add_``) of op ``fn``: ``fn(self, ..., out=self)`` after
    check_inplace; bumps the version and records for autograd as an in-place op."""

    def method(self, *args, **kwargs):
        check_inplace(self, name, builtins.tuple(args) + builtins.tuple(kwargs.values()))
        grad = self.requires_grad or _any_grad(args) or _any_grad(kwargs.values())
        if grad and G.is_grad_enabled():
            G.inplace(fn, name, self, args, kwargs)
        else:
            fn(self, *args, out=self, **kwargs)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place version of :func:`{fn.__name__}`."
    return method


def inplace_binary(code, name, kind, self, other):
    """``self op= other``: result cast into self (dtype must be castable), version bumped."""
    check_inplace(self, name, (other,))
    other = as_operand(other, name)
    if (self.requires_grad or (isinstance(other, Tensor) and other.requires_grad)) and \
            G.is_grad_enabled():
        G.inplace(lambda s, o: binary(code, name, kind, s, o), name, self, (other,), {})
        return self
    binary(code, name, kind, self, other, out=self, record=False)
    return self


# ---- binary ops ------------------------------------------------------------------------------

def _bool_sub_error(name):
    raise RuntimeError(f"{name}: Subtraction, the `-` operator, with a bool tensor is not "
                       "supported. If you are trying to invert a mask, use the `~` or "
                       "`logical_not()` operator instead.")


def _reject_bool_sub(name, input, other):
    if (isinstance(input, Tensor) and input._dtype is D.bool) or \
            (isinstance(other, Tensor) and other._dtype is D.bool) or \
            type(input) is builtins.bool or type(other) is builtins.bool:
        _bool_sub_error(name)


def _add_alpha(name, input, other, alpha, sign, out):
    """input + sign * alpha * other in one pass (the kernel computes a + p0 * b)."""
    if (getattr(input, "_layout_alt", False) or getattr(other, "_layout_alt", False)) and not (
            getattr(input, "is_nested", False) or getattr(other, "is_nested", False)):
        from fiamma._sparse_ops import binary as sparse_binary  # COO and compressed

        return sparse_binary(name, input, other, out, alpha=alpha)
    input = as_operand(input, name)
    other = as_operand(other, name)
    rt = D.result_type(input, other)
    if isinstance(alpha, builtins.bool) and rt is not D.bool:
        raise RuntimeError(f"{name}: Boolean alpha only supported for Boolean results.")
    if rt._kind < 2 and isinstance(alpha, builtins.float):
        raise RuntimeError(f"{name}: For integral input tensors, argument alpha must not be a "
                           "floating point number.")
    if rt._kind != 3 and isinstance(alpha, builtins.complex):
        raise RuntimeError(f"{name}: For non-complex input tensors, argument alpha must not be "
                           "a complex number.")
    if rt._kind == 1 and not -_I64 <= alpha < _I64:
        raise RuntimeError(f"{name}: alpha {alpha} cannot be converted to type {rt} without "
                           "overflow")
    kw = {"alpha": alpha}
    code = K.BIN_ADD if sign > 0 else K.BIN_SUB
    if rt is D.bool:  # alpha acts as a bool: input | (other & alpha)
        res = binary(code, name, ARITH, input, other if alpha else False, out, record=False)
        if _any_grad((input, other)):
            G.record(name, res, (input, other), kw)
        return res
    if not isinstance(other, Tensor):
        res = binary(code, name, ARITH, input, other * alpha, out, record=False)
    elif not isinstance(input, Tensor):  # alpha * other in the result dtype (no uint8 wrap)
        scaled = binary(K.BIN_MUL, name, ARITH, cast(other, rt), alpha, record=False)
        res = binary(code, name, ARITH, input, scaled, out, record=False)
    else:
        res = binary(K.BIN_ADD_ALPHA, name, ARITH, input, other, out, record=False,
                     params=(sign * alpha, 0.0, 0.0))
    if _any_grad((input, other)):
        G.record(name, res, (input, other), kw)
    return res


# the function entries of the ops with operators (fiamma.add(x, y), x.mul(y))
_add = binary_driver(K.BIN_ADD, ops.add, ARITH)
_sub = binary_driver(K.BIN_SUB, ops.sub, ARITH)
_mul = binary_driver(K.BIN_MUL, ops.mul, ARITH)
_div = binary_driver(K.BIN_DIV, ops.div, TRUEDIV)
_floor_divide = binary_driver(K.BIN_FLOORDIV, ops.floor_divide, ARITH)
_remainder = binary_driver(K.BIN_REMAINDER, ops.remainder, ARITH)
_pow = binary_driver(K.BIN_POW, ops.pow, ARITH, number_fast=False)


def add(input, other, *args, alpha=1, out=None):
    """``input + alpha * other`` with broadcasting and type promotion.

    >>> import fiamma
    >>> fiamma.add(fiamma.tensor([1, 2]), 0.5).tolist()
    [1.5, 2.5]
    >>> fiamma.add(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0, 1.0]), alpha=10).tolist()
    [11.0, 12.0]
    """
    if args:  # the deprecated add(input, alpha, other)
        other, alpha = _fast.deprecated_alpha("add", other, args, alpha)
    if alpha == 1 and not isinstance(alpha, builtins.bool):
        if out is None:
            return _add(input, other)
        return binary(K.BIN_ADD, ops.add, ARITH, input, other, out)
    return _add_alpha(ops.add, input, other, alpha, 1, out)


def sub(input, other, *args, alpha=1, out=None):
    """``input - alpha * other`` (not defined for bool tensors)."""
    if args:  # the deprecated sub(input, alpha, other)
        other, alpha = _fast.deprecated_alpha("sub", other, args, alpha)
    _reject_bool_sub("sub", input, other)
    if alpha == 1 and not isinstance(alpha, builtins.bool):
        if out is None:
            return _sub(input, other)
        return binary(K.BIN_SUB, ops.sub, ARITH, input, other, out)
    return _add_alpha(ops.sub, input, other, alpha, -1, out)


def rsub(input, other, alpha=1, *, out=None):
    """``other - alpha * input`` (``alpha`` may be positional, as in PyTorch)."""
    return sub(other, input, alpha=alpha, out=out)


def mul(input, other, *, out=None):
    """``input * other`` with broadcasting and type promotion."""
    if out is None:
        return _mul(input, other)
    return binary(K.BIN_MUL, ops.mul, ARITH, input, other, out)


def div(input, other, *, rounding_mode=None, out=None):
    """``input / other``. True division (integers promote to the default float dtype) unless
    ``rounding_mode`` is ``'trunc'`` (round toward zero) or ``'floor'`` (toward -inf); those keep
    integer dtypes and raise ZeroDivisionError on integer division by zero.

    >>> import fiamma
    >>> fiamma.div(fiamma.tensor([7, -7]), 2).tolist()
    [3.5, -3.5]
    >>> fiamma.div(fiamma.tensor([7, -7]), 2, rounding_mode="floor").tolist()
    [3, -4]
    """
    if rounding_mode is None:
        if out is None:
            return _div(input, other)
        return binary(K.BIN_DIV, ops.div, TRUEDIV, input, other, out)
    if rounding_mode == "trunc":
        return binary(K.BIN_TRUNCDIV, ops.div, ARITH, input, other, out,
                      kwargs={"rounding_mode": "trunc"})
    if rounding_mode == "floor":
        return binary(K.BIN_FLOORDIV, ops.div, ARITH, input, other, out,
                      kwargs={"rounding_mode": "floor"})
    raise ValueError(f"div: expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found '{rounding_mode}'")


def floor_divide(input, other, *, out=None):
    """``input // other``: division rounded toward -inf (Python's ``//``)."""
    if out is None:
        return _floor_divide(input, other)
    return binary(K.BIN_FLOORDIV, ops.floor_divide, ARITH, input, other, out)


def remainder(input, other, *, out=None):
    """Python's ``%``: the result has the sign of the divisor (``a - b * floor(a / b)``)."""
    if out is None:
        return _remainder(input, other)
    return binary(K.BIN_REMAINDER, ops.remainder, ARITH, input, other, out)


def fmod(input, other, *, out=None):
    """C's fmod: the remainder of division rounded toward zero (sign of the dividend)."""
    return binary(K.BIN_FMOD, ops.fmod, ARITH, input, other, out)


_POW_SHORTCUTS = {2: K.UN_SQUARE, 0.5: K.UN_SQRT, -1: K.UN_RECIPROCAL}
_POW_PRODUCTS = (1, 3, -2, -0.5)


def pow(input, exponent, *, out=None):
    """``input ** exponent`` for tensor/tensor, tensor/scalar and scalar/tensor. Integer powers
    are exact (by squaring, wrapping on overflow); a negative Python-int exponent on an integer
    tensor raises, as in PyTorch.

    >>> import fiamma
    >>> fiamma.pow(fiamma.tensor([1, 2, 3]), 2).tolist()
    [1, 4, 9]
    >>> fiamma.pow(2, fiamma.tensor([0.5, 1.0])).tolist()
    [1.4142135381698608, 2.0]
    """
    if isinstance(input, Tensor) and input._dtype is D.bool and \
            isinstance(exponent, (builtins.bool, np.bool_)):  # x ** True is x, x ** False is 1
        return binary(K.BIN_LOGICAL_OR, ops.pow, PREDICATE, input, not exponent, out)
    if isinstance(input, Tensor) and is_scalar(exponent) and \
            not isinstance(exponent, (builtins.bool, np.bool_)):
        rt = D.result_type(input, exponent)
        if rt._kind < 2 and exponent < 0:
            raise RuntimeError("pow: Integers to negative integer powers are not allowed.")
        code = _POW_SHORTCUTS.get(exponent)
        if code is not None and (rt._kind == 2 or code == K.UN_SQUARE):
            res = unary(code, ops.pow, cast(input, rt), out, record=False)
            if input.requires_grad:
                G.record(ops.pow, res, (input, exponent), {})
            return res
        if out is None and exponent in _POW_PRODUCTS and (rt._kind == 2 or exponent > 0) and \
                rt._kind != 3:
            # PyTorch's own shortcuts (x * x * x, 1 / (x * x), rsqrt, a copy for 1) instead of
            # a pow per element: same rounding as PyTorch, several times faster (the backward
            # of x ** 2 and x ** 3 takes x ** 1 and x ** 2)
            half = rt._kind == 2 and rt.itemsize == 2  # float16/bfloat16: in float32, as PyTorch
            x = cast(input.detach() if input.requires_grad else input, D.float32 if half else rt)
            if exponent == 1:
                res = x.clone() if x is input else x
            elif exponent == 3:
                res = binary(K.BIN_MUL, ops.mul, ARITH, unary(K.UN_SQUARE, ops.pow, x,
                                                               record=False), x, record=False)
            elif exponent == -2:
                res = unary(K.UN_RECIPROCAL, ops.pow, unary(K.UN_SQUARE, ops.pow, x,
                                                            record=False), record=False)
            else:  # -0.5
                res = unary(K.UN_RSQRT, ops.pow, x, record=False)
            if half:
                res = cast(res, rt)
            if input.requires_grad and G.state.enabled:
                G.record(ops.pow, res, (input, exponent), {})
            return res
    if out is None:
        return _pow(input, exponent)
    return binary(K.BIN_POW, ops.pow, ARITH, input, exponent, out)


def float_power(input, exponent, *, out=None):
    """``input ** exponent`` computed in float64 (complex128 if an operand is complex)."""
    return binary(K.BIN_POW, ops.float_power, DOUBLE, input, exponent, out)


def atan2(input, other, *, out=None):
    """The angle of (other, input), elementwise; integers promote to the default float."""
    return binary(K.BIN_ATAN2, ops.atan2, TRUEDIV, input, other, out)


def hypot(input, other, *, out=None):
    """``sqrt(input**2 + other**2)`` without intermediate overflow (floating dtypes)."""
    return binary(K.BIN_HYPOT, ops.hypot, ARITH, input, other, out)


def copysign(input, other, *, out=None):
    """The magnitude of ``input`` with the sign of ``other`` (float result)."""
    return binary(K.BIN_COPYSIGN, ops.copysign, TRUEDIV, input, other, out)


def _tensor_other(name, other):
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}: expected other to be a Tensor, got {type(other).__name__}")


def maximum(input, other, *, out=None):
    """Elementwise maximum; NaN if either is NaN."""
    _tensor_other("maximum", other)
    return binary(K.BIN_MAXIMUM, ops.maximum, ARITH, input, other, out)


def minimum(input, other, *, out=None):
    """Elementwise minimum; NaN if either is NaN."""
    _tensor_other("minimum", other)
    return binary(K.BIN_MINIMUM, ops.minimum, ARITH, input, other, out)


def fmax(input, other, *, out=None):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN)."""
    _tensor_other("fmax", other)
    return binary(K.BIN_FMAX, ops.fmax, ARITH, input, other, out)


def fmin(input, other, *, out=None):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN)."""
    _tensor_other("fmin", other)
    return binary(K.BIN_FMIN, ops.fmin, ARITH, input, other, out)


def _binop(code, name, kind, doc):
    drive = binary_driver(code, name, kind)

    def op(input, other, *, out=None):
        if out is None:
            return drive(input, other)
        return binary(code, name, kind, input, other, out)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


eq = _binop(K.BIN_EQ, ops.eq, PREDICATE, "``input == other`` elementwise (bool result).")
ne = _binop(K.BIN_NE, ops.ne, PREDICATE, "``input != other`` elementwise (bool result).")
lt = _binop(K.BIN_LT, ops.lt, PREDICATE, "``input < other`` elementwise (bool result).")
le = _binop(K.BIN_LE, ops.le, PREDICATE, "``input <= other`` elementwise (bool result).")
gt = _binop(K.BIN_GT, ops.gt, PREDICATE, "``input > other`` elementwise (bool result).")
ge = _binop(K.BIN_GE, ops.ge, PREDICATE, "``input >= other`` elementwise (bool result).")
logical_and = _binop(K.BIN_LOGICAL_AND, ops.logical_and, PREDICATE,
                     "Elementwise AND of the truth values (nonzero is True); bool result.")
logical_or = _binop(K.BIN_LOGICAL_OR, ops.logical_or, PREDICATE,
                    "Elementwise OR of the truth values (nonzero is True); bool result.")
logical_xor = _binop(K.BIN_LOGICAL_XOR, ops.logical_xor, PREDICATE,
                     "Elementwise XOR of the truth values (nonzero is True); bool result.")
bitwise_and = _binop(K.BIN_BITAND, ops.bitwise_and, ARITH,
                     "Bitwise AND of integer or bool tensors (logical AND on bool).")
bitwise_or = _binop(K.BIN_BITOR, ops.bitwise_or, ARITH,
                    "Bitwise OR of integer or bool tensors (logical OR on bool).")
bitwise_xor = _binop(K.BIN_BITXOR, ops.bitwise_xor, ARITH,
                     "Bitwise XOR of integer or bool tensors (logical XOR on bool).")
bitwise_left_shift = _binop(
    K.BIN_LSHIFT, ops.bitwise_left_shift, ARITH,
    "``input << other`` on integer tensors; shifting by the bit width or more (or by a "
    "negative count) gives 0.")
bitwise_right_shift = _binop(
    K.BIN_RSHIFT, ops.bitwise_right_shift, ARITH,
    "``input >> other`` (arithmetic for signed types); out-of-range counts give the sign fill.")

subtract = sub
multiply = mul
divide = div
arctan2 = atan2
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def true_divide(dividend, divisor, *, out=None):
    """``dividend / divisor`` with true division (same as ``div`` without rounding_mode)."""
    return binary(K.BIN_DIV, ops.div, TRUEDIV, dividend, divisor, out)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``|input - other| <= atol + rtol * |other|`` elementwise (bool result); equal
    infinities are close, NaN is close to NaN only with ``equal_nan``. Both must have the same
    dtype.

    >>> import fiamma
    >>> fiamma.isclose(fiamma.tensor([1.0, 2.0]), fiamma.tensor([1.0 + 1e-7, 2.1])).tolist()
    [True, False]
    """
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError("isclose: expected input and other to be Tensors")
    if input._dtype is not other._dtype:
        raise RuntimeError(f"isclose: {input._dtype} did not match {other._dtype}")
    if rtol < 0:
        raise RuntimeError(f"isclose: rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"isclose: atol must be greater than or equal to zero, but got {atol}")
    if input._dtype._kind == 3:
        return _cx.isclose(input, other, builtins.float(rtol), builtins.float(atol), equal_nan)
    return binary(K.BIN_ISCLOSE, ops.isclose, PREDICATE, input, other, record=False,
                  params=(builtins.float(rtol), builtins.float(atol),
                          1.0 if equal_nan else 0.0))


def _all_true(t):
    if not t._numel:
        return True
    return builtins.bool(t.cpu().numpy().all())


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other`` (see ``isclose``)."""
    return _all_true(isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other):
    """True if both tensors have the same shape and equal elements (after type promotion)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError("equal: expected input and other to be Tensors")
    if input._shape != other._shape:
        return False
    return _all_true(binary(K.BIN_EQ, ops.equal, PREDICATE, input, other, record=False))


# ---- ternary ops -----------------------------------------------------------------------------

def clamp(input, min=None, max=None, *, out=None):
    """Limit ``input`` to ``[min, max]`` (scalars or tensors, broadcast); where min > max the
    result is max. NaN stays NaN. Type promotion includes the bounds.

    >>> import fiamma
    >>> fiamma.clamp(fiamma.tensor([-2.0, 0.5, 3.0]), min=0, max=1).tolist()
    [0.0, 0.5, 1.0]
    """
    if (type(input) is Tensor and out is None and input._contig and input._dtype._kind == 2 and
            type(min) in _PYNUM and type(max) in _PYNUM and not input.requires_grad and
            input._storage.device is CPU):
        dt = input._dtype
        res = new_empty(input._shape, dt, CPU)
        if res._numel:
            rc = _cpu.ternary(K.TER_CLAMP, dt, res._shape, res, input, input._stride, None, None,
                              None, None, min, 0, max, 0, 0.0)
            if rc:
                _raise(rc, "clamp", dt)
        return res
    if not isinstance(input, Tensor):
        raise TypeError(f"clamp: expected a Tensor, got {type(input).__name__}")
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    lo = as_operand(min, "clamp") if min is not None else None
    hi = as_operand(max, "clamp") if max is not None else None
    if lo is not None and hi is not None and isinstance(lo, Tensor) != isinstance(hi, Tensor):
        # a number with a 0-d tensor: PyTorch's clamp(Tensor, Scalar, Scalar) takes the tensor
        # as a number too (clamp(int8, tensor(-1, dtype=int16), 2) stays int8)
        if isinstance(lo, Tensor) and not lo._shape:
            lo = lo.item()
        elif isinstance(hi, Tensor) and not hi._shape:
            hi = hi.item()
    rt = D.result_type(input, *(b for b in (lo, hi) if b is not None))
    for b in (lo, hi):
        _check_scalar_fits(b, rt, "clamp")
    if hi is None:
        res = binary(K.BIN_MAXIMUM, ops.clamp, ARITH, input, lo, out, record=False)
    elif lo is None:
        res = binary(K.BIN_MINIMUM, ops.clamp, ARITH, input, hi, out, record=False)
    else:
        res = ternary(K.TER_CLAMP, ops.clamp, rt, input, lo, hi, out, record=False)
    if _any_grad((input, lo, hi)):
        G.record(ops.clamp, res, (input, lo, hi), {})
    return res


def clamp_min(input, min, *, out=None):
    """``clamp(input, min=min)``."""
    return clamp(input, min, None, out=out)


def clamp_max(input, max, *, out=None):
    """``clamp(input, max=max)``."""
    return clamp(input, None, max, out=out)


clip = clamp


_PYNUM = (int, float)


def _where_fast(cond, x, y):
    """where() for a contiguous condition and x of one shape, and y a same-dtype contiguous
    tensor of that shape or a Python number that needs no cast; None if it does not apply."""
    dt = x._dtype
    ty = type(y)
    if dt._kind == 3:
        return None
    if ty is Tensor:
        if not (y._dtype is dt and y._shape == x._shape and y._contig and not y.requires_grad
                and y._storage.device is CPU):
            return None
        ty, sy, yf, yi = y, y._stride, 0.0, 0
    elif (ty is float and dt._kind == 2) or (ty is int and dt._kind and -_I64 <= y < _I64):
        _check_scalar_fits(y, dt, "where")
        ty, sy, yf, yi = None, None, y, y if ty is int else 0
    else:
        return None
    res = new_empty(x._shape, dt, CPU)
    if res._numel:
        rc = _cpu.ternary(K.TER_WHERE, dt, res._shape, res, cond, cond._stride, x, x._stride, ty,
                          sy, 0.0, 0, yf, yi, 0.0)
        if rc:
            _raise(rc, "where", dt)
    return res


def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` is True, else ``other`` (tensors or scalars, broadcast,
    type-promoted). ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.

    >>> import fiamma
    >>> x = fiamma.tensor([-1.0, 2.0])
    >>> fiamma.where(x > 0, x, 0.0).tolist()
    [0.0, 2.0]
    """
    if input is None and other is None:
        from fiamma._ops import indexing

        nz = getattr(indexing, "nonzero", None)
        if nz is None:
            raise NotImplementedError("where(condition) needs nonzero")
        return nz(condition, as_tuple=True)
    if (type(condition) is Tensor and type(input) is Tensor and out is None and
            condition._dtype is D.bool and condition._contig and input._contig and
            condition._shape == input._shape and not input.requires_grad and
            condition._storage.device is CPU and input._storage.device is CPU):
        res = _where_fast(condition, input, other)
        if res is not None:
            return res
    if not isinstance(condition, Tensor):
        raise TypeError(f"where: expected condition to be a Tensor, got "
                        f"{type(condition).__name__}")
    if condition._dtype is not D.bool:
        raise RuntimeError(f"where: expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {condition._dtype}")
    input = as_operand(input, "where")
    other = as_operand(other, "where")
    rt = D.result_type(input, other)
    _check_scalar_fits(input, rt, "where")
    _check_scalar_fits(other, rt, "where")
    if rt._kind == 3:
        return _cx.where(condition, input, other, rt, out)
    return ternary(K.TER_WHERE, ops.where, rt, condition, input, other, out)


def lerp(input, end, weight, *, out=None):
    """``input + weight * (end - input)`` (floating dtypes; weight a scalar or a tensor).

    >>> import fiamma
    >>> fiamma.lerp(fiamma.tensor([0.0, 10.0]), fiamma.tensor([1.0, 20.0]), 0.5).tolist()
    [0.5, 15.0]
    """
    if not isinstance(input, Tensor) or not isinstance(end, Tensor):
        raise TypeError("lerp: expected input and end to be Tensors")
    if end._dtype is not input._dtype:
        raise RuntimeError(f"lerp: expected dtype {input._dtype} for `end` but got dtype "
                           f"{end._dtype}")
    weight = as_operand(weight, "lerp")
    if isinstance(weight, Tensor) and weight._dtype is not input._dtype:
        if weight._shape:
            raise RuntimeError(f"lerp: expected dtype {input._dtype} for `weight` but got dtype "
                               f"{weight._dtype}")
        rt = D.result_type(input, end, weight)  # a 0-d weight takes part in promotion
        if rt is not input._dtype:
            return lerp(input.to(rt), end.to(rt), weight.to(rt), out=out)  # differentiable
    elif isinstance(weight, builtins.complex) and input._dtype._kind != 3:
        raise RuntimeError(f"lerp: value {weight} cannot be converted to type {input._dtype} "
                           "without overflow")
    if input._dtype._kind == 3:  # complex: composed (the kernel is real-only)
        return _complex_ternary(ops.lerp, input, end, weight, out,
                                lambda a, b, w: a + w * (b - a))
    if not isinstance(weight, Tensor) and input._dtype in _LOWP:
        # PyTorch computes a half/bfloat16 lerp in float with a number weight kept in float;
        # the kernel would store the weight in the tensors' dtype (0.1 -> 0.10009765625 in
        # bfloat16) and round the result differently (timm's Adafactor-BV bfloat16 momentum)
        shape = broadcast_shapes(input._shape, end._shape, op="lerp")
        if out is not None:
            check_out(out, shape, input._dtype, "lerp")
        r = ternary(K.TER_LERP, ops.lerp, D.float32, cast(input, D.float32),
                    cast(end, D.float32), weight, record=False)
        res = _finish(cast(r, input._dtype), out)
        if _any_grad((input, end)):
            G.record(ops.lerp, res, (input, end, weight), {})
        return res
    return ternary(K.TER_LERP, ops.lerp, input._dtype, input, end, weight, out)


_LOWP = (D.float16, D.bfloat16)


def _complex_ternary(name, a, b, c, out, fn):
    """A ternary op on complex operands, composed from complex arithmetic (differentiable
    through its parts)."""
    rt = D.result_type(a, b, c)  # computed in the result dtype, as the real kernels do
    res = fn(*(t.to(rt) if isinstance(t, Tensor) else t for t in (a, b, c)))
    if out is None:
        return res
    check_out(out, res._shape, res._dtype, name)
    return _finish(res, out)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2`` with broadcasting and type promotion."""
    rt = D.result_type(input, tensor1, tensor2)
    if rt._kind == 3:
        return _complex_ternary(ops.addcmul, input, tensor1, tensor2, out,
                                lambda a, b, c: a + value * (b * c) if value != 1 else a + b * c)
    if isinstance(value, builtins.complex):
        raise RuntimeError(f"addcmul: value {value} cannot be converted to type {rt} without "
                           "overflow")
    if rt._kind == 1 and not -_I64 <= value < _I64:
        raise RuntimeError(f"addcmul: value {value} cannot be converted to type {rt} without "
                           "overflow")
    return ternary(K.TER_ADDCMUL, ops.addcmul, rt, input, tensor1, tensor2, out,
                   p0=builtins.float(value), inputs=(input, tensor1, tensor2),
                   kwargs={"value": value})


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2`` (true division; integer tensor1 and tensor2 are
    rejected as in PyTorch)."""
    if isinstance(tensor1, Tensor) and isinstance(tensor2, Tensor) and \
            tensor1._dtype._kind < 2 and tensor2._dtype._kind < 2:
        raise RuntimeError("addcdiv: Integer division with addcdiv is no longer supported; "
                           "use addcmul(input, tensor1, 1 / tensor2) or div(tensor1, tensor2, "
                           "rounding_mode=...) instead.")
    rt = D.result_type(input, tensor1, tensor2)
    if rt._kind == 3:
        return _complex_ternary(ops.addcdiv, input, tensor1, tensor2, out,
                                lambda a, b, c: a + value * (b / c) if value != 1 else a + b / c)
    if isinstance(value, builtins.complex):
        raise RuntimeError(f"addcdiv: value {value} cannot be converted to type {rt} without "
                           "overflow")
    return ternary(K.TER_ADDCDIV, ops.addcdiv, rt, input, tensor1, tensor2, out,
                   p0=builtins.float(value), inputs=(input, tensor1, tensor2),
                   kwargs={"value": value})


# the unary functions, their in-place forms and operator entries
from fiamma._ops import _unary as U  # noqa: E402
from fiamma._ops._unary import *  # noqa: E402,F401,F403
from fiamma._ops._unary import reciprocal as _U_reciprocal  # noqa: E402

__all__ = [
    "add", "sub", "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide",
    "floor_divide", "remainder", "fmod", "pow", "float_power", "atan2", "arctan2", "hypot",
    "copysign", "maximum", "minimum", "fmax", "fmin",
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "isclose", "allclose", "equal",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift",
    "clamp", "clip", "clamp_min", "clamp_max", "where", "lerp", "addcmul", "addcdiv",
    *U.__all__,
]


# ---- operators -------------------------------------------------------------------------------

def _operator(code, name, kind, fallback=None, number_fast=True):
    """``x op y``: the driver, falling back to the general path (or to ``fallback``, the
    public function, where that adds a rule of its own: sub's bool check, pow's shortcuts)."""
    return binary_driver(code, name, kind, "operator", fallback, number_fast)


def _roperator(code, name, kind, fn):
    """``number op x`` (``__radd__``): the driver's number case, else ``fn(number, x)``."""
    return binary_driver(code, name, kind, "reflected", fn)


def _ioperator(code, name, kind, inplace_fn, operator=True):
    """``x op= y`` (``operator``) or ``x.op_(y)``: the in-place driver, else ``inplace_fn``."""
    return binary_driver(code, name, kind, "inplace" if operator else "inplace_method",
                         inplace_fn)


def _fast_add_inplace(key, sign, generic):
    return _fast.add_inplace(key, sign, generic, _raise, is_scalar)


def _reflected(fn):
    def method(self, other):
        if not is_scalar(other) and not isinstance(other, Tensor):
            return NotImplemented
        return fn(other, self)

    return method


def _rtruediv(self, other):
    """``number / x`` is ``x.reciprocal() * number``, as PyTorch's operator computes it (the
    reciprocal rounded to the result's dtype first: one ulp from a true division at times)."""
    if not is_scalar(other):
        return NotImplemented
    return _U_reciprocal(self) * other


def _pos(self):
    if self._dtype is D.bool:
        raise RuntimeError("positive: The `+` operator, on a bool tensor is not supported.")
    return self


def _inplace_fns():
    """name_ -> in-place method for every op that has one in PyTorch."""
    binary_ops = {
        "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div,
        "divide": div, "true_divide": true_divide, "floor_divide": floor_divide,
        "remainder": remainder, "fmod": fmod, "pow": pow, "atan2": atan2, "arctan2": atan2,
        "hypot": hypot, "copysign": copysign, "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt,
        "ge": ge, "greater": gt, "greater_equal": ge, "less": lt, "less_equal": le,
        "not_equal": ne, "logical_and": logical_and, "logical_or": logical_or,
        "logical_xor": logical_xor, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
        "bitwise_xor": bitwise_xor, "bitwise_left_shift": bitwise_left_shift,
        "bitwise_right_shift": bitwise_right_shift, "clamp": clamp, "clip": clamp,
        "clamp_min": clamp_min, "clamp_max": clamp_max, "lerp": lerp, "addcmul": addcmul,
        "addcdiv": addcdiv,
    }
    fns = {n + "_": make_inplace(f, n + "_") for n, f in binary_ops.items()}
    fns.update({n + "_": make_inplace(U.UNARY_METHODS[n], n + "_") for n in U.UNARY_INPLACE})
    fp_ = make_inplace(float_power, "float_power_")

    def float_power_(self, exponent):
        """In-place version of :func:`float_power` (self must be float64, complex128 when an
        operand is complex)."""
        cx = self._dtype._kind == 3 or isinstance(exponent, builtins.complex) or \
            (isinstance(exponent, Tensor) and exponent._dtype._kind == 3)
        rt = D.complex128 if cx else D.float64
        if self._dtype is not rt:
            raise RuntimeError(f"float_power_: the base given to float_power_ has dtype "
                               f"{self._dtype} but the operation's result requires dtype "
                               f"{rt}")
        return fp_(self, exponent)

    fns["float_power_"] = float_power_
    abs_ = fns["abs_"]

    def abs_inplace(self):
        """In-place version of :func:`abs` (not for complex tensors: the result is real)."""
        if isinstance(self, Tensor) and self._dtype._kind == 3:
            raise RuntimeError("abs_: In-place abs is not supported for complex tensors.")
        return abs_(self)

    abs_inplace.__name__ = abs_inplace.__qualname__ = "abs_"
    fns["abs_"] = fns["absolute_"] = abs_inplace
    fns["add_"] = _fast_add_inplace(ops.add, 1, fns["add_"])
    fns["sub_"] = fns["subtract_"] = _fast_add_inplace(ops.sub, -1, fns["sub_"])
    fns["mul_"] = fns["multiply_"] = _ioperator(K.BIN_MUL, ops.mul, ARITH, fns["mul_"],
                                                operator=False)
    fast_div = _ioperator(K.BIN_DIV, ops.div, TRUEDIV, fns["div_"], operator=False)
    generic_div = fns["div_"]

    def div_(self, other, *, rounding_mode=None):
        """In-place version of :func:`div`."""
        if rounding_mode is None:
            return fast_div(self, other)
        return generic_div(self, other, rounding_mode=rounding_mode)

    fns["div_"] = fns["divide_"] = div_
    return fns


def _tensor_where(self, condition, y):
    """``x.where(condition, y)`` is ``where(condition, x, y)``."""
    return where(condition, self, y)


_INPLACE = _inplace_fns()

# module-level in-place functions (fiamma.relu_(x), fiamma.clamp_(x, 0, 1), ...)
_MODULE_INPLACE = [n + "_" for n in U.UNARY_INPLACE] + ["clamp_", "clip_", "clamp_min_",
                                                        "clamp_max_"]
globals().update({n: _INPLACE[n] for n in _MODULE_INPLACE})
__all__.extend(_MODULE_INPLACE)

# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div,
    "divide": div, "true_divide": true_divide, "floor_divide": floor_divide,
    "remainder": remainder, "fmod": fmod, "pow": pow, "float_power": float_power,
    "atan2": atan2, "arctan2": atan2, "hypot": hypot, "copysign": copysign,
    "maximum": maximum, "minimum": minimum, "fmax": fmax, "fmin": fmin,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge, "greater": gt,
    "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
    "isclose": isclose, "allclose": allclose, "equal": equal,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor,
    "bitwise_left_shift": bitwise_left_shift, "bitwise_right_shift": bitwise_right_shift,
    "clamp": clamp, "clip": clamp, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "where": _tensor_where, "lerp": lerp, "addcmul": addcmul, "addcdiv": addcdiv,
    **U.UNARY_METHODS,
    **_INPLACE,
    # ``number + x`` and ``number * x`` are PyTorch's ``x.add(number)`` / ``x.mul(number)``
    # (the tensor is the op's first input, which grad_fn.next_functions shows): the forward
    # operators, as the two ops commute
    "__add__": _operator(K.BIN_ADD, ops.add, ARITH),
    "__radd__": _operator(K.BIN_ADD, ops.add, ARITH),
    "__iadd__": _ioperator(K.BIN_ADD, ops.add, ARITH, _INPLACE["add_"]),
    "__sub__": _operator(K.BIN_SUB, ops.sub, ARITH, sub),
    "__rsub__": _roperator(K.BIN_SUB, ops.sub, ARITH, sub),
    "__isub__": _ioperator(K.BIN_SUB, ops.sub, ARITH, _INPLACE["sub_"]),
    "__mul__": _operator(K.BIN_MUL, ops.mul, ARITH),
    "__rmul__": _operator(K.BIN_MUL, ops.mul, ARITH),
    "__imul__": _ioperator(K.BIN_MUL, ops.mul, ARITH, _INPLACE["mul_"]),
    "__truediv__": _operator(K.BIN_DIV, ops.div, TRUEDIV),
    "__rtruediv__": _rtruediv,
    "__itruediv__": _ioperator(K.BIN_DIV, ops.div, TRUEDIV, _INPLACE["div_"]),
    "__floordiv__": _operator(K.BIN_FLOORDIV, ops.floor_divide, ARITH),
    "__rfloordiv__": _roperator(K.BIN_FLOORDIV, ops.floor_divide, ARITH, floor_divide),
    "__ifloordiv__": _ioperator(K.BIN_FLOORDIV, ops.floor_divide, ARITH,
                                _INPLACE["floor_divide_"]),
    "__mod__": _operator(K.BIN_REMAINDER, ops.remainder, ARITH),
    "__rmod__": _roperator(K.BIN_REMAINDER, ops.remainder, ARITH, remainder),
    "__imod__": _ioperator(K.BIN_REMAINDER, ops.remainder, ARITH, _INPLACE["remainder_"]),
    "__pow__": _operator(K.BIN_POW, ops.pow, ARITH, pow, number_fast=False),
    "__rpow__": _roperator(K.BIN_POW, ops.pow, ARITH, pow),
    "__ipow__": _INPLACE["pow_"],
    "__and__": _operator(K.BIN_BITAND, ops.bitwise_and, ARITH),
    "__rand__": _reflected(bitwise_and),
    "__iand__": _ioperator(K.BIN_BITAND, ops.bitwise_and, ARITH, _INPLACE["bitwise_and_"]),
    "__or__": _operator(K.BIN_BITOR, ops.bitwise_or, ARITH),
    "__ror__": _reflected(bitwise_or),
    "__ior__": _ioperator(K.BIN_BITOR, ops.bitwise_or, ARITH, _INPLACE["bitwise_or_"]),
    "__xor__": _operator(K.BIN_BITXOR, ops.bitwise_xor, ARITH),
    "__rxor__": _reflected(bitwise_xor),
    "__ixor__": _ioperator(K.BIN_BITXOR, ops.bitwise_xor, ARITH, _INPLACE["bitwise_xor_"]),
    "__lshift__": _operator(K.BIN_LSHIFT, ops.bitwise_left_shift, ARITH),
    "__rlshift__": _reflected(bitwise_left_shift),
    "__ilshift__": _INPLACE["bitwise_left_shift_"],
    "__rshift__": _operator(K.BIN_RSHIFT, ops.bitwise_right_shift, ARITH),
    "__rrshift__": _reflected(bitwise_right_shift),
    "__irshift__": _INPLACE["bitwise_right_shift_"],
    "__eq__": _operator(K.BIN_EQ, ops.eq, PREDICATE),
    "__ne__": _operator(K.BIN_NE, ops.ne, PREDICATE),
    "__lt__": _operator(K.BIN_LT, ops.lt, PREDICATE),
    "__le__": _operator(K.BIN_LE, ops.le, PREDICATE),
    "__gt__": _operator(K.BIN_GT, ops.gt, PREDICATE),
    "__ge__": _operator(K.BIN_GE, ops.ge, PREDICATE),
    "__neg__": U.neg,
    "__pos__": _pos,
    "__abs__": U.abs,
    "__invert__": U.bitwise_not,
    # __eq__ defined after the class would leave Tensor's identity hash; it is kept explicitly
    "__hash__": lambda self: id(self),
}
