"""fiamma.special: PyTorch's ``torch.special`` functions.

Kernels in C (``csrc/special.c``), computed in double and rounded once to the input's float
dtype; integer and bool inputs give the default float dtype. Autograd records each op under
the name given in the function's docstring (``special.erfcx`` records ``"erfcx"``).

>>> import fiamma
>>> round(fiamma.special.ndtr(fiamma.tensor([0.0])).item(), 3)
0.5
>>> fiamma.special.xlog1py(fiamma.tensor([0.0]), fiamma.tensor([-1.0])).tolist()
[0.0]
"""

from fiamma._autograd_api import ops
from fiamma._backend import codes as K
from fiamma._ops._unary import erf, erfc, exp2, expm1, log1p, round  # noqa: F401
from fiamma._ops.elementwise import sigmoid as _sigmoid
from fiamma._ops.special_ops import (  # noqa: F401
    digamma,
    erfinv,
    i0,
    lgamma,
    logit,
    mvlgamma,
    polygamma,
    sinc,
    sp_binary,
    sp_unary,
    xlogy,
)

__all__ = [
    "digamma", "psi", "polygamma", "gammaln", "multigammaln", "erf", "erfc", "erfcx", "erfinv",
    "expit", "logit", "exp2", "expm1", "log1p", "round", "sinc", "i0", "i0e", "i1", "i1e",
    "ndtr", "ndtri", "log_ndtr", "entr", "xlogy", "xlog1py", "zeta", "logsumexp", "softmax",
    "log_softmax", "gammainc", "gammaincc",
]

psi = digamma
gammaln = lgamma


def _u(code, name, doc):
    def fn(input, *, out=None):
        return sp_unary(code, name, input, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + f" Autograd name: ``{name!r}``."
    return fn


erfcx = _u(K.SP_ERFCX, ops.erfcx, "The scaled complementary error function exp(x^2) erfc(x).")
i0e = _u(K.SP_I0E, ops.i0e, "exp(-|x|) I0(x), the exponentially scaled Bessel I0.")
i1 = _u(K.SP_I1, ops.i1, "The modified Bessel function of the first kind, order 1.")
i1e = _u(K.SP_I1E, ops.i1e, "exp(-|x|) I1(x), the exponentially scaled Bessel I1.")
ndtr = _u(K.SP_NDTR, ops.ndtr, "The standard normal CDF.")
ndtri = _u(K.SP_NDTRI, ops.ndtri, "The inverse of the standard normal CDF (quantile).")
log_ndtr = _u(K.SP_LOG_NDTR, ops.log_ndtr,
              "log of the standard normal CDF, accurate far in both tails.")
entr = _u(K.SP_ENTR, ops.entr, "-x log x (0 at 0, -inf for x < 0).")


def expit(input, *, out=None):
    """The logistic sigmoid 1 / (1 + exp(-x)) (``fiamma.sigmoid``)."""
    return _sigmoid(input, out=out)


def multigammaln(input, p, *, out=None):
    """The multivariate log-gamma function (``fiamma.mvlgamma``)."""
    return mvlgamma(input, p, out=out)


def xlog1py(input, other, *, out=None):
    """``input * log1p(other)``, 0 where input is 0 (unless other is NaN)."""
    return sp_binary(K.SP_XLOG1PY, ops.xlog1py, input, other, out)


def zeta(input, other, *, out=None):
    """The Hurwitz zeta function sum_k (other + k)^-input."""
    return sp_binary(K.SP_ZETA, ops.zeta, input, other, out)


def gammainc(input, other, *, out=None):
    """The regularized lower incomplete gamma function P(input, other) (``torch.igamma``).

    NaN where ``input < 0`` or ``other < 0``. Autograd: gradient w.r.t. ``other`` only (as
    PyTorch); asking for the gradient w.r.t. ``input`` raises. Autograd name: ``'gammainc'``.

    >>> import fiamma
    >>> round(fiamma.special.gammainc(fiamma.tensor([1.0]), fiamma.tensor([2.0])).item(), 6)
    0.864665
    """
    return sp_binary(K.SP_GAMMAINC, ops.gammainc, input, other, out)


def gammaincc(input, other, *, out=None):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P (``igammac``).

    >>> import fiamma
    >>> round(fiamma.special.gammaincc(fiamma.tensor([1.0]), fiamma.tensor([2.0])).item(), 6)
    0.135335
    """
    return sp_binary(K.SP_GAMMAINCC, ops.gammaincc, input, other, out)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """``fiamma.logsumexp``."""
    from fiamma._ops.reduce import logsumexp as f

    return f(input, dim, keepdim, out=out)


def softmax(input, dim, *, dtype=None):
    """softmax along ``dim`` (exp(x - logsumexp(x)))."""
    from fiamma._ops.elementwise import exp, sub

    x = input if dtype is None else input.to(dtype)
    return exp(sub(x, logsumexp(x, dim, keepdim=True)))


def log_softmax(input, dim, *, dtype=None):
    """log_softmax along ``dim`` (x - logsumexp(x))."""
    from fiamma._ops.elementwise import sub

    x = input if dtype is None else input.to(dtype)
    return sub(x, logsumexp(x, dim, keepdim=True))

# orthogonal polynomials and Bessel-type functions (fiamma._ops.special_poly)
from fiamma._ops import special_poly as _special_poly  # noqa: E402
from fiamma._ops.special_poly import *  # noqa: E402,F401,F403

__all__ += _special_poly.__all__

from fiamma import _torch_function  # noqa: E402

_torch_function.register_namespace(__name__)  # __torch_function__ (once it is active)
