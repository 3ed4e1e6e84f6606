"""First and second derivatives of core's shape utilities (flip, roll, rot90, repeat, tile,
repeat_interleave, tril/triu, diagonal, diag, diag_embed, diagflat, block_diag, pad in every
mode) against finite differences (float64). Skipped where core does not have them yet."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "flip"),
                                reason="core's shape utilities are not available")

OPS = {
    "flip": lambda t: fiamma.flip(t, (0, 1)),
    "flip_one": lambda t: t.flip(1),
    "fliplr": lambda t: fiamma.fliplr(t),
    "roll": lambda t: fiamma.roll(t, 1, 0),
    "roll_two": lambda t: fiamma.roll(t, (2, -1), (1, 0)),
    "roll_flat": lambda t: fiamma.roll(t, 5),
    "rot90": lambda t: fiamma.rot90(t),
    "rot90_k": lambda t: fiamma.rot90(t, 3, (1, 0)),
    "rot90_2": lambda t: fiamma.rot90(t, 2),
    "repeat": lambda t: t.repeat(2, 1),
    "repeat_more_dims": lambda t: t.repeat(2, 1, 3),
    "tile": lambda t: fiamma.tile(t, (2,)),
    "repeat_interleave": lambda t: fiamma.repeat_interleave(t, 2, dim=1),
    "repeat_interleave_flat": lambda t: fiamma.repeat_interleave(t, 3),
    "repeat_interleave_counts": lambda t: fiamma.repeat_interleave(
        t, fiamma.tensor([1, 0, 2]), dim=0),
    "tril": lambda t: fiamma.tril(t),
    "triu_k": lambda t: fiamma.triu(t, 1),
    "tril_neg": lambda t: t.tril(-1),
    "diagonal": lambda t: fiamma.diagonal(t),
    "diagonal_off": lambda t: t.diagonal(1),
    "diag_of_matrix": lambda t: fiamma.diag(t, -1),
    "diag_of_vector": lambda t: fiamma.diag(t[0], 1),
    "diag_embed": lambda t: fiamma.diag_embed(t),
    "diag_embed_off": lambda t: fiamma.diag_embed(t, -1, 0, 2),
    "diagflat": lambda t: fiamma.diagflat(t),
    "trace": lambda t: fiamma.trace(t),
    "movedim": lambda t: fiamma.movedim(t.unsqueeze(0), 0, 2),
    "swapaxes": lambda t: fiamma.swapaxes(t, 0, 1),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_shape_ops(name):
    rng = np.random.default_rng(0)
    fn = OPS[name]
    check(fn, rand(3, 4, rng=rng))
    check(fn, noncontig(3, 4, rng=rng))


def test_tril_inplace():
    rng = np.random.default_rng(1)

    def f(a):
        y = a * 2.0
        y.tril_(1)
        return y

    check(f, rand(3, 4, rng=rng))


def test_block_diag():
    rng = np.random.default_rng(2)
    a = rand(2, rng=rng)
    assert all(fn is not None for fn, _ in fiamma.block_diag(a, a).grad_fn.next_functions)
    check(lambda a, b, c: fiamma.block_diag(a, b, c), rand(2, 3, rng=rng), rand(3, rng=rng),
          rand(rng=rng))


PADS = [((1, 2), "constant"), ((1, 1, 2, 0), "constant"), ((-1, 2), "constant"),
        ((1, -2, 0, 1), "constant"), ((2, 1), "reflect"), ((1, 2, 2, 1), "reflect"),
        ((2, 3), "replicate"), ((1, 0, 2, 2), "replicate"), ((2, 1), "circular"),
        ((1, 2, 2, 1), "circular")]


@pytest.mark.parametrize("k", range(len(PADS)))
def test_pad(k):
    p, mode = PADS[k]
    rng = np.random.default_rng(3)
    kw = dict(value=0.5) if mode == "constant" else {}
    check(lambda t: fiamma.pad(t, p, mode=mode, **kw), rand(1, 3, 4, rng=rng))
    check(lambda t: fiamma.pad(t, p, mode=mode, **kw), noncontig(2, 3, 4, rng=rng))


@pytest.mark.parametrize("p", [(-4, 5), (2, -5), (-1, 2), (-3, -0)])
def test_pad_replicate_crop_everything(p):
    # a negative pad that crops the whole dim: every output reads input[clamp(j - lo, 0, n-1)]
    x = rand(1, 2, 4, seed=4)
    check(lambda t: fiamma.pad(t, p, mode="replicate"), x)
    lo = p[0]
    m = 4 + p[0] + p[1]
    src = [min(max(j - lo, 0), 3) for j in range(m)]
    y = fiamma.pad(x, p, mode="replicate")
    assert y.detach().numpy().tolist() == x.detach().numpy()[..., src].tolist()
    w = fiamma.arange(1.0, m + 1, dtype=fiamma.float64)
    g, = fiamma.autograd.grad((y * w).sum(), x)
    expect = np.zeros(4)
    np.add.at(expect, src, np.arange(1.0, m + 1))
    assert g.numpy()[0, 0].tolist() == expect.tolist()


def test_pad_constant_empty_input_grad():
    x = fiamma.zeros(0, 3, 3, dtype=fiamma.float64, requires_grad=True)
    y = fiamma.pad(x, (1, 1, 1, 1, 1, 1), value=1.0)
    assert tuple(y.shape) == (2, 5, 5)
    g, = fiamma.autograd.grad(y.sum(), x)
    assert tuple(g.shape) == (0, 3, 3)
