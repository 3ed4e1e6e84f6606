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
    # NaN payloads aside (a NaN stays a NaN; which quiet NaN is not specified), every bit equal
    nan = np.isnan(vals)
    gb, rb = _bits(got), _bits(ref)
    assert np.array_equal(gb[~nan], rb[~nan])
    back = got.to(fiamma.float32).cpu().numpy()
    assert np.isnan(back[nan]).all()
    want = ref.to(fiamma.float32).numpy()
    assert np.array_equal(back[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _bf16_round(f):
    """Round-to-nearest-even float32 -> bfloat16, as float32 (finite inputs)."""
    u = np.ascontiguousarray(f, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def test_number_operand_kept_in_float32_as_pytorch():
    """bfloat16 * 0.37 computes in float32 with 0.37 as a float32, then rounds (PyTorch's
    rule, which the CPU follows too: test_lowp_scalar.py)."""
    rng = np.random.default_rng(2)
    a = fiamma.from_numpy(rng.standard_normal(10_000).astype(np.float32)).to(fiamma.bfloat16)
    af = a.to(fiamma.float32).numpy()
    got = (a.to("cuda") * 0.37).cpu().to(fiamma.float32).numpy()
    assert np.array_equal(got, _bf16_round(af * np.float32(0.37)))


@pytest.mark.parametrize("op", ["add", "mul", "relu", "where", "exp"])
def test_arithmetic_matches_the_cpu_bit_for_bit(op):
    rng = np.random.default_rng(1)
    a = fiamma.from_numpy(rng.standard_normal((64, 257)).astype(np.float32)).to(fiamma.bfloat16)
    b = fiamma.from_numpy(rng.standard_normal((257,)).astype(np.float32)).to(fiamma.bfloat16)
    f = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b * 0.5,
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
