"""Recording: the wrappers that time ops while a profile records, and the raw event records.

Nothing here runs while no profile records. ``start`` swaps every public op function of
``fiamma`` (and of the loaded ``fiamma.linalg``/``fft``/``special``) and every op method of
``Tensor`` for a timing wrapper; ``stop`` puts the originals back, so with the profiler off an
op costs exactly what it did before. Packages above core (autograd's engine, optimizers, the
DataLoader) reach the recorder through :data:`hook`, whose ``enabled`` flag is their one check.

A raw record is a list (cheaper to make than an object on the recording path):
``[name, cat, tid, t0, t1, shapes, mem0, mem1, stack, parent, dev, flops]`` with times in ns from
``time.perf_counter_ns``; ``_events.build`` turns them into :class:`FunctionEvent` objects.
"""

import os
import sys
import threading
import time
import types

__all__ = ["hook", "ProfilerHook", "record_function", "current_recorder", "register_ops"]

_now = time.perf_counter_ns
_get_ident = threading.get_ident

NAME, CAT, TID, T0, T1, SHAPES, MEM0, MEM1, STACK, PARENT, DEV, FLOPS = range(12)
CAT_OP = "cpu_op"
CAT_USER = "user_annotation"

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAX_STACK = 32


class _State:
    rec = None  # the Recorder while a profile records (warmup or active), else None


_state = _State()


def current_recorder():
    """The recorder of the profile that records now, or None."""
    return _state.rec


# ---- what an op's event records ---------------------------------------------------------------

_Tensor = None  # fiamma.Tensor, set when the first Recorder is made (no import cycle)


def _shapes(args, kwargs):
    """The input shapes of a call as tuples (a tensor's own shape tuple, no copy: fewer new
    objects on the recording path); ``_events`` turns them into PyTorch's nested lists."""
    T = _Tensor
    out = []
    for a in args:
        if isinstance(a, T):
            out.append(a._shape)
        elif a.__class__ in (list, tuple) and a and isinstance(a[0], T):
            out.append([t._shape if isinstance(t, T) else () for t in a])
        else:
            out.append(())
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, T):
                out.append(v._shape)
    return out


def _stack():
    """The Python call stack above the recorded call, innermost first ("file(line): func")."""
    f = sys._getframe(2)
    out = []
    while f is not None and len(out) < _MAX_STACK:
        co = f.f_code
        if not co.co_filename.startswith(_HERE):
            out.append((co.co_filename, f.f_lineno, co.co_name))  # formatted when read
        f = f.f_back
    return out


def _allocator_bytes(n):
    """The bytes core's C allocator counts for a request of ``n`` (its size classes, alloc.c:
    64-byte multiples up to 1 KiB, then quarter steps between powers of two)."""
    if n <= 1024:
        return (n + 63) & ~63
    p = (n - 1).bit_length() - 1
    base = 1 << p
    step = base // 4
    return base + -(-(n - base) // step) * step


def _cpu_memory_reader():
    """A function returning the bytes of CPU memory held by tensors now, as core's allocator
    counts them: its in-use bytes less the blocks parked on core's Python-side small-block free
    lists (free for the program, though the C allocator still counts them as in use)."""
    from fiamma._backend.cpu import allocated_bytes_reader
    from fiamma._storage import _small

    in_use = allocated_bytes_reader()
    pools = []  # (free list, allocator bytes of one block), rebuilt when a size appears

    def read():
        n = in_use()
        if len(pools) != len(_small):
            pools[:] = [(pool, _allocator_bytes(size)) for size, pool in list(_small.items())]
        for pool, r in pools:
            n -= r * len(pool)
        return n

    return read


def _cuda_index(args, kwargs):
    """The CUDA device a call works on (the first CUDA tensor among its arguments, or a CUDA
    device asked for, as in ``.to("cuda")``), or -1 when it works on none."""
    from fiamma._storage import device
    from fiamma._tensor import Tensor

    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, Tensor):
            d = a._storage.device
            if d.type == "cuda":
                return d.index or 0
        elif isinstance(a, (list, tuple)):
            for t in a:
                if isinstance(t, Tensor) and t._storage.device.type == "cuda":
                    return t._storage.device.index or 0
        elif isinstance(a, (str, device)):
            d = a if isinstance(a, device) else None
            if d is None and a.startswith("cuda"):
                try:
                    d = device(a)
                except Exception:  # a string that only looks like a device: not ours to judge
                    continue
            if d is not None and d.type == "cuda":
                return d.index or 0
    return -1


class Recorder:
    """Collects the raw records of one recording (a cycle of a profile)."""

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False,
                 cuda=False, with_flops=False):
        global _Tensor
        from fiamma._tensor import Tensor

        _Tensor = Tensor
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.counter_flops = False  # FlopCounterMode's extra convolutions (COUNTER_FLOP_OPS)
        self.with_stack = with_stack
        self.mem = _cpu_memory_reader() if profile_memory else None
        self.dev_mem = None
        self.cuda = cuda
        if cuda and profile_memory:
            import fiamma.cuda

            self.dev_mem = fiamma.cuda.memory_allocated
        self.raw = []
        self.stacks = {}
        self.base_event = None
        if cuda:
            import fiamma.cuda

            self._event = fiamma.cuda.Event
            self.base_event = self._event(enable_timing=True)
            self.base_event.record()
        self.perf0 = _now()
        self.epoch0 = time.time_ns()
        self.perf1 = None

    def begin(self, name, cat, args, kwargs):
        tid = _get_ident()
        st = self.stacks.get(tid)
        if st is None:
            st = self.stacks[tid] = []
        parent = st[-1] if st else None
        # a method that forwards to the function of the same name (x.sum() -> fiamma.sum, x + y
        # -> add) is one op, not two nested ones
        if parent is not None and parent[NAME] == name and cat is CAT_OP:
            return None
        r = [name, cat, tid, 0, 0, None, 0, 0, None, parent, None, 0]
        if self.record_shapes:
            r[SHAPES] = _shapes(args, kwargs)
        if self.with_stack:
            r[STACK] = _stack()
        if self.mem is not None:
            r[MEM0] = self.mem() if self.dev_mem is None else (self.mem(), self.dev_mem())
        if self.cuda:
            idx = 0 if cat is not CAT_OP else _cuda_index(args, kwargs)
            if idx >= 0:
                ev = self._event(enable_timing=True)
                ev.record()
                r[DEV] = [ev, None, idx]
        st.append(r)
        self.raw.append(r)
        r[T0] = _now()
        return r

    def end(self, r):
        if r is None:
            return
        r[T1] = _now()
        if r[DEV] is not None:
            ev = self._event(enable_timing=True)
            ev.record()
            r[DEV][1] = ev
        if self.mem is not None:
            r[MEM1] = self.mem() if self.dev_mem is None else (self.mem(), self.dev_mem())
        st = self.stacks.get(r[TID])
        if st:
            if st[-1] is r:
                st.pop()
            elif r in st:
                st.remove(r)

    def finish(self):
        """Close what is still open (a ProfilerStep, a record_function left entered)."""
        self.perf1 = t = _now()
        for st in self.stacks.values():
            for r in st:
                r[T1] = t
                if self.mem is not None:
                    r[MEM1] = self.mem() if self.dev_mem is None else (self.mem(),
                                                                         self.dev_mem())
                if r[DEV] is not None and r[DEV][1] is None:
                    ev = self._event(enable_timing=True)
                    ev.record()
                    r[DEV][1] = ev
            st.clear()


# ---- the wrappers -------------------------------------------------------------------------------

# operators and the op they are (PyTorch's profiler shows ``x + y`` as aten::add)
_DUNDER = {
    "add": "add", "radd": "add", "sub": "sub", "rsub": "rsub", "mul": "mul", "rmul": "mul",
    "truediv": "div", "rtruediv": "div", "floordiv": "floor_divide",
    "rfloordiv": "floor_divide", "mod": "remainder", "rmod": "remainder", "pow": "pow",
    "rpow": "pow", "matmul": "matmul", "rmatmul": "matmul", "and": "bitwise_and",
    "rand": "bitwise_and", "or": "bitwise_or", "ror": "bitwise_or", "xor": "bitwise_xor",
    "rxor": "bitwise_xor", "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
    "neg": "neg", "pos": "positive", "abs": "abs", "invert": "bitwise_not", "eq": "eq",
    "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "getitem": "index",
    "setitem": "index_put_",
}
_INPLACE_DUNDER = {"iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_",
                   "ifloordiv": "floor_divide_", "imod": "remainder_", "ipow": "pow_",
                   "imatmul": "matmul_", "iand": "bitwise_and_", "ior": "bitwise_or_",
                   "ixor": "bitwise_xor_", "ilshift": "bitwise_left_shift_",
                   "irshift": "bitwise_right_shift_"}

# Tensor methods that read metadata or configure, not ops (PyTorch does not record them either)
_NOT_OPS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "storage_offset", "data_ptr",
    "is_contiguous", "element_size", "is_floating_point", "is_complex", "is_signed",
    "get_device", "type", "untyped_storage", "storage", "tolist", "numpy", "requires_grad_",
    "retain_grad", "register_hook", "register_post_accumulate_grad_hook", "backward",
    "is_shared", "share_memory_", "is_pinned", "is_set_to", "dim_order", "is_inference",
    "is_conj", "is_neg", "is_nonzero", "is_same_size", "storage_type", "has_names",
    "is_leaf", "tobytes", "__repr__", "__str__", "__format__",
})
# functions of ``fiamma`` that are not ops: configuration, seeding, dtype arithmetic
_NOT_OP_PREFIXES = ("is_", "set_", "get_", "are_", "use_")
_NOT_OP_FUNCS = frozenset({"compile", "typename", "manual_seed", "seed", "initial_seed",
                           "broadcast_shapes", "result_type", "promote_types", "can_cast",
                           "dtype_of_type", "printoptions", "save", "load", "from_numpy",
                           "from_dlpack", "cpu_memory_stats", "cpu_empty_cache",
                           "cpu_set_cache_limit", "cpu_reset_peak_memory_stats"})
_OP_MODULE_PREFIXES = ("fiamma._ops.", "fiamma._creation", "fiamma._random",
                       "fiamma._compat_ops", "fiamma._tensor_api", "fiamma.linalg",
                       "fiamma.fft", "fiamma.special")
# loaded submodules whose functions are ops, and PyTorch's prefix for their names
_SUBMODULES = {"fiamma.linalg": "linalg_", "fiamma.fft": "fft_", "fiamma.special": "special_"}


def _method_event_name(name):
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        op = _DUNDER.get(core) or _INPLACE_DUNDER.get(core)
        return None if op is None else "aten::" + op
    if name.startswith("_") or name in _NOT_OPS:
        return None
    return "aten::" + name


def _function_event_name(name, fn, prefix=""):
    if name.startswith("_") or name in _NOT_OP_FUNCS or name.startswith(_NOT_OP_PREFIXES):
        return None
    if getattr(fn, "__np_names__", False):  # the axis=/keepdims= wrapper: the op's own module
        fn = getattr(fn, "__wrapped__", fn)
    mod = getattr(fn, "__module__", None) or ""
    if not mod.startswith(_OP_MODULE_PREFIXES):
        return None
    return "aten::" + prefix + name


def _shape_of(x):
    return tuple(x.shape) if isinstance(x, _Tensor) else None


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _flops(name, args, kwargs, out):
    """PyTorch's FLOP estimate of an op (``with_flops``): 2 * M * N * K for the matrix
    products, 2 * (output elements) * (weight elements per output channel) for conv2d
    (stride, padding and groups through the output's and the weight's shapes), one per
    output element for ``mul`` and ``add``; 0 where a shape is missing."""
    o = _shape_of(out)
    if o is None:
        return 0
    if name in ("aten::mul", "aten::add"):
        return _numel(o)
    if name in ("aten::addmm", "aten::baddbmm"):
        a = _shape_of(args[1] if len(args) > 1 else kwargs.get(
            "mat1" if name == "aten::addmm" else "batch1"))
    elif name.startswith("aten::conv"):
        w = _shape_of(args[1] if len(args) > 1 else kwargs.get("weight"))
        if not w:
            return 0
        return 2 * _numel(o) * _numel(w[1:])
    else:
        a = _shape_of(args[0] if args else kwargs.get("input"))
    if not a:
        return 0
    return 2 * _numel(o) * a[-1]


def _counter_flops(name, args, kwargs, out):
    """The FLOPs of the convolutions PyTorch's profiler leaves out but its ``FlopCounterMode``
    counts (with its formulas), for ``fiamma.utils.flop_counter``: the other convolutions'
    ``2 * output elements * weight elements per output channel``, a transposed convolution's
    ``2 * input elements * weight elements per input channel``, and the weight gradient's
    ``2 * grad_output elements * input channels * kernel elements``."""
    if name == "aten::convolution_backward_weight":
        a, b = _shape_of(args[0]), _shape_of(args[1])
        w = args[2] if len(args) > 2 else kwargs.get("weight_size")
        if not a or not b or w is None:
            return 0
        return 2 * _numel(b) * a[1] * _numel(tuple(w)[2:])
    w = _shape_of(args[1] if len(args) > 1 else kwargs.get("weight"))
    if not w:
        return 0
    transposed = name.startswith("aten::conv_transpose") or (
        name == "aten::convolution" and (args[6] if len(args) > 6
                                         else kwargs.get("transposed", False)))
    if transposed:
        x = _shape_of(args[0] if args else kwargs.get("input"))
        return 2 * _numel(x) * _numel(w[1:]) if x else 0
    o = _shape_of(out)
    return 2 * _numel(o) * _numel(w[1:]) if o else 0


# counted only for a recorder with counter_flops set (FlopCounterMode's)
COUNTER_FLOP_OPS = frozenset(("aten::conv1d", "aten::conv3d", "aten::convolution",
                              "aten::conv_transpose1d", "aten::conv_transpose2d",
                              "aten::conv_transpose3d", "aten::convolution_backward_weight"))

_FLOP_OPS = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                       "aten::matmul", "aten::conv2d", "aten::mul",
                       "aten::add"))


def _make_wrapper(fn, name, cat=CAT_OP):
    def op(*args, **kwargs):
        rec = _state.rec
        if rec is None:  # a reference kept from while a profile recorded
            return fn(*args, **kwargs)
        r = rec.begin(name, cat, args, kwargs)
        try:
            out = fn(*args, **kwargs)
        finally:
            rec.end(r)
        if r is not None and rec.with_flops:
            if name in _FLOP_OPS:
                r[FLOPS] = _flops(name, args, kwargs, out)
            elif rec.counter_flops and name in COUNTER_FLOP_OPS:
                r[FLOPS] = _counter_flops(name, args, kwargs, out)
        return out

    op.__name__ = getattr(fn, "__name__", name)
    op.__qualname__ = getattr(fn, "__qualname__", name)
    op.__doc__ = getattr(fn, "__doc__", None)
    op.__module__ = getattr(fn, "__module__", None)
    op.__wrapped__ = fn
    op._fiamma_profiler_wrapper = True
    return op


_WRAPPERS = {}    # (owner id, attribute, original) -> wrapper, made once and reused
_INSTALLED = []   # (owner, attribute, original) while wrappers are in place


_REGISTERED = {}  # module name -> event-name prefix (register_ops: packages above core)


def register_ops(module, prefix=""):
    """Have the public functions of ``module`` (a module or its name) recorded as events
    ``aten::<prefix><name>`` while a profile records, like core's ops: how a package above core
    (``fiamma.nn.functional``) makes its functions show in the profiler. Costs nothing while no
    profile records.

    >>> import fiamma.profiler
    >>> fiamma.profiler.register_ops("fiamma.nn.functional")
    """
    name = module if isinstance(module, str) else module.__name__
    _REGISTERED[name] = prefix
    if _INSTALLED and name in sys.modules:  # registered while a profile records
        _install_targets(_module_targets(sys.modules[name], prefix, registered=True))


def _module_targets(mod, prefix, registered=False):
    for attr, fn in list(vars(mod).items()):
        if type(fn) is types.FunctionType and not getattr(fn, "_fiamma_profiler_wrapper", 0):
            if registered:
                ev = None if attr.startswith("_") else "aten::" + prefix + attr
            else:
                ev = _function_event_name(attr, fn, prefix)
            if ev is not None:
                yield mod, attr, fn, ev


def _targets():
    import fiamma
    from fiamma._tensor import Tensor

    for attr, fn in list(vars(Tensor).items()):
        if type(fn) is types.FunctionType and not getattr(fn, "_fiamma_profiler_wrapper", 0):
            ev = _method_event_name(attr)
            if ev is not None:
                yield Tensor, attr, fn, ev
    for mod, prefix in [(fiamma, "")] + [(sys.modules[m], p) for m, p in _SUBMODULES.items()
                                         if m in sys.modules]:
        yield from _module_targets(mod, prefix)
    for m, prefix in list(_REGISTERED.items()):
        if m in sys.modules:
            yield from _module_targets(sys.modules[m], prefix, registered=True)


def _install_targets(targets):
    for owner, attr, fn, ev in list(targets):
        key = (id(owner), attr, fn)
        w = _WRAPPERS.get(key)
        if w is None:
            w = _WRAPPERS[key] = _make_wrapper(fn, ev)
        _INSTALLED.append((owner, attr, fn))
        setattr(owner, attr, w)


def install():
    """Put the timing wrappers in place of the op functions and methods."""
    if not _INSTALLED:
        _install_targets(_targets())


def uninstall():
    """Put the original functions and methods back."""
    while _INSTALLED:
        owner, attr, fn = _INSTALLED.pop()
        setattr(owner, attr, fn)


def installed():
    """Whether any timing wrapper is in place (the structural zero-cost check of the tests)."""
    return bool(_INSTALLED)


_owner = [None]  # the profile whose wrappers are in place (one per process)


def acquire(owner):
    """Put the wrappers in place for the profile ``owner`` (from its start to its stop).

    They stay for the whole profile, across a schedule's cycles, rather than coming and going
    with each cycle: every swap of a dunder re-types Tensor, and CPython 3.13 gives a class a
    bounded number of type-version tags, after which its attribute lookups are no longer
    specialised (measured: ~1000 swaps, then Tensor ops ran slower for good). A profile's idle
    (wait) steps cost one pass-through call per op; after ``stop`` nothing is left."""
    if _owner[0] is not None and _owner[0] is not owner:
        raise RuntimeError("fiamma.profiler: a profile is already running in this process; "
                           "stop it before starting another")
    _owner[0] = owner
    install()


def release(owner):
    if _owner[0] is owner:
        _owner[0] = None
        uninstall()


def activate(rec):
    """Start recording into ``rec`` (the wrappers are in place: ``acquire``)."""
    if _state.rec is not None:
        raise RuntimeError("fiamma.profiler: a profile is already recording in this process; "
                           "stop it before starting another")
    _state.rec = rec
    hook.enabled = True


def deactivate(rec):
    if _state.rec is rec:
        hook.enabled = False
        _state.rec = None
        rec.finish()


def _after_fork_in_child():
    # a process forked while a profile records (a DataLoader worker) does not record: nothing
    # would read its events, and the wrappers would only slow it down
    hook.enabled = False
    _state.rec = None
    _owner[0] = None
    uninstall()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- the public hook and record_function ------------------------------------------------------

class ProfilerHook:
    """How code outside core's op functions reports to the profiler (public, for packages above
    core: autograd's engine, optimizers, the DataLoader).

    ``enabled`` is True only while a profile records, so the cost with the profiler off is one
    attribute check; ``call(name, fn, *args, **kwargs)`` runs ``fn(*args, **kwargs)`` as an
    event named ``name`` (the tensors among ``args`` give its input shapes).

    >>> from fiamma.profiler import hook
    >>> hook.enabled
    False
    >>> hook.call("my_step", lambda a: a + 1, 1)
    2
    """

    enabled = False

    def call(self, name, fn, /, *args, **kwargs):
        rec = _state.rec
        if rec is None:
            return fn(*args, **kwargs)
        r = rec.begin(name, CAT_USER, args, kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            rec.end(r)


hook = ProfilerHook()


class record_function:
    """Label a block of code (``with``) or every call of a function (decorator) as one event.

    Costs almost nothing while no profile records.

    >>> import fiamma
    >>> from fiamma.profiler import profile, record_function
    >>> with profile() as prof:
    ...     with record_function("my_block"):
    ...         y = fiamma.ones(3) * 2
    >>> [e.name for e in prof.events()][:2]
    ['my_block', 'aten::ones']
    """

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._r = None

    def __enter__(self):
        rec = _state.rec
        if rec is not None:
            self._r = rec.begin(self.name, CAT_USER, (), None)
        return self

    def __exit__(self, *exc):
        r, self._r = self._r, None
        rec = _state.rec
        if r is not None and rec is not None:
            rec.end(r)
        return False

    def __call__(self, fn):
        name = self.name

        def wrapper(*args, **kwargs):
            rec = _state.rec
            if rec is None:
                return fn(*args, **kwargs)
            r = rec.begin(name, CAT_USER, (), None)
            try:
                return fn(*args, **kwargs)
            finally:
                rec.end(r)

        wrapper.__name__ = getattr(fn, "__name__", name)
        wrapper.__qualname__ = getattr(fn, "__qualname__", name)
        wrapper.__doc__ = getattr(fn, "__doc__", None)
        wrapper.__wrapped__ = fn
        return wrapper
