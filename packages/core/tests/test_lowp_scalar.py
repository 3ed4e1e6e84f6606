"""A bfloat16/float16 tensor with a Python float, on the CPU, follows PyTorch's rule: ``x * s``
and ``x / s`` compute in float32 with ``s`` as a float32 and round once; ``x + s`` and ``x - s``
round ``s`` to the tensor's dtype first (PyTorch's alpha path). Checked against NumPy
float32 arithmetic and explicit rounding, contiguous and strided, in place and not."""

import numpy as np
import pytest
from conftest import c_kernels_only

import fiamma

# the CPU (C kernel) rule; the array-module backend keeps + and - numbers in float32 and
# computes float16 in float16 (a documented difference, docs/porting.md)
pytestmark = c_kernels_only


def _round(f32, dt):
    f32 = np.ascontiguousarray(f32, np.float32)
    if dt is fiamma.float16:
        return f32.astype(np.float16).astype(np.float32)
    u = f32.view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(f32), np.float32(np.nan), r)


@pytest.mark.parametrize("dt", [fiamma.bfloat16, fiamma.float16])
@pytest.mark.parametrize("s", [0.37, -1.3e-3, 7.1])
def test_number_operand_rounding(dt, s):
    rng = np.random.default_rng(0)
    x = fiamma.from_numpy(rng.standard_normal((40, 33)).astype(np.float32)).to(dt)
    xf = x.to(fiamma.float32).numpy()
    sf = np.float32(s)
    s_low = _round(np.array([s], np.float32), dt)[0]
    cases = {
        "mul": (lambda t: t * s, xf * sf),
        "rmul": (lambda t: s * t, sf * xf),
        "div": (lambda t: t / s, xf / sf),
        "imul": (lambda t: t.clone().mul_(s), xf * sf),
        "idiv": (lambda t: t.clone().div_(s), xf / sf),
        "add": (lambda t: t + s, xf + s_low),
        "sub": (lambda t: t - s, xf - s_low),
    }
    for name, (f, ref) in cases.items():
        got = f(x).to(fiamma.float32).numpy()
        assert np.array_equal(got, _round(ref, dt)), name
    # strided operands take the same rule
    got = (x.t()[::2] * s).to(fiamma.float32).numpy()
    assert np.array_equal(got, _round(xf.T[::2] * sf, dt))


@pytest.mark.parity
@pytest.mark.parametrize("dt", [fiamma.bfloat16, fiamma.float16])
def test_number_operand_parity_with_torch(dt):
    torch = pytest.importorskip("torch")
    tdt = {fiamma.bfloat16: torch.bfloat16, fiamma.float16: torch.float16}[dt]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 17)).astype(np.float32)
    x, t = fiamma.from_numpy(a).to(dt), torch.from_numpy(a).to(tdt)
    for f in (lambda v: v * 0.37, lambda v: v / 0.37, lambda v: v + 0.37, lambda v: v - 0.37,
              lambda v: 0.37 * v):
        assert np.array_equal(f(x).to(fiamma.float32).numpy(), f(t).float().numpy())
