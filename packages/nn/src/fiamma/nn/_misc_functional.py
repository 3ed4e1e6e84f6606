"""Distances, normalisation, bags of embeddings and the channel/alpha dropouts
(``torch.nn.functional``), composed of differentiable core ops."""

import math
import warnings

import fiamma

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "pdist", "one_hot",
           "embedding_bag", "dropout1d", "dropout2d", "dropout3d", "feature_dropout",
           "alpha_dropout", "feature_alpha_dropout"]

one_hot = fiamma.one_hot


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``.

    >>> normalize(fiamma.tensor([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    denom = fiamma.linalg.vector_norm(input, p, dim=dim, keepdim=True).clamp(min=eps)
    res = input / denom
    if out is not None:
        out.copy_(res)
        return out
    return res


cosine_similarity = fiamma.cosine_similarity  # broadcasting, eps clamp: core's


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm of ``x1 - x2 + eps`` over the last dimension.

    >>> pairwise_distance(fiamma.tensor([[0.0, 0.0]]), fiamma.tensor([[3.0, 4.0]]), eps=0).tolist()
    [5.0]
    """
    d = max(x1.dim(), x2.dim())
    if d == 0:
        raise RuntimeError("pairwise_distance: inputs must have at least 1 dimension")
    return fiamma.linalg.vector_norm(x1 - x2 + eps, p, dim=d - 1, keepdim=keepdim)


def pdist(input, p=2):
    """p-norm distances between the rows of an (N, M) input, upper triangle in row-major
    order (N (N - 1) / 2 values)."""
    return fiamma.pdist(input, p)  # (core's: p=inf ties and empty results as PyTorch's)


# ---- bags of embeddings ------------------------------------------------------------------------


def _bag_ids(input, offsets, include_last_offset, op):
    """(flat indices, bag index per index, number of bags) from 2-D input or 1-D + offsets."""
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets).__name__}")
        b, length = input.shape
        bag = fiamma.arange(b, device=input.device).unsqueeze(1).expand(b, length).reshape(-1)
        return input.reshape(-1).long(), bag, b
    if input.dim() != 1:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if offsets is None:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
    if not isinstance(offsets, fiamma.Tensor):
        offsets = fiamma.tensor(list(offsets), dtype=fiamma.int64, device=input.device)
    if offsets.dim() != 1:
        raise ValueError(f"{op}: offsets has to be a 1D Tensor, got {offsets.dim()}-D")
    offsets = offsets.long()
    m = input.shape[0]
    if offsets.numel():
        if offsets[0].item() != 0:
            raise RuntimeError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the "
                               f"mini-batch has to start from position 0. However, got "
                               f"{offsets[0].item()}")
        if offsets[-1].item() > m:
            raise RuntimeError(f"{op}: offsets[-1] can not be greater than input's length "
                               f"({m}), but got offsets[-1] of {offsets[-1].item()}")
        if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
            raise RuntimeError(f"{op}: offsets must be non-decreasing")
    nb = offsets.numel() - 1 if include_last_offset else offsets.numel()
    nb = max(nb, 0)
    bag = fiamma.searchsorted(offsets, fiamma.arange(m, device=offsets.device), right=True) - 1
    if include_last_offset:  # indices at or past the last offset belong to no bag
        bag = bag.masked_fill(bag >= nb, nb)
    return input.reshape(-1).long(), bag, nb


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows without materialising the per-index
    rows per bag. Bags are the rows of a 2-D ``input`` or the slices of a 1-D ``input``
    starting at ``offsets``; ``per_sample_weights`` (mode 'sum') scale the rows; indices equal
    to ``padding_idx`` are left out (an empty bag gives zeros); ``scale_grad_by_freq`` (modes
    'sum' and 'mean') divides each index's gradient by its count in ``input``; ``sparse`` makes
    the weight's gradient a sparse COO tensor (one entry per index of ``input``).

    >>> w = fiamma.arange(8.0).reshape(4, 2)
    >>> embedding_bag(fiamma.tensor([0, 1, 3]), w, fiamma.tensor([0, 2]), mode="sum").tolist()
    [[2.0, 4.0], [6.0, 7.0]]
    """
    op = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if sparse and mode == "max":
        raise ValueError("max mode does not support sparse weights")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if weight.dim() != 2:
        raise ValueError(f"{op}: weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dtype.is_floating_point or input.dtype is fiamma.bool:
        raise RuntimeError(f"{op}: expected an integer index tensor, got {input.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights was not None. "
                                      "per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}'). Please open a feature request")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"{op}: embedding_bag: If per_sample_weights "
                             f"({list(per_sample_weights.shape)}) is not None, then it must "
                             f"have the same shape as the input ({list(input.shape)})")
    n_rows, dim = weight.shape
    if padding_idx is not None:
        if not -n_rows <= padding_idx < n_rows:
            raise ValueError(f"{op}: padding_idx must be within the number of embeddings")
        padding_idx %= n_rows
    flat, bag, nb = _bag_ids(input, offsets, include_last_offset, op)
    if flat.numel() and bool(((flat < 0) | (flat >= n_rows)).any()):
        bad = flat[(flat < 0) | (flat >= n_rows)][0].item()
        raise IndexError(f"{op}: index {bad} is out of range for {n_rows} embeddings")
    if max_norm is not None:
        from fiamma.nn.functional import embedding
        embedding(flat, weight, None, max_norm, norm_type)  # renormalises rows in place
    if scale_grad_by_freq or sparse:
        # one embedding node: its gradient is sparse COO for ``sparse``; with
        # ``scale_grad_by_freq`` each row's gradient is divided by its index's count in the
        # whole input (the documented rule; PyTorch 2.13's CPU kernel divides some by another
        # index's count, #190063); padding entries are left out of the sparse gradient, as
        # PyTorch's
        pad = -1 if padding_idx is None or not sparse else padding_idx
        rows = fiamma.embedding(weight, flat, pad, bool(scale_grad_by_freq), bool(sparse))
    else:
        rows = weight.index_select(0, flat)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(rows.dtype)
    if padding_idx is not None:  # send padding entries to a discarded extra bag
        bag = bag.masked_fill(flat == padding_idx, nb)
    zeros = fiamma.zeros((nb + 1, dim), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        # each bag's maximum, taken from the first entry (in input order) that holds it, so
        # its whole gradient goes there (PyTorch's max_indices), not split among ties
        k = bag.shape[0]
        idx = bag.unsqueeze(1).expand(k, dim)
        with fiamma.no_grad():
            r = rows.detach()
            top = zeros.scatter_reduce(0, idx, r, "amax", include_self=False)
            at = top.gather(0, idx)
            hit = (r == at) | (r.isnan() & at.isnan())
            pos = fiamma.arange(k, device=weight.device).unsqueeze(1).expand(k, dim)
            pos = fiamma.where(hit, pos, k)
            first = fiamma.full((nb + 1, dim), k, dtype=pos.dtype, device=weight.device)
            first = first.scatter_reduce(0, idx, pos, "amin")[:nb]  # k: an empty bag
        ext = fiamma.cat([rows, zeros[:1]], 0)  # row k: the empty bags' zeros
        return ext.gather(0, first)
    out = zeros.index_add(0, bag, rows)[:nb]
    if mode == "mean":
        count = fiamma.zeros(nb + 1, dtype=weight.dtype, device=weight.device).index_add(
            0, bag, fiamma.ones(bag.shape[0], dtype=weight.dtype, device=weight.device))[:nb]
        out = out / count.clamp(min=1).unsqueeze(1)
    return out


# ---- dropouts ---------------------------------------------------------------------------------


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input):
    return input.shape[:2] + (1,) * (input.dim() - 2)


def _dropout_impl(input, p, training, inplace, feature, alpha):
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0 and not alpha:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature and input.dim() < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got "
                           f"{input.dim()}-D")
    shape = _feature_noise(input) if feature else tuple(input.shape)
    keep = fiamma.bernoulli(fiamma.full(shape, 1.0 - p, dtype=input.dtype, device=input.device))
    if alpha:
        if p == 1.0:
            return input.mul_(0.0) if inplace else input * 0.0
        a_neg = 1.7580993408473766
        a = 1.0 / math.sqrt((a_neg * a_neg * p + 1) * (1 - p))
        b = (keep - 1) * (a_neg * a) + a_neg * a * p
        noise = keep * a
        if inplace:
            return input.mul_(noise).add_(b)
        return input * noise + b
    noise = keep / (1.0 - p)
    return input.mul_(noise) if inplace else input * noise


def feature_dropout(input, p=0.5, training=True, inplace=False):
    """Zero whole channels (dim 1 of a batched input) with probability ``p``."""
    return _dropout_impl(input, p, training, inplace, True, False)


def _channel_dropout(name, input, p, training, inplace, batched_dim):
    d = input.dim()
    if d not in (batched_dim - 1, batched_dim):
        raise RuntimeError(f"{name}: Expected {batched_dim - 1}D or {batched_dim}D input, "
                           f"but received a {d}D input. Note that {name} exists to provide "
                           "channel-wise dropout on inputs with "
                           f"{batched_dim - 2} spatial dimensions, a channel dimension, and "
                           "an optional batch dimension")
    if not training or p == 0.0:
        return input
    if d == batched_dim - 1:  # unbatched: (C, *spatial)
        if inplace:
            _dropout_impl(input.unsqueeze(0), p, training, True, True, False)
            return input
        return _dropout_impl(input.unsqueeze(0), p, training, False, True, False).squeeze(0)
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability ``p``."""
    _check_p(p)
    return _channel_dropout("dropout1d", input, p, training, inplace, 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) inputs with probability ``p``
    (a 3-D input is taken as (N, C, L), with PyTorch's warning)."""
    _check_p(p)
    d = input.dim()
    if d not in (3, 4):
        warnings.warn(f"dropout2d: Received a {d}-D input to dropout2d, which is deprecated "
                      "and will result in an error in a future release. To retain the behavior "
                      "and silence this warning, please use dropout instead. Note that dropout2d "
                      "exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      "3D or 4D inputs).", UserWarning, stacklevel=2)
    if d == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-"
                      "wise 1D dropout behavior is desired - input is interpreted as shape "
                      "(N, C, L), where C is the channel dim. This behavior will change in a "
                      "future release to interpret the input as one without a batch dimension, "
                      "i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability
    ``p``."""
    _check_p(p)
    d = input.dim()
    if d not in (4, 5):
        warnings.warn(f"dropout3d: Received a {d}-D input to dropout3d, which is deprecated and "
                      "will result in an error in a future release. To retain the behavior and "
                      "silence this warning, please use dropout instead. Note that dropout3d "
                      "exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      "4D or 5D inputs).", UserWarning, stacklevel=2)
    if not training or p == 0.0:
        return input
    if d != 5:  # taken as unbatched
        res = _dropout_impl(input.unsqueeze(0), p, training, inplace, True, False)
        return input if inplace else res.squeeze(0)
    return _dropout_impl(input, p, training, inplace, True, False)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value and
    an affine map keeps the mean and variance (identity unless ``training``)."""
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (dim 1)."""
    return _dropout_impl(input, p, training, inplace, True, True)
