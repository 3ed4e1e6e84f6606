"""The unsigned dtypes uint16/uint32/uint64: promotion, creation, casts, arithmetic, reductions,
sorting, indexing, interop and serialization, against NumPy (PyTorch only in parity tests)."""

import io
import itertools

import numpy as np
import pytest

import fiamma
from fiamma import _dtype as D

U = [fiamma.uint16, fiamma.uint32, fiamma.uint64]
U_IDS = ["u16", "u32", "u64"]


def vals(dt, n=13, seed=0):
    """Values over the whole range of ``dt``, the extremes included."""
    npdt = dt._np
    info = np.iinfo(npdt)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, info.max, size=n, dtype=npdt, endpoint=True)
    a[:4] = [0, 1, info.max, info.max // 2 + 1]
    return a


def T(a):
    return fiamma.tensor(a)


def same(t, ref):
    ref = np.asarray(ref)
    got = t.numpy() if isinstance(t, fiamma.Tensor) else np.asarray(t)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


# ---- dtype objects and promotion ---------------------------------------------------------------

def test_dtype_objects():
    for dt, bits in zip(U, (16, 32, 64)):
        assert dt.itemsize * 8 == bits
        assert not dt.is_signed and not dt.is_floating_point and not dt.is_complex
        assert fiamma.iinfo(dt).max == 2 ** bits - 1 and fiamma.iinfo(dt).min == 0
        assert D.from_numpy_dtype(dt._np) is dt
        assert D.to_dtype(dt.name) is dt
        assert repr(dt) == f"fiamma.{dt.name}"
    assert D.BY_CODE[fiamma.uint64.code] is fiamma.uint64


INTS = [fiamma.bool, fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64] + U


def test_promotion_integers_exhaustive_numpy():
    # every pair of integer dtypes (bool included) promotes as NumPy does (uint64 with a signed
    # type: float64)
    for a, b in itertools.product(INTS, INTS):
        want = D.from_numpy_dtype(np.promote_types(a._np, b._np))
        assert fiamma.promote_types(a, b) is want, (a, b)


FLOATS = [fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]


def test_promotion_with_floats_and_complex():
    # PyTorch's category rule: the floating (complex) type is kept whatever the integer width
    for u in U:
        for f in FLOATS + [fiamma.complex64, fiamma.complex128]:
            assert fiamma.promote_types(u, f) is f
            assert fiamma.promote_types(f, u) is f


def test_result_type_scalars_and_zero_dim():
    x = fiamma.zeros(3, dtype=fiamma.uint16)
    assert fiamma.result_type(x, 5) is fiamma.uint16
    assert fiamma.result_type(x, 5.0) is fiamma.float32
    assert fiamma.result_type(x, fiamma.tensor(5, dtype=fiamma.int64)) is fiamma.uint16
    assert fiamma.result_type(x, fiamma.zeros(2, dtype=fiamma.int16)) is fiamma.int32
    assert (x + fiamma.zeros(3, dtype=fiamma.int8)).dtype is fiamma.int32
    assert (fiamma.zeros(3, dtype=fiamma.uint64) + fiamma.zeros(3, dtype=fiamma.int64)).dtype \
        is fiamma.float64


@pytest.mark.parity
def test_parity_promotion_torch():
    torch = pytest.importorskip("torch")
    for u in U:
        tu = getattr(torch, u.name)
        for f in FLOATS + [u]:
            assert fiamma.promote_types(u, f).name == \
                str(torch.promote_types(tu, getattr(torch, f.name))).split(".")[1]


# ---- creation, casts, printing -----------------------------------------------------------------

@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_creation(dt):
    top = 2 ** (dt.itemsize * 8) - 1
    t = fiamma.tensor([0, 1, top], dtype=dt)
    assert t.dtype is dt and t.tolist() == [0, 1, top]
    assert t[2].item() == top and isinstance(t[2].item(), int)
    same(fiamma.zeros(2, dtype=dt), np.zeros(2, dt._np))
    same(fiamma.ones(2, dtype=dt), np.ones(2, dt._np))
    same(fiamma.full((2,), top, dtype=dt), np.full(2, top, dt._np))
    same(fiamma.arange(2, 11, 3, dtype=dt), np.arange(2, 11, 3, dtype=dt._np))
    same(fiamma.linspace(0, 100, 5, dtype=dt), np.linspace(0, 100, 5).astype(dt._np))
    same(fiamma.empty(3, dtype=dt).fill_(7), np.full(3, 7, dt._np))
    r = fiamma.randint(0, 1000, (100,), dtype=dt)
    assert r.dtype is dt and 0 <= r.min().item() and r.max().item() < 1000
    with pytest.raises(RuntimeError, match="overflow"):
        fiamma.full((2,), top + 1, dtype=dt)


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_casts(dt):
    a = vals(dt)
    x = T(a)
    for other in [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16,
                  np.uint32, np.uint64, np.float32, np.float64, np.complex64]:
        o = D.from_numpy_dtype(other)
        same(x.to(o), a.astype(other))
    # into the unsigned type: integers wrap (as NumPy), floats in range convert exactly
    for src in [np.array([0, 1, -1, -300, 2 ** 31 - 1], np.int64),
                np.array([0, 5, 255], np.uint8), np.array([True, False])]:
        same(T(src).to(dt), src.astype(dt._np))
    f = np.array([0.0, 1.5, 1000.9, float(np.iinfo(dt._np).max) / 2], np.float64)
    same(T(f).to(dt), f.astype(dt._np))
    if dt is fiamma.uint64:
        big = np.array([2.0 ** 63, 2.0 ** 64 - 2048, 1e19], np.float64)
        same(T(big).to(dt), big.astype(np.uint64))


def test_printing():
    assert repr(fiamma.tensor([1, 65535], dtype=fiamma.uint16)) == \
        "tensor([    1, 65535], dtype=fiamma.uint16)"
    assert repr(fiamma.tensor(2 ** 64 - 1, dtype=fiamma.uint64)) == \
        "tensor(18446744073709551615, dtype=fiamma.uint64)"
    assert str(fiamma.tensor([7], dtype=fiamma.uint32)) == "tensor([7], dtype=fiamma.uint32)"


# ---- arithmetic, comparisons, bitwise -----------------------------------------------------------

BINARY = [
    ("add", lambda x, y: x + y, np.add),
    ("sub", lambda x, y: x - y, np.subtract),
    ("mul", lambda x, y: x * y, np.multiply),
    ("and", lambda x, y: x & y, np.bitwise_and),
    ("or", lambda x, y: x | y, np.bitwise_or),
    ("xor", lambda x, y: x ^ y, np.bitwise_xor),
    ("max", fiamma.maximum, np.maximum),
    ("min", fiamma.minimum, np.minimum),
    ("eq", lambda x, y: x == y, np.equal),
    ("ne", lambda x, y: x != y, np.not_equal),
    ("lt", lambda x, y: x < y, np.less),
    ("le", lambda x, y: x <= y, np.less_equal),
    ("gt", lambda x, y: x > y, np.greater),
    ("ge", lambda x, y: x >= y, np.greater_equal),
]


@pytest.mark.parametrize("dt", U, ids=U_IDS)
@pytest.mark.parametrize("name,f,g", BINARY, ids=[b[0] for b in BINARY])
def test_binary(dt, name, f, g):
    a, b = vals(dt, seed=1), vals(dt, seed=2)
    with np.errstate(all="ignore"):
        same(f(T(a), T(b)), g(a, b))
        # broadcast, non-contiguous
        a2 = np.stack([a, b])
        same(f(T(a2).t(), T(b[:2])), g(a2.T, b[:2]))


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_division_family(dt):
    a, b = vals(dt, seed=3), vals(dt, seed=4)
    b[b == 0] = 3
    same(T(a) // T(b), a // b)
    same(fiamma.floor_divide(T(a), T(b)), a // b)
    same(T(a) % T(b), a % b)
    same(fiamma.fmod(T(a), T(b)), np.fmod(a, b))
    same(fiamma.div(T(a), T(b), rounding_mode="trunc"), a // b)
    # true division gives the default float dtype
    # true division: both cast to the default float dtype first (PyTorch's integer division)
    same(T(a) / T(b), a.astype(np.float32) / b.astype(np.float32))
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        T(a) // fiamma.zeros(len(a), dtype=dt)


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_pow_shifts_unary(dt):
    a = vals(dt, seed=5)
    e = np.array([0, 1, 2, 3, 7] * 3, dt._np)[:len(a)]
    with np.errstate(all="ignore"):
        same(T(a) ** T(e), a ** e)
        same(-T(a), -a)
    bits = dt.itemsize * 8
    s = np.array([0, 1, 3, bits - 1, 5] * 3, dt._np)[:len(a)]
    same(T(a) << T(s), a << s)
    same(T(a) >> T(s), a >> s)
    same(~T(a), ~a)
    same(fiamma.abs(T(a)), a)
    same(fiamma.sign(T(a)), np.sign(a))
    same(fiamma.square(T(a[:4] % 1000)), (a[:4] % 1000) ** 2)
    same(fiamma.clamp(T(a), 5, 2 ** 15), np.clip(a, 5, 2 ** 15))
    assert fiamma.equal(T(a), T(a.copy()))
    same(fiamma.isclose(T(a), T(a)), np.ones(len(a), bool))


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_scalars(dt):
    a = vals(dt, seed=6)
    with np.errstate(all="ignore"):
        same(T(a) + 3, a + dt._np.type(3))
        same(T(a) * 2, a * dt._np.type(2))
        same(T(a) - 1, a - dt._np.type(1))
        same(2 - T(a), dt._np.type(2) - a)
    same(T(a) > 5, a > 5)
    assert (T(a) + 1.5).dtype is fiamma.float32
    y = T(a)
    y += 1
    with np.errstate(all="ignore"):
        same(y, a + dt._np.type(1))


# ---- reductions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_reductions(dt):
    a = vals(dt, seed=7).reshape(-1, 1)[:12].reshape(3, 4)
    x = T(a)
    # sums and products accumulate to int64 as PyTorch's integer reductions (the int64 wraps
    # like uint64 arithmetic; ask dtype=uint64 for the unsigned reading)
    with np.errstate(all="ignore"):
        same(x.sum(), a.sum(dtype=np.uint64).astype(np.int64))
        same(x.sum(1), a.sum(1, dtype=np.uint64).astype(np.int64))
        same(x.sum(dtype=fiamma.uint64), a.sum(dtype=np.uint64))
        same(x.prod(0), a.prod(0, dtype=np.uint64).astype(np.int64))
        same(x.cumsum(1), a.cumsum(1, dtype=np.uint64).astype(np.int64))
    same(x.max(), a.max())
    same(x.min(1).values, a.min(1))
    same(x.amax(0), a.max(0))
    same(x.argmax(1), a.argmax(1))
    same(x.argmin(), np.int64(a.argmin()))
    same(x.cummax(1).values, np.maximum.accumulate(a, 1))
    assert x.any().item() and not fiamma.zeros(3, dtype=dt).any().item()
    same(fiamma.count_nonzero(x), np.int64(np.count_nonzero(a)))
    with pytest.raises(RuntimeError, match="mean"):
        x.mean()
    same(x.double().mean(), a.astype(np.float64).mean())


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_sort_unique(dt):
    a = np.concatenate([vals(dt, 40, seed=8), vals(dt, 10, seed=8)])
    x = T(a)
    v, i = x.sort(stable=True)
    same(v, np.sort(a))
    same(i, np.argsort(a, kind="stable"))
    v, i = x.sort(descending=True, stable=True)
    same(v, np.sort(a)[::-1])
    same(x.argsort(), np.argsort(a, kind="stable"))
    same(fiamma.msort(x), np.sort(a))
    k = x.topk(5)
    same(k.values, np.sort(a)[::-1][:5])
    u, inv, cnt = fiamma.unique(x, return_inverse=True, return_counts=True)
    nu, ninv, ncnt = np.unique(a, return_inverse=True, return_counts=True)
    same(u, nu)
    same(inv, ninv.astype(np.int64))
    same(cnt, ncnt.astype(np.int64))
    s = np.sort(a)
    same(fiamma.searchsorted(T(s), T(a[:5])), np.searchsorted(s, a[:5]).astype(np.int64))
    same(x.kthvalue(3).values, np.sort(a)[2])
    same(x.median(), np.sort(a)[(len(a) - 1) // 2])
    # long lanes take the radix / vectorised paths
    big = np.random.default_rng(0).integers(0, np.iinfo(dt._np).max, 70000, dtype=dt._np,
                                            endpoint=True)
    same(fiamma.msort(T(big)), np.sort(big))
    same(T(big).sort(stable=True).indices, np.argsort(big, kind="stable"))


# ---- indexing and joining ------------------------------------------------------------------------

@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_indexing(dt):
    a = vals(dt, 12, seed=9).reshape(3, 4)
    x = T(a)
    same(x[1], a[1])
    same(x[:, ::-1], a[:, ::-1])
    same(x[[0, 2], 1:], a[[0, 2], 1:])
    same(x[x > 100], a[a > 100])
    same(fiamma.gather(x, 1, T(np.array([[0, 3], [1, 1], [2, 0]]))),
         np.take_along_axis(a, np.array([[0, 3], [1, 1], [2, 0]]), 1))
    same(x.index_select(1, T(np.array([3, 0]))), a[:, [3, 0]])
    same(fiamma.where(x > 100, x, T(a[::-1].copy())), np.where(a > 100, a, a[::-1]))
    same(fiamma.cat([x, x[:1]]), np.concatenate([a, a[:1]]))
    same(fiamma.stack([x, x]), np.stack([a, a]))
    same(fiamma.nonzero(x), np.argwhere(a))
    b = a.copy()
    y = T(a)
    top = np.iinfo(dt._np).max
    b[0, [1, 2]] = top
    y[0, [1, 2]] = top
    b[:, 0] = a[:, 3]
    y[:, 0] = T(a[:, 3].copy())
    b[b > 1000] = 5
    y[y > 1000] = 5
    same(y, b)
    z = fiamma.zeros(3, 4, dtype=dt)
    z.scatter_(1, T(np.array([[0], [1], [2]])), x[:, :1].contiguous())
    ref = np.zeros((3, 4), dt._np)
    np.put_along_axis(ref, np.array([[0], [1], [2]]), a[:, :1], 1)
    same(z, ref)
    acc = fiamma.zeros(3, dtype=dt).index_add_(0, T(np.array([0, 0, 2])), T(a[0, :3].copy()))
    with np.errstate(all="ignore"):
        ref = np.zeros(3, dt._np)
        np.add.at(ref, [0, 0, 2], a[0, :3])
    same(acc, ref)
    same(fiamma.bincount(T(np.array([0, 3, 3, 1], dt._np))), np.bincount([0, 3, 3, 1]))


def test_uint_tensor_as_index():
    x = fiamma.arange(10)
    same(x[fiamma.tensor([3, 1], dtype=fiamma.uint32)], np.array([3, 1]))
    with pytest.raises(IndexError):
        x[fiamma.tensor([2 ** 64 - 1], dtype=fiamma.uint64)]


# ---- interop and serialization -------------------------------------------------------------------

@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_numpy_and_dlpack(dt):
    a = vals(dt, seed=10)
    x = fiamma.from_numpy(a)
    assert x.dtype is dt
    a[0] = 99
    assert x[0].item() == 99  # shares memory
    n = x.numpy()
    assert n.dtype == dt._np and np.shares_memory(n, a)
    same(np.asarray(x), a)
    same(np.from_dlpack(x), a)
    y = fiamma.from_dlpack(a)
    assert y.dtype is dt
    same(y, a)


@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_save_load(dt, tmp_path):
    x = T(vals(dt, seed=11))
    buf = io.BytesIO()
    fiamma.save({"x": x, "v": x[1::2]}, buf)
    buf.seek(0)
    back = fiamma.load(buf)
    same(back["x"], x.numpy())
    same(back["v"], x.numpy()[1::2])
    from fiamma import safetensors

    p = tmp_path / "t.safetensors"
    safetensors.save_file({"x": x}, str(p))
    same(safetensors.load_file(str(p))["x"], x.numpy())
    raw = p.read_bytes()
    assert {"uint16": b'"U16"', "uint32": b'"U32"', "uint64": b'"U64"'}[dt.name] in raw


@pytest.mark.parity
@pytest.mark.parametrize("dt", U, ids=U_IDS)
def test_parity_torch_checkpoint(dt, tmp_path):
    torch = pytest.importorskip("torch")
    a = vals(dt, seed=12)
    p = tmp_path / "c.pt"
    fiamma.save({"x": T(a)}, str(p))
    t = torch.load(str(p))["x"]
    assert str(t.dtype) == f"torch.{dt.name}"
    np.testing.assert_array_equal(t.numpy(), a)
    torch.save({"y": torch.from_numpy(a.copy())}, str(p))
    same(fiamma.load(str(p))["y"], a)


@pytest.mark.parity
def test_parity_sum_dtype_torch():
    torch = pytest.importorskip("torch")
    for dt in U:
        t = torch.tensor([1, 2], dtype=getattr(torch, dt.name))
        assert str(t.sum().dtype).split(".")[1] == \
            fiamma.tensor([1, 2], dtype=dt).sum().dtype.name


# ---- unsupported ops raise, naming op and dtype --------------------------------------------------

def test_unsupported_raise_clearly():
    x = fiamma.tensor([[1, 2], [3, 4]], dtype=fiamma.uint32)
    with pytest.raises(TypeError, match="softmax.*uint32"):
        x.softmax(0)
    with pytest.raises(TypeError, match="lerp.*uint32"):
        fiamma.lerp(x, x, 0.5)
    with pytest.raises(RuntimeError, match="std.*uint32"):
        x.std()
    with pytest.raises(RuntimeError, match="linalg.det.*UInt32"):
        fiamma.linalg.det(x)
    with pytest.raises(NotImplementedError, match="histc.*uint32"):
        fiamma.histc(x)


def test_float_ops_promote_like_other_ints():
    a = np.array([1, 4, 65535], np.uint16)
    np.testing.assert_allclose(fiamma.sqrt(T(a)).numpy(), np.sqrt(a.astype(np.float32)))
    np.testing.assert_allclose(fiamma.exp(T(a[:2])).numpy(), np.exp(a[:2].astype(np.float32)),
                               rtol=1e-6)
    same(T(a) @ T(a), np.int64(a.astype(np.uint64) @ a.astype(np.uint64)).astype(np.uint16))
    m = np.arange(6, dtype=np.uint64).reshape(2, 3) * np.uint64(2 ** 62)
    same(T(m) @ T(m.T.copy()), m @ m.T)


def test_python_int_past_int64_needs_the_dtype():
    with pytest.raises(ValueError, match="Overflow"):
        fiamma.tensor([2 ** 64 - 1])
    with pytest.raises(ValueError, match="Overflow"):
        fiamma.tensor(2 ** 63)
    assert fiamma.tensor([1, 2 ** 64 - 3], dtype=fiamma.uint64).tolist() == [1, 2 ** 64 - 3]
    x = fiamma.tensor([2 ** 63, 5], dtype=fiamma.uint64)
    same(x >= 2 ** 63, np.array([True, False]))
    same(x + (2 ** 64 - 1), np.array([2 ** 63 - 1, 4], np.uint64))
    assert x.type() == "fiamma.UInt64Tensor"
