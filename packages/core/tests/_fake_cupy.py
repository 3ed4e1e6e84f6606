"""A stand-in for the parts of CuPy that fiamma's cuda backend calls, over NumPy and host
memory: allocation (``cuda.alloc`` -> a MemoryPointer), ``ndarray(shape, dtype, memptr,
strides)``, ``runtime.memcpyAsync``, streams, and cuBLAS's ``gemmEx`` /
``gemmStridedBatchedEx`` with their column-major, leading-dimension semantics. It lets the CPU
run the backend's own code (address arithmetic, copies, the row-major -> cuBLAS mapping of
every operand layout); a GPU run (benchmarks/gpu/run.sh) checks the real thing.
"""

import contextlib
import ctypes
import sys
import types
import weakref

import numpy as np


class _Memory:
    def __init__(self, size):
        self.size = size
        self.buf = np.zeros(max(size, 1), np.uint8)
        self.ptr = self.buf.ctypes.data if size else 0


class MemoryPointer:
    def __init__(self, mem, offset):
        assert mem.ptr != 0 or offset == 0
        self.mem = mem
        self.ptr = mem.ptr + offset

    def __add__(self, offset):
        assert self.ptr != 0 or offset == 0
        return MemoryPointer(self.mem, self.ptr - self.mem.ptr + offset)

    def memset_async(self, value, size, stream=None):
        ctypes.memset(self.ptr, value, size)


def _view(ptr, dtype, shape, strides, extent_mem):
    dtype = np.dtype(dtype)
    if 0 in shape:
        return np.empty(shape, dtype)
    base = extent_mem.buf
    off = ptr - base.ctypes.data
    return np.ndarray(shape, dtype, buffer=base, offset=off, strides=strides)


class _Pool:
    def __init__(self):
        self.used = 0

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.used

    def release(self, n):
        self.used -= n

    def free_all_blocks(self):
        pass


def make():
    """A module object that fiamma's CupyBackend accepts as ``cupy``."""
    cp = types.ModuleType("fake_cupy")
    for name in dir(np):
        if not name.startswith("_"):
            setattr(cp, name, getattr(np, name))
    pool = _Pool()
    cp.get_default_memory_pool = lambda: pool
    cp.get_default_pinned_memory_pool = lambda: pool
    cp.asnumpy = np.asarray

    def ndarray(shape, dtype=float, memptr=None, strides=None):
        return _view(memptr.ptr, dtype, tuple(shape), strides, memptr.mem)

    cp.ndarray = ndarray
    cuda = types.SimpleNamespace()
    calls = []

    def alloc(n):
        pool.used += n
        m = _Memory(n)
        weakref.finalize(m, pool.release, n)
        return MemoryPointer(m, 0)

    class Stream:
        """Streams run nothing (the fake computes at once); they keep CuPy's bookkeeping."""

        _next = [0x1000]
        current = None

        def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
            if null:
                self.ptr = 0
            else:
                self.ptr = Stream._next[0]
                Stream._next[0] += 0x10
            self.priority = priority
            self.done = True

        def synchronize(self):
            pass

        def use(self):
            Stream.current = self
            return self

        def wait_event(self, event):
            assert isinstance(event, Event)

        def record(self, event=None):
            event = Event() if event is None else event
            event.record(self)
            return event

    Stream.null = Stream(null=True)
    Stream.current = Stream.null

    class Device:
        def __init__(self, i=0):
            self.id = i

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def synchronize(self):
            pass

        def use(self):
            pass

    class Event:
        done = True
        ptr = 0x2000

        def __init__(self, block=False, disable_timing=False, interprocess=False):
            self.timing = not disable_timing

        def record(self, stream=None):
            assert stream is None or isinstance(stream, Stream)

        def synchronize(self):
            pass

    def get_elapsed_time(start, end):
        assert start.timing and end.timing
        return 0.25

    def alloc_pinned_memory(n):
        m = _Memory(n)
        calls.append(("pinned", n))
        return types.SimpleNamespace(ptr=m.ptr, mem=m)

    cuda.alloc = alloc
    cuda.Stream = Stream
    cuda.get_elapsed_time = get_elapsed_time
    cuda.Event = Event
    cuda.alloc_pinned_memory = alloc_pinned_memory
    cuda.Device = Device
    cuda.get_current_stream = lambda: Stream.current
    cuda.device = types.SimpleNamespace(get_cublas_handle=lambda: 1)
    runtime = types.SimpleNamespace(
        memcpyHostToDevice=1, memcpyDeviceToHost=2, memcpyDeviceToDevice=3,
        getDeviceCount=lambda: 1,
        getDevice=lambda: 0, memGetInfo=lambda: (1 << 30, 2 << 30),
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 9, "minor": 0,
                                       "totalGlobalMem": 2 << 30, "multiProcessorCount": 4,
                                       "l2CacheSize": 1 << 20})

    def memcpyAsync(dst, src, size, kind, stream):
        calls.append(("memcpy", kind, size))
        ctypes.memmove(dst, src, size)

    def pointerGetAttributes(ptr):
        raise RuntimeError("fake: no pointer attributes")

    def memsetAsync(ptr, value, size, stream):
        calls.append(("memset", value, size))
        ctypes.memset(ptr, value, size)

    runtime.memcpyAsync = memcpyAsync
    runtime.memsetAsync = memsetAsync
    runtime.pointerGetAttributes = pointerGetAttributes
    runtime.cudaMemoryTypeHost = 1
    cuda.runtime = runtime
    cp.cuda = cuda
    cp.calls = calls
    return cp, _fake_cublas(calls)


_NP_OF = {2: np.float16, 0: np.float32, 1: np.float64}


def _fake_cublas(calls):
    cb = types.ModuleType("fake_cublas")
    cb.CUBLAS_OP_N, cb.CUBLAS_OP_T = 0, 1
    cb.CUBLAS_COMPUTE_32F, cb.CUBLAS_COMPUTE_64F = 68, 70
    cb.CUBLAS_GEMM_DEFAULT = -1
    cb.CUBLAS_POINTER_MODE_HOST = 0
    cb.setStream = lambda h, s: None
    cb.setPointerMode = lambda h, m: None

    def mat(ptr, typ, op, rows, cols, ld):
        """op(X) (rows x cols) of the column-major X at ptr with leading dim ld."""
        if op == 0:
            srows, scols = rows, cols
        else:
            srows, scols = cols, rows
        assert ld >= max(1, srows), (ld, srows)
        isz = 2 if typ in (2, 14) else np.dtype(_NP_OF[typ]).itemsize
        n = ld * (scols - 1) + srows
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * (n * isz)).from_address(ptr))
        flat = raw.view(np.uint16 if typ == 14 else _NP_OF[typ])
        x = np.lib.stride_tricks.as_strided(flat, (srows, scols), (isz, ld * isz))
        if typ == 14:
            x = (x.astype(np.uint32) << 16).view(np.float32)
        x = x.astype(np.float64)
        return x if op == 0 else x.T

    def store(ptr, typ, rows, cols, ld, val):
        isz = 2 if typ in (2, 14) else np.dtype(_NP_OF[typ]).itemsize
        n = ld * (cols - 1) + rows
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * (n * isz)).from_address(ptr))
        flat = raw.view(np.uint16 if typ == 14 else _NP_OF[typ])
        x = np.lib.stride_tricks.as_strided(flat, (rows, cols), (isz, ld * isz))
        if typ == 14:
            f = val.astype(np.float32)
            u = f.view(np.uint32)
            x[...] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        else:
            x[...] = val

    def scalar(ptr, compute):
        t = ctypes.c_double if compute == 70 else ctypes.c_float
        return t.from_address(ptr).value

    def gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp):
        a = mat(A, at, ta, m, k, lda)
        b = mat(B, bt, tb, k, n, ldb)
        al, be = scalar(alpha, comp), scalar(beta, comp)
        r = al * (a @ b)
        if be != 0:
            r = r + be * mat(C, ct, 0, m, n, ldc)
        store(C, ct, m, n, ldc, r)

    def gemmEx(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp, algo):
        calls.append(("gemmEx", m, n, k))
        gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp)

    def gemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, sA, B, bt, ldb, sB, beta, C,
                             ct, ldc, sC, count, comp, algo):
        calls.append(("gemmStridedBatchedEx", m, n, k, count))
        isz = {2: 2, 14: 2, 0: 4, 1: 8}
        for i in range(count):
            gemm(ta, tb, m, n, k, alpha, A + i * sA * isz[at], at, lda,
                 B + i * sB * isz[bt], bt, ldb, beta, C + i * sC * isz[ct], ct, ldc, comp)

    cb.gemmEx = gemmEx
    cb.gemmStridedBatchedEx = gemmStridedBatchedEx
    return cb


def install(cp, cublas):
    """Make ``cupy_backends.cuda.libs.cublas`` and ``cupy_backends.cuda.api.runtime`` the
    fakes; returns the function that undoes it."""
    names = ["cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs",
             "cupy_backends.cuda.api"]
    saved = {n: sys.modules.get(n) for n in names + ["cupy_backends.cuda.libs.cublas",
                                                     "cupy_backends.cuda.api.runtime"]}
    pkgs = {n: types.ModuleType(n) for n in names}
    pkgs["cupy_backends.cuda.libs"].cublas = cublas
    pkgs["cupy_backends.cuda.api"].runtime = cp.cuda.runtime
    for n, m in pkgs.items():
        sys.modules[n] = m
    sys.modules["cupy_backends.cuda.libs.cublas"] = cublas
    sys.modules["cupy_backends.cuda.api.runtime"] = cp.cuda.runtime

    def undo():
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m

    return undo


@contextlib.contextmanager
def cuda_backend():
    """The cuda backend built over this stand-in and registered as 'cuda' while the block
    runs (the fiamma.cuda state before it is restored after)."""
    from fiamma import _backend
    from fiamma._backend.xp import cuda as C

    cp, cublas = make()
    undo = install(cp, cublas)
    saved = (C._BACKEND, C._REASON, C._TRIED, _backend._BACKENDS.get("cuda"))
    try:
        be = C.CupyBackend(cp)
        # its "device" memory is host memory: never handed to a real libcudnn
        be._cudnn_tried, be._cudnn_reason = True, "the fake CuPy of the tests"
        _backend.register("cuda", be)
        C._BACKEND, C._REASON, C._TRIED = be, None, True
        yield be
    finally:
        undo()
        C._BACKEND, C._REASON, C._TRIED = saved[:3]
        if saved[3] is None:
            _backend._BACKENDS.pop("cuda", None)
        else:
            _backend._BACKENDS["cuda"] = saved[3]
