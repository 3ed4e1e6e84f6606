"""fiamma as a Python array API standard namespace (2023.12, with the 2024.12 additions).

``x.__array_namespace__()`` of any fiamma.Tensor returns this module. Its functions take and
return plain ``fiamma.Tensor`` arrays, with the standard's names, signatures (``axis``,
``keepdims``, ``copy``, ``device``), semantics and type promotion; the ``fiamma`` namespace
itself keeps PyTorch's. Operators on the arrays (``x + y``, ``x[i]``) are fiamma.Tensor's.

>>> import fiamma
>>> x = fiamma.tensor([3.0, 1.0, 2.0])
>>> xp = x.__array_namespace__()
>>> xp.sort(x).tolist(), tuple(xp.sum(x, axis=0, keepdims=True).shape)
([1.0, 2.0, 3.0], (1,))
"""

import math as _math

from fiamma.array_api import (  # noqa: F401
    _creation,
    _dtypes,
    _elementwise,
    _manipulation,
    _searching,
    _statistical,
    fft,
    linalg,
)
from fiamma.array_api._creation import *  # noqa: F401,F403
from fiamma.array_api._dtypes import *  # noqa: F401,F403
from fiamma.array_api._elementwise import *  # noqa: F401,F403
from fiamma.array_api._info import __array_namespace_info__  # noqa: F401
from fiamma.array_api._manipulation import *  # noqa: F401,F403
from fiamma.array_api._searching import *  # noqa: F401,F403
from fiamma.array_api._statistical import *  # noqa: F401,F403
from fiamma.array_api.linalg import matmul, matrix_transpose, tensordot, vecdot  # noqa: F401

__array_api_version__ = "2023.12"
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

e = _math.e
pi = _math.pi
inf = _math.inf
nan = _math.nan
newaxis = None


__all__ = sorted(
    _dtypes.__all__ + _creation.__all__ + _elementwise.__all__ + _manipulation.__all__
    + _statistical.__all__ + _searching.__all__
    + ["matmul", "matrix_transpose", "tensordot", "vecdot", "fft", "linalg",
       "__array_namespace_info__", "__array_api_version__", "e", "pi", "inf", "nan",
       "newaxis"])
