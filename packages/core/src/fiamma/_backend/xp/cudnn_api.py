"""cuDNN 8/9's legacy convolution API through ctypes: finding and loading libcudnn, the
prototypes, and the enum values the cuda backend's convolution (cudnn.py) uses. Nothing here
needs a GPU: loading the library and asking its version works on any machine that has it;
``cudnnCreate`` (in cudnn.py) is the first call that needs a device.

Discovery order (``candidates()``): the environment variable ``FIAMMA_CUDNN_LIB`` (a path or a
library name; ``none``/``0`` turns cuDNN off), else ``nvidia/cudnn/lib/libcudnn.so.9`` under
any sys.path or site-packages entry (the nvidia-cudnn-cu13/cu12 wheels, which PyTorch pulls in
too), else ``libcudnn.so.9`` from the loader's search path, else ``ctypes.util.find_library``.
The first that loads, reports a version >= 8.0 and has every function is used; otherwise
``reason()`` says what each candidate did.
"""

import ctypes
import ctypes.util
import glob
import os
import site
import sys

__all__ = ["candidates", "library", "reason", "version", "CudnnError", "Perf"]

# cudnnDataType_t (cudnn_graph.h)
DATA_FLOAT, DATA_DOUBLE, DATA_HALF, DATA_BFLOAT16 = 0, 1, 2, 9
# cudnnMathType_t
DEFAULT_MATH, TENSOR_OP_MATH, TENSOR_OP_MATH_ALLOW_CONVERSION, FMA_MATH = 0, 1, 2, 3
TENSOR_NCHW = 0  # cudnnTensorFormat_t
CROSS_CORRELATION = 1  # cudnnConvolutionMode_t
DETERMINISTIC = 1  # cudnnDeterminism_t
STATUS_SUCCESS = 0
STATUS_NOT_SUPPORTED = 3000
# the algorithm counts of cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
FWD_ALGO_COUNT, BWD_DATA_ALGO_COUNT, BWD_FILTER_ALGO_COUNT = 8, 6, 7
FWD_ALGOS = ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
             "WINOGRAD", "WINOGRAD_NONFUSED")
BWD_DATA_ALGOS = ("ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED")
BWD_FILTER_ALGOS = ("ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                    "FFT_TILING")
MIN_VERSION = 8000  # cudnnGetVersion() of cuDNN 8.0.0: the API below is cuDNN 8's and 9's


class Perf(ctypes.Structure):
    """cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (the three share one layout)."""
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("mathType", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


class CudnnError(RuntimeError):
    """A cuDNN call returned a status other than CUDNN_STATUS_SUCCESS (``status``)."""

    def __init__(self, msg, status=0):
        super().__init__(msg)
        self.status = status

    @property
    def not_supported(self):
        """CUDNN_STATUS_NOT_SUPPORTED and its refinements (3000-3999): a limitation of cuDNN
        for this configuration, not a failure."""
        return 3000 <= self.status < 4000


_V, _I, _SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
_PV, _PI, _PSZ, _PP = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                       ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(Perf))
_ALGO_Q = [_V, _V, _V, _V, _V, _I, _PI, _PP]
_WS_Q = [_V, _V, _V, _V, _V, _I, _PSZ]
_RUN = [_V, _V, _V, _V, _V, _V, _V, _I, _V, _SZ, _V, _V, _V]
# name -> (restype, argtypes), from cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h of cuDNN 9
PROTOTYPES = {
    "cudnnGetVersion": (_SZ, []),
    "cudnnGetErrorString": (ctypes.c_char_p, [_I]),
    "cudnnCreate": (_I, [_PV]),
    "cudnnDestroy": (_I, [_V]),
    "cudnnSetStream": (_I, [_V, _V]),
    "cudnnCreateTensorDescriptor": (_I, [_PV]),
    "cudnnDestroyTensorDescriptor": (_I, [_V]),
    "cudnnSetTensorNdDescriptor": (_I, [_V, _I, _I, _PI, _PI]),
    "cudnnCreateFilterDescriptor": (_I, [_PV]),
    "cudnnDestroyFilterDescriptor": (_I, [_V]),
    "cudnnSetFilterNdDescriptor": (_I, [_V, _I, _I, _I, _PI]),
    "cudnnCreateConvolutionDescriptor": (_I, [_PV]),
    "cudnnDestroyConvolutionDescriptor": (_I, [_V]),
    "cudnnSetConvolutionNdDescriptor": (_I, [_V, _I, _PI, _PI, _PI, _I, _I]),
    "cudnnSetConvolutionGroupCount": (_I, [_V, _I]),
    "cudnnSetConvolutionMathType": (_I, [_V, _I]),
    "cudnnGetConvolutionForwardAlgorithm_v7": (_I, _ALGO_Q),
    "cudnnGetConvolutionBackwardDataAlgorithm_v7": (_I, _ALGO_Q),
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7": (_I, _ALGO_Q),
    "cudnnFindConvolutionForwardAlgorithm": (_I, _ALGO_Q),
    "cudnnFindConvolutionBackwardDataAlgorithm": (_I, _ALGO_Q),
    "cudnnFindConvolutionBackwardFilterAlgorithm": (_I, _ALGO_Q),
    "cudnnGetConvolutionForwardWorkspaceSize": (_I, _WS_Q),
    "cudnnGetConvolutionBackwardDataWorkspaceSize": (_I, _WS_Q),
    "cudnnGetConvolutionBackwardFilterWorkspaceSize": (_I, _WS_Q),
    "cudnnConvolutionForward": (_I, _RUN),
    "cudnnConvolutionBackwardData": (_I, _RUN),
    "cudnnConvolutionBackwardFilter": (_I, _RUN),
    "cudnnAddTensor": (_I, [_V, _V, _V, _V, _V, _V, _V]),
}


class Library:
    """A loaded libcudnn: one attribute per function of PROTOTYPES (argument types set, so
    Python ints pass as pointers and sizes), ``path`` and ``version``."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        missing = []
        for name, (res, args) in PROTOTYPES.items():
            try:
                f = getattr(lib, name)
            except AttributeError:
                missing.append(name)
                continue
            f.restype, f.argtypes = res, args
            setattr(self, name[5:], f)
        if missing:
            raise OSError(f"{path} lacks {', '.join(missing)}")
        self.path = path
        self.version = int(self.GetVersion())
        self._dll = lib

    def check(self, rc, what):
        """Raise CudnnError naming ``what`` and the status when rc is not success."""
        if rc:
            try:
                name = self.GetErrorString(rc).decode()
            except Exception:  # a library whose error strings fail: the number says enough
                name = "status"
            raise CudnnError(f"{what} failed: {name} ({rc})", rc)


def _site_dirs():
    out = list(sys.path)
    try:
        out += site.getsitepackages()
    except AttributeError:  # a virtualenv's old site.py
        pass
    try:
        out.append(site.getusersitepackages())
    except AttributeError:
        pass
    return out


def candidates(environ=None, paths=None):
    """The libraries to try, in order: [(where it came from, path or name)]; empty when
    ``FIAMMA_CUDNN_LIB`` is ``none``/``0`` (cuDNN turned off)."""
    environ = os.environ if environ is None else environ
    env = environ.get("FIAMMA_CUDNN_LIB")
    if env:
        if env.strip().lower() in ("0", "none", "off"):
            return []
        return [("FIAMMA_CUDNN_LIB", env)]
    out, seen = [], set()
    dirs = _site_dirs() if paths is None else paths
    for p in dirs:
        f = os.path.join(p or os.curdir, "nvidia", "cudnn", "lib", "libcudnn.so.9")
        if f not in seen and os.path.isfile(f):
            seen.add(f)
            out.append(("site-packages", f))
    for p in dirs:  # other layouts of NVIDIA's wheels (nvidia/cu13/lib/, ...)
        for f in sorted(glob.glob(os.path.join(p or os.curdir, "nvidia", "*", "lib",
                                               "libcudnn.so.9"))):
            if f not in seen and os.path.isfile(f):
                seen.add(f)
                out.append(("site-packages", f))
    out.append(("loader", "libcudnn.so.9"))
    found = ctypes.util.find_library("cudnn")
    if found and found != "libcudnn.so.9":
        out.append(("find_library", found))
    return out


_STATE = {"tried": False, "lib": None, "reason": None}


def load(environ=None, paths=None):
    """(Library or None, reason): the first candidate that loads and is new enough."""
    cands = candidates(environ, paths)
    if not cands:
        return None, "cuDNN is turned off (FIAMMA_CUDNN_LIB=none)"
    notes = []
    for where, path in cands:
        try:
            lib = Library(path)
        except OSError as e:
            notes.append(f"{path} ({where}): {e}")
            continue
        if lib.version < MIN_VERSION:
            notes.append(f"{path} ({where}): version {lib.version} is older than cuDNN 8.0")
            continue
        return lib, None
    return None, "no usable libcudnn: " + "; ".join(notes)


def library():
    """The process's libcudnn (loaded on first call), or None (then ``reason()`` says why)."""
    if not _STATE["tried"]:
        _STATE["lib"], _STATE["reason"] = load()
        _STATE["tried"] = True
    return _STATE["lib"]


def reason():
    """Why ``library()`` is None (None when it is not, or before it was asked)."""
    return _STATE["reason"]


def version():
    """cudnnGetVersion() of the loaded library (e.g. 92000 for 9.20.0), or None."""
    lib = library()
    return None if lib is None else lib.version


def _reset():
    """Forget the loaded library (tests: discovery under another environment)."""
    _STATE.update(tried=False, lib=None, reason=None)
