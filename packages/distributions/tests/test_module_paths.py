"""Each distribution at its PyTorch module path (``torch.distributions.bernoulli.Bernoulli``,
``torch.distributions.relaxed_bernoulli.RelaxedBernoulli``, ...): the very classes of
``fiamma.distributions``."""

import importlib

import pytest

import fiamma
import fiamma.distributions as D

# PyTorch's per-distribution modules and the names each defines
MODULES = {
    "bernoulli": ["Bernoulli"], "beta": ["Beta"], "binomial": ["Binomial"],
    "categorical": ["Categorical"], "cauchy": ["Cauchy"], "chi2": ["Chi2"],
    "continuous_bernoulli": ["ContinuousBernoulli"], "dirichlet": ["Dirichlet"],
    "exponential": ["Exponential"], "fishersnedecor": ["FisherSnedecor"], "gamma": ["Gamma"],
    "geometric": ["Geometric"], "gumbel": ["Gumbel"], "half_cauchy": ["HalfCauchy"],
    "half_normal": ["HalfNormal"], "inverse_gamma": ["InverseGamma"],
    "kumaraswamy": ["Kumaraswamy"], "laplace": ["Laplace"], "lkj_cholesky": ["LKJCholesky"],
    "log_normal": ["LogNormal"], "logistic_normal": ["LogisticNormal"],
    "lowrank_multivariate_normal": ["LowRankMultivariateNormal"],
    "multinomial": ["Multinomial"], "multivariate_normal": ["MultivariateNormal"],
    "negative_binomial": ["NegativeBinomial"], "normal": ["Normal"],
    "one_hot_categorical": ["OneHotCategorical", "OneHotCategoricalStraightThrough"],
    "pareto": ["Pareto"], "poisson": ["Poisson"],
    "relaxed_bernoulli": ["LogitRelaxedBernoulli", "RelaxedBernoulli"],
    "relaxed_categorical": ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"],
    "uniform": ["Uniform"], "von_mises": ["VonMises"], "weibull": ["Weibull"],
    "wishart": ["Wishart"],
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_path_gives_the_same_classes(module):
    mod = importlib.import_module(f"fiamma.distributions.{module}")
    for name in MODULES[module]:
        assert getattr(mod, name) is getattr(D, name), (module, name)


def test_relaxed_bernoulli_from_its_module_samples_in_range():
    from fiamma.distributions.relaxed_bernoulli import RelaxedBernoulli

    fiamma.manual_seed(0)
    x = RelaxedBernoulli(fiamma.tensor(0.5), probs=fiamma.tensor([0.2, 0.8])).rsample((100,))
    assert x.shape == (100, 2) and bool(((x > 0) & (x < 1)).all())
