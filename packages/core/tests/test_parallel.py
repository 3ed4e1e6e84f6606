"""fiamma.set_num_threads / get_num_threads: the setting sticks, results do not depend on it."""

import numpy as np
import pytest

import fiamma


@pytest.fixture
def restore_threads():
    n = fiamma.get_num_threads()
    yield
    fiamma.set_num_threads(n)


def test_get_default_is_positive():
    assert fiamma.get_num_threads() >= 1


@pytest.mark.parametrize("n", [1, 2, 3])
def test_set_get(restore_threads, n):
    fiamma.set_num_threads(n)
    assert fiamma.get_num_threads() == n


def test_results_do_not_depend_on_threads(restore_threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 310)).astype(np.float32)
    x = rng.standard_normal(200_000).astype(np.float32)
    outs = []
    for n in (1, 2):
        fiamma.set_num_threads(n)
        mm = fiamma.from_numpy(a) @ fiamma.from_numpy(b)
        srt = fiamma.sort(fiamma.from_numpy(x))
        outs.append((mm.numpy().copy(), srt.values.numpy().copy(), srt.indices.numpy().copy()))
    np.testing.assert_allclose(outs[0][0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[0][1], np.sort(x))
    np.testing.assert_array_equal(outs[0][2], outs[1][2])


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError),
                                     (True, TypeError), ("2", TypeError)])
def test_bad_values(restore_threads, bad, exc):
    with pytest.raises(exc, match="set_num_threads"):
        fiamma.set_num_threads(bad)
