"""``Interpreter`` runs a GraphModule node by node; ``Transformer`` rewrites one."""

import inspect

from .graph import Graph
from .graph_module import GraphModule
from .node import map_aggregate, map_arg
from .proxy import Proxy

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs a GraphModule's graph one node at a time, calling the method named after each
    node's op (``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
    ``call_module``, ``output``) with its target and evaluated arguments. Override those (or
    :meth:`run_node`) to observe or change execution.

    >>> import fiamma, fiamma.fx as fx
    >>> class NegSigmoid(fx.Interpreter):
    ...     def call_function(self, target, args, kwargs):
    ...         if target is fiamma.sigmoid:
    ...             return fiamma.neg(fiamma.sigmoid(*args, **kwargs))
    ...         return super().call_function(target, args, kwargs)
    >>> gm = fx.symbolic_trace(lambda x: fiamma.sigmoid(x))
    >>> NegSigmoid(gm).run(fiamma.zeros(2))
    tensor([-0.5000, -0.5000])
    """

    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        if garbage_collect_values:
            # free each value after the last node that uses it
            seen = set()
            self.user_to_last_uses = {}
            for node in reversed(self.graph.nodes):
                for n in node.all_input_nodes:
                    if n not in seen:
                        seen.add(n)
                        self.user_to_last_uses.setdefault(node, []).append(n)

    def run(self, *args, initial_env=None, enable_io_processing=True):
        """Run the graph on ``args``; returns what the output node returns.
        ``initial_env`` pre-sets node values (those nodes are not run)."""
        self.env = dict(initial_env) if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback:
                    msg = f"While executing {node.format_node()}"
                    if e.args and isinstance(e.args[0], str):
                        e.args = (f"{e.args[0]}\n\n{msg}",) + e.args[1:]
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    self.env.pop(to_delete, None)
            if node.op == "output":
                return self.env[node]
        return None

    def run_node(self, n):
        """Evaluate node ``n``'s arguments from the environment and run it."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ---- one method per op ----------------------------------------------------------------

    def placeholder(self, target, args, kwargs):
        """The next positional input (or the placeholder's default)."""
        if target.startswith("**"):
            raise RuntimeError(f"Interpreter: placeholder {target} (**kwargs) is not supported")
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from None

    def get_attr(self, target, args, kwargs):
        """The module attribute at dotted path ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        """``args[0].target(*args[1:], **kwargs)``."""
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        """Call the submodule at dotted path ``target``."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        """The graph's result (``args[0]``)."""
        return args[0]

    # ---- helpers --------------------------------------------------------------------------

    def fetch_attr(self, target):
        """The attribute at dotted path ``target`` of the module."""
        obj = self.module
        for i, part in enumerate(target.split(".")):
            if not hasattr(obj, part):
                raise RuntimeError(f"Node referenced nonexistent target "
                                   f"{'.'.join(target.split('.')[:i + 1])}")
            obj = getattr(obj, part)
        return obj

    def fetch_args_kwargs_from_env(self, n):
        """``n``'s args and kwargs with each Node replaced by its value."""
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return args, kwargs

    def map_nodes_to_values(self, args, n):
        """``args`` with every Node replaced by its computed value."""
        def load(a):
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run "
                                   "Graph.lint() to diagnose such issues")
            return self.env[a]
        return map_arg(args, load)


class Transformer(Interpreter):
    """An Interpreter that builds a new graph instead of computing: each overridden method
    receives Proxies and returns Proxies (or calls ``super()`` with a different target);
    :meth:`transform` returns the new GraphModule.

    >>> import fiamma, fiamma.fx as fx
    >>> class ReluToGelu(fx.Transformer):
    ...     def call_function(self, target, args, kwargs):
    ...         if target == fiamma.relu:
    ...             target = fiamma.nn.functional.gelu
    ...         return super().call_function(target, args, kwargs)
    >>> gm = ReluToGelu(fx.symbolic_trace(lambda x: fiamma.relu(x))).transform()
    >>> [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
    ['gelu']

    As in PyTorch, an override may also call functions on the Proxies it receives
    (``return fiamma.neg(*args)``): while the transformation runs, fiamma's functions record a
    node when given a Proxy. They are then stand-ins that compare equal to fiamma's functions
    (``target == fiamma.relu``, ``target in rules``) but are not the same objects: compare
    targets with ``==``, not ``is``.
    """

    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()
        from ._symbolic_trace import Tracer

        class TransformerTracer(Tracer):
            def __init__(self, graph):
                super().__init__()
                self.graph = graph

            def is_leaf_module(self, m, qualname):
                return True

        self.tracer = TransformerTracer(self.new_graph)
        self.tracer.root = module
        self.tracer._patcher = None

    def placeholder(self, target, args, kwargs):
        """A placeholder of the new graph (same name and default)."""
        default = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target, args, kwargs):
        """A ``get_attr`` node in the new graph."""
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        """A ``call_module`` node in the new graph."""
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def call_function(self, target, args, kwargs):
        """A ``call_function`` node in the new graph."""
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self):
        """Run the transformation; returns the new GraphModule (sharing the module's
        submodules and parameters)."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            def strip(a):
                return a.node if isinstance(a, Proxy) else a
            self.new_graph.output(map_aggregate(result, strip))
        return GraphModule(self.module, self.new_graph, type(self.module).__name__)
