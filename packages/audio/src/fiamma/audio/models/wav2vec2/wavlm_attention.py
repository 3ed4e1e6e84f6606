"""WavLM's self-attention with a gated relative position bias (Chen et al., 2022).

The relative offset ``key - query`` is put in one of ``num_buckets`` buckets (half for each
sign; exact below ``num_buckets // 4``, logarithmic up to ``max_distance``), each bucket has a
learnt bias per head, and every layer scales that bias by a gate computed from its input
(``gru_rel_pos_linear`` and ``gru_rel_pos_const``). Only the first layer owns the embedding;
the ungated bias it computes is handed to the following layers.

Parameters are held as torchaudio holds them (``attention`` is an ``nn.MultiheadAttention``
whose ``in_proj_weight`` stacks the q, k, v projections) so its WavLM checkpoints load by key.
"""

import math

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

__all__ = ["WavLMSelfAttention"]


class WavLMSelfAttention(nn.Module):
    """Multi-head self-attention with WavLM's gated relative position bias.

    ``forward(query, key_padding_mask=None, attention_mask=None, position_bias=None)`` ->
    ``(output, position_bias)``; ``query`` is (batch, frame, embed_dim), ``position_bias``
    (batch, num_heads, frame, frame). ``attention_mask`` (batch, 1, frame, frame) is added to
    the scores, as in the wav2vec 2.0 layers; ``key_padding_mask`` (batch, frame) is True (or
    non-zero) at padded keys.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True,
                 has_relative_attention_bias=False, num_buckets=32, max_distance=128,
                 gru_rel_pos=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"WavLMSelfAttention: embed_dim ({embed_dim}) is not divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.has_relative_attention_bias = has_relative_attention_bias
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.rel_attn_embed = nn.Embedding(num_buckets, num_heads) \
            if has_relative_attention_bias else None
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.attention = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=bias,
                                               batch_first=True)
        self.gru_rel_pos = gru_rel_pos
        if gru_rel_pos:
            self.gru_rel_pos_linear = nn.Linear(self.head_dim, 8)
            self.gru_rel_pos_const = nn.Parameter(fiamma.ones(1, num_heads, 1, 1))
        self.has_position_bias = True

    def compute_bias(self, query_length, key_length):
        """(num_heads, query_length, key_length) bias from the bucketed offsets."""
        offsets = (fiamma.arange(key_length, dtype=fiamma.long)[None, :]
                   - fiamma.arange(query_length, dtype=fiamma.long)[:, None])
        buckets = self._relative_positions_bucket(offsets, bidirectional=True)
        buckets = buckets.to(self.rel_attn_embed.weight.device)
        return self.rel_attn_embed(buckets).permute(2, 0, 1)

    def _relative_positions_bucket(self, relative_positions, bidirectional=True):
        num_buckets = self.num_buckets
        if bidirectional:
            num_buckets //= 2
            base = (relative_positions > 0).long() * num_buckets
            distance = relative_positions.abs()
        else:
            base = fiamma.zeros_like(relative_positions)
            distance = (-relative_positions).clamp(min=0)
        exact = num_buckets // 2
        scaled = (fiamma.log(distance.clamp(min=1).float() / exact)
                  / math.log(self.max_distance / exact) * (num_buckets - exact))
        far = (exact + scaled.long()).clamp(max=num_buckets - 1)
        return base + fiamma.where(distance < exact, distance, far)

    def forward(self, query, key_padding_mask=None, attention_mask=None, position_bias=None):
        if query.ndim != 3 or query.shape[2] != self.embed_dim:
            raise ValueError(f"WavLMSelfAttention: expected input of shape (batch, frame, "
                             f"{self.embed_dim}), got {list(query.shape)}")
        batch, frames, _ = query.shape
        if self.rel_attn_embed is not None and position_bias is None:
            position_bias = self.compute_bias(frames, frames).unsqueeze(0)
            position_bias = position_bias.repeat(batch, 1, 1, 1)
        bias = None
        if position_bias is not None:
            bias = position_bias
            if self.gru_rel_pos:
                heads_in = query.view(batch, frames, self.num_heads, -1).permute(0, 2, 1, 3)
                gates = self.gru_rel_pos_linear(heads_in).view(
                    batch, self.num_heads, frames, 2, 4).sum(-1)
                gate_a, gate_b = fiamma.sigmoid(gates).chunk(2, dim=-1)
                scale = gate_a * (gate_b * self.gru_rel_pos_const - 1.0) + 2.0
                bias = scale.view(batch, self.num_heads, -1, 1) * position_bias
            bias = bias.view(batch, self.num_heads, frames, frames)
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (batch, 1, frames, frames):
                raise ValueError(f"WavLMSelfAttention: expected attention mask of shape "
                                 f"{[batch, 1, frames, frames]}, got "
                                 f"{list(attention_mask.shape)}")
            bias = attention_mask if bias is None else bias + attention_mask
        if key_padding_mask is not None:
            pad = key_padding_mask.view(batch, 1, 1, frames)
            if pad.dtype == fiamma.bool:
                pad = fiamma.zeros(pad.shape, dtype=query.dtype).masked_fill(pad, float("-inf"))
            bias = pad if bias is None else bias + pad
        qkv = F.linear(query, self.attention.in_proj_weight, self.attention.in_proj_bias)
        heads = (batch, frames, self.num_heads, self.head_dim)
        q, k, v = (t.reshape(heads).transpose(1, 2) for t in qkv.chunk(3, -1))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                             dropout_p=self.dropout if self.training else 0.0)
        out = out.transpose(1, 2).reshape(batch, frames, self.embed_dim)
        return self.attention.out_proj(out), position_bias
