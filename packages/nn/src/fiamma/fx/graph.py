"""``Graph``: the ordered list of Nodes a GraphModule runs (PyTorch's ``torch.fx.Graph``)."""

import builtins
import copy
import inspect
import re

from ._codegen import Namespace, _Emitter
from .node import Node, _qualified_name, map_arg

__all__ = ["Graph"]

_EMPTY = inspect.Signature.empty


class _NodeList:
    """A live view of a graph's nodes in order (``len``, iteration, ``reversed``)."""

    def __init__(self, graph, reverse=False):
        self._graph = graph
        self._reverse = reverse

    def __len__(self):
        return self._graph._len

    def __iter__(self):
        root = self._graph._root
        cur = root._prev if self._reverse else root._next
        while cur is not root:
            nxt = cur._prev if self._reverse else cur._next
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self):
        return iter(_NodeList(self._graph, not self._reverse))

    def __repr__(self):
        return repr(list(self))


class _InsertPoint:
    def __init__(self, graph, new_insert):
        self.graph = graph
        self.orig, graph._insert = graph._insert, new_insert

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.graph._insert = self.orig


class Graph:
    """A program as a list of :class:`Node` s: inputs (``placeholder``), attribute reads
    (``get_attr``), calls (``call_function``/``call_method``/``call_module``) and one
    ``output``. Build one by tracing (:func:`fiamma.fx.symbolic_trace`) or by hand; rewrite it,
    then wrap it in a :class:`~fiamma.fx.GraphModule` to run it.

    >>> import fiamma, fiamma.fx as fx
    >>> g = fx.Graph()
    >>> x = g.placeholder("x")
    >>> y = g.call_function(fiamma.relu, (x,))
    >>> _ = g.output(y)
    >>> gm = fx.GraphModule(fiamma.nn.Module(), g)
    >>> gm(fiamma.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None):
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._graph_namespace = Namespace()
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._insert = self._root.prepend

    @property
    def owning_module(self):
        """The GraphModule this graph belongs to (None for a free graph)."""
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod):
        self._owning_module = mod

    @property
    def nodes(self):
        """The nodes in order (a live view: ``len(g.nodes)``, ``for n in g.nodes``)."""
        return _NodeList(self)

    def find_nodes(self, *, op, target=None):
        """The nodes with this ``op`` (and ``target``, if given), in order."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # ---- building -----------------------------------------------------------------------

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        """Insert a new node at the current insertion point and return it."""
        if op == "output" and any(n.op == "output" for n in self.nodes):
            raise RuntimeError("Graph.create_node: the graph already has an output node")
        if op == "call_function":  # a function fiamma.fx replaced while Proxies live: its own
            target = getattr(target, "__fx_original__", target)
        candidate = name if name is not None else self._target_to_str(target)
        name = self._graph_namespace.create_name(candidate, None)
        n = Node(self, name, op, target, args, kwargs, type_expr)
        self._insert(n)
        self._len += 1
        return n

    @staticmethod
    def _target_to_str(target):
        if isinstance(target, str):
            if target.startswith("*"):
                return target.lstrip("*")
            return target
        name = getattr(target, "__name__", None) or type(target).__name__
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()  # CamelCase -> camel_case

    def placeholder(self, name, type_expr=None, default_value=_EMPTY):
        """An input of the graph called ``name`` (``default_value`` makes it optional)."""
        args = () if default_value is _EMPTY else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        """Read the attribute at dotted path ``qualified_name`` of the owning module."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name, args=None, kwargs=None, type_expr=None):
        """Call the submodule at dotted path ``module_name``."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name, args=None, kwargs=None, type_expr=None):
        """Call method ``method_name`` of ``args[0]`` with the remaining arguments."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None):
        """Call the Python callable ``the_function``."""
        return self.create_node("call_function", the_function, args, kwargs,
                                type_expr=type_expr)

    def output(self, result, type_expr=None):
        """The graph's return value (a node, or a structure holding nodes)."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node, arg_transform=lambda x: x):
        """Copy ``node`` (from any graph) into this one, mapping its node arguments through
        ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def graph_copy(self, g, val_map, return_output_node=False):
        """Copy every node of graph ``g`` except its output into this one; ``val_map`` maps
        ``g``'s nodes to the new ones (pre-seed it to substitute inputs). Returns the value
        ``g`` outputs, in this graph's nodes (or the copied output node if asked)."""
        for n in g.nodes:
            if n in val_map:
                continue
            if n.op == "output":
                rv = map_arg(n.args[0], lambda x: val_map[x])
                return (rv, n) if return_output_node else rv
            val_map[n] = self.node_copy(n, lambda x: val_map[x])
        return None

    def inserting_before(self, n=None):
        """Context manager: new nodes go right before ``n`` (the start of the graph if None).

        >>> import fiamma, fiamma.fx as fx
        >>> g = fx.Graph(); x = g.placeholder("x"); o = g.output(x)
        >>> with g.inserting_before(o):
        ...     r = g.call_function(fiamma.relu, (x,))
        >>> [n.name for n in g.nodes]
        ['x', 'relu', 'output']
        """
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("Graph.inserting_before: the node belongs to another graph")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n=None):
        """Context manager: new nodes go right after ``n`` (each after the previous one; the
        end of the graph if None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("Graph.inserting_after: the node belongs to another graph")
        return _InsertPoint(self, n.append)

    # ---- editing ------------------------------------------------------------------------

    def erase_node(self, to_erase):
        """Remove a node that nothing uses any more."""
        if to_erase.graph is not self or to_erase._erased:
            raise RuntimeError(f"Graph.erase_node: node {to_erase} is not in this graph")
        if to_erase.users:
            raise RuntimeError(f"Graph.erase_node: tried to erase node {to_erase} but it still "
                               f"has {len(to_erase.users)} users in the graph: "
                               f"{list(to_erase.users)}!")
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        self._graph_namespace.free(to_erase.name)
        to_erase._update_args_kwargs((), {})

    def eliminate_dead_code(self, is_impure_node=None):
        """Erase every node whose value is unused and that has no side effect
        (:meth:`Node.is_impure`); returns whether anything was erased.

        >>> import fiamma, fiamma.fx as fx
        >>> g = fx.Graph(); x = g.placeholder("x")
        >>> _ = g.call_function(fiamma.relu, (x,)); _ = g.output(x)
        >>> g.eliminate_dead_code(), len(g.nodes)
        (True, 2)
        """
        self.lint()
        impure = is_impure_node or (lambda n: n.is_impure())
        changed = False
        for n in reversed(self.nodes):
            if not n.users and not impure(n):
                self.erase_node(n)
                changed = True
        return changed

    def lint(self):
        """Check the graph is well formed: nodes belong to it, each argument is defined before
        its use, names are unique, targets are of the right kind and (with an owning module)
        ``get_attr``/``call_module`` targets exist. Raises RuntimeError naming the problem."""
        seen, names = set(), set()
        outputs = 0
        for n in self.nodes:
            if n.graph is not self:
                raise RuntimeError(f"Graph.lint: node {n} does not belong to this graph")
            if n.name in names:
                raise RuntimeError(f"Graph.lint: node name {n.name!r} is used twice")
            names.add(n.name)
            for inp in n.all_input_nodes:
                if inp.graph is not self:
                    raise RuntimeError(f"Graph.lint: argument {inp} of node {n} belongs to "
                                       "another graph")
                if inp not in seen:
                    raise RuntimeError(f"Graph.lint: argument {inp} of node {n} is used before "
                                       "it is defined")
                if n not in inp.users:
                    raise RuntimeError(f"Graph.lint: {n} uses {inp} but is not in its users")
            if n.op == "output":
                outputs += 1
            seen.add(n)
            mod = self._owning_module
            if mod is not None and n.op in ("get_attr", "call_module"):
                obj = mod
                for i, part in enumerate(n.target.split(".")):
                    if not hasattr(obj, part):
                        raise RuntimeError(
                            f"Graph.lint: node {n} target {n.target} references nonexistent "
                            f"attribute {part} of {'.'.join(n.target.split('.')[:i]) or 'root'}")
                    obj = getattr(obj, part)
                if n.op == "call_module" and not callable(obj):
                    raise RuntimeError(f"Graph.lint: node {n} target {n.target} is not callable")
        if outputs > 1:
            raise RuntimeError(f"Graph.lint: {outputs} output nodes (at most one allowed)")

    # ---- printing and code --------------------------------------------------------------

    def python_code(self, root_module, *, verbose=False):
        """The Python source of ``forward(root_module, ...)`` running this graph, and the
        globals it needs (a ``PythonCode`` with ``.src`` and ``.globals``)."""
        return _Emitter(self, root_module).emit()

    def __str__(self):
        lines = ["graph():"]
        lines += ["    " + n.format_node() for n in self.nodes]
        return "\n".join(lines)

    def print_tabular(self):
        """Print the nodes as a table: opcode, name, target, args, kwargs."""
        rows = [("opcode", "name", "target", "args", "kwargs")]
        for n in self.nodes:
            t = n.target if isinstance(n.target, str) else _qualified_name(n.target)
            rows.append((n.op, n.name, str(t), repr(n.args), repr(n.kwargs)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        sep = "  ".join("-" * w for w in widths)
        out = []
        for i, r in enumerate(rows):
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if i == 0:
                out.append(sep)
        builtins.print("\n".join(out))

    # ---- copying --------------------------------------------------------------------------

    def __deepcopy__(self, memo):
        g = Graph(tracer_cls=self._tracer_cls, tracer_extras=self._tracer_extras)
        memo[id(self)] = g
        val_map = {}
        rv = g.graph_copy(self, val_map, return_output_node=True)
        for old, new in val_map.items():
            new.meta = copy.deepcopy(old.meta, memo)
        if rv is not None:
            out_val, old_out = rv
            new_out = g.output(out_val, type_expr=old_out.type)
            new_out.meta = copy.deepcopy(old_out.meta, memo)
        return g

    def __reduce__(self):
        # a flat list of nodes: pickling the linked list itself recurses once per node
        rows = []
        for n in self.nodes:
            rows.append((n.name, n.op, n.target, map_arg(n.args, _NodeRef.of),
                         map_arg(n.kwargs, _NodeRef.of), n.type, n.meta))
        return (_rebuild_graph, (rows,))


class _NodeRef:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    @classmethod
    def of(cls, node):
        return cls(node.name)

    def __reduce__(self):
        return (_NodeRef, (self.name,))


def _rebuild_graph(rows):
    from .node import map_aggregate

    g = Graph()
    env = {}

    def resolve(a):
        return map_aggregate(a, lambda x: env[x.name] if isinstance(x, _NodeRef) else x)
    for name, op, target, args, kwargs, type_, meta in rows:
        n = g.create_node(op, target, resolve(args), resolve(kwargs), name, type_)
        n.meta = meta
        env[name] = n
    return g
