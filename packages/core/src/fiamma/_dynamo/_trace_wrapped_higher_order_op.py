"""``torch._dynamo._trace_wrapped_higher_order_op``'s :class:`TransformGetItemToIndex`.

In PyTorch this mode rewrites ``tensor[i]`` with a 0-d tensor ``i`` into an index op, so that
such indexing works inside ``vmap`` (PyTorch's batching would otherwise call ``i.item()``).
fiamma's ``vmap`` already handles indexing by a 0-d tensor (by its batching rules or by running
the function once per element), so inside this context nothing changes: it is a context
manager that does nothing, kept so programs that enter it run.

>>> import fiamma
>>> with TransformGetItemToIndex():
...     fiamma.arange(4)[fiamma.tensor(2)].item()
2
"""

__all__ = ["TransformGetItemToIndex"]


class TransformGetItemToIndex:
    """A no-op context manager in fiamma (see the module's docstring)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
