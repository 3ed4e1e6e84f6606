"""torch.histogramdd, igamma/igammac, the top-level gcd_/lcm_/ldexp_ and the deprecated IPU/XLA
autocast state functions: NumPy references and (with PyTorch installed) PyTorch's results."""

import warnings

import numpy as np
import pytest

import fiamma

CASES = [
    ((50, 3), dict(bins=4)),
    ((6, 10, 2), dict(bins=[3, 5])),
    ((40, 2), dict(bins=3, range=[-1.0, 1.0, -2.0, 2.0])),
    ((40, 2), dict(bins=[3, 4], density=True)),
    ((40, 3), dict(bins=2, weight=True, density=True)),
    ((40, 2), dict(bins=[[-1.0, 0.0, 0.5, 2.0], [-3.0, 0.0, 3.0]])),
    ((40, 2), dict(bins=[[-1.0, 0.0, 0.5, 2.0], [-3.0, -1.0, 0.0, 3.0]], weight=True)),
]


def _call(lib, x, kw):
    kw = dict(kw)
    if kw.get("weight"):
        kw["weight"] = lib.tensor(np.abs(x[..., 0]) + 0.5)
    kw["bins"] = kw["bins"] if isinstance(kw["bins"], int) else [
        lib.tensor(np.array(b, dtype=x.dtype)) if isinstance(b, list) else b for b in kw["bins"]]
    h, edges = lib.histogramdd(lib.tensor(x), **kw)
    return h.numpy(), [e.numpy() for e in edges]


@pytest.mark.parametrize("shape,kw", CASES)
def test_histogramdd_equals_numpy(shape, kw):
    x = np.random.default_rng(0).standard_normal(shape)
    h, edges = _call(fiamma, x, kw)
    pts = x.reshape(-1, shape[-1])
    w = np.abs(pts[:, 0]) + 0.5 if kw.get("weight") else None
    bins = kw["bins"] if isinstance(kw["bins"], int) else [
        np.array(b) if isinstance(b, list) else b for b in kw["bins"]]
    rng = None if kw.get("range") is None else list(zip(kw["range"][::2], kw["range"][1::2]))
    ref, ref_edges = np.histogramdd(pts, bins=bins, range=rng, weights=w,
                                    density=kw.get("density", False))
    np.testing.assert_allclose(h, ref, rtol=1e-12, atol=0)
    for a, b in zip(edges, ref_edges):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_histogramdd_result_type_and_equal_min_max():
    r = fiamma.histogramdd(fiamma.tensor([[1.0, 2.0], [1.0, 3.0]]), bins=2)
    assert type(r).__name__ == "histogramdd" and r.hist is r[0]
    assert isinstance(r.bin_edges, tuple) and len(r.bin_edges) == 2
    # a dimension whose values are all equal gets the range value +- 0.5
    assert r.bin_edges[0].tolist() == [0.5, 1.0, 1.5]
    assert r.hist.dtype == fiamma.float32 and r.hist.sum().item() == 2.0


@pytest.mark.parametrize("args,kw,msg", [
    (([1.0, 2.0],), dict(bins=2), "at least 2 dimensions"),
    (([[1, 2]],), dict(bins=2), "floating-point"),
    (([[1.0, 2.0]],), dict(bins=[2, 2, 2]), "expected 2 sequences"),
    (([[1.0, 2.0]],), dict(bins=2, range=[0.0, 1.0]), "range to have 4 elements"),
    (([[1.0, 2.0]],), dict(bins=0), "bins must be > 0"),
    (([[1.0, 2.0]],), dict(bins=2, range=[1.0, 0.0, 0.0, 1.0]), "max must be larger than min"),
])
def test_histogramdd_rejects_bad_input(args, kw, msg):
    x = fiamma.tensor(*args)
    with pytest.raises(RuntimeError, match=msg):
        fiamma.histogramdd(x, **kw)


def test_histogramdd_refuses_mixed_bins():
    with pytest.raises(TypeError, match="histogramdd: bins must be"):
        fiamma.histogramdd(fiamma.zeros(3, 2), bins=[fiamma.tensor([0.0, 1.0]), 2])


def test_igamma_is_gammainc():
    a = fiamma.tensor([0.5, 1.0, 3.0], dtype=fiamma.float64)
    x = fiamma.tensor([0.3, 2.0, 1.5], dtype=fiamma.float64)
    np.testing.assert_array_equal(fiamma.igamma(a, x).numpy(),
                                  fiamma.special.gammainc(a, x).numpy())
    np.testing.assert_array_equal(a.igammac(x).numpy(), fiamma.special.gammaincc(a, x).numpy())
    # P(1, x) = 1 - exp(-x)
    np.testing.assert_allclose(fiamma.igamma(a, x)[1].item(), 1 - np.exp(-2.0), rtol=1e-14)
    b = a.clone()
    assert b.igamma_(x) is b
    np.testing.assert_array_equal(b.numpy(), fiamma.special.gammainc(a, x).numpy())
    c = a.clone()
    c.igammac_(x)
    np.testing.assert_allclose(b.numpy() + c.numpy(), 1.0, rtol=1e-14)


def test_top_level_inplace_gcd_lcm_ldexp():
    a = fiamma.tensor([12, -9, 0])
    assert fiamma.gcd_(a, fiamma.tensor([8, 6, 5])) is a and a.tolist() == [4, 3, 5]
    b = fiamma.tensor([4, 6])
    fiamma.lcm_(b, fiamma.tensor([6, 4]))
    assert b.tolist() == [12, 12]
    c = fiamma.tensor([1.0, 3.0])
    fiamma.ldexp_(c, fiamma.tensor([2, -1]))
    assert c.tolist() == [4.0, 1.5]


def test_ipu_xla_autocast_state_functions():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert fiamma.get_autocast_ipu_dtype() == fiamma.float16
        assert fiamma.get_autocast_xla_dtype() == fiamma.bfloat16
        assert fiamma.is_autocast_ipu_enabled() is False
        fiamma.set_autocast_xla_enabled(True)
        fiamma.set_autocast_ipu_dtype(fiamma.bfloat16)
        try:
            assert fiamma.is_autocast_xla_enabled() is True
            assert fiamma.get_autocast_ipu_dtype() == fiamma.bfloat16
            # CPU autocast is unaffected: no op runs on those devices
            assert fiamma.is_autocast_enabled("cpu") is False
            assert (fiamma.ones(2, 2) @ fiamma.ones(2, 2)).dtype == fiamma.float32
        finally:
            fiamma.set_autocast_xla_enabled(False)
            fiamma.set_autocast_ipu_dtype(fiamma.float16)
        with pytest.raises(TypeError, match="enabled must be a bool"):
            fiamma.set_autocast_ipu_enabled(1)
    assert all(issubclass(x.category, DeprecationWarning) for x in w)
    assert "get_autocast_dtype('ipu')" in str(w[0].message)


@pytest.mark.parity
@pytest.mark.parametrize("shape,kw", CASES)
def test_histogramdd_equals_pytorch(shape, kw):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    h, edges = _call(fiamma, x, kw)
    th, tedges = _call(torch, x, kw)
    np.testing.assert_allclose(h, th, rtol=1e-6, atol=0)
    for a, b in zip(edges, tedges):  # PyTorch's float32 linspace may differ by one ulp
        np.testing.assert_allclose(a, b, rtol=2e-7, atol=1e-7)


# ---- legacy typed storages, storage_type, from_file ---------------------------------------

LEGACY = {"BFloat16Storage": "bfloat16", "BoolStorage": "bool", "ByteStorage": "uint8",
          "CharStorage": "int8", "DoubleStorage": "float64", "FloatStorage": "float32",
          "HalfStorage": "float16", "IntStorage": "int32", "LongStorage": "int64",
          "ShortStorage": "int16", "ComplexFloatStorage": "complex64",
          "ComplexDoubleStorage": "complex128"}


@pytest.mark.parametrize("name,dtype", sorted(LEGACY.items()))
def test_legacy_storage_classes(name, dtype):
    cls = getattr(fiamma, name)
    dt = getattr(fiamma, dtype)
    assert cls.dtype is dt
    s = cls(3)
    assert type(s) is fiamma.TypedStorage and s.dtype is dt and s.size() == 3
    assert isinstance(s, cls) and isinstance(s, fiamma.TypedStorage)
    other = fiamma.FloatStorage if dt is not fiamma.float32 else fiamma.DoubleStorage
    assert not isinstance(s, other)
    x = fiamma.zeros(2, dtype=dt)
    assert x.storage_type() is cls and isinstance(x.storage(), cls)
    w = cls(wrap_storage=x.untyped_storage())
    assert w.size() == 2 and w.data_ptr() == x.data_ptr()


def test_legacy_storage_values_and_errors():
    assert fiamma.DoubleStorage([1, 2.5]).tolist() == [1.0, 2.5]
    assert fiamma.Storage is fiamma.FloatStorage
    assert fiamma.FloatStorage.from_buffer(b"\x00\x00\x80?", "little").tolist() == [1.0]
    assert fiamma.FloatStorage.from_buffer(b"?\x80\x00\x00", "big").tolist() == [1.0]
    assert fiamma.ShortStorage.from_buffer(b"\x01\x02", "big").tolist() == [258]
    with pytest.raises(RuntimeError, match="FloatStorage: unexpected keyword"):
        fiamma.FloatStorage(2, dtype=fiamma.float64)


def test_from_file(tmp_path):
    p = tmp_path / "a.bin"
    np.arange(6, dtype=np.float32).tofile(p)
    t = fiamma.from_file(str(p), False, 5)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    t[0] = 9.0  # copy-on-write: the file keeps its values
    assert np.fromfile(p, dtype=np.float32)[0] == 0.0
    q = tmp_path / "b.bin"
    s = fiamma.from_file(str(q), True, 4, dtype=fiamma.int32)
    s.fill_(7)
    del s
    assert np.fromfile(q, dtype=np.int32).tolist() == [7, 7, 7, 7]
    with pytest.raises(RuntimeError, match="smaller than the required mapping size"):
        fiamma.from_file(str(p), False, 100)


@pytest.mark.parity
def test_legacy_storages_match_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    for name, dtype in LEGACY.items():
        assert str(getattr(torch, name).dtype).split(".")[1] == dtype
        x, y = torch.zeros(1, dtype=getattr(torch, dtype)), fiamma.zeros(1, dtype=getattr(
            fiamma, dtype))
        assert x.storage_type().__name__ == y.storage_type().__name__ == name
    p = tmp_path / "c.bin"
    np.arange(4, dtype=np.float64).tofile(p)
    assert fiamma.from_file(str(p), False, 4, dtype=fiamma.float64).tolist() == \
        torch.from_file(str(p), False, 4, dtype=torch.float64).tolist()


def test_older_cpu_gpu_autocast_state_functions():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert fiamma.get_autocast_cpu_dtype() == fiamma.bfloat16
        assert fiamma.get_autocast_gpu_dtype() == fiamma.float16
        assert fiamma.is_autocast_cpu_enabled() is False
        fiamma.set_autocast_cpu_enabled(True)
        try:
            assert fiamma.is_autocast_enabled("cpu")
            fiamma.set_autocast_cpu_dtype(fiamma.float16)
            assert fiamma.get_autocast_dtype("cpu") == fiamma.float16
        finally:
            fiamma.set_autocast_cpu_enabled(False)
            fiamma.set_autocast_cpu_dtype(fiamma.bfloat16)
        fiamma.set_autocast_gpu_dtype(fiamma.bfloat16)
        assert fiamma.get_autocast_dtype("cuda") == fiamma.bfloat16
        fiamma.set_autocast_gpu_dtype(fiamma.float16)
    assert len(w) == 9 and all(x.category is DeprecationWarning for x in w)
    assert fiamma.GradScaler is fiamma.amp.GradScaler


def test_autocast_cache_switch_and_nesting():
    assert fiamma.is_autocast_cache_enabled() is True
    with fiamma.autocast("cpu", cache_enabled=False):
        assert fiamma.is_autocast_cache_enabled() is False
    assert fiamma.is_autocast_cache_enabled() is True
    fiamma.set_autocast_cache_enabled(False)
    try:
        with fiamma.autocast("cpu") as ac:  # cache_enabled=None takes the switch
            assert ac._cache_enabled is False
    finally:
        fiamma.set_autocast_cache_enabled(True)
    assert fiamma.autocast_increment_nesting() == 1
    assert fiamma.autocast_increment_nesting() == 2
    assert fiamma.autocast_decrement_nesting() == 1
    assert fiamma.autocast_decrement_nesting() == 0


def test_autocast_nesting_counter_drops_the_cache_at_zero():
    pytest.importorskip("fiamma.autograd")
    # the parameters' cached casts are dropped when the outermost region closes
    w = fiamma.randn(3, 3, dtype=fiamma.float32, requires_grad=True)
    fiamma.autocast_increment_nesting()
    fiamma.set_autocast_enabled("cpu", True)
    try:
        fiamma.mm(fiamma.ones(1, 3), w)
        assert len(fiamma._autocast._tls.cache) == 1
    finally:
        fiamma.set_autocast_enabled("cpu", False)
    assert fiamma.autocast_decrement_nesting() == 0
    assert not fiamma._autocast._tls.cache


@pytest.mark.parity
def test_autocast_state_functions_match_pytorch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
                     "get_autocast_ipu_dtype", "get_autocast_xla_dtype"):
            assert str(getattr(torch, name)()).split(".")[1] == \
                str(getattr(fiamma, name)()).split(".")[1]
        for name in ("is_autocast_cpu_enabled", "is_autocast_cache_enabled",
                     "is_autocast_ipu_enabled", "is_autocast_xla_enabled"):
            assert getattr(torch, name)() == getattr(fiamma, name)()


# ---- geqrf, ormqr and the removed linear-algebra entry points ------------------------------

@pytest.mark.parametrize("shape,dtype", [((5, 3), np.float64), ((3, 5), np.float64),
                                         ((2, 4, 4), np.float64), ((4, 2), np.complex128)])
def test_geqrf_and_ormqr_rebuild_q_and_r(shape, dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 1j * rng.standard_normal(shape)
    h, tau = fiamma.geqrf(fiamma.tensor(a))
    m, n = shape[-2:]
    r = np.triu(h.numpy())[..., :min(m, n), :]
    q = fiamma.linalg.householder_product(h[..., :min(m, n)], tau).numpy()
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    # Q^H A = R (left, transposed) and A^H Q = R^H (right)
    qa = fiamma.ormqr(h, tau, fiamma.tensor(a), transpose=True).numpy()
    np.testing.assert_allclose(qa[..., :min(m, n), :], r, atol=1e-12)
    np.testing.assert_allclose(qa[..., min(m, n):, :], 0, atol=1e-12)
    ah = np.conj(np.swapaxes(a, -1, -2))
    aq = fiamma.ormqr(h, tau, fiamma.tensor(ah), left=False).numpy()
    np.testing.assert_allclose(aq[..., :, :min(m, n)], np.conj(np.swapaxes(r, -1, -2)),
                               atol=1e-12)
    # op(Q) is orthogonal: Q (Q^H C) = C
    c = rng.standard_normal(shape[:-2] + (m, 2)).astype(a.dtype)
    back = fiamma.ormqr(h, tau, fiamma.ormqr(h, tau, fiamma.tensor(c), transpose=True))
    np.testing.assert_allclose(back.numpy(), c, atol=1e-12)


def test_removed_linalg_functions_raise_naming_the_replacement():
    x = fiamma.eye(2)
    for name, repl in [("eig", "linalg.eig"), ("symeig", "linalg.eigh"),
                       ("lstsq", "linalg.lstsq"), ("solve", "linalg.solve"),
                       ("matrix_rank", "linalg.matrix_rank")]:
        with pytest.raises(RuntimeError, match=f"{name}: .*removed.*{repl}"):
            getattr(fiamma, name)(x, x) if name in ("lstsq", "solve") else \
                getattr(fiamma, name)(x)
    with pytest.raises(RuntimeError, match="solve: .*removed"):
        x.solve(x)
    with pytest.raises(RuntimeError, match="ormqr: input.shape"):
        fiamma.ormqr(fiamma.zeros(3, 2), fiamma.zeros(2), fiamma.zeros(4, 4))


@pytest.mark.parity
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_geqrf_ormqr_equal_pytorch(left, transpose):
    torch = pytest.importorskip("torch")
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 5, 3))
    c = rng.standard_normal((2, 5, 4) if left else (2, 4, 5))
    th, tt = torch.geqrf(torch.tensor(a))
    fh, ft = fiamma.geqrf(fiamma.tensor(a))
    np.testing.assert_allclose(fh.numpy(), th.numpy(), atol=1e-13)
    np.testing.assert_allclose(ft.numpy(), tt.numpy(), atol=1e-13)
    res = []
    for lib, h, tau in [(torch, th, tt), (fiamma, fh, ft)]:
        h = lib.tensor(h.detach().numpy(), requires_grad=True)
        ct = lib.tensor(c, requires_grad=True)
        out = lib.ormqr(h, lib.tensor(tau.detach().numpy()), ct, left, transpose)
        (out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape))).sum().backward()
        res.append((out.detach().numpy(), h.grad.numpy(), ct.grad.numpy()))
    for x, y in zip(*res):
        np.testing.assert_allclose(x, y, atol=1e-12)


# ---- small legacy and internal names --------------------------------------------------------

def test_nonzero_static_pads_and_truncates():
    x = fiamma.tensor([[0, 1], [1, 1]])
    assert fiamma.nonzero_static(x, size=2, fill_value=-5).tolist() == [[0, 1], [1, 0]]
    assert fiamma.nonzero_static(x, size=4).tolist() == [[0, 1], [1, 0], [1, 1], [-1, -1]]
    assert x.nonzero_static(size=0).shape == (0, 2)
    assert fiamma.nonzero_static(fiamma.tensor(3), size=2).shape == (2, 0)
    assert fiamma.nonzero_static(x, size=3).dtype == fiamma.int64
    with pytest.raises(RuntimeError, match="non-negative integer"):
        fiamma.nonzero_static(x, size=-1)


def test_norms_addmv_and_empty_permuted():
    x = np.arange(24.0).reshape(2, 3, 4)
    with pytest.warns(UserWarning, match="frobenius_norm is deprecated"):
        fro = fiamma.frobenius_norm(fiamma.tensor(x), (1,), True)
    np.testing.assert_allclose(fro.numpy(), np.sqrt((x ** 2).sum(1, keepdims=True)))
    with pytest.warns(UserWarning, match="nuclear_norm is deprecated"):
        nuc = fiamma.nuclear_norm(fiamma.tensor(x))
    np.testing.assert_allclose(nuc.numpy(), np.linalg.svd(x, compute_uv=False).sum(-1))
    a = fiamma.ones(2)
    assert fiamma.addmv_(a, fiamma.ones(2, 3), fiamma.ones(3), beta=2, alpha=3) is a
    assert a.tolist() == [11.0, 11.0]
    e = fiamma.empty_permuted((2, 3, 4, 5), (0, 2, 3, 1), dtype=fiamma.float64)
    assert e.shape == (2, 3, 4, 5) and e.stride() == (60, 1, 15, 3)
    assert e.dtype == fiamma.float64 and e.is_contiguous(memory_format=fiamma.channels_last)
    with pytest.raises(RuntimeError, match="permutation"):
        fiamma.empty_permuted((2, 3), (1, 1))


def test_sym_functions_on_numbers():
    assert fiamma.sym_float(3) == 3.0 and type(fiamma.sym_float(3)) is float
    assert fiamma.sym_int(-3.7) == -3 and fiamma.sym_int(3.7) == 3
    assert fiamma.sym_not(True) is False and fiamma.sym_ite(False, 1, 2) == 2
    assert fiamma.sym_sqrt(4) == 2.0 and fiamma.sym_sum([1, 2, 3]) == 6
    assert fiamma.sym_fresh_size(5) == 5


def test_legacy_tensor_methods():
    x = fiamma.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = x.resize(3, 2)
    assert r.shape == (3, 2) and x.shape == (2, 3) and r.data_ptr() == x.data_ptr()
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert x.resize_as(fiamma.zeros(6)).shape == (6,)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="resize"):
        x.resize(4)
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert x.volatile is False
    with pytest.raises(RuntimeError, match="reinforce\\(\\) was removed"):
        x.reinforce(1.0)
    y = fiamma.zeros(3)
    assert y.map2_(fiamma.ones(3), fiamma.tensor(2.0), lambda a, b, c: a + b * c) is y
    assert y.tolist() == [2.0, 2.0, 2.0]
    z = fiamma.zeros(2)
    out = z.module_load(fiamma.ones(2))
    assert out is not z and z.tolist() == [1.0, 1.0] and out.tolist() == [1.0, 1.0]
    other = fiamma.full((2,), 3.0)
    assert z.module_load(other, assign=True).tolist() == [3.0, 3.0] and z.tolist() == [1.0, 1.0]


@pytest.mark.parity
def test_small_names_match_pytorch():
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 1.5], [2.0, 0.0], [0.0, 0.0]])
    for size, fill in [(1, -1), (4, 7)]:
        assert fiamma.nonzero_static(fiamma.tensor(x), size=size, fill_value=fill).tolist() == \
            torch.nonzero_static(torch.tensor(x), size=size, fill_value=fill).tolist()
    assert fiamma.empty_permuted((2, 3, 4), (2, 0, 1)).stride() == \
        torch.empty_permuted((2, 3, 4), (2, 0, 1)).stride()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(fiamma.nuclear_norm(fiamma.tensor(x), True).numpy(),
                                   torch.nuclear_norm(torch.tensor(x), True).numpy())
        np.testing.assert_allclose(fiamma.frobenius_norm(fiamma.tensor(x), (0,)).numpy(),
                                   torch.frobenius_norm(torch.tensor(x), (0,)).numpy())
    for name, args in [("sym_float", (3,)), ("sym_int", (-2.5,)), ("sym_sqrt", (2,)),
                       ("sym_ite", (True, 1, 2)), ("sym_sum", ([1, 2],))]:
        assert getattr(fiamma, name)(*args) == getattr(torch, name)(*args)


def test_hash_tensor_xors_the_64_bit_patterns():
    x = fiamma.tensor([1.0, 2.0])
    # float64 bits of 1.0 and 2.0: 0x3FF0... ^ 0x4000... = 0x7FF0...
    h = fiamma.hash_tensor(x)
    assert h.dtype == fiamma.uint64 and h.shape == () and h.item() == 0x7FF0000000000000
    m = fiamma.tensor([[1, 2], [3, 4]])
    assert fiamma.hash_tensor(m, dim=1).tolist() == [3, 7]
    assert m.hash_tensor(dim=(0,), keepdim=True).tolist() == [[2, 6]]
    assert fiamma.hash_tensor(fiamma.tensor([-1, 5])).item() == (-1 ^ 5) % 2 ** 64
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode"):
        fiamma.hash_tensor(x, mode=1)
    with pytest.raises(RuntimeError, match="reduction dim"):
        fiamma.hash_tensor(fiamma.zeros(0))


def test_while_loop_fork_wait_and_device_modules():
    i, x = fiamma.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2),
                             (fiamma.tensor(0), fiamma.ones(2)))
    assert i.item() == 3 and x.tolist() == [8.0, 8.0]
    with pytest.raises(RuntimeError, match="body_fn returned 1 values for 2"):
        fiamma.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1,),
                          (fiamma.tensor(0), fiamma.ones(2)))
    fut = fiamma.fork(lambda a, b: a + b, fiamma.ones(1), b=2)
    assert fiamma.wait(fut).tolist() == [3.0]
    bad = fiamma.fork(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        fiamma.wait(bad)
    assert fiamma.get_device_module("cpu") is fiamma.cpu
    assert fiamma.get_device_module("cuda:0") is fiamma.cuda
    assert fiamma.get_device_module() is fiamma.cpu or fiamma.cuda.is_available()
    fiamma.sym_constrain_range(5, min=0, max=10)
    with pytest.raises(RuntimeError, match="Invalid value range for 50"):
        fiamma.sym_constrain_range(50, min=0, max=10)
    with pytest.raises(RuntimeError, match="Invalid value range for -1"):
        fiamma.sym_constrain_range_for_size(-1)
    assert fiamma.init_num_threads() is None


@pytest.mark.parity
def test_hash_tensor_equals_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for arr in [rng.standard_normal((4, 5)), rng.standard_normal(7).astype(np.float32),
                rng.integers(-1000, 1000, (3, 6)), np.array([True, False, True])]:
        for dim in [None, 0, (0,)] if arr.ndim == 1 else [None, 1, (0, 1)]:
            a = fiamma.hash_tensor(fiamma.tensor(arr), dim)
            b = torch.hash_tensor(torch.tensor(arr), dim) if dim is not None else \
                torch.hash_tensor(torch.tensor(arr))
            assert a.tolist() == b.tolist()


# ---- native normalisation entry points ---------------------------------------------------

def test_native_norms_equal_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 6, 5))
    w, b = rng.standard_normal(5), rng.standard_normal(5)
    out, mean, rstd = fiamma.native_layer_norm(fiamma.tensor(x), [5], fiamma.tensor(w),
                                               fiamma.tensor(b), 1e-5)
    m = x.mean(-1, keepdims=True)
    r = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-12)
    np.testing.assert_allclose(rstd.numpy(), r, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), (x - m) * r * w + b, rtol=1e-12, atol=1e-12)
    xg = rng.standard_normal((2, 6, 2, 3))
    out, mean, rstd = fiamma.native_group_norm(fiamma.tensor(xg), None, None, 2, 6, 6, 3, 1e-5)
    g = xg.reshape(2, 3, -1)
    assert mean.shape == (2, 3) and rstd.shape == (2, 3)
    np.testing.assert_allclose(mean.numpy(), g.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), ((g - g.mean(-1, keepdims=True))
                                             / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
                               .reshape(xg.shape), rtol=1e-12, atol=1e-12)
    rm, rv = fiamma.zeros(6, dtype=fiamma.float64), fiamma.ones(6, dtype=fiamma.float64)
    out, sm, si = fiamma.native_batch_norm(fiamma.tensor(xg), None, None, rm, rv, True, 0.1,
                                           1e-5)
    mu, var = xg.mean((0, 2, 3)), xg.var((0, 2, 3))
    np.testing.assert_allclose(sm.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(si.numpy(), 1 / np.sqrt(var + 1e-5), rtol=1e-12)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mu, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * xg.var((0, 2, 3), ddof=1), rtol=1e-12)
    out, sm, si = fiamma.native_batch_norm(fiamma.tensor(xg), None, None, rm, rv, False, 0.1,
                                           1e-5)
    assert sm.shape == (0,) and si.shape == (0,)
    with pytest.raises(RuntimeError, match="running_mean and running_var"):
        fiamma.native_batch_norm(fiamma.tensor(xg), None, None, None, None, False, 0.1, 1e-5)
    m2, v2 = fiamma.batch_norm_update_stats(fiamma.tensor(xg), None, None, 0.1)
    np.testing.assert_allclose(v2.numpy(), var, rtol=1e-12)


@pytest.mark.parity
def test_native_norms_equal_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    xg, wg, bg = rng.standard_normal((2, 6, 2, 3)), rng.standard_normal(6), \
        rng.standard_normal(6)
    for training in (True, False):
        res = []
        for lib in (torch, fiamma):
            rm, rv = lib.tensor(np.full(6, 0.1)), lib.tensor(np.full(6, 1.5))
            out = lib.native_batch_norm(lib.tensor(xg), lib.tensor(wg), lib.tensor(bg), rm, rv,
                                        training, 0.1, 1e-5)
            res.append([t.numpy() for t in out] + [rm.numpy(), rv.numpy()])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    res = [[t.numpy() for t in lib.native_group_norm(lib.tensor(xg), lib.tensor(wg),
                                                     lib.tensor(bg), 2, 6, 6, 2, 1e-5)]
           for lib in (torch, fiamma)]
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    res = [[t.numpy() for t in lib.native_layer_norm(lib.tensor(xg), [2, 3], None, None, 1e-5)]
           for lib in (torch, fiamma)]
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_device_facts_and_absent_device_types():
    assert fiamma.has_lapack is True and fiamma.has_spectral is True
    assert fiamma.has_mkl is fiamma.backends.mkl.is_available()
    assert fiamma.has_openmp is fiamma.backends.openmp.is_available()
    assert fiamma.is_vulkan_available() is False
    assert fiamma.set_flush_denormal(True) is False and fiamma.set_flush_denormal(False) is True
    assert fiamma.cudnn_is_acceptable(fiamma.ones(2)) is False
    assert fiamma.mtia.is_available() is False and fiamma.mtia.device_count() == 0
    with pytest.raises(RuntimeError, match="no MTIA"):
        fiamma.mtia.current_device()
    for kind in ("xpu", "ipu", "mtia"):
        with pytest.raises(RuntimeError, match=f"Tensor.{kind}: fiamma has no"):
            getattr(fiamma.ones(1), kind)()


def test_top_level_exception_and_protocol_types():
    assert fiamma.OutOfMemoryError is fiamma.cuda.OutOfMemoryError
    assert issubclass(fiamma.OutOfMemoryError, RuntimeError)
    assert issubclass(fiamma.OutOfMemoryError, MemoryError)  # what `except MemoryError` sees
    assert fiamma.Future is fiamma.futures.Future
    assert isinstance(fiamma.fork(lambda: 1), fiamma.Future)
    with fiamma.DisableTorchFunction():
        pass
    with fiamma.DisableTorchFunctionSubclass():
        pass


def test_prelu_in_core_with_pytorchs_gradient_at_zero():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    w = fiamma.tensor([0.25], requires_grad=True)
    y = fiamma.prelu(x, w)
    y.sum().backward()
    assert y.tolist() == [-0.25, 0.0, 2.0]
    assert x.grad.tolist() == [0.25, 0.25, 1.0] and w.grad.tolist() == [-1.0]
    z = fiamma.tensor(np.arange(-6.0, 6.0).reshape(2, 3, 2))
    slopes = fiamma.tensor([0.1, 0.2, 0.3], dtype=fiamma.float64)
    ref = np.where(z.numpy() > 0, z.numpy(), z.numpy() * np.array([0.1, 0.2, 0.3])[:, None])
    np.testing.assert_allclose(z.prelu(slopes).numpy(), ref)
    with pytest.raises(RuntimeError, match="prelu: Mismatch of parameter numbers"):
        fiamma.prelu(fiamma.ones(3), fiamma.ones(3))
