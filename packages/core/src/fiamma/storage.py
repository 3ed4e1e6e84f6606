"""``torch.storage``: the module path of the storage classes
(``from torch.storage import UntypedStorage``); they are fiamma's
:class:`fiamma.UntypedStorage` and :class:`fiamma.TypedStorage`.

>>> import fiamma
>>> from fiamma.storage import UntypedStorage
>>> isinstance(fiamma.ones(2).untyped_storage(), UntypedStorage)
True
"""

from fiamma._storage_api import TypedStorage, UntypedStorage

__all__ = ["TypedStorage", "UntypedStorage"]
