"""Multivariate normals: ``MultivariateNormal`` (by covariance, precision or Cholesky factor),
``LowRankMultivariateNormal`` (covariance W W^T + diag(D)) and ``LogisticNormal``.

All computations go through the lower Cholesky factor L (log det = 2 sum log diag L,
Mahalanobis terms by triangular solves), never through an explicit inverse.

>>> import fiamma
>>> from fiamma.distributions import MultivariateNormal
>>> d = MultivariateNormal(fiamma.zeros(2), covariance_matrix=fiamma.eye(2))
>>> round(d.log_prob(fiamma.zeros(2)).item(), 5)   # -log(2 pi)
-1.83788
"""

import math

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.normal import Normal
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import StickBreakingTransform
from fiamma.distributions.utils import _standard_normal, lazy_property

__all__ = ["LogisticNormal", "LowRankMultivariateNormal", "MultivariateNormal"]

_LOG_2PI = math.log(2 * math.pi)


def _batch_mv(bmat, bvec):
    """Matrix-vector product over broadcast batch dims."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^-1 x over broadcast batch dims, by one triangular solve."""
    n = bx.shape[-1]
    if bL.dim() == 2:
        # one factor for every vector: solve all of them as the columns of one matrix
        flat = bx.reshape(-1, n)
        sol = fiamma.linalg.solve_triangular(bL, flat.mT, upper=False)
        return (sol * sol).sum(0).reshape(tuple(bx.shape[:-1]))
    batch = fiamma.broadcast_shapes(tuple(bL.shape[:-2]), tuple(bx.shape[:-1]))
    L = bL.expand(tuple(batch) + (n, n))
    x = bx.expand(tuple(batch) + (n,)).unsqueeze(-1)
    sol = fiamma.linalg.solve_triangular(L, x, upper=False).squeeze(-1)
    return (sol * sol).sum(-1)


def _tril_inverse(L):
    eye = fiamma.eye(L.shape[-1], dtype=L.dtype, device=L.device)
    return fiamma.linalg.solve_triangular(L, eye.expand(tuple(L.shape)), upper=False)


def _mahalanobis_by_inverse(Linv, x):
    """|L^-1 x|^2 over broadcast batch dims, given L^-1."""
    n = x.shape[-1]
    if Linv.dim() == 2:
        y = x.reshape(-1, n) @ Linv.mT
        return (y * y).sum(-1).reshape(tuple(x.shape[:-1]))
    y = (Linv @ x.unsqueeze(-1)).squeeze(-1)
    return (y * y).sum(-1)


def _precision_to_scale_tril(P):
    """The lower Cholesky factor of P^-1 without forming P^-1 (flip, Cholesky, flip)."""
    Lf = fiamma.linalg.cholesky(P.flip(-2, -1))
    L_inv = Lf.flip(-2, -1).mT
    eye = fiamma.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return fiamma.linalg.solve_triangular(L_inv, eye.expand(tuple(L_inv.shape)), upper=False)


def _tril_inverse_gram(L):
    """(L L^T)^-1 = L^-T L^-1."""
    Linv = _tril_inverse(L)
    return Linv.mT @ Linv


class _ScaleTrilMatrices:
    """``scale_tril``, ``covariance_matrix`` and ``precision_matrix`` derived on first use
    from ``_unbroadcasted_scale_tril`` and expanded to ``_full_shape()`` (whichever was given
    is stored at construction)."""

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._full_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._full_shape())

    @lazy_property
    def precision_matrix(self):
        return _tril_inverse_gram(self._unbroadcasted_scale_tril).expand(self._full_shape())


class MultivariateNormal(_ScaleTrilMatrices, Distribution):
    """N(loc, Sigma) with Sigma given as ``covariance_matrix``, ``precision_matrix`` or
    ``scale_tril`` (exactly one).

    >>> import fiamma
    >>> from fiamma.distributions import MultivariateNormal
    >>> _ = fiamma.manual_seed(0)
    >>> L = fiamma.tensor([[1.0, 0.0], [0.5, 2.0]])
    >>> d = MultivariateNormal(fiamma.zeros(3, 2), scale_tril=L)
    >>> tuple(d.rsample((5,)).shape), tuple(d.batch_shape), tuple(d.event_shape)
    ((5, 3, 2), (3,), (2,))
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("MultivariateNormal: exactly one of covariance_matrix or "
                             "precision_matrix or scale_tril may be specified.")
        matrix = given[0]
        if matrix.dim() < 2:
            name = ("covariance_matrix" if covariance_matrix is not None else
                    "precision_matrix" if precision_matrix is not None else "scale_tril")
            raise ValueError(f"MultivariateNormal: {name} must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        if matrix.shape[-1] != loc.shape[-1] or matrix.shape[-2] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: the matrix shape {tuple(matrix.shape)} does "
                             f"not match loc's event size {loc.shape[-1]}")
        batch_shape = fiamma.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        event_shape = tuple(loc.shape[-1:])
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        if scale_tril is not None:
            self.scale_tril = scale_tril
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix
        else:
            self.precision_matrix = precision_matrix
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is None:
            if covariance_matrix is not None:
                self._unbroadcasted_scale_tril = fiamma.linalg.cholesky(covariance_matrix)
            else:
                self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        for name in ("scale_tril", "covariance_matrix", "precision_matrix"):
            if name in self.__dict__:
                self.__dict__[name] = self.__dict__[name].expand(
                    tuple(batch_shape) + event_shape + event_shape)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape,
                                                validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        L = self._unbroadcasted_scale_tril
        if L.dim() == 2:
            return self.loc + eps @ L.mT
        return self.loc + _batch_mv(L, eps)

    def _scale_tril_inverse(self):
        """L^-1, cached when no gradient can flow through it (a cached graph would be
        freed by the first backward)."""
        L = self._unbroadcasted_scale_tril
        if L.requires_grad and fiamma.is_grad_enabled():
            return _tril_inverse(L)
        cached = self.__dict__.get("_scale_tril_inv")
        if cached is None:
            with fiamma.no_grad():
                cached = self.__dict__["_scale_tril_inv"] = _tril_inverse(L)
        return cached

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        # the Mahalanobis term as |L^-1 diff|^2 with L^-1 formed once: a matrix product over
        # all the vectors instead of a triangular solve per batch
        M = _mahalanobis_by_inverse(self._scale_tril_inverse(), diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * _LOG_2PI + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + _LOG_2PI) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


def _batch_capacitance_tril(W, D):
    """Cholesky of the capacitance matrix I + W^T D^-1 W."""
    m = W.shape[-1]
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    K = Wt_Dinv @ W + fiamma.eye(m, dtype=W.dtype, device=W.device)
    return fiamma.linalg.cholesky(K)


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """log det(W W^T + D) by the matrix determinant lemma."""
    return (2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            + D.log().sum(-1))


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """x^T (W W^T + D)^-1 x by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    term1 = (x.pow(2) / D).sum(-1)
    term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return term1 - term2


class LowRankMultivariateNormal(Distribution):
    """N(loc, W W^T + diag(D)) with ``cov_factor`` W (n x rank) and ``cov_diag`` D; costs
    O(n rank^2) instead of O(n^3).

    >>> import fiamma
    >>> from fiamma.distributions import LowRankMultivariateNormal
    >>> d = LowRankMultivariateNormal(fiamma.zeros(3), fiamma.ones(3, 1), fiamma.ones(3))
    >>> d.covariance_matrix.tolist()
    [[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("LowRankMultivariateNormal: loc must be at least "
                             "one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("LowRankMultivariateNormal: cov_factor must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError("LowRankMultivariateNormal: cov_factor must be a batch of "
                             f"matrices with shape {event_shape[0]} x m, got "
                             f"{tuple(cov_factor.shape)}")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError("LowRankMultivariateNormal: cov_diag must be a batch of vectors "
                             f"with shape {event_shape}, got {tuple(cov_diag.shape)}")
        loc_ = loc.unsqueeze(-1)
        cov_diag_ = cov_diag.unsqueeze(-1)
        try:
            loc_, self.cov_factor, cov_diag_ = fiamma.broadcast_tensors(loc_, cov_factor,
                                                                        cov_diag_)
        except (RuntimeError, ValueError) as e:
            raise ValueError("LowRankMultivariateNormal: incompatible batch shapes: loc "
                             f"{tuple(loc.shape)}, cov_factor {tuple(cov_factor.shape)}, "
                             f"cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = tuple(self.loc.shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape,
                                                       validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(
                    tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        return fiamma.linalg.cholesky(self.covariance_matrix)

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        cov = W @ W.mT + self._unbroadcasted_cov_diag.diag_embed()
        return cov.expand(self._full_shape())

    @lazy_property
    def precision_matrix(self):
        W = self._unbroadcasted_cov_factor
        D = self._unbroadcasted_cov_diag
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        A = fiamma.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = D.reciprocal().diag_embed() - A.mT @ A
        return precision.expand(self._full_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        W_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_D = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                        self._unbroadcasted_cov_diag, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * _LOG_2PI + log_det + M)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                        self._unbroadcasted_cov_diag, self._capacitance_tril)
        H = 0.5 * (self._event_shape[0] * (1.0 + _LOG_2PI) + log_det)
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


class LogisticNormal(TransformedDistribution):
    """The logistic-normal on the K-simplex: stick-breaking of Normal(loc, scale) over K - 1
    coordinates.

    >>> import fiamma
    >>> from fiamma.distributions import LogisticNormal
    >>> x = LogisticNormal(fiamma.zeros(2), fiamma.ones(2)).sample()
    >>> tuple(x.shape), round(x.sum().item(), 5)
    ((3,), 1.0)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
