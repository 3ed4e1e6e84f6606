"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward``
(torch.nn.functional's). Attention runs core's fused kernel (``fiamma.fused_attention``) where
it takes the inputs, else a composition of core ops."""

import math
import warnings

import fiamma
import fiamma.backends.cuda as _cuda_flags
from fiamma.autograd_hook import get_trace_hook

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _dropout(x, p, training=True):
    if not training or p == 0.0:
        return x
    from fiamma.nn.functional import dropout
    return dropout(x, p, True)


_causal_cache = {}


def _causal_add(L, S, dtype, device):
    """The additive (L, S) top-left causal mask (0 / -inf) of ``dtype`` on ``device`` (cached:
    adding it is faster than a masked fill with a broadcast bool mask)."""
    if type(L) is not int or type(S) is not int:
        # sizes that carry more than their value (a trace's symbolic sizes): built each time,
        # so the mask follows them instead of being a cached constant
        return fiamma.full((L, S), _NEG_INF, dtype=dtype, device=device).triu(1)
    key = (L, S, dtype, device)
    m = _causal_cache.get(key)
    if m is None:
        m = fiamma.full((L, S), _NEG_INF, dtype=dtype, device=device).triu(1)
        if len(_causal_cache) > 64:
            _causal_cache.clear()
        _causal_cache[key] = m
    return m


def _apply_mask(scores, attn_mask, is_causal):
    """Mask the scores; returns (scores, dead) where ``dead`` marks the fully masked rows
    (None when there are none). ``scores`` is a fresh tensor of ours: masked in place when
    the mask does not enlarge it."""
    if is_causal:
        # top-left aligned: row i keeps columns 0..i, so no row is fully masked
        return scores.add_(_causal_add(*scores.shape[-2:], scores.dtype, scores.device)), None
    if attn_mask is None:
        return scores, None
    grows = fiamma.broadcast_shapes(scores.shape, attn_mask.shape) != scores.shape
    if attn_mask.dtype is fiamma.bool:
        drop = attn_mask.logical_not()
        dead = drop.all(-1, keepdim=True)
        if dead.any().item():
            # softmax fully masked rows over zeros (no NaN, also not in the backward) and
            # return zeros for them, as PyTorch's safe softmax does
            drop = drop.logical_and(dead.logical_not())
        else:
            dead = None
        if grows:
            return scores.masked_fill(drop, _NEG_INF), dead
        if 4 * drop.numel() <= scores.numel():
            # a broadcast mask: adding its (small) additive form beats a masked fill
            add = fiamma.zeros(drop.shape, dtype=scores.dtype, device=scores.device).masked_fill_(
                drop, _NEG_INF)
            return scores.add_(add), dead
        return scores.masked_fill_(drop, _NEG_INF), dead
    if not attn_mask.is_floating_point():
        raise TypeError("scaled_dot_product_attention: expected attn_mask of dtype bool or "
                        f"a float dtype, got {attn_mask.dtype}")
    dead = (attn_mask == _NEG_INF).all(-1, keepdim=True)
    if dead.any().item():
        attn_mask = attn_mask.masked_fill(dead, 0.0)
    else:
        dead = None
    return (scores + attn_mask if grows else scores.add_(attn_mask)), dead


def _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() < 2:
            raise RuntimeError(f"{op}: expected {name} with at least 2 dims (..., L, E), got "
                               f"shape {tuple(t.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"{op}: query and key must have the same embedding size, got "
                           f"query {tuple(query.shape)} and key {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"{op}: key and value must have the same sequence length, got "
                           f"key {tuple(key.shape)} and value {tuple(value.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"{op}: expected query, key and value to have the same dtype, got "
                           f"{query.dtype}, {key.dtype} and {value.dtype}")
    if not query.is_floating_point():
        raise RuntimeError(f"{op}: expected a floating point dtype, got {query.dtype}")
    if attn_mask is not None and is_causal:
        raise RuntimeError(f"{op}: Explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    sdp = _cuda_flags._sdp
    if not (sdp["math"] or sdp["flash"]):
        # fiamma's one kernel stands for PyTorch's CPU kernels (math and CPU flash)
        on = [k for k, v in sdp.items() if v]
        raise RuntimeError(f"{op}: no viable backend: the math and flash attention kernels "
                           f"are both turned off (enabled: {on or 'none'}; see "
                           "fiamma.nn.attention.sdpa_kernel and fiamma.backends.cuda)")
    if not sdp["math"]:
        # only the flash kernel may run: PyTorch's CPU flash kernel takes 4-d inputs with one
        # head size and non-empty sequences, and otherwise finds no kernel
        why = None
        if not (query.dim() == key.dim() == value.dim() == 4):
            why = (f"all fused kernels require query, key and value to be 4 dimensional, got "
                   f"{query.dim()}, {key.dim()} and {value.dim()}")
        elif not (query.shape[-1] == key.shape[-1] == value.shape[-1]):
            why = "the flash kernel needs query, key and value of the same head size"
        elif 0 in (query.shape[-2], key.shape[-2]):
            why = "the flash kernel needs non-empty sequences"
        if why is not None:
            raise RuntimeError(f"{op}: No available kernel. Aborting execution. (only the "
                               f"flash attention kernel is enabled and {why})")
    if attn_mask is not None:
        if attn_mask.dtype is not fiamma.bool and attn_mask.dtype != query.dtype:
            raise RuntimeError(f"{op}: Expected attn_mask dtype to be bool or to match query "
                               f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and "
                               f"query.dtype: {query.dtype} instead.")
        L, S = query.shape[-2], key.shape[-2]
        shp = tuple(attn_mask.shape)
        if len(shp) < 1 or (shp[-1] not in (1, S)) or (len(shp) >= 2 and shp[-2] not in (1, L)):
            raise RuntimeError(f"{op}: attn_mask of shape {shp} does not broadcast to the "
                               f"attention weights' (..., {L}, {S})")


def _gqa_expand(query, key, value):
    if query.dim() < 3 or key.dim() < 3 or value.dim() < 3:
        return key, value
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hq % hk or hq % hv:
        raise RuntimeError("scaled_dot_product_attention: Number of heads in key and value "
                           f"must divide the number of heads in query, got query heads {hq}, "
                           f"key heads {hk}, value heads {hv}")
    if hk != hq:
        key = key.repeat_interleave(hq // hk, dim=-3)
    if hv != hq:
        value = value.repeat_interleave(hq // hv, dim=-3)
    return key, value


def _fusable(query, key, value, attn_mask, enable_gqa):
    """Whether core's fused kernel takes these inputs: same leading dims (no broadcasting),
    key/value heads equal or dividing the query's (gqa), a mask that broadcasts to the weights
    and needs no gradient, and no fiamma.jit trace is running (tracers know the composed ops);
    otherwise the composition below runs."""
    nd = query.dim()
    if key.dim() != nd or value.dim() != nd:
        return False
    if get_trace_hook() is not None:  # fiamma.jit / onnx trace the composition
        return False
    lead = tuple(query.shape[:-3])
    if tuple(key.shape[:-3]) != lead or tuple(value.shape[:-3]) != lead:
        return False
    if nd >= 3:
        hq, hk = query.shape[-3], key.shape[-3]
        if value.shape[-3] != hk or (hk != hq and not (enable_gqa and hk and hq % hk == 0)):
            return False
    dev = query.device
    if key.device != dev or value.device != dev:
        return False
    if attn_mask is not None:
        if attn_mask.device != dev or attn_mask.dim() > nd:
            return False
        if attn_mask.requires_grad and fiamma.is_grad_enabled():
            return False
        weights = tuple(query.shape[:-1]) + (key.shape[-2],)
        try:
            if fiamma.broadcast_shapes(tuple(attn_mask.shape), weights) != weights:
                return False
        except RuntimeError:
            return False
    return True


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, batch dims
    broadcast (PyTorch's semantics).

    ``attn_mask``: a bool mask (True = the position takes part) or a float mask added to
    the scores, broadcastable to (..., L, S); ``is_causal``: a top-left aligned lower
    triangular mask (an error together with ``attn_mask``); a
    :class:`fiamma.nn.attention.bias.CausalBias` as ``attn_mask`` applies its causal mask;
    ``scale`` defaults to ``1 / sqrt(E)``; ``enable_gqa`` repeats key/value heads (dim -3)
    to match the query's.
    Rows where every position is masked give zeros (as PyTorch's safe softmax). Runs as
    one fused op (``fiamma.fused_attention``: a 4-d result is then laid out in memory as the
    query is, as PyTorch's) unless the batch dims broadcast or the mask requires grad.

    Example::

        >>> q = k = v = fiamma.randn(2, 4, 8, 16)      # (N, heads, L, E)
        >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
        fiamma.Size([2, 4, 8, 16])
    """
    if query.is_nested or key.is_nested or value.is_nested:
        return _nested_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
                            enable_gqa)
    bias = getattr(type(attn_mask), "_sdpa_with_bias", None) if attn_mask is not None else None
    if bias is not None:  # a fiamma.nn.attention.bias.CausalBias applies itself
        return bias(attn_mask, query, key, value, dropout_p, is_causal, scale, enable_gqa)
    if _AC_ON:  # on PyTorch's CPU autocast lower-precision list: a float mask is cast too
        query, key, value, attn_mask = fiamma.amp.cast_lower(None, query, key, value,
                                                             attn_mask)
    _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if _fusable(query, key, value, attn_mask, enable_gqa):
        return fiamma.fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                      enable_gqa)
    if enable_gqa:
        key, value = _gqa_expand(query, key, value)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # scaling q (L*E values) is cheaper than scaling the scores (L*S values)
    scores = fiamma.matmul(query * scale, key.transpose(-2, -1))
    scores, dead = _apply_mask(scores, attn_mask, is_causal)
    attn = fiamma.softmax(scores, -1)
    if dead is not None:
        attn = attn.masked_fill(dead, 0.0)
    attn = _dropout(attn, dropout_p)
    return fiamma.matmul(attn, value)


def _nested_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Attention of nested q/k/v (batch, heads, ragged seq, E): each batch entry attends
    over its own sequence, as if run alone (PyTorch's math path for nested tensors)."""
    op = "scaled_dot_product_attention"
    if not (query.is_nested and key.is_nested and value.is_nested):
        raise RuntimeError(f"{op}: query, key and value must be all nested tensors or all "
                           "dense")
    if attn_mask is not None:
        raise RuntimeError(f"{op}: attn_mask is not supported for nested tensors (use "
                           "is_causal, or per-sequence lengths)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() < 3:
            raise RuntimeError(f"{op}: expected nested {name} of at least 3 dims (batch, ..., "
                               f"L, E), got {t.dim()}")
    if len(key) != len(query) or len(value) != len(query):
        raise RuntimeError(f"{op}: batch sizes differ: query {len(query)}, key {len(key)}, "
                           f"value {len(value)}")
    if not _cuda_flags._sdp["math"]:
        # PyTorch's CPU kernels for nested inputs are the math one only
        raise RuntimeError(f"{op}: No available kernel: nested tensors run on the math kernel, "
                           "which sdpa_kernel has turned off")
    out = query.map_dense(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, None, dropout_p, is_causal,
                                                     scale, enable_gqa),
        key, value, per_component=True)
    if query.dim() == 4:
        # laid out as PyTorch's fused kernels lay theirs out, (B, j, heads, E) in memory, so
        # that the usual out.transpose(1, 2).view(B, -1, heads * E) is a view
        out = out.transpose(1, 2).contiguous().transpose(1, 2)
    return out


_AC_ON = False  # True while an autocast region is enabled (fiamma.amp keeps it)
fiamma.amp.register_autocast_flag(globals())


# ----------------------------------------------------------------------------------------
# multi_head_attention_forward

def _float_mask(mask, name, target_dtype):
    """bool masks (True = masked out) become additive float masks (-inf); float ones pass."""
    if mask is None:
        return None
    if mask.dtype is fiamma.bool:
        return fiamma.zeros(mask.shape, dtype=target_dtype, device=mask.device).masked_fill(
            mask, _NEG_INF)
    if not mask.is_floating_point():
        raise AssertionError(f"MultiheadAttention: only bool and floating types of {name} are "
                             f"supported, got {mask.dtype}")
    return mask.to(target_dtype) if mask.dtype != target_dtype else mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """True for batched inputs (L, N, E), False for unbatched (L, E); raises otherwise."""
    op = "MultiheadAttention"
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(f"{op}: for batched (3-D) query, expected key and value to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(f"{op}: for batched (3-D) query, expected key_padding_mask to "
                                 f"be None or 2-D but found {key_padding_mask.dim()}-D tensor")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(f"{op}: for batched (3-D) query, expected attn_mask to be "
                                 f"None, 2-D or 3-D but found {attn_mask.dim()}-D tensor")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(f"{op}: for unbatched (2-D) query, expected key and value to "
                                 f"be 2-D but found {key.dim()}-D and {value.dim()}-D tensors")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(f"{op}: for unbatched (2-D) query, expected key_padding_mask "
                                 f"to be None or 1-D but found {key_padding_mask.dim()}-D "
                                 "tensor")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(f"{op}: for unbatched (2-D) query, expected attn_mask to "
                                     f"be None, 2-D or 3-D but found {attn_mask.dim()}-D tensor")
            if attn_mask.dim() == 3:
                want = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != want:
                    raise AssertionError(f"{op}: expected attn_mask shape to be {want} but got "
                                         f"{tuple(attn_mask.shape)}")
        return False
    raise AssertionError(f"{op}: query should be unbatched 2-D or batched 3-D tensor but "
                         f"received {query.dim()}-D query tensor")


def _linear(x, w, b):
    """``x @ w.T + b`` for per-token features: a (L, N, E) view of batch-first (N, L, E)
    memory is projected in that memory order (one big product, not L small ones)."""
    if x.dim() == 3 and not x.is_contiguous():
        xt = x.transpose(0, 1)
        if xt.is_contiguous():
            return _linear(xt, w, b).transpose(0, 1)
    if x.is_contiguous() and x.dim() >= 2:
        x2 = x.reshape(-1, x.shape[-1])
        out = fiamma.addmm(b, x2, w.t()) if b is not None else fiamma.matmul(x2, w.t())
        return out.reshape(tuple(x.shape[:-1]) + (w.shape[0],))
    out = fiamma.matmul(x, w.t())
    return out + b if b is not None else out


def _batch_first_memory(x):
    """True when the (L, N, E) ``x`` is a view of contiguous (N, L, E) memory."""
    return x.dim() == 3 and not x.is_contiguous() and x.transpose(0, 1).is_contiguous()


def _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                   use_separate, q_w, k_w, v_w):
    E = embed_dim
    if not use_separate:
        if in_proj_weight is None:
            raise AssertionError("MultiheadAttention: use_separate_proj_weight is False but "
                                 "in_proj_weight is None")
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
        if key is value and query is key:
            # self-attention: one matmul for q, k and v
            qkv = _linear(query, in_proj_weight, in_proj_bias)
            return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
        wq, wk, wv = in_proj_weight[:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:]
        if key is value:
            kv = _linear(key, in_proj_weight[E:], None if in_proj_bias is None
                         else in_proj_bias[E:])
            return _linear(query, wq, bq), kv[..., :E], kv[..., E:]
        return _linear(query, wq, bq), _linear(key, wk, bk), _linear(value, wv, bv)
    for name, w in (("q_proj_weight", q_w), ("k_proj_weight", k_w), ("v_proj_weight", v_w)):
        if w is None:
            raise AssertionError(f"MultiheadAttention: use_separate_proj_weight is True but "
                                 f"{name} is None")
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
    for name, x, w in (("query", query, q_w), ("key", key, k_w), ("value", value, v_w)):
        if x.shape[-1] != w.shape[1]:
            raise RuntimeError(f"MultiheadAttention: expected {name} with feature size "
                               f"{w.shape[1]}, got shape {tuple(x.shape)}")
    return _linear(query, q_w, bq), _linear(key, k_w, bk), _linear(value, v_w, bv)


def _merge_heads(out, bf_out, w, b):
    """(N, H, L, hd) head outputs -> out_proj -> (L, N, E); laid out batch-first in memory
    when the query was (a module with batch_first=True transposes it back for free)."""
    N, H, L, hd = out.shape
    if bf_out:
        out = _linear(out.transpose(1, 2).reshape(N * L, H * hd), w, b)
        return out.reshape(N, L, H * hd).transpose(0, 1)
    out = _linear(out.permute(2, 0, 1, 3).reshape(L * N, H * hd), w, b)
    return out.reshape(L, N, H * hd)


def _pad_last(mask):
    """Append one zero (take part) column to a float mask."""
    return fiamma.cat([mask, fiamma.zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype,
                                         device=mask.device)], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention on sequence-first inputs (L, N, E) (or unbatched (L, E)), as
    ``torch.nn.functional.multi_head_attention_forward``. Masks: bool True = NOT allowed to
    attend (unlike SDPA's), float masks are added. Returns ``(output, weights)`` where
    weights is (N, L, S) averaged over heads, (N, heads, L, S), or None when
    ``need_weights`` is False."""
    op = "MultiheadAttention"
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)

    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"{op}: was expecting embedding dimension of {embed_dim_to_check},"
                             f" but got {embed_dim} (query shape {tuple(query.shape)})")
    if embed_dim % num_heads:
        raise AssertionError(f"{op}: embed_dim {embed_dim} not divisible by num_heads "
                             f"{num_heads}")
    head_dim = embed_dim // num_heads
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"{op}: key's sequence and batch dims {tuple(key.shape[:2])} "
                                 f"do not match value's {tuple(value.shape[:2])}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"{op}: key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)}")
    if key.shape[1] != bsz:
        raise AssertionError(f"{op}: query batch size {bsz} does not match key's "
                             f"{key.shape[1]}")

    if is_causal and attn_mask is None:
        raise RuntimeError(f"{op}: Need attn_mask if specifying the is_causal hint. You may "
                           "use the Transformer module method `generate_square_subsequent_"
                           "mask` to create this mask.")
    if key_padding_mask is not None and attn_mask is not None and \
            (key_padding_mask.dtype is fiamma.bool) != (attn_mask.dtype is fiamma.bool):
        warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. "
                      "Use same type for both instead.", UserWarning, stacklevel=3)
    key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and key_padding_mask is None and not need_weights:
        # the hint alone drives SDPA (as PyTorch does)
        attn_mask = None
    else:
        attn_mask = _float_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False

    bf_out = _batch_first_memory(query)
    q, k, v = _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight, q_proj_weight, k_proj_weight,
                             v_proj_weight)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"{op}: The shape of the 2D attn_mask is "
                                   f"{tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"{op}: The shape of the 3D attn_mask is "
                                   f"{tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"{op}: attn_mask's dimension {attn_mask.dim()} is not "
                               "supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError(f"{op}: bias cannot be added to static key/value.")
        k = fiamma.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = fiamma.cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError(f"{op}: bias_k and bias_v must both be set or both be None")

    # (L, N, E) -> (N * H, L, hd)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        if tuple(static_k.shape[::2]) != (bsz * num_heads, head_dim):
            raise AssertionError(f"{op}: expecting static_k of shape (N*H, S, {head_dim}) "
                                 f"with N*H = {bsz * num_heads}, got {tuple(static_k.shape)}")
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        if tuple(static_v.shape[::2]) != (bsz * num_heads, head_dim):
            raise AssertionError(f"{op}: expecting static_v of shape (N*H, S, {head_dim}) "
                                 f"with N*H = {bsz * num_heads}, got {tuple(static_v.shape)}")
        v = static_v

    if add_zero_attn:
        zshape = (bsz * num_heads, 1, head_dim)
        k = fiamma.cat([k, fiamma.zeros(zshape, dtype=k.dtype, device=k.device)], 1)
        v = fiamma.cat([v, fiamma.zeros(zshape, dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)

    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"{op}: expecting key_padding_mask shape of {(bsz, src_len)}, "
                                 f"but got {tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(
            bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / head_dim)
        scores = fiamma.bmm(q_scaled, k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores.add_(attn_mask)   # masks here are (1 or N*H, L, S)
        weights = fiamma.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = _dropout(weights, dropout_p)
        out = fiamma.bmm(weights, v)                       # (N*H, L, hd)
        out = _merge_heads(out.reshape(bsz, num_heads, tgt_len, head_dim), bf_out,
                           out_proj_weight, out_proj_bias)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = _merge_heads(out, bf_out, out_proj_weight, out_proj_bias)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
