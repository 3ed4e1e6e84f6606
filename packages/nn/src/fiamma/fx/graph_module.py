"""``GraphModule``: a Module whose ``forward`` is Python generated from a Graph."""

import copy
import itertools
import linecache

import fiamma.nn as nn

from .graph import Graph

__all__ = ["GraphModule"]

_counter = itertools.count()


def _exec_forward(src, globals_):
    # a file name per module so tracebacks show the generated line
    key = f"<eval_with_key>.{next(_counter)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    g = dict(globals_)
    exec(compile(src, key, "exec"), g)
    return g["forward"]


def _get_path(obj, dotted):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _assign_attr(value, to_module, target, from_module=None):
    *prefix, field = target.split(".")
    for part in prefix:
        sub = getattr(to_module, part, None)
        if sub is None:
            sub = nn.Module()
            setattr(to_module, part, sub)
        to_module = sub
        from_module = getattr(from_module, part, None) if from_module is not None else None
    if (from_module is not None and isinstance(from_module, nn.Module)
            and field in from_module._buffers and not isinstance(value, nn.Parameter)):
        persistent = field not in from_module._non_persistent_buffers_set
        to_module.register_buffer(field, value, persistent=persistent)
    else:
        setattr(to_module, field, value)


class GraphModule(nn.Module):
    """A Module built from a :class:`~fiamma.fx.Graph`: it holds the submodules, parameters
    and buffers the graph's ``call_module`` and ``get_attr`` nodes use (copied by reference
    from ``root``, a Module or a dict from dotted path to object) and runs the Python code
    generated from the graph (``.code``). After editing ``.graph``, call :meth:`recompile`.

    Each instance gets its own subclass (named ``class_name``) so its generated ``forward``
    can live on the class; GraphModules pickle and deep-copy with their graph.

    >>> import fiamma, fiamma.fx as fx
    >>> gm = fx.symbolic_trace(fiamma.nn.Linear(3, 2))
    >>> sorted(gm.state_dict())
    ['bias', 'weight']
    >>> type(gm).__name__
    'Linear'
    """

    def __new__(cls, *args, **kwargs):
        base = next(t for t in cls.__mro__ if "_fx_per_instance" not in t.__dict__)
        impl = type("GraphModuleImpl", (base,), {"_fx_per_instance": True})
        return super().__new__(impl)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        type(self).__name__ = class_name
        type(self).__qualname__ = class_name
        if isinstance(root, nn.Module):
            self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    try:
                        value = _get_path(root, node.target)
                    except AttributeError:
                        raise RuntimeError(
                            f"GraphModule: node {node.name} refers to {node.target!r}, which "
                            f"{type(root).__name__} does not have") from None
                    _assign_attr(value, self, node.target, root)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"GraphModule: node {node.name} refers to "
                                           f"{node.target!r}, which the dict root lacks")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise TypeError(f"GraphModule: root must be a Module or a dict, got "
                            f"{type(root).__name__}")
        self.meta = {}
        self.graph = graph

    # ---- graph and code -----------------------------------------------------------------

    @property
    def graph(self):
        """The Graph this module runs; assigning one recompiles."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g):
        if not isinstance(g, Graph):
            raise TypeError(f"GraphModule.graph: expected a fiamma.fx.Graph, got "
                            f"{type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self):
        """The Python source of the generated ``forward``."""
        return self.__dict__["_code"]

    def recompile(self):
        """Regenerate ``forward`` from ``self.graph`` (call after editing the graph);
        returns the ``PythonCode``."""
        python_code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        type(self).forward = _exec_forward(python_code.src, python_code.globals)
        return python_code

    def print_readable(self, print_output=True):
        """The generated code with the class line (printed unless ``print_output=False``)."""
        text = f"class {type(self).__name__}(fiamma.nn.Module):" + \
            "\n".join("    " + line if line else line for line in self.code.split("\n"))
        if print_output:
            print(text)
        return text

    def __str__(self):
        return super().__str__() + "\n\n\n" + self.code.strip() + "\n"

    # ---- submodules -----------------------------------------------------------------------

    def add_submodule(self, target, m):
        """Install module ``m`` at dotted path ``target`` (creating empty parents); returns
        False if a non-module attribute is in the way."""
        *prefix, field = target.split(".")
        mod = self
        for part in prefix:
            sub = getattr(mod, part, None)
            if sub is None:
                sub = nn.Module()
                mod.add_module(part, sub)
            elif not isinstance(sub, nn.Module):
                return False
            mod = sub
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target):
        """Remove the submodule at dotted path ``target``; False if there is none."""
        *prefix, field = target.split(".")
        mod = self
        for part in prefix:
            mod = getattr(mod, part, None)
            if not isinstance(mod, nn.Module):
                return False
        if not isinstance(mod._modules.get(field), nn.Module):
            return False
        del mod._modules[field]
        return True

    def delete_all_unused_submodules(self):
        """Remove every submodule no ``call_module``/``get_attr`` node uses (nor contains)."""
        used = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                if node.op == "call_module":
                    sub = self.get_submodule(node.target)
                    used.update(f"{node.target}.{n}" for n, _ in sub.named_modules() if n)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # ---- copying and pickling -----------------------------------------------------------

    def __deepcopy__(self, memo):
        res = type(self).__new__(type(self))
        memo[id(self)] = res
        state = {k: v for k, v in self.__dict__.items() if k != "_graph"}
        res.__dict__.update(copy.deepcopy(state, memo))
        type(res).__name__ = type(res).__qualname__ = type(self).__name__
        res.graph = copy.deepcopy(self.graph, memo)
        return res

    def __copy__(self):
        res = GraphModule(self, self.graph, type(self).__name__)
        res.meta = dict(self.meta)
        return res

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}
        return (_rebuild_graph_module, (state, self.graph, type(self).__name__))


def _rebuild_graph_module(state, graph, class_name):
    gm = GraphModule.__new__(GraphModule)
    gm.__dict__.update(state)
    type(gm).__name__ = type(gm).__qualname__ = class_name
    gm.graph = graph
    return gm
