"""Fused scaled dot-product attention: ``softmax(q k^T * scale + mask) @ v`` in one backend call
forward (csrc/attn.c on the CPU) and one backward, recorded as one autograd op. The (L, S)
attention weights are never a tensor: the forward keeps each row's log-sum-exp and the
backward recomputes the weights from it. ``fiamma.nn.functional.scaled_dot_product_attention``
uses it wherever its inputs allow (see :func:`fused_attention`).

>>> import fiamma
>>> q = fiamma.tensor([[[1.0, 0.0], [0.0, 1.0]]])
>>> fiamma.fused_attention(q, q, q, is_causal=True).tolist()[0][0]
[1.0, 0.0]
"""

import math

from fiamma import _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, _copy_into, new_empty

__all__ = ["fused_attention", "fused_attention_backward"]


def _nograd(t):
    """t without history, for views and copies handed only to the backend (no recording)."""
    return t.detach() if t.requires_grad else t


def _as4(t, lead, heads, op, name):
    """t (..., R, C) viewed as (B, heads, R, C) with contiguous rows: (view, strides (b, h, r)).
    A 4-d t is used as it is (no new tensor: a view per operand per call is host time)."""
    shp = t._shape
    if len(shp) == 4 and shp[0] == lead and shp[1] == heads:
        t4 = t
    else:
        t4 = _nograd(t).reshape((lead, heads) + tuple(shp[-2:]))
    R, C = shp[-2:]
    st = list(t4._stride)
    if R == 1:
        st[2] = max(C, 1)
    if (C > 1 and st[3] != 1) or st[2] < max(C, 1) or any(s < 0 for s in st):
        t4 = _nograd(t4).contiguous()
        st = list(t4._stride)
        if R == 1:
            st[2] = max(C, 1)
    if lead == 1:
        st[0] = 0
    if heads == 1:
        st[1] = 0
    return t4, st[:3]


def _layout4(query):
    """The memory order of a 4-d query's first three dims, outermost first (the last dim stays
    innermost): PyTorch's fused CPU kernel lays its result out as the query is laid out, so
    a query that is a (B, L, H, E) tensor transposed to (B, H, L, E) gives a result whose
    ``.transpose(1, 2)`` is contiguous, and a contiguous query a contiguous result."""
    st, sh = query._stride, query._shape
    # size-1 dims have no meaningful stride: ordered where a contiguous tensor has them,
    # around the others ordered by stride (a (1, L, H, E) query transposed keeps its order)
    big = [d for d in range(3) if sh[d] > 1]
    if len({st[d] for d in big}) < len(big):
        return (0, 1, 2, 3)
    order = sorted(big, key=lambda d: -st[d])
    for d in range(3):
        if sh[d] <= 1:
            i = next((i for i, o in enumerate(order) if o > d), len(order))
            order.insert(i, d)
    return tuple(order) + (3,)


def _empty_in(perm, shape, dt, dev):
    """An uninitialised tensor of ``shape`` whose dims lie in memory in the order ``perm``
    (outermost first; None or the identity: contiguous)."""
    if perm is None or perm == (0, 1, 2, 3):
        return new_empty(shape, dt, dev)
    inv = [0] * 4
    for i, d in enumerate(perm):
        inv[d] = i
    return new_empty(tuple(shape[d] for d in perm), dt, dev).permute(*inv)


def _scale(E, scale):
    if scale is not None:
        return float(scale)
    # E == 0: the scores are empty sums (0) whatever the scale; PyTorch's 1/sqrt(0) is inf
    return 1.0 / math.sqrt(E) if E else math.inf


def _prep(query, key, value, attn_mask, is_causal, enable_gqa, op):
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise RuntimeError(f"{op}: expected {name} with at least 2 dims (..., L, E), got "
                               f"shape {tuple(t._shape)}")
    if not (query._dtype is key._dtype is value._dtype) or query._dtype._kind != 2:
        raise RuntimeError(f"{op}: expected query, key and value of one floating dtype, got "
                           f"{query._dtype}, {key._dtype} and {value._dtype}")
    nd = query.dim()
    qs, ks, vs = tuple(query._shape), tuple(key._shape), tuple(value._shape)
    if key.dim() != nd or value.dim() != nd or ks[:-3] != qs[:-3] or vs[:-3] != qs[:-3]:
        raise RuntimeError(f"{op}: expected query, key and value with the same batch dims "
                           f"(no broadcasting), got {qs}, {ks} and {vs}")
    L, E = qs[-2:]
    S, Ev = vs[-2:]
    if ks[-1] != E or ks[-2] != S:
        raise RuntimeError(f"{op}: expected key of shape (..., {S}, {E}) for query {qs} and "
                           f"value {vs}, got {ks}")
    H = qs[-3] if nd >= 3 else 1
    Hk = ks[-3] if nd >= 3 else 1
    if nd >= 3 and vs[-3] != Hk:
        raise RuntimeError(f"{op}: key and value must have the same number of heads, got "
                           f"{Hk} and {vs[-3]}")
    if Hk != H and not (enable_gqa and Hk > 0 and H % Hk == 0):
        raise RuntimeError(f"{op}: query has {H} heads and key/value {Hk}: the key/value heads "
                           "must equal the query's, or divide them with enable_gqa=True")
    dev = query._storage.device
    for name, t in (("key", key), ("value", value), ("attn_mask", attn_mask)):
        if t is not None and t._storage.device != dev:
            raise RuntimeError(f"{op}: expected all tensors on one device, got query on "
                               f"{query.device} and {name} on {t.device}")
    lead = 1
    for s in qs[:-3]:
        lead *= s
    cd = D.float64 if query._dtype is D.float64 else D.float32
    # cast makes no record; _as4 detaches before any view or copy
    q4, qst = _as4(cast(query, cd), lead, H, op, "query")
    k4, kst = _as4(cast(key, cd), lead, Hk, op, "key")
    v4, vst = _as4(cast(value, cd), lead, Hk, op, "value")
    mkind, m4, mst = K.ATTN_CAUSAL if is_causal else K.ATTN_NONE, None, None
    if attn_mask is not None:
        if is_causal:
            raise RuntimeError(f"{op}: Explicit attn_mask should not be set when is_causal=True")
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"{op}: expected attn_mask to be a Tensor")
        if attn_mask._dtype is D.bool:
            mkind, m = K.ATTN_BOOL, attn_mask.detach()
        elif attn_mask._dtype is query._dtype:
            mkind, m = K.ATTN_ADD, cast(attn_mask.detach(), cd)
        else:
            raise RuntimeError(f"{op}: Expected attn_mask dtype to be bool or to match query "
                               f"dtype, but got attn_mask.dtype: {attn_mask._dtype} and "
                               f"query.dtype: {query._dtype} instead.")
        full = qs[:-2] + (L, S)
        if m.dim() > nd:
            raise RuntimeError(f"{op}: attn_mask of shape {tuple(m._shape)} does not broadcast "
                               f"to the attention weights' {full}")
        try:
            m = m.expand(full)
        except RuntimeError:
            raise RuntimeError(f"{op}: attn_mask of shape {tuple(m._shape)} does not broadcast "
                               f"to the attention weights' {full}") from None
        m4 = m.reshape((lead, H, L, S))
        mst = [st if n > 1 else 0 for st, n in zip(m4._stride, m4._shape)]
    return (lead, H, Hk, L, S, E, Ev, cd, q4, qst, k4, kst, v4, vst, mkind, m4, mst)


def fused_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                    scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, PyTorch's
    ``scaled_dot_product_attention`` semantics, in one fused pass each way.

    query (..., H, L, E), key (..., Hk, S, E), value (..., Hk, S, Ev) with the same leading
    dims (no broadcasting); Hk == H, or Hk dividing H with ``enable_gqa``. ``attn_mask``: bool
    (True takes part) or of query's dtype (added), broadcastable to (..., L, S), not requiring
    grad; ``is_causal``: top-left causal mask; ``dropout_p``: dropout of the weights (the same
    random draws as ``nn.functional.dropout`` of them). Fully masked rows give zeros.
    float16/bfloat16 compute in float32. A 4-d result is laid out in memory as the query is
    (PyTorch's fused CPU kernel's rule): for a query that is a transposed (B, L, H, E) tensor,
    as a transformer's projections give, ``.transpose(1, 2)`` of the result is contiguous (and
    ``.view`` works on it); a contiguous query gives a contiguous result.

    >>> import fiamma
    >>> q = fiamma.randn(2, 4, 8, 16)
    >>> fiamma.fused_attention(q, q, q, is_causal=True).shape
    fiamma.Size([2, 4, 8, 16])
    """
    op = ops.fused_attention
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    (B, H, Hk, L, S, E, Ev, cd, q4, qst, k4, kst, v4, vst, mkind, m4,
     mst) = _prep(query, key, value, attn_mask, is_causal, enable_gqa, op)
    if attn_mask is not None and attn_mask.requires_grad and G.state.enabled:
        raise RuntimeError(f"{op}: the derivative for 'attn_mask' is not implemented (use "
                           "fiamma.nn.functional.scaled_dot_product_attention, which composes "
                           "it)")
    sc = _scale(E, scale)
    dev = query._storage.device
    drop = None
    if dropout_p > 0.0:
        from fiamma._creation import full, zeros
        from fiamma._random import bernoulli
        if dropout_p == 1.0:
            drop = zeros((B, H, L, S), dtype=cd, device=dev)
        else:
            keep = bernoulli(full((B, H, L, S), 1.0 - dropout_p, dtype=cd, device=dev))
            drop = keep.mul_(1.0 / (1.0 - dropout_p))
    nd = query.dim()
    perm = _layout4(query) if nd == 4 else None
    o = _empty_in(perm, (B, H, L, Ev), cd, dev)
    lse = new_empty((B, H, L), cd, dev)
    if B * H:  # no heads: nothing to compute (the kernels want at least one key/value head)
        rc = q4._storage.backend.attn_fwd(B, H, Hk, L, S, E, Ev, sc, q4, qst, k4, kst, v4, vst,
                                          mkind, m4, mst, drop, o, list(o._stride[:3]), lse)
        check(rc, op)
    out = o if nd == 4 else o.reshape(tuple(query._shape[:-1]) + (Ev,))
    if out._dtype is not query._dtype:
        # back to float16/bfloat16 in the same layout
        res = _empty_in(perm, tuple(out._shape), query._dtype, dev)
        _copy_into(res, out)
        out = res
    if G.state.enabled and (query.requires_grad or key.requires_grad or value.requires_grad):
        G.record(op, out, (query, key, value, attn_mask),
                 {"logsumexp": lse, "dropout_mask": drop, "is_causal": bool(is_causal),
                  "scale": sc, "enable_gqa": bool(enable_gqa)})
    return out


def fused_attention_backward(grad_output, query, key, value, logsumexp, attn_mask=None,
                             dropout_mask=None, is_causal=False, scale=None, enable_gqa=False,
                             output_mask=(True, True, True)):
    """The gradients ``(grad_query, grad_key, grad_value)`` of :func:`fused_attention` for
    ``grad_output``, from the forward's row log-sum-exp (B, H, L) and dropout multipliers
    (B, H, L, S) (internal layouts, saved by the recorded op); one fused pass; entries whose
    ``output_mask`` is False are None. Not recorded (autograd differentiates a composition
    under ``create_graph``).

    >>> import fiamma
    >>> q = fiamma.zeros(1, 2, 3)
    >>> lse = fiamma.full((1, 1, 2), 0.6931471805599453)
    >>> gq, gk, gv = fiamma.fused_attention_backward(fiamma.ones(1, 2, 3), q, q, q, lse)
    >>> gv.tolist()
    [[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]
    """
    op = "fused_attention_backward"
    (B, H, Hk, L, S, E, Ev, cd, q4, qst, k4, kst, v4, vst, mkind, m4,
     mst) = _prep(query, key, value, attn_mask, is_causal, enable_gqa, op)
    if not isinstance(grad_output, Tensor):
        raise TypeError(f"{op}: expected grad_output to be a Tensor")
    oshape = tuple(query._shape[:-1]) + (Ev,)
    if tuple(grad_output._shape) != oshape:
        raise RuntimeError(f"{op}: expected grad_output of shape {oshape}, got "
                           f"{tuple(grad_output._shape)}")
    if tuple(logsumexp._shape) != (B, H, L):
        raise RuntimeError(f"{op}: expected logsumexp of shape {(B, H, L)}, got "
                           f"{tuple(logsumexp._shape)}")
    if dropout_mask is not None and tuple(dropout_mask._shape) != (B, H, L, S):
        raise RuntimeError(f"{op}: expected dropout_mask of shape {(B, H, L, S)}, got "
                           f"{tuple(dropout_mask._shape)}")
    sc = _scale(E, scale)
    dev = query._storage.device
    g4, gst = _as4(cast(grad_output, cd), B, H, op, "grad_output")
    lse = _nograd(cast(logsumexp, cd)).contiguous()
    drop = None if dropout_mask is None else _nograd(cast(dropout_mask, cd)).contiguous()
    gq = new_empty((B, H, L, E), cd, dev) if output_mask[0] else None
    gk = new_empty((B, Hk, S, E), cd, dev) if output_mask[1] else None
    gv = new_empty((B, Hk, S, Ev), cd, dev) if output_mask[2] else None
    if B * H:
        rc = q4._storage.backend.attn_bwd(B, H, Hk, L, S, E, Ev, sc, q4, qst, k4, kst, v4, vst,
                                          mkind, m4, mst, drop, g4, gst, lse, gq, gk, gv)
        check(rc, op)
    res = []
    for t, src in ((gq, query), (gk, key), (gv, value)):
        if t is not None and t._shape != src._shape:
            t = t.reshape(tuple(src._shape))
        res.append(None if t is None else cast(t, src._dtype))
    return tuple(res)
