"""``fiamma.nested``: PyTorch's ``torch.nested``, batches of tensors of different sizes.

Two layouts, as in PyTorch: ``fiamma.jagged`` (one ragged dim, the components packed in one
``values`` tensor with ``offsets``; what SDPA and transformers use) and ``fiamma.strided``
(the default of ``nested_tensor``: any dims may differ). Ops act on each component, as if run
on the components one by one; see ``fiamma._nested`` for how.

>>> import fiamma
>>> nt = fiamma.nested.nested_tensor([fiamma.arange(6.).reshape(2, 3),
...                                   fiamma.arange(3.).reshape(1, 3)], layout=fiamma.jagged)
>>> nt.offsets().tolist(), nt.values().shape
([0, 2, 3], fiamma.Size([3, 3]))
>>> fiamma.nested.to_padded_tensor(nt.softmax(-1), 0.0).shape
fiamma.Size([2, 2, 3])
"""

import sys

from fiamma._layout import jagged, strided
from fiamma._nested import (
    NestedInt,
    NestedTensor,
    _jagged_from_list,
    _make_jagged,
    _make_strided,
    _sizes_of,
)
from fiamma._tensor import Tensor

__all__ = ["to_padded_tensor", "as_nested_tensor", "nested_tensor", "nested_tensor_from_jagged",
           "narrow", "masked_select"]


def _f():
    return sys.modules["fiamma"]


def _layout_of(layout, op):
    if layout is None:
        return strided
    if layout is not strided and layout is not jagged:
        raise RuntimeError(f"{op}: expected layout=fiamma.strided or fiamma.jagged, got "
                           f"{layout!r}")
    return layout


def _components(tensor_list, op, dtype, device):
    f = _f()
    if isinstance(tensor_list, Tensor) and not isinstance(tensor_list, NestedTensor):
        tensor_list = list(tensor_list.unbind(0))
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError(f"{op}: expected a list of tensors, got {type(tensor_list).__name__}")
    comps = [t if isinstance(t, Tensor) else f.tensor(t, dtype=dtype) for t in tensor_list]
    for t in comps:
        if isinstance(t, NestedTensor):
            raise TypeError(f"{op}: expected dense tensors in the list, got a nested tensor")
    if comps:
        nd = comps[0].dim()
        for i, t in enumerate(comps):
            if t.dim() != nd:
                raise RuntimeError(f"{op}: all tensors must have the same number of dims, "
                                   f"got {nd} (entry 0) and {t.dim()} (entry {i})")
    if dtype is not None or device is not None:
        comps = [t.to(device=device, dtype=dtype) for t in comps]
    for i, t in enumerate(comps):
        if t.dtype is not comps[0].dtype or t.device != comps[0].device:
            raise RuntimeError(f"{op}: all tensors must have the same dtype and device, got "
                               f"{comps[0].dtype} on {comps[0].device} (entry 0) and {t.dtype} "
                               f"on {t.device} (entry {i})")
    return comps


def _check_jagged(comps, op):
    if not comps:
        raise RuntimeError(f"{op}: cannot build a jagged nested tensor from an empty list")
    if comps[0].dim() == 0:
        raise RuntimeError(f"{op}: the components of a jagged nested tensor must have at least "
                           "one dim")
    tail = comps[0]._shape[1:]
    for i, t in enumerate(comps):
        if t._shape[1:] != tail:
            raise RuntimeError(f"{op}: the jagged layout allows one ragged dim (the first of each "
                               f"component); entry {i} has size {tuple(t._shape)}, entry 0 "
                               f"{tuple(comps[0]._shape)}")


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A nested tensor holding copies of the tensors in ``tensor_list`` (no autograd history:
    a leaf, with gradients if ``requires_grad``). ``layout``: ``fiamma.strided`` (default) or
    ``fiamma.jagged`` (the components may differ in their first dim only)."""
    layout = _layout_of(layout, "nested_tensor")
    comps = _components(tensor_list, "nested_tensor", dtype, device)
    with _f().no_grad():
        if layout is jagged:
            _check_jagged(comps, "nested_tensor")
            nt = _jagged_from_list([c.detach() for c in comps])
        else:
            nt = _make_strided([c.detach().clone() for c in comps])
    if requires_grad:
        nt.requires_grad_(True)
    return nt


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    """A nested tensor from a list of tensors (copied, autograd history kept: gradients flow
    back to the list) or from a dense tensor (its dim 0 the batch; for ``fiamma.jagged`` a
    view sharing its memory). A nested tensor of the layout asked for is returned as is
    (converted to ``dtype``/``device`` if given)."""
    layout = _layout_of(layout, "as_nested_tensor")
    if isinstance(ts, NestedTensor):
        if ts.layout is not layout:
            raise RuntimeError(f"as_nested_tensor: converting a nested tensor of layout "
                               f"{ts.layout!r} to {layout!r} is not supported")
        return ts if dtype is None and device is None else ts.to(device=device, dtype=dtype)
    if isinstance(ts, Tensor):
        if ts.dim() < 2:
            raise RuntimeError(f"as_nested_tensor: a dense input needs at least 2 dims, got "
                               f"{ts.dim()}")
        t = ts if dtype is None and device is None else ts.to(device=device, dtype=dtype)
        if layout is jagged:
            b, n = t._shape[0], t._shape[1]
            f = _f()
            offsets = f.arange(0, (b + 1) * n, n, dtype=f.int64, device=t.device)
            return _make_jagged(t.reshape((b * n,) + t._shape[2:]), offsets, None, 1,
                                ([i * n for i in range(b)], [n] * b), NestedInt())
        return _make_strided([c.clone() for c in t.unbind(0)])
    comps = _components(ts, "as_nested_tensor", dtype, device)
    if layout is jagged:
        _check_jagged(comps, "as_nested_tensor")
        return _jagged_from_list(comps)
    return _make_strided([c.clone() for c in comps])


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None):
    """A jagged nested tensor viewing ``values`` (differentiable): component i is
    ``values[offsets[i]:offsets[i+1]]`` along ``jagged_dim - 1``, or
    ``values[offsets[i]:offsets[i]+lengths[i]]`` when ``lengths`` is given (offsets may then
    be left out: they are the cumulative sum of the lengths)."""
    f = _f()
    op = "nested_tensor_from_jagged"
    if isinstance(values, NestedTensor) or not isinstance(values, Tensor):
        raise TypeError(f"{op}: expected values to be a dense Tensor, got "
                        f"{type(values).__name__}")
    r = 1 if jagged_dim is None else int(jagged_dim)
    if not 1 <= r <= values.dim():
        raise RuntimeError(f"{op}: jagged_dim {jagged_dim} out of range for values of "
                           f"{values.dim()} dims")
    if offsets is None:
        if lengths is None:
            raise RuntimeError(f"{op}: expected offsets or lengths")
        offsets = f.cat([f.zeros(1, dtype=f.int64, device=lengths.device),
                         lengths.to(f.int64).cumsum(0)])
        lengths = None
    for name, t in (("offsets", offsets), ("lengths", lengths)):
        if t is not None and (t.dim() != 1 or t.dtype.is_floating_point):
            raise RuntimeError(f"{op}: expected {name} to be a 1-d integer tensor, got "
                               f"{t.dtype} of size {tuple(t.shape)}")
    starts, lens = _sizes_of(offsets, lengths)
    total = values._shape[r - 1]
    if lengths is not None and len(lens) != offsets.shape[0] - 1:
        raise RuntimeError(f"{op}: expected {offsets.shape[0] - 1} lengths, got {len(lens)}")
    for s, n in zip(starts, lens):
        if s < 0 or n < 0 or s + n > total:
            raise RuntimeError(f"{op}: component [{s}, {s + n}) is out of range for values "
                               f"with {total} rows along dim {r - 1}")
    return _make_jagged(values, offsets, lengths, r, (starts, lens), NestedInt())


def narrow(tensor, dim, start, length, layout=strided):
    """A nested tensor of ``tensor[i].narrow(dim - 1, start[i], length[i])`` (``start`` and
    ``length`` ints or 1-d tensors, one per batch entry). Only ``dim=1`` is supported; the
    jagged layout views ``tensor``'s memory."""
    f = _f()
    layout = _layout_of(layout, "narrow")
    if dim != 1:
        raise RuntimeError(f"narrow: only dim=1 is supported, got {dim}")
    if isinstance(tensor, NestedTensor):
        raise RuntimeError("narrow: expected a dense tensor")
    b, n = tensor._shape[0], tensor._shape[1]
    starts = start.tolist() if isinstance(start, Tensor) else [int(start)] * b
    lens = length.tolist() if isinstance(length, Tensor) else [int(length)] * b
    if layout is strided:
        return _make_strided([tensor[i].narrow(0, s, m) for i, (s, m) in
                              enumerate(zip(starts, lens))])
    if not tensor.is_contiguous():
        raise RuntimeError("narrow: the jagged layout needs a contiguous input")
    values = tensor.reshape((b * n,) + tuple(tensor._shape[2:]))
    begins = [i * n + s for i, s in enumerate(starts)]
    for s, m in zip(starts, lens):
        if s < 0 or m < 0 or s + m > n:
            raise RuntimeError(f"narrow: [{s}, {s + m}) is out of range for dim 1 of size {n}")
    offsets = f.tensor(begins + [begins[-1] + lens[-1] if b else 0], dtype=f.int64,
                       device=tensor.device)
    lengths = f.tensor(lens, dtype=f.int64, device=tensor.device)
    return _make_jagged(values, offsets, lengths, 1, (begins, lens), NestedInt())


def masked_select(tensor, mask):
    """A jagged nested tensor of each row's elements where ``mask`` is True (``tensor`` and
    ``mask`` dense, of the same size)."""
    f = _f()
    if tuple(tensor.shape) != tuple(mask.shape) or mask.dtype is not f.bool:
        raise RuntimeError(f"masked_select: expected a bool mask of size {tuple(tensor.shape)}, "
                           f"got {mask.dtype} of size {tuple(mask.shape)}")
    if tensor.dim() < 2:
        raise RuntimeError("masked_select: expected a tensor of at least 2 dims")
    m2 = mask.reshape(mask.shape[0], -1)
    lengths = m2.sum(1)
    return nested_tensor_from_jagged(tensor[mask], lengths=lengths)


def to_padded_tensor(input, padding, output_size=None):
    """The dense tensor of ``input``'s components padded with ``padding`` (see
    ``NestedTensor.to_padded_tensor``)."""
    if not isinstance(input, NestedTensor):
        raise RuntimeError("to_padded_tensor: expected a nested tensor")
    return input.to_padded_tensor(padding, output_size)
