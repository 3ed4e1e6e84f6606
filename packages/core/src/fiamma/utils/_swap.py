"""``fiamma.utils.swap_tensors``: exchange the contents of two tensor objects in place."""

import copyreg
import weakref

__all__ = ["swap_tensors"]

_WHY = (" (a leaf tensor that has been used in an autograd graph has one: its AccumulateGrad "
        "node's; swap before using it, or swap a fresh tensor)")


def swap_tensors(t1, t2):
    """Swap everything two tensors hold (class, ``__dict__``, slots: data, shape, dtype,
    ``requires_grad``, ``grad``, autograd state) while each Python object keeps its identity, so
    references held elsewhere (an optimizer's parameter list) see the new contents.

    As in PyTorch, tensors that have weak references, or whose classes have different slots,
    are refused; in fiamma a leaf that has taken part in an autograd graph has one (its
    AccumulateGrad node's), so such a leaf is refused too (PyTorch accepts it and poisons the
    old node). A tensor saved for a backward pass that has not run yet must not change under
    it: the swap counts as an in-place write of both storages, so such a backward raises
    instead of computing with swapped data.

    >>> import fiamma
    >>> a, b = fiamma.arange(2), fiamma.arange(3)
    >>> fiamma.utils.swap_tensors(a, b)
    >>> a.tolist(), b.tolist()
    ([0, 1, 2], [0, 1])
    """
    import fiamma

    if not isinstance(t1, fiamma.Tensor) or not isinstance(t2, fiamma.Tensor):
        raise TypeError(f"swap_tensors: expected two Tensors, got {type(t1).__name__} and "
                        f"{type(t2).__name__}")
    if weakref.getweakrefs(t1):
        raise RuntimeError("Cannot swap t1 because it has weakref associated with it" + _WHY)
    if weakref.getweakrefs(t2):
        raise RuntimeError("Cannot swap t2 because it has weakref associated with it" + _WHY)
    s1 = set(copyreg._slotnames(type(t1)))
    if s1 != set(copyreg._slotnames(type(t2))):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    # a saved-for-backward reference to either object must see a changed version
    v = max(t1._storage.version, t2._storage.version) + 1
    t1._storage.version = t2._storage.version = v
    c1, c2 = type(t1), type(t2)
    if c1 is not c2:
        t1.__class__, t2.__class__ = c2, c1
    d1, d2 = getattr(t1, "__dict__", None), getattr(t2, "__dict__", None)
    if d1 is not None or d2 is not None:
        if d1 is None or d2 is None:
            raise RuntimeError("Cannot swap t1 and t2: only one of them has a __dict__")
        t1.__dict__, t2.__dict__ = d2, d1
    missing = object()
    for name in s1:
        a, b = getattr(t1, name, missing), getattr(t2, name, missing)
        for t, val in ((t1, b), (t2, a)):
            if val is missing:
                if hasattr(t, name):
                    object.__delattr__(t, name)
            else:
                object.__setattr__(t, name, val)
