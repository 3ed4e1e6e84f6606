"""Variable-length sequences for recurrent layers (``torch.nn.utils.rnn``).

A :class:`PackedSequence` holds a batch of sequences sorted by decreasing length, stored time
step by time step: ``data`` has the ``batch_sizes[0]`` first elements of every sequence, then
the ``batch_sizes[1]`` second elements, and so on, so that a recurrent layer can run step ``t``
on the first ``batch_sizes[t]`` rows only. ``sorted_indices`` (a permutation of the original
batch order, or None when the input was already sorted) and ``unsorted_indices`` (its inverse)
let the padded results come back in the caller's order.

Every conversion here is one ``index_select`` over a precomputed row map, so it is
differentiable with a single gather/scatter in each direction.

>>> import fiamma
>>> from fiamma.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> p = pack_sequence([fiamma.tensor([1., 2., 3.]), fiamma.tensor([4., 5.])])
>>> p.data.tolist(), p.batch_sizes.tolist()
([1.0, 4.0, 2.0, 5.0, 3.0], [2, 2, 1])
>>> padded, lengths = pad_packed_sequence(p, batch_first=True)
>>> padded.tolist(), lengths.tolist()
([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]], [3, 2])
"""

from collections import namedtuple

import numpy as np

import fiamma

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


def invert_permutation(permutation):
    """The inverse of an int64 permutation tensor (None stays None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.tolist(), dtype=np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(len(p), dtype=np.int64)
    return fiamma.tensor(inv)


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """A batch of variable-length sequences packed time step by time step (see the module
    docstring); build it with :func:`pack_padded_sequence` or :func:`pack_sequence` rather than
    by hand."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise ValueError("PackedSequence: batch_sizes is required (build packed sequences "
                             "with pack_padded_sequence or pack_sequence)")
        if not isinstance(batch_sizes, fiamma.Tensor):
            batch_sizes = fiamma.tensor(list(batch_sizes), dtype=fiamma.int64)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        """A PackedSequence whose ``data`` is ``data.to(*args, **kwargs)`` (self when that
        changes nothing); the index tensors follow the device, never the dtype."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        idx = [None if t is None else t.to(dev) for t in (self.sorted_indices,
                                                          self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *idx)

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=fiamma.float64)

    def float(self):
        return self.to(dtype=fiamma.float32)

    def half(self):
        return self.to(dtype=fiamma.float16)

    def bfloat16(self):
        return self.to(dtype=fiamma.bfloat16)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths_list(lengths, op):
    if isinstance(lengths, fiamma.Tensor):
        if lengths.dim() != 1:
            raise ValueError(f"{op}: lengths must be a 1-D tensor, got shape "
                             f"{list(lengths.shape)}")
        lengths = lengths.tolist()
    out = []
    for n in lengths:
        if isinstance(n, float) and not float(n).is_integer():
            raise TypeError(f"{op}: lengths must be integers, got {n}")
        out.append(int(n))
    return out


def _batch_sizes(lengths):
    """batch_sizes[t] = how many of the (descending) lengths exceed t."""
    lens = np.asarray(lengths, dtype=np.int64)
    steps = np.arange(int(lens[0]) if len(lens) else 0)
    return (lens[None, :] > steps[:, None]).sum(1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``input`` of shape (T, B, *) (or (B, T, *) with ``batch_first``)
    whose sequence ``b`` has ``lengths[b]`` valid steps. With ``enforce_sorted`` the lengths
    must be in decreasing order; otherwise the batch is sorted here and ``sorted_indices``
    records the permutation.

    >>> import fiamma
    >>> x = fiamma.tensor([[1., 4.], [2., 5.], [3., 0.]])   # (T=3, B=2)
    >>> pack_padded_sequence(x, [3, 2]).data.tolist()
    [1.0, 4.0, 2.0, 5.0, 3.0]
    """
    op = "pack_padded_sequence"
    lengths = _lengths_list(lengths, op)
    if input.dim() < 2:
        raise ValueError(f"{op}: expected input of at least 2 dims (T, B, *), got "
                         f"{input.dim()}-D")
    bdim, tdim = (0, 1) if batch_first else (1, 0)
    B, T = input.shape[bdim], input.shape[tdim]
    if len(lengths) != B:
        raise ValueError(f"{op}: expected {B} lengths (the batch size), got {len(lengths)}")
    if any(n <= 0 for n in lengths):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if max(lengths, default=0) > T:
        raise RuntimeError(f"{op}: a length ({max(lengths)}) exceeds the padded sequence "
                           f"length {T}")
    lens = np.asarray(lengths, dtype=np.int64)
    if enforce_sorted:
        if np.any(lens[1:] > lens[:-1]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        order = None
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = fiamma.tensor(order)
    bs = _batch_sizes(lens)
    # row of the flattened (T*B, *) or (B*T, *) input for each packed element
    cols = np.arange(B) if order is None else order
    rows = []
    for t, n in enumerate(bs):
        b = cols[:n]
        rows.append(b * T + t if batch_first else t * B + b)
    rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    flat = input.reshape((B * T,) + tuple(input.shape[2:]))
    data = flat.index_select(0, fiamma.tensor(rows.astype(np.int64)))
    return PackedSequence(data, fiamma.tensor(bs.astype(np.int64)), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo :func:`pack_padded_sequence`: the padded batch, (T, B, *) or (B, T, *), in the
    original batch order, and the int64 tensor of lengths. ``total_length`` pads to that many
    steps (at least the longest sequence).

    >>> import fiamma
    >>> p = pack_padded_sequence(fiamma.tensor([[1., 4.], [2., 5.], [3., 0.]]), [3, 2])
    >>> out, lengths = pad_packed_sequence(p, padding_value=-1.0)
    >>> out.tolist(), lengths.tolist()
    ([[1.0, 4.0], [2.0, 5.0], [3.0, -1.0]], [3, 2])
    """
    data, batch_sizes, _, unsorted = sequence
    bs = np.asarray(batch_sizes.tolist(), dtype=np.int64)
    T = len(bs)
    B = int(bs[0]) if T else 0
    if total_length is not None:
        if total_length < T:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {T}")
        T_out = int(total_length)
    else:
        T_out = T
    lens = (bs[None, :] > np.arange(B)[:, None]).sum(1)  # per sorted sequence
    starts = np.concatenate([[0], np.cumsum(bs)[:-1]]).astype(np.int64)
    n = int(bs.sum())
    # packed row of every (t, sorted b), or n (the padding row appended below)
    src = np.full((T_out, B), n, dtype=np.int64)
    for t in range(T):
        src[t, :bs[t]] = starts[t] + np.arange(bs[t])
    if unsorted is not None:
        perm = np.asarray(unsorted.tolist(), dtype=np.int64)
        src, lens = src[:, perm], lens[perm]
    if batch_first:
        src = src.T
    feat = tuple(data.shape[1:])
    pad = fiamma.full((1,) + feat, padding_value, dtype=data.dtype, device=data.device)
    ext = fiamma.cat([data, pad], 0)
    out = ext.index_select(0, fiamma.tensor(np.ascontiguousarray(src).reshape(-1)))
    out = out.reshape(tuple(src.shape) + feat)
    return out, fiamma.tensor(lens.astype(np.int64))


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes (L_i, *) into one (L_max, B, *) tensor (or (B, L_max, *) with
    ``batch_first``), filling with ``padding_value`` on ``padding_side`` ("right" or "left").

    >>> import fiamma
    >>> pad_sequence([fiamma.tensor([1, 2, 3]), fiamma.tensor([4])], batch_first=True).tolist()
    [[1, 2, 3], [4, 0, 0]]
    """
    op = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise ValueError(f"{op}: padding_side must be 'left' or 'right', got {padding_side!r}")
    if isinstance(sequences, fiamma.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError(f"{op}: received an empty list of sequences")
    feat = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if s.dim() == 0 or tuple(s.shape[1:]) != feat:
            raise RuntimeError(f"{op}: every sequence must have shape (L, *{list(feat)}) "
                               f"(the first one's trailing dims); sequence {i} has shape "
                               f"{list(s.shape)}")
    lens = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    L = int(lens.max())
    n = int(lens.sum())
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    t_idx = np.arange(L)[:, None]
    if padding_side == "right":
        valid = t_idx < lens[None, :]
        src = np.where(valid, starts[None, :] + t_idx, n)
    else:
        shift = t_idx - (L - lens)[None, :]
        src = np.where(shift >= 0, starts[None, :] + shift, n)
    if batch_first:
        src = src.T
    dt = sequences[0].dtype
    pad = fiamma.full((1,) + feat, padding_value, dtype=dt, device=sequences[0].device)
    ext = fiamma.cat(list(sequences) + [pad], 0)
    out = ext.index_select(0, fiamma.tensor(np.ascontiguousarray(src).reshape(-1)))
    return out.reshape(tuple(src.shape) + feat)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of unpadded sequences of a padded batch (the inverse of
    :func:`pad_sequence` with right padding)."""
    lengths = _lengths_list(lengths, "unpad_sequence")
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b, :n] for b, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of tensors of shapes (L_i, *) (decreasing lengths unless
    ``enforce_sorted=False``).

    >>> import fiamma
    >>> pack_sequence([fiamma.tensor([1]), fiamma.tensor([2, 3])], enforce_sorted=False).data
    tensor([2, 1, 3])
    """
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
