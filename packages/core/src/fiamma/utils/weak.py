"""``torch.utils.weak``: weak references and dictionaries keyed by object identity, for keys
such as tensors whose ``==`` is elementwise and whose hash is not their value.

``WeakIdRef`` is a weak reference that hashes and compares by the referent's ``id`` while it
lives (and keeps that identity after it dies, so dead entries can be found and dropped);
``WeakIdKeyDictionary`` is a mutable mapping whose keys are held weakly by identity: an entry
disappears when its key is collected. ``WeakTensorKeyDictionary`` is the same class.
``TensorWeakRef`` is a weak reference to a tensor, called to get the tensor or None.

>>> import fiamma
>>> from fiamma.utils.weak import WeakIdKeyDictionary
>>> d = WeakIdKeyDictionary()
>>> t = fiamma.ones(2)
>>> d[t] = "a"
>>> d[t], len(d)
('a', 1)
>>> del t
>>> len(d)
0
"""

import weakref
from collections.abc import MutableMapping

__all__ = ["WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary", "TensorWeakRef"]


class WeakIdRef(weakref.ref):
    """A weak reference compared and hashed by the identity of its referent."""

    __slots__ = ("_id",)

    def __new__(cls, key, callback=None):
        ref = super().__new__(cls, key, callback)
        ref._id = id(key)
        return ref

    def __init__(self, key, callback=None):
        super().__init__(key, callback)

    def __hash__(self):
        return self._id

    def __eq__(self, other):
        if not isinstance(other, WeakIdRef):
            return NotImplemented
        a, b = self(), other()
        if a is not None and b is not None:
            return a is b
        return self is other


class _StrongIdRef:
    """A lookup key with the identity semantics of WeakIdRef, without a weak reference (for
    objects that cannot be weakly referenced are refused on insertion, not on lookup)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        if isinstance(other, WeakIdRef):
            return other() is self.obj
        if isinstance(other, _StrongIdRef):
            return other.obj is self.obj
        return NotImplemented

    def __call__(self):
        return self.obj


class WeakIdKeyDictionary(MutableMapping):
    """A mapping with weakly held keys compared by identity (``is``), not by ``==``."""

    def __init__(self, dict=None, ref_type=WeakIdRef):
        self.data = {}
        self.ref_type = ref_type
        self_ref = weakref.ref(self)

        def remove(k, selfref=self_ref):
            owner = selfref()
            if owner is not None:
                owner.data.pop(k, None)

        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key):
        return self.data[_StrongIdRef(key)]

    def __setitem__(self, key, value):
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key):
        del self.data[_StrongIdRef(key)]

    def __contains__(self, key):
        try:
            return _StrongIdRef(key) in self.data
        except TypeError:
            return False

    def __iter__(self):
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self):
        return sum(1 for ref in list(self.data) if ref() is not None)

    def __repr__(self):
        return f"<{type(self).__name__} with {len(self)} entries>"

    def copy(self):
        new = type(self)()
        for k, v in self.items():
            new[k] = v
        return new

    __copy__ = copy

    def keyrefs(self):
        """The weak references to the keys."""
        return list(self.data)


WeakTensorKeyDictionary = WeakIdKeyDictionary


class TensorWeakRef:
    """A weak reference to a tensor: ``ref()`` is the tensor, or None once it is collected."""

    __slots__ = ("ref",)

    def __init__(self, tensor):
        import fiamma

        if not isinstance(tensor, fiamma.Tensor):
            raise TypeError(f"TensorWeakRef: expected a Tensor, got {type(tensor).__name__}")
        self.ref = weakref.ref(tensor)

    def __call__(self):
        return self.ref()
