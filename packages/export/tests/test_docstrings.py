"""The examples in the docstrings run and print what they claim."""

import doctest
import importlib

import pytest

MODULES = ["fiamma.jit", "fiamma.export", "fiamma.export._export",
           "fiamma._cond"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(importlib.import_module(name))
    assert res.attempted > 0 and res.failed == 0


def test_onnx_docstring_examples():
    pytest.importorskip("onnx")
    for name in ("fiamma.onnx", "fiamma.onnx._program"):
        res = doctest.testmod(importlib.import_module(name))
        assert res.attempted > 0 and res.failed == 0, name
