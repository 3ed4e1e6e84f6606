"""fiamma.distributions: probability distributions with sampling, log-densities and
reparameterised gradients, with the API and semantics of ``torch.distributions``.

>>> import fiamma
>>> from fiamma.distributions import Categorical
>>> _ = fiamma.manual_seed(0)
>>> logits = fiamma.zeros(2, requires_grad=True)
>>> d = Categorical(logits=logits)
>>> a = d.sample()
>>> (-d.log_prob(a)).backward()     # REINFORCE-style gradient
>>> logits.grad.shape
fiamma.Size([2])
"""

import sys as _sys

from fiamma.distributions import constraints, transforms
from fiamma.distributions._version import __version__
from fiamma.distributions.categorical import (
                                              Bernoulli,
                                              Categorical,
                                              OneHotCategorical,
                                              OneHotCategoricalStraightThrough,
)
from fiamma.distributions.constraint_registry import biject_to, transform_to
from fiamma.distributions.continuous import (
                                              Cauchy,
                                              Gumbel,
                                              HalfCauchy,
                                              Kumaraswamy,
                                              Laplace,
                                              Pareto,
                                              Uniform,
                                              Weibull,
)
from fiamma.distributions.counts import Binomial, Geometric, Multinomial, NegativeBinomial, Poisson
from fiamma.distributions.distribution import Distribution
from fiamma.distributions.exp_family import ExponentialFamily
from fiamma.distributions.gamma import Beta, Chi2, Dirichlet, Exponential, Gamma, InverseGamma
from fiamma.distributions.generalized_pareto import GeneralizedPareto
from fiamma.distributions.independent import Independent
from fiamma.distributions.kl import kl_divergence, register_kl
from fiamma.distributions.matrix import LKJCholesky, Wishart
from fiamma.distributions.mixture_same_family import MixtureSameFamily
from fiamma.distributions.multivariate_normal import (
                                              LogisticNormal,
                                              LowRankMultivariateNormal,
                                              MultivariateNormal,
)
from fiamma.distributions.normal import HalfNormal, LogNormal, Normal
from fiamma.distributions.relaxed import (
                                              ContinuousBernoulli,
                                              ExpRelaxedCategorical,
                                              LogitRelaxedBernoulli,
                                              RelaxedBernoulli,
                                              RelaxedOneHotCategorical,
)
from fiamma.distributions.studentt import FisherSnedecor, StudentT, VonMises
from fiamma.distributions.transformed_distribution import TransformedDistribution
from fiamma.distributions.transforms import *  # noqa: F403

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli",
    "Dirichlet", "Distribution", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
    "GeneralizedPareto",
    "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "InverseGamma",
    "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal",
    "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial", "MultivariateNormal",
    "NegativeBinomial", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
    "Pareto", "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT",
    "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart",
    "ExpRelaxedCategorical", "LogitRelaxedBernoulli",
    "__version__", "biject_to", "constraints", "kl_divergence", "register_kl",
    "transform_to", "transforms",
]
__all__.extend(transforms.__all__)

# PyTorch's module path torch.distributions.studentT: the module studentt under that name too
# (a file studentT.py beside studentt.py would clash on case-insensitive file systems)
_sys.modules.setdefault(__name__ + ".studentT", _sys.modules[__name__ + ".studentt"])
