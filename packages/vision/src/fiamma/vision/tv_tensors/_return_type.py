"""What tensor methods and operators return when called on a tv_tensor (torchvision's
``set_return_type``): by default a plain ``fiamma.Tensor`` (in-place methods too: the returned
object shares the storage but is a plain tensor, while the tv_tensor itself keeps its type);
under ``set_return_type("TVTensor")`` the result takes the type and metadata of the tv_tensor
the method was called on.

:class:`TVTensor` opts out of core's ``__torch_function__`` (a dispatching class would
retarget every fiamma function for the rest of the process): the rule is applied by wrapping
``fiamma.Tensor``'s methods on :class:`TVTensor` (plain tensors pay nothing). Module-level
functions (``fiamma.cat``, ``fiamma.stack``, ...) always return plain tensors.
"""
import functools
import types

import fiamma

_TVTENSOR = [False]
_BASE = [fiamma.Tensor]  # TVTensor, once install() ran

# methods whose result keeps the tv_tensor type in every mode (TVTensor defines them) and the
# object protocol, which must not be wrapped
_SKIP = frozenset({
    "clone", "to", "detach", "requires_grad_", "as_subclass", "__repr__", "__deepcopy__",
    "__reduce_ex__", "__reduce__", "__new__", "__init__", "__init_subclass__", "__getattribute__",
    "__getattr__", "__setattr__", "__delattr__", "__class__", "__subclasshook__", "__dir__",
    "__sizeof__", "__format__", "__str__", "__hash__", "__getstate__", "__setstate__", "__del__",
    "__copy__", "__array__", "__array_wrap__", "__array_priority__", "__len__", "__bool__",
    "__iter__", "__contains__", "__index__", "__int__", "__float__", "__complex__",
    "__dlpack__", "__dlpack_device__", "__setitem__",
})


class set_return_type:
    """Set what tensor methods and operators return on tv_tensors: ``"Tensor"`` (default) or
    ``"TVTensor"``. Applies at once (globally); used as a context manager it restores the
    previous setting on exit.

    >>> from fiamma.vision import tv_tensors
    >>> b = tv_tensors.BoundingBoxes([[0, 0, 4, 4]], format="XYXY", canvas_size=(8, 8))
    >>> with tv_tensors.set_return_type("TVTensor"):
    ...     type(b + 1).__name__
    'BoundingBoxes'
    >>> type(b + 1).__name__
    'Tensor'
    """

    def __init__(self, return_type):
        if not isinstance(return_type, str) or return_type.lower() not in ("tensor",
                                                                            "tvtensor"):
            raise ValueError(f"set_return_type: return_type must be 'Tensor' or 'TVTensor', "
                             f"got {return_type!r}")
        self._previous = _TVTENSOR[0]
        _TVTENSOR[0] = return_type.lower() == "tvtensor"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _TVTENSOR[0] = self._previous
        return False


def _convert(self, out):
    if isinstance(out, fiamma.Tensor):
        if _TVTENSOR[0]:
            return out if out is self else self._rewrap(fiamma.Tensor.as_subclass(out,
                                                                                  fiamma.Tensor))
        if type(out) is not fiamma.Tensor and isinstance(out, _BASE[0]):
            return fiamma.Tensor.as_subclass(out, fiamma.Tensor)
        return out
    if isinstance(out, (tuple, list)) and any(isinstance(o, fiamma.Tensor) for o in out):
        items = [_convert(self, o) for o in out]
        if isinstance(out, list):
            return items
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return out


def _wrapped(fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        return _convert(self, fn(self, *args, **kwargs))
    return method


def install(cls):
    """Wrap every method of ``fiamma.Tensor`` on the tv_tensor base class ``cls``."""
    _BASE[0] = cls
    for klass in reversed(fiamma.Tensor.__mro__[:-1]):
        for name, attr in vars(klass).items():
            if name in _SKIP or name in vars(cls):
                continue
            if isinstance(attr, (types.FunctionType, types.BuiltinFunctionType,
                                 types.WrapperDescriptorType, types.MethodDescriptorType)):
                setattr(cls, name, _wrapped(getattr(fiamma.Tensor, name)))
