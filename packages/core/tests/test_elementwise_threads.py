"""Contiguous elementwise ops over 2^17 elements or more run on several threads (csrc/
elementwise.c's ew_split): the results equal NumPy's element for element whatever the thread
count, scalar operands and bool results included; an error found by any thread is reported;
a forked child stays on one thread (and does not hang)."""

import multiprocessing as mp
import os

import numpy as np
import pytest

import fiamma

N = (1 << 18) + 77  # above the threshold, not a multiple of the 64-element range unit


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    old = fiamma.get_num_threads()
    fiamma.set_num_threads(request.param)
    yield request.param
    fiamma.set_num_threads(old)


def test_binary_and_unary_equal_numpy(threads):
    rng = np.random.default_rng(threads)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    fa, fb = fiamma.from_numpy(a), fiamma.from_numpy(b)
    np.testing.assert_array_equal((fa + fb).numpy(), a + b)
    np.testing.assert_array_equal((fa * 2.5).numpy(), a * np.float32(2.5))
    np.testing.assert_array_equal((3.0 - fa).numpy(), np.float32(3.0) - a)
    np.testing.assert_array_equal((fa < fb).numpy(), a < b)  # bool result: other strides
    np.testing.assert_array_equal(fiamma.neg(fa).numpy(), -a)
    np.testing.assert_array_equal(fiamma.abs(fa).numpy(), np.abs(a))
    np.testing.assert_array_equal(fiamma.isnan(fa / fb * 0.0).numpy(), np.isnan(a / b * 0))
    i = fiamma.arange(N, dtype=fiamma.int64)
    np.testing.assert_array_equal((i * 3 + 1).numpy(), np.arange(N) * 3 + 1)
    out = fiamma.empty(N)
    fiamma.add(fa, fb, out=out)
    np.testing.assert_array_equal(out.numpy(), a + b)
    want = a + b
    fa.add_(fb)  # in place (fa shares a's memory)
    np.testing.assert_array_equal(fa.numpy(), want)


def test_error_in_the_last_range_is_reported(threads):
    x = fiamma.ones(N, dtype=fiamma.int64)
    y = fiamma.ones(N, dtype=fiamma.int64)
    y[N - 1] = 0  # found by the last thread's range only
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        fiamma.floor_divide(x, y)


def _child(q):
    fiamma.set_num_threads(2)
    a = fiamma.ones(N)
    q.put(float((a + a).sum()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_large_ops():
    fiamma.set_num_threads(2)
    a = fiamma.ones(N)
    (a + a).sum()  # the parent's thread pool exists before the fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == 2.0 * N
