"""Range creation functions (arange, range, linspace, logspace, eye) against NumPy."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma

INTS = [fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64]
FLOATS = [fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]
NP = {fiamma.uint8: np.uint8, fiamma.int8: np.int8, fiamma.int16: np.int16,
      fiamma.int32: np.int32, fiamma.int64: np.int64, fiamma.float16: np.float16,
      fiamma.float32: np.float32, fiamma.float64: np.float64}
EPS = {fiamma.float16: 2.0**-10, fiamma.bfloat16: 2.0**-7, fiamma.float32: 2.0**-23,
       fiamma.float64: 2.0**-52}


def npy(t):
    if t.dtype is fiamma.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def as_dtype(values_f64, dt):
    """float64 values rounded to dt the way fiamma stores them (bfloat16 via fiamma's cast)."""
    if dt is fiamma.bfloat16:
        return npy(fiamma.tensor(np.asarray(values_f64, np.float64)).to(fiamma.bfloat16))
    return np.asarray(values_f64, np.float64).astype(NP[dt])


def close(got, want, dt, scale):
    """Within two units in the last place of the dtype at the size of the largest value."""
    tol = 2 * EPS[dt] * max(scale, 1e-30)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=0, atol=tol)


# ---- arange -----------------------------------------------------------------------------------

def test_arange_defaults():
    x = fiamma.arange(5)
    assert x.dtype is fiamma.int64 and x.tolist() == [0, 1, 2, 3, 4]
    assert fiamma.arange(2, 8, 3).tolist() == [2, 5]
    assert fiamma.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert fiamma.arange(1, 2.5, 0.5).tolist() == [1.0, 1.5, 2.0]
    assert fiamma.arange(3.0).dtype is fiamma.float32
    assert fiamma.arange(0, 3, 1.0).dtype is fiamma.float32
    assert fiamma.arange(True).tolist() == [0]
    assert fiamma.arange(np.int32(3)).tolist() == [0, 1, 2]
    assert fiamma.arange(fiamma.full((), 3)).tolist() == [0, 1, 2]
    assert fiamma.arange(fiamma.full((), 1.5)).tolist() == [0.0, 1.0]
    assert fiamma.arange(end=4, start=1).tolist() == [1, 2, 3]
    fiamma.set_default_dtype(fiamma.float64)
    try:
        assert fiamma.arange(0.5).dtype is fiamma.float64
    finally:
        fiamma.set_default_dtype(fiamma.float32)


def test_arange_edge_cases():
    assert fiamma.arange(0).shape == (0,)
    assert fiamma.arange(3, 3).shape == (0,)
    assert fiamma.arange(3, 3, -1).shape == (0,)
    assert fiamma.arange(0.0, 0.0, 0.1).shape == (0,)
    # float steps: size is ceil((end - start) / step) in double, as NumPy
    for a, b, s in [(0, 1, 0.1), (0, 0.3, 0.1), (1, 1.3, 0.1), (-1, 1, 0.2), (0, 10, 0.7),
                    (5, -5, -0.3), (0.1, 0.9, 0.2)]:
        x = fiamma.arange(a, b, s, dtype=fiamma.float64)
        assert x.shape[0] == np.arange(a, b, s).shape[0]
        close(npy(x), a + s * np.arange(x.shape[0]), fiamma.float64, max(abs(a), abs(b)))
    # an integer dtype truncates the arguments first (as PyTorch does)
    assert fiamma.arange(0.9, 3, 1, dtype=fiamma.int64).tolist() == [0, 1, 2]
    assert fiamma.arange(0, 3, 1.9, dtype=fiamma.int32).tolist() == [0, 1, 2]
    # narrow integer dtypes wrap like a cast
    assert fiamma.arange(-5, 0, dtype=fiamma.uint8).tolist() == [251, 252, 253, 254, 255]
    # near the ends of int64
    big = 2**63 - 1
    assert fiamma.arange(big - 2, big).tolist() == [big - 2, big - 1]
    assert fiamma.arange(-2**63, -2**63 + 2).tolist() == [-2**63, -2**63 + 1]
    assert fiamma.arange(0, big, 2**62).tolist() == [0, 2**62]


@pytest.mark.parametrize("dt", INTS)
@settings(max_examples=30, deadline=None)
@given(start=st.integers(-300, 300), length=st.integers(0, 200), step=st.integers(-7, 7)
       .filter(bool))
def test_arange_int_vs_numpy(dt, start, length, step):
    end = start + length * step - (1 if step > 0 else -1) * (length % 3)
    want = np.arange(start, end, step, dtype=np.int64).astype(NP[dt])
    got = fiamma.arange(start, end, step, dtype=dt)
    assert got.dtype is dt
    np.testing.assert_array_equal(npy(got), want)


@pytest.mark.parametrize("dt", FLOATS)
@settings(max_examples=30, deadline=None)
@given(start=st.floats(-1000, 1000), span=st.floats(0, 500, allow_subnormal=False),
       step=st.floats(0.01, 50), neg=st.booleans())
def test_arange_float_vs_numpy(dt, start, span, step, neg):
    # (a subnormal span whose quotient underflows to 0 gives NumPy 1 element, PyTorch's
    # ceil((end - start) / step) 0; fiamma follows PyTorch)
    if neg:
        span, step = -span, -step
    end = start + span
    want64 = np.arange(start, end, step, dtype=np.float64)
    got = fiamma.arange(start, end, step, dtype=dt)
    assert got.shape == want64.shape
    want = start + step * np.arange(want64.size)  # what fiamma computes: once, in double
    np.testing.assert_allclose(npy(fiamma.arange(start, end, step, dtype=fiamma.float64)), want,
                               rtol=0, atol=4 * EPS[fiamma.float64] * (abs(start) + abs(span)))
    close(npy(got), as_dtype(want, dt), dt, abs(start) + abs(span))


def test_arange_errors_name_the_op():
    with pytest.raises(RuntimeError, match="arange.*step must be nonzero"):
        fiamma.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="arange.*step must be nonzero"):
        fiamma.arange(0, 5, 0.5, dtype=fiamma.int64)  # step truncates to 0
    with pytest.raises(RuntimeError, match="arange.*inconsistent with step sign"):
        fiamma.arange(5, 0)
    with pytest.raises(RuntimeError, match="arange.*inconsistent with step sign"):
        fiamma.arange(0, 5, -1.0)
    with pytest.raises(RuntimeError, match="arange.*unsupported range"):
        fiamma.arange(0, math.inf)
    with pytest.raises(RuntimeError, match="arange.*unsupported range"):
        fiamma.arange(math.nan)
    with pytest.raises(RuntimeError, match="arange.*size"):
        fiamma.arange(0, 1e300, 1e-300)
    with pytest.raises(TypeError, match="arange.*bool"):
        fiamma.arange(3, dtype=fiamma.bool)
    with pytest.raises(TypeError, match="arange.*end must be a number"):
        fiamma.arange("5")
    with pytest.raises(RuntimeError, match="arange.*one-element"):
        fiamma.arange(fiamma.zeros(2))
    with pytest.raises(RuntimeError, match="arange.*int64"):
        fiamma.arange(0, 2**64)


def test_arange_out_device_requires_grad():
    out = fiamma.empty(0, dtype=fiamma.int32)
    r = fiamma.arange(4, out=out)
    assert r is out and out.dtype is fiamma.int32 and out.tolist() == [0, 1, 2, 3]
    out = fiamma.zeros(4, dtype=fiamma.float64)
    fiamma.arange(1, 5, out=out)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    o = fiamma.zeros(5)
    with pytest.warns(UserWarning, match="arange: an output .* was resized"):
        fiamma.arange(3, out=o)
    assert o.tolist() == [0.0, 1.0, 2.0]
    assert fiamma.arange(3, device="cpu").device == fiamma.device("cpu")
    assert fiamma.arange(3.0, requires_grad=False).requires_grad is False
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        fiamma.arange(3, device="cuda")


def test_range_is_inclusive_and_deprecated():
    with pytest.warns(UserWarning, match="deprecated"):
        x = fiamma.range(0, 3)
    assert x.dtype is fiamma.float32 and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fiamma.range(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
        assert fiamma.range(3, 0, -1).tolist() == [3.0, 2.0, 1.0, 0.0]
        assert fiamma.range(0, 3, dtype=fiamma.int64).tolist() == [0, 1, 2, 3]
        assert fiamma.range(2, 2).tolist() == [2.0]
        with pytest.raises(RuntimeError, match="range.*inconsistent"):
            fiamma.range(3, 0)
        with pytest.raises(RuntimeError, match="range.*nonzero"):
            fiamma.range(0, 3, 0)


# ---- linspace / logspace ----------------------------------------------------------------------

def symmetric_ref(start, end, n):
    """PyTorch's formula in float64: start + i*step for the first half, end - (n-1-i)*step
    for the rest."""
    if n == 1:
        return np.array([start], np.float64)
    step = (end - start) / (n - 1)
    i = np.arange(n)
    return np.where(i < n // 2, start + step * i, end - step * (n - 1 - i))


def fma_ref(start, end, n, npdt):
    """PyTorch's float32/float64 CPU linspace, rounding included: the step in the output type,
    each value one fused multiply-add in it (emulated exactly with fractions)."""
    from fractions import Fraction

    s, e = npdt(start), npdt(end)
    if n == 1:
        return np.array([s], npdt)
    step = npdt(npdt(e - s) / npdt(n - 1))

    def fma(a, b, c):
        return npdt(float(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))))

    half = n // 2
    return np.array([fma(step, i, s) if i < half else fma(-step, n - 1 - i, e)
                     for i in range(n)], npdt)


@pytest.mark.parametrize("npdt", [np.float32, np.float64])
def test_linspace_rounds_as_pytorch(npdt):
    # bit for bit, as gpytorch's float32 interpolation grids need (a 1-ulp grid difference
    # moved its interpolated kernel values by 1e-7)
    dt = fiamma.float32 if npdt is np.float32 else fiamma.float64
    rng = np.random.default_rng(0)
    cases = [(-1 - 2 / 62, 1 + 2 / 62, 64), (0.0, 1.0, 100), (0.1, 0.7, 101), (3.0, -2.0, 1),
             (5.0, 5.0, 4)]
    cases += [(float(a), float(b), int(n)) for a, b, n in
              zip(rng.uniform(-1e3, 1e3, 20), rng.uniform(-1e3, 1e3, 20), rng.integers(2, 400, 20))]
    for a, b, n in cases:
        np.testing.assert_array_equal(npy(fiamma.linspace(a, b, n, dtype=dt)),
                                      fma_ref(a, b, n, npdt), err_msg=f"{(a, b, n)}")


@pytest.mark.parity
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_linspace_bitwise_parity(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for a, b, n in zip(rng.uniform(-50, 50, 30), rng.uniform(-1e4, 1e4, 30),
                       rng.integers(1, 5000, 30)):
        a, b, n = float(a), float(b), int(n)
        np.testing.assert_array_equal(
            npy(fiamma.linspace(a, b, n, dtype=getattr(fiamma, name))),
            torch.linspace(a, b, n, dtype=getattr(torch, name)).numpy(), err_msg=f"{(a, b, n)}")


def test_linspace_basics():
    x = fiamma.linspace(0, 1, 5)
    assert x.dtype is fiamma.float32 and x.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert fiamma.linspace(0, 1, 0).shape == (0,)
    assert fiamma.linspace(0, 1, 0).dtype is fiamma.float32
    assert fiamma.linspace(3, 7, 1).tolist() == [3.0]
    assert fiamma.linspace(3, 7, 2).tolist() == [3.0, 7.0]
    assert fiamma.linspace(5, -5, 3).tolist() == [5.0, 0.0, -5.0]
    assert fiamma.linspace(2, 2, 4).tolist() == [2.0] * 4
    assert fiamma.linspace(0, 3, 3, dtype=fiamma.int64).dtype is fiamma.int64
    # integer dtypes truncate (PyTorch): step 2.5
    assert fiamma.linspace(0, 10, 5, dtype=fiamma.int64).tolist() == [0, 2, 5, 7, 10]
    assert fiamma.linspace(0.7, 10, 5, dtype=fiamma.int64).tolist() == [0, 2, 5, 7, 10]
    assert fiamma.linspace(-1, 3, 3, dtype=fiamma.uint8).tolist() == [255, 129, 3]
    assert fiamma.linspace(fiamma.full((), 0.0), fiamma.full((), 1.0), 3).tolist() == \
        [0.0, 0.5, 1.0]
    # both ends exact, the middle of an odd count exact by symmetry
    x = npy(fiamma.linspace(0.1, 0.7, 101, dtype=fiamma.float64))
    assert x[0] == 0.1 and x[-1] == 0.7
    np.testing.assert_array_equal(x, fma_ref(0.1, 0.7, 101, np.float64))


@pytest.mark.parametrize("dt", FLOATS)
@settings(max_examples=30, deadline=None)
@given(start=st.floats(-1e4, 1e4), end=st.floats(-1e4, 1e4), n=st.integers(0, 300))
def test_linspace_vs_numpy(dt, start, end, n):
    got = fiamma.linspace(start, end, n, dtype=dt)
    assert got.dtype is dt and got.shape == (n,)
    if n == 0:
        return
    # NumPy's formula and PyTorch's symmetric one round differently: a few units in the last
    # place of the span |end - start|, which can be twice the larger endpoint
    scale = max(abs(start), abs(end), abs(end - start))
    close(npy(got), as_dtype(np.linspace(start, end, n), dt), dt, scale)
    close(npy(got), as_dtype(symmetric_ref(start, end, n), dt), dt, scale)
    assert npy(got)[0] == as_dtype([start], dt)[0]
    assert npy(got)[-1] == as_dtype([end if n > 1 else start], dt)[0]


@pytest.mark.parametrize("dt", INTS)
@settings(max_examples=20, deadline=None)
@given(start=st.integers(-100, 100), end=st.integers(-100, 100), n=st.integers(1, 60))
def test_linspace_int_matches_truncated_formula(dt, start, end, n):
    if dt is fiamma.uint8:
        start, end = abs(start), abs(end)
    got = fiamma.linspace(start, end, n, dtype=dt)
    want = np.trunc(symmetric_ref(float(start), float(end), n)).astype(np.int64).astype(NP[dt])
    np.testing.assert_array_equal(npy(got), want)


def test_linspace_errors():
    with pytest.raises(RuntimeError, match="linspace.*non-negative"):
        fiamma.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="linspace.*steps"):
        fiamma.linspace(0, 1, 2.5)
    with pytest.raises(TypeError, match="linspace.*bool"):
        fiamma.linspace(0, 1, 3, dtype=fiamma.bool)
    with pytest.raises(RuntimeError, match="linspace.*overflow"):
        fiamma.linspace(0, 300, 3, dtype=fiamma.uint8)
    with pytest.raises(RuntimeError, match="linspace.*overflow"):
        fiamma.linspace(0, math.inf, 3, dtype=fiamma.int32)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("start,end,n,base", [(0, 3, 4, 10.0), (-2, 2, 9, 2.0), (1, -1, 7, 3.0),
                                              (0, 1, 1, 10.0), (0.5, 2.5, 50, 1.5)])
def test_logspace_vs_numpy(dt, start, end, n, base):
    got = fiamma.logspace(start, end, n, base=base, dtype=dt)
    want = np.logspace(start, end, n, base=base)
    assert got.shape == (n,) and got.dtype is dt
    np.testing.assert_allclose(npy(got).astype(np.float64), as_dtype(want, dt), rtol=4 * EPS[dt])


def test_logspace_edge_cases():
    assert fiamma.logspace(0, 3, 4, base=2).tolist() == [1.0, 2.0, 4.0, 8.0]
    assert fiamma.logspace(0, 3, 4, base=2, dtype=fiamma.int64).tolist() == [1, 2, 4, 8]
    assert fiamma.logspace(0, 2, 3).dtype is fiamma.float32
    assert fiamma.logspace(0, 2, 3, base=-2).tolist() == [1.0, -2.0, 4.0]
    assert fiamma.logspace(0, 2, 0).shape == (0,)
    assert fiamma.logspace(2, 5, 1).tolist() == [100.0]
    with pytest.raises(RuntimeError, match="logspace.*non-negative"):
        fiamma.logspace(0, 1, -3)
    with pytest.raises(TypeError, match="logspace.*bool"):
        fiamma.logspace(0, 1, 3, dtype=fiamma.bool)


# ---- eye ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [fiamma.bool] + INTS + FLOATS)
def test_eye_vs_numpy(dt):
    for n, m in [(0, None), (1, None), (3, None), (2, 5), (5, 2), (3, 0), (0, 4)]:
        got = fiamma.eye(n, m, dtype=dt)
        assert got.dtype is dt
        assert got.shape == (n, n if m is None else m)
        np.testing.assert_array_equal(npy(got).astype(np.float64), np.eye(n, m))


def test_eye_defaults_out_and_errors():
    assert fiamma.eye(2).dtype is fiamma.float32
    assert fiamma.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    out = fiamma.full((3, 3), 7.0).t()
    fiamma.eye(3, out=out)
    np.testing.assert_array_equal(npy(out), np.eye(3))
    with pytest.raises(RuntimeError, match="eye.*n must be greater or equal to 0"):
        fiamma.eye(-1)
    with pytest.raises(RuntimeError, match="eye.*m must be greater or equal to 0"):
        fiamma.eye(2, -1)
    with pytest.raises(TypeError, match="eye"):
        fiamma.eye(2.5)


@pytest.mark.parametrize("dtype,ok,bad", [
    (fiamma.uint8, [0, 255, -1, -255, 2.9], [256, -256, 1e20, float("nan")]),
    (fiamma.int8, [-128, 127, -1.5], [128, -129, 300]),
    (fiamma.int16, [-32768, 32767], [32768, -32769]),
    (fiamma.int32, [2 ** 31 - 1, -2 ** 31], [2 ** 31, -2 ** 31 - 1, 1e10]),
    (fiamma.int64, [2 ** 63 - 1, -2 ** 63], [2 ** 63, -2 ** 63 - 1, 2 ** 64 - 1]),
])
def test_integer_fill_values_checked_like_pytorch(dtype, ok, bad):
    """A number outside an integer dtype's range raises (negative values down to -max wrap for
    unsigned types, as C and PyTorch do); every writer of a single number agrees."""
    writers = [
        ("fill_", lambda x, v: x.fill_(v)),
        ("fill_", lambda x, v: fiamma.full((3,), v, dtype=dtype)),
        ("masked_fill_", lambda x, v: x.masked_fill(fiamma.tensor([True, False, True]), v)),
        ("index_fill_", lambda x, v: x.index_fill(0, fiamma.tensor([1]), v)),
        ("setitem", lambda x, v: x.__setitem__(0, v)),
    ]
    for name, write in writers:
        for v in ok:
            x = fiamma.zeros(3, dtype=dtype)
            write(x, v)
        for v in bad:
            x = fiamma.zeros(3, dtype=dtype)
            with pytest.raises(RuntimeError, match="cannot be converted to type .* without "
                                                   "overflow"):
                write(x, v)
            assert x.tolist() == [0, 0, 0]
    x = fiamma.zeros(2, dtype=dtype)
    x.fill_(-1 if dtype is fiamma.uint8 else 5)
    assert x.tolist() == ([255, 255] if dtype is fiamma.uint8 else [5, 5])
    b = fiamma.zeros(2, dtype=fiamma.bool)
    b.fill_(300)
    assert b.tolist() == [True, True]


def test_shape_as_size_keyword():
    # torch.empty(size=(2, 3)) as pytorch/examples' gat/main.py writes it
    for fn in (fiamma.empty, fiamma.zeros, fiamma.ones):
        assert fn(size=(2, 3)).shape == (2, 3)
        assert fn(size=[4]).shape == (4,)
        with pytest.raises(TypeError, match="both positionally and as size="):
            fn(2, size=(2,))
    assert fiamma.zeros(size=(2,), dtype=fiamma.int64).tolist() == [0, 0]


def test_layout_keyword_of_the_constructors():
    # Pyro's Permute.log_abs_det_jacobian calls zeros(..., layout=x.layout)
    for f in (fiamma.zeros, fiamma.ones, fiamma.empty):
        t = f(2, 3, layout=fiamma.strided, pin_memory=False)
        assert t.shape == (2, 3) and t.layout is fiamma.strided
    assert fiamma.full((2,), 4.0, layout=fiamma.strided).tolist() == [4.0, 4.0]
    x = fiamma.ones(2, 2)
    for f in (fiamma.zeros_like, fiamma.ones_like, fiamma.empty_like):
        assert f(x, layout=fiamma.strided).shape == (2, 2)
    assert fiamma.full_like(x, 2.0, layout=None).sum().item() == 8.0
    # zeros/empty build an all-zero sparse tensor, as PyTorch; the filled ones refuse
    s = fiamma.zeros(2, 3, layout=fiamma.sparse_coo)
    assert s.layout is fiamma.sparse_coo and s.to_dense().abs().sum().item() == 0.0
    assert fiamma.zeros_like(x, layout=fiamma.sparse_csr).layout is fiamma.sparse_csr
    with pytest.raises(RuntimeError, match="ones: not implemented for sparse layout"):
        fiamma.ones(2, layout=fiamma.sparse_coo)
    with pytest.raises(RuntimeError, match="full_like: not implemented for sparse"):
        fiamma.full_like(x, 1.0, layout=fiamma.sparse_coo)
    with pytest.raises(TypeError, match="zeros: expected layout"):
        fiamma.zeros(2, layout="strided")


def test_out_of_the_filled_constructors():
    o = fiamma.ones(3, dtype=fiamma.int64)
    assert fiamma.zeros(3, out=o) is o and o.tolist() == [0, 0, 0]
    o = fiamma.zeros(2)
    assert fiamma.ones(2, out=o) is o and o.tolist() == [1.0, 1.0]
    o = fiamma.empty(0)
    r = fiamma.full((2, 2), 3.0, out=o)
    assert r is o and o.shape == (2, 2) and o.sum().item() == 12.0
    o = fiamma.empty(0, dtype=fiamma.float64)
    assert fiamma.empty(4, out=o) is o and o.shape == (4,) and o.dtype is fiamma.float64
    with pytest.raises(RuntimeError, match="zeros: dtype fiamma.int64 does not match"):
        fiamma.zeros(2, out=fiamma.ones(2), dtype=fiamma.int64)
    with pytest.raises(TypeError, match="ones: out must be a Tensor"):
        fiamma.ones(2, out=[0, 0])
