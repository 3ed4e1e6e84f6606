"""fiamma.utils: helpers around core, at PyTorch's ``torch.utils`` paths. Submodules are
imported on use:

* ``fiamma.utils.cext``: write a C kernel, compile it with cffi and call it on tensors.
* ``fiamma.utils.data``: ``fiamma.data`` at PyTorch's ``torch.utils.data`` path (the same
  objects; needs fiamma-data).
* ``fiamma.utils.checkpoint``: activation checkpointing (recompute in backward).
* ``fiamma.utils.tensorboard``: ``SummaryWriter`` over the ``tensorboard`` package.
* ``fiamma.utils.model_zoo``: ``load_url`` (``fiamma.hub.load_state_dict_from_url``).
* ``fiamma.utils.benchmark``: ``Timer``, ``Measurement``, ``Compare`` (PyTorch's benchmark tools).
* ``fiamma.utils._pytree``: ``tree_flatten``/``tree_unflatten``/``tree_map`` over nested
  containers (PyTorch's private ``torch.utils._pytree``, which libraries use).

* ``fiamma.utils._python_dispatch``: ``TorchDispatchMode`` and the mode stack helpers
  (PyTorch's ``__torch_dispatch__`` modes; see fiamma._python_dispatch).
* ``fiamma.utils.flop_counter``: ``FlopCounterMode`` (FLOPs of the products and convolutions).
* ``fiamma.utils.dlpack``: ``to_dlpack`` / ``from_dlpack`` (DLPack capsules).
* ``fiamma.utils.weak``: ``WeakIdKeyDictionary`` & co. (weak references by identity).

* ``fiamma.utils.files``: ``temp_file_beside`` (write-then-rename with a direct write's file
  mode; fiamma's own helper, used by the vision and audio savers).

``fiamma.utils.swap_tensors(t1, t2)`` swaps two tensor objects' contents in place.
"""

from fiamma.utils._swap import swap_tensors  # noqa: F401

_SUBMODULES = {"cext", "data", "checkpoint", "tensorboard", "model_zoo", "benchmark",
               "_pytree", "files", "flop_counter", "dlpack", "weak", "_python_dispatch", "hooks",
               "_mode_utils"}


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module("fiamma.utils." + name)
    raise AttributeError(f"module 'fiamma.utils' has no attribute {name!r}")
