"""The int8 GEMM of dynamic quantization (csrc/qgemm.c, fused.qgemm_*): exact int32 sums of
uint8 x int8 products on every kernel path (AVX-512 VNNI, AVX2, plain C), edge tiles
included."""
import numpy as np
import pytest

from fiamma._backend.cpu import fused

pytestmark = pytest.mark.skipif(not hasattr(fused.lib, "fm_qgemm_u8s8"),
                                reason="this _C build has no int8 GEMM")


def _run(a, b, flags):
    m, k = a.shape
    n = b.shape[0]
    k4 = 4 * ((k + 3) // 4)
    ap = np.zeros((m, k4), dtype=np.uint8)
    ap[:, :k] = a
    bp = np.empty(fused.qgemm_packed_bytes(n, k), dtype=np.int8)
    bc = np.ascontiguousarray(b)
    assert fused.qgemm_pack_b(n, k, bc.ctypes.data, bp.ctypes.data) == 0
    c = np.full((m, n), -7, dtype=np.int32)
    assert fused.qgemm_u8s8(m, n, k, ap.ctypes.data, k4, bp.ctypes.data, c.ctypes.data,
                            flags) == 0
    return c


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 17, 7), (4, 32, 8), (9, 33, 130),
                                   (64, 100, 1024), (3, 1000, 5)])
@pytest.mark.parametrize("flags,amax", [(1, 127), (3, 127), (5, 127), (0, 255), (4, 255)])
def test_exact_on_every_path(shape, flags, amax):
    """flags: bit 0 = 7-bit activations (lets AVX2 in), bit 1 = skip VNNI, bit 2 = plain C;
    the paths this CPU lacks fall back to the next, which must be exact as well."""
    m, n, k = shape
    rng = np.random.default_rng(m * 1000 + n + k)
    a = rng.integers(0, amax + 1, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    a[0, 0], b[0, 0] = amax, -128  # the extremes
    want = a.astype(np.int64) @ b.astype(np.int64).T
    np.testing.assert_array_equal(_run(a, b, flags), want)


def test_empty_and_bad_arguments():
    c = np.zeros((0, 3), dtype=np.int32)
    bp = np.zeros(fused.qgemm_packed_bytes(3, 4), dtype=np.int8)
    a = np.zeros((1, 4), dtype=np.uint8)
    assert fused.qgemm_u8s8(0, 3, 4, a.ctypes.data, 4, bp.ctypes.data, c.ctypes.data, 1) == 0
    # rows shorter than 4 * ceil(k / 4) are refused
    assert fused.qgemm_u8s8(1, 3, 5, a.ctypes.data, 5, bp.ctypes.data, c.ctypes.data, 1) != 0


# ---- the public entry (fiamma.fused.Int8PackedWeight / int8_matmul) ----

from fiamma import fused as public  # noqa: E402


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (17, 33, 64), (2, 40, 130)])
@pytest.mark.parametrize("amax", [127, 255])
def test_public_int8_matmul_exact(shape, amax):
    m, n, k = shape
    rng = np.random.default_rng(7 * m + n + k + amax)
    a = rng.integers(0, amax + 1, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    w = public.Int8PackedWeight(b)
    assert (w.n, w.k) == (n, k) and "n=%d" % n in repr(w)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    np.testing.assert_array_equal(public.int8_matmul(a, w), want)
    out = np.full((m, n), 3, dtype=np.int32)
    assert public.int8_matmul(a, w, out=out) is out
    np.testing.assert_array_equal(out, want)
    # a strided (non-contiguous) input gives the same sums
    wide = np.zeros((m, 2 * k), dtype=np.uint8)
    wide[:, ::2] = a
    np.testing.assert_array_equal(public.int8_matmul(wide[:, ::2], w), want)


def test_public_int8_matmul_checks():
    w = public.Int8PackedWeight(np.ones((3, 4), dtype=np.int8))
    assert public.int8_matmul(np.zeros((0, 4), dtype=np.uint8), w).shape == (0, 3)
    with pytest.raises(TypeError, match="fused.Int8PackedWeight.*int8"):
        public.Int8PackedWeight(np.ones((3, 4), dtype=np.int16))
    with pytest.raises(ValueError, match="2-d"):
        public.Int8PackedWeight(np.ones(4, dtype=np.int8))
    with pytest.raises(ValueError, match="non-empty"):
        public.Int8PackedWeight(np.ones((0, 4), dtype=np.int8))
    with pytest.raises(TypeError, match="fused.int8_matmul.*uint8"):
        public.int8_matmul(np.ones((2, 4), dtype=np.int8), w)
    with pytest.raises(ValueError, match="5 columns, the weight 4"):
        public.int8_matmul(np.ones((2, 5), dtype=np.uint8), w)
    with pytest.raises(ValueError, match=r"expected \[2, 3\]"):
        public.int8_matmul(np.ones((2, 4), dtype=np.uint8), w,
                           out=np.empty((3, 2), dtype=np.int32))
    with pytest.raises(TypeError, match="Int8PackedWeight"):
        public.int8_matmul(np.ones((2, 4), dtype=np.uint8), np.ones((3, 4), dtype=np.int8))
