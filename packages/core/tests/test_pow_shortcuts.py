"""pow with the exponents PyTorch computes by products (1, 2, 3, -2, -0.5, 0.5, -1): the values
of those products (x * x * x, 1 / (x * x), 1 / sqrt(x)), float16/bfloat16 computed in float32
and rounded once, integers exact, the result a new tensor."""

import numpy as np
import pytest

import fiamma


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("e", [1, 2, 3, -2, -0.5])
def test_float_values(dtype, e):
    x = np.random.default_rng(0).standard_normal(999).astype(dtype) * 3
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
    got = fiamma.from_numpy(x).pow(e).numpy()
    with np.errstate(all="ignore"):
        want = {1: x, 2: x * x, 3: x * x * x, -2: 1 / (x * x), -0.5: 1 / np.sqrt(x)}[e]
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want.astype(dtype))


@pytest.mark.parametrize("e", [3, -2, -0.5])
def test_float16_rounds_once(e):
    x = np.linspace(-20, 20, 401).astype(np.float16)
    got = fiamma.from_numpy(x).pow(e).numpy()
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = {3: x32 * x32 * x32, -2: 1 / (x32 * x32), -0.5: 1 / np.sqrt(x32)}[e]
    np.testing.assert_array_equal(got, want.astype(np.float16))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
def test_integer_cube_wraps_like_repeated_products(dtype):
    x = np.arange(-60, 60).astype(dtype)
    got = fiamma.from_numpy(x).pow(3).numpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x * x * x)
    one = fiamma.from_numpy(x).pow(1)
    np.testing.assert_array_equal(one.numpy(), x)


def test_result_is_a_new_tensor_and_scalars_promote():
    x = fiamma.tensor([1.0, 2.0])
    y = x.pow(1)
    y.add_(1)
    assert x.tolist() == [1.0, 2.0]
    assert fiamma.tensor([1, 2]).pow(-0.5).dtype == fiamma.float32  # int ** float -> float
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        fiamma.tensor([1, 2]).pow(-2)
    assert fiamma.tensor([2.0]).pow(3.0).tolist() == [8.0]
