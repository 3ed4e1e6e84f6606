"""The ``cuda`` backend: the array-module backend (fiamma._backend.xp) over CuPy, with CuPy's
own allocation and copies, and cuBLAS's GEMM for floating-point matrix products.

``backend()`` imports CuPy on first use and registers the backend for device type ``cuda``
when CuPy sees a GPU; without one it returns None and ``reason()`` keeps CuPy's own error (the
import error, or the CUDA runtime's "no driver"/"no device" error), which every "CUDA is not
available" message carries.

What differs from the NumPy flavour:

- memory comes from ``cupy.cuda.alloc`` (CuPy's memory pool) on the storage's device; a storage
  keeps the ``MemoryPointer`` and its address;
- host <-> device copies of contiguous same-dtype data are one ``cudaMemcpyAsync`` on the
  current stream (a download waits for it); one element (``.item()``) is one small copy;
- ``mm``/``matmul`` of float16/bfloat16/float32/float64 call cuBLAS ``gemmEx`` (or its
  strided-batched form) directly on the operands' memory, writing C in place: 16-bit inputs are
  multiplied with float32 accumulation (bfloat16 is stored as its bits, which cuBLAS reads as
  CUDA_R_16BF). Layouts cuBLAS can't take (a matrix with no unit stride, batch dims that don't
  collapse into one) go through the generic code, which stays correct for every layout.

These paths run only on a GPU: test_xp_*.py run them with FIAMMA_TEST_DEVICES=cuda, and
benchmarks/gpu/run.sh runs that suite on a GPU machine.
"""

import collections
import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend.xp import XpBackend
from fiamma._backend.xp.cuda_kernels import CudaKernelsMixin
from fiamma._backend.xp.cuda_lowp import LowpKernelsMixin
from fiamma._backend.xp.cuda_runtime import RuntimeMixin
from fiamma._backend.xp.cuda_step import StepKernelsMixin
from fiamma._backend.xp.cudnn import CudnnConvMixin

__all__ = ["CupyBackend", "BinaryEntryMixin", "backend", "reason"]

_BACKEND = None
_REASON = None
_TRIED = False


def backend():
    """The registered cuda backend, or None (with ``reason()`` saying why) when CuPy or a GPU
    is missing. The answer is decided once per process, as PyTorch's CUDA initialisation is."""
    global _BACKEND, _REASON, _TRIED
    if _TRIED:
        return _BACKEND
    _TRIED = True
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # ImportError, or the CUDA runtime's error (no driver, no device)
        _REASON = _describe(e)
        return None
    if n < 1:
        _REASON = "CuPy sees no CUDA device (cudaGetDeviceCount returned 0)"
        return None
    from fiamma import _backend

    be = CupyBackend(cupy)
    _backend.register("cuda", be)
    _BACKEND = be
    return be


def _describe(e):
    if isinstance(e, ImportError):
        return f"CuPy could not be imported ({type(e).__name__}: {e})"
    return f"CuPy found no usable CUDA device ({type(e).__name__}: {e})"


def reason():
    """Why ``backend()`` is None (None before it was asked, or when it is not None)."""
    return _REASON


# cuBLAS data types (cudaDataType) of the floating dtypes, and the compute type each uses
_CUDA_R = {D.float16: 2, D.bfloat16: 14, D.float32: 0, D.float64: 1}


def _blas_operand(rows, cols, s0, s1):
    """(transpose?, leading dim) for a row-major ``rows x cols`` view with element strides
    (s0, s1) as cuBLAS (column-major) sees it, or None when it has no usable unit stride."""
    if (s1 == 1 or cols == 1) and (s0 >= cols or rows == 1):
        return False, max(s0 if rows > 1 else cols, 1)
    if (s0 == 1 or rows == 1) and (s1 >= rows or cols == 1):
        return True, max(s1 if cols > 1 else rows, 1)
    return None


def _collapse(batch, strides):
    """Batch dims (size-1 dims dropped) merged where every operand steps evenly across them:
    (sizes, per-operand strides), one entry per remaining dim."""
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(batch) if n != 1]
    out = []
    for n, st in dims:
        if out:
            pn, pst = out[-1]
            if all(p == s * n for p, s in zip(pst, st)):
                out[-1] = (pn * n, st)
                continue
        out.append((n, st))
    return out


class BinaryEntryMixin:
    """The contract's one ``binary`` in front of CudaKernelsMixin's float32 kernels, which take
    a pair of tensors without parameters: a number operand or parameters go straight to the
    array-module code (the CPU emulation of the kernels, tools/cuda_emu, uses it too)."""

    def binary(self, op, shape, out, a, sa, b, sb, params=None):
        if params is None:
            return CudaKernelsMixin.binary(self, op, shape, out, a, sa, b, sb)
        return XpBackend.binary(self, op, shape, out, a, sa, b, sb, params)


class CupyBackend(StepKernelsMixin, LowpKernelsMixin, BinaryEntryMixin, CudnnConvMixin,
                  CudaKernelsMixin, RuntimeMixin, XpBackend):
    """The contract over CuPy (see the module docstring); the training step's one-pass kernels
    (StepKernelsMixin), the bfloat16/float16 kernels (LowpKernelsMixin), cuDNN's convolutions
    (CudnnConvMixin) and CudaKernelsMixin's fused kernels in front of the generic array code."""

    def __init__(self, cupy):
        XpBackend.__init__(self, cupy, "cuda")
        from cupy_backends.cuda.api import runtime

        self._rt = runtime
        self._h2d = runtime.memcpyHostToDevice
        self._d2h = runtime.memcpyDeviceToHost
        self._d2d = runtime.memcpyDeviceToDevice
        self._ndevices = runtime.getDeviceCount()
        RuntimeMixin.__init__(self)
        self.fast_path_errors = {}  # cuBLAS/kernel failures that fell back to the generic code
        self._kernels_init()
        self._cudnn_init()
        self._pending = collections.deque()  # (event, host source) of async uploads in flight
        self._cublas = None  # cupy_backends' cublas module, imported on the first product
        self._scalars = {}  # (float64?, alpha, beta) -> their host addresses (_gemm_scalars)

    # ---- memory ------------------------------------------------------------------------------
    # ---- bfloat16 <-> float32 in one pass each (the generic code makes ~2 and ~7 CuPy passes:
    # every bfloat16 op that has no kernel of its own widens and rounds through these) -------
    def bf16_to_f32(self, bits):
        r = self._bf16_run("bf16_to_f32", "uint16 b", "float32 f",
                           "f = __uint_as_float(((unsigned int)b) << 16)", bits)
        return XpBackend.bf16_to_f32(self, bits) if r is None else r

    def f32_to_bf16(self, f):
        """Round-to-nearest-even float32 -> bfloat16 bits; a NaN becomes the quiet NaN 0x7FC0
        with its sign (the generic code's rule)."""
        if f.dtype != np.float32:
            f = f.astype(np.float32)
        r = self._bf16_run(
            "f32_to_bf16", "float32 f", "uint16 b",
            "unsigned int u = __float_as_uint(f);"
            "b = ((u & 0x7fffffffu) > 0x7f800000u)"
            " ? (unsigned short)(0x7fc0u | ((u >> 16) & 0x8000u))"
            " : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)", f)
        return XpBackend.f32_to_bf16(self, f) if r is None else r

    def _bf16_run(self, key, inp, outp, body, a):
        """The conversion kernel ``key`` applied to ``a``; None when it does not build or run
        (the reason in fast_path_errors; the generic conversion serves from then on)."""
        if key in self.fast_path_errors or not self._kernels_ok:
            return None
        k = self._kern.get(key)
        try:
            if k is None:
                k = self._kern[key] = self.xp.ElementwiseKernel(inp, outp, body, "fm_" + key)
            r = k(a)
        except MemoryError:
            raise
        except Exception as e:  # (CuPy compiles at the first call)
            self.fast_path_errors[key] = f"{type(e).__name__}: {e}"
            return None
        self.fast_path_calls[key] = self.fast_path_calls.get(key, 0) + 1
        return r

    def new_storage(self, dev, nbytes, zero=False):
        # a tensor made on "cuda" lives on a numbered device (cuda:0), as in PyTorch
        return self.storage_cls(nbytes, zero, self.cuda_device(dev.index))

    def _alloc(self, dev, nbytes, zero):
        cp = self.xp
        idx = dev.index
        if self._ndevices > 1 and idx != self._rt.getDevice():
            with cp.cuda.Device(idx):
                return self._alloc_here(nbytes, zero, dev)
        return self._alloc_here(nbytes, zero, dev)

    def _alloc_here(self, nbytes, zero, dev):
        try:
            mem = self.xp.cuda.alloc(nbytes)
        except MemoryError as e:  # cupy.cuda.memory.OutOfMemoryError
            from fiamma._errors import OutOfMemoryError

            raise OutOfMemoryError(f"fiamma: cannot allocate {nbytes} bytes on {dev}: "
                                   f"{e}") from None
        if zero and nbytes:
            mem.memset_async(0, nbytes)
        self._note_allocation(dev.index, nbytes)
        return mem

    def _address(self, mem):
        return mem.ptr

    def _array(self, st, dtype, shape, bstrides, boff):
        mem = st.mem
        if boff and mem.ptr:  # MemoryPointer refuses an offset from a null (0-byte) block
            mem = mem + boff
        return self.xp.ndarray(shape, dtype, memptr=mem, strides=bstrides)

    def copy(self, dst, src):
        if (dst._dtype is src._dtype and dst._contig and src._contig and
                dst._storage.device is src._storage.device and dst._ptr != src._ptr):
            # one device-to-device copy on the current stream: no array views, no copy kernel
            # (clone, contiguous, a gradient kept by AccumulateGrad)
            n = dst._numel * dst._dtype.itemsize
            if n:
                self._rt.memcpyAsync(dst._ptr, src._ptr, n, self._d2d, self._stream_ptr())
            return 0
        return super().copy(dst, src)  # (LowpKernelsMixin: 16-bit conversions in one pass)

    def fill(self, dst, fval, ival, use_int):
        if dst._contig and (ival == 0 if use_int else
                            (fval == 0 and math.copysign(1.0, fval) > 0)):
            # zero bytes (zero_grad, zeros_like): one memset on the current stream
            n = dst._numel * dst._dtype.itemsize
            if n:
                self._rt.memsetAsync(dst._ptr, 0, n, self._stream_ptr())
            return 0
        return XpBackend.fill(self, dst, fval, ival, use_int)

    def synchronize(self, device=None):
        """Wait for every queued kernel and copy on ``device`` (default: the current one)."""
        idx = self.device_index(device)
        self.xp.cuda.Device(idx).synchronize()

    def _stream_ptr(self):
        return self.xp.cuda.get_current_stream().ptr

    def _upload(self, dst, host):
        if not dst._contig:
            self.raw(dst)[...] = self.xp.asarray(host.reshape(dst._shape))
            return
        # waited for, as PyTorch's blocking copy is: the host memory may be pinned (then the
        # copy really is asynchronous) and be reused by the caller as soon as this returns
        stream = self.xp.cuda.get_current_stream()
        self._rt.memcpyAsync(dst._ptr, host.ctypes.data, host.nbytes, self._h2d, stream.ptr)
        stream.synchronize()

    def _download(self, src, host):
        if not src._contig:
            host[...] = self.to_numpy(self.raw(src)).reshape(-1)
            return
        stream = self.xp.cuda.get_current_stream()
        self._rt.memcpyAsync(host.ctypes.data, src._ptr, host.nbytes, self._d2h, stream.ptr)
        stream.synchronize()

    def upload_async(self, dst, src):
        """dst (contiguous, on this device) = the contiguous, same-dtype host tensor src in
        pinned memory, queued on the current stream without waiting; src is kept alive until
        the copy has run."""
        stream = self.xp.cuda.get_current_stream()
        self._rt.memcpyAsync(dst._ptr, src._ptr, src._numel * src._dtype.itemsize, self._h2d,
                             stream.ptr)
        self._keep_until_done(src, stream)

    def download_async(self, src, dst):
        """The host tensor dst (pinned, contiguous) = src (contiguous, on this device), queued
        on the current stream without waiting (synchronize before reading dst)."""
        self._rt.memcpyAsync(dst._ptr, src._ptr, src._numel * src._dtype.itemsize, self._d2h,
                             self._stream_ptr())

    def _upload_table(self, host):
        """A kernel's small argument table: copied into pinned memory and queued to the device
        on the current stream without waiting (the pinned copy is kept until the copy ran)."""
        pin = self.alloc_pinned(host.nbytes)
        staged = np.ndarray(host.shape, host.dtype, buffer=pin)
        staged[...] = host
        dev = self.xp.empty(host.shape, host.dtype)
        stream = self.xp.cuda.get_current_stream()
        self._rt.memcpyAsync(dev.data.ptr, pin.ptr, host.nbytes, self._h2d, stream.ptr)
        self._keep_until_done((pin, dev), stream)
        return dev

    def _keep_until_done(self, obj, stream):
        pending = self._pending
        while pending and pending[0][0].done:
            pending.popleft()
        ev = self.xp.cuda.Event(disable_timing=True)
        ev.record(stream)
        pending.append((ev, obj))

    # ---- DLPack ------------------------------------------------------------------------------
    def borrow_storage(self, ptr, nbytes, owner, index):
        """A storage over device memory that ``owner`` keeps alive (a DLPack import): CuPy
        sees it as UnownedMemory, so views of it are CuPy arrays like any other."""
        cp = self.xp
        dev = self.cuda_device(index)
        mem = cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, max(nbytes, 1), owner, index),
                                    0) if ptr else cp.cuda.alloc(0)
        st = object.__new__(self.storage_cls)
        st.version = 0
        st.nbytes = nbytes
        st.device = dev
        st.mem = mem
        st.ptr = ptr
        st.views = {}
        st.irange = None
        st.counted = False  # not the pool's memory: not in the peak statistics
        return st

    def dlpack_stream(self):
        """The stream number a DLPack consumer passes to ``__dlpack__`` for the current
        stream (1: the legacy default stream, as the protocol numbers it)."""
        ptr = self._stream_ptr()
        return ptr if ptr else 1

    def dlpack_export(self, t, stream, max_version, dl_device, copy):
        """A DLPack capsule over tensor t's memory, made by CuPy from a CuPy view of it (the
        view holds the allocation, so the memory outlives t if the consumer keeps it).
        bfloat16 is exported as its bits (uint16) and relabelled by the caller."""
        a = self.raw(t)
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = tuple(max_version)
        if dl_device is not None:
            kwargs["dl_device"] = tuple(dl_device)
        if copy is not None:
            kwargs["copy"] = copy
        try:
            return a.__dlpack__(**kwargs)
        except TypeError:  # a CuPy that predates the 2023 keywords
            return a.__dlpack__(stream=stream)

    def _read_element(self, t, index):
        dt = t._dtype
        buf = np.empty(1, np.uint16 if dt is D.bfloat16 else dt._np)
        stream = self.xp.cuda.get_current_stream()
        self._rt.memcpyAsync(buf.ctypes.data, t._ptr + index * dt.itemsize, dt.itemsize,
                             self._d2h, stream.ptr)
        stream.synchronize()
        return buf

    def read_float(self, t, index=0):
        a = self._read_element(t, index)
        if t._dtype is D.bfloat16:
            a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return float(a[0])

    def read_int(self, t, index=0):
        return int(self._read_element(t, index)[0])

    # ---- cuBLAS matrix products ------------------------------------------------------------
    def mm(self, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha, beta, ialpha, ibeta):
        if self._gemm_fast(c, a, b, m, n, k, (scm, scn), (sam, sak), (sbk, sbn), None,
                           alpha, beta):
            return 0
        return XpBackend.mm(self, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha, beta,
                            ialpha, ibeta)

    def matmul(self, batch, m, n, k, c, sc, a, sa, b, sb, alpha, beta, ialpha, ibeta):
        sc, sa, sb = tuple(sc), tuple(sa), tuple(sb)
        nb = len(batch)
        dims = _collapse(tuple(batch), (sc[:nb], sa[:nb], sb[:nb]))
        if len(dims) <= 1:
            bat = dims[0] if dims else (1, [0, 0, 0])
            if self._gemm_fast(c, a, b, m, n, k, sc[nb:], sa[nb:], sb[nb:], bat, alpha, beta):
                return 0
        return XpBackend.matmul(self, batch, m, n, k, c, sc, a, sa, b, sb, alpha, beta, ialpha,
                                ibeta)

    def _gemm_fast(self, c, a, b, m, n, k, sc, sa, sb, bat, alpha, beta):
        """C = alpha * A @ B + beta * C through cuBLAS when dtypes and layouts allow; False to
        take the generic path. The product is computed as C^T = B^T A^T in cuBLAS's
        column-major terms, so row-major operands need no copy."""
        dt = c._dtype
        cuda_type = _CUDA_R.get(dt)
        if cuda_type is None or a._dtype is not dt or b._dtype is not dt or not (m and n and k):
            return False
        opc = _blas_operand(m, n, sc[0], sc[1])
        opa = _blas_operand(m, k, sa[0], sa[1])
        opb = _blas_operand(k, n, sb[0], sb[1])
        if opc is None or opc[0] or opa is None or opb is None:
            return False
        try:
            cublas = self._cublas
            if cublas is None:
                from cupy_backends.cuda.libs import cublas

                self._cublas = cublas
            handle = self.xp.cuda.device.get_cublas_handle()
            cublas.setStream(handle, self._stream_ptr())
            cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
            f64 = dt is D.float64
            compute = cublas.CUBLAS_COMPUTE_64F if f64 else cublas.CUBLAS_COMPUTE_32F
            pal, pbe = self._gemm_scalars(f64, alpha, beta if beta else 0.0)
            ta = cublas.CUBLAS_OP_T if opb[0] else cublas.CUBLAS_OP_N
            tb = cublas.CUBLAS_OP_T if opa[0] else cublas.CUBLAS_OP_N
            algo = cublas.CUBLAS_GEMM_DEFAULT
            if bat is None:
                cublas.gemmEx(handle, ta, tb, n, m, k, pal, b._ptr, cuda_type, opb[1],
                              a._ptr, cuda_type, opa[1], pbe, c._ptr, cuda_type,
                              opc[1], compute, algo)
            else:
                count, (stc, sta, stb) = bat
                if count > 1 and stc == 0:
                    return False  # results written over each other: the generic path decides
                cublas.gemmStridedBatchedEx(
                    handle, ta, tb, n, m, k, pal, b._ptr, cuda_type, opb[1], stb,
                    a._ptr, cuda_type, opa[1], sta, pbe, c._ptr, cuda_type, opc[1],
                    stc, count, compute, algo)
        except Exception as e:  # a cuBLAS status error: the generic path answers instead
            self.fast_path_errors[(dt.name, bat is not None)] = f"{type(e).__name__}: {e}"
            return False
        return True

    def _gemm_scalars(self, f64, alpha, beta):
        """Host addresses of alpha and beta as cuBLAS reads them (pointer mode host: read
        during the call), kept per value: a product's usual (1, 0) and (1, 1) make no new
        NumPy scalars per call."""
        key = (f64, alpha, beta)
        r = self._scalars.get(key)
        if r is None:
            scal = np.float64 if f64 else np.float32
            arrs = (np.array(alpha, scal), np.array(beta, scal))
            if len(self._scalars) >= 64:
                self._scalars.clear()
            r = self._scalars[key] = (arrs[0].ctypes.data, arrs[1].ctypes.data, arrs)
        return r[0], r[1]
