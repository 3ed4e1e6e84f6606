"""Helpers shared by core's tests: dtype lists, shape strategies, tensors with awkward layouts
and their NumPy twins, a dtype-aware assert_close and a stand-in autograd recorder
(CallRecorder).

    from conftest import ALL_DTYPES, shapes, make_pair, assert_close
"""

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings, strategies as st

import fiamma

# Hypothesis runs deterministically (CI must not flake): each test's examples come from a seed
# derived from the test itself, with no example database, deadline or timing health check (the
# machine's load must not decide a result). `pytest --hypothesis-profile=explore` draws fresh
# random examples instead, to look for new failures locally.
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("deterministic")

# ---- dtypes --------------------------------------------------------------------------------------

ALL_DTYPES = [fiamma.bool, fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64,
              fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]
INT_DTYPES = [fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64]
FLOAT_DTYPES = [fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]
# dtypes NumPy has (all but bfloat16)
NUMPY_DTYPES = [d for d in ALL_DTYPES if d is not fiamma.bfloat16]

# the NumPy dtype a fiamma dtype is compared in (bfloat16 via float32)
NP_DTYPE = {d: np.dtype(d.name) for d in NUMPY_DTYPES}
NP_DTYPE[fiamma.bfloat16] = np.dtype(np.float32)


def dtype_id(d):
    return d.name


# ---- shapes --------------------------------------------------------------------------------------

def shapes(min_dims=0, max_dims=4, min_side=0, max_side=5):
    """Hypothesis strategy for shapes, including 0-d (``()``) and empty (a 0 side)."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims,
                    max_size=max_dims).map(tuple)


def nonempty_shapes(min_dims=0, max_dims=4, max_side=5):
    return shapes(min_dims, max_dims, 1, max_side)


# ---- values --------------------------------------------------------------------------------------

def round_bf16(a):
    """float32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    a = np.asarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, r)


def random_array(shape, dtype, rng, low=None, high=None):
    """Random NumPy values for a fiamma ``dtype`` (bfloat16: float32 values exact in bf16)."""
    shape = tuple(shape)
    if dtype is fiamma.bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.is_floating_point:
        lo = -10.0 if low is None else low
        hi = 10.0 if high is None else high
        a = rng.uniform(lo, hi, size=shape)
        if dtype is fiamma.bfloat16:
            return round_bf16(a)
        return a.astype(NP_DTYPE[dtype])
    info = np.iinfo(NP_DTYPE[dtype])
    lo = max(info.min, -100) if low is None else low
    hi = min(info.max, 100) if high is None else high
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(NP_DTYPE[dtype])


def to_tensor(a, dtype):
    """A contiguous fiamma tensor of ``dtype`` holding NumPy values ``a`` (any shape, 0-d too)."""
    a = np.array(a, order="C")
    if dtype is fiamma.bfloat16:
        return fiamma.from_numpy(a.astype(np.float32)).to(fiamma.bfloat16)
    return fiamma.from_numpy(a.astype(NP_DTYPE[dtype], copy=True))


LAYOUTS = ["contiguous", "transposed", "strided", "offset"]


def make_pair(shape, dtype, rng, layout="strided", **value_kw):
    """``(tensor, array)``: a fiamma tensor of ``dtype`` and ``shape`` laid out as ``layout``
    with the same values as the contiguous NumPy ``array`` (float32 for bfloat16).

    layouts: "contiguous"; "transposed" (dims reversed in memory); "strided" (every other
    element of a larger buffer in each dim); "offset" (a view that starts inside its storage).
    """
    shape = tuple(shape)
    a = random_array(shape, dtype, rng, **value_kw)
    if layout == "contiguous":
        return to_tensor(a, dtype), a
    if layout == "transposed":
        nd = len(shape)
        base = to_tensor(np.transpose(a).copy(), dtype)
        return base.permute(tuple(range(nd - 1, -1, -1))), a
    if layout == "strided":
        big = np.zeros(tuple(2 * s for s in shape), dtype=a.dtype)
        big[tuple(slice(None, None, 2) for _ in shape)] = a
        base = to_tensor(big, dtype)
        stride = tuple(2 * s for s in base.stride())
        t = base.as_strided(shape, stride, 0)
        return t, a
    if layout == "offset":
        flat = np.concatenate([np.zeros(3, a.dtype), a.reshape(-1)])
        base = to_tensor(flat, dtype)
        return base.as_strided(shape, fiamma_contiguous_strides(shape), 3), a
    raise ValueError(layout)


def fiamma_contiguous_strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


# ---- comparison ----------------------------------------------------------------------------------

TOLERANCES = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}


def to_numpy(t):
    """A NumPy copy of a fiamma tensor's values (bfloat16 as float32)."""
    if t.dtype is fiamma.bfloat16:
        t = t.float()
    return np.array(t.detach().numpy(), copy=True)


def assert_close(actual, expected, dtype=None, rtol=None, atol=None, check_dtype=True):
    """Assert a fiamma tensor matches ``expected`` (array, tensor or number) in shape, dtype
    (``dtype``, or ``actual``'s own when comparing with NumPy of the same kind) and values,
    with tolerances by dtype (bf16/f16 loose, integers and bool exact); NaNs compare equal."""
    assert isinstance(actual, fiamma.Tensor), f"expected a fiamma.Tensor, got {type(actual)}"
    if dtype is not None and check_dtype:
        assert actual.dtype is dtype, f"dtype {actual.dtype} != expected {dtype}"
    if isinstance(expected, fiamma.Tensor):
        expected = to_numpy(expected)
    expected = np.asarray(expected)
    got = to_numpy(actual)
    assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}"
    name = actual.dtype.name
    if name in TOLERANCES:
        r, a = TOLERANCES[name]
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=r, atol=a, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- a recorder that lists what core records --------------------------------------------------

class CallRecorder:
    """A stand-in autograd recorder: ``calls`` lists ``(op, inputs, kwargs)`` for each
    ``record`` / ``record_inplace`` core makes. ``with CallRecorder.installed() as rec:``
    registers one for the block, then puts the previous recorder back."""

    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        self.calls.append((op, inputs, kwargs))

    def record_inplace(self, op, out, inputs, kwargs):
        self.calls.append((op, inputs, kwargs))

    def requires_grad_(self, t, flag):
        t.requires_grad = bool(flag)

    @classmethod
    @contextlib.contextmanager
    def installed(cls):
        from fiamma import _grad_hook as G

        prev = G._recorder
        rec = cls()
        G.register_autograd(rec)
        try:
            yield rec
        finally:
            G._recorder = prev


# ---- the differential run --------------------------------------------------------------------
# FIAMMA_CPU_BACKEND=xp runs the CPU device on the array-module backend over NumPy (the whole
# suite checks that backend). Tests of the C kernels' own properties (ulp accuracy of the
# vectorised math, the operator fast path's result layout) skip there.
XP_HOST = __import__("os").environ.get("FIAMMA_CPU_BACKEND", "") == "xp"
c_kernels_only = pytest.mark.skipif(XP_HOST, reason="tests a property of the C kernels "
                                    "(FIAMMA_CPU_BACKEND=xp runs the NumPy backend)")


# ---- devices ---------------------------------------------------------------------------------
# Tests that take the ``device`` fixture run once per device besides the CPU: ``xp`` (the NumPy
# reference device of the array-module backend, always) and ``cuda`` (CuPy on a GPU; marked
# ``gpu`` and skipped without one). FIAMMA_TEST_DEVICES=cuda (comma-separated) picks devices.

def _device_params():
    params = []
    for name, reason in fiamma.testing.devices_to_test():
        marks = [] if name != "cuda" else [
            pytest.mark.gpu, pytest.mark.skipif(reason is not None, reason=str(reason))]
        params.append(pytest.param(name, id=name, marks=marks))
    return params


_cuda_reason = fiamma.testing.cuda_skip_reason
DEVICES = _device_params()


@pytest.fixture(params=DEVICES)
def device(request):
    """A device other than the CPU to run a test on (see DEVICES)."""
    return request.param


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    """A tensor computed on another device equals the CPU's result: dtype, shape, values."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g = got.cpu().float().numpy() if got.dtype == fiamma.bfloat16 else got.cpu().numpy()
    w = want.float().numpy() if want.dtype == fiamma.bfloat16 else want.numpy()
    if w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
