"""Special functions (lgamma, digamma, polygamma, erfinv, xlogy, logaddexp, logit, sinc, i0, ...).

The kernels are in ``csrc/special.c`` (``fm_special_unary`` / ``fm_special_binary``): they compute
in double and round once to the operand's float dtype, so float16/bfloat16/float32 results are
correctly rounded up to the last step. Integer and bool inputs give the default float dtype, as in
PyTorch. Binary ops broadcast and promote like ``fiamma.add`` (a Python number is an operand).
The names PyTorch has at top level (``torch.lgamma``, ``torch.xlogy``, ...) are exported here
and installed as Tensor methods; the rest live in :mod:`fiamma.special`.

Autograd: each op calls ``record(name, out, inputs, kwargs)`` with the public op name and its
positional arguments as received (``polygamma``: ``(n, input)``; ``logit``: ``(input,)`` with
``{"eps": eps}``; ``mvlgamma``: ``(input,)`` with ``{"p": p}``).
"""

import builtins

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import (
    as_operand,
    bcast_strides,
    broadcast_shapes,
    cast,
    same_device,
)
from fiamma._ops.elementwise import _finish, _result, check_inplace
from fiamma._tensor import Tensor

__all__ = ["lgamma", "digamma", "polygamma", "erfinv", "xlogy", "logaddexp", "logaddexp2",
           "logit", "sinc", "i0", "mvlgamma",
           "lgamma_", "digamma_", "erfinv_", "xlogy_", "logit_", "sinc_", "i0_"]



def _float_dtype(dt):
    return dt if dt._kind == 2 else D.get_default_dtype()


def sp_unary(code, name, x, p0=0.0, out=None, inputs=None, kwargs=None):
    """Run special unary op ``code`` on tensor ``x`` (integers promote to the default float)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if x._dtype._kind == 3:  # the kernels are real: casting would drop the imaginary part
        raise NotImplementedError(f"{name}: not implemented for complex input ({x._dtype})")
    ct = _float_dtype(x._dtype)
    src = cast(x, ct)
    res = _result(out, x._shape, ct, x._storage.device, name, (src,))
    if res._numel:
        rc = res._storage.backend.special_unary(code, res, src, builtins.float(p0))
        check(rc, name, f"dtype {ct}" if rc == K.ERR_DTYPE else "")
    if out is not None:
        res = _finish(res, out)
    if x.requires_grad:
        G.record(name, res, inputs if inputs is not None else (x,), kwargs or {})
    return res


def sp_binary(code, name, a, b, out=None):
    """Run special binary op ``code`` with broadcasting and type promotion (floats only)."""
    a = as_operand(a, name)
    b = as_operand(b, name)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if not (ta or tb):
        raise TypeError(f"{name}: expected at least one tensor operand")
    rt = D.result_type(a, b)
    if rt._kind == 3:  # the kernels are real: casting would drop the imaginary part
        raise NotImplementedError(f"{name}: not implemented for complex input ({rt})")
    ct = _float_dtype(rt)
    dev = same_device(name, a, b)
    from fiamma._creation import tensor

    # numbers (and 0-d tensors of another device) join the operands' device
    ca = cast(a if a._storage.device == dev else a.to(dev), ct) if ta else \
        tensor(a, dtype=ct, device=dev)
    cb = cast(b if b._storage.device == dev else b.to(dev), ct) if tb else \
        tensor(b, dtype=ct, device=dev)
    shape = broadcast_shapes(ca._shape, cb._shape, op=name)
    res = _result(out, shape, ct, dev, name, (ca, cb))
    if res._numel:
        rc = res._storage.backend.special_binary(code, shape, res, ca, bcast_strides(ca, shape),
                                                 cb, bcast_strides(cb, shape))
        check(rc, name)
    if out is not None:
        res = _finish(res, out)
    if (ta and a.requires_grad) or (tb and b.requires_grad):
        G.record(name, res, (a, b), {})
    return res


def _unary_fn(code, name, doc):
    def fn(input, *, out=None):
        return sp_unary(code, name, input, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + "\n\n    Integer and bool inputs give the default float dtype."
    return fn


lgamma = _unary_fn(K.SP_LGAMMA, ops.lgamma, """log|Gamma(input)|, elementwise.

    >>> import fiamma
    >>> round(fiamma.lgamma(fiamma.tensor([5.0])).item(), 5)  # log(24)
    3.17805""")
digamma = _unary_fn(K.SP_DIGAMMA, ops.digamma, """The digamma function d/dx log Gamma(x)
    (-inf at 0, +inf at -0, NaN at the negative integers).""")
erfinv = _unary_fn(K.SP_ERFINV, ops.erfinv, """The inverse error function on [-1, 1]
    (+-inf at +-1, NaN outside).""")
_sinc_real = _unary_fn(K.SP_SINC, ops.sinc, """The normalized sinc: sin(pi x) / (pi x), 1 at 0.""")


def _out_copy(res, out, name):
    if out is None:
        return res
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}: out must be a Tensor, got {type(out).__name__}")
    if out._shape != res._shape:
        out.resize_(res._shape)
    return out.copy_(res)


def sinc(input, *, out=None):
    """The normalized sinc: sin(pi x) / (pi x), 1 at 0 (complex inputs too, as PyTorch).

    Integer and bool inputs give the default float dtype."""
    if isinstance(input, Tensor) and input._dtype._kind == 3:
        import math

        from fiamma._ops.elementwise import where

        px = input * math.pi
        zero = input == 0
        res = where(zero, 1.0, px.sin() / where(zero, 1.0, px))
        return _out_copy(res, out, "sinc")
    return _sinc_real(input, out=out)


sinc.__name__ = sinc.__qualname__ = "sinc"
i0 = _unary_fn(K.SP_I0, ops.i0, """The modified Bessel function of the first kind, order 0.""")


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma (``n`` a non-negative int; n = 0 is digamma).

    >>> import fiamma
    >>> round(fiamma.polygamma(1, fiamma.tensor([1.0])).item(), 6)  # pi^2 / 6
    1.644934
    """
    if isinstance(n, Tensor) and n._numel == 1 and n._dtype._kind < 2 and \
            n._dtype is not D.bool:
        n = builtins.int(n.item())  # a one-element integer tensor, as PyTorch takes
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int):
        raise TypeError(f"polygamma: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"polygamma: n must be non-negative, got {n}")
    return sp_unary(K.SP_POLYGAMMA, ops.polygamma, input, n, out, inputs=(n, input))


def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)); with ``eps`` the input is first clamped to [eps, 1 - eps]."""
    e = -1.0 if eps is None else builtins.float(eps)
    return sp_unary(K.SP_LOGIT, ops.logit, input, e, out, kwargs={"eps": eps})


def mvlgamma(input, p, *, out=None):
    """The multivariate log-gamma of dimension ``p`` (every element must exceed (p - 1) / 2)."""
    if isinstance(p, builtins.bool) or not isinstance(p, builtins.int) or p < 1:
        raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    if not isinstance(input, Tensor):
        raise TypeError(f"mvlgamma: expected a Tensor, got {type(input).__name__}")
    if input._numel:
        from fiamma._ops.elementwise import le
        from fiamma._ops.reduce import amin, any as any_

        x = input.detach()
        # NaN passes the check (and gives NaN), as PyTorch
        bad = le(x, (p - 1) / 2)
        if any_(bad).item():
            lo = amin(x[bad]).item()
            raise RuntimeError(f"mvlgamma: All elements must be greater than (p-1)/2 = "
                               f"{(p - 1) / 2}, got {lo}")
    return sp_unary(K.SP_MULTIGAMMALN, ops.mvlgamma, input, p, out, kwargs={"p": p})


def xlogy(input, other, *, out=None):
    """``input * log(other)``, 0 where input is 0 (unless other is NaN).

    >>> import fiamma
    >>> fiamma.xlogy(fiamma.tensor([0.0, 2.0]), fiamma.tensor([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    return sp_binary(K.SP_XLOGY, ops.xlogy, input, other, out)


def logaddexp(input, other, *, out=None):
    """``log(exp(input) + exp(other))``, computed without overflow (complex inputs too: the
    operand of larger real part factored out)."""
    if (isinstance(input, Tensor) and input._dtype._kind == 3) or \
            (isinstance(other, Tensor) and other._dtype._kind == 3):
        from fiamma._creation import tensor
        from fiamma._ops.elementwise import where

        rt = D.result_type(input, other)
        dev = same_device("logaddexp", *(t for t in (input, other) if isinstance(t, Tensor)))
        a, b = (t.to(rt) if isinstance(t, Tensor) else tensor(t, dtype=rt, device=dev)
                for t in (input, other))
        first = a.real >= b.real
        hi, lo = where(first, a, b), where(first, b, a)
        return _out_copy(hi + (lo - hi).exp().log1p(), out, "logaddexp")
    return sp_binary(K.SP_LOGADDEXP, ops.logaddexp, input, other, out)


def logaddexp2(input, other, *, out=None):
    """``log2(2**input + 2**other)``, computed without overflow."""
    return sp_binary(K.SP_LOGADDEXP2, ops.logaddexp2, input, other, out)


# ---- in-place forms --------------------------------------------------------------------------

def _inplace(name, call, oop):
    """``name`` (``lgamma_``): ``call(self, ...)`` writes the result into self; with gradients
    the out-of-place ``oop(self, ...)`` is computed, recorded and written back (the engine
    rebases self's history on it, so the old value stays available to the formula)."""
    def method(self, *args, **kwargs):
        check_inplace(self, name, builtins.tuple(a for a in args if isinstance(a, Tensor)))
        if self._dtype._kind != 2 and not (self._dtype._kind == 3 and name == "sinc_"):
            raise RuntimeError(f"{name}: result type {_float_dtype(self._dtype)} can't be cast "
                               f"to the desired output type {self._dtype}")
        grad = self.requires_grad or builtins.any(getattr(a, "requires_grad", False)
                                                  for a in args)
        if grad and G.is_grad_enabled():
            G.inplace(oop, name, self, args, kwargs)
        else:
            call(self, *args, **kwargs)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place version of :func:`{name[:-1]}`."
    return method


lgamma_ = _inplace("lgamma_", lambda s: lgamma(s, out=s), lgamma)
digamma_ = _inplace("digamma_", lambda s: digamma(s, out=s), digamma)
erfinv_ = _inplace("erfinv_", lambda s: erfinv(s, out=s), erfinv)
sinc_ = _inplace("sinc_", lambda s: sinc(s, out=s), sinc)
i0_ = _inplace("i0_", lambda s: i0(s, out=s), i0)
xlogy_ = _inplace("xlogy_", lambda s, o: xlogy(s, o, out=s), xlogy)
logit_ = _inplace("logit_", lambda s, eps=None: logit(s, eps, out=s), logit)
_polygamma_ = _inplace("polygamma_", lambda s, n: polygamma(n, s, out=s),
                       lambda s, n: polygamma(n, s))
_mvlgamma_ = _inplace("mvlgamma_", lambda s, p: mvlgamma(s, p, out=s), mvlgamma)


def _polygamma_method(self, n):
    """``x.polygamma(n)`` is ``polygamma(n, x)``."""
    return polygamma(n, self)


# Tensor methods of this module: attached by fiamma._methods (the one place that does)
METHODS = {
    "lgamma": lgamma, "digamma": digamma, "erfinv": erfinv, "sinc": sinc, "i0": i0,
    "xlogy": xlogy, "logaddexp": logaddexp, "logaddexp2": logaddexp2, "logit": logit,
    "mvlgamma": mvlgamma, "polygamma": _polygamma_method,
    "lgamma_": lgamma_, "digamma_": digamma_, "erfinv_": erfinv_, "sinc_": sinc_, "i0_": i0_,
    "xlogy_": xlogy_, "logit_": logit_, "polygamma_": _polygamma_, "mvlgamma_": _mvlgamma_,
}


