"""Helpers shared by the distributions (PyTorch's ``torch.distributions.utils``).

>>> import fiamma
>>> from fiamma.distributions.utils import broadcast_all, probs_to_logits
>>> a, b = broadcast_all(fiamma.zeros(3), 1.0)
>>> tuple(b.shape)
(3,)
>>> round(probs_to_logits(fiamma.tensor([0.5]), is_binary=True).item(), 6)
0.0
"""

from functools import update_wrapper
from numbers import Number

import fiamma

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits", "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060


def _is_tensor(x):
    return isinstance(x, fiamma.Tensor)


def broadcast_all(*values):
    """Broadcast numbers and tensors to one shape; numbers become tensors of the tensors' dtype
    (the default float dtype when there is no tensor)."""
    if not all(_is_tensor(v) or isinstance(v, Number) for v in values):
        raise ValueError("broadcast_all: input arguments must all be Tensors or Numbers, got "
                         + ", ".join(type(v).__name__ for v in values))
    if not any(_is_tensor(v) for v in values):
        dt = fiamma.get_default_dtype()
        return tuple(fiamma.tensor(float(v), dtype=dt) for v in values)
    ref = next(v for v in values if _is_tensor(v))
    dt = ref.dtype if ref.dtype.is_floating_point else fiamma.get_default_dtype()
    vals = [v if _is_tensor(v) else fiamma.tensor(v, dtype=dt, device=ref.device)
            for v in values]
    return tuple(fiamma.broadcast_tensors(*vals))


def _batch_shape_of(params, like):
    """``()`` when every parameter was given as a plain number, else ``like``'s shape."""
    return fiamma.Size() if all(isinstance(p, Number) for p in params) else like.size()


def _standard_normal(shape, dtype, device):
    return fiamma.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def _eps(x):
    return fiamma.finfo(x.dtype).eps


def _tiny(x):
    return fiamma.finfo(x.dtype).tiny


def clamp_probs(probs):
    """Clamp probabilities into the open interval (eps, 1 - eps) of their dtype."""
    eps = _eps(probs)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) if binary, else softmax over the last dimension."""
    if is_binary:
        return fiamma.sigmoid(logits)
    return fiamma.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log(1 - p) if binary, else log(p) (clamped away from 0 and 1)."""
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def softplus(x):
    """log(1 + exp(x)), stable for both signs."""
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


def logsigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-x)


def one_hot(index, n, dtype):
    """One-hot encoding of an integer tensor over ``n`` classes, in ``dtype``."""
    return (index.unsqueeze(-1) == fiamma.arange(n, device=index.device)).to(dtype)


class lazy_property:
    """A property computed on first access and cached on the instance (PyTorch's
    ``lazy_property``): a distribution built from ``probs`` computes ``logits`` only if asked."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with fiamma.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat, diag=0):
    """The lower-triangular part (with ``diag`` offset) of the last two dims as a vector."""
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"tril_matrix_to_vec: diag ({diag}) provided is outside [{-n}, {n - 1}]")
    rows, cols = fiamma.tril_indices(n, n, offset=diag, device=mat.device)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of :func:`tril_matrix_to_vec`: a vector of length n(n+1)/2 (for diag=0)
    into a lower-triangular n x n matrix."""
    m = vec.shape[-1]
    n = 0
    while _tril_count(n, diag) < m:
        n += 1
    if _tril_count(n, diag) != m:
        raise ValueError(f"vec_to_tril_matrix: the size of the last dimension ({m}) is not a "
                         f"triangular number for diag={diag}")
    rows, cols = fiamma.tril_indices(n, n, offset=diag, device=vec.device)
    flat = rows * n + cols
    out = fiamma.zeros(tuple(vec.shape[:-1]) + (n * n,), dtype=vec.dtype, device=vec.device)
    idx = flat.expand(tuple(vec.shape[:-1]) + (m,))
    out = out.scatter(-1, idx, vec)
    return out.reshape(tuple(vec.shape[:-1]) + (n, n))


def _tril_count(n, diag):
    return sum(max(0, min(n, i + diag + 1)) for i in range(n))
