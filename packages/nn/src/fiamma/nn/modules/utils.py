"""Helpers that layer code imports from ``torch.nn.modules.utils``: the tuple parsers
``_single``/``_pair``/``_triple``/``_quadruple`` (an int repeated, an iterable as a tuple), and
``consume_prefix_in_state_dict_if_present`` (strip ``"module."`` from a checkpoint saved from a
DistributedDataParallel or DataParallel wrapper).

>>> from fiamma.nn.modules.utils import _pair
>>> _pair(3), _pair((1, 2))
((3, 3), (1, 2))
"""

import collections.abc
from itertools import repeat

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """``t`` reversed with each element repeated ``n`` times (a padding tuple for F.pad:
    ``_reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)``)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """An adaptive pool's output size with ``None`` entries taken from the input's trailing
    sizes ``defaults``."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip ``prefix`` from every key of ``state_dict`` that starts with it, in place (its
    ``_metadata`` keys too), as PyTorch's: a checkpoint of a wrapped model (``"module."``)
    then loads into the bare model.

    >>> import collections
    >>> sd = collections.OrderedDict([("module.w", 1), ("b", 2)])
    >>> consume_prefix_in_state_dict_if_present(sd, "module.")
    >>> list(sd)
    ['b', 'w']
    """
    keys = list(state_dict.keys())
    for key in keys:
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    if hasattr(state_dict, "_metadata"):
        for key in list(state_dict._metadata.keys()):
            # metadata keys are module paths without a trailing dot: "module" for the root
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                new = key[len(prefix):]
                state_dict._metadata[new] = state_dict._metadata.pop(key)
