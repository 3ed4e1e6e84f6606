"""The one place that attaches methods to Tensor.

fiamma._tensor defines the class with what defines a tensor (layout, views, copies,
conversions) and imports no op module; each module that adds Tensor methods lists them in a
``METHODS`` table, and this module, imported once at the end of ``fiamma/__init__.py``, sets
them on the class in the order below (a later table wins a name: _compat_ops's ``sgn`` over
elementwise's). Nothing else calls ``setattr(Tensor, ...)``.
"""

from fiamma import (
    _compat_ops,
    _creation,
    _interop,
    _legacy_types,
    _printing,
    _random,
    _sparse_compressed,
    _sparse_coo,
    _storage_api,
    _tensor_api,
)
from fiamma._np_kwargs import accept_numpy_names
from fiamma._ops import (
    activations,
    elementwise,
    indexing,
    indexops,
    join,
    linalg_extra,
    matmul,
    reduce,
    shape,
    shape_views,
    sorting,
    special_ops,
)
from fiamma._tensor import Tensor

__all__ = ["MODULES"]

MODULES = (_creation, _printing, _legacy_types, _storage_api, _random, _interop, elementwise,
           reduce, matmul, join, indexing, indexops, shape_views, shape, special_ops, sorting,
           linalg_extra, _tensor_api, _compat_ops, _sparse_coo, _sparse_compressed, activations)

for _module in MODULES:
    for _name, _fn in _module.METHODS.items():
        setattr(Tensor, _name, _fn)

# an operator's function shows the operator's name (PyTorch's Tensor.__getitem__.__name__;
# what a __torch_function__ handler reads), where no other Tensor name shares it
_uses = {}
for _name, _fn in vars(Tensor).items():
    _uses[id(_fn)] = _uses.get(id(_fn), 0) + 1
for _name, _fn in list(vars(Tensor).items()):
    if (_name.startswith("__") and type(_fn) is type(accept_numpy_names)
            and _fn.__name__ != _name and _uses[id(_fn)] == 1):
        _fn.__name__ = _name
        _fn.__qualname__ = "Tensor." + _name
del _uses

# PyTorch's parser takes NumPy's axis=/keepdims= for dim=/keepdim= on every method
# (x.mean(axis=0)); size() is left direct (hot, and its dim rarely named)
for _name, _fn in list(vars(Tensor).items()):
    if not _name.startswith("__") and _name != "size":
        _wrapped = accept_numpy_names(_fn)
        if _wrapped is not _fn:
            setattr(Tensor, _name, _wrapped)
