"""``torch.types``: the type aliases that typed PyTorch code annotates with (``Number``,
``Device``, ``_size``, ...), over fiamma's classes. They are for annotations and
``isinstance``-free documentation; fiamma has no symbolic shapes, so ``SymInt``/``SymFloat``/
``SymBool`` are the plain ``int``/``float``/``bool``.

>>> from fiamma.types import Number, Device
>>> def scale(x, by: Number, device: Device = None): ...
"""

import os
from collections.abc import Sequence
from typing import IO, Any, Optional, Union

from fiamma._dtype import dtype as _dtype_cls
from fiamma._layout import layout as _layout_cls
from fiamma._storage import device as _device_cls
from fiamma._storage_api import UntypedStorage as Storage
from fiamma._tensor import Size, Tensor

__all__ = ["Number", "Device", "Storage", "FileLike", "IntLikeType", "FloatLikeType",
           "BoolLikeType", "PySymType", "SymInt", "SymFloat", "SymBool", "py_sym_types"]

# no symbolic shapes in fiamma: the symbolic number types are the Python ones
SymInt, SymFloat, SymBool = int, float, bool
PySymType = Union[SymInt, SymFloat, SymBool]
py_sym_types = (SymInt, SymFloat, SymBool)

_int, _float, _bool, _complex, _str, _bytes = int, float, bool, complex, str, bytes
_dtype, _device, _layout = _dtype_cls, _device_cls, _layout_cls
_qscheme = Any
_dispatchkey = Union[str, Any]
_size = Union[Size, list, tuple]
_symsize = Union[Size, Sequence]
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
_TensorOrOptionalTensors = Union[Optional[Tensor], Sequence[Optional[Tensor]]]
_TensorOrTensorsOrGradEdge = _TensorOrTensors

IntLikeType = Union[int, SymInt]
FloatLikeType = Union[float, SymFloat]
BoolLikeType = Union[bool, SymBool]
Number = Union[int, float, bool]
_Number = (int, float, bool)
Device = Optional[Union[_device_cls, str, int]]
FileLike = Union[str, os.PathLike, IO[bytes]]
