"""fiamma.cuda, fiamma.accelerator, fiamma.backends and fiamma.cpu: PyTorch's device modules,
honest on a machine where fiamma has no CUDA (this version has no CUDA backend anywhere)."""

import pytest

import fiamma


def test_cuda_is_honestly_absent():
    cuda = fiamma.cuda
    assert cuda.is_available() is False and cuda.device_count() == 0
    assert not cuda.is_initialized() and cuda.get_arch_list() == []
    reason = cuda.unavailable_reason()
    assert "CuPy" in reason or "cuda backend" in reason
    for call in (cuda.current_device, cuda.synchronize, cuda.get_device_name, cuda.init,
                 cuda.get_device_properties, cuda.get_device_capability, cuda.initial_seed,
                 cuda.get_rng_state, cuda.current_stream, cuda.mem_get_info, cuda.Stream,
                 cuda.Event, lambda: cuda.set_device(0)):
        with pytest.raises(RuntimeError, match="CUDA is not available: ") as e:
            call()
        assert reason in str(e.value) and isinstance(e.value, cuda.CudaUnavailableError)
    with pytest.raises(RuntimeError, match="fiamma.cuda.device: CUDA is not available"):
        with cuda.device(0):
            pass
    with cuda.device(None), cuda.device(-1), cuda.stream(None):
        pass
    with cuda.device_of(fiamma.ones(1)):  # a CPU tensor: nothing to select
        pass
    with pytest.raises(ValueError, match="expected a cuda device"):
        cuda.device("cpu")


def test_cuda_calls_cpu_programs_make_unconditionally_are_safe():
    cuda = fiamma.cuda
    fiamma.manual_seed(3)
    a = fiamma.rand(3)
    fiamma.manual_seed(3)
    cuda.manual_seed(7)
    cuda.manual_seed_all(7)
    cuda.seed()
    cuda.seed_all()
    assert fiamma.rand(3).tolist() == a.tolist()  # the CPU generator is untouched
    with pytest.raises((TypeError, ValueError)):
        cuda.manual_seed("seven")
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()
    assert cuda.memory_allocated() == cuda.max_memory_allocated() == 0
    assert cuda.memory_reserved() == cuda.max_memory_reserved() == 0
    assert cuda.memory_stats() == {} and cuda.get_rng_state_all() == []
    cuda.set_rng_state_all([])
    assert cuda.is_bf16_supported() is False
    with pytest.raises(RuntimeError):
        fiamma.ones(1).to("cuda")


def test_accelerator_api():
    acc = fiamma.accelerator
    assert acc.is_available() is False and acc.device_count() == 0
    assert acc.current_accelerator() is None and acc.current_accelerator(True) is None
    device = acc.current_accelerator() if acc.is_available() else fiamma.device("cpu")
    assert device.type == "cpu"
    for call in (acc.current_device_index, acc.current_device_idx, acc.synchronize,
                 acc.current_stream, acc.get_device_capability, acc.get_memory_info,
                 lambda: acc.set_device_index(0), lambda: acc.set_stream(None)):
        with pytest.raises(RuntimeError, match="no accelerator is available"):
            call()
    with acc.device_index(None):
        pass
    with pytest.raises(RuntimeError, match="no accelerator"):
        with acc.device_index(0):
            pass
    acc.empty_cache()
    acc.empty_host_cache()
    acc.reset_peak_memory_stats()
    acc.reset_accumulated_memory_stats()
    assert acc.memory_allocated() == acc.max_memory_reserved() == 0
    assert acc.memory_stats() == {}
    assert set(acc.__all__) <= set(dir(acc))


def test_backends_flags_and_queries():
    b = fiamma.backends
    cudnn = b.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (
        True, False, False, True)
    # honest about the library found at run time (test_cuda_cudnn.py checks discovery)
    v = cudnn.version()
    assert cudnn.is_available() is (v is not None)
    assert v is None or v >= 8000
    cudnn.benchmark = True
    try:
        assert fiamma.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert cudnn.enabled is False and cudnn.deterministic is True
            assert cudnn.benchmark is False
        assert cudnn.enabled is True and cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    assert not b.cuda.is_built() and b.cuda.matmul.allow_tf32 is False
    b.cuda.matmul.allow_tf32 = True
    assert b.cuda.matmul.allow_tf32 is True
    b.cuda.matmul.allow_tf32 = False
    assert b.cuda.flash_sdp_enabled()
    with b.cuda.sdp_kernel(enable_flash=False):
        assert not b.cuda.flash_sdp_enabled() and b.cuda.math_sdp_enabled()
    assert b.cuda.flash_sdp_enabled()
    b.cuda.enable_math_sdp(False)
    assert not b.cuda.math_sdp_enabled()
    b.cuda.enable_math_sdp(True)
    assert b.cuda.preferred_linalg_library() == "default"
    with pytest.raises(ValueError, match="preferred_linalg_library"):
        b.cuda.preferred_linalg_library("lapack")
    assert not b.mps.is_available() and not b.mps.is_built()
    assert not b.mkldnn.is_available() and not b.mkl.is_available()
    with b.mkldnn.flags(enabled=False):
        assert b.mkldnn.enabled is False
    assert b.mkldnn.enabled is True
    assert b.openmp.is_available() is True
    assert b.cpu.get_cpu_capability() == "DEFAULT"


def test_cpu_device_module():
    cpu = fiamma.cpu
    assert cpu.is_available() and cpu.device_count() == 1 and cpu.current_device() == "cpu"
    cpu.synchronize()
    cpu.set_device("cpu")
    s = cpu.current_stream()
    with cpu.stream(s) as got:
        assert got is s
    e = cpu.Event()
    e.record()
    assert e.query()


def test_top_level_names_resolve_lazily():
    import subprocess
    import sys

    code = ("import sys, fiamma; assert 'fiamma.amp' not in sys.modules; "
            "assert 'fiamma.cuda' not in sys.modules; "
            "print(fiamma.autocast is fiamma.amp.autocast, fiamma.cuda.is_available(), "
            "fiamma.backends.cudnn.enabled, fiamma.accelerator.is_available())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "True", "False"]


@pytest.mark.parametrize("kind", ["xpu", "mps"])
def test_absent_device_modules(kind):
    # PyTorch's idiom `elif torch.xpu.is_available():` (the profiler recipe) picks the CPU
    mod = getattr(fiamma, kind)
    assert mod.is_available() is False and mod.device_count() == 0
    assert mod.is_initialized() is False
    assert mod.manual_seed(0) is None and mod.manual_seed_all(0) is None
    assert mod.empty_cache() is None
    for op in ("synchronize", "current_device", "get_device_name", "memory_allocated"):
        with pytest.raises(RuntimeError, match=f"fiamma.{kind}.{op}: fiamma has no .* backend"):
            getattr(mod, op)()
    assert "is_available" in mod.__all__
