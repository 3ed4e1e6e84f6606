"""``torch.utils.dlpack``: exchange tensors with other array libraries through DLPack without
copying.

>>> import fiamma, numpy as np
>>> t = fiamma.utils.dlpack.from_dlpack(np.arange(3.0))
>>> t.tolist()
[0.0, 1.0, 2.0]
"""

from fiamma._compat_ops import to_dlpack
from fiamma._interop import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
