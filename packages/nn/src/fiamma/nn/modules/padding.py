"""Padding layers (``torch.nn.ReflectionPad1d`` ... ``CircularPad3d``): module forms of
``F.pad`` with the mode fixed. ``padding`` is an int (the same on every side) or a tuple of
2 * N amounts ordered as ``F.pad`` reads them (last dim first: left, right, top, bottom,
front, back)."""

from fiamma.nn import functional as F
from fiamma.nn.modules.module import Module

__all__ = [
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
]


def _amounts(padding, nd, cls):
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * (2 * nd)
    try:
        p = tuple(padding)
    except TypeError:
        raise TypeError(f"{cls}: padding must be an int or a tuple of {2 * nd} ints, got "
                        f"{type(padding).__name__}") from None
    if len(p) != 2 * nd or not all(isinstance(v, int) and not isinstance(v, bool) for v in p):
        raise ValueError(f"{cls}: padding must be an int or a tuple of {2 * nd} ints, got "
                         f"{padding!r}")
    return p


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _amounts(padding, self._nd, type(self).__name__)

    def _check_input_dim(self, input):
        nd = self._nd
        if input.dim() not in (nd + 1, nd + 2):
            raise ValueError(f"{type(self).__name__}: expected {nd + 1}D or {nd + 2}D input "
                             f"(got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def _check_input_dim(self, input):
        pass  # constant padding takes any number of dims (F.pad checks the amounts)

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ReflectionPad1d(_PadNd):
    """Pad the last dim by reflecting the input at its edges (the edge is not repeated).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ReflectionPad1d(2)(fiamma.arange(4.0).reshape(1, 1, 4)).tolist()
    [[[2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 1.0]]]
    """
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Reflection padding of the last two dims ((C, H, W) or (N, C, H, W) input).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ReflectionPad2d((1, 1, 2, 0))(fiamma.zeros(1, 3, 4, 4)).shape
    fiamma.Size([1, 3, 6, 6])
    """
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Reflection padding of the last three dims ((C, D, H, W) or (N, C, D, H, W) input)."""
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating the edge value.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ReplicationPad1d((1, 2))(fiamma.tensor([[[1.0, 2.0]]])).tolist()
    [[[1.0, 1.0, 2.0, 2.0, 2.0]]]
    """
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Replication padding of the last two dims."""
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Replication padding of the last three dims."""
    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pad the last dim by wrapping around (amounts at most the size).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.CircularPad1d(1)(fiamma.tensor([[[1.0, 2.0, 3.0]]])).tolist()
    [[[3.0, 1.0, 2.0, 3.0, 1.0]]]
    """
    _nd, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Circular padding of the last two dims."""
    _nd, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Circular padding of the last three dims."""
    _nd, _mode = 3, "circular"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value`` (negative amounts crop).

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ConstantPad1d((1, 0), 9.0)(fiamma.zeros(1, 2)).tolist()
    [[9.0, 0.0, 0.0]]
    """
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Constant padding of the last two dims."""
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Constant padding of the last three dims."""
    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.ZeroPad1d(1)(fiamma.ones(1, 2)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    """
    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """Zero padding of the last two dims."""
    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Zero padding of the last three dims."""
    _nd = 3
