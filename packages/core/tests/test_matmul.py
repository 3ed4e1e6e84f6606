"""The matmul family against NumPy (float64 / int64 references) over every shape rule of
torch.matmul, strided operands and every dtype."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma as F
from fiamma._lib import lib

ALL = [F.bool, F.uint8, F.int8, F.int16, F.int32, F.int64, F.float16, F.bfloat16, F.float32,
       F.float64]
FLOATS = [F.float16, F.bfloat16, F.float32, F.float64]
# relative tolerance against sum(|a| * |b|): one rounding of the result for 16-bit floats
RTOL = {F.float16: 2e-3, F.bfloat16: 1.6e-2, F.float32: 1e-5, F.float64: 1e-12}


def rand(shape, dt, rng):
    """Values that suit dt: 0/1 for bool, small ints for integers, [-1, 1) for floats."""
    if dt is F.bool:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.is_floating_point:
        a = rng.uniform(-1, 1, shape)
        return to_np(ft(a, dt)).astype(np.float64)  # values exactly representable in dt
    lo, hi = (0, 8) if dt is F.uint8 else (-6, 7)
    return rng.integers(lo, hi, shape)


def ft(a, dt):
    """A contiguous fiamma tensor of dtype dt holding a."""
    a = np.asarray(a)
    if dt is F.bfloat16:
        return F.from_numpy(np.array(a, dtype=np.float32, order="C")).to(F.bfloat16)
    return F.from_numpy(np.array(a, dtype=dt._np, order="C"))


def to_np(t):
    if t.dtype is F.bfloat16:
        t = t.float()
    return t.numpy()


def make(a, dt, layout):
    """A tensor equal to a with the given memory layout: 'c' contiguous, 't' last two dims
    transposed in memory, 's' stepped (stride 2 along the last dim), 'b' leading dim broadcast
    (a zero stride; a must be constant along it)."""
    a = np.asarray(a)
    if layout == "t" and a.ndim >= 2:
        return ft(np.swapaxes(a, -1, -2), dt).transpose(-1, -2)
    if layout == "s" and a.ndim >= 1:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), dtype=a.dtype)
        big[..., :-1:2] = a
        t = ft(big, dt)
        return t.as_strided(a.shape, t.stride()[:-1] + (2,))
    if layout == "b" and a.ndim >= 3 and a.shape[0] > 0:
        return ft(a[:1], dt).expand(a.shape)
    return ft(a, dt)


def reference(a, b, dt):
    """a @ b in float64 (floats), wrapping int64 (ints), OR of ANDs (bool)."""
    if dt is F.bool:
        return np.matmul(a.astype(np.int64), b.astype(np.int64)) != 0
    if dt.is_floating_point:
        return np.matmul(a.astype(np.float64), b.astype(np.float64))
    return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dt._np)


def check(got, a, b, dt, want=None, bound=None):
    """got (a fiamma tensor) equals a @ b (or want) within dt's tolerance."""
    want = reference(a, b, dt) if want is None else want
    g = to_np(got)
    assert got.dtype is dt
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    if dt.is_floating_point:
        if bound is None:
            bound = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
        err = np.abs(g.astype(np.float64) - want)
        assert np.all(err <= RTOL[dt] * bound + 1e-30), (err.max(), g, want)
    else:
        np.testing.assert_array_equal(g, want)


SHAPES = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)), ((4, 1, 2, 3), (5, 3, 4)),
    ((3,), (5, 3, 4)), ((5, 2, 3), (3,)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)),
    ((0, 2, 3), (0, 3, 4)), ((0,), (0,)), ((1, 3), (3, 1)), ((1, 1), (1, 1)),
    ((5, 1, 3), (5, 3, 1)), ((3, 1, 7), (1, 7, 1)), ((2, 3, 4, 5), (2, 3, 5, 2)),
    ((6, 1, 4), (1, 4, 6)),
]


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matmul_shapes_all_dtypes(sa, sb, dt):
    rng = np.random.default_rng(hash((sa, sb)) % 2**32)
    a, b = rand(sa, dt, rng), rand(sb, dt, rng)
    check(F.matmul(ft(a, dt), ft(b, dt)), a, b, dt)
    check(ft(a, dt) @ ft(b, dt), a, b, dt)


@pytest.mark.parametrize("dt", [F.float32, F.float64, F.float16, F.bfloat16, F.int32, F.bool],
                         ids=str)
@pytest.mark.parametrize("la", "cts")
@pytest.mark.parametrize("lb", "cts")
@pytest.mark.parametrize("sa,sb", [((4, 5), (5, 3)), ((1, 5), (5, 3)), ((4, 5), (5, 1)),
                                   ((3, 4, 5), (3, 5, 6)), ((5,), (5, 3)), ((4, 5), (5,)),
                                   ((5,), (5,)), ((2, 4, 5), (5, 6)), ((4, 1), (1, 3))],
                         ids=str)
def test_matmul_layouts(sa, sb, la, lb, dt):
    rng = np.random.default_rng(7)
    a, b = rand(sa, dt, rng), rand(sb, dt, rng)
    ta, tb = make(a, dt, la), make(b, dt, lb)
    if la != "c":
        assert not ta.is_contiguous() or min(sa) <= 1 or len(sa) == 1
    check(F.matmul(ta, tb), a, b, dt)


@pytest.mark.parametrize("dt", [F.float32, F.float64, F.float16, F.int64], ids=str)
def test_matmul_broadcast_batch_zero_stride(dt):
    rng = np.random.default_rng(3)
    a = np.broadcast_to(rand((1, 4, 5), dt, rng), (6, 4, 5))
    b = rand((6, 5, 3), dt, rng)
    check(F.matmul(make(a, dt, "b"), ft(b, dt)), a, b, dt)
    b2 = np.broadcast_to(rand((1, 5, 3), dt, rng), (6, 5, 3))
    check(F.matmul(ft(a, dt), make(b2, dt, "b")), a, b2, dt)
    check(F.bmm(make(a, dt, "b"), make(b2, dt, "b")), a, b2, dt)
    # a row broadcast inside each matrix (stride 0 along m): packed before BLAS
    r = rand((1, 5), dt, rng)
    ta = ft(r, dt).expand(4, 5)
    check(F.mm(ta, ft(b[0], dt)), np.broadcast_to(r, (4, 5)), b[0], dt)
    v = rand((1,), dt, rng)
    tv = ft(v, dt).expand(5)
    check(F.mv(ft(a[0], dt), tv), a[0], np.broadcast_to(v, (5,)), dt)
    check(F.dot(tv, tv), np.broadcast_to(v, (5,)), np.broadcast_to(v, (5,)), dt)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_matmul_random_shapes(data):
    dt = data.draw(st.sampled_from([F.float32, F.float64, F.float16, F.int16, F.uint8, F.bool]))
    k = data.draw(st.integers(0, 9))
    m = data.draw(st.integers(0, 9))
    n = data.draw(st.integers(0, 9))
    nda = data.draw(st.integers(1, 4))
    ndb = data.draw(st.integers(1, 4))
    batch = data.draw(st.lists(st.integers(0, 3), min_size=2, max_size=2))
    ba = tuple(data.draw(st.sampled_from([1, s])) for s in batch)[4 - nda:] if nda > 2 else ()
    bb = tuple(data.draw(st.sampled_from([1, s])) for s in batch)[4 - ndb:] if ndb > 2 else ()
    sa = ba + ((m, k) if nda >= 2 else (k,))
    sb = bb + ((k, n) if ndb >= 2 else (k,))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    a, b = rand(sa, dt, rng), rand(sb, dt, rng)
    la = data.draw(st.sampled_from("cts"))
    lb = data.draw(st.sampled_from("cts"))
    check(F.matmul(make(a, dt, la), make(b, dt, lb)), a, b, dt)


def test_integer_matmul_wraps_like_pytorch():
    a = np.full((2, 3), 100, np.int8)
    b = np.ones((3, 2), np.int8)
    got = F.matmul(ft(a, F.int8), ft(b, F.int8))
    np.testing.assert_array_equal(got.numpy(), np.full((2, 2), 44, np.int8))  # 300 mod 256
    big = np.full((1, 2), 2**62, np.int64)
    got = F.matmul(ft(big, F.int64), ft(np.ones((2, 1), np.int64), F.int64))
    assert got.numpy()[0, 0] == -2**63


def test_integer_matmul_larger_than_blocks():
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (37, 300))
    b = rng.integers(-50, 50, (300, 530))
    check(F.matmul(ft(a, F.int32), make(b, F.int32, "t")), a, b, F.int32)


def test_float_matmul_big_enough_for_threads():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (130, 257)), rng.uniform(-1, 1, (257, 190))
    for dt in (F.float32, F.float64):
        check(F.matmul(make(a, dt, "t"), ft(b, dt)), a, b, dt)
    a3, b3 = rng.uniform(-1, 1, (3, 70, 80)), rng.uniform(-1, 1, (3, 80, 90))
    check(F.bmm(ft(a3, F.float32), make(b3, F.float32, "t")), a3, b3, F.float32)


def test_portable_loop_beyond_blas_limit():
    """Dimensions above the BLAS limit take the portable loop (lowered here to reach it)."""
    rng = np.random.default_rng(2)
    prev = lib.fm_matmul_set_blas_limit(4)
    try:
        for dt in (F.float32, F.float64, F.float16, F.bfloat16):
            a, b = rand((3, 6), dt, rng), rand((6, 5), dt, rng)
            check(F.matmul(make(a, dt, "t"), make(b, dt, "s")), a, b, dt)
            c = rand((3, 5), dt, rng)
            got = F.addmm(ft(c, dt), ft(a, dt), ft(b, dt), beta=0.5, alpha=2)
            check(got, a, b, dt, want=0.5 * c + 2 * reference(a, b, dt),
                  bound=np.abs(c) + 2 * np.abs(a) @ np.abs(b))
            # leading dimensions beyond the limit make BLAS refuse the layout: packed copies
            a2, b2 = rand((3, 4), dt, rng), rand((4, 3), dt, rng)
            check(F.matmul(make(a2, dt, "s"), make(b2, dt, "s")), a2, b2, dt)
    finally:
        lib.fm_matmul_set_blas_limit(prev)
    assert lib.fm_matmul_set_blas_limit(prev) == prev


# ---- named ops -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL, ids=str)
def test_mm_bmm_mv_dot(dt):
    rng = np.random.default_rng(4)
    a, b = rand((3, 4), dt, rng), rand((4, 2), dt, rng)
    check(F.mm(ft(a, dt), ft(b, dt)), a, b, dt)
    check(ft(a, dt).mm(ft(b, dt)), a, b, dt)
    a3, b3 = rand((2, 3, 4), dt, rng), rand((2, 4, 5), dt, rng)
    check(F.bmm(ft(a3, dt), ft(b3, dt)), a3, b3, dt)
    check(ft(a3, dt).bmm(ft(b3, dt)), a3, b3, dt)
    v = rand((4,), dt, rng)
    check(F.mv(ft(a, dt), ft(v, dt)), a, v, dt)
    check(ft(a, dt).mv(ft(v, dt)), a, v, dt)
    w = rand((4,), dt, rng)
    for op in (F.dot, F.vdot, F.inner):
        r = op(ft(v, dt), ft(w, dt))
        assert r.shape == ()
        check(r, v, w, dt)
    check(ft(v, dt).dot(ft(w, dt)), v, w, dt)


@pytest.mark.parametrize("dt", [F.float32, F.float64, F.int64, F.bfloat16, F.bool], ids=str)
def test_inner(dt):
    rng = np.random.default_rng(5)
    a, b = rand((2, 3, 4), dt, rng), rand((5, 4), dt, rng)
    want = reference(a.reshape(6, 4), b.T, dt).reshape(2, 3, 5)
    got = F.inner(make(a, dt, "t"), ft(b, dt))
    check(got, a.reshape(6, 4), b.T, dt, want=want,
          bound=(np.abs(a.reshape(6, 4)) @ np.abs(b.T)).reshape(2, 3, 5))
    # a 0-d operand multiplies
    s = F.inner(ft(a, dt), ft(np.array(1, dtype=a.dtype), dt))
    assert s.shape == (2, 3, 4)


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_outer_ger(dt):
    rng = np.random.default_rng(6)
    a, b = rand((4,), dt, rng), rand((3,), dt, rng)
    want = reference(a[:, None], b[None, :], dt)
    for got in (F.outer(ft(a, dt), make(b, dt, "s")), F.ger(ft(a, dt), ft(b, dt)),
                ft(a, dt).outer(ft(b, dt))):
        check(got, a[:, None], b[None, :], dt, want=want)


def test_outer_promotes():
    r = F.outer(F.tensor([1, 2]), F.tensor([0.5, 1.0], dtype=F.float64))
    assert r.dtype is F.float64
    np.testing.assert_array_equal(r.numpy(), [[0.5, 1.0], [1.0, 2.0]])


# ---- fused forms with beta / alpha -------------------------------------------------------------

@pytest.mark.parametrize("dt", [F.float32, F.float64, F.float16, F.bfloat16, F.int32, F.int64,
                                F.uint8], ids=str)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0, 1), (2, 3), (0, 0), (1, 0), (-1, 2)])
def test_addmm_family(dt, beta, alpha):
    rng = np.random.default_rng(8)
    a, b = rand((3, 4), dt, rng), rand((4, 5), dt, rng)
    c = rand((3, 5), dt, rng)
    c1 = rand((5,), dt, rng)  # broadcast input

    def want(c_, prod):
        r = beta * c_.astype(np.float64 if dt.is_floating_point else np.int64) + alpha * prod
        return r if dt.is_floating_point else r.astype(dt._np)

    def bound(c_, a_, b_):
        return abs(beta) * np.abs(c_) + abs(alpha) * (np.abs(a_) @ np.abs(b_)) + 1e-30

    for cc in (c, c1):
        got = F.addmm(ft(cc, dt), ft(a, dt), make(b, dt, "t"), beta=beta, alpha=alpha)
        check(got, a, b, dt, want=want(np.broadcast_to(cc, (3, 5)), reference(a, b, F.int64
              if not dt.is_floating_point else dt)), bound=bound(cc, a, b))
    v = rand((4,), dt, rng)
    cv = rand((3,), dt, rng)
    got = F.addmv(ft(cv, dt), ft(a, dt), ft(v, dt), beta=beta, alpha=alpha)
    ref = a.astype(np.float64) @ v if dt.is_floating_point else a.astype(np.int64) @ v
    check(got, a, v, dt, want=want(cv, ref), bound=bound(cv, a, v))
    a3, b3, c3 = rand((2, 3, 4), dt, rng), rand((2, 4, 5), dt, rng), rand((2, 3, 5), dt, rng)
    ref3 = a3.astype(np.float64) @ b3 if dt.is_floating_point else a3.astype(np.int64) @ b3
    got = F.baddbmm(ft(c3, dt), ft(a3, dt), ft(b3, dt), beta=beta, alpha=alpha)
    check(got, a3, b3, dt, want=want(c3, ref3), bound=bound(c3, a3, b3))
    got = F.addbmm(ft(c, dt), ft(a3, dt), make(b3, dt, "t"), beta=beta, alpha=alpha)
    bnd = abs(beta) * np.abs(c) + abs(alpha) * (np.abs(a3) @ np.abs(b3)).sum(0)
    check(got, a, b, dt, want=want(c, ref3.sum(0)), bound=bnd)
    x, y = rand((3,), dt, rng), rand((5,), dt, rng)
    got = F.addr(ft(c, dt), ft(x, dt), ft(y, dt), beta=beta, alpha=alpha)
    refr = np.outer(x.astype(np.float64 if dt.is_floating_point else np.int64), y)
    check(got, x[:, None], y[None, :], dt, want=want(c, refr), bound=bound(c, x[:, None],
                                                                            y[None, :]))


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_beta_zero_ignores_nan_in_input(dt):
    nan = np.full((3, 5), np.nan)
    a, b = np.ones((3, 4)), np.ones((4, 5))
    for k in (4, 0):
        got = F.addmm(ft(nan, dt), ft(a[:, :k], dt), ft(b[:k], dt), beta=0)
        np.testing.assert_array_equal(to_np(got), np.full((3, 5), float(k)))
    got = F.addmv(ft(nan[:, 0], dt), ft(a, dt), ft(b[:, 0], dt), beta=0)
    np.testing.assert_array_equal(to_np(got), np.full(3, 4.0))
    got = F.baddbmm(ft(nan[None], dt), ft(a[None], dt), ft(b[None], dt), beta=0, alpha=2)
    np.testing.assert_array_equal(to_np(got), np.full((1, 3, 5), 8.0))
    got = F.baddbmm(ft(np.full((4, 3, 5), np.nan), dt), ft(np.ones((4, 3, 4)), dt),
                    ft(np.ones((4, 4, 5)), dt), beta=0)
    np.testing.assert_array_equal(to_np(got), np.full((4, 3, 5), 4.0))
    got = F.addr(ft(nan, dt), ft(a[:, 0], dt), ft(b[0], dt), beta=0)
    np.testing.assert_array_equal(to_np(got), np.ones((3, 5)))
    # beta != 0 propagates it
    got = F.addmm(ft(nan, dt), ft(a, dt), ft(b, dt), beta=1)
    assert np.isnan(to_np(got)).all()


def test_addr_bool_and_promotion():
    c = F.tensor([[True, False], [False, False]])
    x, y = F.tensor([True, False]), F.tensor([False, True])
    np.testing.assert_array_equal(F.addr(c, x, y).numpy(), [[True, True], [False, False]])
    np.testing.assert_array_equal(F.addr(c, x, y, beta=False).numpy(),
                                  [[False, True], [False, False]])
    r = F.addr(F.ones(2, 3, dtype=F.int64), F.tensor([1, 2]), F.tensor([1.0, 2.0, 3.0]))
    assert r.dtype is F.float32
    np.testing.assert_array_equal(r.numpy(), [[2, 3, 4], [3, 5, 7]])


def test_inplace_methods_and_out():
    rng = np.random.default_rng(9)
    a, b, c = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 5)), rng.uniform(-1, 1, (3, 5))
    t = ft(c, F.float64)
    ptr = t.data_ptr()
    v0 = t._version
    r = t.addmm_(ft(a, F.float64), ft(b, F.float64), beta=2, alpha=0.5)
    assert r is t and t.data_ptr() == ptr and t._version > v0
    np.testing.assert_allclose(t.numpy(), 2 * c + 0.5 * a @ b, rtol=1e-12, atol=1e-12)
    out = F.empty(3, 5, dtype=F.float64)
    r = F.matmul(ft(a, F.float64), ft(b, F.float64), out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)
    # an empty out is resized; a transposed out gets the values in its layout
    out = F.empty(0, dtype=F.float64)
    F.mm(ft(a, F.float64), ft(b, F.float64), out=out)
    assert out.shape == (3, 5)
    outT = F.empty(5, 3, dtype=F.float64).transpose(0, 1)
    F.mm(ft(a, F.float64), ft(b, F.float64), out=outT)
    np.testing.assert_allclose(outT.numpy(), a @ b, rtol=1e-12)
    # out aliasing an operand: computed aside, then copied
    sq = ft(rng.uniform(-1, 1, (4, 4)), F.float64)
    want = sq.numpy() @ sq.numpy()
    F.mm(sq, sq, out=sq)
    np.testing.assert_allclose(sq.numpy(), want, rtol=1e-12)
    with pytest.raises(RuntimeError, match="dtype"):
        F.mm(ft(a, F.float64), ft(b, F.float64), out=F.empty(3, 5))
    o = F.empty(3, 4, dtype=F.float64)
    with pytest.warns(UserWarning, match="resized"):  # PyTorch's deprecated resize
        F.mm(ft(a, F.float64), ft(b, F.float64), out=o)
    np.testing.assert_allclose(o.numpy(), a @ b, rtol=1e-12)
    t = ft(np.ones((2, 3, 5)), F.float32)
    t.baddbmm_(ft(np.ones((2, 3, 4)), F.float32), ft(np.ones((2, 4, 5)), F.float32), alpha=2)
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3, 5), 9.0))
    t = ft(np.ones(3), F.float32)
    t.addmv_(ft(np.ones((3, 4)), F.float32), ft(np.ones(4), F.float32), beta=0)
    np.testing.assert_array_equal(t.numpy(), np.full(3, 4.0))
    t = ft(np.zeros((2, 3)), F.int64)
    t.addr_(ft([1, 2], F.int64), ft([1, 2, 3], F.int64))
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [2, 4, 6]])


def test_rmatmul_and_results_are_fresh():
    a = ft(np.eye(3), F.float32)
    r = a @ a
    assert r.data_ptr() != a.data_ptr() and r.is_contiguous()
    assert F.Tensor.__rmatmul__(a, ft(np.ones((2, 3)), F.float32)).shape == (2, 3)


# ---- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda: F.mm(F.ones(2, 3), F.ones(4, 5)),
     r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda: F.matmul(F.ones(2, 3), F.ones(4, 5)),
     r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda: F.ones(2, 3) @ F.ones(4, 5), r"matmul: .*\(2x3 and 4x5\)"),
    (lambda: F.matmul(F.ones(2, 3, 4), F.ones(5, 6)), r"matmul: .*\(2x3x4 and 5x6\)"),
    (lambda: F.matmul(F.ones(2, 3, 4), F.ones(3, 4, 6)), r"matmul: .*size of tensor"),
    (lambda: F.matmul(F.ones(3), F.ones(4)), r"matmul: inconsistent tensor size.*\[3\].*\[4\]"),
    (lambda: F.matmul(F.ones(()), F.ones(3)), r"matmul: .*at least 1D.*0D and 1D"),
    (lambda: F.mm(F.ones(2, 3), F.ones(3, 2, dtype=F.float64)),
     r"mm: expected m1 and m2 to have the same dtype, but got: fiamma.float32 != fiamma.float64"),
    (lambda: F.matmul(F.ones(2, 3, dtype=F.int64), F.ones(3, 2)), r"matmul: .*same dtype"),
    (lambda: F.mm(F.ones(2, 3, 2), F.ones(3, 2)), r"mm: self must be a 2D tensor.*\[2, 3, 2\]"),
    (lambda: F.bmm(F.ones(2, 3), F.ones(3, 2)), r"bmm: batch1 must be a 3D tensor"),
    (lambda: F.bmm(F.ones(2, 2, 3), F.ones(3, 3, 5)),
     r"bmm: Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: "
     r"\[3, 3\]"),
    (lambda: F.mv(F.ones(2, 3), F.ones(4)), r"mv: size mismatch.*2x3.*4"),
    (lambda: F.mv(F.ones(2, 3), F.ones(3, 1)), r"mv: vector \+ matrix @ vector expected"),
    (lambda: F.dot(F.ones(3), F.ones(4)), r"dot: inconsistent tensor size.*\[3\].*\[4\]"),
    (lambda: F.dot(F.ones(3), F.ones(3, dtype=F.float64)), r"dot: expected both vectors to have "
     r"same dtype, but found fiamma.float32 and fiamma.float64"),
    (lambda: F.dot(F.ones(3, 1), F.ones(3)), r"dot: 1D tensors expected, but got 2D and 1D"),
    (lambda: F.vdot(F.ones(2), F.ones(3)), r"vdot: inconsistent tensor size"),
    (lambda: F.inner(F.ones(2, 3), F.ones(4, 2)), r"inner: the last dimension must match.*"
     r"\[2, 3\] and \[4, 2\]"),
    (lambda: F.outer(F.ones(2, 2), F.ones(3)), r"outer: Expected 1-D argument self, but got 2-D"),
    (lambda: F.addmm(F.ones(3, 2), F.ones(2, 3), F.ones(3, 2)), r"addmm: input of shape \[3, 2\] "
     r"cannot be broadcast to the result shape \[2, 2\]"),
    (lambda: F.addmm(F.ones(2, 2), F.ones(2, 3), F.ones(3, 2, dtype=F.float64)),
     r"addmm: expected input, mat1 and mat2 to have the same dtype"),
    (lambda: F.addmm(F.ones(2, 2), F.ones(2, 3), F.ones(4, 2)), r"addmm: .*\(2x3 and 4x2\)"),
    (lambda: F.addmv(F.ones(2), F.ones(2, 3), F.ones(4)), r"addmv: size mismatch"),
    (lambda: F.addr(F.ones(2, 3, dtype=F.int64), F.ones(2, dtype=F.int64),
                    F.ones(3, dtype=F.int64), alpha=1.5),
     r"addr: for integral input tensors, argument alpha must not be a floating point number"),
    (lambda: F.addmm(F.ones(2, 2, dtype=F.int32), F.ones(2, 3, dtype=F.int32),
                     F.ones(3, 2, dtype=F.int32), beta=0.5), r"addmm: .*argument beta"),
    (lambda: F.baddbmm(F.ones(2, 2, 5), F.ones(3, 2, 4), F.ones(3, 4, 5)),
     r"baddbmm: input of shape \[2, 2, 5\] cannot be broadcast"),
    (lambda: F.addbmm(F.ones(2, 5), F.ones(3, 2, 4), F.ones(2, 4, 5)),
     r"addbmm: Expected size for first two dimensions"),
])
def test_errors(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_type_errors():
    with pytest.raises(TypeError, match="matmul"):
        F.matmul(F.ones(2, 2), [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError):
        F.ones(2, 2) @ "x"


# ---- the own float32 kernel (AVX-512 CPUs) and its blocking edges -------------------------------

@pytest.mark.skipif(not lib.fm_sgemm_available(), reason="the own kernel needs AVX-512")
@settings(max_examples=120, deadline=None)
@given(st.data())
def test_float32_kernel_tiles_and_layouts(data):
    """The kernel called directly: sizes around the 12 x 32 register tile and the k blocks (up
    to 400 deep), row/column-major and stepped operands, alpha/beta, one to four threads (each
    thread computes its own rectangle of C: the grid splits rows, columns or both)."""
    m = data.draw(st.sampled_from([1, 7, 8, 11, 12, 13, 25, 33, 47, 131, 257]))
    n = data.draw(st.sampled_from([1, 7, 13, 15, 16, 17, 31, 32, 33, 64, 95, 257]))
    k = data.draw(st.sampled_from([1, 3, 7, 13, 15, 16, 17, 33, 64, 255, 256, 257, 401, 600, 801]))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))

    def operand(rows, cols):
        x = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
        lay = data.draw(st.sampled_from("cfs"))
        if lay == "f":
            return np.asfortranarray(x)
        if lay == "s":
            big = np.zeros((rows, 2 * cols), np.float32)
            big[:, ::2] = x
            return big[:, ::2]
        return x

    a, b = operand(m, k), operand(k, n)
    ldc = n + data.draw(st.integers(0, 3))
    cbig = rng.uniform(-1, 1, (m, ldc)).astype(np.float32)
    c0 = cbig.copy()
    alpha, beta = data.draw(st.sampled_from([(1.0, 0.0), (0.5, 2.0), (-1.0, 1.0)]))
    if beta == 0.0:
        cbig[:, :n] = np.nan  # never read
    nt = data.draw(st.sampled_from([1, 2, 3, 4]))  # 3 and 4: grids of parts in both directions
    rc = lib.fm_sgemm(m, n, k, alpha, a.ctypes.data, a.strides[0] // 4, a.strides[1] // 4,
                      b.ctypes.data, b.strides[0] // 4, b.strides[1] // 4, beta,
                      cbig.ctypes.data, ldc, nt)
    assert rc == 0
    want = alpha * (a.astype(np.float64) @ b) + beta * c0[:, :n]
    bound = abs(alpha) * (np.abs(a) @ np.abs(b)) + abs(beta) * np.abs(c0[:, :n])
    assert np.all(np.abs(cbig[:, :n] - want) <= 1e-5 * bound + 1e-30)
    np.testing.assert_array_equal(cbig[:, n:], c0[:, n:])  # padding untouched


@pytest.mark.skipif(not lib.fm_sgemm_available(), reason="the own kernel needs AVX-512")
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 33), (13, 7, 257), (33, 257, 13),
                                   (257, 33, 7), (128, 40, 300), (40, 300, 100), (300, 300, 600)],
                         ids=str)
@pytest.mark.parametrize("nt", [1, 2, 3, 4, 7])
def test_float32_kernel_thread_grids(m, n, k, nt):
    """Every thread count splits C into parts (rows, columns or both; more threads than tiles
    leave some idle): transposed A (TN), transposed B (NT), beta != 0, a wider C."""
    rng = np.random.default_rng(m * 1000 + n + k)
    a = np.asfortranarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
    b = np.ascontiguousarray(rng.uniform(-1, 1, (n, k)).astype(np.float32)).T
    ldc = n + 5
    cbig = rng.uniform(-1, 1, (m, ldc)).astype(np.float32)
    c0 = cbig.copy()
    for trans_a in (False, True):
        x = np.ascontiguousarray(a) if trans_a else a
        cbig[:] = c0
        rc = lib.fm_sgemm(m, n, k, 1.5, x.ctypes.data, x.strides[0] // 4, x.strides[1] // 4,
                          b.ctypes.data, b.strides[0] // 4, b.strides[1] // 4, -0.5,
                          cbig.ctypes.data, ldc, nt)
        assert rc == 0
        want = 1.5 * (a.astype(np.float64) @ b) - 0.5 * c0[:, :n]
        bound = 1.5 * (np.abs(a) @ np.abs(b)) + 0.5 * np.abs(c0[:, :n])
        assert np.all(np.abs(cbig[:, :n] - want) <= 1e-5 * bound + 1e-30)
        np.testing.assert_array_equal(cbig[:, n:], c0[:, n:])


@pytest.mark.parametrize("m,k,n", [(128, 512, 10), (200, 300, 8), (1000, 100, 24),
                                   (130, 400, 20), (64, 300, 31), (10, 512, 128)], ids=str)
@pytest.mark.parametrize("la,lb", [("c", "t"), ("c", "c"), ("t", "c"), ("s", "t")])
def test_float32_few_columns(m, k, n, la, lb):
    """C with few columns (x @ W.t() for a classifier) is computed as C^T = B^T A^T and
    transposed back: plain, addmm with beta, a column-major out=, a batch."""
    rng = np.random.default_rng(m + k + n)
    a, w = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    ta, tw = make(a, F.float32, la), make(w, F.float32, lb)
    for nt in (1, 2):
        prev = lib.fm_blas_get_num_threads()
        lib.fm_blas_set_num_threads(nt)
        try:
            check(F.matmul(ta, tw), a, w, F.float32)
            c = rng.uniform(-1, 1, (m, n))
            check(F.addmm(ft(c, F.float32), ta, tw, beta=0.5, alpha=-2.0), a, w, F.float32,
                  want=0.5 * c - 2.0 * (a @ w),
                  bound=0.5 * np.abs(c) + 2.0 * (np.abs(a) @ np.abs(w)))
            out = F.empty(n, m).transpose(0, 1)
            F.mm(ta, tw, out=out)
            check(out, a, w, F.float32)
        finally:
            lib.fm_blas_set_num_threads(prev)
    a3 = rng.uniform(-1, 1, (3, m, k))
    check(F.matmul(ft(a3, F.float32), tw), a3, w, F.float32)


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_matmul_medium_sizes_all_float_dtypes(data):
    """Products big enough for the own kernel (and its threads), through the public API."""
    m = data.draw(st.sampled_from([100, 131, 250]))
    n = data.draw(st.sampled_from([32, 95, 130]))
    k = data.draw(st.sampled_from([100, 257, 300]))
    dt = data.draw(st.sampled_from([F.float32, F.float32, F.float16, F.bfloat16]))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    a, b = rand((m, k), dt, rng), rand((k, n), dt, rng)
    ta = make(a, dt, data.draw(st.sampled_from("cts")))
    tb = make(b, dt, data.draw(st.sampled_from("cts")))
    beta, alpha = data.draw(st.sampled_from([(0, 1), (1, 1), (0.5, -2.0)]))
    c = rand((m, n), dt, rng)
    got = F.addmm(ft(c, dt), ta, tb, beta=beta, alpha=alpha)
    check(got, a, b, dt, want=beta * c + alpha * reference(a, b, dt),
          bound=abs(beta) * np.abs(c) + abs(alpha) * (np.abs(a) @ np.abs(b)))


def test_float32_kernel_large_blocks_and_threads():
    """More rows, columns and depth than one block holds (384 x 1024 x 256), on the threads."""
    rng = np.random.default_rng(11)
    a, b = rng.uniform(-1, 1, (400, 300)), rng.uniform(-1, 1, (300, 1100))
    check(F.matmul(ft(a, F.float32), make(b, F.float32, "t")), a, b, F.float32)
    out = F.empty(1100, 400).transpose(0, 1)  # column-major result: computed transposed
    F.mm(make(a, F.float32, "s"), ft(b, F.float32), out=out)
    check(out, a, b, F.float32)
    # few rows, many columns: the threads split the columns
    a2 = rng.uniform(-1, 1, (20, 500))
    b2 = rng.uniform(-1, 1, (500, 900))
    check(F.mm(ft(a2, F.float32), ft(b2, F.float32)), a2, b2, F.float32)


@pytest.mark.parametrize("shape_a,shape_b", [
    ((64, 50, 60), (64, 60, 70)), ((3, 130, 70), (3, 70, 90)), ((8, 1, 40, 60), (5, 60, 48)),
    ((6, 50, 60), (60, 70))], ids=str)
def test_float32_kernel_batches(shape_a, shape_b):
    rng = np.random.default_rng(12)
    a, b = rng.uniform(-1, 1, shape_a), rng.uniform(-1, 1, shape_b)
    check(F.matmul(ft(a, F.float32), make(b, F.float32, "t")), a, b, F.float32)
    check(F.matmul(make(a, F.float32, "s"), ft(b, F.float32)), a, b, F.float32)
    c = rng.uniform(-1, 1, shape_a[:-1] + (shape_b[-1],))
    if len(shape_a) == 3 and len(shape_b) == 3:
        got = F.baddbmm(ft(c, F.float32), ft(a, F.float32), ft(b, F.float32), beta=0.5, alpha=2)
        check(got, a, b, F.float32, want=0.5 * c + 2 * (a @ b),
              bound=0.5 * np.abs(c) + 2 * (np.abs(a) @ np.abs(b)))


def test_matmul_in_forked_child():
    """After threads ran in the parent, a forked child (a data-loader worker) still multiplies."""
    import os
    import time

    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    rng = np.random.default_rng(13)
    a, b = rng.uniform(-1, 1, (300, 300)), rng.uniform(-1, 1, (300, 300))
    check(F.mm(ft(a, F.float32), ft(b, F.float32)), a, b, F.float32)
    pid = os.fork()
    if pid == 0:  # child: exit status says whether the product was right
        try:
            r = F.mm(ft(a, F.float32), ft(b, F.float32)).numpy()
            ok = np.abs(r - a @ b).max() < 1e-3
            r = F.bmm(ft(np.stack([a] * 8), F.float32), ft(np.stack([b] * 8), F.float32)).numpy()
            ok = ok and np.abs(r - a @ b).max() < 1e-3
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("matmul hung in a forked child")


@pytest.mark.parametrize("m,k,n", [(1, 7, 32), (5, 3, 33), (128, 512, 512), (257, 100, 31),
                                   (64, 784, 70), (3, 1, 100), (200, 64, 1000)])
@pytest.mark.parametrize("w_transposed", [False, True])
def test_addmm_row_bias_against_float64(m, k, n, w_transposed):
    # a linear layer's addmm(bias, x, W.t()): the kernel adds the bias row as it stores C
    # (n >= 32 on the own kernel); every other form takes the copy-then-multiply path
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    fw = F.from_numpy(w).t() if w_transposed else F.from_numpy(np.ascontiguousarray(w.T))
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    bound = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64) + np.abs(b)
    got = F.addmm(F.from_numpy(b), F.from_numpy(x), fw).numpy()
    assert np.all(np.abs(got - want) <= 1e-5 * bound + 1e-6)
    # the forms that do not take the kernel's bias: scaled, strided bias, float64, a 2-D input
    got = F.addmm(F.from_numpy(b), F.from_numpy(x), fw, beta=0.5, alpha=2.0).numpy()
    assert np.all(np.abs(got - (2 * (want - b) + 0.5 * b)) <= 3e-5 * bound + 1e-6)
    bs = F.from_numpy(np.repeat(b, 2))[::2]
    assert np.all(np.abs(F.addmm(bs, F.from_numpy(x), fw).numpy() - want) <= 1e-5 * bound + 1e-6)
    got64 = F.addmm(F.from_numpy(b.astype(np.float64)), F.from_numpy(x.astype(np.float64)),
                    F.from_numpy(w.T.astype(np.float64))).numpy()
    np.testing.assert_allclose(got64, want, rtol=1e-10, atol=1e-10)
    c2 = np.broadcast_to(b, (m, n)).copy()
    got = F.addmm(F.from_numpy(c2), F.from_numpy(x), fw).numpy()
    assert np.all(np.abs(got - want) <= 1e-5 * bound + 1e-6)
