"""fiamma.cuda and the cuda backend.

Three parts: the API without a GPU (honest answers, errors carrying CuPy's own reason); the
backend's own code run on the CPU over a stand-in for CuPy (_fake_cupy: allocation, copies,
one-element reads, and the cuBLAS mapping of every matrix layout); and, marked ``gpu``, the
same on a real GPU with CuPy (allocation, memory statistics, streams and events, DLPack with
CuPy and PyTorch, pinned memory), run by benchmarks/gpu/run.sh.
"""

import numpy as np
import pytest
from conftest import _cuda_reason, assert_same

import fiamma

HAVE_GPU = _cuda_reason() is None
no_gpu = pytest.mark.skipif(HAVE_GPU, reason="checks the answers without a GPU")
gpu = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason=str(_cuda_reason()))]


# ---- without a GPU ---------------------------------------------------------------------------

@no_gpu
def test_unavailable_answers():
    assert fiamma.cuda.is_available() is False
    assert fiamma.cuda.device_count() == 0
    assert fiamma.cuda.is_initialized() is False
    assert fiamma.cuda.memory_allocated() == 0
    assert fiamma.cuda.max_memory_allocated() == 0
    assert fiamma.cuda.memory_stats() == {}
    assert fiamma.cuda.get_rng_state_all() == []
    assert fiamma.cuda.is_bf16_supported() is False
    fiamma.cuda.manual_seed(3)  # safe without CUDA, as in a CPU-only PyTorch
    fiamma.cuda.manual_seed_all(3)
    fiamma.cuda.empty_cache()
    fiamma.cuda.reset_peak_memory_stats()
    with fiamma.cuda.device(None), fiamma.cuda.stream(None):
        pass
    with pytest.raises((TypeError, ValueError)):
        fiamma.cuda.manual_seed("x")


@no_gpu
def test_unavailable_errors_carry_cupys_reason():
    reason = fiamma.cuda.unavailable_reason()
    assert "CuPy" in reason and "(" in reason  # CuPy's own exception type and message
    for call in [fiamma.cuda.current_device, fiamma.cuda.synchronize, fiamma.cuda.Stream,
                 fiamma.cuda.Event, fiamma.cuda.get_device_name, fiamma.cuda.init,
                 fiamma.cuda.get_device_properties, lambda: fiamma.cuda.set_device(0)]:
        with pytest.raises(RuntimeError, match="CUDA is not available") as info:
            call()
        assert reason in str(info.value)
        assert isinstance(info.value, fiamma.cuda.CudaUnavailableError)
    for call in [lambda: fiamma.ones(2, device="cuda"), lambda: fiamma.ones(2).cuda(),
                 lambda: fiamma.zeros(3).to("cuda:0")]:
        with pytest.raises(RuntimeError, match="cuda") as info:
            call()
        assert reason in str(info.value)


@no_gpu
def test_pin_memory_without_cuda_says_why():
    with pytest.raises(RuntimeError, match="pinned host memory needs CUDA") as info:
        fiamma.ones(2).pin_memory()
    assert fiamma.cuda.unavailable_reason() in str(info.value)


@no_gpu
def test_autocast_and_scaler_disable_themselves_without_cuda():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = fiamma.autocast("cuda", dtype=fiamma.bfloat16)
    with ac:
        y = fiamma.ones(2, 3) @ fiamma.ones(3, 2)
    assert y.dtype is fiamma.float32


def test_cpu_tensors_answer_cpu():
    t = fiamma.ones(2)
    assert t.is_cuda is False and t.is_pinned() is False and t.get_device() == -1


# ---- the backend's code over a stand-in for CuPy --------------------------------------------

@pytest.fixture
def fake_cuda():
    """The cuda backend built over _fake_cupy and registered as 'cuda' for one test (on a
    machine with a GPU the real backend is tested instead)."""
    if HAVE_GPU:
        pytest.skip("a GPU is here: the real CuPy is tested instead of the stand-in")
    import _fake_cupy

    with _fake_cupy.cuda_backend() as be:
        yield be


def test_fake_peak_memory_follows_storages_without_pool_queries(fake_cuda):
    """The peak of memory_allocated is kept from the storages' own byte counts (CuPy's
    used_bytes walks every block in use: too slow to ask at each allocation)."""
    pool = fake_cuda.xp.get_default_memory_pool()
    fiamma.cuda.reset_peak_memory_stats()
    before = fiamma.cuda.memory_allocated()
    asked = []
    used = pool.used_bytes
    pool.used_bytes = lambda: asked.append(1) or used()
    try:
        a = fiamma.empty(1 << 18, device="cuda")  # 1 MiB
        b = fiamma.empty(1 << 19, device="cuda")  # 2 MiB
        del a, b
        c = fiamma.empty(1 << 18, device="cuda")
        assert not asked
    finally:
        del pool.used_bytes
    assert fiamma.cuda.memory_allocated() == before + (1 << 20)
    assert fiamma.cuda.max_memory_allocated() == before + (3 << 20)
    assert fiamma.cuda.memory_stats()["allocated_bytes.all.peak"] == before + (3 << 20)
    fiamma.cuda.reset_peak_memory_stats()
    assert fiamma.cuda.max_memory_allocated() == before + (1 << 20)
    d = fiamma.empty(1 << 18, device="cuda")
    assert fiamma.cuda.max_memory_allocated() == before + (2 << 20)
    del c, d
    assert fiamma.cuda.memory_allocated() == before


def test_fake_api_and_devices(fake_cuda):
    assert fiamma.cuda.is_available() and fiamma.cuda.device_count() == 1
    assert fiamma.cuda.current_device() == 0
    assert fiamma.cuda.get_device_name() == "Fake GPU"
    assert fiamma.cuda.get_device_capability() == (9, 0)
    assert fiamma.cuda.get_device_properties(0).multi_processor_count == 4
    assert fiamma.cuda.is_bf16_supported()
    t = fiamma.ones(3, device="cuda")
    assert t.device == fiamma.device("cuda", 0) and t.is_cuda and t.get_device() == 0
    assert (t + 1).device == t.device
    assert fiamma.cuda.memory_allocated() >= 12
    assert fiamma.cuda.max_memory_allocated() >= fiamma.cuda.memory_allocated()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        fiamma.cuda.get_device_name(3)
    with pytest.raises(RuntimeError, match="cpu"):
        fiamma.ones(2, device="cuda") + fiamma.ones(2)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16,
                                fiamma.int64, fiamma.int16, fiamma.uint8, fiamma.bool])
def test_fake_copies_and_item(fake_cuda, dt):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(np.float64)
    c = fiamma.tensor(a, dtype=dt)
    d = c.to("cuda")
    assert_same(d, c)
    assert_same(d.permute(2, 0, 1).contiguous(), c.permute(2, 0, 1).contiguous())
    assert_same(d[:, ::2, 1:], c[:, ::2, 1:].contiguous())
    assert d[1, 2, 3].item() == c[1, 2, 3].item()
    assert d.permute(2, 1, 0)[3, 1, 1].item() == c.permute(2, 1, 0)[3, 1, 1].item()
    assert_same(fiamma.zeros(5, dtype=dt, device="cuda"), fiamma.zeros(5, dtype=dt))
    assert_same(fiamma.empty(0, 3, dtype=dt, device="cuda"), fiamma.empty(0, 3, dtype=dt))
    kinds = [k for op, k, _ in (x for x in fake_cuda.xp.calls if x[0] == "memcpy")]
    assert 1 in kinds and 2 in kinds  # direct host->device and device->host copies ran

    # a contiguous same-dtype copy on the device is one device-to-device memcpy; a strided one,
    # or one that casts, goes through the array module
    fake_cuda.xp.calls.clear()
    e = d.clone()
    assert_same(e, c)
    assert e.data_ptr() != d.data_ptr()
    assert ("memcpy", 3, 24 * dt.itemsize) in fake_cuda.xp.calls
    fake_cuda.xp.calls.clear()
    assert_same(d.transpose(0, 2).contiguous(), c.transpose(0, 2).contiguous())
    assert_same(d[0].clone(), c[0])  # an offset into the storage
    assert_same(d[1:].clone(), c[1:])
    assert not [x for x in fake_cuda.xp.calls if x[:2] == ("memcpy", 3) and x[2] != 12 *
                dt.itemsize]
    assert_same(d.to(fiamma.float64), c.to(fiamma.float64))
    # zero fills of contiguous memory are one memset; other values, or strided targets, fill
    # through the array module
    fake_cuda.xp.calls.clear()
    z = d.clone()
    z.zero_()
    assert_same(z, fiamma.zeros(2, 3, 4, dtype=dt))
    assert ("memset", 0, 24 * dt.itemsize) in fake_cuda.xp.calls
    z[0].zero_()
    z[:, 1].fill_(1)
    if dt.is_floating_point:
        z[1].fill_(-0.0)  # not zero bytes: no memset
    zc = fiamma.zeros(2, 3, 4, dtype=dt)
    zc[:, 1].fill_(1)
    if dt.is_floating_point:
        zc[1].fill_(-0.0)
    assert_same(z, zc)
    assert [x for x in fake_cuda.xp.calls if x[0] == "memset"] == [
        ("memset", 0, 24 * dt.itemsize), ("memset", 0, 12 * dt.itemsize)]


def _layouts(rows, cols, dt, rng):
    """(name, cpu matrix, cuda matrix) for row-major, column-major, padded and sliced views."""
    a = rng.integers(-4, 5, (rows, cols)).astype(np.float64)
    base = fiamma.tensor(a, dtype=dt)
    out = [("rows", base, base.to("cuda"))]
    t = fiamma.tensor(a.T.copy(), dtype=dt)
    out.append(("cols", t.t(), t.to("cuda").t()))
    big = fiamma.zeros(rows, cols + 3, dtype=dt)
    big[:, 1:cols + 1] = base
    out.append(("padded", big[:, 1:cols + 1], big.to("cuda")[:, 1:cols + 1]))
    big2 = fiamma.zeros(rows, 2 * cols, dtype=dt)
    big2[:, ::2] = base
    out.append(("no unit stride", big2[:, ::2], big2.to("cuda")[:, ::2]))
    return out


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16])
def test_fake_cublas_mm_every_layout(fake_cuda, dt):
    rng = np.random.default_rng(0)
    tol = dict(rtol=2e-2, atol=2e-2) if dt.itemsize == 2 else {}
    for m, k, n in [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)]:
        for na, ca, da in _layouts(m, k, dt, rng):
            for nb, cb, db in _layouts(k, n, dt, rng):
                fake_cuda.xp.calls.clear()
                assert_same(da @ db, ca @ cb, **tol)
                gemm = [c for c in fake_cuda.xp.calls if c[0] == "gemmEx"]
                if "no unit" not in na + nb:
                    assert gemm, (m, k, n, na, nb)
    # vectors and addmm's alpha/beta
    v = fiamma.tensor([1.0, -2.0, 3.0, 0.5], dtype=dt)
    w = fiamma.tensor(rng.integers(-3, 3, (4, 2)).astype(np.float64), dtype=dt)
    assert_same(v.to("cuda") @ w.to("cuda"), v @ w, **tol)
    assert_same(w.t().to("cuda") @ v.to("cuda"), w.t() @ v, **tol)
    c = fiamma.tensor(rng.integers(-3, 3, (4, 4)).astype(np.float64), dtype=dt)
    x = fiamma.tensor(rng.integers(-3, 3, (4, 3)).astype(np.float64), dtype=dt)
    y = fiamma.tensor(rng.integers(-3, 3, (3, 4)).astype(np.float64), dtype=dt)
    got = fiamma.addmm(c.to("cuda"), x.to("cuda"), y.to("cuda"), beta=0.5, alpha=2.0)
    assert_same(got, fiamma.addmm(c, x, y, beta=0.5, alpha=2.0), **tol)
    assert not fake_cuda.fast_path_errors


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.bfloat16])
def test_fake_cublas_batched(fake_cuda, dt):
    rng = np.random.default_rng(1)
    tol = dict(rtol=2e-2, atol=2e-2) if dt.itemsize == 2 else {}

    def t(*shape):
        return fiamma.tensor(rng.integers(-3, 4, shape).astype(np.float64), dtype=dt)

    cases = [(t(4, 3, 5), t(4, 5, 2)), (t(2, 3, 3, 5), t(2, 3, 5, 4)), (t(4, 3, 5), t(5, 2)),
             (t(2, 1, 3, 5), t(1, 4, 5, 2)), (t(4, 5, 3).transpose(1, 2), t(4, 5, 2))]
    for a, b in cases:
        fake_cuda.xp.calls.clear()
        assert_same(a.to("cuda") @ b.to("cuda"), a @ b, **tol)
    x = t(3, 4, 6, 5)
    assert_same(x.to("cuda") @ x.to("cuda").transpose(-1, -2), x @ x.transpose(-1, -2), **tol)
    assert any(c[0] == "gemmStridedBatchedEx" for c in fake_cuda.xp.calls)
    assert not fake_cuda.fast_path_errors


def test_fake_integer_products_take_the_generic_path(fake_cuda):
    a = fiamma.arange(12).reshape(3, 4)
    fake_cuda.xp.calls.clear()
    assert_same(a.to("cuda") @ a.t().to("cuda"), a @ a.t())
    assert not [c for c in fake_cuda.xp.calls if c[0].startswith("gemm")]


def test_fake_pinned_memory_and_non_blocking(fake_cuda):
    c = fiamma.arange(10, dtype=fiamma.float32)
    p = c.pin_memory()
    assert p.is_pinned() and not c.is_pinned() and p.device.type == "cpu"
    assert p.pin_memory() is p
    assert_same(p, c)
    fake_cuda.xp.calls.clear()
    d = p.to("cuda", non_blocking=True)
    assert_same(d, c)
    back = d.to("cpu", non_blocking=True)
    assert back.is_pinned()
    assert_same(back, c)
    e = fiamma.zeros(10, device="cuda")
    e.copy_(p, non_blocking=True)
    assert_same(e, c)
    assert [k for k in fake_cuda.xp.calls if k[0] == "memcpy"] == [
        ("memcpy", 1, 40), ("memcpy", 2, 40), ("memcpy", 2, 40), ("memcpy", 1, 40),
        ("memcpy", 2, 40)]  # one copy each way per transfer (and assert_same's reads)
    assert fiamma.ones(2).cuda(0).device == fiamma.device("cuda", 0)
    x = fiamma.ones(2, device="cuda")
    assert x.to("cuda") is x and x.cuda() is x
    with pytest.raises(RuntimeError, match="only dense CPU tensors"):
        x.pin_memory()


def test_blas_operand_mapping():
    from fiamma._backend.xp.cuda import _blas_operand, _collapse

    assert _blas_operand(3, 4, 4, 1) == (False, 4)
    assert _blas_operand(3, 4, 1, 3) == (True, 3)
    assert _blas_operand(3, 4, 8, 1) == (False, 8)
    assert _blas_operand(3, 4, 2, 8) is None  # no unit stride
    assert _blas_operand(3, 4, 0, 1) is None  # broadcast rows
    assert _blas_operand(1, 4, 0, 1) == (False, 4)
    assert _blas_operand(4, 1, 7, 0) == (False, 7)
    assert _collapse((2, 3), ([12, 4], [15, 5], [0, 0])) == [(6, [4, 5, 0])]
    assert _collapse((2, 1, 3), ([12, 9, 4], [0, 0, 5], [1, 1, 1])) == [(2, [12, 0, 1]),
                                                                        (3, [4, 5, 1])]


# ---- on a GPU -----------------------------------------------------------------------------------

@pytest.fixture(params=[pytest.param("fake", id="fake"),
                        pytest.param("gpu", id="gpu", marks=gpu)])
def where(request):
    """Runs a test over the CuPy stand-in (CI) and on a real GPU (when there is one)."""
    if request.param == "fake":
        request.getfixturevalue("fake_cuda")
    return request.param


class TestGPU:

    def test_devices_and_properties(self, where):
        assert fiamma.cuda.is_available() and fiamma.cuda.device_count() >= 1
        i = fiamma.cuda.current_device()
        p = fiamma.cuda.get_device_properties(i)
        assert p.total_memory > 0 and p.multi_processor_count > 0
        assert fiamma.cuda.get_device_name(i) == p.name
        assert fiamma.cuda.get_device_capability() == (p.major, p.minor)
        with fiamma.cuda.device(i):
            assert fiamma.cuda.current_device() == i
        free, total = fiamma.cuda.mem_get_info()
        assert 0 < free <= total

    def test_allocation_and_memory_stats(self, where):
        fiamma.cuda.synchronize()
        fiamma.cuda.empty_cache()
        fiamma.cuda.reset_peak_memory_stats()
        before = fiamma.cuda.memory_allocated()
        x = fiamma.empty(1 << 20, device="cuda")  # 4 MiB
        assert x.device == fiamma.device("cuda", fiamma.cuda.current_device())
        assert fiamma.cuda.memory_allocated() >= before + (4 << 20)
        assert fiamma.cuda.max_memory_allocated() >= before + (4 << 20)
        assert fiamma.cuda.memory_reserved() >= fiamma.cuda.memory_allocated()
        del x
        assert fiamma.cuda.memory_allocated() <= before
        assert fiamma.cuda.max_memory_allocated() >= before + (4 << 20)
        stats = fiamma.cuda.memory_stats()
        assert stats["allocated_bytes.all.peak"] >= before + (4 << 20)
        z = fiamma.zeros(1000, 3, device="cuda")
        assert float(z.abs().sum().item()) == 0.0

    def test_streams_and_events(self, where):
        s = fiamma.cuda.Stream()
        start = fiamma.cuda.Event(enable_timing=True)
        end = fiamma.cuda.Event(enable_timing=True)
        x = fiamma.ones(1 << 20, device="cuda")
        with fiamma.cuda.stream(s):
            assert fiamma.cuda.current_stream() == s
            start.record()
            y = x * 2 + 1
            end.record()
        assert fiamma.cuda.current_stream() != s
        fiamma.cuda.current_stream().wait_stream(s)
        end.synchronize()
        assert end.query() and start.elapsed_time(end) >= 0.0
        s.synchronize()
        assert s.query()
        assert float(y[-1].item()) == 3.0
        assert fiamma.cuda.default_stream().cuda_stream == 0

    def test_copies_and_item_on_gpu(self, where):
        rng = np.random.default_rng(0)
        for dt in [fiamma.float32, fiamma.bfloat16, fiamma.int64, fiamma.bool]:
            c = fiamma.tensor(rng.integers(0, 5, (3, 4)).astype(np.float64), dtype=dt)
            d = c.cuda()
            assert d.is_cuda and not c.is_cuda
            assert_same(d, c)
            assert_same(d.t().contiguous(), c.t().contiguous())
            assert d[2, 3].item() == c[2, 3].item()

    def test_dlpack_with_cupy(self, where):
        if where == "fake":
            pytest.skip("DLPack on the GPU needs the real CuPy")
        import cupy

        a = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
        t = fiamma.from_dlpack(a)
        assert t.is_cuda and t.shape == (2, 3) and t.data_ptr() == a.data.ptr
        t.mul_(2)
        assert float(a[1, 2].get()) == 10.0  # shared memory, no copy
        back = cupy.from_dlpack(t)
        assert back.data.ptr == t.data_ptr()
        np.testing.assert_array_equal(cupy.asnumpy(back), np.arange(6).reshape(2, 3) * 2)

    def test_dlpack_with_torch(self, where):
        if where == "fake":
            pytest.skip("DLPack on the GPU needs the real CuPy")
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("PyTorch without CUDA")
        a = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
        t = fiamma.from_dlpack(a)
        assert t.is_cuda and t.data_ptr() == a.data_ptr()
        t.add_(1)
        assert float(a[1, 2]) == 6.0
        b = torch.from_dlpack(t)
        assert b.data_ptr() == t.data_ptr() and b.device.type == "cuda"
        bf = fiamma.ones(4, dtype=fiamma.bfloat16, device="cuda")
        assert torch.from_dlpack(bf).dtype == torch.bfloat16

    def test_pinned_memory_and_non_blocking(self, where):
        c = fiamma.arange(1 << 16, dtype=fiamma.float32)
        p = c.pin_memory()
        assert p.is_pinned() and not c.is_pinned() and p.device.type == "cpu"
        assert_same(p, c)
        d = p.to("cuda", non_blocking=True)
        back = d.to("cpu", non_blocking=True)
        fiamma.cuda.synchronize()
        assert_same(back, c)
        e = fiamma.empty(1 << 16, device="cuda")
        e.copy_(p, non_blocking=True)
        fiamma.cuda.synchronize()
        assert_same(e, c)

    def test_same_seed_same_numbers(self, where):
        fiamma.manual_seed(7)
        a = fiamma.rand(1000)
        fiamma.cuda.manual_seed(7)
        b = fiamma.rand(1000, device="cuda")
        assert_same(b, a)

    def test_autocast_cuda(self, where):
        x = fiamma.randn(8, 16).cuda()
        w = fiamma.randn(16, 4).cuda()
        with fiamma.autocast("cuda", dtype=fiamma.bfloat16):
            y = x @ w
            c = fiamma.ones(2, 3) @ fiamma.ones(3, 2)  # CPU tensors: not this autocast's
        assert y.dtype is fiamma.bfloat16 and c.dtype is fiamma.float32
        assert_same(y.float(), (x.cpu() @ w.cpu()), rtol=2e-2, atol=5e-2)

    def test_grad_scaler_cuda(self, where):
        pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
        w = fiamma.ones(3, device="cuda", requires_grad=True)
        opt = fiamma.optim.SGD([w], lr=0.1)
        scaler = fiamma.amp.GradScaler("cuda")
        loss = (w * 2).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        assert_same(w.detach(), fiamma.full((3,), 0.8))
