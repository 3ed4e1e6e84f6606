"""fiamma.quasirandom.SobolEngine: an independent NumPy construction of the Sobol points, the
net (balance) properties of plain and scrambled points, the engine's bookkeeping, and (with
PyTorch installed) bit-identical points to torch.quasirandom.SobolEngine."""

import os

import numpy as np
import pytest

import fiamma
from fiamma.quasirandom import SobolEngine


def _reference(dimension, n):
    """Point i = XOR of the direction numbers v_b over the set bits b of gray(i) = i ^ (i >> 1),
    divided by 2**30 (the direct formula, not the engine's Gray-code recursion)."""
    v = SobolEngine(dimension).sobolstate.numpy()
    pts = np.zeros((n, dimension), np.int64)
    for i in range(n):
        g = i ^ (i >> 1)
        b = 0
        while g:
            if g & 1:
                pts[i] ^= v[:, b]
            g >>= 1
            b += 1
    return pts / 2.0 ** 30


def test_first_dimensions_are_the_known_sequences():
    pts = SobolEngine(3).draw(8, dtype=fiamma.float64).numpy()
    # dimension 0: van der Corput in Gray-code order; dimension 1 (x + 1, m_1 = 1)
    assert pts[:, 0].tolist() == [0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125]
    assert pts[:, 1].tolist() == [0, 0.5, 0.25, 0.75, 0.375, 0.875, 0.125, 0.625]


@pytest.mark.parametrize("dimension", [1, 4, 37, 1000])
def test_points_equal_the_direct_formula(dimension):
    eng = SobolEngine(dimension)
    got = np.concatenate([eng.draw(1, dtype=fiamma.float64).numpy(),
                          eng.draw(10, dtype=fiamma.float64).numpy(),
                          eng.draw(53, dtype=fiamma.float64).numpy()])
    np.testing.assert_array_equal(got, _reference(dimension, 64))


def test_direction_numbers_decode_to_the_published_table():
    scipy = pytest.importorskip("scipy")
    path = os.path.join(os.path.dirname(scipy.__file__), "stats", "_sobol_direction_numbers.npz")
    if not os.path.exists(path):
        pytest.skip("this SciPy does not ship the Joe & Kuo table")
    from fiamma.quasirandom import _load_directions

    z = np.load(path)
    degree, a, m = _load_directions()
    poly = np.where(degree > 0, (1 << degree) | (a << 1) | 1, 1)
    np.testing.assert_array_equal(poly, z["poly"])
    np.testing.assert_array_equal(m[1:], z["vinit"][1:, :m.shape[1]])


def _assert_balanced(pts, m):
    """Each of the 2**m points lies in its own 1/2**m interval, in every dimension, and the
    first two dimensions form a (0, m, 2)-net: every elementary box of area 2**-m holds one."""
    n = 2 ** m
    cells = np.floor(pts * n).astype(np.int64)
    for d in range(pts.shape[1]):
        assert sorted(cells[:, d].tolist()) == list(range(n))
    for k in range(m + 1):
        box = (np.floor(pts[:, 0] * 2 ** k).astype(np.int64) * 2 ** (m - k)
               + np.floor(pts[:, 1] * 2 ** (m - k)).astype(np.int64))
        assert len(set(box.tolist())) == n


@pytest.mark.parametrize("scramble,seed", [(False, None), (True, 0), (True, 12345)])
def test_points_are_balanced(scramble, seed):
    pts = SobolEngine(6, scramble=scramble, seed=seed).draw_base2(7, dtype=fiamma.float64)
    p = pts.numpy()
    assert p.shape == (128, 6) and (p >= 0).all() and (p < 1).all()
    _assert_balanced(p, 7)


def test_scrambling_is_seeded_and_changes_the_points():
    a = SobolEngine(4, scramble=True, seed=7).draw(16).numpy()
    b = SobolEngine(4, scramble=True, seed=7).draw(16).numpy()
    c = SobolEngine(4, scramble=True, seed=8).draw(16).numpy()
    plain = SobolEngine(4).draw(16).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, plain)
    assert a[0].any()  # the digital shift moves the first point off the origin
    fiamma.manual_seed(3)
    d = SobolEngine(4, scramble=True).draw(8).numpy()
    fiamma.manual_seed(3)
    np.testing.assert_array_equal(d, SobolEngine(4, scramble=True).draw(8).numpy())
    # randomised QMC estimate of E[x0 * x1] = 1/4 over scrambles
    est = [np.prod(SobolEngine(2, scramble=True, seed=s).draw(256, dtype=fiamma.float64)
                   .numpy(), axis=1).mean() for s in range(20)]
    assert abs(np.mean(est) - 0.25) < 1e-3


def test_draw_fast_forward_reset_and_bookkeeping():
    eng = SobolEngine(3)
    full = eng.draw(20).numpy()
    eng.reset()
    assert eng.num_generated == 0
    eng.fast_forward(7)
    assert eng.num_generated == 7
    np.testing.assert_array_equal(eng.draw(5).numpy(), full[7:12])
    eng.fast_forward(3)
    np.testing.assert_array_equal(eng.draw(5).numpy(), full[15:20])
    out = fiamma.empty(1)
    assert eng.reset().draw(4, out=out) is out and tuple(out.shape) == (4, 3)
    assert eng.draw(2).dtype == fiamma.get_default_dtype()
    assert eng.draw(2, dtype=fiamma.float64).dtype == fiamma.float64
    assert eng.num_generated == 8
    assert repr(SobolEngine(2, scramble=True, seed=1)) == "SobolEngine(dimension=2, " \
        "scramble=True, seed=1)"


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"\[1, 21201\]"):
        SobolEngine(0)
    with pytest.raises(ValueError, match=r"\[1, 21201\]"):
        SobolEngine(21202)
    eng = SobolEngine(2)
    eng.draw(3)
    with pytest.raises(ValueError, match="power of 2"):
        eng.draw_base2(2)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        eng.draw(2, dtype=fiamma.float16)
    with pytest.raises(ValueError, match="non-negative"):
        eng.draw(-1)


def test_largest_dimension():
    eng = SobolEngine(21201)
    pts = eng.draw(4).numpy()
    assert pts.shape == (4, 21201)
    assert (pts[1] == 0.5).all()  # every dimension's first direction number is 1/2


@pytest.mark.parity
@pytest.mark.parametrize("dimension,scramble,seed", [
    (5, False, None), (7, True, 3), (300, True, 12345), (21201, False, None),
    (50, True, 2 ** 40 + 7),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_points_equal_pytorch(dimension, scramble, seed, dtype):
    torch = pytest.importorskip("torch")
    te = torch.quasirandom.SobolEngine(dimension, scramble=scramble, seed=seed)
    fe = SobolEngine(dimension, scramble=scramble, seed=seed)
    tdt, fdt = getattr(torch, dtype), getattr(fiamma, dtype)
    for n in [1, 5, 17, 64] if dimension < 1000 else [1, 40]:
        np.testing.assert_array_equal(fe.draw(n, dtype=fdt).numpy(),
                                      te.draw(n, dtype=tdt).numpy())
    te.fast_forward(13)
    fe.fast_forward(13)
    np.testing.assert_array_equal(fe.draw(9, dtype=fdt).numpy(), te.draw(9, dtype=tdt).numpy())
    te.reset()
    fe.reset()
    te.fast_forward(5)
    fe.fast_forward(5)
    np.testing.assert_array_equal(fe.draw(3, dtype=fdt).numpy(), te.draw(3, dtype=tdt).numpy())
    np.testing.assert_array_equal(fe.sobolstate.numpy(), te.sobolstate.numpy())
    np.testing.assert_array_equal(fe.quasi.numpy(), te.quasi.numpy())
    assert fe.num_generated == te.num_generated


def test_docstring_examples():
    import doctest

    import fiamma.quasirandom

    res = doctest.testmod(fiamma.quasirandom)
    assert res.attempted > 0 and res.failed == 0
