"""Distributions over matrices: ``LKJCholesky`` (Cholesky factors of correlation matrices)
and ``Wishart`` (positive-definite matrices).

>>> import fiamma
>>> from fiamma.distributions import LKJCholesky
>>> L = LKJCholesky(3, 0.5).sample()
>>> fiamma.allclose((L @ L.mT).diagonal(), fiamma.ones(3), atol=1e-5)
True
"""

import math
from numbers import Number

import fiamma
from fiamma.distributions import constraints
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.gamma import Beta, Chi2
from fiamma.distributions.multivariate_normal import _precision_to_scale_tril, _ScaleTrilMatrices
from fiamma.distributions.utils import broadcast_all

__all__ = ["LKJCholesky", "Wishart"]


class LKJCholesky(Distribution):
    """The LKJ distribution over correlation matrices, on their lower Cholesky factors:
    density proportional to det(L L^T)^(concentration - 1). Sampled by the onion method.

    >>> import fiamma
    >>> from fiamma.distributions import LKJCholesky
    >>> tuple(LKJCholesky(4, fiamma.ones(2)).sample((5,)).shape)
    (5, 2, 4, 4)
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if not isinstance(dim, int) or dim < 2:
            raise ValueError(f"LKJCholesky: expected dim to be an integer >= 2, got {dim!r}")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = (dim, dim)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = fiamma.arange(self.dim - 1, dtype=self.concentration.dtype,
                               device=self.concentration.device)
        offset = fiamma.cat([fiamma.zeros(1, dtype=offset.dtype, device=offset.device), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with fiamma.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            u_normal = fiamma.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            norm = fiamma.linalg.vector_norm(u_normal, dim=-1, keepdim=True)
            # row 0 is all zeros (its norm is 0): keep it zero instead of 0 / 0
            u_hypersphere = u_normal / fiamma.where(norm > 0, norm, 1.0)
            w = y.sqrt() * u_hypersphere
            tiny = fiamma.finfo(w.dtype).tiny
            diag_elems = (1 - (w * w).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag_elems.diag_embed()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = fiamma.arange(2, self.dim + 1, dtype=value.dtype, device=value.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = fiamma.lgamma(alpha) * dm1
        numerator = fiamma.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term


def _mvdigamma(x, p):
    total = fiamma.digamma(x)
    for i in range(1, p):
        total = total + fiamma.digamma(x - i / 2.0)
    return total


class Wishart(_ScaleTrilMatrices, Distribution):
    """Wishart(df, Sigma) over p x p positive-definite matrices: the law of sum of df outer
    products of N(0, Sigma) vectors. Sigma by ``covariance_matrix``, ``precision_matrix`` or
    ``scale_tril``; reparameterised samples by the Bartlett decomposition.

    >>> import fiamma
    >>> from fiamma.distributions import Wishart
    >>> Wishart(fiamma.tensor(5.0), covariance_matrix=fiamma.eye(2)).mean.tolist()
    [[5.0, 0.0], [0.0, 5.0]]
    """

    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky,
                       "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Wishart: exactly one of covariance_matrix or precision_matrix "
                             "or scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("Wishart: scale_tril, covariance_matrix or precision_matrix must "
                             "be at least two-dimensional, with optional leading batch "
                             "dimensions")
        if param.shape[-1] != param.shape[-2]:
            raise ValueError(f"Wishart: expected square matrices, got {tuple(param.shape)}")
        p = param.shape[-1]
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = fiamma.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = tuple(fiamma.broadcast_shapes(tuple(param.shape[:-2]),
                                                        tuple(df.shape)))
            self.df = df
        self.df = self.df.expand(batch_shape)
        event_shape = (p, p)
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Wishart: value of df={self.df} expected to be greater than "
                             f"ndim - 1 = {p - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
            self._unbroadcasted_scale_tril = fiamma.linalg.cholesky(covariance_matrix)
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self.arg_constraints = dict(self.arg_constraints)
        self.arg_constraints["df"] = constraints.greater_than(p - 1)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        self._dist_chi2 = Chi2(self.df.unsqueeze(-1) - fiamma.arange(
            p, dtype=self.df.dtype, device=self.df.device))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        new.arg_constraints = self.arg_constraints
        new._dist_chi2 = Chi2(new.df.unsqueeze(-1) - fiamma.arange(
            self.event_shape[-1], dtype=new.df.dtype, device=new.df.device))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @property
    def mean(self):
        return self.df.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = fiamma.where(factor <= 0, math.nan, factor)
        return factor.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.unsqueeze(-1).unsqueeze(-1) * (
            V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def rsample(self, sample_shape=()):
        sample_shape = tuple(sample_shape)
        shape = tuple(self._extended_shape(sample_shape))
        p = self._event_shape[-1]
        chi2 = self._dist_chi2.rsample(sample_shape)          # (..., p): the squared diagonal
        noise = fiamma.randn(shape, dtype=chi2.dtype, device=chi2.device).tril(-1)
        A = noise + chi2.sqrt().diag_embed()
        X = self._unbroadcasted_scale_tril @ A
        out = X @ X.mT
        # symmetrise against rounding
        return 0.5 * (out + out.mT) if p > 1 else out

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        M = fiamma.linalg.cholesky(value)
        logdet_value = 2 * M.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        batch = fiamma.broadcast_shapes(tuple(L.shape[:-2]), tuple(M.shape[:-2]))
        Linv_M = fiamma.linalg.solve_triangular(L.expand(tuple(batch) + (p, p)),
                                                M.expand(tuple(batch) + (p, p)), upper=False)
        trace = (Linv_M * Linv_M).sum((-2, -1))
        half_logdet_cov = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (-nu * half_logdet_cov - 0.5 * nu * p * math.log(2)
                - fiamma.mvlgamma(0.5 * nu, p) + 0.5 * (nu - p - 1) * logdet_value
                - 0.5 * trace)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_logdet_cov = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * half_logdet_cov + 0.5 * p * (p + 1) * math.log(2)
                + fiamma.mvlgamma(0.5 * nu, p) - 0.5 * (nu - p - 1) * _mvdigamma(0.5 * nu, p)
                + 0.5 * nu * p)
