"""The runnable examples in fiamma.fx's docstrings run and print what they show."""

import doctest
import importlib

import pytest

MODULES = ["fiamma.fx", "fiamma.fx.node", "fiamma.fx.graph", "fiamma.fx.proxy",
           "fiamma.fx._symbolic_trace", "fiamma.fx.graph_module", "fiamma.fx.interpreter",
           "fiamma.fx.passes.shape_prop", "fiamma.fx.subgraph_rewriter"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(importlib.import_module(name))
    assert res.attempted > 0 and res.failed == 0
