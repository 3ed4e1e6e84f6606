"""Gradients at PyTorch's special points, found by the gradient fuzz against PyTorch: atan2 at
the origin, cdist's matmul path at zero distance, and the p=inf distances' ties (every
coordinate at the maximum gets the full gradient, as PyTorch's cdist/pdist)."""

import math

import numpy as np
import pytest

import fiamma

f64 = fiamma.float64


def _t(a):
    return fiamma.tensor(a, dtype=f64, requires_grad=True)


def test_atan2_at_origin_is_zero():
    y, x = _t([0.0, 0.0, 1.0]), _t([0.0, -0.0, 0.0])
    gy, gx = fiamma.autograd.grad(fiamma.atan2(y, x).sum(), (y, x))
    assert gy.tolist() == [0.0, 0.0, 0.0]
    assert gx.tolist() == [0.0, 0.0, -1.0]


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist_zero_distance_has_zero_gradient(mode):
    a, b = _t([[0.0, 0.0], [1.0, 1.0]]), _t([[0.0, 0.0], [1.0, 2.0]])
    w = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=f64)
    d = fiamma.cdist(a, b, compute_mode=mode)
    assert d[0, 0].item() == 0.0
    ga, gb = fiamma.autograd.grad((d * w).sum(), (a, b))
    # numerical reference: the pair at distance 0 contributes 0 (a subgradient)
    s5, s2 = 1 / math.sqrt(5), 1 / math.sqrt(2)
    exp_a = [[-2 * s5, -4 * s5], [3 * s2, 3 * s2 - 4]]
    exp_b = [[-3 * s2, -3 * s2], [2 * s5, 4 * s5 + 4]]
    assert np.allclose(ga.numpy(), exp_a) and np.allclose(gb.numpy(), exp_b)


def test_chebyshev_ties_get_the_full_gradient():
    a, b = _t([[0.0, 0.0], [1.0, 1.0]]), _t([[0.0, 0.0], [1.0, 2.0]])
    w = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=f64)
    d = fiamma.cdist(a, b, p=math.inf)
    assert d.tolist() == [[0.0, 2.0], [1.0, 1.0]]
    ga, gb = fiamma.autograd.grad((d * w).sum(), (a, b))
    # a[1] - b[0] = (1, 1): both coordinates tie, each gets the weight 3 in full
    assert ga.tolist() == [[0.0, -2.0], [3.0, -1.0]]
    assert gb.tolist() == [[-3.0, -3.0], [0.0, 6.0]]
    x = _t([[0.0, 0.0], [1.0, -1.0]])
    (g,) = fiamma.autograd.grad(fiamma.pdist(x, p=math.inf).sum(), x)
    assert g.tolist() == [[-1.0, 1.0], [1.0, -1.0]]


def test_pdist_of_one_row_is_in_the_graph():
    x = _t([[1.0, 2.0]])
    d = fiamma.pdist(x)
    assert tuple(d.shape) == (0,) and d.requires_grad
    with pytest.raises(RuntimeError, match="non-negative"):
        fiamma.pdist(x, -1.0)


def test_cdist_of_empty_inputs_is_in_the_graph():
    x = fiamma.zeros(0, 5, dtype=f64, requires_grad=True)
    d = fiamma.cdist(x, fiamma.ones(4, 5, dtype=f64))
    assert tuple(d.shape) == (0, 4) and d.requires_grad
    y = fiamma.zeros(3, 0, dtype=f64, requires_grad=True)
    d = fiamma.cdist(y, fiamma.ones(2, 0, dtype=f64))
    assert d.tolist() == [[0.0, 0.0]] * 3 and d.requires_grad


@pytest.mark.parity
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf])
def test_distances_with_ties_match_torch(p):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.integers(-1, 2, (6, 3)).astype(np.float64)
    b = rng.integers(-1, 2, (5, 3)).astype(np.float64)
    w = rng.standard_normal((6, 5))
    modes = ["donot_use_mm_for_euclid_dist"] + (["use_mm_for_euclid_dist"] if p == 2 else [])
    for mode in modes:
        at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        gt = torch.autograd.grad((torch.cdist(at, bt, p, mode) * torch.tensor(w)).sum(), (at, bt))
        af, bf = _t(a), _t(b)
        gf = fiamma.autograd.grad((fiamma.cdist(af, bf, p, mode) * fiamma.tensor(w)).sum(),
                                  (af, bf))
        for x, y in zip(gt, gf):
            assert np.allclose(x.numpy(), y.numpy(), atol=1e-12), (mode, x, y)
    xt = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.pdist(xt, p).sum(), xt)
    xf = _t(a)
    (gf,) = fiamma.autograd.grad(fiamma.pdist(xf, p).sum(), xf)
    assert np.allclose(gt.numpy(), gf.numpy(), atol=1e-12)
