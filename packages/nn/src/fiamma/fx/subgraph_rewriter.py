"""``replace_pattern``: find every occurrence of a small traced program in a GraphModule and
replace it with another (PyTorch's ``torch.fx.subgraph_rewriter``)."""

from typing import NamedTuple

from .graph_module import GraphModule
from .node import Node

__all__ = ["Match", "replace_pattern"]


class Match(NamedTuple):
    """One replaced occurrence: ``anchor`` is the graph node matched by the pattern's (first)
    returned value; ``nodes_map`` maps each pattern node to the graph node (or, for a pattern
    input, the value) it matched."""

    anchor: Node
    nodes_map: dict


def _as_graph_module(fn):
    if isinstance(fn, GraphModule):
        return fn
    from ._symbolic_trace import symbolic_trace

    return symbolic_trace(fn)


def _flat_nodes(a):
    if isinstance(a, Node):
        return [a]
    if isinstance(a, (tuple, list)):
        return [n for e in a for n in _flat_nodes(e)]
    raise ValueError(f"replace_pattern: a pattern or replacement must return a node or a "
                     f"tuple/list of nodes, got {type(a).__name__}")


class _Matcher:
    def __init__(self, pattern_graph):
        self.placeholders = [n for n in pattern_graph.nodes if n.op == "placeholder"]
        out = next(n for n in pattern_graph.nodes if n.op == "output")
        self.returns = _flat_nodes(out.args[0])
        if any(r.op == "placeholder" for r in self.returns):
            raise ValueError("replace_pattern: the pattern must compute its result, not "
                             "return an input unchanged")

    def match_arg(self, pa, ga, m):
        if isinstance(pa, Node):
            if pa.op == "placeholder":
                if pa in m:
                    return m[pa] is ga if isinstance(ga, Node) else m[pa] == ga
                m[pa] = ga
                return True
            return isinstance(ga, Node) and self.match_node(pa, ga, m)
        if isinstance(ga, Node):
            return False
        if isinstance(pa, (tuple, list)) and isinstance(ga, (tuple, list)):
            return type(pa) is type(ga) and len(pa) == len(ga) and \
                all(self.match_arg(a, b, m) for a, b in zip(pa, ga))
        if isinstance(pa, dict) and isinstance(ga, dict):
            return pa.keys() == ga.keys() and all(self.match_arg(pa[k], ga[k], m) for k in pa)
        return type(pa) is type(ga) and pa == ga

    def match_node(self, pn, gn, m):
        if pn in m:
            return m[pn] is gn
        if gn in m.get("_used", ()):
            return False
        if pn.op != gn.op or pn.target != gn.target or len(pn.args) != len(gn.args) \
                or pn.kwargs.keys() != gn.kwargs.keys():
            return False
        m[pn] = gn
        m.setdefault("_used", set()).add(gn)
        return all(self.match_arg(a, b, m) for a, b in zip(pn.args, gn.args)) and \
            all(self.match_arg(pn.kwargs[k], gn.kwargs[k], m) for k in pn.kwargs)

    def find(self, graph, taken):
        found = []
        for gn in graph.nodes:
            if gn in taken:
                continue
            m = {}
            if not self.match_node(self.returns[0], gn, m):
                continue
            m = self._match_rest(graph, 1, m, taken)
            if m is None:
                continue
            used = m.pop("_used")
            if used & taken or not self._self_contained(m, used):
                continue
            taken |= used
            found.append(m)
        return found

    def _match_rest(self, graph, i, m, taken):
        if i == len(self.returns):
            return m
        if self.returns[i] in m:
            return self._match_rest(graph, i + 1, m, taken)
        for gn in graph.nodes:
            if gn in taken:
                continue
            trial = dict(m)
            trial["_used"] = set(m["_used"])
            if self.match_node(self.returns[i], gn, trial):
                done = self._match_rest(graph, i + 1, trial, taken)
                if done is not None:
                    return done
        return None

    def _self_contained(self, m, used):
        # the pattern's inner values must not be used outside the match (they disappear), and
        # a pattern input must not be one of the matched computations
        returned = {m[r] for r in self.returns}
        for gn in used - returned:
            if any(u not in used for u in gn.users):
                return False
        return not any(isinstance(m[p], Node) and m[p] in used
                       for p in self.placeholders if p in m)


def replace_pattern(gm, pattern, replacement):
    """Replace every non-overlapping occurrence of ``pattern`` in GraphModule ``gm`` with
    ``replacement`` (functions or GraphModules taking the same inputs, traced with
    :func:`~fiamma.fx.symbolic_trace`); returns the list of :class:`Match` es and recompiles
    ``gm``. Pattern nodes match graph nodes with the same op, target and equal non-node
    arguments; a pattern input matches any value; the pattern's inner values must have no
    users outside the occurrence.

    >>> import fiamma, fiamma.fx as fx
    >>> from fiamma.fx import replace_pattern
    >>> def f(x, y):
    ...     return fiamma.relu(fiamma.add(x, y)) * 2
    >>> gm = fx.symbolic_trace(f)
    >>> def pattern(a, b):
    ...     return fiamma.relu(fiamma.add(a, b))
    >>> def replacement(a, b):
    ...     return fiamma.clamp(a + b, min=0)
    >>> len(replace_pattern(gm, pattern, replacement))
    1
    >>> [n.name for n in gm.graph.nodes]
    ['x', 'y', 'add_1', 'clamp', 'mul', 'output']
    >>> gm(fiamma.tensor([-3.0, 1.0]), fiamma.tensor([1.0, 1.0]))
    tensor([0., 4.])
    """
    pattern_gm = _as_graph_module(pattern)
    repl_gm = _as_graph_module(replacement)
    graph = gm.graph
    matcher = _Matcher(pattern_gm.graph)
    repl_placeholders = [n for n in repl_gm.graph.nodes if n.op == "placeholder"]
    if len(repl_placeholders) != len(matcher.placeholders):
        raise ValueError(f"replace_pattern: the pattern takes {len(matcher.placeholders)} "
                         f"inputs but the replacement takes {len(repl_placeholders)}")
    matches = matcher.find(graph, set())
    order = {n: i for i, n in enumerate(graph.nodes)}
    results = []
    for m in matches:
        matched = [gn for pn, gn in m.items() if pn.op != "placeholder"]
        last = max(matched, key=order.__getitem__)
        val_map = {}
        for rp, pp in zip(repl_placeholders, matcher.placeholders):
            if pp not in m:
                raise ValueError(f"replace_pattern: pattern input {pp.name} is unused")
            val_map[rp] = m[pp]
        with graph.inserting_before(last):
            new_out = graph.graph_copy(repl_gm.graph, val_map)
        for rn in repl_gm.graph.nodes:
            if rn.op in ("get_attr", "call_module"):
                _copy_missing(repl_gm, gm, rn.target)
        new_nodes = _flat_nodes(new_out)
        if len(new_nodes) != len(matcher.returns):
            raise ValueError(f"replace_pattern: the pattern returns {len(matcher.returns)} "
                             f"values but the replacement returns {len(new_nodes)}")
        for pr, new in zip(matcher.returns, new_nodes):
            m[pr].replace_all_uses_with(new)
        for gn in sorted(matched, key=order.__getitem__, reverse=True):
            if not gn.users:
                graph.erase_node(gn)
        results.append(Match(anchor=m[matcher.returns[0]], nodes_map=dict(m)))
    graph.lint()
    gm.recompile()
    return results


def _copy_missing(src, dst, target):
    from .graph_module import _assign_attr, _get_path

    try:
        _get_path(dst, target)
    except AttributeError:
        _assign_attr(_get_path(src, target), dst, target, src)
