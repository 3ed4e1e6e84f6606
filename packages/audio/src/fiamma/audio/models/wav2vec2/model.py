"""wav2vec 2.0, HuBERT and WavLM acoustic models and their builders (torchaudio's names).

A model is a convolutional feature extractor over raw audio (20 ms frames at 16 kHz with the
default layers), a projection, a transformer encoder with a convolutional positional
embedding and, for models fine-tuned on ASR, a linear ``aux`` head giving label logits.
"""

import math

import fiamma
from fiamma import nn
from fiamma.audio.models.wav2vec2 import components

__all__ = ["Wav2Vec2Model", "HuBERTPretrainModel", "wav2vec2_model", "wav2vec2_base",
           "wav2vec2_large", "wav2vec2_large_lv60k", "wav2vec2_xlsr_300m", "wav2vec2_xlsr_1b",
           "wav2vec2_xlsr_2b", "hubert_base", "hubert_large", "hubert_xlarge",
           "hubert_pretrain_model", "hubert_pretrain_base", "hubert_pretrain_large",
           "hubert_pretrain_xlarge", "wavlm_model", "wavlm_base", "wavlm_large"]


class Wav2Vec2Model(nn.Module):
    """wav2vec 2.0 / HuBERT / WavLM model: ``feature_extractor``, ``encoder`` and an optional
    ``aux`` head. Build it with :func:`wav2vec2_model` (or the other builders).

    ``forward(waveforms, lengths=None)``: ``waveforms`` (batch, time) ->
    ``(emissions, lengths)``: (batch, frame, aux_num_out or embed_dim) and the valid frame
    counts (None when ``lengths`` is None). With ``lengths``, padded frames are excluded from
    attention.
    """

    def __init__(self, feature_extractor, encoder, aux=None):
        super().__init__()
        self.feature_extractor = feature_extractor
        self.encoder = encoder
        self.aux = aux

    def extract_features(self, waveforms, lengths=None, num_layers=None):
        """The outputs of the transformer layers, a list of (batch, frame, embed_dim)
        tensors (the first ``num_layers`` only, when given), and the valid frame counts."""
        components._check_waveforms("Wav2Vec2Model.extract_features", waveforms, lengths)
        x, lengths = self.feature_extractor(waveforms, lengths)
        return self.encoder.extract_features(x, lengths, num_layers), lengths

    def forward(self, waveforms, lengths=None):
        components._check_waveforms("Wav2Vec2Model", waveforms, lengths)
        x, lengths = self.feature_extractor(waveforms, lengths)
        x = self.encoder(x, lengths)
        if self.aux is not None:
            x = self.aux(x)
        return x, lengths


class HuBERTPretrainModel(nn.Module):
    """HuBERT for masked-prediction pre-training: a :class:`Wav2Vec2Model` without head, a
    mask generator and a logit generator.

    ``forward(waveforms, labels, audio_lengths=None)`` -> ``(logit_m, logit_u,
    features_pen)``: logits of the masked and unmasked frames, (frames, num_classes + 1)
    (column 0 is the target), and the mean square of the extracted features.
    ``feature_grad_mult`` in (0, 1) scales the feature extractor's gradients.
    """

    def __init__(self, wav2vec2, mask_generator, logit_generator, feature_grad_mult):
        super().__init__()
        self.wav2vec2 = wav2vec2
        self.mask_generator = mask_generator
        self.logit_generator = logit_generator
        if feature_grad_mult is not None and not 0.0 < feature_grad_mult < 1.0:
            raise ValueError("HuBERTPretrainModel: feature_grad_mult must be None or in (0, 1), "
                             f"got {feature_grad_mult}")
        self.feature_grad_mult = feature_grad_mult

    def forward(self, waveforms, labels, audio_lengths=None):
        components._check_waveforms("HuBERTPretrainModel", waveforms, audio_lengths)
        x, lengths = self.wav2vec2.feature_extractor(waveforms, audio_lengths)
        if self.feature_grad_mult is not None and self.feature_grad_mult < 1.0:
            x = components.GradMultiply.apply(x, self.feature_grad_mult)
        features_pen = x.float().pow(2).mean()
        padding_mask = components._get_padding_mask(x, lengths) if lengths is not None else None
        x, attention_mask = self.wav2vec2.encoder._preprocess(x, lengths)
        x, mask = self.mask_generator(x, padding_mask)
        x = self.wav2vec2.encoder.transformer(x, attention_mask=attention_mask)
        if labels.ndim != 2 or x.shape[1] != labels.shape[1]:
            raise ValueError(f"HuBERTPretrainModel: expected labels of shape (batch, "
                             f"{x.shape[1]}) to match the model's frames, got "
                             f"{list(labels.shape)}")
        if mask is None:
            mask = fiamma.zeros(x.shape[:2], dtype=fiamma.bool)
        if padding_mask is not None:
            mask_m = fiamma.logical_and(~padding_mask, mask)
            mask_u = fiamma.logical_and(~padding_mask, ~mask_m)
        else:
            mask_m, mask_u = mask, ~mask
        logit_m, logit_u = self.logit_generator(x, labels, mask_m, mask_u)
        return logit_m, logit_u, features_pen


def _conv_config(config):
    return list(components._DEFAULT_CONV_LAYERS if config is None else config)


def wav2vec2_model(extractor_mode, extractor_conv_layer_config, extractor_conv_bias,
                   encoder_embed_dim, encoder_projection_dropout, encoder_pos_conv_kernel,
                   encoder_pos_conv_groups, encoder_num_layers, encoder_num_heads,
                   encoder_attention_dropout, encoder_ff_interm_features,
                   encoder_ff_interm_dropout, encoder_dropout, encoder_layer_norm_first,
                   encoder_layer_drop, aux_num_out):
    """A :class:`Wav2Vec2Model` of any size (fairseq's option in brackets):

    ``extractor_mode`` "group_norm" (one GroupNorm in the first conv block) or "layer_norm"
    (a LayerNorm in every block) [extractor_mode]; ``extractor_conv_layer_config`` a list of
    (out_channels, kernel_size, stride), None for ``[(512, 10, 5)] + [(512, 3, 2)] * 4 +
    [(512, 2, 2)] * 2`` [conv_feature_layers]; ``extractor_conv_bias`` [conv_bias];
    ``encoder_embed_dim`` [encoder_embed_dim]; ``encoder_projection_dropout``
    [dropout_input]; ``encoder_pos_conv_kernel`` / ``_groups`` [conv_pos / conv_pos_groups];
    ``encoder_num_layers`` / ``_num_heads`` [encoder_layers / encoder_attention_heads];
    ``encoder_attention_dropout`` [attention_dropout]; ``encoder_ff_interm_features``
    [encoder_ffn_embed_dim]; ``encoder_ff_interm_dropout`` [activation_dropout];
    ``encoder_dropout`` [dropout]; ``encoder_layer_norm_first`` (pre-norm layers and a final
    norm at the end, else post-norm with the norm before the layers) [layer_norm_first];
    ``encoder_layer_drop`` [layerdrop]; ``aux_num_out``: size of a linear output head, or None.
    """
    conv = _conv_config(extractor_conv_layer_config)
    feature_extractor = components._get_feature_extractor(extractor_mode, conv,
                                                          extractor_conv_bias)
    encoder = components._get_encoder(
        in_features=conv[-1][0], embed_dim=encoder_embed_dim,
        dropout_input=encoder_projection_dropout, pos_conv_kernel=encoder_pos_conv_kernel,
        pos_conv_groups=encoder_pos_conv_groups, num_layers=encoder_num_layers,
        num_heads=encoder_num_heads, attention_dropout=encoder_attention_dropout,
        ff_interm_features=encoder_ff_interm_features,
        ff_interm_dropout=encoder_ff_interm_dropout, dropout=encoder_dropout,
        layer_norm_first=encoder_layer_norm_first, layer_drop=encoder_layer_drop)
    aux = nn.Linear(encoder_embed_dim, aux_num_out) if aux_num_out is not None else None
    return Wav2Vec2Model(feature_extractor, encoder, aux)


def wavlm_model(extractor_mode, extractor_conv_layer_config, extractor_conv_bias,
                encoder_embed_dim, encoder_projection_dropout, encoder_pos_conv_kernel,
                encoder_pos_conv_groups, encoder_num_layers, encoder_num_heads,
                encoder_num_buckets, encoder_max_distance, encoder_attention_dropout,
                encoder_ff_interm_features, encoder_ff_interm_dropout, encoder_dropout,
                encoder_layer_norm_first, encoder_layer_drop, aux_num_out):
    """A WavLM :class:`Wav2Vec2Model`: as :func:`wav2vec2_model`, with WavLM's attention and
    its relative position bias of ``encoder_num_buckets`` buckets up to
    ``encoder_max_distance`` frames."""
    conv = _conv_config(extractor_conv_layer_config)
    feature_extractor = components._get_feature_extractor(extractor_mode, conv,
                                                          extractor_conv_bias)
    encoder = components._get_wavlm_encoder(
        in_features=conv[-1][0], embed_dim=encoder_embed_dim,
        dropout_input=encoder_projection_dropout, pos_conv_kernel=encoder_pos_conv_kernel,
        pos_conv_groups=encoder_pos_conv_groups, num_layers=encoder_num_layers,
        num_heads=encoder_num_heads, num_buckets=encoder_num_buckets,
        max_distance=encoder_max_distance, attention_dropout=encoder_attention_dropout,
        ff_interm_features=encoder_ff_interm_features,
        ff_interm_dropout=encoder_ff_interm_dropout, dropout=encoder_dropout,
        layer_norm_first=encoder_layer_norm_first, layer_drop=encoder_layer_drop)
    aux = nn.Linear(encoder_embed_dim, aux_num_out) if aux_num_out is not None else None
    return Wav2Vec2Model(feature_extractor, encoder, aux)


# (extractor_mode, conv_bias, embed_dim, num_layers, num_heads, ff_interm_features, norm_first)
_SIZES = {
    "base": ("group_norm", False, 768, 12, 12, 3072, False),
    "large": ("group_norm", False, 1024, 24, 16, 4096, False),
    "large_lv60k": ("layer_norm", True, 1024, 24, 16, 4096, True),
    "xlsr_300m": ("layer_norm", True, 1024, 24, 16, 4096, True),
    "xlsr_1b": ("layer_norm", True, 1280, 48, 16, 5120, True),
    "xlsr_2b": ("layer_norm", True, 1920, 48, 16, 7680, True),
    "hubert_large": ("layer_norm", False, 1024, 24, 16, 4096, True),
    "hubert_xlarge": ("layer_norm", False, 1280, 48, 16, 5120, True),
}


def _sized(size, projection, attention, ff_interm, dropout, layer_drop, aux_num_out):
    mode, bias, dim, layers, heads, ff, first = _SIZES[size]
    return wav2vec2_model(mode, None, bias, dim, projection, 128, 16, layers, heads, attention,
                          ff, ff_interm, dropout, first, layer_drop, aux_num_out)


def wav2vec2_base(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
                  encoder_ff_interm_dropout=0.1, encoder_dropout=0.1, encoder_layer_drop=0.1,
                  aux_num_out=None):
    """wav2vec 2.0 "base": 12 layers of width 768, group-norm extractor, post-norm."""
    return _sized("base", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wav2vec2_large(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
                   encoder_ff_interm_dropout=0.1, encoder_dropout=0.1, encoder_layer_drop=0.1,
                   aux_num_out=None):
    """wav2vec 2.0 "large": 24 layers of width 1024, group-norm extractor, post-norm."""
    return _sized("large", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wav2vec2_large_lv60k(encoder_projection_dropout=0.1, encoder_attention_dropout=0.0,
                         encoder_ff_interm_dropout=0.1, encoder_dropout=0.0,
                         encoder_layer_drop=0.1, aux_num_out=None):
    """wav2vec 2.0 "large lv-60k": 24 layers of width 1024, layer-norm extractor with conv
    bias, pre-norm."""
    return _sized("large_lv60k", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wav2vec2_xlsr_300m(encoder_projection_dropout=0.0, encoder_attention_dropout=0.0,
                       encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0,
                       aux_num_out=None):
    """XLS-R 300M: 24 layers of width 1024 (as "large lv-60k")."""
    return _sized("xlsr_300m", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wav2vec2_xlsr_1b(encoder_projection_dropout=0.1, encoder_attention_dropout=0.0,
                     encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0,
                     aux_num_out=None):
    """XLS-R 1B: 48 layers of width 1280."""
    return _sized("xlsr_1b", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wav2vec2_xlsr_2b(encoder_projection_dropout=0.1, encoder_attention_dropout=0.0,
                     encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0,
                     aux_num_out=None):
    """XLS-R 2B: 48 layers of width 1920."""
    return _sized("xlsr_2b", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def hubert_base(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
                encoder_ff_interm_dropout=0.0, encoder_dropout=0.1, encoder_layer_drop=0.05,
                aux_num_out=None):
    """HuBERT "base" (the wav2vec 2.0 "base" architecture)."""
    return _sized("base", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def hubert_large(encoder_projection_dropout=0.0, encoder_attention_dropout=0.0,
                 encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0,
                 aux_num_out=None):
    """HuBERT "large": 24 layers of width 1024, layer-norm extractor without conv bias."""
    return _sized("hubert_large", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def hubert_xlarge(encoder_projection_dropout=0.0, encoder_attention_dropout=0.0,
                  encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_drop=0.0,
                  aux_num_out=None):
    """HuBERT "extra large": 48 layers of width 1280."""
    return _sized("hubert_xlarge", encoder_projection_dropout, encoder_attention_dropout,
                  encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, aux_num_out)


def wavlm_base(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
               encoder_ff_interm_dropout=0.1, encoder_dropout=0.1, encoder_layer_drop=0.1,
               aux_num_out=None):
    """WavLM "base": 12 layers of width 768, 320 buckets up to 800 frames."""
    return wavlm_model("group_norm", None, False, 768, encoder_projection_dropout, 128, 16, 12,
                       12, 320, 800, encoder_attention_dropout, 3072, encoder_ff_interm_dropout,
                       encoder_dropout, False, encoder_layer_drop, aux_num_out)


def wavlm_large(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
                encoder_ff_interm_dropout=0.0, encoder_dropout=0.1, encoder_layer_drop=0.1,
                aux_num_out=None):
    """WavLM "large": 24 layers of width 1024, layer-norm extractor, pre-norm."""
    return wavlm_model("layer_norm", None, False, 1024, encoder_projection_dropout, 128, 16, 24,
                       16, 320, 800, encoder_attention_dropout, 4096, encoder_ff_interm_dropout,
                       encoder_dropout, True, encoder_layer_drop, aux_num_out)


def _init_hubert_pretrain_model(module):
    with fiamma.no_grad():
        if isinstance(module, components.ConvLayerBlock):
            nn.init.kaiming_normal_(module.conv.weight)
        elif isinstance(module, components.ConvolutionalPositionalEmbedding):
            nn.init.normal_(module.conv.weight, mean=0.0, std=components._pos_conv_std(module))
            nn.init.constant_(module.conv.bias, 0.0)
        elif isinstance(module, components.SelfAttention):
            for proj in (module.k_proj, module.v_proj, module.q_proj):
                nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
            nn.init.xavier_uniform_(module.out_proj.weight)
            nn.init.constant_(module.out_proj.bias, 0.0)
        elif isinstance(module, components.Transformer):
            module.apply(components._init_transformer_params)


def hubert_pretrain_model(extractor_mode, extractor_conv_layer_config, extractor_conv_bias,
                          encoder_embed_dim, encoder_projection_dropout, encoder_pos_conv_kernel,
                          encoder_pos_conv_groups, encoder_num_layers, encoder_num_heads,
                          encoder_attention_dropout, encoder_ff_interm_features,
                          encoder_ff_interm_dropout, encoder_dropout, encoder_layer_norm_first,
                          encoder_layer_drop, mask_prob, mask_selection, mask_other, mask_length,
                          no_mask_overlap, mask_min_space, mask_channel_prob,
                          mask_channel_selection, mask_channel_other, mask_channel_length,
                          no_mask_channel_overlap, mask_channel_min_space, skip_masked,
                          skip_nomask, num_classes, final_dim, feature_grad_mult):
    """A :class:`HuBERTPretrainModel`: the encoder options are :func:`wav2vec2_model`'s; the
    ``mask_*`` options set the time (and ``mask_channel_*`` the channel) span masking
    (selection "static", "uniform", "normal" or "poisson"); ``num_classes`` and ``final_dim``
    size the label embeddings; ``skip_masked`` / ``skip_nomask`` drop those logits.
    The weights get HuBERT's pre-training initialisation."""
    conv = _conv_config(extractor_conv_layer_config)
    feature_extractor = components._get_feature_extractor(extractor_mode, conv,
                                                          extractor_conv_bias)
    encoder = components._get_encoder(
        in_features=conv[-1][0], embed_dim=encoder_embed_dim,
        dropout_input=encoder_projection_dropout, pos_conv_kernel=encoder_pos_conv_kernel,
        pos_conv_groups=encoder_pos_conv_groups, num_layers=encoder_num_layers,
        num_heads=encoder_num_heads, attention_dropout=encoder_attention_dropout,
        ff_interm_features=encoder_ff_interm_features,
        ff_interm_dropout=encoder_ff_interm_dropout, dropout=encoder_dropout,
        layer_norm_first=encoder_layer_norm_first, layer_drop=encoder_layer_drop)
    mask_generator = components.MaskGenerator(
        encoder_embed_dim, mask_prob, mask_selection, mask_other, mask_length, no_mask_overlap,
        mask_min_space, mask_channel_prob, mask_channel_selection, mask_channel_other,
        mask_channel_length, no_mask_channel_overlap, mask_channel_min_space)
    logit_generator = components.LogitGenerator(encoder_embed_dim, num_classes, final_dim,
                                                skip_masked, skip_nomask)
    model = HuBERTPretrainModel(Wav2Vec2Model(feature_extractor, encoder), mask_generator,
                                logit_generator, feature_grad_mult)
    model.apply(_init_hubert_pretrain_model)
    return model


def _pretrain(size, projection, attention, ff_interm, dropout, layer_drop, mask_prob,
              mask_channel_prob, mask_channel_length, feature_grad_mult, num_classes, final_dim):
    mode, bias, dim, layers, heads, ff, first = _SIZES[size]
    return hubert_pretrain_model(
        mode, None, bias, dim, projection, 128, 16, layers, heads, attention, ff, ff_interm,
        dropout, first, layer_drop, mask_prob=mask_prob, mask_selection="static",
        mask_other=0.0, mask_length=10, no_mask_overlap=False, mask_min_space=1,
        mask_channel_prob=mask_channel_prob, mask_channel_selection="static",
        mask_channel_other=0.0, mask_channel_length=mask_channel_length,
        no_mask_channel_overlap=False, mask_channel_min_space=1, skip_masked=False,
        skip_nomask=False, num_classes=num_classes, final_dim=final_dim,
        feature_grad_mult=feature_grad_mult)


def hubert_pretrain_base(encoder_projection_dropout=0.1, encoder_attention_dropout=0.1,
                         encoder_ff_interm_dropout=0.0, encoder_dropout=0.1,
                         encoder_layer_drop=0.05, mask_prob=0.8, mask_channel_prob=0.0,
                         mask_channel_length=10, feature_grad_mult=0.1, num_classes=100):
    """HuBERT "base" for pre-training (final_dim 256)."""
    return _pretrain("base", encoder_projection_dropout, encoder_attention_dropout,
                     encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, mask_prob,
                     mask_channel_prob, mask_channel_length, feature_grad_mult, num_classes, 256)


def hubert_pretrain_large(encoder_projection_dropout=0.0, encoder_attention_dropout=0.0,
                          encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
                          encoder_layer_drop=0.0, mask_prob=0.8, mask_channel_prob=0.0,
                          mask_channel_length=10, feature_grad_mult=None):
    """HuBERT "large" for pre-training (500 classes, final_dim 768)."""
    return _pretrain("hubert_large", encoder_projection_dropout, encoder_attention_dropout,
                     encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, mask_prob,
                     mask_channel_prob, mask_channel_length, feature_grad_mult, 500, 768)


def hubert_pretrain_xlarge(encoder_projection_dropout=0.0, encoder_attention_dropout=0.0,
                           encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
                           encoder_layer_drop=0.0, mask_prob=0.8, mask_channel_prob=0.0,
                           mask_channel_length=10, feature_grad_mult=None):
    """HuBERT "extra large" for pre-training (500 classes, final_dim 1024)."""
    return _pretrain("hubert_xlarge", encoder_projection_dropout, encoder_attention_dropout,
                     encoder_ff_interm_dropout, encoder_dropout, encoder_layer_drop, mask_prob,
                     mask_channel_prob, mask_channel_length, feature_grad_mult, 500, 1024)
