"""pytest plugin (`-p fiamma_cuda_emu`, with FIAMMA_CUDA_EMU_LIB naming the library that
build.py made): the reference device ``xp`` becomes the cuda backend's CudaKernelsMixin over
NumPy, its kernels run by the CPU emulation, so FIAMMA_TEST_DEVICES=xp runs
packages/core/tests/test_cuda_kernels.py (and every device-parametrised suite) through them.
Its convolutions go through the cuDNN binding (fiamma/_backend/xp/cudnn.py) into the fake
libcudnn build.py made beside the library (FIAMMA_CUDNN_LIB is set to it), so
test_cuda_cudnn.py checks the binding on the CPU."""
import ctypes
import os

import numpy as np

import fiamma._backend.xp as X
from fiamma import _backend
from fiamma._backend.xp import XpBackend
from fiamma._backend.xp.cuda import BinaryEntryMixin
from fiamma._backend.xp.cuda_kernels import CudaKernelsMixin
from fiamma._backend.xp.cuda_lowp import LowpKernelsMixin
from fiamma._backend.xp.cuda_step import StepKernelsMixin
from fiamma._backend.xp.cudnn import CudnnConvMixin

LIB = ctypes.CDLL(os.environ["FIAMMA_CUDA_EMU_LIB"])
_FAKE_CUDNN = os.environ["FIAMMA_CUDA_EMU_LIB"].rsplit(".", 1)[0] + "_cudnn.so"
# never a real libcudnn: its calls would be handed host memory
os.environ["FIAMMA_CUDNN_LIB"] = _FAKE_CUDNN if os.path.isfile(_FAKE_CUDNN) else "none"
CALLS = {}


def _arg(a, ns):
    if isinstance(a, np.ndarray):
        return ctypes.c_void_p(a.ctypes.data if a.size else 0)
    if isinstance(a, np.uint64):
        return ctypes.c_void_p(int(a) or None)  # a null pointer, or a 64-bit integer
    if isinstance(a, np.uint32):
        return ctypes.c_uint(int(a))
    if isinstance(a, np.uint16):
        return ctypes.c_ushort(int(a))
    if isinstance(a, np.int64):
        return ctypes.c_longlong(int(a))
    if isinstance(a, np.int32):
        return ctypes.c_int(int(a))
    if isinstance(a, np.float64):
        return ctypes.c_double(float(a))
    if isinstance(a, np.float32):
        return ctypes.c_float(float(a))
    raise TypeError(type(a))


# cuda_flash's kernels take (B, H, rows, E) views with their strides as arguments
_STRIDED = {"fm_flash_fwd": "fwd", "fm_flash_bwd_dq": "dq", "fm_flash_bwd_dkv": "dkv"}


class Raw:
    def __init__(self, name, ct, key=""):
        self.name, self.ns, self.key = name, "f32" if ct == "float" else "f64", key
        if key.startswith("lowp"):  # cuda_lowp's kernels: one namespace per 16-bit type
            self.ns = "lp" + key[4:]
        elif key.startswith("step_"):  # cuda_step's kernels: one namespace per storage type
            self.ns = key

    def __call__(self, grid, block, args):
        CALLS[self.name] = CALLS.get(self.name, 0) + 1
        grid = tuple(grid) + (1,) * (2 - len(grid))
        for a in args:
            if isinstance(a, np.ndarray) and a.size and self.name not in _STRIDED:
                assert a.flags.c_contiguous or a.ndim == 2, (self.name, a.strides)
        cargs = [_arg(a, self.ns) for a in args]
        if self.name in _STRIDED:  # key "flash<emax><f|b>"
            f = getattr(LIB, f"{self.ns}_fa{self.key[5:-1]}_{_STRIDED[self.name]}")
            f(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name == "fm_philox":
            LIB.philox(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name.startswith("fm_cmp_s_"):
            w = {"bf16": 2, "f32": 4, "f64": 8}[self.name[9:]]
            LIB.cmp_s(ctypes.c_int(w), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name.startswith("fm_int_s"):
            w = int(self.name[8:]) // 8
            cargs[1] = ctypes.c_ulonglong(int(args[1]))  # (the wrapper takes 64 bits)
            LIB.int_s(ctypes.c_int(w), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name.startswith("fm_where_s"):
            w = int(self.name[10:]) // 8
            LIB.where_s(ctypes.c_int(w), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name.startswith("fm_bin4s_"):
            op = ["add", "sub", "mul", "div"].index(self.name[9:])
            LIB.bin4s(ctypes.c_int(op), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        if self.name.startswith("fm_bin4_"):
            op = ["add", "sub", "mul", "div"].index(self.name[8:])
            LIB.bin4(ctypes.c_int(op), ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)
            return
        base = self.name[3:]
        f = getattr(LIB, f"{self.ns}_{base}")
        if base in ("row_norm_wb", "colsum", "colsum1", "row_norm_wb1"):
            f(ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(block[0]), *cargs)
        else:
            assert grid[1] == 1
            f(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *cargs)


class Ew:
    def __init__(self, key):
        self.key = key

    def __call__(self, *args):
        CALLS[self.key] = CALLS.get(self.key, 0) + 1
        arrs = [a for a in args if isinstance(a, np.ndarray)]
        n = arrs[0].size
        for a in arrs:
            assert a.size == n and a.flags.c_contiguous, self.key
        ns = "f32" if arrs[0].dtype == np.float32 else "f64"
        cargs = [_arg(a, ns) for a in args]
        k = self.key
        if k.startswith("gelu"):
            getattr(LIB, f"{ns}_{k}")(*cargs, ctypes.c_long(n))
        elif k.startswith("adam"):
            ams = k == "adam_ams"
            if not ams:
                cargs.append(cargs[-1])  # VM unused
            getattr(LIB, f"{ns}_adam")(ctypes.c_int(ams), *cargs, ctypes.c_long(n))
        elif k.startswith("sgd"):
            mom = k == "sgd_mom"
            if not mom:
                cargs.append(cargs[-1])
            getattr(LIB, f"{ns}_sgd")(ctypes.c_int(mom), *cargs, ctypes.c_long(n))
        else:
            raise KeyError(k)


class Emu(StepKernelsMixin, LowpKernelsMixin, BinaryEntryMixin, CudnnConvMixin, CudaKernelsMixin,
          XpBackend):
    def __init__(self):
        XpBackend.__init__(self, np, "xp")
        self.fast_path_errors = {}
        self._kernels_init()
        self._cudnn_init()
        self._kernels_ok = True

    def _raw_kernel(self, key, src, name, ct):
        return Raw(name, ct, key)

    def _ew_kernel(self, key, in_params, out_params, body, preamble=""):
        return Ew(key)


EMU = Emu()
X._REFERENCE = EMU
_backend.register("xp", EMU)


def pytest_sessionfinish(session, exitstatus):
    print("\nEMU kernel calls:", dict(sorted(CALLS.items())))
    print("EMU fast_path_calls:", EMU.fast_path_calls, "errors:", EMU.fast_path_errors)
