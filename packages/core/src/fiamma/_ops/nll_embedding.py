"""The negative log likelihood loss and the embedding lookup as one recorded op each (PyTorch's
``NllLossBackward0`` and ``EmbeddingBackward0`` nodes; their compositions recorded four and
two). Both compute with core's gather/index_select with grad mode off (neither autograd nor a
fiamma.jit trace sees those inner ops), then record themselves; fiamma-autograd holds their
derivatives (written in differentiable ops, so higher orders work), fiamma.jit
traces them as one op each and fiamma.onnx exports them (NegativeLogLikelihoodLoss, Gather).

>>> import fiamma
>>> w = fiamma.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
>>> fiamma.embedding(w, fiamma.tensor([2, 0])).tolist()
[[4.0, 5.0], [0.0, 1.0]]
>>> fiamma.fused.nll_loss(fiamma.tensor([[-1.0, -2.0], [-3.0, -4.0]]),
...                       fiamma.tensor([1, 0])).item()
2.5
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._tensor import Tensor

__all__ = ["embedding", "embedding_renorm_", "nll_loss"]

# Tensor.to as defined (a fiamma.jit trace patches the class attribute to record casts; this
# module's internal casts are part of one recorded op). Kept out of _ops._common, so this
# module stays out of core's import cycle.
_to = Tensor.to


def _cast(t, dt):
    return t if t._dtype is dt else _to(t, dt)


_REDUCTIONS = ("none", "mean", "sum")


def _nll_checks(input, target, weight, reduction, op):
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected input and target to be Tensors, got "
                        f"{type(input).__name__} and {type(target).__name__}")
    if input._dtype._kind != 2:
        raise TypeError(f"{op}: expected a floating point input (log-probabilities), got dtype "
                        f"{input._dtype}")
    if target._dtype._kind != 1:
        raise RuntimeError(f"{op}: expected target of an integer dtype (class indices), got "
                           f"{target._dtype}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    nd = len(input._shape)
    if nd == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got 0-d")
    cdim = 0 if nd == 1 else 1
    c = input._shape[cdim]
    expect = input._shape[:cdim] + input._shape[cdim + 1:]
    if target._shape != expect:
        raise ValueError(f"{op}: expected target of shape {list(expect)} for input of shape "
                         f"{list(input._shape)}, got {list(target._shape)}")
    if weight is not None:
        if not isinstance(weight, Tensor) or weight._shape != (c,):
            raise RuntimeError(f"{op}: weight tensor should be defined either for all {c} "
                               f"classes or no classes but got weight tensor of shape: "
                               f"{list(getattr(weight, 'shape', ()))}")
    dev = input._storage.device
    for t, name in ((target, "target"), (weight, "weight")):
        if t is not None and t._storage.device != dev:
            raise RuntimeError(f"{op}: expected all tensors on one device, got input on "
                               f"{input.device} and {name} on {t.device}")
    return cdim, c


def _target_weights(target, weight, ignore_index, c, dtype, op):
    """(safe target, per-element weights): ``target`` as int64 with ignored entries replaced by
    0 (so gathers stay in range), and each entry's class weight (0 where ignored). Raises
    naming the first target out of ``[0, c)`` that is not ``ignore_index``."""
    t = target if target._dtype is D.int64 else _cast(target, D.int64)
    ignored = t == ignore_index
    bad = ~ignored & ((t < 0) | (t >= c))
    if bool(bad.any()):
        v = t[bad].reshape(-1)[0].item()
        raise IndexError(f"{op}: Target {v} is out of bounds (expected 0 <= target < {c}, or "
                         f"the ignore_index {ignore_index}).")
    safe = t.masked_fill(ignored, 0)
    if weight is None:
        w = _cast(~ignored, dtype)
    else:
        w = _cast(weight[safe], dtype).masked_fill(ignored, 0.0)
    return safe, w


def nll_loss(input, target, weight=None, reduction="mean", ignore_index=-100):
    """PyTorch's ``nll_loss`` over log-probabilities ``input`` (C,), (N, C) or
    (N, C, d1, ..., dk) and class indices ``target`` of the input's shape without C:
    ``-weight[t] * input[..., t, ...]``; targets equal to ``ignore_index`` count nothing, and
    ``mean`` divides by the summed weights of the others. One recorded op (its node prints as
    ``NllLossBackward0``); the weight is not differentiated (it may not require grad).

    >>> import fiamma
    >>> x = fiamma.tensor([[-1.0, -2.0], [-3.0, -4.0]])
    >>> fiamma.fused.nll_loss(x, fiamma.tensor([1, -100]), reduction="none").tolist()
    [2.0, 0.0]
    """
    op = "nll_loss"
    cdim, c = _nll_checks(input, target, weight, reduction, op)
    st = G.state
    if not st.enabled:
        return _nll_forward(input, target, weight, reduction, ignore_index, cdim, c, op)[0]
    if weight is not None and weight.requires_grad:
        raise RuntimeError(f"{op}: the derivative for 'weight' is not implemented (use "
                           "fiamma.nn.functional.nll_loss, which composes it)")
    # the forward's own ops run unrecorded (for autograd and for a fiamma.jit trace, which
    # sees this op as one node)
    st.enabled = False
    try:
        out, plain = _nll_forward(input, target, weight, reduction, ignore_index, cdim, c, op)
    finally:
        st.enabled = True
    if input.requires_grad:
        # _plain: every target is a class (none ignored) and there is no weight, so the
        # derivative needs no masks (a fiamma.jit trace leaves the key out of the graph)
        G.record(ops.nll_loss, out, (input, target, weight),
                 {"reduction": reduction, "ignore_index": int(ignore_index), "_plain": plain})
    return out


def _nll_forward(x, t, weight, reduction, ignore_index, cdim, c, op):
    """(loss, whether the plain path ran: no weight, every target a class in range)"""
    if t._dtype is not D.int64:
        t = _cast(t, D.int64)
    if weight is None and not 0 <= ignore_index < c and x._numel:
        # the common case: gather checks every index itself, so when it succeeds every target
        # is a class in range, none is ignore_index and every weight is 1
        try:
            picked = x.gather(cdim, t.unsqueeze(cdim)).squeeze(cdim)
        except IndexError:
            picked = None
        if picked is not None:
            if reduction == "mean":
                return -picked.mean(), True
            if reduction == "sum":
                return -picked.sum(), True
            return -picked, True
    safe, w = _target_weights(t, weight, ignore_index, c, x._dtype, op)
    loss = x.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim) * w
    if reduction == "none":
        return -loss, False
    if reduction == "sum":
        return -loss.sum(), False
    return -loss.sum() / w.sum(), False


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of the 2-d ``weight`` picked by the integer tensor ``indices`` (result shape
    ``indices.shape + (embedding_dim,)``): PyTorch's ``torch.embedding``. ``padding_idx``
    (-1 for none, else a row number) gets no gradient; ``scale_grad_by_freq`` divides each
    row's gradient by how often it occurs in ``indices``; ``sparse`` makes the weight's
    gradient a sparse COO tensor. One recorded op (its node prints as ``EmbeddingBackward0``).

    >>> import fiamma
    >>> tuple(fiamma.embedding(fiamma.eye(3), fiamma.tensor([[1], [2]])).shape)
    (2, 1, 3)
    """
    op = "embedding"
    if not isinstance(weight, Tensor) or not isinstance(indices, Tensor):
        raise TypeError(f"{op}: expected weight and indices to be Tensors, got "
                        f"{type(weight).__name__} and {type(indices).__name__}")
    if len(weight._shape) != 2:
        raise RuntimeError(f"{op}: 'weight' must be 2-D, got a {len(weight._shape)}-d tensor "
                           f"of shape {list(weight._shape)}")
    if indices._dtype is not D.int64 and indices._dtype is not D.int32:
        raise RuntimeError(f"{op}: expected indices of dtype int64 or int32, got "
                           f"{indices._dtype}")
    if indices._storage.device != weight._storage.device:
        raise RuntimeError(f"{op}: expected indices on the weight's device {weight.device}, "
                           f"got {indices.device}")
    n, dim = weight._shape
    if type(padding_idx) is not int:
        padding_idx = int(padding_idx)
    st = G.state
    if not st.enabled:
        return _lookup(weight, indices, n, dim, op)
    st.enabled = False  # the lookup's own ops unrecorded (autograd, a fiamma.jit trace)
    try:
        out = _lookup(weight, indices, n, dim, op)
    finally:
        st.enabled = True
    if weight.requires_grad:
        G.record(ops.embedding, out, (weight, indices),
                 {"padding_idx": padding_idx, "scale_grad_by_freq": bool(scale_grad_by_freq),
                  "sparse": bool(sparse)})
    return out


def _lookup(weight, indices, n, dim, op):
    flat = indices.reshape(-1)
    try:
        out = weight.index_select(0, flat)
    except IndexError:
        bad = flat[(flat < 0) | (flat >= n)]
        v = bad[0].item() if bad._numel else "?"
        raise IndexError(f"{op}: index {v} is out of range for a weight of "
                         f"{n} rows (expected 0 <= index < {n})") from None
    return out.reshape(indices._shape + (dim,))


def embedding_renorm_(weight, input, max_norm, norm_type=2.0):
    """Rescale in place, unrecorded, the rows of ``weight`` that ``input`` references whose
    ``norm_type``-norm exceeds ``max_norm`` to the norm ``max_norm`` (``max_norm / (norm +
    1e-7)`` times the row, as PyTorch's ``torch.embedding_renorm_``, which ``F.embedding``
    calls for ``max_norm``). Returns ``weight``.

    >>> import fiamma
    >>> w = fiamma.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> fiamma.embedding_renorm_(w, fiamma.tensor([0, 1]), 1.0).norm(dim=1).tolist()
    [1.0, 0.5]
    """
    op = "embedding_renorm_"
    if not isinstance(weight, Tensor) or not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected weight and input to be Tensors")
    if len(weight._shape) != 2:
        raise RuntimeError(f"{op}: 'weight' must be 2-D, got shape {list(weight._shape)}")
    if input._dtype._kind != 1:
        raise RuntimeError(f"{op}: expected an integer index tensor, got {input._dtype}")
    st = G.state
    prev, st.enabled = st.enabled, False  # unrecorded, as PyTorch's (under no_grad in F)
    try:
        _renorm(weight, input, max_norm, norm_type, op)
    finally:
        st.enabled = prev
    return weight


def _renorm(w, input, max_norm, norm_type, op):
    rows = _cast(input.reshape(-1), D.int64).unique()
    if not rows._numel:
        return
    n = w._shape[0]
    if bool(((rows < 0) | (rows >= n)).any()):
        raise IndexError(f"{op}: an index is out of range for a weight of {n} rows")
    sel = w.index_select(0, rows)
    norms = sel.norm(norm_type, dim=1, keepdim=True)
    scale = (max_norm / (norms + 1e-7)).masked_fill(norms <= max_norm, 1.0)
    w.index_copy_(0, rows, sel * scale)
