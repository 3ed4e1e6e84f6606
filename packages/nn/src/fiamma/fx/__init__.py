"""fiamma.fx: capture a model's ``forward`` as a graph, rewrite it, run it as Python
(PyTorch's ``torch.fx``).

:func:`symbolic_trace` runs ``forward`` on :class:`Proxy` values and records every
operation as a :class:`Node` of a :class:`Graph`; a :class:`GraphModule` holds the graph,
the submodules and parameters it uses, and a ``forward`` generated from it (``gm.code``).
Passes edit the graph directly (``Graph.inserting_after``, ``Node.replace_all_uses_with``,
``Graph.erase_node``, then ``gm.recompile()``), or run it node by node
(:class:`Interpreter`, :class:`Transformer`, ``passes.shape_prop.ShapeProp``).

>>> import fiamma, fiamma.fx as fx
>>> class Net(fiamma.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = fiamma.nn.Linear(4, 4)
...     def forward(self, x):
...         return fiamma.relu(self.fc(x)) + x
>>> gm = fx.symbolic_trace(Net())
>>> [(n.op, n.name) for n in gm.graph.nodes]
[('placeholder', 'x'), ('call_module', 'fc'), ('call_function', 'relu'), \
('call_function', 'add'), ('output', 'output')]
"""

from . import passes, subgraph_rewriter
from ._symbolic_trace import PH, Tracer, symbolic_trace, wrap
from .graph import Graph
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, has_side_effect, map_arg
from .proxy import Proxy, TraceError
from .subgraph_rewriter import replace_pattern

__all__ = ["symbolic_trace", "Tracer", "wrap", "PH", "Graph", "GraphModule", "Node",
           "map_arg", "has_side_effect", "Proxy", "TraceError", "Interpreter", "Transformer",
           "passes", "subgraph_rewriter", "replace_pattern"]
