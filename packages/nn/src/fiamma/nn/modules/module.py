"""Module: the base class of every layer and model (``torch.nn.Module``).

Parameters, buffers and submodules are registered by assigning them as attributes, kept in
three ordered dicts and found by dotted path; ``state_dict`` keys are those paths, so a
checkpoint of a PyTorch model with the same structure loads by key. Calling a module runs
``forward`` directly when no hook is registered anywhere (the fast path).
"""

import importlib
import itertools
import sys
import types
from collections import OrderedDict, namedtuple

import fiamma
from fiamma.nn.parameter import (
    Buffer,
    Parameter,
    UninitializedBuffer,
    UninitializedTensorMixin,
)

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook"]

_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_hook_ids = itertools.count()
# True while a global hook may be registered: the call fast path reads this one flag (and the
# module's own ``_hooked``); the slow path resets both when it finds the tables empty.
_global_hooked = False


def _global_hook_added():
    global _global_hooked
    _global_hooked = True


class RemovableHandle:
    """Unregisters a hook with ``remove()`` (also a context manager)."""

    def __init__(self, *tables):
        self.id = next(_hook_ids)
        self._tables = tables

    def remove(self):
        for t in self._tables:
            t.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_module_forward_pre_hook(hook):
    """A forward pre-hook ``hook(module, args)`` for every module (before its own)."""
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    _global_hook_added()
    return h


def register_module_forward_hook(hook):
    """A forward hook ``hook(module, args, output)`` for every module (before its own)."""
    h = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[h.id] = hook
    _global_hook_added()
    return h


def register_module_full_backward_pre_hook(hook):
    """A backward pre-hook ``hook(module, grad_output)`` for every module (before its own)."""
    h = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[h.id] = hook
    _global_hook_added()
    return h


def register_module_full_backward_hook(hook):
    """A backward hook ``hook(module, grad_input, grad_output)`` for every module (before its
    own)."""
    h = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[h.id] = hook
    _global_hook_added()
    return h


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _check_name(kind, name, module):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


# namespaces whose functions stand for PyTorch's C builtins (torch.conv2d, F.conv2d, ...)
_OP_NAMESPACES = ("fiamma", "fiamma.nn.functional", "fiamma.special", "fiamma.linalg",
                  "fiamma.fft")


def _is_namespace_op(value):
    name = getattr(value, "__name__", None)
    if not isinstance(name, str):
        return False
    for ns in _OP_NAMESPACES:
        mod = sys.modules.get(ns)
        if mod is not None and getattr(mod, name, None) is value:
            return True
    return False


class Module:
    """Base class for all neural-network modules.

    >>> import fiamma
    >>> from fiamma import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> net = Net()
    >>> list(net.state_dict())
    ['fc.weight', 'fc.bias']
    >>> net(fiamma.ones(3, 4)).shape
    fiamma.Size([3, 2])
    """

    _version = 1
    training: bool

    def __init_subclass__(cls, **kwargs):
        # A PyTorch op kept as a class attribute (``conv = torch.conv2d``, called as
        # ``self.conv(x, weight=w)``) is a C builtin there, which does not bind as a method;
        # fiamma's ops are Python functions, so such attributes become static methods (at class
        # creation only: no cost per call)
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if type(value) is types.FunctionType and _is_namespace_op(value):
                setattr(cls, name, staticmethod(value))

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments: "
                            f"{args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_hooked"] = False  # set by every hook registration (see __call__)
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # ---- registration ---------------------------------------------------------------------

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor saved in ``state_dict`` (unless ``persistent=False``) and moved by
        ``to()``, but not a parameter (running statistics, masks)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, fiamma.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (fiamma.Tensor or None required)")
        if isinstance(tensor, (Buffer, Parameter)):
            tensor = tensor.detach().as_subclass(fiamma.Tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Add a parameter (or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                                f"'{name}' (fiamma.nn.Parameter or None required)")
            if param.grad_fn is not None:
                raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                                 "parameters must be created explicitly. To express "
                                 f"'{name}' as a function of another Tensor, compute the "
                                 "value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        """Add a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name, self)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(fiamma.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (fiamma.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, fiamma.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(fiamma.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name, keep):
        d = self.__dict__
        d.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            if table != keep:
                d[table].pop(name, None)
        if keep != "_buffers":
            d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if name in d.get(table, ()):
                del d[table][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__)
        keys |= set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    # ---- lookup ---------------------------------------------------------------------------

    def get_submodule(self, target):
        """The submodule at dotted path ``target`` ('' is this module)."""
        mod = self
        if target == "":
            return mod
        for part in target.split("."):
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{part}`")
            mod = mod._modules[part]
            if mod is None:
                raise AttributeError(f"`{part}` is None, not an nn.Module")
        return mod

    def get_parameter(self, target):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        """(name, member) pairs over this module (and its submodules when ``recurse``), as
        PyTorch's: ``get_members_fn(module)`` yields a module's own (name, member) pairs
        (Pyro's ``named_pyro_params`` passes one); fiamma's callers pass the name of the
        table (``"_parameters"``, ``"_buffers"``)."""
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        table = get_members_fn if isinstance(get_members_fn, str) else None
        for mod_prefix, mod in mods:
            members = getattr(mod, table).items() if table is not None else \
                get_members_fn(mod)
            for name, v in members:
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes and bulk changes ---------------------------------------------------------------

    def train(self, mode=True):
        """Set training mode (dropout active, batch statistics used) here and below."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                p.grad.zero_()

    def apply(self, fn):
        """``fn(m)`` on every submodule (children first) and then this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn, recurse=True):
        """Replace every parameter's and buffer's data with ``fn(tensor)`` (in place for
        parameters, so optimizers holding them stay valid); ``recurse=False``: this module's
        own only."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        future = importlib.import_module("fiamma.__future__")
        swap = future.get_swap_module_params_on_conversion()
        with fiamma.no_grad():
            for name, p in self._parameters.items():
                if p is None:
                    continue
                new = fn(p)
                if new is not p and (swap or _is_traceable_wrapper(new)):
                    # PyTorch's swap path: the Parameter object keeps its identity and gets
                    # the converted tensor's class, dict and data (a __torch_dispatch__
                    # subclass's payload converted too)
                    g = fn(p.grad) if p.grad is not None else None
                    if not isinstance(new, Parameter):
                        new = Parameter(new, requires_grad=p.requires_grad)
                    try:
                        fiamma.utils.swap_tensors(p, new)
                    except Exception as e:
                        raise RuntimeError(
                            f"_apply(): Couldn't swap {type(self).__name__}.{name}") from e
                    if g is not None:
                        p.grad = g
                    continue
                if new is not p:
                    if future.get_overwrite_module_params_on_conversion():
                        self._parameters[name] = Parameter(new, requires_grad=p.requires_grad)
                        continue
                    p.data = new
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad.data = g
            for name, b in self._buffers.items():
                if b is not None:
                    new = fn(b)
                    if new is not b and isinstance(b, UninitializedBuffer):
                        # a lazy module's placeholder moves or casts as a placeholder
                        new = UninitializedBuffer(b.requires_grad, new.device, new.dtype)
                    self._buffers[name] = new
        return self

    def to_empty(self, *, device, recurse=True):
        """Give every parameter and buffer new, uninitialised memory on ``device`` (their
        values are not copied): how a model built on the meta device (no data) gets real
        memory, before ``load_state_dict`` or an initialisation fills it. ``recurse=False``:
        this module's own parameters and buffers only. Returns ``self``.

        >>> import fiamma
        >>> with fiamma.device("meta"):
        ...     m = fiamma.nn.Linear(3, 2)
        >>> m.to_empty(device="cpu").weight.device
        device(type='cpu')
        """
        def fn(t):
            return fiamma.empty_like(t, device=device)

        if recurse:
            return self._apply(fn)
        return Module._apply(self, fn, recurse=False)

    def share_memory(self):
        """Move every parameter, gradient and buffer to shared memory in place (for Hogwild
        training with fiamma.multiprocessing); returns ``self``."""
        return self._apply(lambda t: t.share_memory_())

    def to(self, *args, **kwargs):
        """Move and/or cast: ``to(dtype)``, ``to(device)``, ``to(device, dtype)`` (either may be
        None; the device may be an index; a trailing ``non_blocking`` flag is accepted),
        ``to(tensor)``, ``to(memory_format=fiamma.channels_last)`` (4-d and 5-d parameters and
        buffers; channels_last_3d for 5-d). Only floating-point and complex parameters and
        buffers change dtype."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        fmt = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        if fmt is not None and not isinstance(fmt, fiamma.memory_format):
            raise TypeError(f"to() memory_format must be a fiamma.memory_format, got "
                            f"{type(fmt).__name__}")
        for i, a in enumerate(args):
            if isinstance(a, fiamma.dtype):
                dtype = a
            elif isinstance(a, fiamma.Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, fiamma.device)):
                device = a
            elif a is None and i < 2:  # to(None, dtype), to(device, None): not given
                pass
            elif isinstance(a, bool) and i > 0:  # to(device, dtype, non_blocking)
                pass
            elif isinstance(a, int) and not isinstance(a, bool) and i == 0:
                device = fiamma.device(a)  # a device index (of the accelerator)
            else:
                raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        def convert(t):
            out = t
            if device is not None:
                out = out.to(device)
            if dtype is not None and (out.is_floating_point() or out.is_complex()):
                out = out.to(dtype)
            if fmt is not None and out.dim() in (4, 5):  # as PyTorch: 4-d/5-d tensors only
                out = out.to(memory_format=fmt)
            return out

        return self._apply(convert)

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else fiamma.device("cuda", device)
                       if isinstance(device, int) else device)

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def compile(self, *args, **kwargs):
        """PyTorch's ``Module.compile``: ``fiamma.compile`` this module's forward in place
        (same arguments). With a named backend fiamma runs eagerly, so nothing changes; a
        callable backend gets the captured graph and its result runs the module's calls."""
        if args:
            raise TypeError(f"{type(self).__name__}.compile takes keyword arguments only (those "
                            f"of fiamma.compile), got {len(args)} positional")
        backend = kwargs.get("backend", "inductor")
        if kwargs.get("disable") or backend is None or isinstance(backend, str):
            fiamma.compile(self, **kwargs)  # checks the options; runs eagerly
            return
        if not callable(backend):
            raise TypeError(f"compile: backend must be a name or a callable, got "
                            f"{type(backend).__name__}")
        import importlib

        fx = importlib.import_module("fiamma.fx._compile")
        # the capture traces the class's forward (fiamma.fx traces type(m).forward), so the
        # instance attribute set here only routes calls through the backend's graph
        self.__dict__["forward"] = fx._Compiled(type(self).forward.__get__(self), backend,
                                                module=self)

    # ---- calling ---------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if not (self._hooked or _global_hooked):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        global _global_hooked
        if not (_global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            _global_hooked = False
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks or self.__dict__.get("_non_full_backward_hooks")):
            self.__dict__["_hooked"] = False
            if not _global_hooked:
                return self.forward(*args, **kwargs)
        for hid, hook in itertools.chain(_global_forward_pre_hooks.items(),
                                         self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        if (self._backward_hooks or self._backward_pre_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            from fiamma.nn.modules._backward_hooks import BackwardHook
            bw = BackwardHook(
                self, list(_global_backward_hooks.values()) + list(self._backward_hooks.values()),
                list(_global_backward_pre_hooks.values())
                + list(self._backward_pre_hooks.values()))
            args = bw.setup_input_hook(args)
        try:
            out = self.forward(*args, **kwargs)
        except Exception:
            for hid, hook in self._forward_hooks.items():
                if self._forward_hooks_always_called.get(hid):
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        for hid, hook in itertools.chain(_global_forward_hooks.items(),
                                         self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        if bw is not None:
            out = bw.setup_output_hook(out)
        if self.__dict__.get("_non_full_backward_hooks") and fiamma.is_grad_enabled():
            self._attach_non_full_hooks(args, out)
        return out

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output) -> None | new grad_output`` when the gradients with
        respect to the module's outputs are ready (before they flow into the module)."""
        h = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[h.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(h.id, last=False)
        self.__dict__["_hooked"] = True
        return h

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output) -> None | new grad_input`` when the
        gradients with respect to the module's positional tensor inputs are computed
        (``grad_input`` entries are None for inputs that are not tensors requiring grad). The
        module's inputs and outputs are routed through identity autograd functions, so
        in-place changes of the forward's inputs or outputs are not allowed.

        >>> import fiamma
        >>> from fiamma import nn
        >>> lin = nn.Linear(2, 1)
        >>> seen = []
        >>> h = lin.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
        >>> lin(fiamma.ones(3, 2, requires_grad=True)).sum().backward()
        >>> seen
        [fiamma.Size([3, 1])]
        """
        if self.__dict__.get("_non_full_backward_hooks"):
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        h = RemovableHandle(self._backward_hooks)
        self._backward_hooks[h.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(h.id, last=False)
        self.__dict__["_hooked"] = True
        return h

    def register_backward_hook(self, hook):
        """PyTorch's deprecated non-full backward hook: ``hook(module, grad_input,
        grad_output)`` runs on the autograd node that made the module's (first) output, with
        that node's input and output gradients (for a convolution: the gradients of its
        input, weight and bias), and may return new ``grad_input``. PyTorch's FutureWarning
        is given where these are not the module's own gradients (the forward has several
        nodes, or outputs in a nested structure); ``register_full_backward_hook`` gives them.
        """
        if self._backward_hooks or self._backward_pre_hooks:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        d = self.__dict__
        if "_non_full_backward_hooks" not in d:
            d["_non_full_backward_hooks"] = OrderedDict()
        h = RemovableHandle(d["_non_full_backward_hooks"])
        d["_non_full_backward_hooks"][h.id] = hook
        d["_hooked"] = True
        return h

    def _attach_non_full_hooks(self, args, out):
        """Register the non-full backward hooks on the node that made ``out``."""
        var = out
        while not isinstance(var, fiamma.Tensor):
            if isinstance(var, dict):
                var = next(v for v in var.values() if isinstance(v, fiamma.Tensor))
            else:
                var = var[0]
        grad_fn = var.grad_fn
        if grad_fn is None:
            return
        self._warn_non_full(args, out, grad_fn)
        hooks = list(self.__dict__["_non_full_backward_hooks"].values())

        def node_hook(grad_input, grad_output):
            for hook in hooks:
                res = hook(self, grad_input, grad_output)
                if res is not None:
                    res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                    if len(res) != len(grad_input):
                        raise RuntimeError("backward hook returned an invalid number of "
                                           f"grad_input, got {len(res)}, but expected "
                                           f"{len(grad_input)}")
                    grad_input = res
            return grad_input

        grad_fn.register_hook(node_hook)

    def _warn_non_full(self, args, out, grad_fn):
        import warnings

        T = fiamma.Tensor

        def tensors(x, what):
            if isinstance(x, T):
                return (x,)
            if isinstance(x, tuple) and all(isinstance(r, T) for r in x):
                return x
            warnings.warn("Using non-full backward hooks on a Module that does not "
                          f"{'return' if what == 'outputs' else 'take as input'} a single "
                          "Tensor or a tuple of Tensors is deprecated and will be removed in "
                          "future versions. This hook will be missing some of the grad_output."
                          " Please use register_full_backward_hook to get the documented "
                          "behavior.", FutureWarning, stacklevel=4)
            return None

        outs = tensors(out, "outputs")
        if outs is None:
            return
        ins = tensors(args[0] if len(args) == 1 else tuple(args), "inputs")
        if ins is None:
            return
        out_fns = {id(r.grad_fn): r.grad_fn for r in outs if r.grad_fn is not None}
        if not out_fns or (len(out_fns) == 1 and id(grad_fn) not in out_fns):
            msg = "when outputs are nested in python data structure"
        elif len(out_fns) > 1:
            msg = "when outputs are generated by different autograd Nodes"
        else:
            in_fns = {id(i.grad_fn) for i in ins if i.grad_fn is not None}
            nxt = {id(n) for n, _ in grad_fn.next_functions if n is not None}
            if in_fns == nxt:
                return
            msg = "when the forward contains multiple autograd Nodes"
        warnings.warn(f"Using a non-full backward hook {msg} is deprecated and will be removed "
                      "in future versions. This hook will be missing some grad_input. Please "
                      "use register_full_backward_hook to get the documented behavior.",
                      FutureWarning, stacklevel=4)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args) -> None | new args`` (or ``hook(module, args, kwargs) ->
        None | (args, kwargs)`` with ``with_kwargs=True``) before ``forward``."""
        h = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[h.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[h.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        self.__dict__["_hooked"] = True
        return h

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """``hook(module, args, output) -> None | new output`` after ``forward``
        (``always_call``: also when forward raised, with output None)."""
        h = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                            self._forward_hooks_always_called)
        self._forward_hooks[h.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[h.id] = True
        if always_call:
            self._forward_hooks_always_called[h.id] = True
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        self.__dict__["_hooked"] = True
        return h

    # ---- state dicts ----------------------------------------------------------------------------

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before this module saves its state."""
        h = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[h.id] = hook
        return h

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after it saved its state
        (edits ``state_dict`` in place; must return None)."""
        def checked(module, state_dict, prefix, local_metadata):
            if hook(module, state_dict, prefix, local_metadata) is not None:
                raise RuntimeError("state_dict post-hook must return None")
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = checked
        return h

    def _register_state_dict_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata) -> None | state_dict``: the
        older private form, whose return value replaces the state dict."""
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = hook
        return h

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """The older private form: ``hook(state_dict, prefix, local_metadata, strict,
        missing_keys, unexpected_keys, error_msgs)`` (with ``module`` first if
        ``with_module``)."""
        if with_module:
            return self.register_load_state_dict_pre_hook(hook)
        return self.register_load_state_dict_pre_hook(lambda module, *a: hook(*a))

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module loads its part."""
        h = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[h.id] = hook
        return h

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after ``load_state_dict`` (may edit the
        missing/unexpected key lists in place)."""
        h = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[h.id] = hook
        return h

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of parameters and persistent buffers by dotted name (PyTorch's
        keys), with PyTorch's ``_metadata`` attribute (each module's version)."""
        if args:  # the deprecated positional form (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix,
                                                             keep_vars][len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=None):
        # PyTorch's signature: load_state_dict(assign=True) arrives as
        # local_metadata["assign_to_params_buffers"] (overrides in other libraries, such as
        # torchmetrics' Metric, take exactly these seven arguments)
        if assign is None:
            assign = bool(local_metadata.get("assign_to_params_buffers", False))
        for hook in self._load_state_dict_pre_hooks.values():
            hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                 unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, fiamma.Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  f"fiamma.Tensor or Tensor-like object from checkpoint but "
                                  f"received {type(value)}")
                continue
            if isinstance(param, UninitializedTensorMixin):
                # a lazy module's placeholder (its load hook materialised it from an
                # initialised value): a placeholder loaded into a placeholder stays one
                continue
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{fiamma.Size(value.shape)} from checkpoint, the shape in "
                                  f"current model is {fiamma.Size(param.shape)}.")
                continue
            try:
                with fiamma.no_grad():
                    if importlib.import_module(
                            "fiamma.__future__").get_swap_module_params_on_conversion():
                        # PyTorch's swap path: Tensor.module_load gives what is swapped in
                        new = param.module_load(value, assign=assign)
                        if new is value or new is param:
                            raise RuntimeError(
                                "module_load returned one of self or other, please .detach() "
                                "the result if returning one of the inputs in module_load")
                        if isinstance(param, Parameter):
                            if not isinstance(new, Parameter):
                                new = Parameter(new, requires_grad=param.requires_grad)
                            else:
                                new.requires_grad_(param.requires_grad)
                        fiamma.utils.swap_tensors(param, new)
                        del new
                    elif assign:
                        if isinstance(param, Parameter):
                            new = Parameter(value, requires_grad=param.requires_grad)
                            setattr(self, name, new)
                        else:
                            setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as e:
                error_msgs.append(f'While copying the parameter named "{key}", whose '
                                  f"dimensions in the model are {fiamma.Size(param.shape)} and "
                                  f"whose dimensions in the checkpoint are "
                                  f"{fiamma.Size(value.shape)}, an exception occurred : "
                                  f"{e.args}.")
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    head = rest.split(".", 1)[0]
                    if head not in self._modules and rest not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` (keys as ``state_dict()`` makes
        them). Returns ``(missing_keys, unexpected_keys)``; with ``strict`` any of those, or
        a shape mismatch, raises. ``assign=True`` takes the checkpoint's tensors instead of
        copying into the existing ones."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata = {**local_metadata, "assign_to_params_buffers": True}
            module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing,
                                         unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, keys)

        load(self)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(
                    f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(
                    f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing, pickling --------------------------------------------------------------------

    def extra_repr(self):
        """The text inside the parentheses of this module's repr (override in layers)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(m), 2))
        head = self._get_name() + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks",
                     "_backward_pre_hooks", "_state_dict_hooks",
                     "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                     "_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        self.__dict__.setdefault("_hooked", True)
        for name in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called"):
            self.__dict__.setdefault(name, {})


def _is_traceable_wrapper(t):
    """A ``__torch_dispatch__`` wrapper with ``__tensor_flatten__`` (PyTorch swaps those on
    conversion whatever the switch says)."""
    c = type(t)
    return c.__torch_dispatch__ is not fiamma.Tensor.__torch_dispatch__ and hasattr(
        c, "__tensor_flatten__")
