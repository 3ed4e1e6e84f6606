"""``torch._C`` under ``fiamma.run``: the few private names of PyTorch's C module that
libraries reach (Lightning, torchmetrics), over fiamma's own ``fiamma._C`` (the cffi extension,
whose ``ffi`` and ``lib`` stay reachable through it).

>>> from fiamma._torch_c import module
>>> module._nn._parse_to("cpu", fiamma.float64)
(device(type='cpu'), fiamma.float64, False, None)
"""

import types

import fiamma


def _log_api_usage_once(event):
    """PyTorch's usage logging hook (a no-op there unless a logger is installed): no-op."""
    if not isinstance(event, str):
        raise TypeError(f"_log_api_usage_once: expected a str event, got {type(event).__name__}")


def _get_tracing_state():
    """PyTorch's TorchScript tracing state: None outside ``torch.jit.trace`` (code asks
    ``if torch._C._get_tracing_state():`` to take a trace-friendly path). fiamma.jit's tracer
    records calls as they run, so every path traces: None."""
    return None


def _parse_to(*args, **kwargs):
    """The ``(device, dtype, non_blocking, memory_format)`` that ``Tensor.to``/``Module.to``
    would read from these arguments (PyTorch's ``torch._C._nn._parse_to``)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    kwargs.pop("copy", None)
    fmt = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"_parse_to() got unexpected keyword arguments {sorted(kwargs)}")
    rest = list(args)
    if rest and isinstance(rest[0], fiamma.Tensor):
        t = rest.pop(0)
        device, dtype = t.device, t.dtype
    else:
        if rest and isinstance(rest[0], (str, int, fiamma.device)):
            device = rest.pop(0)
        if rest and isinstance(rest[0], fiamma.dtype):
            dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        non_blocking = rest.pop(0)
        if rest and isinstance(rest[0], bool):
            rest.pop(0)  # copy
    if rest:
        raise TypeError(f"_parse_to() received an invalid combination of arguments: {args!r}")
    if device is not None and not isinstance(device, fiamma.device):
        device = fiamma.device(device)
    if dtype is not None and not isinstance(dtype, fiamma.dtype):
        raise TypeError(f"_parse_to(): dtype must be a fiamma.dtype, got {type(dtype).__name__}")
    return device, dtype, non_blocking, fmt


def _are_functorch_transforms_active():
    """Whether a fiamma.func transform (``vmap``, ``grad``, ``jacrev``, ...) is running its
    function in this thread (code asks to avoid ops a transform cannot batch)."""
    import sys

    batched = sys.modules.get("fiamma.func._batched")
    autodiff = sys.modules.get("fiamma.func._autodiff")
    return bool((batched is not None and batched.active())
                or (autodiff is not None and autodiff._depth() > 0))


class _AutoDispatchBelowAutograd:
    """``torch._C._AutoDispatchBelowAutograd()``: calls of fiamma.library operators inside skip
    their autograd kernels (an ``Autograd`` kernel calling its operator's backend kernel)."""

    def __enter__(self):
        import importlib

        self._guard = importlib.import_module("fiamma.library._op").AutoDispatchBelowAutograd()
        return self._guard.__enter__()

    def __exit__(self, *exc):
        return self._guard.__exit__(*exc)


class _TorchC(types.ModuleType):
    """``torch._C``: the names above, then fiamma._C's."""

    _fiamma_alias_only = True  # the runner's torch module keeps it; fiamma._C stays native

    def __getattr__(self, name):
        if name == "_distributed_c10d":
            c10d = types.ModuleType("torch._C._distributed_c10d")
            try:
                from fiamma.distributed import ProcessGroup, Store
                from fiamma.distributed._reducer import Reducer
            except ImportError:
                pass
            else:
                c10d.Reducer, c10d.ProcessGroup, c10d.Store = Reducer, ProcessGroup, Store
            self.__dict__[name] = c10d
            return c10d
        import fiamma._C as native

        try:
            return getattr(native, name)
        except AttributeError:
            from fiamma._torch_alias import FiammaAttributeError

            raise FiammaAttributeError(
                f"module 'torch._C' has no attribute {name!r}: fiamma has no equivalent of "
                "this private PyTorch name (a gap in fiamma's PyTorch API; see docs/porting.md)"
            ) from None


module = _TorchC("torch._C", "PyTorch's private C module, as far as fiamma provides it")
module._TensorMeta = type(fiamma.Tensor)  # the metaclass of Tensor
module._log_api_usage_once = _log_api_usage_once
module._get_tracing_state = _get_tracing_state
module._are_functorch_transforms_active = _are_functorch_transforms_active
module._nn = types.ModuleType("torch._C._nn")
module._nn._parse_to = _parse_to
module.Generator = fiamma.Generator
module._AutoDispatchBelowAutograd = _AutoDispatchBelowAutograd

# the __torch_function__ protocol's names (fiamma._torch_function, fiamma.overrides)
from fiamma import _torch_function as _TF, overrides as _overrides  # noqa: E402

module._disabled_torch_function_impl = _TF.disabled_torch_function_impl
module.DisableTorchFunction = _TF.DisableTorchFunction
module.DisableTorchFunctionSubclass = _TF.DisableTorchFunctionSubclass
module._has_torch_function = _overrides.has_torch_function
module._has_torch_function_unary = _overrides.has_torch_function_unary
module._has_torch_function_variadic = _overrides.has_torch_function_variadic
module._is_torch_function_enabled = lambda: not _TF.state.sub_off
module._is_torch_function_mode_enabled = lambda: bool(_TF.state.modes) and not _TF.state.all_off
module._push_on_torch_function_stack = _overrides._push_mode
module._pop_torch_function_stack = _overrides._pop_mode
# __torch_dispatch__ (fiamma._python_dispatch; the mode stack of fiamma.utils._python_dispatch)
module._disabled_torch_dispatch_impl = _TF.disabled_torch_dispatch_impl


def _td_stack(name):
    def call(*args, **kwargs):
        import importlib

        return getattr(importlib.import_module("fiamma.utils._python_dispatch"), name)(
            *args, **kwargs)
    call.__name__ = name
    return call


module._push_on_torch_dispatch_stack = _td_stack("_push_mode")
module._pop_torch_dispatch_stack = _td_stack("_pop_mode")
module._len_torch_dispatch_stack = _td_stack("_len_torch_dispatch_stack")
module._get_dispatch_stack_at = _td_stack("_get_dispatch_stack_at")


class _DisableTorchDispatch:
    """``torch._C._DisableTorchDispatch``: no subclass or mode sees the ops run inside."""

    def __enter__(self):
        _TF.td_state.off += 1
        return self

    def __exit__(self, *exc):
        _TF.td_state.off -= 1
        return False


module._DisableTorchDispatch = _DisableTorchDispatch
module._len_torch_function_stack = _overrides._len_torch_function_stack
module._get_function_stack_at = lambda i: _TF.state.modes[i]
