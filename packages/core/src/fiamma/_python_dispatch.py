"""PyTorch's ``__torch_dispatch__``: tensor subclasses and dispatch modes below autograd.

Imported only once a class defining ``__torch_dispatch__`` exists or a ``TorchDispatchMode``
is entered (fiamma._torch_function calls :func:`dispatch` then); plain tensors never reach it.

A call of a public fiamma function, Tensor method or operator with an argument whose class
defines ``__torch_dispatch__`` (or any call while a ``TorchDispatchMode`` is entered) comes
here through the ``__torch_function__`` dispatcher (after the ``__torch_function__`` handlers:
the default one runs the function again with subclass dispatch off, which lands here too).
Its handler (``_H``) either

* decomposes it into other public calls, each dispatched on its own (``F.linear`` is ``t`` and
  ``addmm``, ``reshape`` a ``view``, as PyTorch's CompositeImplicitAutograd ops), or
* reports it as one ATen overload (fiamma._aten): the innermost dispatch mode (popped while its
  handler runs), then each subclass's ``__torch_dispatch__(func, types, args, kwargs)``,
  with grad mode off (below autograd). When an input requires grad, the op is first run on
  meta stand-ins of its inputs with a capturing trace hook, which gives exactly what the op
  records for autograd (its key, inputs, options); that record is replayed on the real inputs
  and the dispatched result, so autograd records on the subclass and its backward formulas
  (written in public ops) dispatch to the subclass as well.

A function with no handler raises NotImplementedError naming it for a subclass argument; under
a mode alone it runs unreported (a warning names it once).
"""

import importlib
import warnings

import fiamma
from fiamma import _aten as A, _grad_hook as G, _torch_function as _TF
from fiamma._tensor import Tensor

__all__ = ["dispatch", "state", "TD_TYPES", "disabled_torch_dispatch_impl", "make_wrapper"]

_new = object.__new__


state = _TF.td_state  # the dispatch modes and the _DisableTorchDispatch depth
TD_TYPES = _TF.TD_TYPES  # classes defining __torch_dispatch__ (kept by fiamma._torch_function)
disabled_torch_dispatch_impl = _TF.disabled_torch_dispatch_impl


# ---- which calls come here ----------------------------------------------------------------------

def _td_args(values, found):
    for a in values:
        t = type(a)
        if t in TD_TYPES:
            if t not in found:
                found.append(t)
        elif t is list or t is tuple:
            for b in a:
                if type(b) in TD_TYPES and type(b) not in found:
                    found.append(type(b))
    return found


def _types(args, kwargs):
    found = _td_args(args, [])
    if kwargs:
        _td_args(kwargs.values(), found)
    if len(found) > 1:  # a subclass before its parent
        found.sort(key=lambda t: -len(t.__mro__))
    return found


def active(args, kwargs):
    """Whether this call is for the dispatch layer (a mode entered, or a subclass argument)."""
    if state.off:
        return False
    if state.modes:
        return True
    td = TD_TYPES
    for a in args:
        t = type(a)
        if t in td:
            return True
        if t is list or t is tuple:
            for b in a:
                if type(b) in td:
                    return True
    if kwargs:
        for a in kwargs.values():
            if type(a) in td:
                return True
    return False


# ---- the dispatch -------------------------------------------------------------------------------

def _name(public):
    fget = getattr(getattr(public, "__self__", None), "fget", None)
    if fget is not None:  # a property's __get__: its name is the property's
        return fget.__name__
    return getattr(public, "__name__", None) or repr(public)


_WARNED = set()


def dispatch(public, impl, args, kwargs):
    """Run a public call whose arguments or the mode stack ask for ``__torch_dispatch__``."""
    h = _handler(public)
    if h is None:
        name = _name(public)
        if name in _PASSTHROUGH or name.startswith("is_") or hasattr(
                getattr(public, "__self__", None), "fget"):  # metadata and other properties
            if name in _DRIVERS:  # backward: its formulas' ops dispatch
                return impl(*args, **kwargs)
            return _quiet(impl, args, kwargs)
        types_ = _types(args, kwargs)
        if types_:
            raise NotImplementedError(
                f"fiamma.{name}: no ATen op is reported for it, so it cannot run on the "
                f"__torch_dispatch__ subclass {types_[0].__name__} (docs/porting.md lists the "
                "ops fiamma reports)")
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"fiamma.{name} has no ATen op: it runs without reaching the "
                          "TorchDispatchMode", stacklevel=3)
        return _quiet(impl, args, kwargs)
    return h(_Call(public, impl, args, kwargs), *args, **kwargs)


_DRIVERS = frozenset({"backward", "register_hook", "requires_grad_"})


def _quiet(impl, args, kwargs):
    """``impl`` with dispatch off: what runs inside an unreported call is not reported."""
    state.off += 1
    try:
        return impl(*args, **kwargs)
    finally:
        state.off -= 1


def redispatch(op, args, kwargs):
    """``op`` (an ATen overload) to the innermost mode, then the subclasses' handlers."""
    st = state
    types_ = tuple(_types(args, kwargs)) if not st.off else ()
    if st.modes and not st.off:
        mode = st.modes.pop()
        try:
            r = mode.__torch_dispatch__(op, types_, args, kwargs)
        finally:
            st.modes.append(mode)
        if r is not NotImplemented:
            return r
    if not types_:
        return op(*args, **kwargs)
    for t in types_:
        r = t.__torch_dispatch__(op, types_, args, kwargs)
        if r is not NotImplemented:
            return r
    raise TypeError(f"Multiple dispatch failed for {op}; all __torch_dispatch__ handlers "
                    f"returned NotImplemented: {[t.__name__ for t in types_]}")


_INPLACE = object()  # the mark of a captured record_inplace
_INPLACE_FN = object()  # ... of a captured inplace(fn, ...) (computed out of place, written in)


class _Capture:
    """A recorder collecting what an op records for autograd (installed in place of the
    autograd recorder while the op runs on meta stand-ins; not a trace hook, since ops record
    a trace's way differently)."""

    def __init__(self):
        self.records = []

    def record(self, op, out, inputs, kwargs):
        self.records.append((op, out, inputs, kwargs))

    def record_new(self, op, out, inputs):
        self.records.append((op, out, inputs, {}))

    def requires_grad_(self, t, flag):
        t.requires_grad = flag

    def record_inplace(self, op, out, inputs, kwargs):
        self.records.append((_INPLACE, op, out, inputs, kwargs))

    def check_inplace(self, t, op):
        pass

    def inplace(self, fn, name, self_, args, kwargs):
        self.records.append((_INPLACE_FN, name, self_, args, kwargs))


def _stand_in(t, table):
    s = table.get(id(t))
    if s is None:
        s = _empty_strided(tuple(t._shape), tuple(t._stride), dtype=t._dtype,
                                 device="meta")
        s.requires_grad = t.requires_grad
        table[id(t)] = (s, t)
        return s
    return s[0]


def _empty_strided(*args, **kwargs):
    return _quiet(fiamma.empty_strided, args, kwargs)


def _map(v, fn):
    if isinstance(v, Tensor):
        return fn(v)
    if type(v) is list:
        return [_map(x, fn) for x in v]
    if type(v) is tuple:
        return tuple(_map(x, fn) for x in v)
    if type(v) is dict:
        return {k: _map(x, fn) for k, x in v.items()}
    return v


def _any_requires_grad(values):
    for v in values:
        if isinstance(v, Tensor):
            if v.requires_grad:
                return True
        elif type(v) is list or type(v) is tuple:
            if _any_requires_grad(v):
                return True
    return False


class _Call:
    """One public call on its way down: ``prim`` reports it as an ATen overload."""

    __slots__ = ("public", "impl", "args", "kwargs", "full")

    def __init__(self, public, impl, args, kwargs):
        self.public, self.impl, self.args, self.kwargs = public, impl, args, kwargs
        self.full = None  # the last prim's whole result (linalg's info beside the output)

    def prim(self, op, args, kwargs=None, pick=None, saved=None):
        """``op(*args, **kwargs)`` through the modes and subclasses, below autograd; ``pick``:
        the index of the result the fiamma function returns (``nll_loss_forward``'s 0);
        ``saved``: {name of a tensor the autograd record keeps: index of op's result giving
        it} (``native_batch_norm``'s mean and invstd)."""
        kwargs = kwargs or {}
        needs = G.state.enabled and (_any_requires_grad(self.args)
                                     or _any_requires_grad(self.kwargs.values()))
        recs = self._capture() if needs else None
        if recs and len(recs[2]) == 1 and recs[2][0][0] is _INPLACE:
            # an in-place op with gradients: PyTorch's leaf check before the write
            rev = {id(st): orig for st, orig in recs[0].values()}
            target = rev.get(id(recs[2][0][2]))
            if target is not None:
                G.check_inplace(target, recs[2][0][1])
        if recs and len(recs[2]) == 1 and recs[2][0][0] is _INPLACE_FN:
            return self._inplace_fn(op, recs, args, kwargs)
        prev = G.set_grad_enabled_flag(False)
        try:
            out = redispatch(op, args, kwargs)
        finally:
            G.set_grad_enabled_flag(prev)
        full = self.full = out
        if pick is not None:
            out = out[pick]
        if recs:
            self._replay(op, recs, out, saved and (saved, full), full)
        return out

    def _capture(self):
        table = {}
        try:
            a = _map(self.args, lambda t: _stand_in(t, table))
            k = _map(self.kwargs, lambda t: _stand_in(t, table))
        except Exception as e:
            raise NotImplementedError(f"fiamma.{_name(self.public)} under __torch_dispatch__ "
                                      f"with gradients: {e}") from None
        cap = _Capture()
        G.autograd_module()
        prev = G.set_trace_hook(None)
        saved = G._recorder, G._record_new
        G._recorder, G._record_new = cap, cap.record_new
        state.off += 1  # the op's own public calls inside are not dispatched again
        try:
            res = self.impl(*a, **k)
        except Exception as e:
            raise NotImplementedError(
                f"fiamma.{_name(self.public)}: gradients through a __torch_dispatch__ subclass "
                f"or mode need its autograd record on meta stand-ins, which failed: {e}") \
                from None
        finally:
            state.off -= 1
            G._recorder, G._record_new = saved
            G.set_trace_hook(prev)
        return table, res, cap.records

    def _replay(self, op, recs, out, saved=None, full=None):
        table, res, records = recs
        if not records:
            return
        name = _name(self.public)
        if len(records) == 1 and records[0][0] is _INPLACE:
            return self._replay_inplace(op, table, records[0], out)
        if len(records) != 1 or records[0][0] == "inplace":
            raise NotImplementedError(
                f"fiamma.{name} ({op}): gradients through a __torch_dispatch__ subclass or "
                "mode are supported for ops recording one out-of-place autograd node; this "
                "one records " + ", ".join(str(r[1] if r[0] == "inplace" else r[0])
                                           for r in records))
        key, rout, inputs, kw = records[0]
        outs = {}
        if isinstance(rout, Tensor):
            outs[id(rout)] = out
        elif isinstance(rout, tuple):
            # the op's whole result when the record keeps more outputs than the function
            # returns (max_pool2d's indices)
            if not isinstance(out, (tuple, list)) and isinstance(full, (tuple, list)) \
                    and len(full) == len(rout):
                out = full
            real = out if isinstance(out, (tuple, list)) else (out,)
            for m, r in zip(rout, real):
                outs[id(m)] = r
            out = type(rout)(*real) if hasattr(rout, "_fields") else tuple(real)
        if saved:  # tensors the record keeps that the op returns too
            for k, i in saved[0].items():
                v = kw.get(k)
                if isinstance(v, Tensor):
                    outs[id(v)] = saved[1][i]

        rev = {id(s): orig for s, orig in table.values()}

        def back(t):
            i = id(t)
            if i in rev:
                return rev[i]
            if i in outs:
                return outs[i]
            raise NotImplementedError(
                f"fiamma.{name} ({op}): its autograd record keeps an intermediate tensor, "
                "which a __torch_dispatch__ subclass or mode cannot provide")

        inputs = _map(tuple(inputs), back)
        kw = _map(dict(kw), back)
        if isinstance(rout, Tensor):
            G.record(key, outs[id(rout)], inputs, kw)
        elif _types(self.args, self.kwargs):  # a subclass's saved outputs: its own detach
            G.record(key, out, inputs, kw)
        else:  # under a mode, PyTorch shows no detach of these ops' saved outputs
            _quiet(G.record, (key, out, inputs, kw), {})


def _replay_inplace(self, op, table, rec, out):
    """Record a captured in-place node on the real tensors (after the dispatched write, as
    core's in-place ops record after writing)."""
    _, key, rout, inputs, kw = rec
    rev = {id(st): orig for st, orig in table.values()}

    def back(t):
        r = rev.get(id(t))
        if r is None:
            raise NotImplementedError(
                f"fiamma.{_name(self.public)} ({op}): its autograd record keeps an "
                "intermediate tensor, which a __torch_dispatch__ subclass or mode cannot "
                "provide")
        return r

    target = back(rout)
    G.record_inplace(key, target, _map(tuple(inputs), back), _map(dict(kw), back))


_Call._replay_inplace = _replay_inplace


def _inplace_fn(self, op, recs, args, kwargs):
    """An in-place op that core runs with gradients as ``autograd.inplace`` (out of place on a
    copy, written into ``self``, history rebased): under a mode, the copy gets the dispatched
    in-place op, so the mode sees ``op`` and autograd the usual rebase."""
    table, _, records = recs
    _, name, st, _, _ = records[0]
    if _types(self.args, self.kwargs):
        raise NotImplementedError(
            f"fiamma.{_name(self.public)} ({op}): an in-place op with gradients on a "
            "__torch_dispatch__ subclass is not supported (use the out-of-place op)")
    rev = {id(s): orig for s, orig in table.values()}
    target = rev.get(id(st))
    if target is None or args[0] is not target:
        raise NotImplementedError(f"fiamma.{_name(self.public)} ({op}): in-place op with "
                                  "gradients on an argument fiamma cannot follow")

    def run(s, *a, **k):
        t = _quiet(Tensor.clone, (s,), {})
        r = redispatch(op, (t,) + tuple(args[1:]), kwargs)
        _HIDE_COPY[0] = r  # the recorder's write of the result into self is not reported
        return r

    try:
        G.inplace(run, name, target, (), {})
    finally:
        _HIDE_COPY[0] = None
    return target


_HIDE_COPY = [None]


_Call._inplace_fn = _inplace_fn


# ---- _make_wrapper_subclass ---------------------------------------------------------------------

_MW = []  # (MetaStorage, _init, contiguous_strides, device, meta device, cpu device)


def _mw():
    from fiamma._backend.meta import MetaStorage
    from fiamma._storage import device
    from fiamma._tensor import _init, contiguous_strides

    _MW[:] = [MetaStorage, _init, contiguous_strides, device, device("meta"), device("cpu")]
    return _MW


def make_wrapper(cls, size, strides=None, storage_offset=None, memory_format=None, dtype=None,
                 layout=None, device=None, pin_memory=False, requires_grad=False,
                 dispatch_sizes_strides_policy=None, dispatch_device=False,
                 dispatch_layout=False, _extra_dispatch_keys=None, storage_size=None):
    """``Tensor._make_wrapper_subclass``: an instance of ``cls`` with this geometry and no data
    of its own (a meta storage; ``device`` reports ``device``)."""
    MetaStorage, _init, contiguous_strides, _device, meta, cpu = _MW or _mw()
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_wrapper_subclass: expected a subclass of fiamma.Tensor, "
                        f"got {cls!r}")
    shape = tuple(map(int, size))
    stride = contiguous_strides(shape) if strides is None else tuple(map(int, strides))
    if len(stride) != len(shape):
        raise RuntimeError(f"_make_wrapper_subclass: {len(shape)} sizes but {len(stride)} "
                           "strides")
    extent = 1
    for n, st in zip(shape, stride):
        if n <= 0:
            if n < 0:
                raise RuntimeError(f"_make_wrapper_subclass: negative size in {list(shape)}")
            extent = 0
            break
        extent += (n - 1) * st
    dt = dtype if dtype is not None else fiamma.get_default_dtype()
    offset = int(storage_offset or 0)
    nbytes = (offset + extent) * dt.itemsize if storage_size is None else int(storage_size)
    t = _new(cls)
    _init(t, MetaStorage(nbytes, meta), dt, shape, stride, offset, None)
    t.__dict__["_fm_device"] = cpu if device is None else _device(device)
    if requires_grad:
        G.autograd_module().requires_grad_(t, True)
    return t


def _dev(self):
    d = self.__dict__.get("_fm_device")
    return self._storage.device if d is None else d


def install_class(cls):
    """What a class defining ``__torch_dispatch__`` gets: ``device`` and the device
    predicates answer the wrapper's device."""
    T = Tensor
    for name, fn in (("device", _dev), ("is_cpu", lambda s: _dev(s).type == "cpu"),
                     ("is_cuda", lambda s: _dev(s).type == "cuda"),
                     ("is_meta", lambda s: _dev(s).type == "meta")):
        for k in cls.__mro__:
            if name in k.__dict__:
                if k is T or getattr(k.__dict__[name], "_fm_wrapper", False):
                    p = property(fn)
                    p.fget._fm_wrapper = True  # noqa: B010
                    setattr(cls, name, p)
                break


# ---- handlers: fiamma's public functions as ATen ops --------------------------------------------

_H = {}          # key ("add", "Tensor.view", "F.linear") -> handler(c, *args, **kwargs)
_RESOLVED = {}   # public object -> handler (filled on first use)

# calls that read metadata or drive autograd: they run as they are (PyTorch answers them from
# the wrapper's sizes and strides, or they are not ops)
_PASSTHROUGH = frozenset("""
    size dim ndim ndimension shape dtype device layout numel nelement stride storage_offset
    is_contiguous element_size itemsize nbytes is_floating_point is_complex is_signed is_leaf
    requires_grad_ grad is_cpu is_cuda is_meta is_sparse is_quantized is_mkldnn get_device
    backward register_hook retain_grad retains_grad data_ptr __len__ __repr__ __format__
    __hash__ names is_inference is_nested output_nr _version
    register_post_accumulate_grad_hook is_shared untyped_storage storage
    is_pinned __setstate__ __array__ __contains__ dim_order _is_view is_neg is_conj
    __str__ type is_set_to requires_grad grad_fn tolist numpy
""".split())


def _reg(*keys):
    def deco(fn):
        for k in keys:
            _H[k] = fn
        return fn
    return deco


def _handler(public):
    h = _RESOLVED.get(public)
    if h is None and public not in _RESOLVED:
        h = _lookup(public)
        try:
            _RESOLVED[public] = h
        except TypeError:
            pass
    return h


_INDEX = {}  # id(public object) -> the handler keys it may have ("Tensor.view", "view")
_INDEXED = set()


def _index():
    import sys

    for modname, prefix in (("fiamma", ""), ("fiamma.nn.functional", "F."),
                            ("fiamma.fused", "fused."), ("fiamma._tensor", "Tensor."),
                            ("fiamma.linalg", "linalg."), ("fiamma.fft", "fft.")):
        mod = sys.modules.get(modname)
        if mod is None or modname in _INDEXED:
            continue
        _INDEXED.add(modname)
        items = vars(Tensor).items() if prefix == "Tensor." else vars(mod).items()
        for n, v in items:
            if isinstance(v, property):
                v = v.fget
            # indexed while a profiler (FlopCounterMode) has wrapped the ops: the op too
            w = getattr(v, "__wrapped__", None) if callable(v) else None
            for u in ((v,) if w is None else (v, w)):
                keys = _INDEX.setdefault(id(u), [])
                keys.append(prefix + n)
                if prefix not in ("fused.", "linalg.", "fft."):
                    keys.append(n)


def _lookup(public):
    _index()
    fget = getattr(getattr(public, "__self__", None), "fget", None)
    keys = _INDEX.get(id(fget if fget is not None else public), ())
    for k in sorted(keys, key=lambda k: "." not in k):  # "Tensor.x"/"F.x" before "x"
        h = _H.get(k)
        if h is not None:
            return h
    return _H.get(_name(public))


def _functional():
    import sys

    return sys.modules.get("fiamma.nn.functional")


def _ov(qual):
    name, _, ov = qual.partition(".")
    return getattr(A.packet(name), ov or "default")


def _simple(fname, qual, args_text, n_tensor=1, method=None):
    """An op computed by ``fiamma.<fname>`` (or the Tensor method) with the same arguments."""
    def impl(*args, **kwargs):
        if method:  # the instance's method: a subclass argument dispatches again
            return getattr(args[0], method)(*args[1:], **kwargs)
        return getattr(fiamma, fname)(*args, **kwargs)
    impl.__name__ = fname
    return A.define(qual, args_text, impl)


# unary pointwise ops: fiamma.<name>(input) is aten.<name>.default(self)
_UNARY = """abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan
    sinh cosh tanh asinh acosh atanh sigmoid relu reciprocal sign floor ceil round trunc frac
    erf erfc erfinv logical_not bitwise_not isnan isinf isfinite signbit sgn angle
    conj_physical lgamma digamma""".split()
_NO_INPLACE = frozenset({"isnan", "isinf", "isfinite", "signbit", "angle"})
for _n in _UNARY:
    _simple(_n, _n, "(Tensor self) -> Tensor")
    if _n not in _NO_INPLACE:
        _simple(_n + "_", _n + "_", "(Tensor(a!) self) -> Tensor(a!)", method=_n + "_")

    def _mk(op, iop):
        def h(c, input, *, out=None, inplace=False):
            if out is not None:
                raise NotImplementedError(f"fiamma.{op}(out=) on a __torch_dispatch__ subclass "
                                          "or under a dispatch mode is not supported")
            if inplace:
                return c.prim(_ov(iop), (input,))
            return c.prim(_ov(op), (input,))

        def hi(c, input):
            return c.prim(_ov(iop), (input,))
        return h, hi

    _h, _hi = _mk(_n, _n + "_")
    _H[_n] = _h
    _H["F." + _n] = _h
    if _n not in _NO_INPLACE:
        _H[_n + "_"] = _hi
        _H["Tensor." + _n + "_"] = _hi


@_reg("conj", "resolve_conj")
def _conj(c, input):
    # fiamma's conj is a copy (no lazily conjugated views): conj_physical for complex input;
    # a real tensor is its own conjugate, as in PyTorch (no op is reported)
    if not input.dtype.is_complex:
        return input
    return c.prim(_ov("conj_physical"), (input,))


def _is_t(x):
    return isinstance(x, Tensor)


# binary ops: .Tensor with a tensor other, .Scalar with a number (add/sub/mul/div keep .Tensor
# for numbers, as PyTorch's wrapped scalars)
for _n in ("add", "sub"):
    _simple(_n, f"{_n}.Tensor", "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    _simple(_n, f"{_n}.Scalar", "(Tensor self, Scalar other, Scalar alpha=1) -> Tensor")
    _simple(_n + "_", f"{_n}_.Tensor",
            "(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", method=_n + "_")
for _n in ("mul", "div"):
    _simple(_n, f"{_n}.Tensor", "(Tensor self, Tensor other) -> Tensor")
    _simple(_n + "_", f"{_n}_.Tensor", "(Tensor(a!) self, Tensor other) -> Tensor(a!)",
            method=_n + "_")
_simple("div", "div.Tensor_mode", "(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor")
for _n in ("maximum", "minimum", "atan2", "fmax", "fmin", "hypot", "logaddexp", "xlogy",
           "floor_divide", "copysign", "nextafter"):
    _simple(_n, _n, "(Tensor self, Tensor other) -> Tensor")
for _n in ("eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "bitwise_and",
           "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor"):
    _simple(_n, f"{_n}.Tensor", "(Tensor self, Tensor other) -> Tensor")
    _simple(_n, f"{_n}.Scalar", "(Tensor self, Scalar other) -> Tensor")
_simple("pow", "pow.Tensor_Tensor", "(Tensor self, Tensor exponent) -> Tensor")
_simple("pow", "pow.Tensor_Scalar", "(Tensor self, Scalar exponent) -> Tensor")
_simple("pow", "pow.Scalar", "(Scalar self, Tensor exponent) -> Tensor")
A.define("rsub.Tensor", "(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
         lambda self, other, alpha=1: fiamma.sub(other, self, alpha=alpha))
A.define("rsub.Scalar", "(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
         lambda self, other, alpha=1: fiamma.sub(other, self, alpha=alpha))


def _no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"fiamma.{name}(out=) on a __torch_dispatch__ subclass or "
                                  "under a dispatch mode is not supported")


def _mk_arith(n):
    def h(c, input, other, *args, alpha=1, out=None):
        _no_out(n, out)
        if args:
            alpha = args[0]
        if not _is_t(input):  # 2 + x arrives as add(2, x): PyTorch's add(x, 2) order
            input, other = other, input
        kw = {"alpha": alpha} if alpha != 1 else {}
        return c.prim(_ov(f"{n}.Tensor"), (input, other), kw)

    def hi(c, self, other, *args, alpha=1):
        if args:
            alpha = args[0]
        kw = {"alpha": alpha} if alpha != 1 else {}
        return c.prim(_ov(f"{n}_.Tensor"), (self, other), kw)
    return h, hi


for _n in ("add", "sub"):
    _H[_n], _H[_n + "_"] = _mk_arith(_n)
_H["Tensor.add_"], _H["Tensor.sub_"] = _H["add_"], _H["sub_"]


@_reg("mul", "multiply")
def _mul(c, input, other, *, out=None):
    _no_out("mul", out)
    if not _is_t(input):
        input, other = other, input
    return c.prim(_ov("mul.Tensor"), (input, other))


@_reg("mul_", "Tensor.mul_")
def _mul_(c, self, other):
    return c.prim(_ov("mul_.Tensor"), (self, other))


@_reg("div", "divide", "true_divide")
def _div(c, input, other, *, rounding_mode=None, out=None):
    _no_out("div", out)
    if rounding_mode is not None:
        return c.prim(_ov("div.Tensor_mode"), (input, other), {"rounding_mode": rounding_mode})
    return c.prim(_ov("div.Tensor"), (input, other))


@_reg("div_", "Tensor.div_")
def _div_(c, self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise NotImplementedError("fiamma.div_(rounding_mode=) under __torch_dispatch__")
    return c.prim(_ov("div_.Tensor"), (self, other))


@_reg("__rsub__", "rsub", "Tensor.__rsub__")
def _rsub(c, input, other, alpha=1):
    return c.prim(_ov("rsub.Tensor" if _is_t(other) else "rsub.Scalar"), (input, other),
                  {"alpha": alpha} if alpha != 1 else {})


@_reg("__rtruediv__", "Tensor.__rtruediv__")
def _rdiv(c, input, other):
    return fiamma.mul(fiamma.reciprocal(input), other)


@_reg("__rpow__", "Tensor.__rpow__")
def _rpow(c, input, other):
    return c.prim(_ov("pow.Scalar"), (other, input))


@_reg("pow")
def _pow(c, input, exponent, *, out=None):
    _no_out("pow", out)
    if not _is_t(input):
        return c.prim(_ov("pow.Scalar"), (input, exponent))
    return c.prim(_ov("pow.Tensor_Tensor" if _is_t(exponent) else "pow.Tensor_Scalar"),
                  (input, exponent))


@_reg("square")
def _square(c, input, *, out=None):
    _no_out("square", out)
    return c.prim(_ov("pow.Tensor_Scalar"), (input, 2))


def _mk_bin(n, scalar):
    def h(c, input, other, *, out=None):
        _no_out(n, out)
        if scalar:
            return c.prim(_ov(f"{n}.Tensor" if _is_t(other) else f"{n}.Scalar"),
                          (input, other))
        return c.prim(_ov(n), (input, other))
    return h


for _n in ("eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "bitwise_and",
           "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor"):
    _H[_n] = _mk_bin(_n, True)
for _n in ("maximum", "minimum", "atan2", "fmax", "fmin", "hypot", "logaddexp", "xlogy",
           "floor_divide", "copysign", "nextafter"):
    _H[_n] = _mk_bin(_n, False)
_H["greater"], _H["less"], _H["greater_equal"], _H["less_equal"], _H["not_equal"] = (
    _H["gt"], _H["lt"], _H["ge"], _H["le"], _H["ne"])


# ---- in-place, copies, conversions --------------------------------------------------------------

A.define("copy_.default", "(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
         lambda self, src, non_blocking=False: self.copy_(src, non_blocking))
A.define("zero_.default", "(Tensor(a!) self) -> Tensor(a!)", lambda self: self.zero_())
A.define("fill_.Scalar", "(Tensor(a!) self, Scalar value) -> Tensor(a!)",
         lambda self, value: self.fill_(value))
A.define("fill_.Tensor", "(Tensor(a!) self, Tensor value) -> Tensor(a!)",
         lambda self, value: self.fill_(value))
for _n in ("addcmul", "addcdiv"):
    _simple(_n, _n, "(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor")
    _simple(_n + "_", _n + "_",
            "(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
            method=_n + "_")
_simple("lerp_", "lerp_.Scalar", "(Tensor(a!) self, Tensor end, Scalar weight) -> Tensor(a!)",
        method="lerp_")
_simple("lerp_", "lerp_.Tensor", "(Tensor(a!) self, Tensor end, Tensor weight) -> Tensor(a!)",
        method="lerp_")
_simple("clamp", "clamp.default", "(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor")
_simple("clamp_", "clamp_.default",
        "(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", method="clamp_")
_simple("where", "where.self", "(Tensor condition, Tensor self, Tensor other) -> Tensor")
A.define("clone.default", "(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
         lambda self, memory_format=None: self.clone(memory_format=memory_format))
A.define("detach.default", "(Tensor(a) self) -> Tensor(a)", lambda self: self.detach(),
         is_view=True)
A.define("alias.default", "(Tensor(a) self) -> Tensor(a)",
         lambda self: self.view(self.shape), is_view=True)
A.define("_to_copy.default", "(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
         "Device? device=None, bool? pin_memory=None, bool non_blocking=False, "
         "MemoryFormat? memory_format=None) -> Tensor",
         lambda self, dtype=None, layout=None, device=None, pin_memory=None,
         non_blocking=False, memory_format=None: self.to(
             device=device, dtype=dtype, copy=True))
A.define("_local_scalar_dense.default", "(Tensor self) -> Scalar",
         lambda self: self.item())


@_reg("Tensor.copy_", "copy_")
def _copy_(c, self, src, non_blocking=False):
    if _HIDE_COPY[0] is not None and src is _HIDE_COPY[0]:
        _HIDE_COPY[0] = None
        return _quiet(c.impl, c.args, c.kwargs)
    return c.prim(_ov("copy_"), (self, src), {"non_blocking": True} if non_blocking else {})


@_reg("Tensor.zero_", "zero_")
def _zero_(c, self):
    return c.prim(_ov("zero_"), (self,))


@_reg("Tensor.fill_", "fill_")
def _fill_(c, self, value):
    return c.prim(_ov("fill_.Tensor" if _is_t(value) else "fill_.Scalar"), (self, value))


def _mk_addc(n):
    def h(c, input, tensor1, tensor2, *args, value=1, out=None):
        _no_out(n, out)
        if args:
            value = args[0]
        return c.prim(_ov(n), (input, tensor1, tensor2), {"value": value} if value != 1 else {})

    def hi(c, self, tensor1, tensor2, *args, value=1):
        if args:
            value = args[0]
        return c.prim(_ov(n + "_"), (self, tensor1, tensor2),
                      {"value": value} if value != 1 else {})
    return h, hi


for _n in ("addcmul", "addcdiv"):
    _H[_n], _H[_n + "_"] = _mk_addc(_n)
    _H["Tensor." + _n + "_"] = _H[_n + "_"]


@_reg("Tensor.lerp_", "lerp_")
def _lerp_(c, self, end, weight):
    return c.prim(_ov("lerp_.Tensor" if _is_t(weight) else "lerp_.Scalar"), (self, end, weight))


@_reg("clamp", "clip")
def _clamp(c, input, min=None, max=None, *, out=None):
    _no_out("clamp", out)
    return c.prim(_ov("clamp"), (input, min, max))


@_reg("clamp_", "Tensor.clamp_", "clip_")
def _clamp_(c, input, min=None, max=None):
    return c.prim(_ov("clamp_"), (input, min, max))


@_reg("where")
def _where(c, condition, input=None, other=None, *, out=None):
    _no_out("where", out)
    if input is None:
        raise NotImplementedError("fiamma.where(condition) (nonzero) under __torch_dispatch__")
    return c.prim(_ov("where.self"), (condition, input, other))


@_reg("Tensor.where")
def _twhere(c, self, condition, y):
    return c.prim(_ov("where.self"), (condition, self, y))


@_reg("clone", "Tensor.clone")
def _clone(c, input, memory_format=None):
    return c.prim(_ov("clone"), (input,),
                  {"memory_format": memory_format} if memory_format is not None else {})


@_reg("detach", "Tensor.detach", "Tensor.data")
def _detach(c, input):
    return c.prim(_ov("detach"), (input,))


@_reg("Tensor.contiguous", "contiguous")
def _contiguous(c, self, memory_format=None):
    if self.is_contiguous():
        return self
    return fiamma.clone(self, memory_format=importlib.import_module(
        "fiamma._memory_format").contiguous_format)


@_reg("Tensor.to")
def _to(c, self, *args, **kwargs):
    copy = kwargs.pop("copy", False)
    dev, dt, nb, mf = importlib.import_module("fiamma._torch_c")._parse_to(*args, **kwargs)
    if args and isinstance(args[0], Tensor):
        dt = args[0].dtype
        dev = args[0].device
    kw = {}
    if dt is not None and dt != self.dtype:
        kw["dtype"] = dt
    if dev is not None and fiamma.device(dev) != self.device:
        kw["device"] = fiamma.device(dev)
    if not kw and not copy:
        return self
    return c.prim(_ov("_to_copy"), (self,), kw)


def _mk_cast(dt):
    def h(c, self, memory_format=None):
        if self.dtype == dt:
            return self
        return c.prim(_ov("_to_copy"), (self,), {"dtype": dt})
    return h


for _n in ("float", "double", "half", "bfloat16", "int", "long", "bool", "short", "char",
           "byte"):
    _H["Tensor." + _n] = _mk_cast(getattr(fiamma, {"float": "float32", "double": "float64",
                                                    "half": "float16", "int": "int32",
                                                    "long": "int64", "short": "int16",
                                                    "char": "int8", "byte": "uint8"}.get(_n, _n)))


@_reg("Tensor.type_as", "type_as")
def _type_as(c, self, other):
    return self.to(other.dtype)


@_reg("Tensor.item", "item")
def _item(c, self):
    return c.prim(_ov("_local_scalar_dense"), (self,))


for _n, _conv in (("__float__", float), ("__int__", int), ("__complex__", complex)):
    def _mk_num(conv):
        def h(c, self):
            return conv(self.item())
        return h
    _H["Tensor." + _n] = _mk_num(_conv)


# ---- reductions ---------------------------------------------------------------------------------

def _dimlist(dim):
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


_simple("sum", "sum.default", "(Tensor self, *, ScalarType? dtype=None) -> Tensor")
_simple("sum", "sum.dim_IntList",
        "(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
_simple("mean", "mean.default", "(Tensor self, *, ScalarType? dtype=None) -> Tensor")
_simple("mean", "mean.dim",
        "(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
_simple("amax", "amax.default", "(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor")
_simple("amin", "amin.default", "(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor")
_simple("max", "max.default", "(Tensor self) -> Tensor")
_simple("max", "max.dim", "(Tensor self, int dim, bool keepdim=False) -> "
        "(Tensor values, Tensor indices)")
_simple("min", "min.default", "(Tensor self) -> Tensor")
_simple("min", "min.dim", "(Tensor self, int dim, bool keepdim=False) -> "
        "(Tensor values, Tensor indices)")
_simple("argmax", "argmax.default", "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")
_simple("argmin", "argmin.default", "(Tensor self, int? dim=None, bool keepdim=False) -> Tensor")
_simple("prod", "prod.default", "(Tensor self, *, ScalarType? dtype=None) -> Tensor")
_simple("prod", "prod.dim_int",
        "(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
_simple("all", "all.default", "(Tensor self) -> Tensor")
_simple("any", "any.default", "(Tensor self) -> Tensor")
_simple("all", "all.dim", "(Tensor self, int dim, bool keepdim=False) -> Tensor")
_simple("any", "any.dim", "(Tensor self, int dim, bool keepdim=False) -> Tensor")


def _mk_red(n, dimname):
    def h(c, input, dim=None, keepdim=False, *, dtype=None, out=None):
        _no_out(n, out)
        kw = {"dtype": dtype} if dtype is not None else {}
        if dim is None and not keepdim:
            return c.prim(_ov(f"{n}.default"), (input,), kw)
        return c.prim(_ov(f"{n}.{dimname}"), (input, _dimlist(dim)) + ((True,) if keepdim else ()),
                      kw)
    return h


_H["sum"] = _mk_red("sum", "dim_IntList")
_H["mean"] = _mk_red("mean", "dim")


@_reg("prod")
def _prod(c, input, dim=None, keepdim=False, *, dtype=None, out=None):
    _no_out("prod", out)
    kw = {"dtype": dtype} if dtype is not None else {}
    if dim is None:
        return c.prim(_ov("prod.default"), (input,), kw)
    return c.prim(_ov("prod.dim_int"), (input, dim, keepdim), kw)


def _mk_amax(n):
    def h(c, input, dim=(), keepdim=False, *, out=None):
        _no_out(n, out)
        return c.prim(_ov(n), (input, _dimlist(dim) or [], keepdim))
    return h


_H["amax"], _H["amin"] = _mk_amax("amax"), _mk_amax("amin")


def _mk_max(n, other):
    def h(c, input, dim=None, keepdim=False, *, out=None):
        _no_out(n, out)
        if _is_t(dim):
            return c.prim(_ov(other), (input, dim))
        if dim is None:
            return c.prim(_ov(f"{n}.default"), (input,))
        return c.prim(_ov(f"{n}.dim"), (input, dim) + ((True,) if keepdim else ()))
    return h


_H["max"], _H["min"] = _mk_max("max", "maximum"), _mk_max("min", "minimum")


def _mk_arg(n):
    def h(c, input, dim=None, keepdim=False, *, out=None):
        _no_out(n, out)
        return c.prim(_ov(n), (input, dim, keepdim))
    return h


_H["argmax"], _H["argmin"] = _mk_arg("argmax"), _mk_arg("argmin")


def _mk_allany(n):
    def h(c, input, dim=None, keepdim=False, *, out=None):
        _no_out(n, out)
        if dim is None:
            return c.prim(_ov(f"{n}.default"), (input,))
        return c.prim(_ov(f"{n}.dim"), (input, dim, keepdim))
    return h


_H["all"], _H["any"] = _mk_allany("all"), _mk_allany("any")


# ---- matrix products ----------------------------------------------------------------------------

_simple("mm", "mm", "(Tensor self, Tensor mat2) -> Tensor")
_simple("bmm", "bmm", "(Tensor self, Tensor mat2) -> Tensor")
_simple("mv", "mv", "(Tensor self, Tensor vec) -> Tensor")
_simple("dot", "dot", "(Tensor self, Tensor tensor) -> Tensor")
_simple("addmm", "addmm", "(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
        "Scalar alpha=1) -> Tensor")
for _n in ("mm", "bmm", "mv", "dot"):
    def _mk_mm(n):
        def h(c, input, other, *, out=None):
            _no_out(n, out)
            return c.prim(_ov(n), (input, other))
        return h
    _H[_n] = _mk_mm(_n)


@_reg("addmm")
def _addmm(c, input, mat1, mat2, *, beta=1, alpha=1, out=None):
    _no_out("addmm", out)
    kw = {}
    if beta != 1:
        kw["beta"] = beta
    if alpha != 1:
        kw["alpha"] = alpha
    return c.prim(_ov("addmm"), (input, mat1, mat2), kw)


def _as(public_name, op, args, kwargs=None):
    """Report ``op`` for a step of a decomposition, its autograd record taken from
    ``Tensor.<public_name>(*args)`` (``_unsafe_view`` records as ``reshape``)."""
    fn = getattr(Tensor, public_name)
    return _Call(fn, fn, args, {}).prim(op, args, kwargs)


def _foldable(t):
    """``t.view(-1, t.size(-1))`` needs no copy (its batch dims and rows are contiguous)."""
    shape, stride = t.shape, t.stride()
    return all(stride[i] == stride[i + 1] * shape[i + 1] for i in range(t.ndim - 2))


@_reg("matmul", "Tensor.__matmul__")
def _matmul(c, input, other, *, out=None):
    """PyTorch's matmul decomposition: dot/mv/mm for 1-D and 2-D operands; a 3-D+ operand
    times a 1-D or 2-D one folded into one mm/mv when its batch dims are contiguous (or the
    smaller operand requires grad); otherwise both expanded to the broadcast batch and bmm."""
    _no_out("matmul", out)
    t1, t2 = input, other
    d1, d2 = t1.ndim, t2.ndim
    if d1 == 0 or d2 == 0:
        raise RuntimeError("matmul: both arguments to matmul need to be at least 1D, but they "
                           f"are {d1}D and {d2}D")
    if d1 == 1 and d2 == 1:
        return fiamma.dot(t1, t2)
    if d1 == 2 and d2 == 1:
        return fiamma.mv(t1, t2)
    if d1 == 1 and d2 == 2:
        return fiamma.mm(t1.unsqueeze(0), t2).squeeze_(0)
    if d1 == 2 and d2 == 2:
        return fiamma.mm(t1, t2)
    grad = G.state.enabled
    if d1 >= 3 and d2 <= 2 and ((grad and t2.requires_grad) or t1.numel() == 0
                                or _foldable(t1)):
        lead = list(t1.shape[:-1])
        flat = t1.reshape(-1, t1.shape[-1])
        res = fiamma.mm(flat, t2) if d2 == 2 else fiamma.mv(flat, t2)
        return _as("reshape", _ov("_unsafe_view"), (res, lead + ([t2.shape[-1]] if d2 == 2
                                                                 else [])))
    if d2 >= 3 and d1 <= 2:
        t2t = t2.mT
        if (grad and t1.requires_grad) or (d1 == 1 and (t2t.numel() == 0
                                                         or _foldable(t2t))):
            # (t1 @ t2) = (t2.mT @ t1.mT).mT, folded
            res = fiamma.matmul(t2t, t1 if d1 == 1 else t1.t())
            return res if d1 == 1 else res.mT.contiguous()
    n = t1.shape[-2] if d1 > 1 else 1
    m = t1.shape[-1]
    p = t2.shape[-1] if d2 > 1 else 1
    m2 = t2.shape[-2] if d2 > 1 else t2.shape[-1]
    batch = list(fiamma.broadcast_shapes(tuple(t1.shape[:-2]), tuple(t2.shape[:-2])))
    nb = 1
    for s in batch:
        nb *= s
    a = t1.expand(batch + [n, m]).view([nb, n, m])
    if d2 == 1:
        b = t2.expand(batch + [m2]).view([nb, m2]).unsqueeze(2)
        res = fiamma.bmm(a, b).squeeze(-1)
    else:
        b = t2.expand(batch + [m2, p]).view([nb, m2, p])
        res = fiamma.bmm(a, b)
    shape = batch + ([n] if d1 > 1 else []) + ([p] if d2 > 1 else [])
    return _as("reshape", _ov("_unsafe_view"), (res, shape))


@_reg("F.linear", "linear")
def _linear(c, input, weight, bias=None):
    if input.ndim >= 3 and bias is not None and input.is_contiguous():
        # PyTorch's flattened path: view, t, addmm, view
        lead = tuple(input.shape[:-1])
        x2 = input.view(-1, input.shape[-1])
        y = fiamma.addmm(bias, x2, weight.t())
        return y.view(*lead, weight.shape[0])
    wt = weight.t()
    if input.ndim == 2:
        return fiamma.mm(input, wt) if bias is None else fiamma.addmm(bias, input, wt)
    if input.ndim == 1:
        y = fiamma.matmul(input, wt)
        return y if bias is None else fiamma.add(y, bias)
    y = fiamma.matmul(input, wt)  # PyTorch: matmul's fold (t, view, mm, _unsafe_view)
    return y if bias is None else fiamma.add(y, bias)


# ---- views and shapes ---------------------------------------------------------------------------

def _view_op(qual, args_text, fn):
    return A.define(qual, args_text, fn, is_view=True)


_view_op("view_as_real.default", "(Tensor(a) self) -> Tensor(a)",
         lambda self: fiamma.view_as_real(self))
_view_op("view_as_complex.default", "(Tensor(a) self) -> Tensor(a)",
         lambda self: fiamma.view_as_complex(self))
_view_op("real.default", "(Tensor(a) self) -> Tensor(a)", lambda self: fiamma.real(self))
_view_op("imag.default", "(Tensor(a) self) -> Tensor(a)", lambda self: fiamma.imag(self))


@_reg("view_as_real")
def _view_as_real(c, input):
    return c.prim(_ov("view_as_real"), (input,))


@_reg("view_as_complex")
def _view_as_complex(c, input):
    return c.prim(_ov("view_as_complex"), (input,))


@_reg("real", "Tensor.real")
def _real(c, input):
    # a real tensor is its own real part (no op); complex: PyTorch's aten.real (which its
    # CompositeImplicit kernel decomposes; fiamma reports it as one view)
    if not input.dtype.is_complex:
        return input
    return c.prim(_ov("real"), (input,))


@_reg("imag", "Tensor.imag")
def _imag(c, input):
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return c.prim(_ov("imag"), (input,))


_view_op("view.default", "(Tensor(a) self, SymInt[] size) -> Tensor(a)",
         lambda self, size: self.view(*size))
_view_op("view.dtype", "(Tensor(a) self, ScalarType dtype) -> Tensor(a)",
         lambda self, dtype: self.view(dtype))
A.define("_unsafe_view.default", "(Tensor self, SymInt[] size) -> Tensor",
         lambda self, size: self.view(*size))
_view_op("t.default", "(Tensor(a) self) -> Tensor(a)", lambda self: self.t())
_view_op("transpose.int", "(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
         lambda self, dim0, dim1: self.transpose(dim0, dim1))
_view_op("permute.default", "(Tensor(a) self, int[] dims) -> Tensor(a)",
         lambda self, dims: self.permute(*dims))
_view_op("unsqueeze.default", "(Tensor(a) self, int dim) -> Tensor(a)",
         lambda self, dim: self.unsqueeze(dim))
_view_op("squeeze.default", "(Tensor(a) self) -> Tensor(a)", lambda self: self.squeeze())
_view_op("squeeze.dim", "(Tensor(a) self, int dim) -> Tensor(a)",
         lambda self, dim: self.squeeze(dim))
_view_op("squeeze.dims", "(Tensor(a) self, int[] dim) -> Tensor(a)",
         lambda self, dim: self.squeeze(tuple(dim)))
_view_op("expand.default", "(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
         lambda self, size, implicit=False: self.expand(*size))
_view_op("select.int", "(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
         lambda self, dim, index: self.select(dim, index))
_view_op("slice.Tensor", "(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, "
         "SymInt step=1) -> Tensor(a)",
         lambda self, dim=0, start=None, end=None, step=1: self.__getitem__(
             (slice(None),) * (dim % max(self.ndim, 1)) + (slice(start, end, step),)))
_view_op("as_strided.default", "(Tensor(a) self, SymInt[] size, SymInt[] stride, "
         "SymInt? storage_offset=None) -> Tensor(a)",
         lambda self, size, stride, storage_offset=None: self.as_strided(
             size, stride, storage_offset))
_view_op("split.Tensor", "(Tensor(a) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
         lambda self, split_size, dim=0: list(self.split(split_size, dim)))
A.define("cat.default", "(Tensor[] tensors, int dim=0) -> Tensor",
         lambda tensors, dim=0: fiamma.cat(tensors, dim))
A.define("stack.default", "(Tensor[] tensors, int dim=0) -> Tensor",
         lambda tensors, dim=0: fiamma.stack(tensors, dim))
A.define("index.Tensor", "(Tensor self, Tensor?[] indices) -> Tensor",
         lambda self, indices: self.__getitem__(
             tuple(slice(None) if i is None else i for i in indices)))


def _shape_arg(args, kw, name):
    if kw is not None:
        return tuple(kw)
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(args[0])
    return tuple(args)


@_reg("Tensor.view")
def _view(c, self, *shape, size=None, dtype=None):
    if dtype is not None or (len(shape) == 1 and isinstance(shape[0], fiamma.dtype)):
        return c.prim(_ov("view.dtype"), (self, dtype if dtype is not None else shape[0]))
    return c.prim(_ov("view"), (self, list(_shape_arg(shape, size, "view"))))


def _infer(shape, numel):
    shape = list(shape)
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = numel // known if known else 0
    return shape


def _viewable(t, shape):
    """Whether ``t.view(shape)`` works (no copy): asked of a meta tensor of its geometry."""
    if t.is_contiguous():
        return True
    probe = _empty_strided(tuple(t._shape), tuple(t._stride), dtype=t._dtype, device="meta")
    try:
        _quiet(Tensor.view, (probe, *shape), {})
    except RuntimeError:
        return False
    return True


@_reg("Tensor.reshape", "reshape")
def _reshape(c, self, *sizes, shape=None):
    shp = _infer(_shape_arg(sizes, shape, "reshape"), self.numel())
    if _viewable(self, shp):
        return self.view(shp)
    return _as("reshape", _ov("_unsafe_view"), (fiamma.clone(
        self, memory_format=importlib.import_module("fiamma._memory_format").contiguous_format),
        shp))


@_reg("Tensor.flatten", "flatten")
def _flatten(c, input, start_dim=0, end_dim=-1):
    nd = input.ndim
    if nd == 0:
        return input.reshape(1)
    s, e = start_dim % nd, end_dim % nd
    shp = list(input.shape)
    n = 1
    for d in shp[s:e + 1]:
        n *= d
    new = shp[:s] + [n] + shp[e + 1:]
    if new == shp:
        return input
    return input.reshape(new)


@_reg("Tensor.t", "t")
def _t(c, input):
    return c.prim(_ov("t"), (input,))


@_reg("Tensor.transpose", "transpose", "swapaxes", "swapdims", "Tensor.swapaxes",
      "Tensor.swapdims")
def _transpose(c, input, dim0, dim1):
    return c.prim(_ov("transpose.int"), (input, dim0, dim1))


@_reg("Tensor.permute", "permute")
def _permute(c, input, *dims, **kw):
    d = kw.get("dims")
    return c.prim(_ov("permute"), (input, list(_shape_arg(dims, d, "permute"))))


def _T(c, self):
    return c.prim(_ov("permute"), (self, list(range(self.ndim))[::-1]))


def _mT(c, self):
    return c.prim(_ov("transpose.int"), (self, -2, -1))


_H["Tensor.T"], _H["Tensor.mT"] = _T, _mT


@_reg("Tensor.unsqueeze", "unsqueeze")
def _unsqueeze(c, input, dim):
    return c.prim(_ov("unsqueeze"), (input, dim))


@_reg("Tensor.squeeze", "squeeze")
def _squeeze(c, input, dim=None):
    if dim is None:
        return c.prim(_ov("squeeze.default"), (input,))
    if isinstance(dim, int):
        return c.prim(_ov("squeeze.dim"), (input, dim))
    return c.prim(_ov("squeeze.dims"), (input, list(dim)))


A.define("squeeze_.dim", "(Tensor(a!) self, int dim) -> Tensor(a!)",
         lambda self, dim: self.squeeze_(dim))


@_reg("Tensor.squeeze_")
def _squeeze_(c, self, dim=None):
    if not isinstance(dim, int):
        _unsupported("squeeze_ without one int dim")
    return c.prim(_ov("squeeze_.dim"), (self, dim))


@_reg("Tensor.expand")
def _expand(c, self, *sizes, size=None):
    return c.prim(_ov("expand"), (self, list(_shape_arg(sizes, size, "expand"))))


@_reg("Tensor.expand_as", "expand_as")
def _expand_as(c, self, other):
    return self.expand(other.shape)


@_reg("Tensor.view_as", "view_as")
def _view_as(c, self, other):
    return self.view(other.shape)


@_reg("Tensor.reshape_as", "reshape_as")
def _reshape_as(c, self, other):
    return self.reshape(other.shape)


@_reg("Tensor.select", "select")
def _select(c, input, dim, index):
    return c.prim(_ov("select.int"), (input, dim, index))


@_reg("Tensor.as_strided", "as_strided")
def _as_strided(c, input, size, stride, storage_offset=None):
    return c.prim(_ov("as_strided"), (input, list(size), list(stride), storage_offset))


@_reg("Tensor.split", "split")
def _split(c, tensor, split_size_or_sections, dim=0):
    if not isinstance(split_size_or_sections, int):
        raise NotImplementedError("fiamma.split with a list of sizes under __torch_dispatch__")
    return tuple(c.prim(_ov("split.Tensor"), (tensor, split_size_or_sections, dim)))


@_reg("Tensor.chunk", "chunk")
def _chunk(c, input, chunks, dim=0):
    n = input.shape[dim]
    return fiamma.split(input, -(-n // chunks) if n else 1, dim)


@_reg("cat", "concat", "concatenate")
def _cat(c, tensors, dim=0, *, out=None):
    _no_out("cat", out)
    return c.prim(_ov("cat"), (list(tensors), dim))


@_reg("stack")
def _stack(c, tensors, dim=0, *, out=None):
    _no_out("stack", out)
    return c.prim(_ov("stack"), (list(tensors), dim))


_INT64_MAX = 9223372036854775807


@_reg("Tensor.__getitem__")
def _getitem(c, self, key):
    if not isinstance(key, tuple):
        key = (key,)
    if any(_is_t(k) or isinstance(k, list) for k in key):
        if all(_is_t(k) or k is None or k == slice(None) for k in key):
            idx = [k if _is_t(k) else None for k in key]
            return c.prim(_ov("index.Tensor"), (self, idx))
        raise NotImplementedError("fiamma.Tensor.__getitem__ mixing tensor indices with other "
                                  "indices under __torch_dispatch__")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    out, dim = self, 0
    for k in key:
        if k is Ellipsis:
            dim += self.ndim - n_real
        elif k is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(k, slice):
            if k != slice(None):  # PyTorch's form: start 0, end INT64_MAX, step 1 left out
                step = () if k.step in (None, 1) else (k.step,)
                out = c.prim(_ov("slice.Tensor"), (out, dim, 0 if k.start is None else k.start,
                                                   _INT64_MAX if k.stop is None else k.stop)
                             + step)
            dim += 1
        elif isinstance(k, int):
            out = out.select(dim, k)
        else:
            raise NotImplementedError(f"fiamma.Tensor.__getitem__ with {type(k).__name__} "
                                      "indices under __torch_dispatch__")
    return out if out is not self else c.prim(_ov("alias"), (self,))


# ---- creation from a tensor ---------------------------------------------------------------------

for _n in ("ones_like", "zeros_like", "empty_like", "rand_like", "randn_like"):
    _simple(_n, _n, "(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
            "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) "
            "-> Tensor")

    def _mk_like(n):
        def h(c, input, dtype=None, device=None, requires_grad=False, memory_format=None,
              **kw):
            kwa = {k: v for k, v in (("dtype", dtype), ("device", device),
                                     ("memory_format", memory_format)) if v is not None}
            out = c.prim(_ov(n), (input,), kwa)
            if requires_grad:
                out.requires_grad_(True)
            return out
        return h
    _H[_n] = _mk_like(_n)
_simple("full_like", "full_like", "(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=None, "
        "MemoryFormat? memory_format=None) -> Tensor")


@_reg("full_like")
def _full_like(c, input, fill_value, dtype=None, device=None, requires_grad=False, **kw):
    kwa = {k: v for k, v in (("dtype", dtype), ("device", device)) if v is not None}
    return c.prim(_ov("full_like"), (input, fill_value), kwa)


for _n in ("new_zeros", "new_ones", "new_empty"):
    A.define(f"{_n}.default", "(Tensor self, SymInt[] size, *, ScalarType? dtype=None, "
             "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
             (lambda n: lambda self, size, **kw: getattr(self, n)(size, **kw))(_n))

    def _mk_new(n):
        def h(c, self, *size, dtype=None, device=None, requires_grad=False, **kw):
            kwa = {k: v for k, v in (("dtype", dtype), ("device", device)) if v is not None}
            return c.prim(_ov(n), (self, list(_shape_arg(size, None, n))), kwa)
        return h
    _H["Tensor." + _n] = _mk_new(_n)


# ---- nn.functional ------------------------------------------------------------------------------

def _F():
    return importlib.import_module("fiamma.nn.functional")


_REDUCTION = {"none": 0, "mean": 1, "sum": 2}
_REDUCTION_NAME = {v: k for k, v in _REDUCTION.items()}

A.define("gelu.default", "(Tensor self, *, str approximate='none') -> Tensor",
         lambda self, approximate="none": _F().gelu(self, approximate=approximate))
A.define("silu.default", "(Tensor self) -> Tensor", lambda self: _F().silu(self))
A.define("leaky_relu.default", "(Tensor self, Scalar negative_slope=0.01) -> Tensor",
         lambda self, negative_slope=0.01: _F().leaky_relu(self, negative_slope))
A.define("_softmax.default", "(Tensor self, int dim, bool half_to_float) -> Tensor",
         lambda self, dim, half_to_float=False: _F().softmax(self, dim))
A.define("_log_softmax.default", "(Tensor self, int dim, bool half_to_float) -> Tensor",
         lambda self, dim, half_to_float=False: _F().log_softmax(self, dim))
A.define("mse_loss.default", "(Tensor self, Tensor target, int reduction=1) -> Tensor",
         lambda self, target, reduction=1: _F().mse_loss(
             self, target, reduction=_REDUCTION_NAME[reduction]))
A.define("nll_loss_forward.default", "(Tensor self, Tensor target, Tensor? weight, "
         "int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)",
         lambda self, target, weight, reduction, ignore_index: (
             _F().nll_loss(self, target, weight, ignore_index=ignore_index,
                           reduction=_REDUCTION_NAME[reduction]),
             fiamma.tensor(0.0)))
A.define("native_dropout.default", "(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
         lambda input, p, train: _dropout_pair(input, p))
A.define("convolution.default", "(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, "
         "SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
         "SymInt groups) -> Tensor",
         lambda input, weight, bias, stride, padding, dilation, transposed, output_padding,
         groups: _conv(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups))


def _dropout_pair(x, p):
    mask = fiamma.rand_like(x) >= p
    return x * mask / (1 - p), mask


def _conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    F = _F()
    n = weight.ndim - 2
    if transposed:
        return getattr(F, f"conv_transpose{n}d")(input, weight, bias, stride, padding,
                                                 output_padding, groups, dilation)
    return getattr(F, f"conv{n}d")(input, weight, bias, stride, padding, dilation, groups)


@_reg("F.relu")
def _frelu(c, input, inplace=False):
    return c.prim(_ov("relu_" if inplace else "relu"), (input,))


@_reg("F.gelu", "gelu")
def _gelu(c, input, approximate="none"):
    return c.prim(_ov("gelu"), (input,), {"approximate": approximate}
                  if approximate != "none" else {})


@_reg("F.silu", "silu")
def _silu(c, input, inplace=False):
    if inplace:
        raise NotImplementedError("F.silu(inplace=True) under __torch_dispatch__")
    return c.prim(_ov("silu"), (input,))


@_reg("F.leaky_relu", "leaky_relu")
def _leaky(c, input, negative_slope=0.01, inplace=False):
    if inplace:
        raise NotImplementedError("F.leaky_relu(inplace=True) under __torch_dispatch__")
    return c.prim(_ov("leaky_relu"), (input, negative_slope))


def _mk_softmax(op):
    def h(c, input, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            raise NotImplementedError(f"{op} without dim under __torch_dispatch__")
        if dtype is not None:
            input = input.to(dtype)
        return c.prim(_ov(op), (input, dim, False))
    return h


_H["F.softmax"] = _H["softmax"] = _H["Tensor.softmax"] = _mk_softmax("_softmax")
_H["F.log_softmax"] = _H["log_softmax"] = _H["Tensor.log_softmax"] = _mk_softmax("_log_softmax")


@_reg("F.mse_loss", "mse_loss")
def _mse(c, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    if size_average is not None or reduce is not None or weight is not None:
        raise NotImplementedError("F.mse_loss with size_average/reduce/weight under "
                                  "__torch_dispatch__")
    return c.prim(_ov("mse_loss"), (input, target, _REDUCTION[reduction]))


@_reg("F.nll_loss", "nll_loss")
def _nll(c, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
         reduction="mean"):
    if size_average is not None or reduce is not None or input.ndim > 2:
        raise NotImplementedError("F.nll_loss with size_average/reduce or spatial inputs under "
                                  "__torch_dispatch__")
    return c.prim(_ov("nll_loss_forward"),
                  (input, target, weight, _REDUCTION[reduction], ignore_index), pick=0)


@_reg("F.cross_entropy", "cross_entropy")
def _xent(c, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
          reduction="mean", label_smoothing=0.0):
    if label_smoothing or (_is_t(target) and target.dtype.is_floating_point):
        raise NotImplementedError("F.cross_entropy with label smoothing or probability targets "
                                  "under __torch_dispatch__")
    F = _F()
    return F.nll_loss(F.log_softmax(input, 1 if input.ndim > 1 else 0), target, weight,
                      ignore_index=ignore_index, reduction=reduction)


A.define("bernoulli_.float", "(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> "
         "Tensor(a!)", lambda self, p=0.5, generator=None: self.bernoulli_(p, generator=generator))
A.define("div_.Scalar", "(Tensor(a!) self, Scalar other) -> Tensor(a!)",
         lambda self, other: self.div_(other))
A.define("embedding.default", "(Tensor weight, Tensor indices, SymInt padding_idx=-1, "
         "bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
         lambda weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False:
         _F().embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                        scale_grad_by_freq=scale_grad_by_freq, sparse=sparse))


A.define("index_add.default", "(Tensor self, int dim, Tensor index, Tensor source, *, "
         "Scalar alpha=1) -> Tensor", lambda self, dim, index, source, alpha=1:
         self.index_add(dim, index, source, alpha=alpha))
A.define("index_add_.default", "(Tensor(a!) self, int dim, Tensor index, Tensor source, *, "
         "Scalar alpha=1) -> Tensor(a!)", lambda self, dim, index, source, alpha=1:
         self.index_add_(dim, index, source, alpha=alpha))


def _mk_index_add(qual):
    def h(c, self, dim, index, source, *, alpha=1, out=None):
        _no_out(qual, out)
        return c.prim(_ov(qual), (self, dim, index, source), {"alpha": alpha} if alpha != 1
                      else {})
    return h


_H["index_add"] = _H["Tensor.index_add"] = _mk_index_add("index_add")
_H["Tensor.index_add_"] = _mk_index_add("index_add_")


@_reg("Tensor.bernoulli_")
def _bernoulli_(c, self, p=0.5, *, generator=None):
    if _is_t(p):
        _unsupported("bernoulli_ with a tensor of probabilities")
    return c.prim(_ov("bernoulli_.float"), (self, p),
                  {"generator": generator} if generator is not None else {})


@_reg("F.dropout", "dropout")
def _fdropout(c, input, p=0.5, training=True, inplace=False):
    """PyTorch's decomposition: a Bernoulli mask scaled by 1/(1-p), multiplied in."""
    if not training or p == 0:
        return input
    mask = fiamma.empty_like(input)
    if p == 1:
        mask = mask.zero_()
    else:
        mask = _as("bernoulli_", _ov("bernoulli_.float"), (mask, 1 - p))
        mask = _as("div_", _ov("div_.Scalar"), (mask, 1 - p))
    return input.mul_(mask) if inplace else input * mask


@_reg("F.embedding", "embedding")
def _fembedding(c, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        _unsupported("F.embedding(max_norm=)")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    return c.prim(_ov("embedding"), (weight, input) + (
        (padding_idx,) if padding_idx is not None or scale_grad_by_freq or sparse else ()) + (
        (scale_grad_by_freq,) if scale_grad_by_freq or sparse else ()) + (
        (sparse,) if sparse else ()))


def _tuple(v, n):
    return list(v) if isinstance(v, (tuple, list)) else [v] * n


def _mk_conv(n):
    def h(c, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):
            raise NotImplementedError(f"F.conv{n}d(padding={padding!r}) under "
                                      "__torch_dispatch__")
        return c.prim(_ov("convolution"), (input, weight, bias, _tuple(stride, n),
                                           _tuple(padding, n), _tuple(dilation, n), False,
                                           [0] * n, groups))
    return h


for _k in (1, 2, 3):
    _H[f"F.conv{_k}d"] = _H[f"conv{_k}d"] = _mk_conv(_k)


# ---- normalisation, pooling, scans, norms, FFTs -------------------------------------------------

def _with_saved(fn, args, names):
    """``fn(*args)`` and the tensors its autograd record keeps under ``names`` (what the
    native_*_norm ops return beside the output: mean and inverse std), or empty tensors
    without the autograd package."""
    x = args[0]
    try:
        G.autograd_module()
    except ImportError:
        return (fn(*args),) + tuple(fiamma.empty(0, dtype=x.dtype) for _ in names)
    cap = _Capture()
    saved = G._recorder, G._record_new
    xs = x.detach()
    prev = G.set_grad_enabled_flag(True)
    G._recorder, G._record_new = cap, cap.record_new
    try:
        xs.requires_grad = True
        y = fn(xs, *args[1:])
    finally:
        G._recorder, G._record_new = saved
        G.set_grad_enabled_flag(prev)
    kw = cap.records[-1][3]
    return (y.detach(),) + tuple(kw[n] for n in names)


def _fmask(mask):
    return tuple(bool(m) for m in mask)


A.define("native_batch_norm.default", "(Tensor input, Tensor? weight, Tensor? bias, "
         "Tensor? running_mean, Tensor? running_var, bool training, float momentum, "
         "float eps) -> (Tensor, Tensor, Tensor)",
         lambda input, weight, bias, running_mean, running_var, training, momentum, eps:
         _with_saved(lambda x, *a: fiamma.batch_norm(x, *a), (
             input, running_mean, running_var, weight, bias, training, momentum, eps),
             ("mean", "invstd")))
A.define("native_batch_norm_backward.default", "(Tensor grad_out, Tensor input, Tensor? weight, "
         "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, "
         "bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
         lambda grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
         train, eps, output_mask: fiamma.batch_norm_backward(
             grad_out, input, weight, save_mean, save_invstd, train, eps,
             output_mask=_fmask(output_mask)))
A.define("native_layer_norm.default", "(Tensor input, SymInt[] normalized_shape, Tensor? weight, "
         "Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
         lambda input, normalized_shape, weight, bias, eps: _with_saved(
             fiamma.layer_norm, (input, normalized_shape, weight, bias, eps), ("mean", "rstd")))
A.define("native_layer_norm_backward.default", "(Tensor grad_out, Tensor input, "
         "SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, "
         "bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
         lambda grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask:
         fiamma.layer_norm_backward(grad_out, input, normalized_shape, weight, mean, rstd,
                                    output_mask=_fmask(output_mask)))
A.define("native_group_norm.default", "(Tensor input, Tensor? weight, Tensor? bias, SymInt N, "
         "SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)",
         lambda input, weight, bias, N, C, HxW, group, eps: _with_saved(
             fiamma.group_norm, (input, group, weight, bias, eps), ("mean", "rstd")))
A.define("native_group_norm_backward.default", "(Tensor grad_out, Tensor input, Tensor mean, "
         "Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, "
         "bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
         lambda grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask:
         fiamma.group_norm_backward(grad_out, input, group, weight, mean, rstd,
                                    output_mask=_fmask(output_mask)))


@_reg("batch_norm", "F.batch_norm")
def _batch_norm(c, input, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    if training:  # F.batch_norm's own checks (before PyTorch's dispatcher)
        shape = tuple(input.shape)
        n = shape[0] if shape else 0
        for d in shape[2:]:
            n *= d
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(shape)}")
    if state.modes:  # PyTorch's CPU batch norm makes an empty reserve buffer first
        fiamma.empty((0,), dtype=fiamma.uint8)
    return c.prim(_ov("native_batch_norm"), (input, weight, bias, running_mean, running_var,
                                             bool(training), momentum, eps),
                  pick=0, saved={"mean": 1, "invstd": 2})


@_reg("layer_norm", "F.layer_norm")
def _layer_norm(c, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return c.prim(_ov("native_layer_norm"), (input, ns, weight, bias, eps), pick=0,
                  saved={"mean": 1, "rstd": 2})


@_reg("group_norm", "F.group_norm")
def _group_norm(c, input, num_groups, weight=None, bias=None, eps=1e-5):
    shape = tuple(input.shape)
    hw = 1
    for n in shape[2:]:
        hw *= n
    return c.prim(_ov("native_group_norm"), (input, weight, bias, shape[0], shape[1], hw,
                                             num_groups, eps), pick=0,
                  saved={"mean": 1, "rstd": 2})


@_reg("batch_norm_backward")
def _batch_norm_bw(c, grad_output, input, weight, mean, invstd, training, eps=1e-5,
                   output_mask=(True, True, True)):
    return c.prim(_ov("native_batch_norm_backward"), (
        grad_output, input, weight, None, None, mean, invstd, training, eps, list(output_mask)))


@_reg("layer_norm_backward")
def _layer_norm_bw(c, grad_output, input, normalized_shape, weight, mean, rstd, eps=1e-5,
                   output_mask=(True, True, True)):
    return c.prim(_ov("native_layer_norm_backward"), (
        grad_output, input, list(normalized_shape), mean, rstd, weight, None,
        list(output_mask)))


@_reg("group_norm_backward")
def _group_norm_bw(c, grad_output, input, num_groups, weight, mean, rstd, eps=1e-5,
                   output_mask=(True, True, True)):
    shape = tuple(input.shape)
    hw = 1
    for n in shape[2:]:
        hw *= n
    return c.prim(_ov("native_group_norm_backward"), (
        grad_output, input, mean, rstd, weight, shape[0], shape[1], hw, num_groups,
        list(output_mask)))


def _strip(args, defaults):
    """``args`` without the trailing ones equal to their defaults (``defaults`` aligned to the
    end of args), as PyTorch's dispatcher shows them."""
    args = list(args)
    n = len(args)
    k = len(defaults)
    while args and len(args) > n - k and args[-1] == defaults[len(args) - 1 - (n - k)]:
        args.pop()
    return tuple(args)


def _pool_args(n, kernel_size, stride, padding):
    k = _tuple(kernel_size, n)
    s = [] if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _tuple(stride, n)
    return k, s, _tuple(padding, n)


A.define("max_pool2d_with_indices.default", "(Tensor self, int[2] kernel_size, "
         "int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> "
         "(Tensor, Tensor)", lambda self, kernel_size, stride=(), padding=0, dilation=1,
         ceil_mode=False: fiamma.max_pool2d(self, kernel_size, list(stride) or None, padding,
                                            dilation, ceil_mode, True))
A.define("max_pool2d_with_indices_backward.default", "(Tensor grad_output, Tensor self, "
         "int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, "
         "Tensor indices) -> Tensor", lambda grad_output, self, kernel_size, stride, padding,
         dilation, ceil_mode, indices: fiamma.max_pool_backward(grad_output, indices,
                                                                tuple(self.shape[-2:])))
A.define("avg_pool2d.default", "(Tensor self, int[2] kernel_size, int[2] stride=[], "
         "int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, "
         "int? divisor_override=None) -> Tensor",
         lambda self, kernel_size, stride=(), padding=0, ceil_mode=False,
         count_include_pad=True, divisor_override=None: fiamma.avg_pool2d(
             self, kernel_size, list(stride) or None, padding, ceil_mode, count_include_pad,
             divisor_override))
A.define("avg_pool2d_backward.default", "(Tensor grad_output, Tensor self, int[2] kernel_size, "
         "int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, "
         "int? divisor_override) -> Tensor",
         lambda grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
         divisor_override: fiamma.avg_pool_backward(
             grad_output, tuple(self.shape[-2:]), tuple(kernel_size),
             tuple(stride) or tuple(kernel_size), tuple(padding), ceil_mode, count_include_pad,
             divisor_override))
A.define("_adaptive_avg_pool2d.default", "(Tensor self, SymInt[2] output_size) -> Tensor",
         lambda self, output_size: fiamma.adaptive_avg_pool2d(self, tuple(output_size)))
A.define("_adaptive_avg_pool2d_backward.default", "(Tensor grad_output, Tensor self) -> Tensor",
         lambda grad_output, self: fiamma.adaptive_avg_pool_backward(grad_output,
                                                                     tuple(self.shape[-2:])))


@_reg("max_pool2d", "F.max_pool2d")
def _max_pool2d(c, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    k, s, p = _pool_args(2, kernel_size, stride, padding)
    args = _strip((input, k, s, p, _tuple(dilation, 2), bool(ceil_mode)),
                  ([], [0, 0], [1, 1], False))
    return c.prim(_ov("max_pool2d_with_indices"), args,
                  pick=None if return_indices else 0)


@_reg("max_pool2d_with_indices", "F.max_pool2d_with_indices")
def _max_pool2d_wi(c, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                   return_indices=False):
    return _max_pool2d(c, input, kernel_size, stride, padding, dilation, ceil_mode, True)


@_reg("avg_pool2d", "F.avg_pool2d")
def _avg_pool2d(c, input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    k, s, p = _pool_args(2, kernel_size, stride, padding)
    args = _strip((input, k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override),
                  ([], [0, 0], False, True, None))
    return c.prim(_ov("avg_pool2d"), args)


@_reg("adaptive_avg_pool2d", "F.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(c, input, output_size):
    o = _tuple(output_size, 2)
    o = [input.shape[-2 + i] if v is None else int(v) for i, v in enumerate(o)]
    if o == [1, 1]:  # PyTorch: a mean over the plane
        return fiamma.mean(input, [-1, -2], True)
    return c.prim(_ov("_adaptive_avg_pool2d"), (input, o))


def _one(v, name):
    if isinstance(v, (list, tuple)):
        if len(v) != 1:
            raise ValueError(f"{name}: expected a single int or a 1-tuple, got {v!r}")
        return int(v[0])
    return int(v)


@_reg("max_pool1d", "F.max_pool1d")
def _max_pool1d(c, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    """PyTorch's decomposition: a 2-d pool of height 1 between unsqueeze and squeezes."""
    k = _one(kernel_size, "max_pool1d")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _one(stride, "max_pool1d")
    v, i = fiamma.max_pool2d(fiamma.unsqueeze(input, -2), [1, k], [1, s],
                             [0, _one(padding, "max_pool1d")], [1, _one(dilation, "max_pool1d")],
                             ceil_mode, True)
    v, i = fiamma.squeeze(v, -2), fiamma.squeeze(i, -2)
    return (v, i) if return_indices else v


@_reg("max_pool1d_with_indices", "F.max_pool1d_with_indices")
def _max_pool1d_wi(c, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                   return_indices=False):
    return _max_pool1d(c, input, kernel_size, stride, padding, dilation, ceil_mode, True)


@_reg("avg_pool1d", "F.avg_pool1d")
def _avg_pool1d(c, input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True):
    k = _one(kernel_size, "avg_pool1d")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _one(stride, "avg_pool1d")
    y = fiamma.avg_pool2d(fiamma.unsqueeze(input, -2), [1, k], [1, s],
                          [0, _one(padding, "avg_pool1d")], ceil_mode, count_include_pad)
    return fiamma.squeeze(y, -2)


@_reg("adaptive_avg_pool1d", "F.adaptive_avg_pool1d")
def _adaptive_avg_pool1d(c, input, output_size):
    y = fiamma.adaptive_avg_pool2d(fiamma.unsqueeze(input, -2),
                                   (1, _one(output_size, "adaptive_avg_pool1d")))
    return fiamma.squeeze(y, -2)


@_reg("max_pool_backward")
def _max_pool_bw(c, grad_output, indices, input_size):
    if len(input_size) != 2:
        _unsupported(f"the derivative of a {len(input_size)}-d max pool")
    self = fiamma.empty(tuple(grad_output.shape[:-2]) + tuple(input_size),
                        dtype=grad_output.dtype, device="meta")
    # fiamma's derivative keeps the indices, not the window: the window arguments are
    # PyTorch's defaults
    return c.prim(_ov("max_pool2d_with_indices_backward"), (
        grad_output, self, [1, 1], [], [0, 0], [1, 1], False, indices))


@_reg("avg_pool_backward")
def _avg_pool_bw(c, grad_output, input_size, kernel_size, stride, padding, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
    if len(input_size) != 2:
        _unsupported(f"the derivative of a {len(input_size)}-d average pool")
    self = fiamma.empty(tuple(grad_output.shape[:-2]) + tuple(input_size),
                        dtype=grad_output.dtype, device="meta")
    return c.prim(_ov("avg_pool2d_backward"), (
        grad_output, self, list(kernel_size), list(stride), list(padding), bool(ceil_mode),
        bool(count_include_pad), divisor_override))


@_reg("adaptive_avg_pool_backward")
def _adaptive_avg_bw(c, grad_output, input_size):
    if len(input_size) != 2:
        _unsupported(f"the derivative of a {len(input_size)}-d adaptive average pool")
    self = fiamma.empty(tuple(grad_output.shape[:-2]) + tuple(input_size),
                        dtype=grad_output.dtype, device="meta")
    return c.prim(_ov("_adaptive_avg_pool2d_backward"), (grad_output, self))


for _n in ("cumsum", "cumprod"):
    A.define(f"{_n}.default", "(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
             (lambda n: lambda self, dim, dtype=None: getattr(fiamma, n)(self, dim,
                                                                        dtype=dtype))(_n))

    def _mk_scan(op):
        def h(c, input, dim, *, dtype=None, out=None):
            _no_out(op, out)
            return c.prim(_ov(op), (input, dim), {"dtype": dtype} if dtype is not None else {})
        return h

    _H[_n] = _H["Tensor." + _n] = _mk_scan(_n)

A.define("flip.default", "(Tensor self, int[] dims) -> Tensor",
         lambda self, dims: fiamma.flip(self, dims))


@_reg("flip", "Tensor.flip")
def _flip(c, input, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return c.prim(_ov("flip"), (input, [int(d) for d in dims]))


A.define("linalg_vector_norm.default", "(Tensor self, Scalar ord=2, int[1]? dim=None, "
         "bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
         lambda self, ord=2, dim=None, keepdim=False, dtype=None: importlib.import_module(
             "fiamma.linalg").vector_norm(self, ord, dim, keepdim, dtype=dtype))


def _vnorm(c, x, ord, dim, keepdim, dtype, strip_ord=True):
    if dim is not None:
        dim = [dim] if isinstance(dim, int) else list(dim)
    args = (x, ord, dim, bool(keepdim))
    args = _strip(args, (2, None, False)) if strip_ord else _strip(args, (None, False))
    return c.prim(_ov("linalg_vector_norm"), args, {"dtype": dtype} if dtype is not None
                  else {})


@_reg("linalg.vector_norm")
def _linalg_vector_norm(c, x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    _no_out("linalg.vector_norm", out)
    return _vnorm(c, x, ord, dim, keepdim, dtype)


@_reg("linalg.norm")
def _linalg_norm(c, A_, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    _no_out("linalg.norm", out)
    if ord is not None or (dim is not None and not isinstance(dim, int) and len(dim) != 1):
        _unsupported("linalg.norm with ord= or a matrix norm")
    return _vnorm(c, A_, 2.0, dim, keepdim, dtype, strip_ord=False)


@_reg("norm", "Tensor.norm")
def _tnorm(c, input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    _no_out("norm", out)
    if p == "fro":
        if dim is not None and not isinstance(dim, int) and len(dim) > 2:
            _unsupported("norm('fro') over more than two dims")
        p = 2
    if isinstance(p, str):
        _unsupported(f"norm(p={p!r})")
    return _vnorm(c, input, p, dim, keepdim, dtype)


_FFT_NORM = {None: 0, "backward": 0, "ortho": 1, "forward": 2}  # forward transforms
_IFFT_NORM = {None: 2, "backward": 2, "ortho": 1, "forward": 0}  # inverse ones
_NORM_NAME_FWD = {0: "backward", 1: "ortho", 2: "forward"}
_NORM_NAME_INV = {2: "backward", 1: "ortho", 0: "forward"}


def _fftm():
    return importlib.import_module("fiamma.fft")


A.define("_fft_r2c.default", "(Tensor self, int[] dim, int normalization, bool onesided) -> "
         "Tensor", lambda self, dim, normalization, onesided: (
             _fftm().rfftn if onesided else _fftm().fftn)(
                 self, dim=list(dim), norm=_NORM_NAME_FWD[normalization]))
A.define("_fft_c2c.default", "(Tensor self, SymInt[] dim, int normalization, bool forward) -> "
         "Tensor", lambda self, dim, normalization, forward: (
             _fftm().fftn(self, dim=list(dim), norm=_NORM_NAME_FWD[normalization]) if forward
             else _fftm().ifftn(self, dim=list(dim), norm=_NORM_NAME_INV[normalization])))
A.define("_fft_c2r.default", "(Tensor self, int[] dim, int normalization, SymInt last_dim_size)"
         " -> Tensor", lambda self, dim, normalization, last_dim_size: _fftm().irfftn(
             self, s=[self.shape[d] for d in dim[:-1]] + [last_dim_size], dim=list(dim),
             norm=_NORM_NAME_INV[normalization]))


def _fft_dim(x, n, dim, what):
    d = dim + x.ndim if dim < 0 else dim
    if n is not None and n != x.shape[d]:
        _unsupported(f"{what} with n= other than the input's size")
    return d


@_reg("fft.rfft")
def _rfft(c, input, n=None, dim=-1, norm=None, *, out=None):
    _no_out("fft.rfft", out)
    d = _fft_dim(input, n, dim, "fft.rfft")
    return c.prim(_ov("_fft_r2c"), (input, [d], _FFT_NORM[norm], True))


@_reg("fft.fft")
def _fft(c, input, n=None, dim=-1, norm=None, *, out=None):
    _no_out("fft.fft", out)
    d = _fft_dim(input, n, dim, "fft.fft")
    if input.dtype.is_complex:
        return c.prim(_ov("_fft_c2c"), (input, [d], _FFT_NORM[norm], True))
    return c.prim(_ov("_fft_r2c"), (input, [d], _FFT_NORM[norm], False))


@_reg("fft.ifft")
def _ifft(c, input, n=None, dim=-1, norm=None, *, out=None):
    _no_out("fft.ifft", out)
    d = _fft_dim(input, n, dim, "fft.ifft")
    if not input.dtype.is_complex:
        _unsupported("fft.ifft of a real tensor")
    return c.prim(_ov("_fft_c2c"), (input, [d], _IFFT_NORM[norm], False))


@_reg("fft.irfft")
def _irfft(c, input, n=None, dim=-1, norm=None, *, out=None):
    _no_out("fft.irfft", out)
    d = dim + input.ndim if dim < 0 else dim
    last = 2 * (input.shape[d] - 1) if n is None else int(n)
    if n is not None and n // 2 + 1 != input.shape[d]:
        _unsupported("fft.irfft with n= that pads or trims the input")
    return c.prim(_ov("_fft_c2r"), (input, [d], _IFFT_NORM[norm], last))


def _transform_dims(x, s, dim, two):
    """The transform dims of an n-d transform (PyTorch's defaults: all dims, the last len(s),
    or the last two for the 2-d forms)."""
    nd = x.ndim
    if dim is None:
        k = 2 if two and s is None else (nd if s is None else len(s))
        return list(range(nd - k, nd))
    return [d + nd if d < 0 else d for d in ((dim,) if isinstance(dim, int) else dim)]


def _fftn_dims(x, s, dim, what, two):
    """:func:`_transform_dims`; ``s`` other than the sizes there is unsupported."""
    dims = _transform_dims(x, s, dim, two)
    if s is not None and [int(v) for v in s] != [x.shape[d] for d in dims]:
        _unsupported(f"{what} with s= other than the input's sizes")
    return dims


def _fftn_like(name, inverse, two):
    def fn(c, input, s=None, dim=(-2, -1) if two else None, norm=None, *, out=None):
        _no_out(name, out)
        dims = _fftn_dims(input, s, dim, name, two)
        if input.dtype.is_complex:
            return c.prim(_ov("_fft_c2c"), (input, dims, (_IFFT_NORM if inverse else
                                                          _FFT_NORM)[norm], not inverse))
        if inverse:
            _unsupported(f"{name} of a real tensor")
        return c.prim(_ov("_fft_r2c"), (input, dims, _FFT_NORM[norm], False))
    return fn


def _rfftn_like(name, two):
    def fn(c, input, s=None, dim=(-2, -1) if two else None, norm=None, *, out=None):
        _no_out(name, out)
        return c.prim(_ov("_fft_r2c"), (input, _fftn_dims(input, s, dim, name, two),
                                        _FFT_NORM[norm], True))
    return fn


def _irfftn_like(name, two):
    def fn(c, input, s=None, dim=(-2, -1) if two else None, norm=None, *, out=None):
        _no_out(name, out)
        dims = _transform_dims(input, s, dim, two)
        last = 2 * (input.shape[dims[-1]] - 1)
        if s is not None:
            s = [int(v) for v in s]
            if s[:-1] != [input.shape[d] for d in dims[:-1]] or \
                    s[-1] // 2 + 1 != input.shape[dims[-1]]:
                _unsupported(f"{name} with s= that pads or trims the input")
            last = s[-1]
        return c.prim(_ov("_fft_c2r"), (input, dims, _IFFT_NORM[norm], last))
    return fn


for _two, _sfx in ((False, "n"), (True, "2")):
    _reg(f"fft.fft{_sfx}")(_fftn_like(f"fft.fft{_sfx}", False, _two))
    _reg(f"fft.ifft{_sfx}")(_fftn_like(f"fft.ifft{_sfx}", True, _two))
    _reg(f"fft.rfft{_sfx}")(_rfftn_like(f"fft.rfft{_sfx}", _two))
    _reg(f"fft.irfft{_sfx}")(_irfftn_like(f"fft.irfft{_sfx}", _two))
del _two, _sfx


# ---- linalg decompositions (forward; their autograd records are not computable on meta) ------

def _lin():
    return importlib.import_module("fiamma.linalg")


def _info(A):
    return fiamma.zeros(tuple(A.shape[:-2]), dtype=fiamma.int32)


A.define("linalg_inv_ex.default", "(Tensor A, *, bool check_errors=False) -> (Tensor inverse, "
         "Tensor info)", lambda A_, check_errors=False: (_lin().inv(A_), _info(A_)))
A.define("linalg_cholesky_ex.default", "(Tensor self, *, bool upper=False, "
         "bool check_errors=False) -> (Tensor L, Tensor info)",
         lambda self, upper=False, check_errors=False: (_lin().cholesky(self, upper=upper),
                                                        _info(self)))
A.define("_linalg_check_errors.default", "(Tensor info, str api_name, *, bool is_matrix) -> ()",
         lambda info, api_name, is_matrix: None)  # fiamma's ops raise themselves
A.define("linalg_qr.default", "(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)",
         lambda A_, mode="reduced": tuple(_lin().qr(A_, mode)))
A.define("_linalg_eigh.default", "(Tensor A, str UPLO='L', bool compute_v=True) -> "
         "(Tensor eigenvalues, Tensor eigenvectors)",
         lambda A_, UPLO="L", compute_v=True: tuple(_lin().eigh(A_, UPLO)))
A.define("_linalg_svd.default", "(Tensor A, bool full_matrices=False, bool compute_uv=True, *, "
         "str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)",
         lambda A_, full_matrices=False, compute_uv=True, driver=None: tuple(
             _lin().svd(A_, full_matrices)))


def _checked(c, op, api, A_, kwargs=None):
    r = c.prim(_ov(op), (A_,), kwargs, pick=0)
    redispatch(_ov("_linalg_check_errors"), (c.full[1], api), {"is_matrix": A_.ndim == 2})
    return r


@_reg("linalg.inv", "inverse", "Tensor.inverse")
def _linalg_inv(c, A_, *, out=None):
    _no_out("linalg.inv", out)
    return _checked(c, "linalg_inv_ex", "linalg.inv", A_)


@_reg("linalg.cholesky")
def _linalg_cholesky(c, A_, *, upper=False, out=None):
    _no_out("linalg.cholesky", out)
    return _checked(c, "linalg_cholesky_ex", "linalg.cholesky", A_,
                    {"upper": True} if upper else None)


@_reg("linalg.qr")
def _linalg_qr(c, A_, mode="reduced", *, out=None):
    _no_out("linalg.qr", out)
    return c.prim(_ov("linalg_qr"), (A_,) if mode == "reduced" else (A_, mode))


@_reg("linalg.eigh")
def _linalg_eigh(c, A_, UPLO="L", *, out=None):
    _no_out("linalg.eigh", out)
    return c.prim(_ov("_linalg_eigh"), (A_,) if UPLO == "L" else (A_, UPLO))


@_reg("linalg.eigvalsh")
def _linalg_eigvalsh(c, A_, UPLO="L", *, out=None):
    _no_out("linalg.eigvalsh", out)
    return c.prim(_ov("_linalg_eigh"), (A_,) if UPLO == "L" else (A_, UPLO), pick=0)


@_reg("linalg.svd")
def _linalg_svd(c, A_, full_matrices=True, *, driver=None, out=None):
    _no_out("linalg.svd", out)
    if driver is not None:
        _unsupported("linalg.svd(driver=)")
    return c.prim(_ov("_linalg_svd"), (A_, True) if full_matrices else (A_,))


@_reg("linalg.svdvals")
def _linalg_svdvals(c, A_, *, driver=None, out=None):
    _no_out("linalg.svdvals", out)
    if driver is not None:
        _unsupported("linalg.svdvals(driver=)")
    return c.prim(_ov("_linalg_svd"), (A_,), pick=1)


# the other linalg functions: PyTorch's public ATen ops of the same arguments (fiamma reports the
# op its function is, not the _ex / LU-returning forms PyTorch's kernels decompose into)
_LINALG_SIMPLE = (
    # (fiamma function, keys, ATen qualified name, schema)
    ("det", ("linalg.det", "det", "Tensor.det"), "linalg_det.default", "(Tensor A) -> Tensor"),
    ("slogdet", ("linalg.slogdet", "slogdet", "Tensor.slogdet"), "linalg_slogdet.default",
     "(Tensor A) -> (Tensor sign, Tensor logabsdet)"),
    ("solve", ("linalg.solve",), "linalg_solve.default",
     "(Tensor A, Tensor B, *, bool left=True) -> Tensor"),
    ("solve_triangular", ("linalg.solve_triangular",), "linalg_solve_triangular.default",
     "(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> "
     "Tensor"),
    ("matrix_exp", ("linalg.matrix_exp", "matrix_exp", "Tensor.matrix_exp"),
     "linalg_matrix_exp.default", "(Tensor self) -> Tensor"),
    ("eig", ("linalg.eig",), "linalg_eig.default",
     "(Tensor self) -> (Tensor eigenvalues, Tensor eigenvectors)"),
    ("eigvals", ("linalg.eigvals",), "linalg_eigvals.default", "(Tensor self) -> Tensor"),
    ("lu", ("linalg.lu",), "linalg_lu.default",
     "(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"),
    ("lu_factor", ("linalg.lu_factor",), "linalg_lu_factor.default",
     "(Tensor A, *, bool pivot=True) -> (Tensor LU, Tensor pivots)"),
    ("lu_solve", ("linalg.lu_solve",), "linalg_lu_solve.default",
     "(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"),
    ("householder_product", ("linalg.householder_product", "orgqr", "Tensor.orgqr"),
     "linalg_householder_product.default", "(Tensor input, Tensor tau) -> Tensor"),
    ("lstsq", ("linalg.lstsq",), "linalg_lstsq.default",
     "(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> (Tensor solution, "
     "Tensor residuals, Tensor rank, Tensor singular_values)"),
)


def _linalg_simple(fname, keys, qual):
    A.define(qual, _SCHEMAS[qual], lambda *a, **k: getattr(_lin(), fname)(*a, **k))

    def h(c, *args, out=None, **kwargs):
        _no_out("linalg." + fname, out)
        return c.prim(_ov(qual), args, kwargs)
    _reg(*keys)(h)


_SCHEMAS = {q: sch for _f, _k, q, sch in _LINALG_SIMPLE}
for _f, _k, _q, _sch in _LINALG_SIMPLE:
    _linalg_simple(_f, _k, _q)
del _f, _k, _q, _sch
@_reg("linalg.inv_ex")
def _linalg_inv_ex(c, A_, *, check_errors=False, out=None):
    _no_out("linalg.inv_ex", out)
    return c.prim(_ov("linalg_inv_ex"), (A_,), {"check_errors": True} if check_errors else None)


A.define("lu_unpack.default", "(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, "
         "bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)",
         lambda LU_data, LU_pivots, unpack_data=True, unpack_pivots=True: fiamma.lu_unpack(
             LU_data, LU_pivots, unpack_data, unpack_pivots))


@_reg("lu_unpack")
def _lu_unpack(c, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    _no_out("lu_unpack", out)
    return c.prim(_ov("lu_unpack"), (LU_data, LU_pivots, unpack_data, unpack_pivots))


for _n in ("tril", "triu"):
    _simple(_n, f"{_n}.default", "(Tensor self, int diagonal=0) -> Tensor")
    _simple(_n + "_", f"{_n}_.default", "(Tensor(a!) self, int diagonal=0) -> Tensor(a!)",
            method=_n + "_")

    def _tri(op):
        def h(c, input, diagonal=0, *, out=None):
            _no_out(op, out)
            return c.prim(_ov(op), (input,) if diagonal == 0 else (input, diagonal))

        def hi(c, input, diagonal=0):
            return c.prim(_ov(op + "_"), (input,) if diagonal == 0 else (input, diagonal))
        return h, hi

    _h, _hi = _tri(_n)
    _reg(_n, "Tensor." + _n)(_h)
    _reg(_n + "_", "Tensor." + _n + "_")(_hi)
del _n, _h, _hi


A.define("cholesky_solve.default", "(Tensor self, Tensor input2, bool upper=False) -> Tensor",
         lambda self, input2, upper=False: fiamma.cholesky_solve(self, input2, upper))
A.define("cholesky_inverse.default", "(Tensor self, bool upper=False) -> Tensor",
         lambda self, upper=False: fiamma.cholesky_inverse(self, upper))


@_reg("cholesky_solve", "Tensor.cholesky_solve")
def _cholesky_solve(c, input, input2, upper=False, *, out=None):
    _no_out("cholesky_solve", out)
    return c.prim(_ov("cholesky_solve"), (input, input2) + ((True,) if upper else ()))


@_reg("cholesky_inverse", "Tensor.cholesky_inverse")
def _cholesky_inverse(c, input, upper=False, *, out=None):
    _no_out("cholesky_inverse", out)
    return c.prim(_ov("cholesky_inverse"), (input,) + ((True,) if upper else ()))


# ---- the table ----------------------------------------------------------------------------------

def aten_names():
    """Every ATen overload fiamma reports (``aten.add.Tensor``...), sorted."""
    return sorted(str(o) for p in A.PACKETS.values() for o in p._overloads.values())


@_reg("tensor_repr", "Tensor.__str__", "Tensor.__repr__")
def _repr(c, self, *args, **kwargs):
    # Tensor's repr (a subclass's own __repr__ is Python's business): a wrapper without
    # tensor_contents has no values to show
    if "_fm_device" in self.__dict__ and kwargs.get("tensor_contents") is None:
        return f"{type(self).__name__}(size={tuple(self.shape)}, dtype={self.dtype}, " \
               f"device='{self.device}')"
    return _quiet(c.impl, (self,) + args, kwargs)


# ---- what backward formulas call ----------------------------------------------------------------

A.define("threshold_backward.default", "(Tensor grad_output, Tensor self, Scalar threshold) -> "
         "Tensor", lambda grad_output, self, threshold: fiamma.relu_backward(grad_output, self)
         if threshold == 0 else _unsupported("threshold_backward with a nonzero threshold"))
A.define("gelu_backward.default", "(Tensor grad_output, Tensor self, *, str approximate='none') "
         "-> Tensor", lambda grad_output, self, approximate="none": fiamma.gelu_backward(
             grad_output, self, approximate))
A.define("sigmoid_backward.default", "(Tensor grad_output, Tensor output) -> Tensor",
         lambda grad_output, output: _fused().activation_backward("sigmoid", grad_output,
                                                                  output))
A.define("tanh_backward.default", "(Tensor grad_output, Tensor output) -> Tensor",
         lambda grad_output, output: _fused().activation_backward("tanh", grad_output, output))
A.define("mse_loss_backward.default", "(Tensor grad_output, Tensor self, Tensor target, "
         "int reduction) -> Tensor", lambda grad_output, self, target, reduction:
         _fused().loss_backward("mse_loss", grad_output, self, target,
                                reduction=_REDUCTION_NAME[reduction], needs=(True, False))[0])
A.define("convolution_backward.default", "(Tensor grad_output, Tensor input, Tensor weight, "
         "SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, "
         "bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> "
         "(Tensor, Tensor, Tensor)", lambda grad_output, input, weight, bias_sizes, stride,
         padding, dilation, transposed, output_padding, groups, output_mask: (
             None, fiamma.convolution_backward_weight(input, grad_output, tuple(weight.shape),
                                                      stride, padding, dilation, groups)
             if not transposed else fiamma.convolution_backward_weight(
                 grad_output, input, tuple(weight.shape), stride, padding, dilation, groups),
             None))
A.define("scatter.src", "(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
         lambda self, dim, index, src: self.scatter(dim, index, src))
A.define("scatter_.src", "(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)",
         lambda self, dim, index, src: self.scatter_(dim, index, src))
A.define("gather.default", "(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> "
         "Tensor", lambda self, dim, index, sparse_grad=False: fiamma.gather(self, dim, index))


def _fused():
    return importlib.import_module("fiamma.fused")


def _unsupported(what):
    raise NotImplementedError(f"{what} is not supported under __torch_dispatch__")


@_reg("relu_backward")
def _relu_backward(c, grad_output, output):
    return c.prim(_ov("threshold_backward"), (grad_output, output, 0))


@_reg("gelu_backward")
def _gelu_backward(c, grad_output, input, approximate="none"):
    return c.prim(_ov("gelu_backward"), (grad_output, input),
                  {"approximate": approximate} if approximate != "none" else {})


@_reg("fused.activation_backward")
def _act_backward(c, name, grad_output, input, *params, create_graph=False):
    if name in ("sigmoid", "tanh") and not params:
        return c.prim(_ov(f"{name}_backward"), (grad_output, input))
    _unsupported(f"the derivative of {name}")


@_reg("fused.loss_backward")
def _loss_backward(c, op, grad, input, target, weight=None, pos_weight=None, reduction="mean",
                   param=0.0, needs=(True, True), create_graph=False):
    if str(op) != "mse_loss" or weight is not None or needs[1]:
        _unsupported(f"the derivative of {op}")
    return c.prim(_ov("mse_loss_backward"), (grad, input, target, _REDUCTION[reduction])), None


@_reg("convolution")
def _convolution(c, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    return c.prim(_ov("convolution"), (input, weight, bias, list(stride), list(padding),
                                       list(dilation), transposed, list(output_padding),
                                       groups))


@_reg("convolution_backward_weight")
def _conv_bw(c, input, grad_output, weight_size, stride, padding, dilation, groups):
    w = fiamma.empty(weight_size, dtype=input.dtype, device="meta")
    return c.prim(_ov("convolution_backward"), (
        grad_output, input, w, None, list(stride), list(padding), list(dilation), False,
        [0] * len(stride), groups, [False, True, False]), pick=1)


@_reg("Tensor.scatter", "scatter")
def _scatter(c, input, dim, index, src=None, value=None, *, reduce=None, out=None):
    if src is None or not _is_t(src) or reduce is not None:
        _unsupported("scatter with a scalar value or reduce=")
    return c.prim(_ov("scatter.src"), (input, dim, index, src))


@_reg("Tensor.scatter_")
def _scatter_(c, self, dim, index, src=None, value=None, *, reduce=None):
    if src is None or not _is_t(src) or reduce is not None:
        _unsupported("scatter_ with a scalar value or reduce=")
    return c.prim(_ov("scatter_.src"), (self, dim, index, src))


@_reg("gather")
def _gather(c, input, dim, index, *, sparse_grad=False, out=None):
    _no_out("gather", out)
    return c.prim(_ov("gather"), (input, dim, index))


# ---- operators without a named method -----------------------------------------------------------

@_reg("Tensor.__pow__")
def _dpow(c, self, other):
    return fiamma.pow(self, other)


@_reg("Tensor.__eq__")
def _deq(c, self, other):
    return fiamma.eq(self, other)


@_reg("Tensor.__floordiv__")
def _dfloordiv(c, self, other):
    return fiamma.floor_divide(self, other)


@_reg("Tensor.__mod__")
def _dmod(c, self, other):
    return fiamma.remainder(self, other)


@_reg("Tensor.__and__")
def _dand(c, self, other):
    return fiamma.bitwise_and(self, other)


@_reg("Tensor.__or__")
def _dor(c, self, other):
    return fiamma.bitwise_or(self, other)


@_reg("Tensor.__xor__")
def _dxor(c, self, other):
    return fiamma.bitwise_xor(self, other)


@_reg("Tensor.__invert__")
def _dinvert(c, self):
    return fiamma.bitwise_not(self)


@_reg("Tensor.__rmatmul__")
def _drmatmul(c, self, other):
    return fiamma.matmul(other, self)


@_reg("Tensor.__pos__", "positive")
def _dpos(c, self):
    return self


@_reg("Tensor.__bool__")
def _dbool(c, self):
    return bool(self.item())


@_reg("Tensor.__index__")
def _dindex(c, self):
    return int(self.item())


@_reg("Tensor.__setitem__")
def _dsetitem(c, self, key, value):
    view = self[key]
    if _is_t(value):
        view.copy_(value)
    else:
        view.fill_(value)


# ---- factories (only a mode sees them) ----------------------------------------------------------

def _factory_kw(dtype, device, layout=None):
    kw = {}
    if dtype is not None:
        kw["dtype"] = dtype
    if layout is not None:
        kw["layout"] = layout
    kw["device"] = fiamma.device(device) if device is not None else \
        fiamma.get_default_device()
    kw["pin_memory"] = False
    return kw


def _fimpl(fname):
    def impl(*args, dtype=None, layout=None, device=None, pin_memory=False, **kw):
        return getattr(fiamma, fname)(*args, dtype=dtype, device=device, **kw)
    return impl


_FACTORY_TEXT = ("*, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                 "bool? pin_memory=None")
for _n in ("ones", "zeros", "randn", "rand"):
    A.define(f"{_n}.default", f"(SymInt[] size, {_FACTORY_TEXT}) -> Tensor", _fimpl(_n))
A.define("empty.memory_format", f"(SymInt[] size, {_FACTORY_TEXT}, "
         "MemoryFormat? memory_format=None) -> Tensor", _fimpl("empty"))
A.define("full.default", f"(SymInt[] size, Scalar fill_value, {_FACTORY_TEXT}) -> Tensor",
         _fimpl("full"))
A.define("arange.default", f"(Scalar end, {_FACTORY_TEXT}) -> Tensor", _fimpl("arange"))
A.define("arange.start_step", f"(Scalar start, Scalar end, Scalar step=1, {_FACTORY_TEXT}) -> "
         "Tensor", _fimpl("arange"))
A.define("lift_fresh.default", "(Tensor(a) self) -> Tensor(a)", lambda self: self)


def _size(size):
    if len(size) == 1 and not isinstance(size[0], int):
        return [int(s) for s in size[0]]
    return [int(s) for s in size]


def _mk_factory(n, qual):
    def h(c, *size, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, out=None, generator=None, memory_format=None, names=None):
        if out is not None or generator is not None or names is not None:
            return c.impl(*size, dtype=dtype, device=device, requires_grad=requires_grad,
                          out=out, generator=generator)
        t = c.prim(_ov(qual), (_size(size),), _factory_kw(dtype, device, layout))
        if requires_grad:
            t.requires_grad_(True)
        return t
    return h


for _n, _q in (("ones", "ones"), ("zeros", "zeros"), ("randn", "randn"), ("rand", "rand"),
               ("empty", "empty.memory_format")):
    _H[_n] = _mk_factory(_n, _q)


@_reg("full")
def _full(c, size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
          out=None, **kw):
    if out is not None:
        return c.impl(size, fill_value, dtype=dtype, device=device, out=out)
    t = c.prim(_ov("full"), (_size((size,)), fill_value), _factory_kw(dtype, device, layout))
    if requires_grad:
        t.requires_grad_(True)
    return t


@_reg("arange")
def _arange(c, start, end=None, step=1, *, dtype=None, layout=None, device=None,
            requires_grad=False, out=None, **kw):
    if out is not None:
        return c.impl(start, end, step, dtype=dtype, device=device, out=out)
    if end is None and step == 1:
        return c.prim(_ov("arange"), (start,), _factory_kw(dtype, device, layout))
    return c.prim(_ov("arange.start_step"), (start, end, step),
                  _factory_kw(dtype, device, layout))


@_reg("tensor")
def _tensor(c, data, *args, **kwargs):
    t = c.impl(data, *args, **kwargs)
    return c.prim(_ov("lift_fresh"), (t,))


@_reg("fused.supports")
def _fused_supports(c, *args, **kwargs):
    return False  # fused kernels bypass the ops: a mode or subclass takes the op-by-op path
