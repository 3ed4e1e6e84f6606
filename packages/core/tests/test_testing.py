"""fiamma.testing.assert_close: tolerances by dtype, structure checks, messages; (parity) the
same pass/fail decisions as torch.testing.assert_close."""

import math

import numpy as np
import pytest

import fiamma
from fiamma.testing import assert_allclose, assert_close

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

T = fiamma.tensor


def test_passes_within_default_tolerances():
    assert_close(T([1.0, 2.0]), T([1.0, 2.0 + 1e-6]))
    assert_close(T([1.0], dtype=fiamma.float64), T([1.0 + 5e-8], dtype=fiamma.float64))
    assert_close(T([1, 2]), T([1, 2]))
    assert_close(T([math.inf, -math.inf]), T([math.inf, -math.inf]))
    assert_close(T([math.nan]), T([math.nan]), equal_nan=True)
    assert_close({"a": [T([1.0]), 2]}, {"a": [T([1.0]), 2]})
    assert_close(1.0, 1.0 + 1e-8)
    assert_close(np.ones(3), np.ones(3))


@pytest.mark.parametrize("actual,expected,match", [
    (T([1.0, 2.0, 3.0]), T([1.0, 2.1, 3.5]), r"Mismatched elements: 2 / 3 \(66.7%\)"),
    (T([1, 2]), T([1.0, 2.0]), "attribute 'dtype'"),
    (fiamma.zeros(2), fiamma.zeros(3), "attribute 'shape'"),
    (1.0, 1.1, "Scalars are not close"),
    ([fiamma.zeros(1)], [fiamma.ones(1)], r"item \[0\]"),
    (T([math.nan]), T([math.nan]), "not close"),
    (T([1, 2]), T([1, 3]), "not close"),
    ({"a": 1}, {"b": 1}, "keys"),
    ([1, 2], [1], "length"),
])
def test_fails_with_pytorch_messages(actual, expected, match):
    with pytest.raises(AssertionError, match=match):
        assert_close(actual, expected)


def test_options():
    assert_close(T([1, 2]), T([1.0, 2.0]), check_dtype=False)
    assert_close(T([1.0]), T([1.5]), rtol=0, atol=0.5)
    with pytest.raises(ValueError, match="rtol"):
        assert_close(T([1.0]), T([1.0]), atol=1.0)
    with pytest.raises(AssertionError, match="custom"):
        assert_close(T([1.0]), T([2.0]), msg="custom")
    with pytest.raises(AssertionError, match="stride"):
        assert_close(fiamma.zeros(2, 3).t(), fiamma.zeros(3, 2), check_stride=True)
    assert_allclose(T([1.0, math.nan]), [1.0, math.nan])


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_same_decisions_as_torch():
    rng = np.random.default_rng(0)
    base = rng.standard_normal(20)
    for dt in ("float16", "bfloat16", "float32", "float64"):
        for scale in (1e-9, 1e-7, 1e-6, 1e-5, 1e-3, 1e-2, 1e-1):
            a = base + scale * rng.standard_normal(20)
            f = [T(x).to(getattr(fiamma, dt)) for x in (a, base)]
            t = [torch.tensor(x).to(getattr(torch, dt)) for x in (a, base)]
            outcomes = []
            for lib, args in ((assert_close, f), (torch.testing.assert_close, t)):
                try:
                    lib(*args)
                    outcomes.append(True)
                except AssertionError:
                    outcomes.append(False)
            assert outcomes[0] == outcomes[1], (dt, scale, outcomes)
