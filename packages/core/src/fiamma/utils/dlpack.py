"""``torch.utils.dlpack``: exchange tensors with other array libraries through DLPack without
copying.

>>> import fiamma, numpy as np
>>> t = fiamma.utils.dlpack.from_dlpack(np.arange(3.0))
>>> t.tolist()
[0.0, 1.0, 2.0]
"""

from fiamma._interop import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor):
    """A DLPack capsule of ``tensor`` (shares its memory; ``from_dlpack`` in another library
    consumes it once), as PyTorch's ``torch.utils.dlpack.to_dlpack``."""
    import fiamma

    if not isinstance(tensor, fiamma.Tensor):
        raise TypeError(f"to_dlpack: expected a fiamma.Tensor, got {type(tensor).__name__}")
    return tensor.__dlpack__()
