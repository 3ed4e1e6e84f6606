"""The glue in csrc/cffi_glue.h: fiamma's own int conversion in the cffi wrappers, no errno
round trip, and the GIL kept only by the short calls."""

import threading
import time

import numpy as np
import pytest

import fiamma
from fiamma._lib import ffi, lib

ADD = lib.FM_BIN_ADD
F32 = fiamma.float32.code


@pytest.mark.parametrize("value, error", [
    (0, None), (-1, None), (2 ** 31 - 1, None), (-2 ** 31, None), (np.int32(3), None),
    (np.int64(-7), None), (True, None),
    (2 ** 31, OverflowError), (-2 ** 31 - 1, OverflowError), (2 ** 70, OverflowError),
    (1.5, TypeError), ("x", TypeError), (None, TypeError),
])
def test_int32_arguments(value, error):
    # fm_unary_out_dtype(int op, int dtype) takes two int32 and touches no memory
    if error is None:
        lib.fm_unary_out_dtype(value, F32)
        lib.fm_unary_out_dtype(0, value)
    else:
        for args in ((value, F32), (0, value)):
            with pytest.raises(error):
                lib.fm_unary_out_dtype(*args)


@pytest.mark.parametrize("value, error", [
    (0, None), (-5, None), (2 ** 63 - 1, None), (-2 ** 63, None), (123456789012345, None),
    (np.int64(2 ** 40), None), (np.uint64(2 ** 40), None), (False, None),
    (2 ** 63, OverflowError), (-2 ** 63 - 1, OverflowError), (2 ** 100, OverflowError),
    (2.0, TypeError), (np.float64(1.0), TypeError), (b"1", TypeError),
])
def test_int64_and_address_arguments(value, error):
    # fm_binary_contig(op, dtype, int64 n, intptr out, a, b) with n < 0 returns FM_ERR_ARG
    # before it reads an address, so any address value is safe here
    for pos in (3, 4, 5):
        args = [ADD, F32, -1, 0, 0, 0]
        args[pos] = value
        if error is None:
            assert lib.fm_binary_contig(*args) != 0
        else:
            with pytest.raises(error):
                lib.fm_binary_contig(*args)
    if error is not None:  # n itself
        with pytest.raises(error):
            lib.fm_binary_contig(ADD, F32, value, 0, 0, 0)
    elif value < 0:
        assert lib.fm_binary_contig(ADD, F32, value, 0, 0, 0) == lib.FM_ERR_ARG


def test_small_alias_is_the_same_kernel():
    x = fiamma.from_numpy(np.arange(7, dtype=np.float32))
    out = fiamma.empty(7)
    assert lib.fm_binary_contig_small(ADD, F32, 7, out._ptr, x._ptr, x._ptr) == 0
    np.testing.assert_array_equal(out.numpy(), 2 * np.arange(7, dtype=np.float32))


def test_number_operand_is_address_zero():
    # fm_binary / fm_binary_scalar_contig read a number (sf for floats, si for integers) in
    # place of the operand whose address is 0, on either side; both addresses 0 (or neither,
    # for the contiguous number entry) is an error
    x = fiamma.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = fiamma.empty(2, 3)
    SUB = lib.FM_BIN_SUB
    assert lib.fm_binary_scalar_contig(SUB, F32, 6, out._ptr, 0, x._ptr, 10.0, 0) == 0
    np.testing.assert_array_equal(out.numpy(), 10 - x.numpy())
    t = x.t()
    assert lib.fm_binary(SUB, F32, 2, (3, 2), out._ptr, (2, 1), t._ptr, t._stride, 0, ffi.NULL,
                         0.5, 0, 0.0, 0.0, 0.0) == 0
    np.testing.assert_array_equal(out.numpy().reshape(3, 2), x.numpy().T - 0.5)
    i = fiamma.arange(4)
    io = fiamma.empty(4, dtype=fiamma.int64)
    assert lib.fm_binary(SUB, fiamma.int64.code, 1, (4,), io._ptr, (1,), 0, ffi.NULL, i._ptr,
                         (1,), 0.0, 2 ** 40, 0.0, 0.0, 0.0) == 0
    assert io.tolist() == [2 ** 40 - k for k in range(4)]
    assert lib.fm_binary_scalar_contig(SUB, F32, 6, out._ptr, 0, 0, 1.0, 0) == lib.FM_ERR_ARG
    assert lib.fm_binary_scalar_contig(SUB, F32, 6, out._ptr, x._ptr, x._ptr, 1.0, 0) == \
        lib.FM_ERR_ARG
    assert lib.fm_binary(SUB, F32, 1, (6,), out._ptr, (1,), 0, ffi.NULL, 0, ffi.NULL, 1.0, 0, 0.0,
                         0.0, 0.0) == lib.FM_ERR_ARG


def _seconds(a, b):
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return best


def test_long_kernels_release_the_gil():
    # a product that takes well over the interpreter's switch interval runs in a thread; the
    # main thread must keep running Python meanwhile (if the call held the GIL, the main
    # thread's longest pause would be the whole product)
    n = 1500
    a = fiamma.rand(n, n)
    b = fiamma.rand(n, n)
    old = fiamma.get_num_threads()
    fiamma.set_num_threads(1)
    try:
        single = _seconds(a, b)
        while single < 0.08:  # make the call long enough to tell the two cases apart
            n = int(n * 1.4)
            a, b = fiamma.rand(n, n), fiamma.rand(n, n)
            single = _seconds(a, b)
        done = threading.Event()
        th = threading.Thread(target=lambda: (a @ b, done.set()))
        gap = 0.0
        last = time.perf_counter()
        th.start()  # returns once the thread runs: it can wait out the whole call too
        while not done.is_set():
            now = time.perf_counter()
            gap = max(gap, now - last)
            last = now
        gap = max(gap, time.perf_counter() - last)  # a pause that ended with the call
        th.join()
    finally:
        fiamma.set_num_threads(old)
    # released: pauses of a few ms (the switch interval); held: about the whole call
    assert gap < 0.3 * single, (gap, single)
