"""``Node``: one operation of an fx :class:`~fiamma.fx.Graph` (PyTorch's ``torch.fx.Node``)."""

import builtins
import operator
import types

__all__ = ["Node", "map_arg", "map_aggregate", "has_side_effect", "Target", "Argument",
           "BaseArgumentTypes"]

_OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output",
        "root")


def _type_aliases():
    import collections.abc as abc
    import typing

    import fiamma

    base = typing.Union[str, int, float, bool, complex, fiamma.dtype, fiamma.Tensor,
                        fiamma.device, fiamma.memory_format, fiamma.layout]
    target = typing.Union[abc.Callable[..., typing.Any], str]
    argument = typing.Optional[typing.Union[
        tuple["Argument", ...], abc.Sequence["Argument"], abc.Mapping[str, "Argument"], slice,
        range, "Node", base]]
    return base, target, argument


# the annotation types of torch.fx.node: what a Node's args may hold, what its target is
BaseArgumentTypes, Target, Argument = _type_aliases()

# call_function targets that dead-code elimination keeps even without users
_side_effectful_functions = {operator.setitem, builtins.print}


def has_side_effect(fn):
    """Mark ``fn`` as side-effectful: ``Graph.eliminate_dead_code`` keeps its calls.

    >>> import fiamma.fx as fx
    >>> def log(x): print(x)
    >>> fx.has_side_effect(log) is log
    True
    """
    _side_effectful_functions.add(fn)
    return fn


def map_aggregate(a, fn):
    """Apply ``fn`` to every leaf of ``a`` (tuples, lists, dicts, slices are walked)."""
    if isinstance(a, tuple):
        t = tuple(map_aggregate(e, fn) for e in a)
        return t if not hasattr(a, "_fields") else type(a)(*t)  # namedtuple
    if isinstance(a, list):
        return [map_aggregate(e, fn) for e in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a, fn):
    """Apply ``fn`` to every :class:`Node` inside the argument structure ``a``.

    >>> import fiamma.fx as fx
    >>> g = fx.Graph(); x = g.placeholder("x")
    >>> fx.map_arg((x, [x, 1]), lambda n: n.name)
    ('x', ['x', 1])
    """
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _nodes_in(a, out):
    map_arg(a, lambda n: out.setdefault(n, None))
    return out


class Node:
    """One operation of a Graph: ``op`` is one of ``placeholder``, ``get_attr``,
    ``call_function``, ``call_method``, ``call_module``, ``output``; ``target`` what it calls
    (a function, a method name, a module's or attribute's dotted path, or the input's name);
    ``args``/``kwargs`` its arguments, which may hold other Nodes. ``users`` are the nodes that
    use this one; ``meta`` is free-form per-node data (ShapeProp puts ``tensor_meta`` there).

    >>> import operator, fiamma.fx as fx
    >>> g = fx.Graph()
    >>> x = g.placeholder("x")
    >>> y = g.call_function(operator.add, (x, 1))
    >>> y.op, y.target is operator.add, y.args, list(x.users)
    ('call_function', True, (x, 1), [add])
    """

    def __init__(self, graph, name, op, target, args, kwargs, return_type=None):
        if op not in _OPS:
            raise ValueError(f"Node: op must be one of {_OPS[:-1]}, got {op!r}")
        if op in ("call_method", "call_module", "get_attr", "placeholder", "output") \
                and not isinstance(target, str):
            raise ValueError(f"Node: a {op} node's target must be a str, got "
                             f"{type(target).__name__}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node: a call_function node's target must be callable, got "
                             f"{target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes = {}
        self._args = ()
        self._kwargs = {}
        self.users = {}
        self.type = return_type
        self._prev = self
        self._next = self
        self._erased = False
        self.meta = {}
        self._update_args_kwargs(args, kwargs)

    # ---- linked list ----------------------------------------------------------------------

    @property
    def next(self):
        """The node after this one in the graph's order."""
        return self._next

    @property
    def prev(self):
        """The node before this one in the graph's order."""
        return self._prev

    def _remove_from_list(self):
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    def prepend(self, x):
        """Move (or insert) node ``x`` right before this one."""
        if self.graph is not x.graph:
            raise ValueError("Node.prepend: the nodes belong to different graphs")
        if self is x:
            raise ValueError("Node.prepend: cannot prepend a node to itself")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x):
        """Move (or insert) node ``x`` right after this one."""
        self._next.prepend(x)

    # ---- arguments and users --------------------------------------------------------------

    @property
    def args(self):
        """The positional arguments (a tuple); setting them updates ``users``."""
        return self._args

    @args.setter
    def args(self, a):
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self):
        """The keyword arguments (a dict); setting them updates ``users``."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k):
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self):
        """Every Node in ``args`` and ``kwargs``, in order, without repeats."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args, kwargs):
        args = tuple(args) if args is not None else ()
        kwargs = dict(kwargs) if kwargs is not None else {}
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = {}
        _nodes_in(args, self._input_nodes)
        _nodes_in(kwargs, self._input_nodes)
        for n in self._input_nodes:
            if n.graph is not self.graph:
                raise ValueError(f"Node {self.name}: argument {n.name} belongs to another graph")
            n.users.setdefault(self, None)

    def update_arg(self, idx, arg):
        """Set positional argument ``idx`` to ``arg``."""
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def update_kwarg(self, key, arg):
        """Set keyword argument ``key`` to ``arg``."""
        kwargs = dict(self._kwargs)
        kwargs[key] = arg
        self.kwargs = kwargs

    def replace_input_with(self, old_input, new_input):
        """Use ``new_input`` wherever this node's arguments use ``old_input``."""
        def swap(n):
            return new_input if n is old_input else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, replace_with, delete_user_cb=None, *, propagate_meta=False):
        """Make every user of this node use ``replace_with`` instead; returns those users.

        ``delete_user_cb(user)`` returning False keeps that user on this node.
        ``propagate_meta=True`` copies this node's ``meta`` into ``replace_with`` (which must
        have none yet).

        >>> import fiamma, fiamma.fx as fx
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> r = g.call_function(fiamma.relu, (x,)); o = g.output(r)
        >>> s = g.call_function(fiamma.sigmoid, (x,))
        >>> r.replace_all_uses_with(s)
        [output]
        """
        if propagate_meta:
            if replace_with.meta:
                raise RuntimeError("Node.replace_all_uses_with(propagate_meta=True): the "
                                   f"replacement {replace_with.name} already has meta")
            replace_with.meta.update(self.meta)
        changed = []
        for user in list(self.users):
            if delete_user_cb is not None and not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def is_impure(self):
        """True if dead-code elimination must keep this node though nothing uses it:
        placeholders, the output, side-effectful functions (``operator.setitem``, asserts,
        ``has_side_effect``), operators whose schema writes an argument, in-place methods
        (``x.add_(1)``) and modules with a true ``_is_impure`` attribute."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            if self.target in _side_effectful_functions:
                return True
            # a fiamma.library operator that writes to an argument (PyTorch: a mutable schema)
            return bool(getattr(getattr(self.target, "_schema", None), "is_mutable", False))
        if self.op == "call_method":
            t = self.target
            return t.endswith("_") and not t.endswith("__")
        if self.op == "call_module":
            mod = self.graph.owning_module
            if mod is None:
                return False
            return bool(getattr(mod.get_submodule(self.target), "_is_impure", False))
        return False

    # ---- printing ---------------------------------------------------------------------------

    def __repr__(self):
        return self.name

    def _pretty_target(self):
        t = self.target
        if isinstance(t, str):
            return t
        return _qualified_name(t)

    def format_node(self):
        """One line describing the node (what ``str(graph)`` prints)."""
        def fmt(a):
            return map_arg(a, lambda n: _Raw("%" + n.name))
        if self.op == "placeholder":
            s = f"%{self.name} : [num_users={len(self.users)}] = placeholder[target={self.target}]"
            if self.args:
                s += f"(default={self.args[0]!r})"
            return s
        if self.op == "output":
            return f"return {fmt(self.args[0]) if self.args else None!r}"
        return (f"%{self.name} : [num_users={len(self.users)}] = "
                f"{self.op}[target={self._pretty_target()}](args = {fmt(self.args)!r}, "
                f"kwargs = {fmt(self.kwargs)!r})")


class _Raw(str):
    def __repr__(self):
        return str(self)


def _qualified_name(fn):
    """``module.name`` of a function, for printing (``operator.add``, ``fiamma.relu``)."""
    if isinstance(fn, types.BuiltinFunctionType) and fn.__module__ == "_operator":
        return "operator." + fn.__name__
    if getattr(fn, "__module__", None) == "builtins":
        return fn.__name__
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    mod = getattr(fn, "__module__", None)
    from ._codegen import _op_path, public_module_of

    pub = public_module_of(fn)
    if pub is not None:
        return f"{pub}.{fn.__name__}"
    if _op_path(fn) is not None:
        return "fiamma." + _op_path(fn)
    return f"{mod}.{name}" if mod else name
