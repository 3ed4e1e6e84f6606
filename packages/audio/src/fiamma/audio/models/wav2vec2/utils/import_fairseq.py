"""Build a :class:`~fiamma.audio.models.Wav2Vec2Model` from fairseq's wav2vec 2.0 / HuBERT
weights.

``original`` may be a fairseq model object (``Wav2Vec2Model``, ``Wav2VecEncoder``,
``HubertModel``, ``HubertEncoder``: anything with fairseq's attributes and ``state_dict()``)
or, without fairseq, the ``"model"`` state dict of a fairseq checkpoint. From a state dict
the architecture is read off the weights; what they do not hold comes from ``config``
(:func:`~fiamma.audio.models.wav2vec2_model`'s argument names) or from fairseq's published
models: conv strides (5, 2, 2, 2, 2, 2, 2) for the standard kernels (10, 3, 3, 3, 3, 2, 2),
12 heads at width 768 and 16 otherwise, pre-norm layers exactly when the feature extractor
uses layer norm, no dropout.
"""

import re

import fiamma
from fiamma.audio.models.wav2vec2.model import wav2vec2_model

__all__ = ["import_fairseq_model"]

_RULES = [
    (r"feature_extractor\.conv_layers\.0\.2\.(weight|bias)",
     r"feature_extractor.conv_layers.0.layer_norm.\1"),
    (r"feature_extractor\.conv_layers\.(\d+)\.0\.(weight|bias)",
     r"feature_extractor.conv_layers.\1.conv.\2"),
    (r"feature_extractor\.conv_layers\.(\d+)\.2\.1\.(weight|bias)",
     r"feature_extractor.conv_layers.\1.layer_norm.\2"),
    (r"post_extract_proj\.(weight|bias)", r"encoder.feature_projection.projection.\1"),
    (r"layer_norm\.(weight|bias)", r"encoder.feature_projection.layer_norm.\1"),
    (r"encoder\.pos_conv\.0\.(bias|weight_g|weight_v)",
     r"encoder.transformer.pos_conv_embed.conv.\1"),
    (r"encoder\.layer_norm\.(weight|bias)", r"encoder.transformer.layer_norm.\1"),
    (r"encoder\.layers\.(\d+)\.self_attn\.((?:k|v|q|out)_proj\.(?:weight|bias))",
     r"encoder.transformer.layers.\1.attention.\2"),
    (r"encoder\.layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)",
     r"encoder.transformer.layers.\1.layer_norm.\2"),
    (r"encoder\.layers\.(\d+)\.fc1\.(weight|bias)",
     r"encoder.transformer.layers.\1.feed_forward.intermediate_dense.\2"),
    (r"encoder\.layers\.(\d+)\.fc2\.(weight|bias)",
     r"encoder.transformer.layers.\1.feed_forward.output_dense.\2"),
    (r"encoder\.layers\.(\d+)\.final_layer_norm\.(weight|bias)",
     r"encoder.transformer.layers.\1.final_layer_norm.\2"),
    (r"proj\.(weight|bias)", r"aux.\1"),
]
_SKIP = re.compile(r"(mask_emb|quantizer|project_q|final_proj|label_embs_concat)")
_STANDARD_KERNELS = (10, 3, 3, 3, 3, 2, 2)
_STANDARD_STRIDES = (5, 2, 2, 2, 2, 2, 2)


def _map_key(key):
    for prefix in ("w2v_encoder.", "w2v_model."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    if _SKIP.match(key):
        return None
    for pattern, target in _RULES:
        if re.fullmatch(pattern, key):
            return re.sub(pattern, target, key)
    raise ValueError(f"import_fairseq_model: unexpected key {key!r}")


def _convert_state_dict(state_dict):
    out = {}
    for key, value in state_dict.items():
        mapped = _map_key(key)
        if mapped is not None:
            out[mapped] = value if isinstance(value, fiamma.Tensor) else fiamma.tensor(
                value.detach().cpu().numpy() if hasattr(value, "detach") else value)
    return out


def _config_from_state(sd, overrides):
    def need(key):
        if key not in sd:
            raise ValueError(f"import_fairseq_model: the state dict has no {key!r}; is it a "
                             "fairseq wav2vec 2.0 / HuBERT model?")
        return sd[key]

    conv = []
    i = 0
    while f"feature_extractor.conv_layers.{i}.conv.weight" in sd:
        out_channels, _, kernel = sd[f"feature_extractor.conv_layers.{i}.conv.weight"].shape
        conv.append((out_channels, kernel))
        i += 1
    if not conv:
        need("feature_extractor.conv_layers.0.conv.weight")
    layer_norm = any(f"feature_extractor.conv_layers.{i}.layer_norm.weight" in sd
                     for i in range(1, len(conv)))
    kernels = tuple(k for _, k in conv)
    if "extractor_conv_layer_config" in overrides:
        conv_config = overrides["extractor_conv_layer_config"]
    elif kernels == _STANDARD_KERNELS:
        conv_config = [(c, k, s) for (c, k), s in zip(conv, _STANDARD_STRIDES)]
    else:
        raise ValueError(f"import_fairseq_model: the conv kernels {kernels} are not fairseq's "
                         "standard ones; pass config={'extractor_conv_layer_config': "
                         "[(channels, kernel, stride), ...]}")
    proj = need("encoder.feature_projection.projection.weight")
    embed_dim = proj.shape[0]
    pos = sd.get("encoder.transformer.pos_conv_embed.conv.weight_v")
    if pos is None:
        pos = need("encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original1")
    num_layers = 0
    while f"encoder.transformer.layers.{num_layers}.final_layer_norm.weight" in sd:
        num_layers += 1
    config = {
        "extractor_mode": "layer_norm" if layer_norm else "group_norm",
        "extractor_conv_layer_config": conv_config,
        "extractor_conv_bias": "feature_extractor.conv_layers.0.conv.bias" in sd,
        "encoder_embed_dim": embed_dim,
        "encoder_projection_dropout": 0.0,
        "encoder_pos_conv_kernel": pos.shape[2],
        "encoder_pos_conv_groups": embed_dim // pos.shape[1],
        "encoder_num_layers": num_layers,
        "encoder_num_heads": 12 if embed_dim == 768 else 16,
        "encoder_attention_dropout": 0.0,
        "encoder_ff_interm_features":
            need("encoder.transformer.layers.0.feed_forward.intermediate_dense.weight").shape[0],
        "encoder_ff_interm_dropout": 0.0,
        "encoder_dropout": 0.0,
        "encoder_layer_norm_first": layer_norm,
        "encoder_layer_drop": 0.0,
        "aux_num_out": sd["aux.weight"].shape[0] if "aux.weight" in sd else None,
    }
    unknown = set(overrides) - set(config)
    if unknown:
        raise TypeError(f"import_fairseq_model: unknown config keys {sorted(unknown)} (expected "
                        "wav2vec2_model's argument names)")
    config.update(overrides)
    return config


def _config_from_module(w2v_model, aux_num_out):
    encoder = w2v_model.encoder
    conv_layers = w2v_model.feature_extractor.conv_layers
    mode = "group_norm" if "GroupNorm" in type(conv_layers[0][2]).__name__ else "layer_norm"
    biases = {layer[0].bias is not None for layer in conv_layers}
    if len(biases) != 1:
        raise ValueError("import_fairseq_model: either all the convolution layers have a bias "
                         "or none of them")
    layer0 = encoder.layers[0]
    return {
        "extractor_mode": mode,
        "extractor_conv_layer_config": [(c[0].out_channels, c[0].kernel_size[0], c[0].stride[0])
                                        for c in conv_layers],
        "extractor_conv_bias": biases.pop(),
        "encoder_embed_dim": w2v_model.post_extract_proj.out_features,
        "encoder_projection_dropout": w2v_model.dropout_input.p,
        "encoder_pos_conv_kernel": encoder.pos_conv[0].kernel_size[0],
        "encoder_pos_conv_groups": encoder.pos_conv[0].groups,
        "encoder_num_layers": len(encoder.layers),
        "encoder_num_heads": layer0.self_attn.num_heads,
        "encoder_attention_dropout": layer0.self_attn.dropout_module.p,
        "encoder_ff_interm_features": layer0.fc1.out_features,
        "encoder_ff_interm_dropout": layer0.dropout2.p,
        "encoder_dropout": layer0.dropout3.p,
        "encoder_layer_norm_first": encoder.layer_norm_first,
        "encoder_layer_drop": encoder.layerdrop,
        "aux_num_out": aux_num_out,
    }


def import_fairseq_model(original, *, config=None):
    """A :class:`Wav2Vec2Model` with the weights of a fairseq wav2vec 2.0 / HuBERT model
    (pre-trained, or fine-tuned: then its output projection becomes ``aux``).

    A whole checkpoint (a dict with a ``"model"`` entry) is accepted too. fairseq checkpoints
    also pickle their training arguments (``argparse.Namespace`` / omegaconf), which
    ``fiamma.load`` refuses by default: load a trusted file with ``weights_only=False``.

    >>> ckpt = fiamma.load("wav2vec_small_960h.pt", weights_only=False)  # doctest: +SKIP
    >>> model = import_fairseq_model(ckpt)                                # doctest: +SKIP
    """
    if isinstance(original, dict) and isinstance(original.get("model"), dict):
        original = original["model"]
    if isinstance(original, dict):
        state = _convert_state_dict(original)
        params = _config_from_state(state, dict(config or {}))
        model = wav2vec2_model(**params)
        model.load_state_dict(state)
        return model
    name = type(original).__name__
    if name in ("Wav2Vec2Model", "HubertModel"):
        params = _config_from_module(original, None)
    elif name in ("Wav2VecEncoder", "HubertEncoder"):
        params = _config_from_module(original.w2v_model, original.proj.out_features)
    else:
        raise ValueError("import_fairseq_model: expected a fairseq Wav2Vec2Model, "
                         f"Wav2VecEncoder, HubertModel or HubertEncoder, or a state dict; got "
                         f"{name}")
    params.update(config or {})
    model = wav2vec2_model(**params)
    model.load_state_dict(_convert_state_dict(original.state_dict()),
                          strict=name == "Wav2VecEncoder")
    return model
