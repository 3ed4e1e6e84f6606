"""The examples in the docstrings run and print what they claim."""

import doctest
import importlib

import pytest

MODULES = ["fiamma.optim", "fiamma.optim.optimizer", "fiamma.optim.sgd", "fiamma.optim.adam",
           "fiamma.optim.lbfgs", "fiamma.optim.lr_scheduler", "fiamma.optim.swa_utils",
           "fiamma.optim.factored"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(importlib.import_module(name))
    assert res.attempted > 0 and res.failed == 0
