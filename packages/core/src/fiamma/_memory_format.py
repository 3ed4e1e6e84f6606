"""Memory formats (``torch.memory_format``): ``fiamma.contiguous_format``,
``fiamma.channels_last`` (NHWC strides for a 4-d NCHW tensor), ``fiamma.channels_last_3d``
(NDHWC for 5-d) and ``fiamma.preserve_format``.

A channels-last tensor is an ordinary strided tensor whose channel stride is 1: it is made by
``x.contiguous(memory_format=fiamma.channels_last)``, ``x.to(memory_format=...)``,
``module.to(memory_format=...)`` or ``empty(..., memory_format=...)``, and every op accepts it.
fiamma's kernels compute on NCHW, so a convolution or pooling copies such an input and returns
a contiguous (NCHW) result, where PyTorch keeps channels-last: the values are the same.
"""

from fiamma._layout import NamedConstant

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format", "legacy_contiguous_format"]


class memory_format(NamedConstant):
    """How a dense tensor's dimensions are ordered in memory (PyTorch's
    ``torch.memory_format``). One object per format: compare with ``is`` or ``==``.

    >>> import fiamma
    >>> x = fiamma.zeros(2, 3, 4, 5).contiguous(memory_format=fiamma.channels_last)
    >>> x.stride(), x.is_contiguous(memory_format=fiamma.channels_last)
    ((60, 1, 15, 3), True)
    """

    __slots__ = ()


memory_format.__module__ = "fiamma"
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = memory_format("legacy_contiguous_format")

_PERM = {4: ((0, 2, 3, 1), (0, 3, 1, 2)), 5: ((0, 2, 3, 4, 1), (0, 4, 1, 2, 3))}
_RANK = {channels_last: 4, channels_last_3d: 5}


def check(fmt, op):
    if fmt is not None and not isinstance(fmt, memory_format):
        raise TypeError(f"{op}: memory_format must be a fiamma.memory_format (e.g. "
                        f"fiamma.channels_last), got {type(fmt).__name__}")
    return fmt


def is_channels_last(t, rank):
    """Whether ``t`` (of ``rank`` dims) has channels-last strides (size-1 dims ignored)."""
    if len(t._shape) != rank:
        return False
    expect = 1
    for d in _PERM[rank][0][::-1]:
        n = t._shape[d]
        if n != 1 and t._stride[d] != expect:
            return False
        expect *= n
    return True


def is_contiguous(t, fmt):
    if fmt is None or fmt is contiguous_format or fmt is legacy_contiguous_format:
        return t._contig or t._numel == 0
    rank = _RANK.get(fmt)
    if rank is None:
        raise RuntimeError(f"is_contiguous: unsupported memory format {fmt}")
    return is_channels_last(t, rank)


def to_format(t, fmt, op, copy=False):
    """``t`` in memory format ``fmt`` (channels_last / channels_last_3d / contiguous_format);
    ``t`` itself when it already is, unless ``copy``."""
    rank = _RANK.get(fmt)
    if rank is None:  # contiguous
        return t.clone(memory_format=contiguous_format) if copy or not t._contig else t
    if len(t._shape) != rank:
        raise RuntimeError(f"{op}: required rank {rank} tensor to use {fmt.name} format, got "
                           f"a rank {len(t._shape)} tensor")
    if not copy and is_channels_last(t, rank):
        return t
    perm, inv = _PERM[rank]
    return t.permute(perm).clone().permute(inv)


def preserved(t):
    """The format ``preserve_format`` keeps for ``t``: channels-last when ``t`` is channels-last
    and not plainly contiguous, else contiguous."""
    rank = len(t._shape)
    if rank in _PERM and not t._contig and is_channels_last(t, rank):
        return channels_last if rank == 4 else channels_last_3d
    return contiguous_format
