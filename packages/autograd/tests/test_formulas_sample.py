"""First and second derivatives of the resampling ops (upsample, grid_sampler and their
backward ops) against finite differences in float64. Skipped where core lacks them."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "grid_sampler"),
                                reason="core's resampling ops are not available")


@pytest.mark.parametrize("mode,size,scales,ac", [
    ("nearest", (5,), None, False),
    ("nearest-exact", (2, 7), (0.6, 1.7), False),
    ("linear", (7,), None, True),
    ("linear", (5, 3), (1.7, 0.6), False),
    ("linear", (3, 4, 2), None, False),
    ("cubic", (5, 6), None, False),
    ("cubic", (3, 5), None, True),
    ("nearest", (2, 3, 4), None, False),
])
def test_upsample(mode, size, scales, ac):
    rng = np.random.default_rng(0)
    nsp = len(size)
    x = rand(2, 2, *((3,) * nsp), rng=rng)
    check(lambda t: fiamma.upsample(t, size, mode, ac, scales), x)


def test_upsample_noncontig_and_backward_op():
    rng = np.random.default_rng(1)
    x = noncontig(2, 3, 4, rng=rng)  # (2, 3, 4) as a transposed view: N=2, C=3, W=4
    check(lambda t: fiamma.upsample(t, (7,), "linear", False), x)
    g = rand(1, 2, 5, 6, rng=rng)
    check(lambda t: fiamma.upsample_backward(t, (1, 2, 3, 4), "cubic", False), g)


def _grid(rng, n, *out, lim=0.9):
    nsp = len(out)
    return rand(n, *out, nsp, rng=rng, low=-lim, high=lim)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("ac", [False, True])
def test_grid_sampler_2d(mode, pad, ac):
    rng = np.random.default_rng(2 + mode + 3 * pad)
    x = rand(2, 2, 3, 4, rng=rng)
    grid = _grid(rng, 2, 3, 2, lim=1.2)
    # w.r.t. input: linear, second derivatives through grid_sampler_backward_input
    check(lambda t: fiamma.grid_sampler(t, grid.detach(), mode, pad, ac), x)
    if mode != 1:
        # w.r.t. both, second derivatives through the grid too (as PyTorch 2.13)
        check(lambda t, g: fiamma.grid_sampler(t, g, mode, pad, ac), x, grid)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("pad", [0, 2])
def test_grid_sampler_3d(mode, pad):
    rng = np.random.default_rng(7)
    x = rand(1, 2, 3, 2, 3, rng=rng)
    grid = _grid(rng, 1, 2, 2, 1, lim=1.1)
    check(lambda t: fiamma.grid_sampler(t, grid.detach(), mode, pad, False), x)
    if mode == 0:
        check(lambda t, g: fiamma.grid_sampler(t, g, mode, pad, True), x, grid)


def test_grid_sampler_backward_input_mixed():
    # the input gradient as a function of (grad_output, grid): its derivatives w.r.t. both
    rng = np.random.default_rng(3)
    x = rand(1, 2, 3, 3, rng=rng).detach()
    grid = _grid(rng, 1, 2, 2)
    gy = rand(1, 2, 2, 2, rng=rng)
    for mode in (0, 2):
        check(lambda g, gr: fiamma.grid_sampler_backward(g, x, gr, mode, 0, False,
                                                         output_mask=(True, False))[0],
              gy, grid, gg=False)


@pytest.mark.parametrize("mode", [0, 2])
@pytest.mark.parametrize("pad", [0, 1, 2])
def test_grid_sampler_grid_hessian_and_third_order(mode, pad):
    # the grid gradient's derivatives w.r.t. (grad_output, input, grid), and one order more
    rng = np.random.default_rng(5 + pad)
    x = rand(1, 2, 3, 4, rng=rng)
    grid = _grid(rng, 1, 2, 3, lim=1.2)
    gy = rand(1, 2, 2, 3, rng=rng)
    check(lambda g, t, gr: fiamma.grid_sampler_backward(g, t, gr, mode, pad, False,
                                                        output_mask=(False, True))[1],
          gy, x, grid)
