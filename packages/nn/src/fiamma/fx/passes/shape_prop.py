"""``ShapeProp``: run a GraphModule once and record each node's output shape and dtype."""

from typing import NamedTuple

import fiamma

from ..interpreter import Interpreter
from ..node import map_aggregate

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What ShapeProp records of a tensor value (PyTorch's fields; ``memory_format`` is
    ``"contiguous_format"`` for a contiguous tensor and None otherwise: fiamma has no
    other memory formats; fiamma has no quantized tensors)."""

    shape: tuple
    dtype: object
    requires_grad: bool
    stride: tuple
    memory_format: object
    is_quantized: bool
    qparams: dict


def _extract_tensor_metadata(t):
    fmt = "contiguous_format" if t.is_contiguous() else None
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, tuple(t.stride()), fmt, False, {})


class ShapeProp(Interpreter):
    """Run the module on example inputs and store ``node.meta["tensor_meta"]`` (a
    :class:`TensorMetadata`, or a structure of them for nodes returning tuples/lists) and
    ``node.meta["type"]`` for every node.

    >>> import fiamma, fiamma.fx as fx
    >>> from fiamma.fx.passes.shape_prop import ShapeProp
    >>> net = fiamma.nn.Sequential(fiamma.nn.Linear(4, 3), fiamma.nn.Flatten(0))
    >>> gm = fx.symbolic_trace(net)
    >>> _ = ShapeProp(gm).propagate(fiamma.randn(2, 4))
    >>> [(n.name, tuple(n.meta["tensor_meta"].shape)) for n in gm.graph.nodes]
    [('input_1', (2, 4)), ('_0', (2, 3)), ('_1', (6,)), ('output', (6,))]
    """

    def __init__(self, gm, fake_mode=None):
        if fake_mode is not None:
            raise NotImplementedError("ShapeProp(fake_mode=...): fiamma has no fake tensors; "
                                      "propagate real example inputs")
        super().__init__(gm)

    def run_node(self, n):
        result = super().run_node(n)
        found = []

        def extract(obj):
            if isinstance(obj, fiamma.Tensor):
                found.append(True)
                return _extract_tensor_metadata(obj)
            return obj
        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """Run the module on ``args`` (recording shapes); returns its result."""
        return super().run(*args)
