"""The tensor class and its factories, for the modules below ``fiamma._tensor``.

``_tensor`` imports the dtype, storage, backend and device-copy modules, so they must not import
it back (that made one import cycle of most of core). Where they build tensors (a copy on
another device, a backend primitive that allocates its result, the CPU backend's operator fast
path) they use what ``_tensor`` registers here when it is imported, before any tensor exists.
``tools/import_cycles.py`` measures core's import cycles; ``tests/test_import_graph.py`` holds
the bound.
"""

__all__ = ["register", "Tensor", "new_empty", "wrap", "cached_strides", "STRIDES"]

Tensor = None          # the class
new_empty = None       # new_empty(shape, dtype, device=CPU, zero=False): a fresh contiguous tensor
wrap = None            # wrap(storage, dtype, shape, strides): a tensor viewing a whole storage
cached_strides = None  # cached_strides(shape): contiguous strides, remembered in STRIDES
STRIDES = None         # {shape: contiguous strides} of recent results


def register(tensor_cls, new_empty_fn, wrap_fn, cached_strides_fn, strides):
    """Called once by fiamma._tensor at import."""
    global Tensor, new_empty, wrap, cached_strides, STRIDES
    Tensor, new_empty, wrap, cached_strides, STRIDES = (
        tensor_cls, new_empty_fn, wrap_fn, cached_strides_fn, strides)
