"""fiamma.cond (torch.cond) run eagerly: one branch, PyTorch's argument rules."""

import pytest

import fiamma


def test_cond_picks_a_branch():
    x = fiamma.tensor([1.0, -2.0])
    assert fiamma.cond(x.sum() < 0, lambda v: v * 2, lambda v: v * 3, (x,)).tolist() == \
        [2.0, -4.0]
    assert fiamma.cond(False, lambda v: v * 2, lambda v: v * 3, [x]).tolist() == [3.0, -6.0]
    assert fiamma.cond(fiamma.tensor([True]), lambda: "t", lambda: "f") == "t"


def test_cond_errors():
    with pytest.raises(RuntimeError, match="one-element"):
        fiamma.cond(fiamma.ones(2) > 0, lambda: 1, lambda: 2)
    with pytest.raises(RuntimeError, match="callables"):
        fiamma.cond(True, 1, lambda: 2)
    with pytest.raises(RuntimeError, match="tuple or list"):
        fiamma.cond(True, lambda v: v, lambda v: v, fiamma.ones(1))
