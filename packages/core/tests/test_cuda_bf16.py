"""bfloat16 on the cuda device: the one-pass conversion kernels (CupyBackend.bf16_to_f32 /
f32_to_bf16) round and widen exactly as the CPU does (round to nearest even, NaN to the quiet
NaN with its sign, overflow to inf), through casts and through arithmetic. Needs a GPU."""

import numpy as np
import pytest

import fiamma

pytestmark = pytest.mark.skipif(not fiamma.cuda.is_available(),
                                reason="needs CUDA (CuPy and a GPU)")

SPECIAL = np.array([0.0, -0.0, 1.0, 1.00390625, 1.01171875, 1.0078125, np.inf, -np.inf, np.nan,
                    -np.nan, 3.3961e38, 3.4e38, -3.4e38, 1e-40, -1e-40, 9.2e-41, -2.5, 65504.0,
                    1.0 / 3.0, -7.123456], np.float32)


def _bits(t):
    return t.cpu().view(fiamma.int16).numpy()


def test_casts_round_like_the_cpu():
    rng = np.random.default_rng(0)
    vals = np.concatenate([SPECIAL, rng.standard_normal(100_000).astype(np.float32) * 1e3,
                           rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
                           .view(np.float32)])
    x = fiamma.from_numpy(vals)
    ref = x.to(fiamma.bfloat16)
    got = x.to("cuda").to(fiamma.bfloat16)
    assert np.array_equal(_bits(got), _bits(ref))
    back = got.to(fiamma.float32).cpu().numpy()
    want = ref.to(fiamma.float32).numpy()
    assert np.array_equal(back.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("op", ["add", "mul", "relu", "where", "exp"])
def test_arithmetic_matches_the_cpu_bit_for_bit(op):
    rng = np.random.default_rng(1)
    a = fiamma.from_numpy(rng.standard_normal((64, 257)).astype(np.float32)).to(fiamma.bfloat16)
    b = fiamma.from_numpy(rng.standard_normal((257,)).astype(np.float32)).to(fiamma.bfloat16)
    f = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b * 0.37,
         "relu": lambda a, b: fiamma.relu(a),
         "where": lambda a, b: fiamma.where(a > 0, a, 0.0),
         "exp": lambda a, b: a.exp()}[op]
    ref = f(a, b)
    got = f(a.to("cuda"), b.to("cuda"))
    assert got.dtype == fiamma.bfloat16
    g, r = got.cpu().to(fiamma.float32).numpy(), ref.to(fiamma.float32).numpy()
    if op == "exp":  # the device's expf may differ from the CPU's by an ulp before rounding
        np.testing.assert_allclose(g, r, rtol=8e-3)
    else:
        assert np.array_equal(g, r)
