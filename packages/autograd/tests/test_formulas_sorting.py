"""First and second derivatives of sorting and selection ops against finite differences
(float64). Skipped where core does not have them yet."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "topk"),
                                reason="core's sorting ops are not available")

OPS = {
    "sort": lambda t: fiamma.sort(t, 1).values,
    "sort_desc_dim0": lambda t: t.sort(0, descending=True)[0],
    "topk": lambda t: fiamma.topk(t, 2).values,
    "topk_small_dim0": lambda t: t.topk(2, 0, largest=False)[0],
    "kthvalue": lambda t: fiamma.kthvalue(t, 2, 1).values,
    "kthvalue_keepdim": lambda t: t.kthvalue(1, 0, keepdim=True)[0],
    "median_dim": lambda t: fiamma.median(t, 1).values,
    "median_all": lambda t: fiamma.median(t),
    "nanmedian_dim": lambda t: fiamma.nanmedian(t, 0, keepdim=True).values,
    "cummax": lambda t: fiamma.cummax(t, 1).values,
    "cummin": lambda t: fiamma.cummin(t, 0).values,
    "diff": lambda t: fiamma.diff(t),
    "diff_n2_dim0": lambda t: fiamma.diff(t, 2, 0),
    "diff_prepend": lambda t: fiamma.diff(t, 1, 1, prepend=fiamma.ones(3, 1, dtype=t.dtype),
                                          append=fiamma.zeros(3, 2, dtype=t.dtype)),
    "diff_too_many": lambda t: fiamma.diff(t, 5, 1),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_sorting_ops(name):
    rng = np.random.default_rng(0)
    check(OPS[name], rand(3, 4, rng=rng))
    check(OPS[name], noncontig(3, 4, rng=rng))


def test_mode_and_ties():
    x = fiamma.tensor([[1.0, 2.0, 2.0, 3.0]], dtype=fiamma.float64, requires_grad=True)
    v, i = fiamma.mode(x, 1)
    (g,) = fiamma.autograd.grad(v.sum(), x)
    expected = [[0.0] * 4]
    expected[0][i.item()] = 1.0
    assert g.tolist() == expected
    y = fiamma.tensor([3.0, 1.0, 3.0, 3.0, 5.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.median(y), y)  # ties at the median share it
    np.testing.assert_allclose(g.numpy(), [1 / 3, 0, 1 / 3, 1 / 3, 0])
    z = fiamma.tensor([2.0, 1.0, 3.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(fiamma.cummax(z, 0).values.sum(), z)
    assert g.sum().item() == 4.0 and g[1].item() == 0.0


@pytest.mark.parametrize("n", [1, 2])
def test_diff_prepend_and_append_get_gradients(n):
    rng = np.random.default_rng(1)
    check(lambda x, p, a: fiamma.diff(x, n, 1, prepend=p, append=a),
          rand(3, 4, rng=rng), rand(3, 2, rng=rng), rand(3, 1, rng=rng))
    check(lambda x, p: fiamma.diff(x, n, 0, prepend=p), rand(2, 3, rng=rng),
          rand(1, 3, rng=rng))


@pytest.mark.parametrize("op", ["topk", "sort", "cummax"])
def test_values_changed_in_place_before_backward(op):
    # the derivative reads only the indices: dividing the values in place (as Mixtral's router
    # does with topk) must not trip the saved-tensor version check, and the gradient is that of
    # the expression with the in-place step: 2 * w scattered back through the indices
    x = fiamma.tensor([[0.3, -1.0, 2.0, 0.5], [1.5, 0.2, -0.7, 0.9]], requires_grad=True)
    if op == "topk":
        v, i = fiamma.topk(x, 2, dim=-1)
    elif op == "sort":
        v, i = x.sort(-1)
    else:
        v, i = fiamma.cummax(x, dim=-1)
    v.mul_(2.0)
    w = fiamma.arange(v.numel(), dtype=fiamma.float32).reshape(v.shape) + 1
    (v * w).sum().backward()
    want = np.zeros((2, 4), np.float32)
    for r in range(2):
        for c in range(v.shape[1]):
            want[r, i[r, c].item()] += 2.0 * w[r, c].item()
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_changed_indices_still_raise():
    # the indices are still saved and checked
    x = fiamma.tensor([3.0, 1.0, 2.0], requires_grad=True)
    v, i = fiamma.topk(x, 2)
    i.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        v.sum().backward()
