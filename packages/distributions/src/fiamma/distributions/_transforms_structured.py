"""The structured transforms (vectors, matrices, slices): ``CorrCholeskyTransform``,
``SoftmaxTransform``, ``StickBreakingTransform``, ``LowerCholeskyTransform``,
``PositiveDefiniteTransform``, ``CatTransform``, ``StackTransform`` and
``CumulativeDistributionTransform``. Public through ``fiamma.distributions.transforms``.

>>> import fiamma
>>> from fiamma.distributions.transforms import StickBreakingTransform
>>> y = StickBreakingTransform()(fiamma.zeros(2))
>>> [round(v, 4) for v in y.tolist()]
[0.3333, 0.3333, 0.3333]
"""

import math
import operator
from functools import reduce

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.transforms import (
    Transform,
    _clipped_sigmoid,
    _need_dims,
    _ParameterFreeTransform,
)
from fiamma.distributions.utils import (
    _sum_rightmost,
    softplus,
    tril_matrix_to_vec,
    vec_to_tril_matrix,
)


def _pad_last(x, before, after, value):
    parts = []
    shape = tuple(x.shape[:-1])
    if before:
        parts.append(fiamma.full(shape + (before,), value, dtype=x.dtype, device=x.device))
    parts.append(x)
    if after:
        parts.append(fiamma.full(shape + (after,), value, dtype=x.dtype, device=x.device))
    return fiamma.cat(parts, -1)


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 -> Cholesky factors of D x D correlation
    matrices (tanh to (-1, 1), then stick-breaking of each row's squared norm)."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = x.tanh()
        eps = fiamma.finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z = r * r
        z1m_cumprod_sqrt = (1 - z).sqrt().cumprod(-1)
        n = r.shape[-1]
        r = r + fiamma.eye(n, dtype=r.dtype, device=r.device)
        return r * _pad_last(z1m_cumprod_sqrt[..., :-1], 1, 0, 1.0)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = _pad_last(y_cumsum[..., :-1], 1, 0, 1.0)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return ((1 + t) / (1 - t)).log() / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        _need_dims(len(shape), 1, "CorrCholeskyTransform")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError(f"CorrCholeskyTransform: input size {n} is not a triangular number")
        return fiamma.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2 or shape[-2] != shape[-1]:
            raise ValueError("CorrCholeskyTransform: expected square matrices")
        n = shape[-1] * (shape[-1] - 1) // 2
        return fiamma.Size(tuple(shape[:-2]) + (n,))


class SoftmaxTransform(_ParameterFreeTransform):
    """Unconstrained vectors -> the simplex by exp and normalisation (not bijective: the
    inverse is log, defined up to an additive constant)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _need_dims(len(shape), 1, "SoftmaxTransform")
        return shape

    def inverse_shape(self, shape):
        _need_dims(len(shape), 1, "SoftmaxTransform")
        return shape


class StickBreakingTransform(_ParameterFreeTransform):
    """Unconstrained vectors of length K-1 -> the K-simplex by stick breaking (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    @staticmethod
    def _offset(x):
        k = x.shape[-1]
        return fiamma.arange(k, 0, -1, dtype=x.dtype, device=x.device)

    def _call(self, x):
        z = _clipped_sigmoid(x - self._offset(x).log())
        z_cumprod = (1 - z).cumprod(-1)
        return _pad_last(z, 0, 1, 1.0) * _pad_last(z_cumprod, 1, 0, 1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=fiamma.finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + self._offset(y_crop).log()

    def log_abs_det_jacobian(self, x, y):
        x = x - self._offset(x).log()
        return (-x - softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _need_dims(len(shape), 1, "StickBreakingTransform")
        return fiamma.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        _need_dims(len(shape), 1, "StickBreakingTransform")
        return fiamma.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(_ParameterFreeTransform):
    """Unconstrained square matrices -> lower-triangular matrices with positive diagonal
    (strict lower part kept, diagonal exponentiated)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(_ParameterFreeTransform):
    """Unconstrained square matrices -> positive-definite matrices (L L^T of
    ``LowerCholeskyTransform``)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        y = fiamma.linalg.cholesky(y)
        return LowerCholeskyTransform().inv(y)


class CatTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice of length ``lengths[i]`` along ``dim``."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("CatTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: got {len(self.transforms)} transforms and "
                             f"{len(self.lengths)} lengths")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _check(self, x):
        if not -x.dim() <= self.dim < x.dim():
            raise ValueError(f"CatTransform: dim {self.dim} out of range for a {x.dim()}-d input")
        if x.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: expected size {self.length} along dim {self.dim}, "
                             f"got {x.shape[self.dim]}")

    def _slices(self, x):
        start = 0
        for t, length in zip(self.transforms, self.lengths):
            yield t, x.narrow(self.dim, start, length)
            start += length

    def _call(self, x):
        self._check(x)
        return fiamma.cat([t(xs) for t, xs in self._slices(x)], dim=self.dim)

    def _inverse(self, y):
        self._check(y)
        return fiamma.cat([t.inv(ys) for t, ys in self._slices(y)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        self._check(x)
        self._check(y)
        parts, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            xs, ys = x.narrow(self.dim, start, length), y.narrow(self.dim, start, length)
            ladj = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                ladj = _sum_rightmost(ladj, self.event_dim - t.event_dim)
            parts.append(ladj)
            start += length
        dim = self.dim
        if dim >= 0:
            dim = dim - x.dim()
        dim = dim + self.event_dim
        if dim < 0:
            return fiamma.cat(parts, dim=dim)
        return reduce(operator.add, parts)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice along ``dim`` and stack the results."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("StackTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        if not -z.dim() <= self.dim < z.dim():
            raise ValueError(f"StackTransform: dim {self.dim} out of range for a {z.dim()}-d "
                             "input")
        if z.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: expected size {len(self.transforms)} along dim "
                             f"{self.dim}, got {z.shape[self.dim]}")
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        return fiamma.stack([t(v) for v, t in zip(self._slice(x), self.transforms)], self.dim)

    def _inverse(self, y):
        return fiamma.stack([t.inv(v) for v, t in zip(self._slice(y), self.transforms)],
                            self.dim)

    def log_abs_det_jacobian(self, x, y):
        parts = [t.log_abs_det_jacobian(a, b)
                 for a, b, t in zip(self._slice(x), self._slice(y), self.transforms)]
        return fiamma.stack(parts, self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x): the support of a univariate distribution -> (0, 1)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return type(self)(self.distribution, cache_size=cache_size)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)
