"""Negative-step slicing (NumPy's semantics, as copies) and the empty ranges of
arange_or_empty, against NumPy."""

import itertools

import numpy as np
import pytest

import fiamma
from fiamma._creation import arange_or_empty

A = np.arange(60).reshape(6, 10)

KEYS = [
    np.s_[::-1], np.s_[1:0:-1], np.s_[5:1:-2, ::-1], np.s_[::-3, 2], np.s_[-1::-2, 1:8:3],
    np.s_[0:0:-1], np.s_[..., ::-4], np.s_[None, ::-1, 3:0:-1], np.s_[:, 100:-100:-7],
    np.s_[2, ::-1], np.s_[-100:100:-1], np.s_[[0, 2], ::-2], np.s_[::-1, [1, 3]],
    np.s_[[0, 5], [1, 2], ...], np.s_[A[:, 0] > 20, ::-3],
]


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_getitem_matches_numpy(key):
    x = fiamma.tensor(A)
    r = x[key]
    assert tuple(r.shape) == A[key].shape
    np.testing.assert_array_equal(r.numpy(), A[key])


def test_exhaustive_1d_slices():
    a = np.arange(5)
    x = fiamma.tensor(a)
    vals = [None, -7, -5, -3, -1, 0, 1, 2, 4, 5, 7]
    for start, stop, step in itertools.product(vals, vals, [-3, -2, -1, 1, 2]):
        k = slice(start, stop, step)
        np.testing.assert_array_equal(x[k].numpy(), a[k], err_msg=str(k))


def test_result_is_a_copy_and_source_untouched():
    x = fiamma.arange(6.0)
    y = x[::-1]
    y[0] = 100.0
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert y.is_contiguous()


def test_zero_step_raises():
    with pytest.raises(ValueError, match="step"):
        fiamma.arange(4)[::0]


def test_non_contiguous_source():
    a = np.arange(120.0).reshape(4, 5, 6).transpose(2, 0, 1)[::2]
    x = fiamma.tensor(np.arange(120.0).reshape(4, 5, 6)).permute(2, 0, 1)[::2]
    for key in (np.s_[::-1, ::-2], np.s_[1, ::-1, 3:0:-1], np.s_[..., ::-1]):
        np.testing.assert_array_equal(x[key].numpy(), a[key])


SET_KEYS = [np.s_[::-1], np.s_[5:1:-2, ::-1], np.s_[::-1, [1, 3]], np.s_[[0, 2], ::-2],
            np.s_[1:0:-1, 2], np.s_[::-2, ...]]


@pytest.mark.parametrize("key", SET_KEYS, ids=str)
def test_setitem_matches_numpy(key):
    b = A.copy()
    x = fiamma.tensor(A)
    v = np.arange(b[key].size).reshape(b[key].shape) * 7
    b[key] = v
    x[key] = fiamma.tensor(v)
    np.testing.assert_array_equal(x.numpy(), b)
    b[key] = -3
    x[key] = -3
    np.testing.assert_array_equal(x.numpy(), b)


def test_setitem_broadcast_value():
    b = A.copy()
    x = fiamma.tensor(A)
    b[::-1, 4:0:-1] = np.array([1, 2, 3, 4])
    x[::-1, 4:0:-1] = fiamma.tensor([1, 2, 3, 4])
    np.testing.assert_array_equal(x.numpy(), b)


def test_index_put_accumulate_negative_slice():
    x = fiamma.zeros(5)
    x.index_put_((fiamma.tensor([4, 0]),), fiamma.tensor([1.0, 2.0]), accumulate=True)
    x[::-1] += fiamma.arange(5.0)
    np.testing.assert_array_equal(x.numpy(), np.array([2.0, 0, 0, 0, 1]) + np.arange(5.0)[::-1])


def test_autograd_through_negative_step():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.arange(6.0).reshape(2, 3).requires_grad_()
    y = x[::-1, 2:0:-1]
    assert y.tolist() == [[5.0, 4.0], [2.0, 1.0]]
    (y * fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [[0.0, 4.0, 3.0], [0.0, 2.0, 1.0]]


@pytest.mark.parametrize("args", [(0, -1), (5, 0), (5, 0, 2), (0, 5, -1), (0.0, -1.5),
                                  (3, 3), (5, 0, -2), (1, 10, 3), (2.5, -1.0, -0.5)])
def test_arange_or_empty(args):
    r = arange_or_empty(*args)
    ref = np.arange(*args)
    assert r.shape == ref.shape
    np.testing.assert_allclose(r.numpy(), ref)
    assert r.dtype == (fiamma.float32 if ref.dtype.kind == "f" else fiamma.int64)


def test_arange_keeps_pytorch_error():
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        fiamma.arange(0, -1)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        fiamma.arange(5.0, 0.0)
    assert arange_or_empty(0, -1, 1, fiamma.float64).dtype is fiamma.float64


@pytest.mark.parity
def test_parity_torch_raises_where_numpy_is_empty():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.arange(0, -1)
    with pytest.raises(ValueError):
        torch.arange(4)[::-1]
