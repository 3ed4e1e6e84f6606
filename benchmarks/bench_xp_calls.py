"""Array-module calls per op on the cuda backend's code paths, and host time per op, measured on
the CPU (issue 21): the figure that transfers to a GPU, where each CuPy call costs ~10 us of host
time (a ufunc 9-10 us, a reduction 13-19 us, an ``o[...] = a`` 7 us, a kernel launch ~5-10 us).

The reference device ``xp`` becomes the cuda backend class over NumPy (tools/cuda_emu: the
``CudaKernelsMixin`` fast paths, their kernels run by the CPU emulation), so the ops take the
paths they take on a GPU. Then, per op (the GPT-shaped ops of gpu/bench_ops.py at tiny sizes,
or with ``--mid`` at sizes past the cuda paths' thresholds, and whole GPT training steps):

- **calls**: array-module calls made by one call of the op (all of them; ``launch``, ``view``
  and ``alloc`` are parts), counted by wrapping the backend's
  ``xp`` module (every function, ufunc and creation call), the arrays it hands out (a NumPy
  subclass counting ufuncs and operators, ``__array_function__`` functions, indexing reads and
  writes, and the methods that make an array or a launch: ``copy``, ``astype``, ``reshape``,
  ``sum``, ...) and the emulated kernel launches; calls made inside a counted call are not
  counted again. ``launch`` is the kernels among them, ``view`` the array views built over
  fiamma storages (a CuPy ``ndarray`` per view, a few us each; most are cached per storage),
  ``alloc`` the storages allocated (CuPy's pool; ``memset`` counts a zeroed one's fill).
  A product cuBLAS takes on the GPU (CupyBackend's mm/matmul), and a copy or zero fill that
  CupyBackend makes with one memcpy/memset, count as one launch.
- **host us** (generic backend only: under the emulation the kernels' CPU emulation would be
  timed too): thread CPU time per call with nothing wrapped (best of rounds): fiamma's Python
  plus NumPy's own (tiny arrays: next to nothing).
- **py us** (``--python``, emulated cuda backend): thread CPU time per call with the device work
  stubbed out (kernel launches, the products cuBLAS takes and CupyBackend's memcpy/memset copies
  and fills do nothing; see ``python_us``): fiamma's own Python on the cuda paths, plus the
  NumPy calls left on them and two NumPy-only costs a GPU does not pay (``np.errstate`` around
  each primitive, ~1 us, and a NumPy allocation's address, ~1 us per result). On a GPU each op
  pays this plus its CuPy calls (~5-10 us each).

The ops are gpu/bench_ops.py's (the GPT-shaped ones, then ResNet-18's bfloat16 ones: tiny, or
(2, 8, 16, 16) with ``--mid``), gpu/bench_cuda.py's MLP training step at its size
(784-512-512-10, batch 128, SGD: the step whose device work is tiny) and the GPT step below.

    python tools/cuda_emu/build.py /tmp/emu.so
    FIAMMA_CUDA_EMU_LIB=/tmp/emu.so PYTHONPATH=tools/cuda_emu:benchmarks/gpu:packages/core/src:\\
        packages/autograd/src:packages/nn/src:packages/optim/src \\
        python benchmarks/bench_xp_calls.py [--only TEXT] [--detail] [--python] [--json PATH]

Without FIAMMA_CUDA_EMU_LIB the plain array-module backend (the generic paths) is counted.
Needs torch (gpu/bench_ops.py builds PyTorch twins of each case; only fiamma's are run).
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gpu"))

import fiamma  # noqa: E402

EMU = None
if os.environ.get("FIAMMA_CUDA_EMU_LIB"):
    import fiamma_cuda_emu  # noqa: E402  (registers the emulated cuda backend as device xp)

    EMU = fiamma_cuda_emu
    BACKEND = fiamma_cuda_emu.EMU
else:
    from fiamma._backend.xp import reference  # noqa: E402

    BACKEND = reference()

COUNTS = {}
SITES = {}
ON = [False]
DEPTH = [0]
WHERE = [False, False]
_SKIP = (os.path.abspath(__file__), "fiamma_cuda_emu")


def _count(name):
    if ON[0] and DEPTH[0] == 0:
        COUNTS[name] = COUNTS.get(name, 0) + 1
        if WHERE[0]:  # the first fiamma frame that made the call
            f = sys._getframe(1)
            while f is not None and (f.f_code.co_filename.startswith(_SKIP) or
                                     "/numpy/" in f.f_code.co_filename):
                f = f.f_back
            g = f  # and the first frame above the backend (the op that asked)
            while g is not None and "/_backend/" in g.f_code.co_filename:
                g = g.f_back
            if f is not None:
                site = (f"{f.f_code.co_filename.rsplit('/fiamma/', 1)[-1]}:{f.f_lineno} "
                        f"{f.f_code.co_name}: {name}")
                if g is not None and g is not f:
                    site += (f"  <- {g.f_code.co_filename.rsplit('/fiamma/', 1)[-1]}:"
                             f"{g.f_lineno} {g.f_code.co_name}")
                h = g  # and the first frame above core
                while h is not None and "/packages/core/" in h.f_code.co_filename:
                    h = h.f_back
                if h is not None and h is not g and WHERE[1]:
                    site += (f"  <- {h.f_code.co_filename.rsplit('/fiamma/', 1)[-1]}:"
                             f"{h.f_lineno} {h.f_code.co_name}")
                SITES[site] = SITES.get(site, 0) + 1


def _wrap(r):
    if type(r) is np.ndarray:
        return np.ndarray.view(r, CA)
    if type(r) is tuple:
        return tuple(_wrap(v) for v in r)
    return r


def _unwrap(v):
    if isinstance(v, CA):
        return np.ndarray.view(v, np.ndarray)
    if type(v) is tuple:
        return tuple(_unwrap(x) for x in v)
    return v


class CA(np.ndarray):
    """A NumPy array that counts the calls made on it (see the module docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        _count(f"{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))
        DEPTH[0] += 1
        try:
            if "out" in kw:
                kw["out"] = _unwrap(kw["out"])
            r = getattr(ufunc, method)(*_unwrap(inputs), **kw)
        finally:
            DEPTH[0] -= 1
        return _wrap(r)

    def __array_function__(self, func, types_, args, kwargs):
        _count(func.__name__)
        DEPTH[0] += 1
        try:
            return _wrap(super().__array_function__(func, types_, args, kwargs))
        finally:
            DEPTH[0] -= 1

    def __getitem__(self, k):
        _count("getitem")
        DEPTH[0] += 1
        try:
            return _wrap(np.ndarray.__getitem__(self, k))
        finally:
            DEPTH[0] -= 1

    def __setitem__(self, k, v):
        _count("setitem")
        DEPTH[0] += 1
        try:
            np.ndarray.__setitem__(self, k, v)
        finally:
            DEPTH[0] -= 1


def _method(name):
    base = getattr(np.ndarray, name)

    def m(self, *a, **k):
        _count(f".{name}")
        DEPTH[0] += 1
        try:
            return _wrap(base(self, *a, **k))
        finally:
            DEPTH[0] -= 1

    m.__name__ = name
    return m


for _n in ("copy", "astype", "reshape", "view", "ravel", "flatten", "take", "put", "fill",
           "sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all",
           "clip", "nonzero", "cumsum", "dot", "transpose", "squeeze", "swapaxes", "repeat",
           "argsort", "sort", "conj", "round", "tolist", "item"):
    setattr(CA, _n, _method(_n))


class _Fn:
    """A counting stand-in for a function of the array module (and its attributes: a ufunc's
    ``reduce`` / ``at``)."""

    def __init__(self, name, fn):
        self._name, self._fn = name, fn

    def __call__(self, *a, **k):
        _count(self._name)
        DEPTH[0] += 1
        try:
            return _wrap(self._fn(*a, **k))
        finally:
            DEPTH[0] -= 1

    def __getattr__(self, attr):
        v = getattr(self._fn, attr)
        return _Fn(f"{self._name}.{attr}", v) if callable(v) and not isinstance(v, type) else v


class _Module:
    """A counting stand-in for the array module."""

    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        v = getattr(self._mod, name)
        if isinstance(v, types.ModuleType):
            v = _Module(v)
        elif callable(v) and not isinstance(v, type) and not isinstance(v, np.dtype):
            v = _Fn(name, v)
        self.__dict__[name] = v  # looked up once
        return v


_PLAIN_ARRAY = BACKEND._array
_PLAIN_XP = BACKEND.xp


_PLAIN_ALLOC = BACKEND._alloc


def _counting_alloc(dev, nbytes, zero):
    _count("alloc")  # a storage: CuPy's pool allocation (and a memset when zeroed)
    if zero and nbytes:
        _count("memset")
    return _PLAIN_ALLOC(dev, nbytes, zero)


def _counting_array(st, dtype, shape, bstrides, boff):
    _count("view")
    return np.ndarray.view(_PLAIN_ARRAY(st, dtype, shape, bstrides, boff), CA)


def _counting_launch(cls):
    call = cls.__call__

    def launch(self, *a, **k):
        _count("launch:" + getattr(self, "name", getattr(self, "key", "?")))
        DEPTH[0] += 1
        try:
            return call(self, *a, **k)
        finally:
            DEPTH[0] -= 1

    cls.__call__ = launch


_PLAIN_MM = BACKEND.mm
_PLAIN_MATMUL = BACKEND.matmul


def _gemm_ok(c, a, b, m, n, k, sc, sa, sb, bat):
    """True where CupyBackend._gemm_fast takes cuBLAS (one call, no array views)."""
    from fiamma._backend.xp.cuda import _CUDA_R, _blas_operand

    dt = c._dtype
    if _CUDA_R.get(dt) is None or a._dtype is not dt or b._dtype is not dt or not (m and n and k):
        return False
    opc = _blas_operand(m, n, sc[0], sc[1])
    if opc is None or opc[0] or _blas_operand(m, k, sa[0], sa[1]) is None or \
            _blas_operand(k, n, sb[0], sb[1]) is None:
        return False
    return bat is None or not (bat[0] > 1 and bat[1][0] == 0)


def _counting_mm(m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, *rest):
    fast = _gemm_ok(c, a, b, m, n, k, (scm, scn), (sam, sak), (sbk, sbn), None)
    if fast:
        _count("launch:cublas")
        DEPTH[0] += 1
    try:
        if fast and _STUB[0]:
            return 0
        return _PLAIN_MM(m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, *rest)
    finally:
        if fast:
            DEPTH[0] -= 1


def _counting_matmul(batch, m, n, k, c, sc, a, sa, b, sb, *rest):
    from fiamma._backend.xp.cuda import _collapse

    sc, sa, sb = tuple(sc), tuple(sa), tuple(sb)
    nb = len(batch)
    dims = _collapse(tuple(batch), (sc[:nb], sa[:nb], sb[:nb]))
    fast = len(dims) <= 1 and _gemm_ok(c, a, b, m, n, k, sc[nb:], sa[nb:], sb[nb:],
                                       dims[0] if dims else (1, [0, 0, 0]))
    if fast:
        _count("launch:cublas")
        DEPTH[0] += 1
    try:
        return 0 if fast and _STUB[0] else _PLAIN_MATMUL(batch, m, n, k, c, sc, a, sa, b, sb, *rest)
    finally:
        if fast:
            DEPTH[0] -= 1


_PLAIN_COPY = BACKEND.copy
_PLAIN_FILL = BACKEND.fill


def _counting_copy(dst, src):
    """As CupyBackend.copy: a contiguous same-dtype copy is one memcpy (the emulation has no
    CUDA runtime: the array code runs, uncounted)."""
    fast = (dst._dtype is src._dtype and dst._contig and src._contig and
            dst._storage.device is src._storage.device and dst._ptr != src._ptr)
    if fast:
        _count("launch:memcpy")
        DEPTH[0] += 1
    try:
        return 0 if fast and _STUB[0] else _PLAIN_COPY(dst, src)
    finally:
        if fast:
            DEPTH[0] -= 1


def _counting_fill(dst, fval, ival, use_int):
    """As CupyBackend.fill: zero bytes into contiguous memory are one memset."""
    import math

    fast = dst._contig and (ival == 0 if use_int else
                            (fval == 0 and math.copysign(1.0, fval) > 0))
    if fast:
        _count("launch:memset")
        DEPTH[0] += 1
    try:
        return 0 if fast and _STUB[0] else _PLAIN_FILL(dst, fval, ival, use_int)
    finally:
        if fast:
            DEPTH[0] -= 1


def counting(on):
    """Wrap (True) or unwrap (False) the backend's array module and array views (and, on the
    emulated cuda backend, count a product cuBLAS would take as one launch, as CupyBackend's
    mm/matmul do)."""
    if on:
        BACKEND.xp = _Module(_PLAIN_XP)
        BACKEND._array = _counting_array
        BACKEND._alloc = _counting_alloc
        if EMU is not None:
            BACKEND.mm, BACKEND.matmul = _counting_mm, _counting_matmul
            if "fill" in CupyBackend.__dict__:  # CupyBackend's memcpy/memset (absent before)
                BACKEND.copy, BACKEND.fill = _counting_copy, _counting_fill
    else:
        BACKEND.xp = _PLAIN_XP
        BACKEND._array = _PLAIN_ARRAY
        BACKEND._alloc = _PLAIN_ALLOC
        BACKEND.mm, BACKEND.matmul = _PLAIN_MM, _PLAIN_MATMUL
        BACKEND.copy, BACKEND.fill = _PLAIN_COPY, _PLAIN_FILL
    for st_views in _all_view_caches():
        st_views.clear()  # views built under one mode are not reused under the other


def _all_view_caches():
    for o in gc.get_objects():
        if isinstance(o, BACKEND.storage_cls):
            yield o.views


from fiamma._backend.xp.cuda import CupyBackend  # noqa: E402

if EMU is not None:
    _counting_launch(EMU.Raw)
    _counting_launch(EMU.Ew)


def count_calls(fn, reps=3, stubbed=False):
    """Array-module calls of one fn() (the last of ``reps`` calls, so caches are warm);
    ``stubbed``: with the device work stubbed out as in python_us (same paths, garbage values:
    minutes less for the ResNet step, whose emulated kernels run on the CPU)."""
    if stubbed:
        fn()  # (makes the convolution plans with real calls once)
        _STUB[0] = True
        _cudnn_wrap("stub")
        try:
            return count_calls(fn, reps)
        finally:
            _cudnn_wrap(None)
            _STUB[0] = False
    counting(True)
    try:
        for _ in range(reps - 1):
            fn()
        COUNTS.clear()
        SITES.clear()
        _cudnn_wrap("count")
        ON[0] = True
        fn()
        ON[0] = False
    finally:
        ON[0] = False
        _cudnn_wrap(None)
        counting(False)
    return dict(COUNTS)


def host_us(fn, n, rounds):
    for _ in range(2):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - t) / n)
    return best * 1e6


_STUB = [False]


def _stubbing_launch(cls):
    call = cls.__call__

    def launch(self, *a, **k):
        if _STUB[0]:  # (counted all the same when counting: --stub-count)
            _count("launch:" + getattr(self, "name", getattr(self, "key", "?")))
            return None
        return call(self, *a, **k)

    cls.__call__ = launch


def _stub_mm(m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, *rest):
    if _gemm_ok(c, a, b, m, n, k, (scm, scn), (sam, sak), (sbk, sbn), None):
        return 0
    return _PLAIN_MM(m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, *rest)


def _stub_matmul(batch, m, n, k, c, sc, a, sa, b, sb, *rest):
    from fiamma._backend.xp.cuda import _collapse

    sc, sa, sb = tuple(sc), tuple(sa), tuple(sb)
    nb = len(batch)
    dims = _collapse(tuple(batch), (sc[:nb], sa[:nb], sb[:nb]))
    if len(dims) <= 1 and _gemm_ok(c, a, b, m, n, k, sc[nb:], sa[nb:], sb[nb:],
                                   dims[0] if dims else (1, [0, 0, 0])):
        return 0
    return _PLAIN_MATMUL(batch, m, n, k, c, sc, a, sa, b, sb, *rest)


def _stub_copy(dst, src):
    if (dst._dtype is src._dtype and dst._contig and src._contig and
            dst._storage.device is src._storage.device and dst._ptr != src._ptr):
        return 0
    return _PLAIN_COPY(dst, src)


def _stub_fill(dst, fval, ival, use_int):
    import math

    if dst._contig and (ival == 0 if use_int else (fval == 0 and math.copysign(1.0, fval) > 0)):
        return 0
    return _PLAIN_FILL(dst, fval, ival, use_int)


def python_us(fn, n, rounds):
    """Host time per call on the emulated cuda backend with the device work taken out: kernel
    launches, the products cuBLAS takes and CupyBackend's memcpy/memset copies and fills do
    nothing (the values computed are garbage; the paths taken are the GPU's), so what is left
    is fiamma's own Python plus the array-module calls that remain on the cuda paths (tiny
    arrays: their NumPy cost is small, their CuPy cost on a GPU ~10 us each)."""
    _STUB[0] = True
    BACKEND.mm, BACKEND.matmul = _stub_mm, _stub_matmul
    BACKEND.copy, BACKEND.fill = _stub_copy, _stub_fill
    fn()  # (makes any new convolution plan, so that it is stubbed too)
    _cudnn_wrap("stub")
    try:
        return host_us(fn, n, rounds)
    finally:
        _cudnn_wrap(None)
        _STUB[0] = False
        BACKEND.mm, BACKEND.matmul = _PLAIN_MM, _PLAIN_MATMUL
        BACKEND.copy, BACKEND.fill = _PLAIN_COPY, _PLAIN_FILL


if EMU is not None:
    _stubbing_launch(EMU.Raw)
    _stubbing_launch(EMU.Ew)


def summarise(c):
    total = sum(c.values())
    launch = sum(v for k, v in c.items() if k.startswith("launch:"))
    return total, launch, c.get("view", 0), c.get("alloc", 0)


def mlp_step_case(f):
    """gpu/bench_cuda.py's MLP training step at its size (784-512-512-10, batch 128; SGD,
    cross entropy, zero_grad with set_to_none), fiamma on xp."""
    from bench_cuda import _mlp, _train_step

    rng = np.random.default_rng(0)
    fm = _mlp(f, "xp")
    x = f.from_numpy(rng.standard_normal((128, 784), dtype=np.float32)).to("xp")
    y = f.from_numpy(rng.integers(0, 10, 128).astype(np.int64)).to("xp")
    step = _train_step(f, fm, f.optim.SGD(fm.parameters(), lr=0.01), f.nn.CrossEntropyLoss(),
                       x, y)
    return [("MLP step 784-512-512-10 b128", step, None, 5)]


def resnet_step_case(f):
    """gpu/bench_cuda.py's ResNet-18 training step (bf16 autocast, SGD momentum 0.9, cross
    entropy) at a small size: batch 2, 32x32, 10 classes, fiamma on xp. Its convolutions take
    the cuDNN binding into the fake libcudnn (tools/cuda_emu sets FIAMMA_CUDNN_LIB), so the
    per-op paths are the GPU's. Autocast knows the device types 'cpu' and 'cuda' only: the
    emulated cuda device is 'xp', so this benchmark lets autocast run there (``_ac_on_xp``)."""
    from bench_cuda import _train_step

    import fiamma.vision.models as fvm

    _ac_on_xp(f)
    rng = np.random.default_rng(0)
    fm = fvm.resnet18(num_classes=10).to("xp")
    x = f.from_numpy(rng.standard_normal((2, 3, 32, 32), dtype=np.float32)).to("xp")
    y = f.from_numpy(rng.integers(0, 10, 2).astype(np.int64)).to("xp")
    step = _train_step(f, fm, f.optim.SGD(fm.parameters(), lr=0.01, momentum=0.9),
                       f.nn.CrossEntropyLoss(), x, y, autocast_dtype=f.bfloat16,
                       dev_type="xp")
    return [("ResNet-18 step b2 32^2 bf16 autocast", step, None, 1)]


def resnet_block_case(f):
    """One ResNet-18 basic block (conv3x3-bn-relu-conv3x3-bn, the identity added, relu) forward
    and backward under bfloat16 autocast, layer1's 64 channels at batch 2 and 8x8 (the paths of
    each of ResNet-18's eight blocks on a GPU, at a size the emulation runs in seconds); the
    parameters' gradients are cleared after each call as zero_grad(set_to_none) does."""
    import fiamma.vision.models.resnet as fvr

    _ac_on_xp(f)
    rng = np.random.default_rng(0)
    blk = fvr.BasicBlock(64, 64).to("xp")
    # the block's input is bfloat16 as in the network (the stem's max pool's, or the previous
    # block's output)
    x = f.from_numpy(rng.standard_normal((2, 64, 8, 8), dtype=np.float32)).to("xp")
    x = x.to(f.bfloat16).requires_grad_(True)
    params = list(blk.parameters()) + [x]
    g = []

    def go():
        with f.autocast("xp", dtype=f.bfloat16):
            y = blk(x)
        if not g:  # the incoming gradient, of the block's output dtype (made once)
            g.append(f.from_numpy(rng.standard_normal(tuple(y.shape), dtype=np.float32))
                     .to("xp").to(y.dtype))
        y.backward(g[0])
        for p in params:
            p.grad = None

    return [("ResNet basic block 64ch b2 8^2 bf16 fwd+bwd", go, None, 5)]


def _ac_on_xp(f):
    from fiamma import _autocast

    if "xp" not in _autocast.DEVICE_TYPES:
        _autocast.DEVICE_TYPES = _autocast.DEVICE_TYPES + ("xp",)


def _cudnn_plans():
    plans = getattr(BACKEND, "_cudnn_plans", None) or {}
    return [p for p in plans.values() if p is not None]


def _cudnn_wrap(mode):
    """Count (mode "count") or stub out (mode "stub") the cuDNN calls of the convolution plans
    made so far (each a call into libcudnn on the GPU: host time, and a launch); None: back."""
    for p in _cudnn_plans():
        base = _PLAIN_FN.setdefault(id(p), (p, p.fn))[1]
        if mode is None:
            p.fn = base
        elif mode == "stub":
            p.fn = _stub_cudnn
        else:
            p.fn = _counted_cudnn(p.name, _stub_cudnn if _STUB[0] else base)


_PLAIN_FN = {}


def _stub_cudnn(*a):
    return 0


def _counted_cudnn(name, fn):
    def call(*a):
        _count("launch:" + name)
        DEPTH[0] += 1
        try:
            return fn(*a)
        finally:
            DEPTH[0] -= 1

    return call


def gpt_step_case(f, t, mid=False):
    """A tiny GPT training step (2 layers, 2 heads, 32 wide, block 16, batch 2; AdamW) and its
    forward alone, fiamma on xp (``mid``: 4 heads, 256 wide, block 64, batch 4)."""
    from bench_cuda import build_gpt

    # linear on a 3-d input takes addmm's fused bias at the GPU sizes (above _FUSED_BIAS_MIN
    # output elements): the tiny model takes the same paths
    f.nn.functional._FUSED_BIAS_MIN = 0
    heads, width, block, batch = (4, 256, 64, 4) if mid else (2, 32, 16, 2)
    fm = build_gpt(f, 2, heads, width, block).to("xp")
    opt = f.optim.AdamW(fm.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = f.from_numpy(rng.integers(0, 65, (batch, block)).astype(np.int64)).to("xp")
    y = f.from_numpy(rng.integers(0, 65, (batch, block)).astype(np.int64)).to("xp")
    F = f.nn.functional

    def step():  # as gpu/bench_cuda.py's _train_step
        opt.zero_grad()
        loss = F.cross_entropy(fm(x).view(-1, 65), y.view(-1))
        loss.backward()
        opt.step()

    def forward():
        with f.no_grad():
            fm(x)

    if mid:  # (the emulated forward alone adds minutes, not information)
        return [("GPT step (mid, 2 layers)", step, None, 5)]
    return [("GPT step (tiny, 2 layers)", step, None, 5),
            ("GPT forward, no_grad (tiny)", forward, None, 10)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the calls timed")
    ap.add_argument("--detail", action="store_true", help="print each op's calls by name")
    ap.add_argument("--where", action="store_true", help="print the call sites too")
    ap.add_argument("--where2", action="store_true", help="... and the caller above core")
    ap.add_argument("--mid", action="store_true",
                    help="B, T, C = 4, 64, 256 (65536-element activations: the size from which "
                         "the cuda paths take their float4 kernels) instead of tiny sizes")
    ap.add_argument("--no-time", action="store_true", help="count only")
    ap.add_argument("--python", action="store_true",
                    help="(emulated cuda backend) also time each case with the device work "
                         "stubbed out: fiamma's own Python per op/step (see python_us)")
    ap.add_argument("--stub-count", action="store_true",
                    help="(emulated cuda backend) count with the device work stubbed out too")
    ap.add_argument("--json")
    args = ap.parse_args()
    if EMU is not None and not args.python:
        args.no_time = True  # the emulated kernels run on the CPU: their time is not host time
    import torch
    from bench_ops import cases, resnet_cases

    torch.set_num_threads(1)
    sizes = (4, 64, 256, 4, 65) if args.mid else None
    todo = (cases(fiamma, torch, "xp", "cpu", False, sizes) + mlp_step_case(fiamma) +
            resnet_block_case(fiamma) + resnet_step_case(fiamma) +
            gpt_step_case(fiamma, torch, args.mid) +
            resnet_cases(fiamma, torch, "xp", "cpu", False, (2, 8, 16) if args.mid else None))
    if args.python and EMU is None:
        ap.error("--python needs the emulated cuda backend (FIAMMA_CUDA_EMU_LIB)")
    kind = "cuda paths, emulated kernels" if EMU else "generic"
    print(f"backend: {type(BACKEND).__name__} ({kind}); calls = array-module calls per op "
          f"(launch: kernels, view: array views built, alloc: storages)")
    col = "py us" if args.python else "host us"
    print(f"{'op':36s} {'calls':>6s} {'launch':>6s} {'view':>5s} {'alloc':>5s} {col:>9s}")
    rows = []
    WHERE[0] = args.where or args.where2
    WHERE[1] = args.where2
    gc.disable()
    for name, ff, _tf, n in todo:
        if args.only not in name:
            continue
        c = count_calls(ff, stubbed=args.stub_count)
        total, launch, view, alloc = summarise(c)
        reps = max(int(n * 4 * args.scale), 3)
        if args.python:
            us = python_us(ff, reps, args.rounds)
        else:
            us = None if args.no_time else host_us(ff, reps, args.rounds)
        rows.append({"op": name, "calls": total, "launches": launch, "views": view,
                     "allocs": alloc, "python" if args.python else "host_us":
                     None if us is None else round(us, 1), "by_name": c})
        print(f"{name:36s} {total:6d} {launch:6d} {view:5d} {alloc:5d} "
              f"{'' if us is None else f'{us:9.1f}'}", flush=True)
        if args.detail:
            print("    " + ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv:
                                                                    -kv[1])))
        for site, v in sorted(SITES.items(), key=lambda kv: -kv[1]):
            print(f"      {v:4d}  {site}")
    gc.enable()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
