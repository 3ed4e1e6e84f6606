"""PyTorch's ``__torch_function__`` protocol, at no cost to plain tensors.

PyTorch checks every call of a ``torch.*`` function, a Tensor method or operator and a
``torch.nn.functional`` function for an argument whose type overrides ``__torch_function__``
(a Tensor subclass, or any "tensor-like" class defining it) and for an active
``TorchFunctionMode``, and hands the call to them. fiamma's functions are Python functions
whose per-call cost matters on small tensors, so the check is installed only where it can
matter:

* **Tensor subclasses.** ``Tensor.__init_subclass__`` gives a subclass whose
  ``__torch_function__`` is not :data:`disabled_torch_function_impl` (``nn.Parameter``'s and
  fiamma's own subclasses have that) dispatching versions of Tensor's public methods,
  operators and properties in its own class dict: only its instances pay for the check.
* **Functions and plain-tensor methods.** The public functions of ``fiamma``,
  ``fiamma.nn.functional``, ``fiamma.nn.init``, ``fiamma.linalg``, ``fiamma.fft`` and
  ``fiamma.special`` and the methods of ``fiamma.Tensor`` are *retargeted in place* while the
  protocol is active: each function object keeps its identity (``func in HANDLED_FUNCTIONS``,
  names imported before, references held inside fiamma-nn's layers all see the change) and its
  ``__code__`` becomes a dispatcher that checks the arguments and the mode stack, then runs a
  copy of the original. The protocol is active from the first dispatching Tensor subclass or
  tensor-like class on (for good), and while a mode is entered (until the last one exits).
  Before that, and after for a program that only entered a mode, the functions are the
  originals: no work at all.

Inside fiamma, calls between op modules use the implementation modules' names, which are not
retargeted, so an op's internals are not dispatched again (PyTorch's C++ ops are opaque the
same way).
"""

import functools
import sys
import threading
import types

__all__ = ["disabled_torch_function_impl", "DisableTorchFunction",
           "DisableTorchFunctionSubclass", "default_torch_function", "activate_for_class",
           "register_namespace", "dispatch", "overloaded_args", "handle"]

_FunctionType = types.FunctionType


class _State(threading.local):
    def __init__(self):
        self.modes = []     # the entered TorchFunctionModes, innermost last
        self.sub_off = 0    # DisableTorchFunctionSubclass depth
        self.all_off = 0    # DisableTorchFunction depth


state = _State()


class _DisabledImpl:
    """``torch._C._disabled_torch_function_impl``: the ``__torch_function__`` of classes that
    opt out of the protocol (``nn.Parameter``): never dispatched to; called directly it runs
    ``func`` with subclass dispatch disabled and returns its result unchanged."""

    __slots__ = ()

    def __call__(self, func, types, args=(), kwargs=None):
        with DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    def __repr__(self):
        return "<built-in function _disabled_torch_function_impl>"

    def __reduce__(self):
        return "disabled_torch_function_impl"


disabled_torch_function_impl = _DisabledImpl()


# ---- __torch_dispatch__ (fiamma._python_dispatch, imported when first needed) -------------------

class _TDState(threading.local):
    def __init__(self):
        self.modes = []   # the entered TorchDispatchModes, innermost last
        self.off = 0      # _DisableTorchDispatch depth


td_state = _TDState()
TD_TYPES = set()   # Tensor subclasses defining __torch_dispatch__
_TD_ON = [False]   # such a class exists or a dispatch mode was entered
_PD = []           # [fiamma._python_dispatch] once imported


class _DisabledDispatchImpl:
    """``torch._C._disabled_torch_dispatch_impl`` (``Tensor.__torch_dispatch__``): a class
    keeping it does not dispatch; called, it runs ``func`` with subclass dispatch off."""

    __slots__ = ()

    def __call__(self, func, types, args=(), kwargs=None):
        td_state.off += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            td_state.off -= 1

    def __repr__(self):
        return "<built-in function _disabled_torch_dispatch_impl>"

    def __reduce__(self):
        return "disabled_torch_dispatch_impl"


disabled_torch_dispatch_impl = _DisabledDispatchImpl()


def _pd():
    if not _PD:
        import importlib

        _PD.append(importlib.import_module("fiamma._python_dispatch"))
    return _PD[0]


def _below(public, impl, args, kwargs):
    """Below ``__torch_function__``: a ``__torch_dispatch__`` subclass argument or dispatch
    mode takes the call (fiamma._python_dispatch), else ``impl`` runs."""
    if _TD_ON[0]:
        pd = _pd()
        if pd.active(args, kwargs):
            return pd.dispatch(public, impl, args, kwargs)
    return impl(*args, **kwargs)


class DisableTorchFunctionSubclass:
    """Context manager: calls inside do not dispatch to Tensor subclasses or tensor-likes
    (modes still do), as ``torch._C.DisableTorchFunctionSubclass``."""

    __slots__ = ()

    def __enter__(self):
        state.sub_off += 1
        return self

    def __exit__(self, *exc):
        state.sub_off -= 1
        return False


class DisableTorchFunction:
    """Context manager: calls inside dispatch neither to subclasses nor to modes, as
    ``torch._C.DisableTorchFunction``."""

    __slots__ = ()

    def __enter__(self):
        state.all_off += 1
        state.sub_off += 1
        return self

    def __exit__(self, *exc):
        state.all_off -= 1
        state.sub_off -= 1
        return False


# ---- which arguments are overloaded ------------------------------------------------------------

_TENSOR = []            # [fiamma.Tensor], set by fiamma._tensor
# types that never dispatch (fiamma.Tensor is added by fiamma._tensor; others as they are met)
_PLAIN = {int, float, bool, complex, str, type(None), slice, type(Ellipsis), bytes}
_GATE = [False]         # a mode is entered in some thread: every retargeted call checks
_HAS_TF = {}            # type -> bool: does the type dispatch


def _is_real_torch_tensor(t):
    """A tensor type of a real PyTorch beside fiamma (interop: ``fiamma.from_dlpack(tt)``),
    whose ``__torch_function__`` serves PyTorch's functions, not fiamma's; or a
    TorchFunctionMode class (its ``__torch_function__`` is a mode's, not a tensor-like's)."""
    return any((k.__name__ == "TensorBase" and k.__module__ == "torch._C")
               or k.__name__ == "TorchFunctionMode" for k in getattr(t, "__mro__", ()))


def _type_dispatches(t):
    r = _HAS_TF.get(t)
    if r is None:
        tf = getattr(t, "__torch_function__", None)
        r = tf is not None and tf is not disabled_torch_function_impl and t is not _TENSOR[0] \
            and not _is_real_torch_tensor(t)
        _HAS_TF[t] = r
        if not r and t is not list and t is not tuple and t not in TD_TYPES:
            _PLAIN.add(t)
    return r


def _add(found, a):
    t = type(a)
    for i, b in enumerate(found):
        tb = type(b)
        if tb is t:
            return
        if issubclass(t, tb):  # a subclass's handler goes before its parent's
            found.insert(i, a)
            return
    found.append(a)


def overloaded_args(values):
    """The arguments among ``values`` (and one level into their lists/tuples) whose types
    dispatch, one per type, subclasses before their parents, otherwise left to right."""
    found = None
    plain = _PLAIN
    for a in values:
        t = type(a)
        if t in plain:
            continue
        if t is list or t is tuple:
            for b in a:
                tb = type(b)
                if tb not in plain and _type_dispatches(tb):
                    if found is None:
                        found = []
                    _add(found, b)
            continue
        if _type_dispatches(t):
            if found is None:
                found = []
            _add(found, a)
    return found


class _AllNotImplemented(TypeError):
    """Every handler returned NotImplemented (a binary operator turns it into
    NotImplemented, so Python tries the reflected operation and then raises its own error)."""


def _func_name(func):
    from fiamma.overrides import resolve_name

    name = resolve_name(func)
    return name if name is not None else repr(func)


def handle(public, overloaded, args, kwargs):
    """Run ``public``'s call through the innermost mode (popped while its handler runs) and
    then the overloaded arguments' ``__torch_function__``, the first result that is not
    ``NotImplemented`` winning; all ``NotImplemented`` is a TypeError as in PyTorch."""
    st = state
    overloaded = overloaded or ()
    types_ = tuple(type(a) for a in overloaded)
    if kwargs is None:
        kwargs = {}
    tried = []
    if st.modes and not st.all_off:
        mode = st.modes.pop()
        try:
            r = mode.__torch_function__(public, types_, args, kwargs)
        finally:
            st.modes.append(mode)
        if r is not NotImplemented:
            return r
        tried.append(f"  - mode object {mode!r}")
    for a in overloaded:
        if _TD_ON[0] and type(a) in TD_TYPES and not _active["all_methods"]:
            _custom_tf_of_dispatch_class(type(a))
        r = a.__torch_function__(public, types_, args, kwargs)
        if r is not NotImplemented:
            return r
        tried.append(f"  - tensor subclass {type(a)!r}")
    if (getattr(public, "__module__", None) or "").startswith("fiamma.nn"):
        raise _AllNotImplemented(
            f"no implementation found for '{_func_name(public)}' on types that implement "
            f"__torch_function__: {list(types_)}")
    raise _AllNotImplemented(
        f"Multiple dispatch failed for '{_func_name(public)}'; all __torch_function__ handlers "
        "returned NotImplemented:\n\n" + "\n".join(tried))


def dispatch(public, impl, args, kwargs):
    """The check every retargeted function and subclass method makes: hand the call to the
    protocol if a mode is active or an argument dispatches, else run ``impl``."""
    st = state
    if st.all_off:
        return _below(public, impl, args, kwargs)
    found = None
    if not st.sub_off:
        found = overloaded_args(args)
        if kwargs:
            more = overloaded_args(kwargs.values())
            if more:
                if found is None:
                    found = more
                else:
                    for a in more:
                        _add(found, a)
    if found is None and not st.modes:
        return _below(public, impl, args, kwargs)
    return handle(public, found, args, kwargs)


def _dispatch_modes(public, impl, args, kwargs):
    """:func:`dispatch` for the data functions (``fiamma.tensor``): only a mode sees them."""
    st = state
    if st.modes and not st.all_off:
        return handle(public, None, args, kwargs)
    return _below(public, impl, args, kwargs)


def _dispatch_operator(public, impl, args, kwargs):
    """A binary operator: a TypeError (from the handlers, or every one of them returning
    NotImplemented) is NotImplemented, so Python tries the other operand, as PyTorch's
    operators do."""
    try:
        return dispatch(public, impl, args, kwargs)
    except TypeError:
        return NotImplemented


# ---- the default handler -------------------------------------------------------------------

_NOWRAP = set()  # functions whose results the default handler leaves alone (x.grad, x._base)


def _convert(ret, cls):
    T = _TENSOR[0]
    if isinstance(ret, T):
        if not isinstance(ret, cls):
            return T.as_subclass(ret, cls)
        return ret
    t = type(ret)
    if t is list:
        return [_convert(r, cls) for r in ret]
    if isinstance(ret, tuple):
        items = [_convert(r, cls) for r in ret]
        if t is tuple:
            return tuple(items)
        return t(*items) if hasattr(t, "_fields") else t(items)
    return ret


def default_torch_function(cls, func, types, args=(), kwargs=None):
    """``Tensor.__torch_function__``: run ``func`` with subclass dispatch disabled and return
    its tensors (also inside tuples and lists) as instances of ``cls``."""
    if kwargs is None:
        kwargs = {}
    for t in types:
        if not issubclass(cls, t):
            return NotImplemented
    st = state
    st.sub_off += 1
    try:
        if _TD_ON[0] and not TD_TYPES.isdisjoint(types):
            # a Tensor method is not retargeted (level 1): reach __torch_dispatch__ directly
            ret = _below(func, func, args, kwargs)
        else:
            ret = func(*args, **kwargs)
    finally:
        st.sub_off -= 1
    if func in _NOWRAP:
        return ret
    return _convert(ret, cls)


default_torch_function.__name__ = "__torch_function__"
default_torch_function.__qualname__ = "Tensor.__torch_function__"


# ---- what is retargeted ------------------------------------------------------------------------

# the function namespaces (retargeted while the protocol is active; the lazily imported ones
# register themselves when imported)
_NAMESPACES = ["fiamma", "fiamma.linalg", "fiamma.fft", "fiamma.special",
               "fiamma.nn.functional", "fiamma.nn.init"]

# public functions that are not ops: PyTorch's ignored functions that never dispatch
_SKIP_FUNCTIONS = frozenset({
    "is_tensor", "is_storage", "typename", "manual_seed", "seed", "initial_seed",
    "get_rng_state", "set_rng_state", "load", "save", "compile", "vmap", "set_printoptions",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "set_default_dtype", "get_default_dtype", "set_default_device", "get_default_device",
    "set_default_tensor_type", "is_grad_enabled", "is_inference_mode_enabled",
    "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
    "set_float32_matmul_precision", "get_float32_matmul_precision", "set_flush_denormal",
    "set_warn_always", "is_warn_always_enabled", "get_device_module", "promote_types",
    "can_cast", "result_type", "finfo", "iinfo", "calculate_gain", "handle_torch_function",
    "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
    "is_anomaly_enabled", "set_anomaly_enabled", "get_deterministic_debug_mode",
    "set_deterministic_debug_mode", "is_deterministic_algorithms_warn_only_enabled",
    "broadcast_shapes", "assert_int_or_pair", "boolean_dispatch",
})

# Tensor attributes that do not dispatch (object protocol, construction, pickling and copying,
# which keep their own subclass handling; PyTorch 2.13 dispatches new_*, stride, data_ptr)
_SKIP_METHODS = frozenset({
    "__new__", "__init__", "__init_subclass__", "__torch_function__", "__getattribute__",
    "__getattr__", "__setattr__", "__delattr__", "__hash__", "__dir__", "__subclasshook__",
    "__class__", "__sizeof__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
    "__deepcopy__", "__copy__", "__iter__", "__delitem__", "__class_getitem__",
    "__array_priority__", "__array_interface__", "__dlpack__", "__dlpack_device__",
    "as_subclass", "_make_subclass", "new",
    "__weakref__", "__dict__", "__slots__", "__module__", "__doc__",
})

# the named method PyTorch's operator hands to the protocol (``x + y`` arrives as
# ``Tensor.add``; the others as the operator itself)
OPERATOR_FUNC = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub",
    "__isub__": "sub_", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__itruediv__": "div_", "__ifloordiv__": "floor_divide_",
    "__mod__": "remainder", "__imod__": "remainder_", "__matmul__": "matmul",
    "__rand__": "bitwise_and", "__ror__": "bitwise_or", "__rxor__": "bitwise_xor",
    "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__ne__": "ne",
    "__neg__": "neg", "__pos__": "positive", "__abs__": "abs",
}

# binary operators: all handlers returning NotImplemented gives NotImplemented (Python then
# raises its "unsupported operand" TypeError)
_BINARY = frozenset(
    f"__{p}{n}__" for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
                             "and", "or", "xor", "lshift", "rshift", "divmod")
    for p in ("", "r", "i")) | {"__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"}

_lock = threading.RLock()
_entries = {}        # id(function) -> _Entry (each retargetable function, once)
_built = set()       # namespace names whose functions are entries
_tensor_entries = {}  # Tensor attribute name -> (public, impl, kind) for subclass wrappers
_sub_members = {}    # Tensor attribute name -> what a dispatching subclass gets
_active = {"sticky": False, "modes": 0, "on": 0,  # on: the level set (see _set)
           "all_methods": False}  # Tensor's methods retargeted for good (see below)
_disp_codes = {}     # number of free variables -> the dispatcher code


# functions whose arguments hold data, not operands (``fiamma.tensor(a_long_list)``): only a
# mode sees them, as in PyTorch where they are in the ignored (never subclass-dispatched) list
_DATA_FUNCTIONS = frozenset({"tensor", "as_tensor", "asarray", "new_tensor", "scalar_tensor",
                             "sparse_coo_tensor", "from_numpy", "frombuffer"})


def _dispatcher_code(nfree, scan=True):
    """The code a retargeted function runs: arguments all of types known not to dispatch
    (``_PLAIN``, which holds Tensor; one level into lists and tuples) and no mode entered in
    any thread (``_GATE``) go straight to the original; anything else to :func:`dispatch`.
    Without ``scan`` (the data functions) only the gate is checked."""
    code = _disp_codes.get((nfree, scan))
    if code is None:
        names = [f"_v{i}" for i in range(nfree)]
        lines = ["def _outer():"]
        if names:
            lines.append(f"    {', '.join(names)} = {', '.join(['None'] * nfree)}")
        lines += [
            "    def dispatcher(*args, _fm_tf_=None, **kwargs):",
            "        impl, plain, gate, slow = _fm_tf_",
            "        if gate[0]:",
            "            return slow(args, kwargs)",
        ]
        if scan:
            lines += [
                "        for a in args:",
                "            c = a.__class__",
                "            if c not in plain:",
                "                if c is not list and c is not tuple:",
                "                    return slow(args, kwargs)",
                "                for b in a:",
                "                    if b.__class__ not in plain:",
                "                        return slow(args, kwargs)",
                "        if kwargs:",
                "            for a in kwargs.values():",
                "                if a.__class__ not in plain:",
                "                    return slow(args, kwargs)",
            ]
        lines.append("        return impl(*args, **kwargs)")
        if names:  # the same number of free variables as the code it replaces
            lines.append(f"        return ({', '.join(names)},)")
        lines.append("    return dispatcher")
        ns = {}
        exec("\n".join(lines), ns)  # noqa: S102 (generated here, no outside input)
        code = ns["_outer"]().__code__
        _disp_codes[(nfree, scan)] = code
    return code


class _Entry:
    """One retargetable function: its original code and defaults, a copy that runs them, and
    the dispatcher that replaces them while the protocol is active."""

    __slots__ = ("fn", "code", "defaults", "kwdefaults", "impl", "kw", "on", "function",
                 "dcode")

    def __init__(self, fn, public, operator=False, function=False):
        self.fn = fn
        self.function = function  # a namespace's function (else only a Tensor method)
        self.code = fn.__code__
        self.defaults = fn.__defaults__
        self.kwdefaults = fn.__kwdefaults__
        impl = _FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
        impl.__kwdefaults__ = fn.__kwdefaults__
        impl.__qualname__ = fn.__qualname__
        impl.__module__ = fn.__module__
        self.impl = impl
        how = _dispatch_operator if operator else \
            _dispatch_modes if fn.__name__ in _DATA_FUNCTIONS else dispatch
        self.kw = {"_fm_tf_": (impl, _PLAIN, _GATE, functools.partial(how, public, impl))}
        self.on = False
        # the dispatcher's code under the function's name (tracebacks, frame walks)
        self.dcode = _dispatcher_code(len(self.code.co_freevars),
                                      fn.__name__ not in _DATA_FUNCTIONS).replace(
            co_name=fn.__name__, co_qualname=fn.__qualname__,
            co_filename=self.code.co_filename, co_firstlineno=self.code.co_firstlineno)

    def retarget(self):
        fn = self.fn
        fn.__code__ = self.dcode
        fn.__defaults__ = None
        fn.__kwdefaults__ = self.kw
        if "__wrapped__" not in fn.__dict__:
            fn.__wrapped__ = self.impl  # inspect.signature reads the original's
            self.on = "wrapped"
        else:
            self.on = True

    def restore(self):
        fn = self.fn
        fn.__code__ = self.code
        fn.__defaults__ = self.defaults
        fn.__kwdefaults__ = self.kwdefaults
        if self.on == "wrapped":
            fn.__dict__.pop("__wrapped__", None)
        self.on = False


def _plain_function(fn):
    return (type(fn) is _FunctionType
            and not fn.__code__.co_flags & 0xA0)  # not a generator / coroutine (0x20, 0x80)


def _build_namespace(modname):
    mod = sys.modules.get(modname)
    if mod is None or modname in _built:
        return []
    _built.add(modname)
    new = []
    for name, fn in list(vars(mod).items()):
        if name.startswith("_") or name in _SKIP_FUNCTIONS or not _plain_function(fn):
            continue
        if fn.__module__ and not fn.__module__.startswith("fiamma"):
            continue
        e = _entries.get(id(fn))
        if e is None:
            e = _Entry(fn, fn, function=True)
            _entries[id(fn)] = e
            new.append(e)
        elif not e.function:  # a Tensor method that is also this namespace's function
            e.function = True
            new.append(e)
    return new


def _build_tensor():
    """The entries of Tensor's methods and property getters, and what a dispatching subclass
    puts in its dict."""
    if _tensor_entries:
        return []
    T = _TENSOR[0]
    new = []
    for name, attr in list(vars(T).items()):
        if name in _SKIP_METHODS or (name.startswith("_") and not name.startswith("__")):
            continue
        if _plain_function(attr):
            public = getattr(T, OPERATOR_FUNC.get(name, name))
            operator = name in _BINARY
            e = _entries.get(id(attr))
            if e is None:  # (a function that is also fiamma.<name> is one entry)
                e = _Entry(attr, public, operator)
                _entries[id(attr)] = e
                new.append(e)
            impl = e.impl
            how = _dispatch_operator if operator else dispatch
            _sub_members[name] = _method_wrapper(how, public, impl, attr)
            _tensor_entries[name] = e
        elif type(attr) is property and _plain_function(attr.fget):
            public = attr.__get__  # PyTorch's func for a property: Tensor.<name>.__get__
            e = _entries.get(id(attr.fget))
            if e is None:
                e = _Entry(attr.fget, public)
                _entries[id(attr.fget)] = e
                new.append(e)
            _sub_members[name] = property(_getter(public, e.impl), attr.fset, attr.fdel,
                                          attr.__doc__)
            _tensor_entries[name] = e
    _NOWRAP.add(T.grad.__get__)
    return new


def _method_wrapper(how, public, impl, original):
    def method(*args, **kwargs):
        return how(public, impl, args, kwargs)

    method.__name__ = original.__name__
    method.__qualname__ = original.__qualname__
    method.__doc__ = original.__doc__
    method.__module__ = original.__module__
    method.__wrapped__ = original
    return method


def _getter(public, impl):
    def get(self):
        return dispatch(public, impl, (self,), {})

    return get


def _build_all():
    new = _build_tensor()
    for modname in _NAMESPACES:
        new += _build_namespace(modname)
    return new


def _level():
    return 2 if _active["modes"] or _active["all_methods"] else 1 if _active["sticky"] else 0


def _custom_tf_of_dispatch_class(cls):
    """A ``__torch_dispatch__`` class with its own ``__torch_function__`` (not the default):
    its handler calls Tensor's methods (``func(*args)``), which must reach
    ``__torch_dispatch__`` as PyTorch's C++ methods do, so Tensor's own methods are retargeted
    from now on (level 2 for good: plain tensors' methods pay the dispatcher's check)."""
    if getattr(cls.__torch_function__, "__func__", None) is not default_torch_function:
        with _lock:
            _active["all_methods"] = True
            _set(_level())


def _set(level):
    """Retarget the functions of the namespaces (level 1: a dispatching class exists; Tensor's
    own methods keep their direct code, a subclass's instances use the methods their class
    got) or also Tensor's methods and properties (level 2: a mode is entered), or restore
    everything (0)."""
    with _lock:
        if level:
            _build_all()
        if _active["on"] == level:
            return
        _active["on"] = level
        for e in _entries.values():
            want = level == 2 or (level == 1 and e.function)
            if want and not e.on:
                e.retarget()
            elif e.on and not want:
                e.restore()


def register_namespace(modname):
    """A function namespace imported after fiamma (``fiamma.linalg``, ``fiamma.nn.functional``):
    retargeted at once if the protocol is active."""
    with _lock:
        if modname not in _NAMESPACES:
            _NAMESPACES.append(modname)
        if _active["on"]:
            for e in _build_namespace(modname):
                if not e.on:
                    e.retarget()


def activate_for_class(cls=None):
    """The protocol is needed from now on (a dispatching Tensor subclass or tensor-like class
    exists)."""
    if not _active["sticky"]:
        _active["sticky"] = True
        _set(_level())


def push_dispatch_mode(mode):
    """Enter a TorchDispatchMode (innermost last): every public call checks from now on."""
    _TD_ON[0] = True
    _pd()
    register_namespace("fiamma.fused")
    td_state.modes.append(mode)
    mode_entered()


def pop_dispatch_mode():
    mode = td_state.modes.pop()
    mode_exited()
    return mode


def mode_entered():
    with _lock:
        _active["modes"] += 1
        _GATE[0] = True
        if _active["on"] != 2:
            _set(2)


def mode_exited():
    with _lock:
        _active["modes"] -= 1
        _GATE[0] = _active["modes"] > 0
        if not _active["modes"]:
            _set(_level())


def init_subclass(cls):
    """``Tensor.__init_subclass__``: give a dispatching subclass the dispatching methods (a
    class defining ``__torch_dispatch__`` gets them too, whatever its ``__torch_function__``)."""
    tf = getattr(cls, "__torch_function__", None)
    td = getattr(cls, "__torch_dispatch__", disabled_torch_dispatch_impl)
    td = td is not disabled_torch_dispatch_impl
    if td:
        register_namespace("fiamma.fused")  # the backward formulas' fused kernels
        TD_TYPES.add(cls)
        _PLAIN.discard(cls)
        _HAS_TF.pop(cls, None)
        _TD_ON[0] = True
        _pd().install_class(cls)
    elif tf is disabled_torch_function_impl or tf is None:
        return
    T = _TENSOR[0]
    with _lock:
        _build_all()
        for name, member in _sub_members.items():
            for k in cls.__mro__:
                if name in k.__dict__:
                    if k is T:
                        setattr(cls, name, member)
                    break
    _HAS_TF.pop(cls, None)
    activate_for_class(cls)


def dispatching_types_seen(t):
    """A tensor-like (non-Tensor) class defining ``__torch_function__`` was created: turn the
    protocol on (see fiamma.run's class hook)."""
    activate_for_class(t)


def watch_class_creation():
    """Until the protocol is active, watch ``class`` statements for one that defines
    ``__torch_function__`` (a tensor-like class such as the PyTorch docs' ``ScalarTensor``,
    which no Tensor hook sees) and turn the protocol on when one is created. Installed by
    ``python -m fiamma.run``; the original ``__build_class__`` comes back once it is on."""
    import builtins

    if _active["sticky"] or getattr(builtins.__build_class__, "_fm_watch", False):
        return
    original = builtins.__build_class__

    def __build_class__(func, name, *bases, **kwargs):
        cls = original(func, name, *bases, **kwargs)
        if isinstance(cls, type) and "__torch_function__" in cls.__dict__ and \
                _type_dispatches(cls) and not _active["sticky"]:
            if builtins.__build_class__ is __build_class__:
                builtins.__build_class__ = original
            activate_for_class(cls)
        return cls

    __build_class__._fm_watch = True
    builtins.__build_class__ = __build_class__
