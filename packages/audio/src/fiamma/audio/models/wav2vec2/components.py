"""Building blocks of the wav2vec 2.0 / HuBERT / WavLM models.

Submodule and parameter names follow torchaudio's layout (``feature_extractor.conv_layers.0.conv``,
``encoder.transformer.layers.3.attention.q_proj``, ...) so that torchaudio checkpoints load by key.
"""

import math

import fiamma
from fiamma import nn
from fiamma.audio.models.wav2vec2.wavlm_attention import WavLMSelfAttention
from fiamma.nn import functional as F

__all__ = []

_DEFAULT_CONV_LAYERS = [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2


def _check_waveforms(op, waveforms, lengths):
    if not isinstance(waveforms, fiamma.Tensor):
        raise TypeError(f"{op}: expected waveforms to be a Tensor of shape (batch, time), got "
                        f"{type(waveforms).__name__}")
    if waveforms.ndim != 2:
        raise ValueError(f"{op}: expected waveforms of shape (batch, time) (2-D), got shape "
                         f"{list(waveforms.shape)}")
    if not waveforms.is_floating_point():
        raise TypeError(f"{op}: expected floating-point waveforms, got {waveforms.dtype}")
    if lengths is not None:
        if not isinstance(lengths, fiamma.Tensor):
            raise TypeError(f"{op}: expected lengths to be a Tensor of shape (batch,) or None, "
                            f"got {type(lengths).__name__}")
        if lengths.ndim != 1 or lengths.shape[0] != waveforms.shape[0]:
            raise ValueError(f"{op}: expected lengths of shape ({waveforms.shape[0]},) to match "
                             f"the batch of waveforms, got shape {list(lengths.shape)}")


class LayerNorm(nn.LayerNorm):
    """Layer norm over the channel axis of a (batch, channel, frame) tensor."""

    def forward(self, input):
        x = input.transpose(-2, -1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.transpose(-2, -1)


class ConvLayerBlock(nn.Module):
    """One convolution of the feature extractor: conv, optional norm, GELU; also maps the
    valid lengths through the convolution."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, bias, layer_norm):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.layer_norm = layer_norm
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, bias=bias)

    def forward(self, x, length):
        x = self.conv(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = F.gelu(x)
        if length is not None:
            length = fiamma.div(length - self.kernel_size, self.stride, rounding_mode="floor") + 1
            length = fiamma.clamp(length, min=0)   # empty inputs give negative counts
        return x, length


class FeatureExtractor(nn.Module):
    """Stack of :class:`ConvLayerBlock`: (batch, time) audio -> (batch, frame, feature)."""

    def __init__(self, conv_layers):
        super().__init__()
        self.conv_layers = conv_layers

    def forward(self, x, length):
        if x.ndim != 2:
            raise ValueError("FeatureExtractor: expected the input to be 2-D (batch, time), got "
                             f"shape {list(x.shape)}")
        x = x.unsqueeze(1)
        for layer in self.conv_layers:
            x, length = layer(x, length)
        return x.transpose(1, 2), length


class FeatureProjection(nn.Module):
    """Layer norm, linear projection to the encoder width, dropout."""

    def __init__(self, in_features, out_features, dropout):
        super().__init__()
        self.layer_norm = nn.LayerNorm(in_features)
        self.projection = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.projection(self.layer_norm(x)))


class ConvolutionalPositionalEmbedding(nn.Module):
    """Grouped, weight-normalised convolution over time (``weight_norm(dim=2)``), GELU; an
    even kernel drops its last output frame so the length is kept."""

    def __init__(self, embed_dim, kernel_size, groups):
        super().__init__()
        self.embed_dim = embed_dim
        self.kernel_size = kernel_size
        conv = nn.Conv1d(embed_dim, embed_dim, kernel_size, padding=kernel_size // 2, groups=groups)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        self.num_remove = 1 if kernel_size % 2 == 0 else 0

    def forward(self, x):
        x = self.conv(x.transpose(-2, -1))
        if self.num_remove > 0:
            x = x[..., :-self.num_remove]
        return F.gelu(x).transpose(-2, -1)


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate q/k/v/out projections."""

    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        head_dim = embed_dim // num_heads
        if head_dim * num_heads != embed_dim:
            raise ValueError(f"SelfAttention: embed_dim ({embed_dim}) is not divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = head_dim
        self.scaling = head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)

    def forward(self, x, attention_mask=None, position_bias=None, key_padding_mask=None):
        if x.ndim != 3 or x.shape[2] != self.embed_dim:
            raise ValueError(f"SelfAttention: expected input of shape (batch, sequence, "
                             f"{self.embed_dim}), got {list(x.shape)}")
        batch, length, _ = x.shape
        if attention_mask is not None and tuple(attention_mask.shape) != (batch, 1, length, length):
            raise ValueError(f"SelfAttention: expected attention mask of shape "
                             f"{[batch, 1, length, length]}, got {list(attention_mask.shape)}")
        heads = (batch, length, self.num_heads, self.head_dim)
        q = self.q_proj(x).view(*heads).transpose(1, 2)
        k = self.k_proj(x).view(*heads).transpose(1, 2)
        v = self.v_proj(x).view(*heads).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask,
                                             dropout_p=self.dropout if self.training else 0.0)
        out = out.transpose(1, 2).reshape(batch, length, self.embed_dim)
        return self.out_proj(out), None


class FeedForward(nn.Module):
    """Linear, GELU, dropout, linear, dropout."""

    def __init__(self, io_features, intermediate_features, intermediate_dropout, output_dropout):
        super().__init__()
        self.intermediate_dense = nn.Linear(io_features, intermediate_features)
        self.intermediate_dropout = nn.Dropout(intermediate_dropout)
        self.output_dense = nn.Linear(intermediate_features, io_features)
        self.output_dropout = nn.Dropout(output_dropout)

    def forward(self, x):
        x = self.intermediate_dropout(F.gelu(self.intermediate_dense(x)))
        return self.output_dropout(self.output_dense(x))


class EncoderLayer(nn.Module):
    """Attention + feed-forward with residuals; pre-norm when ``layer_norm_first``, else
    post-norm."""

    def __init__(self, attention, dropout, layer_norm_first, feed_forward):
        super().__init__()
        self.attention = attention
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(attention.embed_dim)
        self.layer_norm_first = layer_norm_first
        self.feed_forward = feed_forward
        self.final_layer_norm = nn.LayerNorm(attention.embed_dim)

    def forward(self, x, attention_mask=None, position_bias=None, key_padding_mask=None):
        residual = x
        if self.layer_norm_first:
            x = self.layer_norm(x)
        x, position_bias = self.attention(x, attention_mask=attention_mask,
                                          position_bias=position_bias,
                                          key_padding_mask=key_padding_mask)
        x = residual + self.dropout(x)
        if self.layer_norm_first:
            return x + self.feed_forward(self.final_layer_norm(x)), position_bias
        x = self.layer_norm(x)
        return self.final_layer_norm(x + self.feed_forward(x)), position_bias


class Transformer(nn.Module):
    """Positional convolution, the encoder layers (with layer drop in training) and a layer
    norm before (``layer_norm_first``) or after them."""

    def __init__(self, pos_conv_embed, dropout, layers, layer_norm_first, layer_drop):
        super().__init__()
        self.pos_conv_embed = pos_conv_embed
        self.layer_norm = nn.LayerNorm(pos_conv_embed.embed_dim)
        self.layer_norm_first = layer_norm_first
        self.layer_drop = layer_drop
        self.dropout = nn.Dropout(dropout)
        self.layers = layers

    def _preprocess(self, x):
        x = x + self.pos_conv_embed(x)
        if self.layer_norm_first:
            x = self.layer_norm(x)
        return self.dropout(x)

    def forward(self, x, attention_mask=None, position_bias=None):
        x = self._preprocess(x)
        for layer in self.layers:
            if self.training and fiamma.rand(1).item() <= self.layer_drop:
                continue
            x, position_bias = layer(x, attention_mask, position_bias=position_bias)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        return x

    def get_intermediate_outputs(self, x, attention_mask=None, num_layers=None):
        if num_layers is not None and not 0 < num_layers <= len(self.layers):
            raise ValueError(f"extract_features: num_layers must be in [1, {len(self.layers)}], "
                             f"got {num_layers}")
        outputs = []
        position_bias = None
        x = self._preprocess(x)
        for layer in self.layers:
            x, position_bias = layer(x, attention_mask, position_bias=position_bias)
            outputs.append(x)
            if num_layers is not None and len(outputs) >= num_layers:
                break
        return outputs


def _padding_mask(x, lengths):
    """(batch, frame) bool mask, True at frames at or past each length."""
    batch, frames = x.shape[0], x.shape[1]
    return fiamma.arange(frames, device=lengths.device).expand(batch, frames) >= lengths[:, None]


class Encoder(nn.Module):
    """Feature projection followed by the :class:`Transformer`.

    With ``lengths``, frames past each length are zeroed after the projection and get an
    additive ``-10000`` in every attention row (the keys are masked, the queries are not).
    """

    def __init__(self, feature_projection, transformer):
        super().__init__()
        self.feature_projection = feature_projection
        self.transformer = transformer

    def _preprocess(self, features, lengths=None):
        x = self.feature_projection(features)
        if lengths is None:
            return x, None
        batch, frames, _ = x.shape
        pad = _padding_mask(x, lengths)
        x = x.masked_fill(pad[:, :, None], 0.0)
        mask = -10000.0 * pad[:, None, None, :].to(dtype=features.dtype)
        return x, mask.expand(batch, 1, frames, frames)

    def forward(self, features, lengths=None):
        x, mask = self._preprocess(features, lengths)
        return self.transformer(x, attention_mask=mask)

    def extract_features(self, features, lengths=None, num_layers=None):
        x, mask = self._preprocess(features, lengths)
        return self.transformer.get_intermediate_outputs(x, attention_mask=mask,
                                                         num_layers=num_layers)


def _get_feature_extractor(norm_mode, shapes, bias):
    if norm_mode not in ("group_norm", "layer_norm"):
        raise ValueError(f"wav2vec2_model: extractor_mode must be 'group_norm' or 'layer_norm', "
                         f"got {norm_mode!r}")
    blocks = []
    in_channels = 1
    for i, shape in enumerate(shapes):
        if len(shape) != 3:
            raise ValueError("wav2vec2_model: each extractor_conv_layer_config entry must be "
                             f"(out_channels, kernel_size, stride), got {shape!r}")
        out_channels, kernel_size, stride = shape
        norm = None
        if norm_mode == "group_norm" and i == 0:
            norm = nn.GroupNorm(num_groups=out_channels, num_channels=out_channels, affine=True)
        elif norm_mode == "layer_norm":
            norm = LayerNorm(normalized_shape=out_channels, elementwise_affine=True)
        blocks.append(ConvLayerBlock(in_channels, out_channels, kernel_size, stride, bias, norm))
        in_channels = out_channels
    return FeatureExtractor(nn.ModuleList(blocks))


def _encoder(in_features, embed_dim, dropout_input, pos_conv_kernel, pos_conv_groups, num_layers,
             attention_dropout, ff_interm_features, ff_interm_dropout, dropout, layer_norm_first,
             layer_drop, make_attention):
    layers = nn.ModuleList()
    for i in range(num_layers):
        feed_forward = FeedForward(embed_dim, ff_interm_features, ff_interm_dropout, dropout)
        layers.append(EncoderLayer(make_attention(i), dropout, layer_norm_first, feed_forward))
    transformer = Transformer(ConvolutionalPositionalEmbedding(embed_dim, pos_conv_kernel,
                                                               pos_conv_groups),
                              dropout, layers, not layer_norm_first, layer_drop)
    return Encoder(FeatureProjection(in_features, embed_dim, dropout_input), transformer)


def _get_encoder(in_features, embed_dim, dropout_input, pos_conv_kernel, pos_conv_groups,
                 num_layers, num_heads, attention_dropout, ff_interm_features, ff_interm_dropout,
                 dropout, layer_norm_first, layer_drop):
    return _encoder(in_features, embed_dim, dropout_input, pos_conv_kernel, pos_conv_groups,
                    num_layers, attention_dropout, ff_interm_features, ff_interm_dropout, dropout,
                    layer_norm_first, layer_drop,
                    lambda i: SelfAttention(embed_dim, num_heads, attention_dropout))


def _get_wavlm_encoder(in_features, embed_dim, dropout_input, pos_conv_kernel, pos_conv_groups,
                       num_layers, num_heads, num_buckets, max_distance, attention_dropout,
                       ff_interm_features, ff_interm_dropout, dropout, layer_norm_first,
                       layer_drop):
    # only the first layer owns the relative position embedding; its bias is passed on
    return _encoder(in_features, embed_dim, dropout_input, pos_conv_kernel, pos_conv_groups,
                    num_layers, attention_dropout, ff_interm_features, ff_interm_dropout, dropout,
                    layer_norm_first, layer_drop,
                    lambda i: WavLMSelfAttention(embed_dim, num_heads, dropout=attention_dropout,
                                                 has_relative_attention_bias=(i == 0),
                                                 num_buckets=num_buckets,
                                                 max_distance=max_distance))


# ---- HuBERT pre-training -----------------------------------------------------------------------


def _span_lengths(mask_type, mask_length, mask_other, num):
    if mask_type == "static":
        return [mask_length] * num
    if mask_type == "uniform":
        return fiamma.randint(int(mask_other), mask_length * 2 + 1, (num,)).tolist()
    if mask_type == "normal":
        vals = fiamma.normal(float(mask_length), float(mask_other), (num,))
        return [max(1, int(round(v))) for v in vals.tolist()]
    if mask_type == "poisson":
        vals = fiamma.poisson(fiamma.full((num,), float(mask_length)))
        return [int(round(v)) for v in vals.tolist()]
    raise ValueError(f"_compute_mask_indices: unknown mask selection {mask_type!r} (expected "
                     "'static', 'uniform', 'normal' or 'poisson')")


def _compute_mask_indices(shape, padding_mask, mask_prob, mask_length, mask_type="static",
                          mask_other=0.0, min_masks=0, no_overlap=False, min_space=0):
    """Random spans to mask, as a (batch, frame) bool tensor (fairseq's span masking).

    About ``mask_prob * frames / mask_length`` spans start per row (rounded at random, at
    least ``min_masks``); padded frames are never masked; every row ends with the same number
    of masked frames (the smallest count, taken at random from the others).
    """
    batch, frames = shape
    all_num = max(min_masks, int(mask_prob * frames / float(mask_length) + fiamma.rand(1).item()))
    rows = []
    for b in range(batch):
        if padding_mask is not None:
            size = frames - int(padding_mask[b].long().sum().item())
            num = max(min_masks,
                      int(mask_prob * size / float(mask_length) + fiamma.rand(1).item()))
        else:
            size, num = frames, all_num
        lengths = _span_lengths(mask_type, mask_length, mask_other, num)
        if num and sum(lengths) == 0:
            lengths[0] = min(mask_length, size - 1)
        starts = []
        if no_overlap:
            parts = [(0, size)]
            min_len = min(lengths) if lengths else 0
            for length in sorted(lengths, reverse=True):
                room = [max(0, e - s) if e - s >= length + min_space else 0 for s, e in parts]
                total = sum(room)
                if total == 0:
                    break
                pick = int(fiamma.multinomial(fiamma.tensor(room, dtype=fiamma.float64), 1).item())
                s, e = parts.pop(pick)
                start = int(fiamma.randint(s, e - length, (1,)).item())
                starts.extend(range(start, start + length))
                if start - s - min_space >= min_len:
                    parts.append((s, start - min_space + 1))
                if e - start - min_len - min_space > min_len:
                    parts.append((start + length + min_space, e))
        else:
            min_len = min(lengths) if lengths else 0
            if size - min_len <= num:
                min_len = size - num - 1
            firsts = fiamma.randperm(max(size - min_len, 0))[:num].tolist()
            starts = [f + o for f, length in zip(firsts, lengths) for o in range(length)]
        rows.append(sorted({i for i in starts if i < size}))
    keep = min(len(r) for r in rows) if rows else 0
    mask = fiamma.zeros((batch, frames), dtype=fiamma.bool)
    for b, idx in enumerate(rows):
        if len(idx) > keep:
            order = fiamma.randperm(len(idx))[:keep].tolist()
            idx = [idx[j] for j in order]
        if idx:
            mask[b, fiamma.tensor(idx, dtype=fiamma.long)] = True
    return mask


def _get_padding_mask(input, lengths):
    """(batch, frame) bool mask, True at padded frames of a (batch, frame, feature) input."""
    return _padding_mask(input, lengths)


class MaskGenerator(nn.Module):
    """Replaces random time spans by a learnt ``mask_embedding`` and zeroes random channel
    spans (HuBERT pre-training). Returns the masked features and the time mask."""

    def __init__(self, encoder_embed_dim, mask_prob, mask_selection, mask_other, mask_length,
                 no_mask_overlap, mask_min_space, mask_channel_prob, mask_channel_selection,
                 mask_channel_other, mask_channel_length, no_mask_channel_overlap,
                 mask_channel_min_space):
        super().__init__()
        self.mask_prob = mask_prob
        self.mask_selection = mask_selection
        self.mask_other = mask_other
        self.mask_length = mask_length
        self.no_mask_overlap = no_mask_overlap
        self.mask_min_space = mask_min_space
        self.mask_channel_prob = mask_channel_prob
        self.mask_channel_selection = mask_channel_selection
        self.mask_channel_other = mask_channel_other
        self.mask_channel_length = mask_channel_length
        self.no_mask_channel_overlap = no_mask_channel_overlap
        self.mask_channel_min_space = mask_channel_min_space
        self.mask_embedding = nn.Parameter(fiamma.empty(encoder_embed_dim).uniform_())

    def forward(self, x, padding_mask):
        batch, frames, channels = x.shape
        mask_indices = None
        if self.mask_prob > 0:
            mask_indices = _compute_mask_indices(
                (batch, frames), padding_mask, self.mask_prob, self.mask_length,
                self.mask_selection, self.mask_other, min_masks=2,
                no_overlap=self.no_mask_overlap, min_space=self.mask_min_space).to(x.device)
            x = fiamma.where(mask_indices[:, :, None], self.mask_embedding.to(x.dtype), x)
        if self.mask_channel_prob > 0:
            channel = _compute_mask_indices(
                (batch, channels), None, self.mask_channel_prob, self.mask_channel_length,
                self.mask_channel_selection, self.mask_channel_other,
                no_overlap=self.no_mask_channel_overlap,
                min_space=self.mask_channel_min_space).to(x.device)
            x = x.masked_fill(channel[:, None, :], 0.0)
        return x, mask_indices


def _compute_logits(proj_x, target, label_embeddings):
    """Cosine similarity (temperature 0.1) of each frame to its target's embedding (column 0)
    and to every label embedding; negatives equal to the positive get -inf."""
    pos = fiamma.index_select(label_embeddings, 0, target.long())
    negs = label_embeddings.unsqueeze(1).expand(-1, proj_x.shape[0], -1)
    neg_is_pos = (pos == negs).all(-1)
    targets = fiamma.cat([pos.unsqueeze(0), negs], dim=0)
    logits = fiamma.cosine_similarity(proj_x.float(), targets.float(), dim=-1).type_as(proj_x)
    logits = logits / 0.1
    if bool(neg_is_pos.any()):
        blocked = fiamma.cat([fiamma.zeros_like(neg_is_pos[:1]), neg_is_pos], dim=0)
        logits = logits.masked_fill(blocked, float("-inf"))
    return logits.transpose(0, 1)


class LogitGenerator(nn.Module):
    """Projects the transformer output to ``final_dim`` and scores it against the label
    embeddings, for masked and unmasked frames."""

    def __init__(self, encoder_embed_dim, num_classes, final_dim, skip_masked, skip_nomask):
        super().__init__()
        self.label_embeddings = nn.Parameter(fiamma.empty(num_classes, final_dim).uniform_())
        self.final_proj = nn.Linear(encoder_embed_dim, final_dim)
        self.skip_masked = skip_masked
        self.skip_nomask = skip_nomask

    def forward(self, x, label, mask_m, mask_u):
        proj_x = self.final_proj(x)
        logit_m = None if self.skip_masked else _compute_logits(
            proj_x[mask_m], label[mask_m], self.label_embeddings)
        logit_u = None if self.skip_nomask else _compute_logits(
            proj_x[mask_u], label[mask_u], self.label_embeddings)
        return logit_m, logit_u


class GradMultiply(fiamma.autograd.Function):
    """Identity forward; scales the gradient by ``scale`` backward."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def _init_transformer_params(module):
    """BERT-style init: Linear/Embedding weights N(0, 0.02), biases and the padding row 0."""
    if isinstance(module, nn.Linear):
        with fiamma.no_grad():
            module.weight.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.zero_()
    if isinstance(module, nn.Embedding):
        with fiamma.no_grad():
            module.weight.normal_(mean=0.0, std=0.02)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()


def _pos_conv_std(module):
    return math.sqrt(4.0 / (module.embed_dim * module.kernel_size))
