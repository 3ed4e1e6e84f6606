"""``Proxy``: the stand-in value a symbolic trace passes through a program; every operation
on it records a Node instead of computing."""

import dis
import inspect
import operator

from .node import map_aggregate

__all__ = ["Proxy", "Attribute", "ParameterProxy", "TraceError", "GraphAppendingTracer"]


class TraceError(ValueError):
    """A program did something symbolic tracing cannot record (control flow on a traced
    value, iterating over one)."""


class Proxy:
    """A traced value: operators (``x + 1``, ``x[0]``, ``-x``, ``x @ w``), attribute reads
    (``x.shape``) and method calls (``x.view(...)``) record ``call_function``,
    ``getattr`` and ``call_method`` nodes in the tracer's graph.

    Control flow on a Proxy (``if x.sum() > 0:``), ``len(x)`` and iterating over it
    (``for row in x:``) cannot be recorded: they raise :class:`TraceError` (make the condition
    a ``concrete_args`` value, or wrap the code in a function with :func:`fiamma.fx.wrap`).
    Unpacking a fixed number of values (``a, b = x.shape``) works.

    >>> import fiamma.fx as fx
    >>> def f(x):
    ...     return (x + 1).relu() * x.shape[0]
    >>> [n.op for n in fx.symbolic_trace(f).graph.nodes]
    ['placeholder', 'call_function', 'call_method', 'call_function', 'call_function', \
'call_function', 'output']
    """

    def __init__(self, node, tracer=None):
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node
        from . import _patching

        if not _patching.tracing[0]:  # made by hand: fiamma's functions record on it
            _patching.hold(self)

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, k):
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        frame = inspect.currentframe().f_back
        inst = _instruction_at(frame.f_code, frame.f_lasti)
        if inst is not None and inst.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(inst.argval))
        return self.tracer.iter(self)

    def __bool__(self):
        return self.tracer.to_bool(self)

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call fiamma.fx.wrap('len') at "
                           "module scope")

    def keys(self):
        return self.tracer.keys(self)

    def __setitem__(self, idx, value):
        self.tracer.create_proxy("call_function", operator.setitem, (self, idx, value), {})

    __hash__ = object.__hash__

    def __deepcopy__(self, memo):
        raise TraceError(f"deepcopy of {self!r} while tracing: a traced value cannot be copied")


class ParameterProxy(Proxy):
    """A parameter's Proxy whose shape queries answer with the parameter's own values
    (``Tracer(param_shapes_constant=True)``)."""

    def __init__(self, node, tracer, param):
        super().__init__(node, tracer)
        self.param = param

    @property
    def shape(self):
        return self.param.shape

    @property
    def ndim(self):
        return self.param.ndim

    def size(self, dim=None):
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self):
        return self.param.dim()

    def numel(self):
        return self.param.numel()

    def nelement(self):
        return self.param.numel()


def GraphAppendingTracer(graph):
    """A tracer that appends the nodes its Proxies record to ``graph`` (for writing passes
    with Proxy arithmetic: ``fx.Proxy(node, GraphAppendingTracer(new_graph)) * 2``). Tensor
    constants it meets become attributes ``_tensor_constant<i>`` of its own empty root
    module, which the GraphModule built from the graph must then be given."""
    import fiamma.nn as nn

    from ._symbolic_trace import Tracer

    tracer = Tracer()
    tracer.graph = graph
    tracer.root = nn.Module()
    return tracer


def _instruction_at(code, lasti):
    for inst in dis.get_instructions(code):
        if inst.offset == lasti:
            return inst
    return None


class Attribute(Proxy):
    """``proxy.name``: becomes a ``getattr`` node when used as a value, or a ``call_method``
    node when called (``x.relu()``)."""

    def __init__(self, root, attr):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


_BINARY = ["add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift",
           "and_", "or_", "xor", "matmul"]
_COMPARE = ["eq", "ne", "lt", "gt", "le", "ge", "getitem"]
_UNARY = ["neg", "pos", "invert", "abs"]


for _name in _BINARY:
    _dunder = _name.rstrip("_")
    _op = getattr(operator, _name)

    def _fwd(self, other, _op=_op):
        return self.tracer.create_proxy("call_function", _op, (self, other), {})

    def _rev(self, other, _op=_op):
        return self.tracer.create_proxy("call_function", _op, (other, self), {})
    setattr(Proxy, f"__{_dunder}__", _fwd)
    setattr(Proxy, f"__r{_dunder}__", _rev)

for _name in _COMPARE:
    def _cmp(self, other, _op=getattr(operator, _name)):
        return self.tracer.create_proxy("call_function", _op, (self, other), {})
    setattr(Proxy, f"__{_name}__", _cmp)

for _name in _UNARY:
    def _un(self, _op=getattr(operator, _name)):
        return self.tracer.create_proxy("call_function", _op, (self,), {})
    setattr(Proxy, f"__{_name}__", _un)



def has_proxy(a):
    """True if the argument structure ``a`` holds a Proxy."""
    found = []

    def check(x):
        if isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate(a, check)
    return bool(found)
