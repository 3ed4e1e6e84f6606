"""wav2vec 2.0 / HuBERT / WavLM models (torchaudio.models names): shapes and valid lengths,
state-dict keys (torchaudio's, hard-coded), padding masks, numerical gradients on tiny
configurations, HuBERT pre-training pieces and bad-input errors. (Parity with torchaudio was
checked outside the repo: float64 outputs and gradients within 3e-15.)"""

import inspect

import numpy as np
import pytest

import fiamma
from fiamma.audio import models
from fiamma.audio.models.wav2vec2 import components
from fiamma.audio.models.wav2vec2.wavlm_attention import WavLMSelfAttention

CONV = [(4, 10, 5), (4, 3, 2)]


def tiny(mode="group_norm", first=False, aux=5, layers=1, kernel=4, embed=8, heads=2):
    return models.wav2vec2_model(mode, CONV, mode == "layer_norm", embed, 0.0, kernel, 2, layers,
                                 heads, 0.0, 12, 0.0, 0.0, first, 0.0, aux)


def tiny_wavlm(mode="group_norm", first=False, layers=2):
    return models.wavlm_model(mode, CONV, False, 8, 0.0, 4, 2, layers, 2, 6, 20, 0.0, 12, 0.0,
                              0.0, first, 0.0, None)


def frames(n):
    for _, k, s in CONV:
        n = max((n - k) // s + 1, 0)
    return n


# ---- shapes, lengths ---------------------------------------------------------------------------


def test_forward_shapes_and_lengths():
    fiamma.manual_seed(0)
    m = tiny().eval()
    x = fiamma.randn(3, 200)
    y, lengths = m(x)
    assert tuple(y.shape) == (3, frames(200), 5) and lengths is None
    y, lengths = m(x, fiamma.tensor([200, 120, 9]))
    assert tuple(y.shape) == (3, frames(200), 5)
    assert lengths.tolist() == [frames(200), frames(120), 0]   # 9 samples < one window: 0


def test_no_aux_gives_embeddings():
    m = tiny(aux=None).eval()
    y, _ = m(fiamma.randn(2, 100))
    assert tuple(y.shape) == (2, frames(100), 8) and m.aux is None


def test_extract_features_layers():
    fiamma.manual_seed(1)
    m = tiny(layers=3).eval()
    x = fiamma.randn(2, 150)
    feats, lengths = m.extract_features(x)
    assert len(feats) == 3 and lengths is None
    assert all(tuple(f.shape) == (2, frames(150), 8) for f in feats)
    two, _ = m.extract_features(x, None, 2)
    assert len(two) == 2
    np.testing.assert_allclose(two[1].detach().numpy(), feats[1].detach().numpy(), atol=1e-6)
    # post-norm model: the last layer's output is the encoder output before aux
    m.aux = None
    np.testing.assert_allclose(m(x)[0].detach().numpy(), feats[-1].detach().numpy(), atol=1e-5)
    for bad in (0, 4):
        with pytest.raises(ValueError, match=r"num_layers must be in \[1, 3\]"):
            m.extract_features(x, None, bad)


def test_pre_norm_last_feature_is_before_final_norm():
    fiamma.manual_seed(2)
    m = tiny(mode="layer_norm", first=True, aux=None, layers=2).eval()
    x = fiamma.randn(1, 150)
    feats, _ = m.extract_features(x)
    final = m.encoder.transformer.layer_norm(feats[-1])
    np.testing.assert_allclose(m(x)[0].detach().numpy(), final.detach().numpy(), atol=1e-5)


# ---- state dict keys (torchaudio's, in its order) ---------------------------------------------

TINY_KEYS = [
    "feature_extractor.conv_layers.0.layer_norm.weight",
    "feature_extractor.conv_layers.0.layer_norm.bias",
    "feature_extractor.conv_layers.0.conv.weight",
    "feature_extractor.conv_layers.1.conv.weight",
    "encoder.feature_projection.layer_norm.weight",
    "encoder.feature_projection.layer_norm.bias",
    "encoder.feature_projection.projection.weight",
    "encoder.feature_projection.projection.bias",
    "encoder.transformer.pos_conv_embed.conv.bias",
    "encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original0",
    "encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original1",
    "encoder.transformer.layer_norm.weight",
    "encoder.transformer.layer_norm.bias",
    "encoder.transformer.layers.0.attention.k_proj.weight",
    "encoder.transformer.layers.0.attention.k_proj.bias",
    "encoder.transformer.layers.0.attention.v_proj.weight",
    "encoder.transformer.layers.0.attention.v_proj.bias",
    "encoder.transformer.layers.0.attention.q_proj.weight",
    "encoder.transformer.layers.0.attention.q_proj.bias",
    "encoder.transformer.layers.0.attention.out_proj.weight",
    "encoder.transformer.layers.0.attention.out_proj.bias",
    "encoder.transformer.layers.0.layer_norm.weight",
    "encoder.transformer.layers.0.layer_norm.bias",
    "encoder.transformer.layers.0.feed_forward.intermediate_dense.weight",
    "encoder.transformer.layers.0.feed_forward.intermediate_dense.bias",
    "encoder.transformer.layers.0.feed_forward.output_dense.weight",
    "encoder.transformer.layers.0.feed_forward.output_dense.bias",
    "encoder.transformer.layers.0.final_layer_norm.weight",
    "encoder.transformer.layers.0.final_layer_norm.bias",
    "aux.weight",
    "aux.bias",
]


def test_state_dict_keys_group_norm():
    sd = tiny().state_dict()
    assert list(sd) == TINY_KEYS
    assert tuple(sd["encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original0"]
                 .shape) == (1, 1, 4)      # weight norm over dim 2 (time)
    assert tuple(sd["feature_extractor.conv_layers.0.conv.weight"].shape) == (4, 1, 10)


def test_state_dict_keys_layer_norm_extractor():
    keys = [k for k in tiny(mode="layer_norm").state_dict() if k.startswith("feature_")]
    assert keys == [f"feature_extractor.conv_layers.{i}.{n}" for i in (0, 1) for n in (
        "layer_norm.weight", "layer_norm.bias", "conv.weight", "conv.bias")]


def test_state_dict_keys_wavlm():
    keys = [k for k in tiny_wavlm().state_dict() if ".attention." in k]
    first = "encoder.transformer.layers.0.attention."
    second = "encoder.transformer.layers.1.attention."
    assert keys == [first + n for n in (
        "gru_rel_pos_const", "rel_attn_embed.weight", "attention.in_proj_weight",
        "attention.in_proj_bias", "attention.out_proj.weight", "attention.out_proj.bias",
        "gru_rel_pos_linear.weight", "gru_rel_pos_linear.bias")] + [second + n for n in (
            "gru_rel_pos_const", "attention.in_proj_weight", "attention.in_proj_bias",
            "attention.out_proj.weight", "attention.out_proj.bias", "gru_rel_pos_linear.weight",
            "gru_rel_pos_linear.bias")]
    sd = tiny_wavlm().state_dict()
    assert tuple(sd[first + "rel_attn_embed.weight"].shape) == (6, 2)
    assert tuple(sd[first + "gru_rel_pos_linear.weight"].shape) == (8, 4)
    assert tuple(sd[first + "gru_rel_pos_const"].shape) == (1, 2, 1, 1)


def test_wav2vec2_base_size():
    m = models.wav2vec2_base(aux_num_out=29)
    sd = m.state_dict()
    assert len(sd) == 212       # torchaudio: 210 without aux
    assert sum(p.numel() for p in m.parameters()) == 94370944 + 768 * 29 + 29


def test_legacy_weight_norm_keys_load():
    """torchaudio's published checkpoints store the positional conv as weight_g/weight_v."""
    src = tiny()
    sd = dict(src.state_dict())
    prefix = "encoder.transformer.pos_conv_embed.conv."
    sd[prefix + "weight_g"] = sd.pop(prefix + "parametrizations.weight.original0")
    sd[prefix + "weight_v"] = sd.pop(prefix + "parametrizations.weight.original1")
    dst = tiny()
    dst.load_state_dict(sd)
    x = fiamma.randn(1, 100)
    np.testing.assert_array_equal(dst.eval()(x)[0].detach().numpy(),
                                  src.eval()(x)[0].detach().numpy())


def test_builder_signatures():
    drop = ["encoder_projection_dropout", "encoder_attention_dropout",
            "encoder_ff_interm_dropout", "encoder_dropout", "encoder_layer_drop", "aux_num_out"]
    facts = {
        "wav2vec2_base": (0.1, 0.1, 0.1, 0.1, 0.1, None),
        "wav2vec2_large": (0.1, 0.1, 0.1, 0.1, 0.1, None),
        "wav2vec2_large_lv60k": (0.1, 0.0, 0.1, 0.0, 0.1, None),
        "wav2vec2_xlsr_300m": (0.0, 0.0, 0.0, 0.0, 0.0, None),
        "wav2vec2_xlsr_1b": (0.1, 0.0, 0.0, 0.0, 0.0, None),
        "wav2vec2_xlsr_2b": (0.1, 0.0, 0.0, 0.0, 0.0, None),
        "hubert_base": (0.1, 0.1, 0.0, 0.1, 0.05, None),
        "hubert_large": (0.0, 0.0, 0.0, 0.0, 0.0, None),
        "hubert_xlarge": (0.0, 0.0, 0.0, 0.0, 0.0, None),
        "wavlm_base": (0.1, 0.1, 0.1, 0.1, 0.1, None),
        "wavlm_large": (0.1, 0.1, 0.0, 0.1, 0.1, None),
    }
    for name, defaults in facts.items():
        sig = inspect.signature(getattr(models, name))
        assert list(sig.parameters) == drop, name
        assert tuple(p.default for p in sig.parameters.values()) == defaults, name
    assert list(inspect.signature(models.wav2vec2_model).parameters) == [
        "extractor_mode", "extractor_conv_layer_config", "extractor_conv_bias",
        "encoder_embed_dim", "encoder_projection_dropout", "encoder_pos_conv_kernel",
        "encoder_pos_conv_groups", "encoder_num_layers", "encoder_num_heads",
        "encoder_attention_dropout", "encoder_ff_interm_features", "encoder_ff_interm_dropout",
        "encoder_dropout", "encoder_layer_norm_first", "encoder_layer_drop", "aux_num_out"]
    wavlm = list(inspect.signature(models.wavlm_model).parameters)
    assert wavlm[9:11] == ["encoder_num_buckets", "encoder_max_distance"] and len(wavlm) == 18
    pre = inspect.signature(models.hubert_pretrain_base).parameters
    assert {k: v.default for k, v in pre.items()} == {
        "encoder_projection_dropout": 0.1, "encoder_attention_dropout": 0.1,
        "encoder_ff_interm_dropout": 0.0, "encoder_dropout": 0.1, "encoder_layer_drop": 0.05,
        "mask_prob": 0.8, "mask_channel_prob": 0.0, "mask_channel_length": 10,
        "feature_grad_mult": 0.1, "num_classes": 100}
    assert "num_classes" not in inspect.signature(models.hubert_pretrain_large).parameters


# ---- padding masks -----------------------------------------------------------------------------


@pytest.mark.parametrize("build", [lambda: tiny(mode="layer_norm", first=True, layers=2),
                                   lambda: tiny(mode="layer_norm", first=False, layers=2),
                                   lambda: tiny_wavlm(mode="layer_norm")])
def test_padded_batch_matches_unpadded_item(build):
    """With lengths, a short item's valid frames equal its output computed alone (layer-norm
    extractor: the group-norm one normalises over all frames, padding included)."""
    fiamma.manual_seed(3)
    m = build().double().eval()
    x = fiamma.randn(2, 300, dtype=fiamma.float64)
    short = 170
    x[1, short:] = 5.0        # garbage in the padding
    y, lengths = m(x, fiamma.tensor([300, short]))
    alone, _ = m(x[1:, :short])
    n = lengths[1].item()
    assert n == frames(short) == alone.shape[1]
    np.testing.assert_allclose(y[1, :n].detach().numpy(), alone[0].detach().numpy(),
                               rtol=1e-10, atol=1e-10)
    # without lengths the padding leaks into the valid frames
    y_nolen, _ = m(x)
    assert np.abs(y_nolen[1, :n].detach().numpy() - alone[0].detach().numpy()).max() > 1e-6


def test_encoder_mask_values():
    enc = tiny(aux=None).encoder
    feats = fiamma.randn(2, 5, 4)
    x, mask = enc._preprocess(feats, fiamma.tensor([5, 3]))
    assert tuple(mask.shape) == (2, 1, 5, 5)
    assert mask[1, 0, 0].tolist() == [0.0, 0.0, 0.0, -10000.0, -10000.0]
    assert mask[0].abs().sum().item() == 0
    assert x[1, 3:].abs().sum().item() == 0 and x[1, :3].abs().sum().item() > 0


# ---- gradients ---------------------------------------------------------------------------------


def test_gradcheck_wav2vec2_input():
    fiamma.manual_seed(4)
    m = tiny(mode="layer_norm", first=True).double().eval()
    x = fiamma.randn(1, 60, dtype=fiamma.float64, requires_grad=True)
    assert fiamma.autograd.gradcheck(lambda w: m(w)[0], (x,), eps=1e-6, atol=1e-6)


def test_gradcheck_wav2vec2_with_lengths():
    fiamma.manual_seed(5)
    m = tiny().double().eval()
    x = fiamma.randn(2, 60, dtype=fiamma.float64, requires_grad=True)
    lengths = fiamma.tensor([60, 40])
    assert fiamma.autograd.gradcheck(lambda w: m(w, lengths)[0], (x,), eps=1e-6, atol=1e-6)


def test_gradcheck_wavlm_attention():
    fiamma.manual_seed(6)
    att = WavLMSelfAttention(8, 2, has_relative_attention_bias=True, num_buckets=6,
                             max_distance=10).double()
    with fiamma.no_grad():
        att.gru_rel_pos_const.uniform_(0.5, 1.5)
    x = fiamma.randn(2, 7, 8, dtype=fiamma.float64, requires_grad=True)
    assert fiamma.autograd.gradcheck(lambda q: att(q)[0], (x,), eps=1e-6, atol=1e-6)
    # the returned bias is the ungated one, shared by the next layers
    _, bias = att(x)
    assert tuple(bias.shape) == (2, 2, 7, 7)
    np.testing.assert_allclose(bias[0].detach().numpy(),
                               att.compute_bias(7, 7).detach().numpy())


def test_gradcheck_parameters():
    """Gradients reach the gate, the bucket embedding and the positional conv's g and v."""
    from fiamma.nn.utils.stateless import functional_call

    fiamma.manual_seed(7)
    m = tiny_wavlm(layers=2).double().eval()
    with fiamma.no_grad():
        for layer in m.encoder.transformer.layers:
            layer.attention.gru_rel_pos_const.uniform_(0.5, 1.5)
    x = fiamma.randn(1, 60, dtype=fiamma.float64)
    names = ["encoder.transformer.layers.1.attention.gru_rel_pos_linear.weight",
             "encoder.transformer.layers.0.attention.rel_attn_embed.weight",
             "encoder.transformer.layers.1.attention.gru_rel_pos_const",
             "encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original0",
             "encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original1"]
    params = dict(m.named_parameters())
    inputs = tuple(params[n].detach().clone().requires_grad_(True) for n in names)

    def f(*values):
        return functional_call(m, dict(zip(names, values)), (x,))[0]

    assert fiamma.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6)


def test_wavlm_key_padding_mask():
    """A bool key padding mask (True = pad) is -inf on those keys: the valid rows equal the
    attention over the unpadded frames with the same position bias."""
    fiamma.manual_seed(11)
    att = WavLMSelfAttention(8, 2, has_relative_attention_bias=True, num_buckets=6,
                             max_distance=10).double().eval()
    x = fiamma.randn(1, 6, 8, dtype=fiamma.float64)
    pad = fiamma.tensor([[False, False, False, False, True, True]])
    y, _ = att(x, key_padding_mask=pad)
    alone, _ = att(x[:, :4])
    np.testing.assert_allclose(y[0, :4].detach().numpy(), alone[0].detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"expected attention mask of shape \[1, 1, 6, 6\]"):
        att(x, attention_mask=fiamma.zeros(1, 6, 6, dtype=fiamma.float64))


def test_relative_position_buckets():
    att = WavLMSelfAttention(8, 2, has_relative_attention_bias=True, num_buckets=32,
                             max_distance=128)
    offsets = fiamma.tensor([[-200, -128, -20, -8, -7, -1, 0, 1, 7, 8, 20, 128, 200]])
    # 16 buckets per sign; exact below 8, log-spaced to 128, clipped at 15
    got = att._relative_positions_bucket(offsets).tolist()[0]
    assert got == [15, 15, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31]   # torchaudio's values


# ---- HuBERT pre-training ----------------------------------------------------------------------


def tiny_pretrain(**kw):
    args = dict(extractor_mode="group_norm", extractor_conv_layer_config=CONV,
                extractor_conv_bias=False, encoder_embed_dim=8, encoder_projection_dropout=0.0,
                encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=1,
                encoder_num_heads=2, encoder_attention_dropout=0.0,
                encoder_ff_interm_features=12, encoder_ff_interm_dropout=0.0,
                encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0,
                mask_prob=0.5, mask_selection="static", mask_other=0.0, mask_length=2,
                no_mask_overlap=False, mask_min_space=1, mask_channel_prob=0.0,
                mask_channel_selection="static", mask_channel_other=0.0,
                mask_channel_length=2, no_mask_channel_overlap=False, mask_channel_min_space=1,
                skip_masked=False, skip_nomask=False, num_classes=7, final_dim=6,
                feature_grad_mult=None)
    args.update(kw)
    return models.hubert_pretrain_model(**args)


def test_hubert_pretrain_keys_and_outputs():
    fiamma.manual_seed(8)
    m = tiny_pretrain()
    keys = list(m.state_dict())
    assert keys[-4:] == ["mask_generator.mask_embedding", "logit_generator.label_embeddings",
                         "logit_generator.final_proj.weight", "logit_generator.final_proj.bias"]
    assert keys[0] == "wav2vec2.feature_extractor.conv_layers.0.layer_norm.weight"
    x = fiamma.randn(2, 400)
    lengths = fiamma.tensor([400, 250])
    n = frames(400)
    labels = fiamma.randint(0, 7, (2, n))
    logit_m, logit_u, pen = m(x, labels, lengths)
    valid = frames(400) + frames(250)
    assert logit_m.shape[0] + logit_u.shape[0] == valid and logit_m.shape[0] > 0
    assert logit_m.shape[1] == logit_u.shape[1] == 8
    assert pen.ndim == 0 and pen.item() > 0
    with pytest.raises(ValueError, match=r"HuBERTPretrainModel: expected labels of shape"):
        m(x, labels[:, :-1], lengths)


def test_hubert_grad_multiply():
    x = fiamma.randn(3, requires_grad=True)
    y = components.GradMultiply.apply(x, 0.25)
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy())
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 0.25))
    with pytest.raises(ValueError, match=r"feature_grad_mult must be None or in \(0, 1\)"):
        tiny_pretrain(feature_grad_mult=1.5)


def test_compute_mask_indices():
    fiamma.manual_seed(9)
    pad = fiamma.zeros(4, 50, dtype=fiamma.bool)
    pad[2, 30:] = True
    for no_overlap in (False, True):
        mask = components._compute_mask_indices((4, 50), pad, 0.4, 3, min_masks=2,
                                                no_overlap=no_overlap, min_space=1)
        assert tuple(mask.shape) == (4, 50) and mask.dtype == fiamma.bool
        counts = mask.sum(1).tolist()
        assert len(set(counts)) == 1 and counts[0] >= 3      # equal per row, >= one span
        assert not mask[2, 30:].any().item()                 # padding never masked
    with pytest.raises(ValueError, match="unknown mask selection 'nope'"):
        components._compute_mask_indices((1, 20), None, 0.5, 2, mask_type="nope")


def test_layer_drop_in_training_only():
    fiamma.manual_seed(10)
    m = models.wav2vec2_model("group_norm", CONV, False, 8, 0.0, 4, 2, 3, 2, 0.0, 12, 0.0, 0.0,
                              False, 1.0, None)
    x = fiamma.randn(1, 100)
    m.train()
    y_train, _ = m(x)   # every layer dropped: the positional conv and the first norm remain
    t = m.encoder.transformer
    expected = t._preprocess(m.encoder.feature_projection(m.feature_extractor(x, None)[0]))
    np.testing.assert_allclose(y_train.detach().numpy(), expected.detach().numpy(), atol=1e-6)
    m.eval()
    assert np.abs(m(x)[0].detach().numpy() - y_train.detach().numpy()).max() > 1e-4


# ---- bad input ---------------------------------------------------------------------------------


def test_bad_inputs():
    m = tiny()
    with pytest.raises(ValueError, match=r"Wav2Vec2Model: expected waveforms of shape "
                                         r"\(batch, time\) \(2-D\), got shape \[100\]"):
        m(fiamma.randn(100))
    with pytest.raises(TypeError, match=r"Wav2Vec2Model: expected floating-point waveforms, "
                                        r"got fiamma.int64"):
        m(fiamma.zeros(1, 100, dtype=fiamma.long))
    with pytest.raises(ValueError, match=r"expected lengths of shape \(2,\) .* got shape "
                                         r"\[3\]"):
        m(fiamma.randn(2, 100), fiamma.tensor([100, 90, 80]))
    with pytest.raises(ValueError, match=r"Wav2Vec2Model.extract_features: expected "
                                         r"waveforms of shape"):
        m.extract_features(fiamma.randn(1, 2, 100))
    with pytest.raises(ValueError, match="extractor_mode must be 'group_norm' or 'layer_norm', "
                                         "got 'batch_norm'"):
        tiny(mode="batch_norm")
    with pytest.raises(ValueError, match=r"embed_dim \(8\) is not divisible by num_heads \(3\)"):
        tiny(heads=3)
    with pytest.raises(ValueError, match=r"WavLMSelfAttention: expected input of shape "
                                         r"\(batch, frame, 8\), got \[2, 5, 6\]"):
        WavLMSelfAttention(8, 2)(fiamma.randn(2, 5, 6))
