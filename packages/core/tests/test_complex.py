"""Complex dtypes (complex64, complex128): dtype rules, creation, interop, copies and casts,
byte-moving ops, the complex views and functions, arithmetic, reductions and products, checked
against NumPy on contiguous, non-contiguous, broadcast, 0-d and empty operands."""

import warnings

import numpy as np
import pytest

import fiamma as fm

RNG = np.random.default_rng(0)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def close(t, want, rtol=1e-5, atol=1e-6):
    got = t.numpy() if isinstance(t, fm.Tensor) else t
    assert got.shape == np.shape(want)
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ---- dtypes --------------------------------------------------------------------------------

def test_dtype_attributes():
    assert fm.complex64.itemsize == 8 and fm.complex128.itemsize == 16
    assert fm.cfloat is fm.complex64 and fm.cdouble is fm.complex128
    assert fm.complex64.is_complex and not fm.complex64.is_floating_point
    assert not fm.float32.is_complex and fm.complex64.is_signed
    assert fm.complex64.to_real is fm.float32 and fm.complex128.to_real is fm.float64
    assert fm.float64.to_complex is fm.complex128 and fm.float32.to_complex is fm.complex64
    assert fm.finfo(fm.complex64).eps == fm.finfo(fm.float32).eps
    with pytest.raises(TypeError):
        fm.iinfo(fm.complex64)


@pytest.mark.parametrize("a,b,want", [
    (fm.float32, fm.complex64, fm.complex64), (fm.float64, fm.complex64, fm.complex128),
    (fm.float16, fm.complex64, fm.complex64), (fm.int64, fm.complex64, fm.complex64),
    (fm.bool, fm.complex128, fm.complex128), (fm.complex64, fm.complex128, fm.complex128),
    (fm.bfloat16, fm.complex64, fm.complex64), (fm.uint8, fm.complex64, fm.complex64),
])
def test_promote_types(a, b, want):
    assert fm.promote_types(a, b) is want and fm.promote_types(b, a) is want


def test_result_type_with_scalars():
    f32, f64 = fm.ones(2), fm.ones(2, dtype=fm.float64)
    i64 = fm.ones(2, dtype=fm.int64)
    assert fm.result_type(f32, 1j) is fm.complex64
    assert fm.result_type(f64, 1j) is fm.complex128  # keeps the float's precision
    assert fm.result_type(i64, 1j) is fm.complex64  # the default complex dtype
    c = fm.ones(2, dtype=fm.complex64)
    assert fm.result_type(c, 2.5) is fm.complex64
    assert fm.result_type(c, fm.tensor(1.0, dtype=fm.float64)) is fm.complex64  # 0-d
    assert fm.result_type(c, fm.ones(2, dtype=fm.float64)) is fm.complex128


# ---- creation and interop ------------------------------------------------------------------

def test_tensor_from_python_and_numpy():
    t = fm.tensor([1 + 2j, 3.5, -1j])
    assert t.dtype is fm.complex64 and t.shape == (3,)
    assert t.tolist() == [1 + 2j, 3.5 + 0j, -1j]
    a = crand(2, 3)
    close(fm.tensor(a), a)
    assert fm.tensor(a.astype(np.complex64)).dtype is fm.complex64
    assert fm.tensor(1 + 1j).shape == () and fm.tensor(1 + 1j).item() == 1 + 1j
    assert fm.tensor([1, 2], dtype=complex).dtype is fm.complex128
    assert fm.tensor(a, dtype=fm.complex64).dtype is fm.complex64


def test_zero_copy_numpy_both_ways():
    a = crand(4, 3)
    t = fm.from_numpy(a)
    assert t.dtype is fm.complex128 and t.data_ptr() == a.ctypes.data
    a[1, 2] = 7 - 7j
    assert t[1, 2].item() == 7 - 7j
    b = t.numpy()
    assert np.shares_memory(a, b)
    c = fm.from_numpy(a[:, ::2])  # non-contiguous view
    close(c, a[:, ::2])
    assert np.asarray(t).dtype == np.complex128
    assert np.shares_memory(np.asarray(t), a)


def test_dlpack_roundtrip():
    t = fm.tensor(crand(3, 2))
    a = np.from_dlpack(t)
    assert a.dtype == np.complex128 and np.shares_memory(a, t.numpy())
    u = fm.from_dlpack(a)
    assert u.dtype is fm.complex128 and u.data_ptr() == t.data_ptr()


def test_creation_functions():
    assert fm.zeros(2, dtype=fm.complex64).tolist() == [0j, 0j]
    assert fm.ones(2, dtype=fm.complex128).tolist() == [1 + 0j, 1 + 0j]
    f = fm.full((2, 2), 1 - 2j)
    assert f.dtype is fm.complex64 and f.tolist() == [[1 - 2j] * 2] * 2
    e = fm.empty(3, dtype=fm.cdouble).fill_(2j)
    assert e.tolist() == [2j] * 3
    x = fm.zeros(4, 3, dtype=fm.complex128)[:, 1]
    x.fill_(1 + 1j)  # strided
    assert x.tolist() == [1 + 1j] * 4
    with pytest.raises(RuntimeError, match="fill_"):
        fm.zeros(2).fill_(1 + 1j)


def test_printing():
    assert repr(fm.tensor([1 + 2j, 3 - 1j])) == "tensor([1.+2.j, 3.-1.j])"
    assert repr(fm.tensor([1.5 + 0.25j], dtype=fm.complex128)) == \
        "tensor([1.5000+0.2500j], dtype=fm.complex128)".replace("fm.", "fiamma.")
    assert repr(fm.zeros(0, dtype=fm.complex128)) == "tensor([], dtype=fiamma.complex128)"
    assert "j" in str(fm.tensor(crand(3, 3)))


# ---- copies and casts ------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [fm.float32, fm.float64, fm.int64, fm.int8, fm.bool,
                                fm.float16, fm.bfloat16, fm.uint8])
def test_casts_real_to_complex_and_back(dt):
    x = fm.tensor([0, 1, 2, 3]).to(dt)
    c = x.to(fm.complex64)
    assert c.tolist() == [complex(v) for v in x.to(fm.float64).tolist()]
    c2 = x.to(fm.complex128)
    assert c2.dtype is fm.complex128
    z = fm.tensor([1.5 - 2j, 0j, -3 + 1j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        r = z.to(dt)
    want = np.array([1.5, 0, -3]).astype(np.float64)
    if dt is fm.bool:
        assert r.tolist() == [True, False, True]  # either part nonzero
    elif dt.is_floating_point:
        np.testing.assert_allclose(r.to(fm.float64).numpy(), want)
    else:
        assert r.tolist() == np.array([1, 0, -3]).astype(dt._np).tolist()  # C wrapping


def test_complex_width_casts_and_copy_():
    a = crand(5)
    t = fm.tensor(a)
    close(t.to(fm.complex64), a.astype(np.complex64))
    close(t.to(fm.complex64).to(fm.complex128), a.astype(np.complex64).astype(np.complex128))
    dst = fm.zeros(5, dtype=fm.complex64)
    dst.copy_(t)
    close(dst, a.astype(np.complex64))
    dst2 = fm.zeros(3, 5, dtype=fm.complex128)
    dst2.copy_(fm.arange(5.0))  # broadcast real into complex
    close(dst2, np.broadcast_to(np.arange(5.0), (3, 5)).astype(np.complex128))


@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_byte_moving_ops(npdt):
    a = crand(4, 6, dtype=npdt)
    t = fm.tensor(a)
    close(t[1], a[1])
    close(t[:, ::2], a[:, ::2])
    close(t.t().contiguous(), np.ascontiguousarray(a.T))
    close(t.clone(), a)
    idx = np.array([3, 0, 0, 2])
    close(t[fm.tensor(idx)], a[idx])
    close(t[:, fm.tensor([5, 1])], a[:, [5, 1]])
    m = a.real > 0
    close(t[fm.tensor(m)], a[m])
    close(fm.cat([t, t[:2]]), np.concatenate([a, a[:2]]))
    close(fm.cat([t[:, ::2], t[:, 1::2]], 1), np.concatenate([a[:, ::2], a[:, 1::2]], 1))
    close(fm.stack([t, t], 1), np.stack([a, a], 1))
    close(t.flip(0), a[::-1])
    close(t.reshape(3, 8), a.reshape(3, 8))
    close(t.unsqueeze(0).expand(2, 4, 6).contiguous(), np.broadcast_to(a, (2, 4, 6)))
    u = t.clone()
    u[1:3, 2] = fm.tensor([1j, 2j], dtype=t.dtype)
    b = a.copy()
    b[1:3, 2] = [1j, 2j]
    close(u, b)
    u[fm.tensor(m)] = 0
    b[m] = 0
    close(u, b)
    v = t.clone()
    v[fm.tensor([0, 2])] = fm.tensor(a[[1, 3]])
    b = a.copy()
    b[[0, 2]] = a[[1, 3]]
    close(v, b)


def test_index_put_accumulate_complex():
    # accumulated per part (complex gradients of advanced indexing go through it)
    a = crand(4, 3)
    v = crand(3, 3)
    idx = np.array([0, 2, 0])
    t = fm.tensor(a)
    t.index_put_((fm.tensor(idx),), fm.tensor(v), accumulate=True)
    ref = a.copy()
    np.add.at(ref, idx, v)
    close(t, ref)
    t = fm.tensor(a)
    t.index_put_((fm.tensor(idx), fm.tensor([1, 1, 2])), fm.tensor(2 - 1j, dtype=fm.complex128),
                 accumulate=True)
    ref = a.copy()
    np.add.at(ref, (idx, [1, 1, 2]), 2 - 1j)
    close(t, ref)


# ---- views and complex functions -------------------------------------------------------------

def test_real_imag_are_writable_views():
    a = crand(3, 4)
    t = fm.tensor(a)
    close(t.real, a.real)
    close(t.imag, a.imag)
    t.real[0] = 5.0
    t.imag[:, 1] = -1.0
    a.real[0] = 5.0
    a.imag[:, 1] = -1.0
    close(t, a)
    t.real = fm.zeros(3, 4, dtype=fm.float64)
    assert np.all(t.numpy().real == 0)
    x = fm.ones(2)
    assert fm.real(x) is x
    with pytest.raises(RuntimeError, match="imag"):
        x.imag
    tt = fm.tensor(a).t()  # of a non-contiguous tensor
    close(tt.imag, a.T.imag)


def test_view_as_real_and_complex_share_memory():
    a = crand(3, 2, dtype=np.complex64)
    t = fm.tensor(a)
    r = fm.view_as_real(t)
    assert r.shape == (3, 2, 2) and r.dtype is fm.float32
    close(r, a.view(np.float32).reshape(3, 2, 2))
    r[0, 0, 1] = 9.0
    assert t[0, 0].item().imag == 9.0
    c = fm.view_as_complex(r)
    assert c.dtype is fm.complex64 and c.data_ptr() == t.data_ptr()
    close(c, t.numpy())
    col = t.numpy()[:, 1]
    close(fm.view_as_real(t[:, 1]), np.stack([col.real, col.imag], -1))
    with pytest.raises(RuntimeError, match="last dimension"):
        fm.view_as_complex(fm.zeros(3, 3))
    with pytest.raises(RuntimeError, match="stride"):
        fm.view_as_complex(fm.zeros(2, 3)[:, :2].t().contiguous().t())
    with pytest.raises(RuntimeError, match="complex"):
        fm.view_as_real(fm.zeros(2))
    with pytest.raises(RuntimeError):
        fm.view_as_complex(fm.zeros(2, 2, dtype=fm.int32))


def test_conj_abs_angle_sgn_polar_complex():
    a = crand(4, 3)
    a[0, 0] = 0
    t = fm.tensor(a)
    close(fm.conj(t), np.conj(a))
    close(t.conj(), np.conj(a))
    assert not t.is_conj() and t.resolve_conj() is t
    x = fm.ones(2)
    assert x.conj() is x
    close(t.abs(), np.abs(a), rtol=1e-12)
    close(fm.abs(t[:, ::2]), np.abs(a[:, ::2]), rtol=1e-12)
    close(t.angle(), np.angle(a), rtol=1e-12)
    want = np.where(a == 0, 0, a / np.where(a == 0, 1, np.abs(a)))
    close(fm.sgn(t), want, rtol=1e-12)
    close(fm.angle(fm.tensor([-1.0, 2.0, float("nan")])),
          np.array([np.pi, 0, np.nan], np.float32))
    r, th = np.abs(a), np.angle(a)
    close(fm.polar(fm.tensor(r), fm.tensor(th)), r * np.exp(1j * th), rtol=1e-12)
    c = fm.complex(fm.tensor([1.0, 2.0]), fm.tensor([[3.0], [4.0]]))
    close(c, np.array([[1 + 3j, 2 + 3j], [1 + 4j, 2 + 4j]], np.complex64))
    with pytest.raises(RuntimeError, match="same dtype"):
        fm.complex(fm.ones(1), fm.ones(1, dtype=fm.float64))
    assert fm.is_complex(t) and t.is_complex() and not fm.ones(1).is_complex()
    u = t.clone()
    u.conj_physical_()
    close(u, np.conj(a))


# ---- arithmetic ------------------------------------------------------------------------------

OPS = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)]


@pytest.mark.parametrize("name,npf", OPS)
@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_binary_against_numpy(name, npf, npdt):
    a, b = crand(3, 4, dtype=npdt), crand(3, 4, dtype=npdt)
    ta, tb = fm.tensor(a), fm.tensor(b)
    tol = dict(rtol=1e-5, atol=1e-6) if npdt is np.complex64 else dict(rtol=1e-12, atol=1e-12)
    f = getattr(fm, name)
    close(f(ta, tb), npf(a, b), **tol)
    close(f(ta[:, ::2], tb[:, 1::2]), npf(a[:, ::2], b[:, 1::2]), **tol)  # non-contiguous
    close(f(ta, tb[0]), npf(a, b[0]), **tol)  # broadcast
    close(f(ta, fm.tensor(b[0, 0])), npf(a, b[0, 0]), **tol)  # 0-d
    close(f(ta[:0], tb[:0]), npf(a[:0], b[:0]), **tol)  # empty
    close(f(ta, 2.5), npf(a, npdt(2.5)), **tol)
    close(f(ta, 1 - 2j), npf(a, npdt(1 - 2j)), **tol)
    close(f(ta.t(), tb.t()), npf(a.T, b.T), **tol)


def test_operators_and_mixed_dtypes():
    a = crand(5, dtype=np.complex64)
    t = fm.tensor(a)
    close(t * t, a * a)
    close(t + 1, a + 1)
    close(2 * t, 2 * a)
    close(1j - t, np.complex64(1j) - a)
    close(1 / t, np.complex64(1) / a)
    close(-t, -a)
    r = fm.arange(5.0)
    close(t + r, a + np.arange(5.0, dtype=np.float32))
    close(r * 1j, np.arange(5.0, dtype=np.float32) * np.complex64(1j))
    d = fm.arange(5.0, dtype=fm.float64)
    close(t * d, a * np.arange(5.0))  # float64 + complex64 -> complex128
    close(fm.arange(5) + t, (np.arange(5) + a).astype(np.complex64))  # int + c64 -> c64
    close(fm.tensor([1, 2]) / fm.tensor([1j, 2j]), np.array([-1j, -1j], np.complex64))
    u = t.clone()
    u += t
    u *= 2j
    close(u, (a + a) * np.complex64(2j))
    u.add_(t, alpha=2)
    close(u, (a + a) * np.complex64(2j) + 2 * a)
    with pytest.raises(RuntimeError):
        r += t  # complex result into a real tensor


def test_comparisons():
    a = np.array([1 + 1j, 2, 3j], np.complex64)
    t = fm.tensor(a)
    assert (t == fm.tensor([1 + 1j, 2, 0])).tolist() == [True, True, False]
    assert (t != 2).tolist() == [True, False, True]
    assert (t == t).all().item()
    for op in ("lt", "le", "gt", "ge", "maximum", "minimum", "remainder", "floor_divide"):
        with pytest.raises((TypeError, RuntimeError)):
            getattr(fm, op)(t, t)
    with pytest.raises((TypeError, RuntimeError)):
        t < 1


@pytest.mark.parametrize("name,npf", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos),
    ("tan", np.tan), ("tanh", np.tanh), ("sinh", np.sinh), ("cosh", np.cosh),
    ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("log10", np.log10),
    ("log2", np.log2), ("reciprocal", np.reciprocal), ("neg", np.negative),
    ("square", np.square), ("expm1", np.expm1), ("log1p", np.log1p),
    ("rsqrt", lambda z: 1 / np.sqrt(z)), ("sigmoid", lambda z: 1 / (1 + np.exp(-z))),
    ("exp2", lambda z: 2 ** z),
])
def test_unary_against_numpy(name, npf):
    a = crand(3, 4)
    t = fm.tensor(a)
    close(getattr(fm, name)(t), npf(a), rtol=1e-10, atol=1e-12)
    close(getattr(t[:, ::3], name)(), npf(a[:, ::3]), rtol=1e-10, atol=1e-12)
    close(getattr(fm, name)(t[:0]), npf(a[:0]))
    a32 = a.astype(np.complex64)
    close(getattr(fm, name)(fm.tensor(a32)), npf(a32).astype(np.complex64), rtol=1e-4,
          atol=1e-5)


def test_predicates_and_pow():
    a = np.array([1 + 1j, complex(np.nan, 0), complex(np.inf, 1), 0], np.complex128)
    t = fm.tensor(a)
    assert t.isnan().tolist() == np.isnan(a).tolist()
    assert t.isinf().tolist() == np.isinf(a).tolist()
    assert t.isfinite().tolist() == np.isfinite(a).tolist()
    b = crand(4)
    close(fm.tensor(b) ** 2, b ** 2, rtol=1e-12)
    close(fm.pow(fm.tensor(b), fm.tensor(b)), b ** b, rtol=1e-10)
    close(fm.tensor(b) ** 0.5, b ** 0.5, rtol=1e-12)
    with pytest.raises(TypeError):
        fm.tensor(b).sign()
    with pytest.raises(TypeError):
        fm.tensor(b).floor()


# ---- reductions and products ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "mean", "prod"])
def test_reductions(name):
    a = crand(3, 4, 5) * 0.5
    t = fm.tensor(a)
    npf = getattr(np, name)
    close(getattr(t, name)(), npf(a), rtol=1e-10)
    close(getattr(t, name)(1), npf(a, axis=1), rtol=1e-10)
    close(getattr(t, name)((0, 2), keepdim=True) if name != "prod" else t.prod(2, keepdim=True),
          npf(a, axis=(0, 2), keepdims=True) if name != "prod" else npf(a, axis=2,
                                                                        keepdims=True),
          rtol=1e-10)
    close(getattr(t[:, ::2], name)(0), npf(a[:, ::2], axis=0), rtol=1e-10)
    if name != "mean":
        close(getattr(t[:0], name)(), npf(a[:0]))
    a32 = a.astype(np.complex64)
    close(getattr(fm.tensor(a32), name)(), npf(a32), rtol=1e-4)


@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_matmul_family(npdt):
    tol = dict(rtol=1e-4, atol=1e-4) if npdt is np.complex64 else dict(rtol=1e-10, atol=1e-10)
    a, b = crand(5, 3, dtype=npdt), crand(3, 4, dtype=npdt)
    ta, tb = fm.tensor(a), fm.tensor(b)
    close(ta @ tb, a @ b, **tol)
    close(fm.mm(ta, tb), a @ b, **tol)
    close(ta.t().contiguous().t() @ tb, a @ b, **tol)
    x, y = crand(2, 5, 3, dtype=npdt), crand(2, 3, 4, dtype=npdt)
    close(fm.bmm(fm.tensor(x), fm.tensor(y)), x @ y, **tol)
    close(fm.matmul(fm.tensor(x), tb), x @ b, **tol)
    v, w = crand(3, dtype=npdt), crand(3, dtype=npdt)
    close(fm.dot(fm.tensor(v), fm.tensor(w)), np.dot(v, w), **tol)
    close(fm.vdot(fm.tensor(v), fm.tensor(w)), np.vdot(v, w), **tol)
    close(ta @ fm.tensor(v), a @ v, **tol)
    c = crand(5, 4, dtype=npdt)
    close(fm.addmm(fm.tensor(c), ta, tb, beta=0.5, alpha=2), 0.5 * c + 2 * (a @ b), **tol)
    close(fm.einsum("ij,jk->ik", ta, tb), a @ b, **tol)
    close(fm.einsum("bij,bjk->bik", fm.tensor(x), fm.tensor(y)), x @ y, **tol)
    with pytest.raises(RuntimeError):
        fm.mm(ta, fm.ones(3, 4, dtype=fm.float32 if npdt is np.complex64 else fm.float64))


# ---- another device (the xp reference device, and CUDA when present) ----------------------------

def test_on_device(device):
    a, b = crand(3, 4, dtype=np.complex64), crand(3, 4, dtype=np.complex64)
    ta, tb = fm.tensor(a).to(device), fm.tensor(b).to(device)
    assert ta.dtype is fm.complex64 and ta.device.type == fm.device(device).type
    close((ta * tb).cpu(), a * b)
    close((ta + 1j).cpu(), a + np.complex64(1j))
    close(ta.exp().cpu(), np.exp(a), rtol=1e-4)
    close(ta.abs().cpu(), np.abs(a))
    close(ta.sum(1).cpu(), a.sum(1), rtol=1e-4)
    close((ta @ tb.t()).cpu(), a @ b.T, rtol=1e-4, atol=1e-4)
    close(ta.real.cpu(), a.real)
    close(fm.view_as_real(ta).cpu(), a.view(np.float32).reshape(3, 4, 2))
    close(fm.conj(ta).cpu(), np.conj(a))
    close(fm.cat([ta, tb]).cpu(), np.concatenate([a, b]))


# ---- parity with PyTorch ------------------------------------------------------------------------

@pytest.mark.parity
def test_parity_with_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = crand(3, 4, dtype=np.complex64)
        ta, tt = fm.tensor(a), torch.tensor(a)
        assert repr(ta) == repr(tt).replace("torch.", "fiamma.")
        assert repr(fm.tensor([1 + 2j, -3.25j])) == repr(torch.tensor([1 + 2j, -3.25j]))
        for x, y in [(ta, tt), (ta.sgn(), tt.sgn()), (ta.angle(), tt.angle()),
                     (ta.abs(), tt.abs()), (ta.exp(), tt.exp()), (ta / (ta + 1), tt / (tt + 1)),
                     (ta.sum(0), tt.sum(0)), (ta @ ta.t(), tt @ tt.t()), (ta.sqrt(), tt.sqrt())]:
            assert str(x.dtype).split(".")[1] == str(y.dtype).split(".")[1]
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
        for d1 in (fm.float16, fm.float32, fm.float64, fm.int64, fm.complex128, fm.bool):
            for d2 in (fm.complex64, fm.complex128):
                t1, t2 = getattr(torch, d1.name), getattr(torch, d2.name)
                assert fm.promote_types(d1, d2).name == str(torch.promote_types(t1, t2)
                                                            ).split(".")[1] or d1 is fm.float16
        for v in (1j, 2.5):
            for dt in (fm.float32, fm.float64, fm.int32, fm.complex64):
                got = fm.result_type(fm.ones(2, dtype=dt), v)
                want = torch.result_type(torch.ones(2, dtype=getattr(torch, dt.name)), v)
                assert got.name == str(want).split(".")[1]
        z = torch.tensor([1.5 - 2j])
        assert fm.tensor([1.5 - 2j]).to(fm.int32).tolist() == z.to(torch.int32).tolist()
        assert fm.tensor([0.5j]).to(fm.bool).tolist() == torch.tensor([0.5j]).to(
            torch.bool).tolist()


# ---- serialization ------------------------------------------------------------------------------

def test_save_load_pickle_safetensors():
    import io
    import pickle

    from fiamma import safetensors as S

    t = fm.tensor(crand(2, 3))
    b = io.BytesIO()
    fm.save({"a": t, "b": t.to(fm.complex64)[:, 1]}, b)
    b.seek(0)
    got = fm.load(b)
    close(got["a"], t.numpy())
    close(got["b"], t.numpy().astype(np.complex64)[:, 1])
    close(pickle.loads(pickle.dumps(t)), t.numpy())
    c = t.to(fm.complex64)
    close(S.load(S.save({"c": c}))["c"], c.numpy())
    with pytest.raises(TypeError, match="complex128"):
        S.save({"t": t})


@pytest.mark.parity
def test_checkpoints_with_torch():
    import io

    torch = pytest.importorskip("torch")
    b = io.BytesIO()
    torch.save(torch.tensor([1 + 2j, -3j], dtype=torch.complex128), b)
    b.seek(0)
    got = fm.load(b)
    assert got.dtype is fm.complex128 and got.tolist() == [1 + 2j, -3j]
    b = io.BytesIO()
    fm.save(fm.tensor([1 + 2j, -3j]), b)
    b.seek(0)
    assert torch.load(b).tolist() == [1 + 2j, -3j]


def test_isclose_where_logical_and_assert_close():
    a = np.array([1 + 1j, complex(np.nan, 0), complex(np.inf, 0), 2j, 0], np.complex64)
    b = np.array([1 + 1.000001j, complex(np.nan, 0), complex(np.inf, 0), 2.1j, 0], np.complex64)
    ta, tb = fm.tensor(a), fm.tensor(b)
    assert fm.isclose(ta, tb).tolist() == [True, False, True, False, True]
    assert fm.isclose(ta, tb, equal_nan=True).tolist() == [True, True, True, False, True]
    assert not fm.allclose(ta, tb) and fm.allclose(ta[:1], tb[:1])
    c = ta.real > 0.5
    close(fm.where(c, ta, 0), np.where(c.numpy(), a, 0))
    close(fm.where(c, fm.ones(5), 1j), np.where(c.numpy(), 1, 1j).astype(np.complex64))
    assert fm.tensor([0j, 1j]).any().item() and not fm.tensor([0j, 1j]).all().item()
    assert fm.count_nonzero(ta).item() == 4
    assert fm.nonzero(fm.tensor([0j, 1j, 1 + 0j])).tolist() == [[1], [2]]
    fm.testing.assert_close(ta[:1], ta[:1])
    with pytest.raises(AssertionError):
        fm.testing.assert_close(fm.tensor([1 + 1j]), fm.tensor([1 - 1j]))  # imag parts differ


@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_index_ops_through_pairs(npdt):
    a = crand(3, 4, dtype=npdt)
    z = fm.tensor(a)
    idx = np.array([[3, 0], [1, 1], [2, 3]])
    close(z.gather(1, fm.tensor(idx)), np.take_along_axis(a, idx, 1))
    close(z[:, ::2].gather(1, fm.tensor(idx % 2)), np.take_along_axis(a[:, ::2], idx % 2, 1))
    close(z.index_select(1, fm.tensor([2, 0])), a[:, [2, 0]])
    close(fm.take(z, fm.tensor([0, 11])), a.reshape(-1)[[0, 11]])
    got = fm.zeros(3, 4, dtype=z.dtype).scatter(1, fm.tensor(idx[:, :1]), z[:, :1])
    want = np.zeros_like(a)
    np.put_along_axis(want, idx[:, :1], a[:, :1], 1)
    close(got, want)
    got = fm.zeros(4, dtype=z.dtype).index_add(0, fm.tensor([0, 0, 3, 1]), z[0])
    want = np.zeros(4, npdt)
    np.add.at(want, [0, 0, 3, 1], a[0])
    close(got, want, rtol=1e-5)
    got = fm.zeros(4, dtype=z.dtype).scatter_add(0, fm.tensor([2, 2, 2, 0]), z[1])
    want = np.zeros(4, npdt)
    np.add.at(want, [2, 2, 2, 0], a[1])
    close(got, want, rtol=1e-5)
    close(z.index_fill(1, fm.tensor([0]), 1j), np.where(np.arange(4) == 0, 1j, a).astype(npdt))
    with pytest.raises(TypeError, match="scatter_reduce"):
        fm.zeros(4, dtype=z.dtype).scatter_reduce(0, fm.tensor([1]), z[0, :1], "amax")


def test_var_std_norm_scans_and_random():
    a = crand(3, 5)
    z = fm.tensor(a)
    close(z.var(), np.var(a, ddof=1), rtol=1e-12)
    close(z.std(1), np.std(a, 1, ddof=1), rtol=1e-12)
    close(z.var(0, correction=0), np.var(a, 0), rtol=1e-12)
    v, m = fm.var_mean(z, 1)
    close(v, np.var(a, 1, ddof=1), rtol=1e-12)
    close(m, a.mean(1), rtol=1e-12)
    close(z.norm(), np.linalg.norm(a), rtol=1e-12)
    close(fm.linalg.vector_norm(z, 1, dim=0), np.abs(a).sum(0), rtol=1e-12)
    close(z.cumsum(1), np.cumsum(a, 1), rtol=1e-12)
    close(z[:, ::2].cumprod(0), np.cumprod(a[:, ::2], 0), rtol=1e-12)
    close(fm.tensor(1 + 1j).cumsum(0), np.array(1 + 1j, np.complex64))
    g = fm.Generator().manual_seed(0)
    r = fm.randn(100000, dtype=fm.complex128, generator=g)
    assert r.dtype is fm.complex128
    assert abs(r.real.var().item() - 0.5) < 0.02 and abs(r.imag.var().item() - 0.5) < 0.02
    u = fm.rand(1000, dtype=fm.complex64, generator=g).numpy()
    assert u.real.min() >= 0 and u.real.max() < 1 and u.imag.min() >= 0 and u.imag.max() < 1


def test_eye_complex():
    close(fm.eye(2, 3, dtype=fm.complex128), np.eye(2, 3, dtype=np.complex128))
    out = fm.ones(3, 3, dtype=fm.complex64)
    fm.eye(3, out=out)
    close(out, np.eye(3, dtype=np.complex64))


# ---- ordering, scatter reductions, ranges ------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda z: fm.sort(z), lambda z: fm.argsort(z), lambda z: fm.topk(z, 1),
    lambda z: fm.msort(z), lambda z: fm.unique(z), lambda z: fm.kthvalue(z, 1),
    lambda z: z.median(), lambda z: z.max(), lambda z: fm.cummax(z, 0),
    lambda z: fm.searchsorted(z, z),
    lambda z: fm.zeros(2, dtype=z.dtype).scatter_reduce(0, fm.tensor([0, 1, 0]), z, "amax"),
    lambda z: fm.zeros(2, dtype=z.dtype).scatter_reduce(0, fm.tensor([0, 1, 0]), z, "amin"),
])
def test_orderings_raise_for_complex(fn):
    # PyTorch has no order on complex numbers: sort, topk, max... and amax/amin reductions raise
    z = fm.tensor([1 + 2j, 3 - 1j, 0.5j])
    with pytest.raises((TypeError, RuntimeError), match="complex"):
        fn(z)


def _np_scatter(a, idx, v, ufunc):
    out = a.copy()
    ufunc.at(out, idx, v)
    return out


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_mean_sum(include_self):
    a = crand(3, 4)
    v = crand(5, 4)
    idx = np.array([[0, 2, 1, 0], [2, 2, 0, 1], [0, 1, 1, 1], [1, 0, 2, 2], [0, 0, 0, 0]])
    t, tv, ti = fm.tensor(a), fm.tensor(v), fm.tensor(idx)
    cols = np.broadcast_to(np.arange(4), idx.shape)
    base = a.copy()
    hit = np.zeros(a.shape, bool)
    hit[idx, cols] = True
    if not include_self:
        base[hit] = 1
    close(t.scatter_reduce(0, ti, tv, "prod", include_self=include_self),
          _np_scatter(base, (idx, cols), v, np.multiply), rtol=1e-12)
    if not include_self:
        base[hit] = 0
    close(t.scatter_reduce(0, ti, tv, "sum", include_self=include_self),
          _np_scatter(base, (idx, cols), v, np.add), rtol=1e-12)
    cnt = _np_scatter(np.ones(a.shape) if include_self else np.where(hit, 0.0, 1.0),
                      (idx, cols), np.ones(idx.shape), np.add)
    mean = _np_scatter(base, (idx, cols), v, np.add) / np.where(hit | include_self, cnt, 1)
    close(t.scatter_reduce(0, ti, tv, "mean", include_self=include_self),
          np.where(hit, mean, a), rtol=1e-12)
    # the legacy reduce= forms and a scalar value
    close(t.scatter(0, ti, tv, reduce="multiply"), _np_scatter(a, (idx, cols), v, np.multiply),
          rtol=1e-12)
    close(t.scatter(0, ti, value=2j, reduce="multiply"),
          _np_scatter(a, (idx, cols), np.full(idx.shape, 2j), np.multiply), rtol=1e-12)
    with pytest.raises(IndexError, match="out of bounds"):
        t.scatter(0, fm.tensor([[5, 0, 0, 0]]), tv, reduce="multiply")


def test_complex_linspace_logspace_and_arange():
    close(fm.linspace(0, 1 + 1j, 5), np.linspace(0, 1 + 1j, 5).astype(np.complex64))
    close(fm.linspace(-1j, 2, 4, dtype=fm.complex128), np.linspace(-1j, 2, 4))
    close(fm.linspace(0, 1, 3, dtype=fm.complex64), np.linspace(0, 1, 3).astype(np.complex64))
    close(fm.logspace(0, 1 + 1j, 4, dtype=fm.complex128), np.logspace(0, 1 + 1j, 4),
          rtol=1e-12)
    close(fm.logspace(0, 2j, 3, base=2, dtype=fm.complex128),
          np.logspace(0, 2j, 3, base=2), rtol=1e-12)
    assert fm.linspace(1j, 2j, 0).shape == (0,)
    out = fm.empty(3, dtype=fm.complex128)
    assert fm.linspace(0, 2j, 3, out=out) is out and out.tolist() == [0j, 1j, 2j]
    with pytest.raises(RuntimeError, match="need a complex dtype"):
        fm.linspace(0, 1j, 3, dtype=fm.float32)
    with pytest.raises(TypeError, match="arange: not implemented for complex"):
        fm.arange(0, 3, dtype=fm.complex64)
    with pytest.raises(TypeError, match="arange: not implemented for complex"):
        fm.arange(3 + 1j)


@pytest.mark.parity
def test_ranges_and_scatter_parity_with_torch():
    torch = pytest.importorskip("torch")
    for args, kw in (((0, 1 + 1j, 3), {}), ((0, 1, 3), {"dtype": "complex64"})):
        kt = {k: getattr(torch, v) for k, v in kw.items()}
        kf = {k: getattr(fm, v) for k, v in kw.items()}
        np.testing.assert_allclose(fm.linspace(*args, **kf).numpy(),
                                   torch.linspace(*args, **kt).numpy())
        np.testing.assert_allclose(fm.logspace(*args, **kf).numpy(),
                                   torch.logspace(*args, **kt).numpy(), rtol=1e-6)
    z = np.array([1 + 2j, 3 - 1j, 0.5j], np.complex64)
    for red in ("prod", "mean", "sum"):
        for inc in (True, False):
            want = torch.ones(2, dtype=torch.complex64).scatter_reduce(
                0, torch.tensor([0, 0, 1]), torch.tensor(z), red, include_self=inc)
            got = fm.ones(2, dtype=fm.complex64).scatter_reduce(
                0, fm.tensor([0, 0, 1]), fm.tensor(z), red, include_self=inc)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_logsumexp_logcumsumexp_complex():
    # the principal log of the sum of exponentials, shifted by the largest real part
    a = crand(3, 4) * 30
    t = fm.tensor(a)
    close(fm.logsumexp(t, 1), np.log(np.exp(a - a.real.max(1, keepdims=True)).sum(1))
          + a.real.max(1), rtol=1e-10)
    close(fm.logsumexp(t, (0, 1), keepdim=True).reshape(()),
          np.log(np.exp(a - a.real.max()).sum()) + a.real.max(), rtol=1e-10)
    m = a.real.max(0, keepdims=True)
    close(fm.logcumsumexp(t, 0), np.log(np.cumsum(np.exp(a - m), 0)) + m, rtol=1e-10)


def test_cov_corrcoef_trapezoid_complex():
    a = crand(3, 5)
    t = fm.tensor(a)
    close(fm.cov(t), np.cov(a), rtol=1e-10)
    r = np.corrcoef(a)
    close(fm.corrcoef(t), np.clip(r.real, -1, 1) + 1j * np.clip(r.imag, -1, 1), rtol=1e-10)
    close(fm.trapezoid(t), np.trapezoid(a) if hasattr(np, "trapezoid") else np.trapz(a),
          rtol=1e-10)
    close(fm.cumulative_trapezoid(t, dim=0)[-1], (a[:-1] + a[1:]).sum(0) / 2, rtol=1e-10)
    with pytest.raises(RuntimeError, match="deg2rad is not supported for complex"):
        fm.deg2rad(t)
