"""``StudentT``, ``FisherSnedecor`` and ``VonMises``.

>>> import fiamma
>>> from fiamma.distributions import StudentT
>>> round(StudentT(fiamma.tensor(1.0)).log_prob(fiamma.tensor(0.0)).item(), 5)  # Cauchy
-1.14473
"""

import math

import fiamma
import fiamma.special
from fiamma.distributions import constraints
from fiamma.distributions._samplers import _rejection_loop
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.gamma import Chi2, Gamma
from fiamma.distributions.utils import (
    _batch_shape_of,
    _standard_normal,
    broadcast_all,
    lazy_property,
)

__all__ = ["FisherSnedecor", "StudentT", "VonMises"]


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, location ``loc`` and scale ``scale``;
    sampled as loc + scale Z / sqrt(V / df), Z normal, V chi-squared (reparameterised).

    >>> import fiamma
    >>> from fiamma.distributions import StudentT
    >>> StudentT(fiamma.tensor(5.0)).variance.item()
    1.6666666269302368
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return fiamma.where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        var = self.scale.pow(2) * df / (df - 2)
        var = fiamma.where(df > 2, var, math.inf)
        return fiamma.where(df <= 1, math.nan, var)

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch_shape = self.df.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        y = x * (z / self.df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + fiamma.lgamma(0.5 * self.df) - fiamma.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self):
        lbeta = (fiamma.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - fiamma.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (fiamma.digamma(0.5 * (self.df + 1))
                                         - fiamma.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom (ratio of scaled
    chi-squares; reparameterised through the gamma sampler).

    >>> import fiamma
    >>> from fiamma.distributions import FisherSnedecor
    >>> FisherSnedecor(fiamma.tensor(3.0), fiamma.tensor(6.0)).mean.item()
    1.5
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        batch_shape = _batch_shape_of((df1, df2), self.df1)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = self.df2.clamp(min=2.5)
        return fiamma.where(self.df2 > 2, df2 / (df2 - 2), math.nan)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return fiamma.where(self.df1 > 2, mode, math.nan)

    @property
    def variance(self):
        df2 = self.df2.clamp(min=4.5)
        var = (2 * df2.pow(2) * (self.df1 + df2 - 2)
               / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))
        return fiamma.where(self.df2 > 4, var, math.nan)

    def rsample(self, sample_shape=()):
        # Gamma(df/2, df) is chi2(df) / (2 df); the factors of 2 cancel in the ratio
        x1 = self._gamma1.rsample(sample_shape)
        x2 = self._gamma2.rsample(sample_shape)
        tiny = fiamma.finfo(x2.dtype).tiny
        y = x1 / x2.clamp(min=tiny)
        return y.clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = fiamma.lgamma(ct1 + ct2) - fiamma.lgamma(ct1) - fiamma.lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


def _log_i0(k):
    return fiamma.special.i0e(k).log() + k


class VonMises(Distribution):
    """The von Mises distribution on the circle [-pi, pi): density exp(k cos(x - loc)) /
    (2 pi I0(k)). Sampled by Best and Fisher's rejection method (not reparameterised).

    >>> import fiamma
    >>> from fiamma.distributions import VonMises
    >>> round(VonMises(0.0, 1e-8).log_prob(fiamma.tensor(1.0)).item(), 5)   # uniform
    -1.83788
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        batch_shape = self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * (value - self.loc).cos()
        return log_prob - math.log(2 * math.pi) - _log_i0(self.concentration)

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.double()
        tau = 1 + (1 + 4 * kappa * kappa).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = (1 + rho * rho) / (2 * rho)
        # for tiny kappa, rho ~ kappa / 2 cancels: use the series 1/kappa + kappa
        small = kappa < 1e-5
        return fiamma.where(small, 1 / kappa.clamp(min=1e-300) + kappa, r)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with fiamma.no_grad():
            k = self.concentration.double().expand(shape).reshape(-1)
            r = self._proposal_r.expand(shape).reshape(-1)

            def draw(idx):
                ki, ri = k[idx], r[idx]
                u = fiamma.rand(3, idx.numel(), dtype=fiamma.float64)
                z = (math.pi * u[0]).cos()
                f = (1 + ri * z) / (ri + z)
                c = ki * (ri - f)
                ok = (c * (2 - c) - u[1] > 0) | ((c / u[1]).log() + 1 - c >= 0)
                theta = (u[2] - 0.5).sign() * f.clamp(min=-1, max=1).acos()
                return theta, ok

            theta = _rejection_loop(k.numel(), draw, "VonMises.sample").reshape(shape)
            x = theta + self.loc.double()
            x = (x + math.pi).remainder(2 * math.pi) - math.pi
            return x.to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = fiamma.Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        """The circular mean (``loc``)."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance 1 - I1(k) / I0(k)."""
        k = self.concentration
        return 1 - (fiamma.special.i1e(k) / fiamma.special.i0e(k))

    def entropy(self):
        k = self.concentration
        return (math.log(2 * math.pi) + _log_i0(k)
                - k * fiamma.special.i1e(k) / fiamma.special.i0e(k))
