"""``fiamma.jit.isinstance`` (kept out of ``fiamma.jit``'s namespace, where a global named
``isinstance`` would hide the builtin from the module's own code; ``fiamma.jit`` hands it out
through its module ``__getattr__``)."""

import builtins
import types
import typing


def _jit_isinstance(obj, target_type):
    """Whether ``obj`` is of ``target_type``, which may be a typing container (``List[int]``,
    ``Dict[str, Tensor]``, ``Tuple[int, str]``, ``Optional[Tensor]``, ``Union[...]``): the
    elements are checked too (``torch.jit.isinstance`` outside TorchScript).

    >>> import typing, fiamma
    >>> fiamma.jit.isinstance([fiamma.ones(1)], typing.List[fiamma.Tensor])
    True
    >>> fiamma.jit.isinstance({"a": 1}, typing.Dict[str, str])
    False
    """
    return _isinstance(obj, target_type)


def _isinstance(obj, tp):
    if tp is typing.Any:
        return True
    if tp is None or tp is type(None):
        return obj is None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None:
        return builtins.isinstance(obj, tp)
    if origin is typing.Union or origin is types.UnionType:
        return any(_isinstance(obj, a) for a in args)
    if not builtins.isinstance(obj, origin):
        return False
    if not args:
        return True
    if origin is list:
        return all(_isinstance(v, args[0]) for v in obj)
    if origin is dict:
        return all(_isinstance(k, args[0]) and _isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_isinstance(v, args[0]) for v in obj)
        return len(obj) == len(args) and all(_isinstance(v, a) for v, a in zip(obj, args))
    raise TypeError(f"fiamma.jit.isinstance: unsupported type {tp!r}; expected a class, or "
                    "List, Dict, Tuple, Optional or Union of them")

