"""The examples in the docstrings run and print what they claim."""

import doctest
import importlib

import pytest

MODULES = ["fiamma.distributions", "fiamma.distributions.utils",
           "fiamma.distributions.constraints", "fiamma.distributions.transforms",
           "fiamma.distributions._transforms_structured",
           "fiamma.distributions.constraint_registry", "fiamma.distributions.distribution",
           "fiamma.distributions.exp_family", "fiamma.distributions.kl",
           "fiamma.distributions.normal", "fiamma.distributions.categorical",
           "fiamma.distributions.counts", "fiamma.distributions.gamma",
           "fiamma.distributions.continuous", "fiamma.distributions.generalized_pareto",
           "fiamma.distributions.studentt",
           "fiamma.distributions.relaxed", "fiamma.distributions.multivariate_normal",
           "fiamma.distributions.mixture_same_family", "fiamma.distributions.matrix",
           "fiamma.distributions.independent", "fiamma.distributions.transformed_distribution"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(importlib.import_module(name))
    assert res.attempted > 0 and res.failed == 0
