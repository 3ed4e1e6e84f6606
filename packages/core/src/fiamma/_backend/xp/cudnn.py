"""cuDNN convolution for the cuda backend: ``conv``'s forward, data-gradient and
weight-gradient modes (CONV_FWD / CONV_BWD_DATA / CONV_BWD_WEIGHT) through cuDNN's legacy
convolution API (cudnn_api.py), for float16, bfloat16, float32 and float64 with 1-3 spatial
dims (1-d as 2-d with a unit height, as PyTorch does), groups, stride, padding and dilation.

Per geometry and dtype (and the ``fiamma.backends.cudnn`` flags) one plan is made and cached:
tensor/filter/convolution descriptors of the packed NCHW operands, the algorithm from cuDNN's
heuristics (``cudnnGet*Algorithm_v7``; with ``fiamma.backends.cudnn.benchmark`` the measured
``cudnnFind*``; with ``deterministic`` only deterministic algorithms) and its workspace size.
A call then costs the plan lookup, a workspace from CuPy's pool and one or two ctypes calls on
the current stream. float16/bfloat16 run on tensor cores with float32 accumulation; float32 may
use TF32 as ``fiamma.backends.cudnn.allow_tf32`` (default True, as PyTorch's) allows; float64
computes in float64. The bias is added by ``cudnnAddTensor`` (by one array-module pass
where a cuDNN refuses that for the dtype).

With cuDNN the backend answers ``conv_native(dtype)`` True for float16/bfloat16, so
fiamma._ops.conv hands those convolutions over in their own dtype (the result dtype is the
input's either way). Without a library (``cudnn_api.reason()``), where cuDNN does not support
a configuration (``cudnn_declined``), or where a call fails (``fast_path_errors["cudnn_fwd"]``
etc.), that geometry stays on the generic im2col path (float16/bfloat16 computed in float32
there). ``fast_path_calls`` counts ``cudnn_fwd`` / ``cudnn_bwd_data`` / ``cudnn_bwd_weight``.

This runs on a GPU only; on the CPU, tools/cuda_emu's fake libcudnn (naive reference
convolutions honouring the descriptors) checks the marshalling under the kernel emulation.
"""

import ctypes

from fiamma import _dtype as D
from fiamma._backend import codes as C
from fiamma._backend.xp import cudnn_api as L

__all__ = ["CudnnConvMixin"]

_DATA = {D.float16: L.DATA_HALF, D.bfloat16: L.DATA_BFLOAT16, D.float32: L.DATA_FLOAT,
         D.float64: L.DATA_DOUBLE}
_NAMES = {C.CONV_FWD: "cudnn_fwd", C.CONV_BWD_DATA: "cudnn_bwd_data",
          C.CONV_BWD_WEIGHT: "cudnn_bwd_weight"}
_ALGO_NAMES = {C.CONV_FWD: L.FWD_ALGOS, C.CONV_BWD_DATA: L.BWD_DATA_ALGOS,
               C.CONV_BWD_WEIGHT: L.BWD_FILTER_ALGOS}
_WS_LIMIT = 1 << 31  # an algorithm asking more workspace than this is passed over
_INT_MAX = (1 << 31) - 1

# alpha/beta scalars, read by cuDNN from host memory: double for double data, else float
_SCALARS = {t: (t(1.0), t(0.0)) for t in (ctypes.c_float, ctypes.c_double)}
_ONE_ZERO = {dt: tuple(ctypes.addressof(v) for v in
                       _SCALARS[ctypes.c_double if dt is D.float64 else ctypes.c_float])
             for dt in _DATA}


def _packed(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return tuple(reversed(st))


def _ints(vals):
    return (ctypes.c_int * len(vals))(*vals)


def geometry_ok(nd, n, cb, cs, groups, big, small, k, stride, pad, dil):
    """Whether cuDNN's descriptors can express this convolution: ``small`` is exactly the
    forward output size of ``big`` (a transposed convolution's output_padding may make ``big``
    larger than any forward input of ``small``), and every operand indexes in 32 bits."""
    cbg = cb // groups
    xs = n * cb
    ys = n * cs
    ws = cs * cbg
    for i in range(nd):
        span = dil[i] * (k[i] - 1) + 1
        if big[i] + 2 * pad[i] < span or (big[i] + 2 * pad[i] - span) // stride[i] + 1 != small[i]:
            return False
        xs *= big[i]
        ys *= small[i]
        ws *= k[i]
    return max(xs, ys, ws) <= _INT_MAX


class _Plan:
    __slots__ = ("fn", "handle", "d0", "d1", "dc", "do", "algo", "ws", "bias_desc", "one",
                 "zero", "mode", "dtype", "math", "name", "key")


class _Handle:
    __slots__ = ("ptr", "stream")


class CudnnConvMixin:
    """conv's FWD / BWD_DATA / BWD_WEIGHT through cuDNN when a library and a handle are at
    hand (see the module docstring); everything else to the next class in the MRO."""

    def _cudnn_init(self):
        self._cudnn = None  # the Library, once a handle was made
        self._cudnn_tried = False
        self._cudnn_reason = None
        self._cudnn_flags = None  # the fiamma.backends.cudnn module
        self._cudnn_handles = {}
        self._cudnn_plans = {}
        self._cudnn_ws = {}  # (device, stream) -> (keep-alive, bytes, address): the workspace
        self.cudnn_declined = {}  # plan key -> why cuDNN does not support that configuration
        self._cudnn_no_add = set()  # dtypes whose bias cudnnAddTensor refused
        self._cudnn_stream = getattr(self, "_stream_ptr", None) or (lambda: 0)

    # ---- the library and a handle per device ------------------------------------------------
    def cudnn_ready(self):
        """True when cuDNN serves this backend's convolutions (library loaded, a handle made
        on the current device); otherwise ``cudnn_reason()`` says why."""
        if not self._cudnn_tried:
            self._cudnn_tried = True
            import fiamma.backends.cudnn as flags

            self._cudnn_flags = flags
            lib, why = self._cudnn_load()
            if lib is None:
                self._cudnn_reason = why
            else:
                try:
                    self._cudnn_handle(self._cudnn_device(), lib)
                    self._cudnn = lib
                except Exception as e:  # no device, a driver too old for this libcudnn ...
                    self._cudnn_reason = f"{lib.path}: {type(e).__name__}: {e}"
        return self._cudnn is not None

    def cudnn_reason(self):
        """Why cuDNN does not serve (None when it does, or before it was first asked)."""
        return self._cudnn_reason

    def conv_native(self, dtype):
        """Whether ``conv`` computes float16/bfloat16 in their own dtype here (else the caller
        computes in float32)."""
        return (dtype is D.bfloat16 or dtype is D.float16) and self.cudnn_ready() and \
            self._cudnn_flags.enabled

    def _cudnn_device(self):
        """The current CUDA device (None under the CPU emulation, which has one)."""
        rt = getattr(self, "_rt", None)
        return rt.getDevice() if rt is not None else None

    def _cudnn_workspace(self, nbytes, stream=0):
        """(keep-alive, address) of at least nbytes of device scratch: one buffer per (device,
        stream), kept and reused by every call queued on that stream (they run in order), grown
        when a plan needs more (the old one goes back to the array module's pool, as each
        call's buffer did before: later work on the stream runs after the calls using it), so
        a step's convolutions make no allocation each."""
        key = (self._cudnn_device(), stream)
        ws = self._cudnn_ws.get(key)
        if ws is not None and ws[1] >= nbytes:
            return ws[0], ws[2]
        xp = self.xp
        if hasattr(xp, "cuda"):
            mem = xp.cuda.alloc(nbytes)
            ws = (mem, nbytes, mem.ptr)
        else:
            a = xp.empty(nbytes, xp.uint8)
            ws = (a, nbytes, a.ctypes.data)
        self._cudnn_ws[key] = ws
        return ws[0], ws[2]

    def _cudnn_load(self):
        """(Library or None, reason): the process's libcudnn (cudnn_api.library())."""
        lib = L.library()
        return lib, L.reason()

    def _cudnn_handle(self, idx, lib=None):
        h = self._cudnn_handles.get(idx)
        if h is None:
            lib = lib or self._cudnn
            p = ctypes.c_void_p()
            lib.check(lib.Create(ctypes.byref(p)), "cudnnCreate")
            h = _Handle()
            h.ptr, h.stream = p.value, None
            self._cudnn_handles[idx] = h
        return h

    def cudnn_plans(self):
        """The cached plans as readable records (geometry, dtype, algorithm, workspace): what
        benchmarks/gpu/cudnn_check.py prints."""
        out = []
        for key, p in self._cudnn_plans.items():
            if p is None:
                out.append({"key": key, "plan": None})
                continue
            out.append({"mode": p.name, "dtype": p.dtype.name, "key": key[2:12],
                        "algo": _ALGO_NAMES[p.mode][p.algo] if p.algo < len(_ALGO_NAMES[p.mode])
                        else p.algo, "workspace": p.ws, "math": p.math})
        return out

    # ---- conv -----------------------------------------------------------------------------
    def conv(self, mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b, bias,
             out):
        if mode <= C.CONV_BWD_WEIGHT and n > 0 and \
                self._cudnn_conv(mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil,
                                 a, b, bias, out):
            return 0
        return super().conv(mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b,
                            bias, out)

    def _cudnn_conv(self, mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b,
                    bias, out):
        """True when cuDNN computed ``out``; False to leave it to the generic code."""
        lib = self._cudnn
        if lib is None:
            if self._cudnn_tried or not self.cudnn_ready():
                return False
            lib = self._cudnn
        fl = self._cudnn_flags
        if not fl.enabled:
            return False
        key = (mode, a._dtype, n, cb, cs, groups, big, small, k, stride, pad, dil,
               out._storage.device.index, fl.allow_tf32, fl.deterministic, fl.benchmark)
        try:
            plan = self._cudnn_plans[key]
        except (KeyError, TypeError):  # new, or lists where _ops passes tuples
            plan = self._cudnn_new_plan(key, mode, nd, n, cb, cs, groups, big, small, k,
                                        stride, pad, dil, a, b, bias, out)
        if plan is None or not (a._contig and b._contig and out._contig and
                                (bias is None or bias._contig)):
            return False
        h = plan.handle
        stream = self._cudnn_stream()
        try:
            if h.stream != stream:
                lib.check(lib.SetStream(h.ptr, stream), "cudnnSetStream")
                h.stream = stream
            keep = wsp = 0
            if plan.ws:
                keep, wsp = self._cudnn_workspace(plan.ws, stream)
            if mode == 1:  # CONV_BWD_DATA: (w, dy) -> dx
                rc = plan.fn(h.ptr, plan.one, plan.d0, b._ptr, plan.d1, a._ptr, plan.dc,
                             plan.algo, wsp, plan.ws, plan.zero, plan.do, out._ptr)
            else:  # (x, w) -> y, (x, dy) -> dw
                rc = plan.fn(h.ptr, plan.one, plan.d0, a._ptr, plan.d1, b._ptr, plan.dc,
                             plan.algo, wsp, plan.ws, plan.zero, plan.do, out._ptr)
            if rc:
                lib.check(rc, plan.name)
            if bias is not None:
                self._cudnn_bias(lib, plan, bias, out)
            del keep  # back to the pool: later work on this stream runs after the call
        except MemoryError:
            raise
        except Exception as e:
            self._cudnn_failed(plan.key, plan.name, e)
            self._cudnn_plans[plan.key] = None
            return False
        calls = self.fast_path_calls
        calls[plan.name] = calls.get(plan.name, 0) + 1
        return True

    def _cudnn_bias(self, lib, plan, bias, out):
        """out += bias per channel: cudnnAddTensor, or (where this cuDNN refuses it for the
        dtype, remembered in ``cudnn_declined``) one array-module pass."""
        dt = plan.dtype
        if dt not in self._cudnn_no_add:
            rc = lib.AddTensor(plan.handle.ptr, plan.one, plan.bias_desc, bias._ptr, plan.one,
                               plan.do, out._ptr)
            if not rc:
                return
            try:
                lib.check(rc, "cudnnAddTensor")
            except L.CudnnError as e:
                if not e.not_supported:
                    raise
                self._cudnn_no_add.add(dt)
                self.cudnn_declined[("cudnnAddTensor", dt.name)] = f"CudnnError: {e}"
        c = out._shape[1]
        shape = (1, c) + (1,) * (len(out._shape) - 2)
        y, b = self.cview(out, out._shape), self.cview(bias, shape)
        if dt is D.bfloat16:
            y[...] = self.f32_to_bf16(self.bf16_to_f32(y) + self.bf16_to_f32(b))
        else:
            y += b

    def _cudnn_new_plan(self, key, mode, nd, n, cb, cs, groups, big, small, k, stride, pad,
                        dil, a, b, bias, out):
        """The plan for a geometry seen for the first time (None where cuDNN can't take it),
        cached under ``key``."""
        big, small, k = tuple(big), tuple(small), tuple(k)
        stride, pad, dil = tuple(stride), tuple(pad), tuple(dil)
        key = key[:6] + (big, small, k, stride, pad, dil) + key[12:]
        plan = self._cudnn_plans.get(key, False)
        if plan is not False:
            return plan
        dt = a._dtype
        plan = None
        if (dt in _DATA and b._dtype is dt and out._dtype is dt and
                (bias is None or bias._dtype is dt) and nd == len(big) and 1 <= nd <= 3 and
                cb % groups == 0 and cs % groups == 0 and
                geometry_ok(nd, n, cb, cs, groups, big, small, k, stride, pad, dil) and
                self._cudnn_device() in (None, key[12])):
            try:
                plan = self._cudnn_plan(key, mode, dt, nd, n, cb, cs, groups, big, small, k,
                                        stride, pad, dil)
            except MemoryError:
                raise
            except Exception as e:
                self._cudnn_failed(key, _NAMES[mode], e)
        self._cudnn_plans[key] = plan
        return plan

    def _cudnn_failed(self, key, name, e):
        """A configuration cuDNN does not support goes to ``cudnn_declined`` (by plan key);
        any other failure to ``fast_path_errors[name]``. Either way that geometry stays on
        the generic path."""
        msg = f"{type(e).__name__}: {e}"
        if isinstance(e, L.CudnnError) and e.not_supported:
            self.cudnn_declined[key] = msg
        else:
            self.fast_path_errors[name] = msg

    # ---- plans ----------------------------------------------------------------------------
    def _cudnn_plan(self, key, mode, dt, nd, n, cb, cs, groups, big, small, k, stride, pad,
                    dil):
        lib = self._cudnn
        fl = self._cudnn_flags
        if nd == 1:  # as 2-d with a unit height, as PyTorch does
            big, small, k = (1,) + tuple(big), (1,) + tuple(small), (1,) + tuple(k)
            stride, pad, dil = (1,) + tuple(stride), (0,) + tuple(pad), (1,) + tuple(dil)
        data = _DATA[dt]
        xdesc = self._cudnn_tensor(lib, data, (n, cb) + tuple(big))
        ydesc = self._cudnn_tensor(lib, data, (n, cs) + tuple(small))
        wdesc = self._cudnn_filter(lib, data, (cs, cb // groups) + tuple(k))
        conv = ctypes.c_void_p()
        lib.check(lib.CreateConvolutionDescriptor(ctypes.byref(conv)),
                  "cudnnCreateConvolutionDescriptor")
        cdesc = conv.value
        self._cudnn_keep(lib.DestroyConvolutionDescriptor, cdesc)
        compute = L.DATA_DOUBLE if dt is D.float64 else L.DATA_FLOAT
        lib.check(lib.SetConvolutionNdDescriptor(cdesc, len(pad), _ints(pad), _ints(stride),
                                                 _ints(dil), L.CROSS_CORRELATION, compute),
                  "cudnnSetConvolutionNdDescriptor")
        lib.check(lib.SetConvolutionGroupCount(cdesc, groups), "cudnnSetConvolutionGroupCount")
        if dt is D.float32:
            math = L.DEFAULT_MATH if fl.allow_tf32 else L.FMA_MATH
        elif dt is D.float64:
            math = L.DEFAULT_MATH
        else:
            math = L.TENSOR_OP_MATH
        lib.check(lib.SetConvolutionMathType(cdesc, math), "cudnnSetConvolutionMathType")
        h = self._cudnn_handle(key[12])
        if mode == C.CONV_FWD:
            descs = (xdesc, wdesc, cdesc, ydesc)
            q = lib.FindConvolutionForwardAlgorithm if fl.benchmark else \
                lib.GetConvolutionForwardAlgorithm_v7
            wsq, fn, count = (lib.GetConvolutionForwardWorkspaceSize, lib.ConvolutionForward,
                              L.FWD_ALGO_COUNT)
        elif mode == C.CONV_BWD_DATA:
            descs = (wdesc, ydesc, cdesc, xdesc)
            q = lib.FindConvolutionBackwardDataAlgorithm if fl.benchmark else \
                lib.GetConvolutionBackwardDataAlgorithm_v7
            wsq, fn, count = (lib.GetConvolutionBackwardDataWorkspaceSize,
                              lib.ConvolutionBackwardData, L.BWD_DATA_ALGO_COUNT)
        else:
            descs = (xdesc, ydesc, cdesc, wdesc)
            q = lib.FindConvolutionBackwardFilterAlgorithm if fl.benchmark else \
                lib.GetConvolutionBackwardFilterAlgorithm_v7
            wsq, fn, count = (lib.GetConvolutionBackwardFilterWorkspaceSize,
                              lib.ConvolutionBackwardFilter, L.BWD_FILTER_ALGO_COUNT)
        perfs = (L.Perf * count)()
        got = ctypes.c_int(0)
        if h.stream != self._cudnn_stream():  # Find* runs kernels: on the current stream
            lib.check(lib.SetStream(h.ptr, self._cudnn_stream()), "cudnnSetStream")
            h.stream = self._cudnn_stream()
        lib.check(q(h.ptr, descs[0], descs[1], cdesc, descs[3], count, ctypes.byref(got), perfs),
                  q.__name__)
        choice = None
        for p in perfs[:got.value]:
            if p.status != L.STATUS_SUCCESS or p.memory > _WS_LIMIT:
                continue
            if fl.deterministic and p.determinism != L.DETERMINISTIC:
                continue
            if dt is D.float32 and not fl.allow_tf32 and p.mathType != L.FMA_MATH:
                continue
            choice = p
            break
        if choice is None:
            raise L.CudnnError(f"{q.__name__}: no usable algorithm among {got.value} "
                               f"(statuses {[p.status for p in perfs[:got.value]]})",
                               L.STATUS_NOT_SUPPORTED)
        # the algorithm comes with the math type it was chosen for (tensor cores or not)
        lib.check(lib.SetConvolutionMathType(cdesc, choice.mathType),
                  "cudnnSetConvolutionMathType")
        ws = ctypes.c_size_t(0)
        lib.check(wsq(h.ptr, descs[0], descs[1], cdesc, descs[3], choice.algo, ctypes.byref(ws)),
                  wsq.__name__)
        plan = _Plan()
        plan.fn, plan.handle, plan.algo, plan.ws = fn, h, choice.algo, ws.value
        plan.d0, plan.d1, plan.dc, plan.do = descs
        plan.name, plan.key = _NAMES[mode], key
        plan.one, plan.zero = _ONE_ZERO[dt]
        plan.mode, plan.dtype, plan.math = mode, dt, choice.mathType
        plan.bias_desc = None
        if mode != C.CONV_BWD_WEIGHT:
            c = cs if mode == C.CONV_FWD else cb
            plan.bias_desc = self._cudnn_tensor(lib, data, (1, c) + (1,) * len(big))
        return plan

    def _cudnn_keep(self, destroy, desc):
        """Descriptors live as long as their plan's cache entry, i.e. the backend's lifetime
        (a few per convolution geometry); the list keeps them for an explicit release."""
        self.__dict__.setdefault("_cudnn_descs", []).append((destroy, desc))

    def _cudnn_tensor(self, lib, data, dims):
        d = ctypes.c_void_p()
        lib.check(lib.CreateTensorDescriptor(ctypes.byref(d)), "cudnnCreateTensorDescriptor")
        self._cudnn_keep(lib.DestroyTensorDescriptor, d.value)
        lib.check(lib.SetTensorNdDescriptor(d.value, data, len(dims), _ints(dims),
                                            _ints(_packed(dims))),
                  "cudnnSetTensorNdDescriptor")
        return d.value

    def _cudnn_filter(self, lib, data, dims):
        d = ctypes.c_void_p()
        lib.check(lib.CreateFilterDescriptor(ctypes.byref(d)), "cudnnCreateFilterDescriptor")
        self._cudnn_keep(lib.DestroyFilterDescriptor, d.value)
        lib.check(lib.SetFilterNdDescriptor(d.value, data, L.TENSOR_NCHW, len(dims),
                                            _ints(dims)), "cudnnSetFilterNdDescriptor")
        return d.value
