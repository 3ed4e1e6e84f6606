"""Build a :class:`~fiamma.audio.models.Wav2Vec2Model` from a Hugging Face ``transformers``
wav2vec 2.0 / HuBERT / WavLM model (``Wav2Vec2Model``, ``Wav2Vec2ForCTC``, ``HubertModel``,
``HubertForCTC``, ``WavLMModel``, ``WavLMForCTC``).

``original`` may be the model object itself (anything with ``.config`` and ``.state_dict()``,
such as a ``transformers`` model under PyTorch), the folder written by ``save_pretrained``
(``config.json`` with ``model.safetensors`` or ``pytorch_model.bin``), a checkpoint file with
``config=``, or a state dict with ``config=`` (a dict, an object with attributes, or the path
of a ``config.json``). No ``transformers`` import is needed.
"""

import json
import logging
import os

import fiamma
from fiamma.audio.models.wav2vec2.model import wav2vec2_model, wavlm_model

__all__ = ["import_huggingface_model"]

_LG = logging.getLogger(__name__)

_CTC = ("Wav2Vec2ForCTC", "HubertForCTC", "WavLMForCTC")
_KNOWN = _CTC + ("Wav2Vec2Model", "HubertModel", "WavLMModel")
_PREFIXES = ("wav2vec2.", "hubert.", "wavlm.")
# HF config defaults for the fields a saved config might leave out
_DEFAULTS = {"feat_extract_norm": "group", "conv_bias": False, "feat_proj_dropout": 0.0,
             "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
             "attention_dropout": 0.1, "activation_dropout": 0.1, "hidden_dropout": 0.1,
             "do_stable_layer_norm": False, "layerdrop": 0.1, "num_buckets": 320,
             "max_bucket_distance": 800}


def _field(cfg, name):
    if isinstance(cfg, dict):
        if name in cfg:
            return cfg[name]
    elif hasattr(cfg, name):
        return getattr(cfg, name)
    if name in _DEFAULTS:
        return _DEFAULTS[name]
    raise KeyError(f"import_huggingface_model: the config has no {name!r}")


def _get_config(cfg, wavlm):
    config = {
        "extractor_mode": f"{_field(cfg, 'feat_extract_norm')}_norm",
        "extractor_conv_layer_config": list(zip(_field(cfg, "conv_dim"),
                                                _field(cfg, "conv_kernel"),
                                                _field(cfg, "conv_stride"))),
        "extractor_conv_bias": _field(cfg, "conv_bias"),
        "encoder_embed_dim": _field(cfg, "hidden_size"),
        "encoder_projection_dropout": _field(cfg, "feat_proj_dropout"),
        "encoder_pos_conv_kernel": _field(cfg, "num_conv_pos_embeddings"),
        "encoder_pos_conv_groups": _field(cfg, "num_conv_pos_embedding_groups"),
        "encoder_num_layers": _field(cfg, "num_hidden_layers"),
        "encoder_num_heads": _field(cfg, "num_attention_heads"),
    }
    if wavlm:
        config["encoder_num_buckets"] = _field(cfg, "num_buckets")
        config["encoder_max_distance"] = _field(cfg, "max_bucket_distance")
    config.update({
        "encoder_attention_dropout": _field(cfg, "attention_dropout"),
        "encoder_ff_interm_features": _field(cfg, "intermediate_size"),
        "encoder_ff_interm_dropout": _field(cfg, "activation_dropout"),
        "encoder_dropout": _field(cfg, "hidden_dropout"),
        "encoder_layer_norm_first": _field(cfg, "do_stable_layer_norm"),
        "encoder_layer_drop": _field(cfg, "layerdrop"),
    })
    return config


def _to_fiamma(value):
    if isinstance(value, fiamma.Tensor):
        return value
    if hasattr(value, "detach"):        # a PyTorch tensor
        value = value.detach().cpu().numpy()
    return fiamma.tensor(value)


def _read_config(config):
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as f:
            return json.load(f)
    return config


def _read_folder(folder):
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        raise FileNotFoundError(f"import_huggingface_model: no config.json in {str(folder)!r}")
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return _read_weights(path), _read_config(config)
    raise FileNotFoundError(f"import_huggingface_model: no model.safetensors or "
                            f"pytorch_model.bin in {str(folder)!r}")


def _read_weights(path):
    path = str(path)
    if path.endswith(".safetensors"):
        return fiamma.safetensors.load_file(path)
    return fiamma.load(path)


def _class_name(cfg, state):
    arch = _field(cfg, "architectures") if "architectures" in (
        cfg if isinstance(cfg, dict) else vars(cfg)) else None
    if arch:
        return arch[0]
    model_type = str(_field(cfg, "model_type")) if (
        "model_type" in (cfg if isinstance(cfg, dict) else vars(cfg))) else "wav2vec2"
    base = {"wav2vec2": "Wav2Vec2", "hubert": "Hubert", "wavlm": "WavLM"}.get(model_type,
                                                                             "Wav2Vec2")
    return base + ("ForCTC" if any(k.startswith("lm_head.") for k in state) else "Model")


def _convert(state, num_layers, wavlm):
    out = {}
    for key, value in state.items():
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        if key == "masked_spec_embed" or key.startswith(("adapter.", "quantizer.",
                                                          "project_q.", "project_hid.")):
            continue
        if key.startswith("lm_head."):
            out["aux." + key[len("lm_head."):]] = value
        elif key.startswith("feature_extractor."):
            out[key] = value
        elif key.startswith("feature_projection."):
            out["encoder." + key] = value
        elif key.startswith("encoder."):
            out["encoder.transformer." + key[len("encoder."):]] = value
        else:
            raise ValueError(f"import_huggingface_model: unexpected key {key!r} in the state "
                             "dict")
    if wavlm:
        for i in range(num_layers):
            p = f"encoder.transformer.layers.{i}.attention."
            for kind in ("weight", "bias"):
                parts = [out.pop(f"{p}{n}_proj.{kind}") for n in ("q", "k", "v")]
                out[f"{p}attention.in_proj_{kind}"] = fiamma.cat(parts)
                out[f"{p}attention.out_proj.{kind}"] = out.pop(f"{p}out_proj.{kind}")
    return out


def import_huggingface_model(original, *, config=None):
    """A :class:`Wav2Vec2Model` with the weights and architecture of a Hugging Face model
    (see the module docstring for what ``original`` may be). For the ``...ForCTC`` classes
    ``lm_head`` becomes ``aux``; the other classes give a model without head.

    >>> model = import_huggingface_model("wav2vec2-base-960h/")        # doctest: +SKIP
    >>> emissions, _ = model(waveforms)                                 # doctest: +SKIP
    """
    class_name = None
    if isinstance(original, (str, os.PathLike)):
        if os.path.isdir(original):
            state, cfg = _read_folder(original)
        elif os.path.isfile(original):
            state = _read_weights(original)
            cfg_path = os.path.join(os.path.dirname(str(original)), "config.json")
            cfg = _read_config(config if config is not None else cfg_path)
        else:
            raise FileNotFoundError(f"import_huggingface_model: no such file or folder: "
                                    f"{str(original)!r}")
    elif hasattr(original, "state_dict") and hasattr(original, "config"):
        class_name = type(original).__name__
        state, cfg = original.state_dict(), original.config
    elif isinstance(original, dict):
        if config is None:
            raise TypeError("import_huggingface_model: a state dict needs config= (the model's "
                            "config as a dict, an object or the path of its config.json)")
        state, cfg = original, _read_config(config)
    else:
        raise TypeError("import_huggingface_model: expected a transformers model, a "
                        "save_pretrained folder, a checkpoint path or a state dict, got "
                        f"{type(original).__name__}")
    state = {k: _to_fiamma(v) for k, v in state.items()}
    class_name = class_name or _class_name(cfg, state)
    if class_name not in _KNOWN:
        raise ValueError(f"import_huggingface_model: expected one of {', '.join(_KNOWN)}, got "
                         f"{class_name}")
    wavlm = class_name.startswith("WavLM")
    params = _get_config(cfg, wavlm)
    aux_num_out = None
    if class_name in _CTC:
        aux_num_out = _field(cfg, "vocab_size")
    else:
        _LG.warning("%s is not a ...ForCTC model: no lm_head is imported.", class_name)
    factory = wavlm_model if wavlm else wav2vec2_model
    model = factory(**params, aux_num_out=aux_num_out)
    model.load_state_dict(_convert(state, params["encoder_num_layers"], wavlm))
    return model
