"""Symbolic tracing: run a module's ``forward`` on Proxies and record what it does."""

import builtins
import inspect
import math
import operator
import types

import fiamma
import fiamma.nn as nn

from . import _patching
from ._patching import _Patcher, _recording
from .graph import Graph
from .node import _side_effectful_functions
from .proxy import Attribute, ParameterProxy, Proxy, TraceError

__all__ = ["Tracer", "symbolic_trace", "wrap", "PH"]

# (globals dict, name) of functions registered with fiamma.fx.wrap
_wrapped_fns_to_patch = []


class _PH:
    def __repr__(self):
        return "PH"


PH = _PH()  # a concrete_args value that keeps the argument a traced input


def _assert(condition, message):
    """``assert condition, message`` as a graph node (guards of ``concrete_args``)."""
    if not condition:
        raise AssertionError(message)


def _assert_is_none(value, message):
    """Guard of a ``concrete_args`` value specialised to None."""
    if value is not None:
        raise AssertionError(message)


_side_effectful_functions.update((_assert, _assert_is_none))


def wrap(fn_or_name):
    """Record calls of a module-level function as one ``call_function`` node instead of
    tracing into it (for code a trace cannot follow: control flow, ``len``, NumPy). Call at
    module scope, with the function or its name; returns its argument.

    >>> import fiamma, fiamma.fx as fx
    >>> module_src = '''
    ... import fiamma.fx
    ... def clamp_by_len(x):
    ...     return x.clamp(max=len(x))      # len() of a Proxy cannot be traced
    ... fiamma.fx.wrap("clamp_by_len")
    ... def f(x):
    ...     return clamp_by_len(x) + 1
    ... '''
    >>> ns = {}
    >>> exec(module_src, ns)
    >>> gm = fx.symbolic_trace(ns["f"])
    >>> [n.name for n in gm.graph.nodes]
    ['x', 'clamp_by_len', 'add', 'output']
    >>> gm(fiamma.tensor([1.0, 5.0]))
    tensor([2., 3.])
    """
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("fiamma.fx.wrap must be called at the top level of a module")
    if callable(fn_or_name):
        name = fn_or_name.__name__
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError(f"fiamma.fx.wrap: expected a function or its name, got "
                        f"{type(fn_or_name).__name__}")
    _wrapped_fns_to_patch.append((frame.f_globals, name))
    return fn_or_name


class Tracer:
    """Turns a module's (or function's) ``forward`` into a :class:`~fiamma.fx.Graph` by
    running it on :class:`~fiamma.fx.Proxy` inputs.

    Submodules for which :meth:`is_leaf_module` is true (fiamma.nn's own layers, except
    ``Sequential``) are recorded as one ``call_module`` node; the others are traced through.
    Functions of ``fiamma``, ``fiamma.nn.functional``, ``fiamma.linalg``, ``fiamma.special``,
    ``fiamma.fft`` and the ``autowrap_modules`` (``math``), and the ``autowrap_functions``,
    become ``call_function`` nodes when called with a Proxy. Subclass and override
    ``is_leaf_module``/``create_proxy``/``call_module`` to customise tracing.

    >>> import fiamma, fiamma.fx as fx
    >>> class MyTracer(fx.Tracer):
    ...     def is_leaf_module(self, m, qualname):
    ...         return False          # trace into every layer
    >>> net = fiamma.nn.Sequential(fiamma.nn.Linear(2, 2), fiamma.nn.ReLU())
    >>> g = MyTracer().trace(net)
    >>> [n.op for n in g.nodes][:3]
    ['placeholder', 'get_attr', 'get_attr']
    """

    proxy_buffer_attributes = False

    def __init__(self, autowrap_modules=(math,), autowrap_functions=(),
                 param_shapes_constant=False):
        self._autowrap_modules = tuple(autowrap_modules)
        self._autowrap_functions = tuple(autowrap_functions)
        self.param_shapes_constant = param_shapes_constant
        self.graph = None
        self.root = None
        self.submodule_paths = None
        self.tensor_attrs = {}
        self._param_names = self._buffer_names = None

    # ---- nodes and proxies ----------------------------------------------------------------

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        """Insert a node in the graph being built (override to post-process nodes)."""
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node):
        """The Proxy for a new node."""
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        """Record a node with these arguments (Proxies in them become Node references,
        tensors and parameters become ``get_attr`` nodes) and return its Proxy."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple) or not isinstance(kwargs_, dict):
            raise TypeError("Tracer.create_proxy: args must be a tuple and kwargs a dict")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a):
        """A value as a node argument: Proxies to their nodes, a module's parameters,
        buffers and tensor attributes to ``get_attr`` nodes, other tensors to new constant
        attributes of the root (``_tensor_constant0``, ...); plain Python values as they are.
        Other objects raise NotImplementedError naming their type."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, fiamma.Tensor):
            qualname, obj = self.tensor_attrs.get(id(a), (None, None))
            if obj is not a:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qualname = f"_tensor_constant{i}"
                setattr(self.root, qualname, a)
                self.tensor_attrs[id(a)] = (qualname, a)
            return self.create_node("get_attr", qualname, (), {})
        if isinstance(a, nn.Module):
            path = self.path_of_module(a)
            return self.create_node("get_attr", path, (), {})
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(e) for e in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(e) for e in a)
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                k = self.create_arg(k)
                if not isinstance(k, (str, int, float, bool, type(None))):
                    raise NotImplementedError(f"Tracer.create_arg: dict key of type "
                                              f"{type(k).__name__} is not supported")
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if a is None or a is Ellipsis or isinstance(a, (bool, int, float, complex, str, bytes)):
            return a
        if isinstance(a, (fiamma.dtype, fiamma.device, fiamma.layout, type,
                          types.FunctionType, types.BuiltinFunctionType)):
            return a
        raise NotImplementedError(f"Tracer.create_arg: argument of type {type(a).__name__} "
                                  "cannot be recorded in a graph")

    def to_bool(self, obj):
        """A Proxy used as a Python bool: raises TraceError (override to decide)."""
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def iter(self, obj):
        """Iterating over a Proxy: raises TraceError (override to decide)."""
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the "
                         "Proxy is used in a loop or as a *args or **kwargs function argument. "
                         "Unpacking a fixed count (a, b = x) works; for loops over a "
                         "tensor's rows, make the code a leaf with fiamma.fx.wrap")

    def keys(self, obj):
        """``**proxy``: records ``proxy.keys()``."""
        return Attribute(obj, "keys")()

    # ---- modules --------------------------------------------------------------------------

    def is_leaf_module(self, m, module_qualified_name):
        """True for fiamma.nn's own modules (not ``Sequential``): recorded as ``call_module``
        instead of traced through."""
        mod = type(m).__module__ or ""
        return (mod == "fiamma.nn" or mod.startswith("fiamma.nn.")) \
            and not isinstance(m, nn.Sequential)

    def path_of_module(self, mod):
        """The dotted path of submodule ``mod`` in the root; NameError if it is not one."""
        if self.submodule_paths is None:
            self.submodule_paths = {id(m): n for n, m in self.root.named_modules()}
        path = self.submodule_paths.get(id(mod))
        if path is None:
            raise NameError(f"module {type(mod).__name__} is not installed as a submodule of "
                            "the traced module")
        return path

    def call_module(self, m, forward, args, kwargs):
        """A submodule call: a ``call_module`` node for leaves, else its traced forward."""
        qualname = self.path_of_module(m)
        if not self.is_leaf_module(m, qualname):
            self._autowrap_globals(getattr(type(m).forward, "__globals__", {}))
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qualname, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """A module attribute read while tracing: parameters (and buffers with
        ``proxy_buffer_attributes``) become ``get_attr`` proxies, one per parameter. With
        ``param_shapes_constant`` their ``shape``, ``size()``, ``dim()``, ``ndim`` and
        ``numel()`` are the parameter's own (Python values, not nodes)."""
        if not isinstance(attr_val, fiamma.Tensor):
            return attr_val
        is_param = isinstance(attr_val, nn.Parameter)
        if not is_param and not self.proxy_buffer_attributes:
            return attr_val
        names = self._param_names if is_param else self._buffer_names
        if names is None:
            named = self.root.named_parameters() if is_param else self.root.named_buffers()
            names = {id(t): (n, t) for n, t in named}
            if is_param:
                self._param_names = names
            else:
                self._buffer_names = names
        n, t = names.get(id(attr_val), (None, None))
        if t is not attr_val:
            return attr_val
        if n not in parameter_proxy_cache:
            def factory(node):
                if self.param_shapes_constant:
                    return ParameterProxy(node, self, attr_val)
                return self.proxy(node)
            parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {},
                                                         proxy_factory_fn=factory)
        return parameter_proxy_cache[n]

    # ---- trace ----------------------------------------------------------------------------

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """Placeholders for the traced function's parameters; returns the function to call
        and its positional and keyword arguments. ``concrete_args`` values are passed as they
        are, guarded by assert nodes. A ``*args`` parameter becomes one placeholder (a
        tuple-valued Proxy) after the named ones, as in PyTorch; ``**kwargs`` raises."""
        sig = inspect.signature(root_fn)
        params = list(sig.parameters.values())
        if is_module:
            params = params[1:]
        if any(p.kind is p.VAR_KEYWORD for p in params):
            name = next(p.name for p in params if p.kind is p.VAR_KEYWORD)
            raise TraceError(f"symbolic_trace: cannot trace a forward with **{name}: its "
                             "keys are not known; name the parameters explicitly")
        star = next((p for p in params if p.kind is p.VAR_POSITIONAL), None)
        if star is not None:
            # the *args parameter becomes a plain positional one, after the named ones
            if not isinstance(root_fn, types.FunctionType):
                raise TraceError(f"symbolic_trace: cannot trace *{star.name} of {root_fn!r}")
            root_fn = _varargs_as_positional(root_fn)
            params = [p for p in params if p is not star]
        concrete_args = dict(concrete_args or {})
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise TypeError(f"symbolic_trace: concrete_args names {sorted(unknown)} are not "
                            f"parameters of {getattr(root_fn, '__qualname__', root_fn)}")
        args, kwargs = [], {}
        for p in params:
            default = p.default
            if p.name in concrete_args and concrete_args[p.name] is not PH:
                value = concrete_args[p.name]
                self._guard_concrete(p, value)
                val = value
            else:
                defaults = () if default is p.empty else (default,)
                val = self.create_proxy("placeholder", p.name, defaults, {},
                                        type_expr=root_fn.__annotations__.get(p.name))
            if p.kind is p.KEYWORD_ONLY and star is None:
                kwargs[p.name] = val
            else:
                args.append(val)
        if star is not None:
            args.append(self.create_proxy("placeholder", "*" + star.name, (), {}))
        return root_fn, args, kwargs

    def _guard_concrete(self, p, value):
        default = () if p.default is p.empty else (p.default,)
        out = self.create_proxy("placeholder", f"{p.name}_1", default, {})
        msg = f"{p.name} has been specialized to have value {value!r} but got another value"
        if value is None:
            self.create_proxy("call_function", _assert_is_none, (out, msg), {})
        elif type(value) in (bool, int, float, str, complex):
            eq = self.create_proxy("call_function", operator.eq, (out, value), {})
            self.create_proxy("call_function", _assert, (eq, msg), {})
        # other values (modules, tensors, containers) are baked in as PyTorch does, unguarded

    def _autowrap_globals(self, globs):
        if id(globs) in self._patcher._patched_globals:
            return
        self._patcher._patched_globals.add(id(globs))
        for name, value in list(globs.items()):
            wrapped = self._wrap_ids.get(id(value))
            if wrapped is not None and wrapped.__fx_original__ is value:
                self._patcher.setattr(globs, name, wrapped)

    def _install_patches(self):
        patcher = self._patcher
        self._wrap_ids = {}
        for mod, names in _patching.function_namespaces(self._autowrap_modules):
            for name, value in list(names.items()):
                if name.startswith("__") or not isinstance(
                        value, (types.FunctionType, types.BuiltinFunctionType)):
                    continue
                w = self._wrap_ids.get(id(value)) or _recording(self, value)
                self._wrap_ids[id(value)] = w
                patcher.setattr(mod, name, w)
        for fn in self._autowrap_functions + (_assert, _assert_is_none):
            self._wrap_ids[id(fn)] = _recording(self, fn)  # also a retraced GraphModule's
        for globs, name in _wrapped_fns_to_patch:
            if name in globs:
                orig = globs[name]
                patcher.setattr(globs, name, _recording(self, orig))
            elif name in vars(builtins):
                patcher.setattr(globs, name, _recording(self, vars(builtins)[name]))
            else:
                raise NameError(f"fiamma.fx.wrap: {name!r} is not defined in its module")

        tracer = self
        orig_call = nn.Module.__call__
        orig_getattr = nn.Module.__getattr__
        cache = {}

        def module_call(mod, *args, **kwargs):
            def forward(*a, **k):
                return orig_call(mod, *a, **k)
            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr(mod, attr):
            value = orig_getattr(mod, attr)
            return tracer.getattr(attr, value, cache)
        patcher.setattr(nn.Module, "__call__", module_call)
        patcher.setattr(nn.Module, "__getattr__", module_getattr)

    def trace(self, root, concrete_args=None):
        """Trace ``root`` (a Module or a function) and return the Graph. ``concrete_args``
        maps parameter names to values that are fixed for this trace (for example a flag the
        code branches on); the generated code asserts they are passed unchanged."""
        if isinstance(root, nn.Module):
            self.root = root
            fn = type(root).forward
            is_module = True
        elif callable(root):
            self.root = nn.Module()
            fn = root
            is_module = False
        else:
            raise TypeError(f"Tracer.trace: expected a Module or a function, got "
                            f"{type(root).__name__}")
        self.graph = Graph(tracer_cls=type(self))
        self.submodule_paths = None
        self._param_names = self._buffer_names = None
        self.tensor_attrs = {}
        for mname, m in self.root.named_modules():
            for k, v in _tensor_attributes(m):
                self.tensor_attrs.setdefault(id(v), (f"{mname}.{k}" if mname else k, v))
        self._patcher = _Patcher()
        _patching.tracing[0] += 1
        try:
            self._install_patches()
            self._autowrap_globals(getattr(fn, "__globals__", {}))
            fn, args, kwargs = self.create_args_for_root(fn, is_module, concrete_args)
            if is_module:
                result = fn(root, *args, **kwargs)
            else:
                result = fn(*args, **kwargs)
            self.create_node("output", "output", (self.create_arg(result),), {},
                             type_expr=getattr(fn, "__annotations__", {}).get("return"))
        finally:
            self._patcher.restore()
            _patching.tracing[0] -= 1
        return self.graph


def _varargs_as_positional(fn):
    """``fn`` with its ``*args`` turned into one more positional parameter (keyword-only
    parameters become positional before it): the code object's variable order already is
    positional, keyword-only, then the ``*args`` name."""
    co = fn.__code__
    code = co.replace(co_argcount=co.co_argcount + co.co_kwonlyargcount + 1,
                      co_kwonlyargcount=0, co_flags=co.co_flags & ~inspect.CO_VARARGS)
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def _tensor_attributes(m):
    yield from ((k, v) for k, v in m._parameters.items() if v is not None)
    yield from ((k, v) for k, v in m._buffers.items() if v is not None)
    yield from ((k, v) for k, v in vars(m).items() if isinstance(v, fiamma.Tensor))


def symbolic_trace(root, concrete_args=None):
    """Trace a Module or function into a :class:`~fiamma.fx.GraphModule` with the same
    parameters and a ``forward`` generated from the recorded graph.

    >>> import fiamma, fiamma.fx as fx
    >>> net = fiamma.nn.Sequential(fiamma.nn.Linear(4, 3), fiamma.nn.ReLU())
    >>> gm = fx.symbolic_trace(net)
    >>> print(gm.code.strip())
    def forward(self, input_1):
        _0 = getattr(self, "0")(input_1);  input_1 = None
        _1 = getattr(self, "1")(_0);  _0 = None
        return _1
    >>> x = fiamma.randn(2, 4)
    >>> bool((gm(x) == net(x)).all())
    True
    """
    from .graph_module import GraphModule

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, nn.Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
