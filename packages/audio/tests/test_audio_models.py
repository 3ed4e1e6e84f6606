"""torchaudio.models' recognition, separation and synthesis models (Wav2Letter, DeepSpeech,
ConvTasNet, Conformer, Emformer, RNNT + RNNTBeamSearch, WaveRNN, Tacotron2, HDemucs): state-dict
keys and shapes against torchaudio 2.11's (hard-coded facts), output shapes, determinism,
gradients against finite differences, a few training steps, beam search ordering and the
errors for bad input. Output parity with torchaudio itself is checked outside the repository
(torchaudio's C library does not load beside this torch)."""

import math
import warnings

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.audio import models
from fiamma.autograd import gradcheck

CONFIGS = {
    "Wav2Letter": ("Wav2Letter", dict(num_classes=5)),
    "Wav2Letter_mfcc": ("Wav2Letter", dict(num_classes=5, input_type="mfcc", num_features=13)),
    "DeepSpeech": ("DeepSpeech", dict(n_feature=7, n_hidden=16, n_class=5)),
    "ConvTasNet": ("ConvTasNet", dict(num_sources=2, enc_kernel_size=8, enc_num_feats=16,
                                      msk_num_feats=8, msk_num_hidden_feats=12,
                                      msk_num_layers=2, msk_num_stacks=2)),
    "Conformer": ("Conformer", dict(input_dim=8, num_heads=2, ffn_dim=16, num_layers=1,
                                    depthwise_conv_kernel_size=3)),
    "Emformer": ("Emformer", dict(input_dim=8, num_heads=2, ffn_dim=16, num_layers=1,
                                  segment_length=4, max_memory_size=2)),
    "WaveRNN": ("WaveRNN", dict(upsample_scales=[2, 3], n_classes=16, hop_length=6,
                                n_res_block=1, n_rnn=8, n_fc=6, kernel_size=5, n_freq=7,
                                n_hidden=5, n_output=8)),
    "Tacotron2": ("Tacotron2", dict(n_mels=6, n_symbol=10, symbol_embedding_dim=8,
                                    encoder_embedding_dim=8, encoder_n_convolution=1,
                                    encoder_kernel_size=3, decoder_rnn_dim=10,
                                    decoder_max_step=7, attention_rnn_dim=9,
                                    attention_hidden_dim=5, attention_location_n_filter=3,
                                    attention_location_kernel_size=5, prenet_dim=7,
                                    postnet_n_convolution=2, postnet_kernel_size=3,
                                    postnet_embedding_dim=6)),
}
RNNT_CONFIG = dict(
    input_dim=6, encoding_dim=8, num_symbols=5, segment_length=4, right_context_length=2,
    time_reduction_input_dim=4, time_reduction_stride=2, transformer_num_heads=2,
    transformer_ffn_dim=8, transformer_num_layers=1, transformer_dropout=0.0,
    transformer_activation="relu", transformer_left_context_length=3,
    transformer_max_memory_size=2, transformer_weight_init_scale_strategy="depthwise",
    transformer_tanh_on_mem=True, symbol_embedding_dim=6, num_lstm_layers=1,
    lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0)

# torchaudio 2.11's state-dict keys and shapes for the tiny configurations in CONFIGS
# (facts: name:shape, shape dims joined by 'x', '-' for a 0-d tensor).
STATE_DICTS = {
    "Wav2Letter": """
        acoustic_model.0.0.weight:250x1x250 acoustic_model.0.0.bias:250
        acoustic_model.1.0.weight:250x250x48 acoustic_model.1.0.bias:250
        acoustic_model.1.2.weight:250x250x7 acoustic_model.1.2.bias:250
        acoustic_model.1.4.weight:250x250x7 acoustic_model.1.4.bias:250
        acoustic_model.1.6.weight:250x250x7 acoustic_model.1.6.bias:250
        acoustic_model.1.8.weight:250x250x7 acoustic_model.1.8.bias:250
        acoustic_model.1.10.weight:250x250x7 acoustic_model.1.10.bias:250
        acoustic_model.1.12.weight:250x250x7 acoustic_model.1.12.bias:250
        acoustic_model.1.14.weight:250x250x7 acoustic_model.1.14.bias:250
        acoustic_model.1.16.weight:2000x250x32 acoustic_model.1.16.bias:2000
        acoustic_model.1.18.weight:2000x2000x1 acoustic_model.1.18.bias:2000
        acoustic_model.1.20.weight:5x2000x1 acoustic_model.1.20.bias:5
    """,
    "Wav2Letter_mfcc": """
        acoustic_model.0.weight:250x13x48 acoustic_model.0.bias:250
        acoustic_model.2.weight:250x250x7 acoustic_model.2.bias:250
        acoustic_model.4.weight:250x250x7 acoustic_model.4.bias:250
        acoustic_model.6.weight:250x250x7 acoustic_model.6.bias:250
        acoustic_model.8.weight:250x250x7 acoustic_model.8.bias:250
        acoustic_model.10.weight:250x250x7 acoustic_model.10.bias:250
        acoustic_model.12.weight:250x250x7 acoustic_model.12.bias:250
        acoustic_model.14.weight:250x250x7 acoustic_model.14.bias:250
        acoustic_model.16.weight:2000x250x32 acoustic_model.16.bias:2000
        acoustic_model.18.weight:2000x2000x1 acoustic_model.18.bias:2000
        acoustic_model.20.weight:5x2000x1 acoustic_model.20.bias:5
    """,
    "DeepSpeech": """
        fc1.fc.weight:16x7 fc1.fc.bias:16 fc2.fc.weight:16x16 fc2.fc.bias:16 fc3.fc.weight:16x16
        fc3.fc.bias:16 bi_rnn.weight_ih_l0:16x16 bi_rnn.weight_hh_l0:16x16 bi_rnn.bias_ih_l0:16
        bi_rnn.bias_hh_l0:16 bi_rnn.weight_ih_l0_reverse:16x16 bi_rnn.weight_hh_l0_reverse:16x16
        bi_rnn.bias_ih_l0_reverse:16 bi_rnn.bias_hh_l0_reverse:16 fc4.fc.weight:16x16
        fc4.fc.bias:16 out.weight:5x16 out.bias:5
    """,
    "ConvTasNet": """
        encoder.weight:16x1x8 mask_generator.input_norm.weight:16
        mask_generator.input_norm.bias:16 mask_generator.input_conv.weight:8x16x1
        mask_generator.input_conv.bias:8 mask_generator.conv_layers.0.conv_layers.0.weight:12x8x1
        mask_generator.conv_layers.0.conv_layers.0.bias:12
        mask_generator.conv_layers.0.conv_layers.1.weight:1
        mask_generator.conv_layers.0.conv_layers.2.weight:12
        mask_generator.conv_layers.0.conv_layers.2.bias:12
        mask_generator.conv_layers.0.conv_layers.3.weight:12x1x3
        mask_generator.conv_layers.0.conv_layers.3.bias:12
        mask_generator.conv_layers.0.conv_layers.4.weight:1
        mask_generator.conv_layers.0.conv_layers.5.weight:12
        mask_generator.conv_layers.0.conv_layers.5.bias:12
        mask_generator.conv_layers.0.res_out.weight:8x12x1
        mask_generator.conv_layers.0.res_out.bias:8
        mask_generator.conv_layers.0.skip_out.weight:8x12x1
        mask_generator.conv_layers.0.skip_out.bias:8
        mask_generator.conv_layers.1.conv_layers.0.weight:12x8x1
        mask_generator.conv_layers.1.conv_layers.0.bias:12
        mask_generator.conv_layers.1.conv_layers.1.weight:1
        mask_generator.conv_layers.1.conv_layers.2.weight:12
        mask_generator.conv_layers.1.conv_layers.2.bias:12
        mask_generator.conv_layers.1.conv_layers.3.weight:12x1x3
        mask_generator.conv_layers.1.conv_layers.3.bias:12
        mask_generator.conv_layers.1.conv_layers.4.weight:1
        mask_generator.conv_layers.1.conv_layers.5.weight:12
        mask_generator.conv_layers.1.conv_layers.5.bias:12
        mask_generator.conv_layers.1.res_out.weight:8x12x1
        mask_generator.conv_layers.1.res_out.bias:8
        mask_generator.conv_layers.1.skip_out.weight:8x12x1
        mask_generator.conv_layers.1.skip_out.bias:8
        mask_generator.conv_layers.2.conv_layers.0.weight:12x8x1
        mask_generator.conv_layers.2.conv_layers.0.bias:12
        mask_generator.conv_layers.2.conv_layers.1.weight:1
        mask_generator.conv_layers.2.conv_layers.2.weight:12
        mask_generator.conv_layers.2.conv_layers.2.bias:12
        mask_generator.conv_layers.2.conv_layers.3.weight:12x1x3
        mask_generator.conv_layers.2.conv_layers.3.bias:12
        mask_generator.conv_layers.2.conv_layers.4.weight:1
        mask_generator.conv_layers.2.conv_layers.5.weight:12
        mask_generator.conv_layers.2.conv_layers.5.bias:12
        mask_generator.conv_layers.2.res_out.weight:8x12x1
        mask_generator.conv_layers.2.res_out.bias:8
        mask_generator.conv_layers.2.skip_out.weight:8x12x1
        mask_generator.conv_layers.2.skip_out.bias:8
        mask_generator.conv_layers.3.conv_layers.0.weight:12x8x1
        mask_generator.conv_layers.3.conv_layers.0.bias:12
        mask_generator.conv_layers.3.conv_layers.1.weight:1
        mask_generator.conv_layers.3.conv_layers.2.weight:12
        mask_generator.conv_layers.3.conv_layers.2.bias:12
        mask_generator.conv_layers.3.conv_layers.3.weight:12x1x3
        mask_generator.conv_layers.3.conv_layers.3.bias:12
        mask_generator.conv_layers.3.conv_layers.4.weight:1
        mask_generator.conv_layers.3.conv_layers.5.weight:12
        mask_generator.conv_layers.3.conv_layers.5.bias:12
        mask_generator.conv_layers.3.skip_out.weight:8x12x1
        mask_generator.conv_layers.3.skip_out.bias:8 mask_generator.output_prelu.weight:1
        mask_generator.output_conv.weight:32x8x1 mask_generator.output_conv.bias:32
        decoder.weight:16x1x8
    """,
    "Conformer": """
        conformer_layers.0.ffn1.sequential.0.weight:8 conformer_layers.0.ffn1.sequential.0.bias:8
        conformer_layers.0.ffn1.sequential.1.weight:16x8
        conformer_layers.0.ffn1.sequential.1.bias:16
        conformer_layers.0.ffn1.sequential.4.weight:8x16
        conformer_layers.0.ffn1.sequential.4.bias:8
        conformer_layers.0.self_attn_layer_norm.weight:8
        conformer_layers.0.self_attn_layer_norm.bias:8
        conformer_layers.0.self_attn.in_proj_weight:24x8
        conformer_layers.0.self_attn.in_proj_bias:24
        conformer_layers.0.self_attn.out_proj.weight:8x8
        conformer_layers.0.self_attn.out_proj.bias:8
        conformer_layers.0.conv_module.layer_norm.weight:8
        conformer_layers.0.conv_module.layer_norm.bias:8
        conformer_layers.0.conv_module.sequential.0.weight:16x8x1
        conformer_layers.0.conv_module.sequential.0.bias:16
        conformer_layers.0.conv_module.sequential.2.weight:8x1x3
        conformer_layers.0.conv_module.sequential.2.bias:8
        conformer_layers.0.conv_module.sequential.3.weight:8
        conformer_layers.0.conv_module.sequential.3.bias:8
        conformer_layers.0.conv_module.sequential.3.running_mean:8
        conformer_layers.0.conv_module.sequential.3.running_var:8
        conformer_layers.0.conv_module.sequential.3.num_batches_tracked:-
        conformer_layers.0.conv_module.sequential.5.weight:8x8x1
        conformer_layers.0.conv_module.sequential.5.bias:8
        conformer_layers.0.ffn2.sequential.0.weight:8 conformer_layers.0.ffn2.sequential.0.bias:8
        conformer_layers.0.ffn2.sequential.1.weight:16x8
        conformer_layers.0.ffn2.sequential.1.bias:16
        conformer_layers.0.ffn2.sequential.4.weight:8x16
        conformer_layers.0.ffn2.sequential.4.bias:8 conformer_layers.0.final_layer_norm.weight:8
        conformer_layers.0.final_layer_norm.bias:8
    """,
    "Emformer": """
        emformer_layers.0.attention.emb_to_key_value.weight:16x8
        emformer_layers.0.attention.emb_to_key_value.bias:16
        emformer_layers.0.attention.emb_to_query.weight:8x8
        emformer_layers.0.attention.emb_to_query.bias:8
        emformer_layers.0.attention.out_proj.weight:8x8
        emformer_layers.0.attention.out_proj.bias:8 emformer_layers.0.pos_ff.0.weight:8
        emformer_layers.0.pos_ff.0.bias:8 emformer_layers.0.pos_ff.1.weight:16x8
        emformer_layers.0.pos_ff.1.bias:16 emformer_layers.0.pos_ff.4.weight:8x16
        emformer_layers.0.pos_ff.4.bias:8 emformer_layers.0.layer_norm_input.weight:8
        emformer_layers.0.layer_norm_input.bias:8 emformer_layers.0.layer_norm_output.weight:8
        emformer_layers.0.layer_norm_output.bias:8
    """,
    "WaveRNN": """
        upsample.resnet.melresnet_model.0.weight:5x7x5 upsample.resnet.melresnet_model.1.weight:5
        upsample.resnet.melresnet_model.1.bias:5 upsample.resnet.melresnet_model.1.running_mean:5
        upsample.resnet.melresnet_model.1.running_var:5
        upsample.resnet.melresnet_model.1.num_batches_tracked:-
        upsample.resnet.melresnet_model.3.resblock_model.0.weight:5x5x1
        upsample.resnet.melresnet_model.3.resblock_model.1.weight:5
        upsample.resnet.melresnet_model.3.resblock_model.1.bias:5
        upsample.resnet.melresnet_model.3.resblock_model.1.running_mean:5
        upsample.resnet.melresnet_model.3.resblock_model.1.running_var:5
        upsample.resnet.melresnet_model.3.resblock_model.1.num_batches_tracked:-
        upsample.resnet.melresnet_model.3.resblock_model.3.weight:5x5x1
        upsample.resnet.melresnet_model.3.resblock_model.4.weight:5
        upsample.resnet.melresnet_model.3.resblock_model.4.bias:5
        upsample.resnet.melresnet_model.3.resblock_model.4.running_mean:5
        upsample.resnet.melresnet_model.3.resblock_model.4.running_var:5
        upsample.resnet.melresnet_model.3.resblock_model.4.num_batches_tracked:-
        upsample.resnet.melresnet_model.4.weight:8x5x1 upsample.resnet.melresnet_model.4.bias:8
        upsample.upsample_layers.1.weight:1x1x1x5 upsample.upsample_layers.3.weight:1x1x1x7
        fc.weight:8x10 fc.bias:8 rnn1.weight_ih_l0:24x8 rnn1.weight_hh_l0:24x8 rnn1.bias_ih_l0:24
        rnn1.bias_hh_l0:24 rnn2.weight_ih_l0:24x10 rnn2.weight_hh_l0:24x8 rnn2.bias_ih_l0:24
        rnn2.bias_hh_l0:24 fc1.weight:6x10 fc1.bias:6 fc2.weight:6x8 fc2.bias:6 fc3.weight:16x6
        fc3.bias:16
    """,
    "Tacotron2": """
        embedding.weight:10x8 encoder.convolutions.0.0.weight:8x8x3
        encoder.convolutions.0.0.bias:8 encoder.convolutions.0.1.weight:8
        encoder.convolutions.0.1.bias:8 encoder.convolutions.0.1.running_mean:8
        encoder.convolutions.0.1.running_var:8 encoder.convolutions.0.1.num_batches_tracked:-
        encoder.lstm.weight_ih_l0:16x8 encoder.lstm.weight_hh_l0:16x4 encoder.lstm.bias_ih_l0:16
        encoder.lstm.bias_hh_l0:16 encoder.lstm.weight_ih_l0_reverse:16x8
        encoder.lstm.weight_hh_l0_reverse:16x4 encoder.lstm.bias_ih_l0_reverse:16
        encoder.lstm.bias_hh_l0_reverse:16 decoder.prenet.layers.0.weight:7x6
        decoder.prenet.layers.1.weight:7x7 decoder.attention_rnn.weight_ih:36x15
        decoder.attention_rnn.weight_hh:36x9 decoder.attention_rnn.bias_ih:36
        decoder.attention_rnn.bias_hh:36 decoder.attention_layer.query_layer.weight:5x9
        decoder.attention_layer.memory_layer.weight:5x8 decoder.attention_layer.v.weight:1x5
        decoder.attention_layer.location_layer.location_conv.weight:3x2x5
        decoder.attention_layer.location_layer.location_dense.weight:5x3
        decoder.decoder_rnn.weight_ih:40x17 decoder.decoder_rnn.weight_hh:40x10
        decoder.decoder_rnn.bias_ih:40 decoder.decoder_rnn.bias_hh:40
        decoder.linear_projection.weight:6x18 decoder.linear_projection.bias:6
        decoder.gate_layer.weight:1x18 decoder.gate_layer.bias:1
        postnet.convolutions.0.0.weight:6x6x3 postnet.convolutions.0.0.bias:6
        postnet.convolutions.0.1.weight:6 postnet.convolutions.0.1.bias:6
        postnet.convolutions.0.1.running_mean:6 postnet.convolutions.0.1.running_var:6
        postnet.convolutions.0.1.num_batches_tracked:- postnet.convolutions.1.0.weight:6x6x3
        postnet.convolutions.1.0.bias:6 postnet.convolutions.1.1.weight:6
        postnet.convolutions.1.1.bias:6 postnet.convolutions.1.1.running_mean:6
        postnet.convolutions.1.1.running_var:6 postnet.convolutions.1.1.num_batches_tracked:-
    """,
    "RNNT": """
        transcriber.input_linear.weight:4x6
        transcriber.transformer.emformer_layers.0.attention.emb_to_key_value.weight:16x8
        transcriber.transformer.emformer_layers.0.attention.emb_to_key_value.bias:16
        transcriber.transformer.emformer_layers.0.attention.emb_to_query.weight:8x8
        transcriber.transformer.emformer_layers.0.attention.emb_to_query.bias:8
        transcriber.transformer.emformer_layers.0.attention.out_proj.weight:8x8
        transcriber.transformer.emformer_layers.0.attention.out_proj.bias:8
        transcriber.transformer.emformer_layers.0.pos_ff.0.weight:8
        transcriber.transformer.emformer_layers.0.pos_ff.0.bias:8
        transcriber.transformer.emformer_layers.0.pos_ff.1.weight:8x8
        transcriber.transformer.emformer_layers.0.pos_ff.1.bias:8
        transcriber.transformer.emformer_layers.0.pos_ff.4.weight:8x8
        transcriber.transformer.emformer_layers.0.pos_ff.4.bias:8
        transcriber.transformer.emformer_layers.0.layer_norm_input.weight:8
        transcriber.transformer.emformer_layers.0.layer_norm_input.bias:8
        transcriber.transformer.emformer_layers.0.layer_norm_output.weight:8
        transcriber.transformer.emformer_layers.0.layer_norm_output.bias:8
        transcriber.output_linear.weight:8x8 transcriber.output_linear.bias:8
        transcriber.layer_norm.weight:8 transcriber.layer_norm.bias:8
        predictor.embedding.weight:5x6 predictor.input_layer_norm.weight:6
        predictor.input_layer_norm.bias:6 predictor.lstm_layers.0.x2g.weight:24x6
        predictor.lstm_layers.0.p2g.weight:24x6 predictor.lstm_layers.0.c_norm.weight:6
        predictor.lstm_layers.0.c_norm.bias:6 predictor.lstm_layers.0.g_norm.weight:24
        predictor.lstm_layers.0.g_norm.bias:24 predictor.linear.weight:8x6 predictor.linear.bias:8
        predictor.output_layer_norm.weight:8 predictor.output_layer_norm.bias:8
        joiner.linear.weight:5x8 joiner.linear.bias:5
    """,
}


def _facts(name):
    out = []
    for tok in STATE_DICTS[name].split():
        key, shape = tok.rsplit(":", 1)
        out.append((key, () if shape == "-" else tuple(int(d) for d in shape.split("x"))))
    return out


def _build(name):
    if name == "RNNT":
        return models.emformer_rnnt_model(**RNNT_CONFIG)
    cls, kw = CONFIGS[name]
    return getattr(models, cls)(**kw)


def _rand(*shape, seed=0, dtype=fiamma.float64):
    return fiamma.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=dtype)


@pytest.mark.parametrize("name", list(STATE_DICTS))
def test_state_dict_keys_and_shapes_match_torchaudio(name):
    got = [(k, tuple(v.shape)) for k, v in _build(name).state_dict().items()]
    assert got == _facts(name)


@pytest.mark.parametrize("factory, n_entries, n_float", [
    (lambda: models.conv_tasnet_base(), 343, 4984881),
    (lambda: models.Tacotron2(), 84, 28200481),
    (lambda: models.WaveRNN([5, 5, 8], 256, 200), 147, 4410279),
])
def test_full_size_models_have_torchaudios_sizes(factory, n_entries, n_float):
    sd = factory().state_dict()
    assert len(sd) == n_entries
    assert sum(v.numel() for v in sd.values() if v.is_floating_point()) == n_float


def test_emformer_rnnt_base_size_and_defaults():
    m = models.emformer_rnnt_base(4097)
    sd = m.state_dict()
    assert len(sd) == 352
    assert sum(v.numel() for v in sd.values() if v.is_floating_point()) == 76738049
    emf = m.transcriber.transformer
    assert (emf.segment_length, emf.right_context_length, emf.left_context_length) == (4, 1, 30)
    assert isinstance(emf.emformer_layers[0].pos_ff[2], nn.GELU)
    assert emf.emformer_layers[0].attention.tanh_on_mem


def test_load_state_dict_round_trip_gives_identical_outputs():
    a, b = _build("ConvTasNet"), _build("ConvTasNet")
    b.load_state_dict(a.state_dict())
    x = _rand(2, 1, 40, dtype=fiamma.float32)
    a.eval()
    b.eval()
    assert np.array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_forward_shapes():
    f32 = fiamma.float32
    w = models.Wav2Letter(num_classes=5)
    out = w(_rand(2, 1, 3200, dtype=f32))
    assert tuple(out.shape) == (2, 5, 11)
    np.testing.assert_allclose(out.exp().sum(1).detach().numpy(), 1, rtol=1e-5)
    d = _build("DeepSpeech")
    assert tuple(d(_rand(3, 1, 9, 7, dtype=f32)).shape) == (3, 9, 5)
    c = _build("ConvTasNet")
    for n in (37, 40, 41):      # frames not a multiple of the stride are padded and cut back
        assert tuple(c(_rand(2, 1, n, dtype=f32)).shape) == (2, 2, n)
    conf = _build("Conformer")
    y, lengths = conf(_rand(3, 6, 8, dtype=f32), fiamma.tensor([6, 4, 2]))
    assert tuple(y.shape) == (3, 6, 8) and lengths.tolist() == [6, 4, 2]
    e = models.Emformer(8, 2, 16, 2, segment_length=4, right_context_length=2,
                        left_context_length=3, max_memory_size=2)
    y, lengths = e(_rand(2, 13, 8, dtype=f32), fiamma.tensor([11, 7]))
    assert tuple(y.shape) == (2, 11, 8) and lengths.tolist() == [11, 7]
    r = _build("RNNT")
    out, sl, tl, state = r(_rand(2, 18, 6, dtype=f32), fiamma.tensor([18, 14]),
                           fiamma.tensor([[0, 1, 2], [0, 3, 3]]), fiamma.tensor([3, 2]))
    assert tuple(out.shape) == (2, 8, 3, 5)
    assert sl.tolist() == [9, 7] and tl.tolist() == [3, 2]   # lengths only time-reduced
    assert len(state) == 1 and [tuple(s.shape) for s in state[0]] == [(2, 6), (2, 6)]
    wr = _build("WaveRNN")
    assert tuple(wr(_rand(2, 1, 30, dtype=f32), _rand(2, 1, 7, 9, dtype=f32)).shape) == \
        (2, 1, 30, 16)


def test_conformer_ignores_padded_frames():
    m = _build("Conformer").double().eval()
    x = _rand(2, 6, 8)
    y, _ = m(x, fiamma.tensor([6, 4]))
    x2 = x.clone()
    x2[1, 4:] = 100.0
    y2, _ = m(x2, fiamma.tensor([6, 4]))
    # the depthwise convolution sees padded frames next to valid ones (as in torchaudio), so
    # only frames more than kernel_size // 2 away from the padding are unaffected
    np.testing.assert_allclose(y2[1, :3].detach().numpy(), y[1, :3].detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(y2[0].detach().numpy(), y[0].detach().numpy())


def test_emformer_streaming_state_layout():
    e = models.Emformer(8, 2, 16, 2, segment_length=4, right_context_length=2,
                        left_context_length=3, max_memory_size=2).eval()
    states = None
    for step in range(3):
        y, lengths, states = e.infer(_rand(2, 6, 8, seed=step, dtype=fiamma.float32),
                                     fiamma.tensor([6, 6]), states)
        assert tuple(y.shape) == (2, 4, 8) and lengths.tolist() == [4, 4]
    assert len(states) == 2
    mem, keys, vals, past = states[0]
    assert tuple(mem.shape) == (2, 2, 8) and tuple(keys.shape) == (3, 2, 8)
    assert tuple(vals.shape) == (3, 2, 8)
    assert past.dtype == fiamma.int32 and past.tolist() == [[12, 12]]


def test_same_seed_same_model_and_deterministic_eval():
    outs = []
    for _ in range(2):
        fiamma.manual_seed(3)
        m = _build("Emformer").eval()
        outs.append(m(_rand(2, 9, 8, dtype=fiamma.float32), fiamma.tensor([9, 6]))[0])
    assert np.array_equal(outs[0].detach().numpy(), outs[1].detach().numpy())
    fiamma.manual_seed(3)
    c = _build("ConvTasNet").eval()
    x = _rand(1, 1, 50, dtype=fiamma.float32)
    assert np.array_equal(c(x).detach().numpy(), c(x).detach().numpy())


def _numeric_param_grads(model, loss_fn, n_params=4, n_entries=2, eps=1e-6, rtol=1e-4):
    model.zero_grad()
    loss_fn().backward()
    rng = np.random.default_rng(0)
    params = [(k, p) for k, p in model.named_parameters() if p.grad is not None]
    picks = [params[i] for i in rng.choice(len(params), min(n_params, len(params)),
                                           replace=False)]
    for name, p in picks:
        flat = p.data.view(-1)
        for j in rng.choice(flat.numel(), min(n_entries, flat.numel()), replace=False):
            j = int(j)
            old = float(flat[j])
            with fiamma.no_grad():
                flat[j] = old + eps
                up = float(loss_fn())
                flat[j] = old - eps
                down = float(loss_fn())
                flat[j] = old
            num = (up - down) / (2 * eps)
            ana = float(p.grad.view(-1)[j])
            assert abs(num - ana) <= rtol * max(1.0, abs(num)), (name, j, num, ana)


@pytest.mark.parametrize("name", ["DeepSpeech", "ConvTasNet", "Conformer", "Emformer",
                                  "WaveRNN", "RNNT", "Tacotron2"])
def test_gradients_match_finite_differences(name):
    fiamma.manual_seed(0)
    m = _build(name).double().eval()
    if name == "DeepSpeech":
        inputs = [_rand(2, 1, 4, 7)]
        fn = m
    elif name == "ConvTasNet":
        inputs = [_rand(1, 1, 21)]
        fn = m
    elif name == "Conformer":
        def fn(x):
            return m(x, fiamma.tensor([5, 3]))[0]
        inputs = [_rand(2, 5, 8)]
    elif name == "Emformer":
        def fn(x):
            return m(x, fiamma.tensor([9, 6]))[0]
        inputs = [_rand(2, 9, 8)]
    elif name == "WaveRNN":
        fn = m
        inputs = [_rand(1, 1, 12), _rand(1, 1, 7, 6)]
    elif name == "RNNT":
        def fn(x):
            return m(x, fiamma.tensor([10, 8]), fiamma.tensor([[0, 1], [0, 3]]),
                     fiamma.tensor([2, 1]))[0]
        inputs = [_rand(2, 10, 6)]
    else:
        tokens, tl = fiamma.tensor([[1, 2, 3], [3, 4, 0]]), fiamma.tensor([3, 2])
        ml = fiamma.tensor([4, 3])

        def fn(mel):
            fiamma.manual_seed(1)      # the pre-net's dropout is always on
            return m(tokens, tl, mel, ml)[1]
        inputs = [_rand(2, 6, 4)]
    inputs = [x.requires_grad_() for x in inputs]
    assert gradcheck(fn, tuple(inputs), eps=1e-6, atol=1e-6, rtol=1e-4)
    _numeric_param_grads(m, lambda: (fn(*[x.detach() for x in inputs]) ** 2).sum())


def test_conv_tasnet_training_reduces_the_loss():
    fiamma.manual_seed(0)
    m = models.ConvTasNet(num_sources=2, enc_kernel_size=8, enc_num_feats=16, msk_num_feats=8,
                          msk_num_hidden_feats=16, msk_num_layers=2, msk_num_stacks=1)
    t = np.arange(400) / 400
    s1 = np.sin(2 * np.pi * 9 * t)
    s2 = np.sign(np.sin(2 * np.pi * 2 * t)) * 0.5
    target = fiamma.tensor(np.stack([s1, s2])[None], dtype=fiamma.float32)
    mix = target.sum(1, keepdim=True)
    opt = fiamma.optim.Adam(m.parameters(), lr=1e-2) if hasattr(fiamma, "optim") else None
    if opt is None:
        pytest.skip("fiamma.optim is not installed")
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = ((m(mix) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


def test_wav2letter_ctc_training_reduces_the_loss():
    optim = pytest.importorskip("fiamma.optim")
    fiamma.manual_seed(0)
    m = models.Wav2Letter(num_classes=4, input_type="mfcc", num_features=5)
    x = _rand(2, 5, 30, dtype=fiamma.float32)
    targets = fiamma.tensor([[1, 2, 3], [3, 1, 1]])
    opt = optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        logp = m(x).permute(2, 0, 1)        # (time, batch, classes)
        loss = nn.functional.ctc_loss(logp, targets, fiamma.tensor([logp.shape[0]] * 2),
                                      fiamma.tensor([3, 3]))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_rnnt_training_with_rnnt_loss_reduces_the_loss():
    optim = pytest.importorskip("fiamma.optim")
    from fiamma.audio.functional import rnnt_loss

    fiamma.manual_seed(0)
    m = _build("RNNT")
    sources = _rand(2, 18, 6, dtype=fiamma.float32)
    targets = fiamma.tensor([[1, 2, 3], [3, 1, 0]], dtype=fiamma.int32)
    target_lengths = fiamma.tensor([3, 2], dtype=fiamma.int32)
    # the predictor sees blank (4) then the targets
    pred_in = fiamma.cat([fiamma.full((2, 1), 4, dtype=fiamma.int64), targets.long()], 1)
    opt = optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        logits, src_len, _, _ = m(sources, fiamma.tensor([18, 14]), pred_in,
                                  target_lengths + 1)
        # the transcriber's output frames: lengths after time reduction, less the right context
        frames = (src_len - 1).clamp(max=logits.shape[1]).to(fiamma.int32)
        loss = rnnt_loss(logits, targets, frames, target_lengths, blank=4)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.8 * losses[0]


def test_tacotron2_teacher_forced_training_reduces_the_loss():
    optim = pytest.importorskip("fiamma.optim")
    fiamma.manual_seed(0)
    cls, kw = CONFIGS["Tacotron2"]
    # evaluation mode: no encoder/post-net dropout (the pre-net's stays on, as in torchaudio)
    m = models.Tacotron2(**dict(kw, decoder_dropout=0.0, attention_dropout=0.0)).eval()
    tokens, token_lengths = fiamma.tensor([[1, 2, 3, 4], [5, 6, 7, 0]]), fiamma.tensor([4, 3])
    mel = _rand(2, 6, 8, dtype=fiamma.float32).tanh()
    stop = fiamma.zeros(2, 8)
    stop[:, -1] = 1.0
    opt = optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for step in range(12):
        fiamma.manual_seed(step)
        opt.zero_grad()
        out, post, gate, _ = m(tokens, token_lengths, mel, fiamma.tensor([8, 8]))
        loss = (((out - mel) ** 2).mean() + ((post - mel) ** 2).mean()
                + nn.functional.binary_cross_entropy_with_logits(gate, stop))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0]


@pytest.fixture(scope="module")
def rnnt():
    fiamma.manual_seed(0)
    return _build("RNNT").eval()


@pytest.mark.parametrize("beam_width", [1, 3])
def test_beam_search_hypotheses_are_sorted_and_bounded(rnnt, beam_width):
    search = models.RNNTBeamSearch(rnnt, blank=4)
    with fiamma.no_grad():
        hypos = search(_rand(20, 6, dtype=fiamma.float32), fiamma.tensor(20), beam_width)
    assert 1 <= len(hypos) <= beam_width
    keys = [h[3] / (len(h[0]) + 1) for h in hypos]
    assert keys == sorted(keys, reverse=True)
    for tokens, pred_out, state, score in hypos:
        assert tokens[0] == 4 and all(0 <= t < 4 for t in tokens[1:])
        assert tuple(pred_out.shape) == (1, 8) and isinstance(score, float) and score <= 0
        assert [tuple(s.shape) for s in state[0]] == [(1, 6), (1, 6)]
    assert len({str(h[0]) for h in hypos}) == len(hypos)


def test_beam_search_wider_beam_finds_no_worse_best_and_streams(rnnt):
    x = _rand(20, 6, dtype=fiamma.float32)
    with fiamma.no_grad():
        one = models.RNNTBeamSearch(rnnt, blank=4)(x, fiamma.tensor([20]), 1)
        search = models.RNNTBeamSearch(rnnt, blank=4, hypo_sort_key=lambda h: h[3])
        four = search(x, fiamma.tensor([20]), 4)
        assert four[0][3] >= one[0][3] - 1e-5
        state, hyp = None, None
        for s in range(4):
            hyp, state = search.infer(x[4 * s:4 * s + 6], fiamma.tensor(6), 2, state, hyp)
            assert [h[3] for h in hyp] == sorted((h[3] for h in hyp), reverse=True)
    assert len(state) == 1 and len(state[0]) == 4


def test_tacotron2_infer_stops_at_the_gate_and_warns_at_max_steps():
    fiamma.manual_seed(0)
    cls, kw = CONFIGS["Tacotron2"]
    tokens = fiamma.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    m = models.Tacotron2(**dict(kw, gate_threshold=1.0)).eval()
    with pytest.warns(UserWarning, match="max decoder steps"):
        mel, lengths, align = m.infer(tokens, fiamma.tensor([4, 2]))
    assert tuple(mel.shape) == (2, 6, 7) and lengths.dtype == fiamma.int32
    assert lengths.tolist() == [7, 7] and tuple(align.shape) == (2, 7, 4)
    np.testing.assert_allclose(align.sum(-1).detach().numpy(), 1, rtol=1e-5)
    assert float(align[1, :, 2:].abs().max()) == 0.0          # padded tokens get no attention
    m = models.Tacotron2(**dict(kw, gate_threshold=0.0)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mel, lengths, align = m.infer(tokens)
    assert lengths.tolist() == [1, 1] and tuple(mel.shape) == (2, 6, 1)


def test_tacotron2_mask_padding_masks_and_still_trains():
    fiamma.manual_seed(0)
    cls, kw = CONFIGS["Tacotron2"]
    m = models.Tacotron2(**dict(kw, mask_padding=True))
    mel = _rand(2, 6, 5, dtype=fiamma.float32)
    out, post, gate, align = m(fiamma.tensor([[1, 2, 3], [4, 5, 0]]), fiamma.tensor([3, 2]),
                               mel, fiamma.tensor([5, 3]))
    assert float(out[1, :, 3:].abs().max()) == 0 and float(post[1, :, 3:].abs().max()) == 0
    assert gate[1, 3:].tolist() == [1000.0, 1000.0]
    (post.sum() + out.sum()).backward()       # torchaudio's in-place masking cannot do this
    assert m.embedding.weight.grad is not None


def test_wavernn_infer_samples_in_range():
    fiamma.manual_seed(0)
    m = _build("WaveRNN").eval()
    with fiamma.no_grad():
        wav, lengths = m.infer(_rand(2, 7, 4, dtype=fiamma.float32), fiamma.tensor([4, 3]))
    assert tuple(wav.shape) == (2, 1, 24) and lengths.tolist() == [24, 18]
    levels = (wav.numpy() + 1) * 15 / 2
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-4)
    assert wav.numpy().min() >= -1 and wav.numpy().max() <= 1


@pytest.mark.parametrize("call, match", [
    (lambda: models.Wav2Letter()(fiamma.zeros(2, 3, 800)),
     r"Wav2Letter: expected an input \(batch, num_features, time\) with size 1 at dim 1, "
     r"got shape \(2, 3, 800\)"),
    (lambda: models.Wav2Letter()(fiamma.zeros(800)), r"Wav2Letter: expected a 3-D .* 1-D"),
    (lambda: _build("ConvTasNet")(fiamma.zeros(2, 2, 80)),
     r"ConvTasNet: .*channel=1.* got shape \(2, 2, 80\)"),
    (lambda: _build("ConvTasNet")(fiamma.zeros(80)), r"ConvTasNet: expected a 3-D .*1-D"),
    (lambda: _build("DeepSpeech")(fiamma.zeros(2, 9, 7)), r"DeepSpeech: expected a 4-D .*3-D"),
    (lambda: _build("DeepSpeech")(fiamma.zeros(2, 1, 9, 8)),
     r"DeepSpeech: .*size 7 at dim 3, got shape \(2, 1, 9, 8\)"),
    (lambda: _build("Conformer")(fiamma.zeros(2, 5, 9), fiamma.tensor([5, 5])),
     r"Conformer: .*size 8 at dim 2"),
    (lambda: _build("Emformer")(fiamma.zeros(5, 8), fiamma.tensor([5])),
     r"Emformer: expected a 3-D .*2-D"),
    (lambda: _build("Emformer").infer(fiamma.zeros(1, 5, 8), fiamma.tensor([5])),
     r"expected size of 4 for dimension 1 of input, but got 5"),
    (lambda: _build("WaveRNN")(fiamma.zeros(1, 2, 30), fiamma.zeros(1, 1, 7, 9)),
     r"WaveRNN: .*waveform.*size 1 at dim 1"),
    (lambda: _build("WaveRNN")(fiamma.zeros(1, 1, 31), fiamma.zeros(1, 1, 7, 9)),
     r"WaveRNN: the waveform has 31 samples but the specgram upsamples to 30"),
    (lambda: _build("Tacotron2").infer(fiamma.zeros(2, 3)), r"Tacotron2.infer: tokens must be"),
    (lambda: models.RNNTBeamSearch(_build("RNNT"), 4)(fiamma.zeros(2, 5, 6),
                                                      fiamma.tensor(5), 2),
     r"RNNTBeamSearch: input must be of shape \(T, D\) or \(1, T, D\), got \(2, 5, 6\)"),
    (lambda: models.RNNTBeamSearch(_build("RNNT"), 4)(fiamma.zeros(5, 6),
                                                      fiamma.tensor([5, 5]), 2),
     r"RNNTBeamSearch: length must be of shape"),
    (lambda: _build("RNNT")(fiamma.zeros(1, 8, 5), fiamma.tensor([8]),
                            fiamma.tensor([[0]]), fiamma.tensor([1])),
     r"RNNT transcriber: .*size 6 at dim 2"),
])
def test_bad_input_errors_name_the_model(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("make, match", [
    (lambda: models.Wav2Letter(input_type="spectrogram"), "input_type"),
    (lambda: models.ConvTasNet(msk_activate="tanh"), "Unsupported activation tanh"),
    (lambda: models.Conformer(8, 2, 16, 1, depthwise_conv_kernel_size=4), "must be odd"),
    (lambda: models.Emformer(9, 2, 16, 1, 4), r"input_dim \(9\) is not a multiple of"),
    (lambda: models.Emformer(8, 2, 16, 1, 4, weight_init_scale_strategy="x"),
     "weight_init_scale_strategy"),
    (lambda: models.WaveRNN([2, 3], 16, 5), "total_scale == hop_length"),
])
def test_bad_configuration_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_public_names():
    for name in ["Wav2Letter", "DeepSpeech", "ConvTasNet", "conv_tasnet_base", "Conformer",
                 "Emformer", "RNNT", "emformer_rnnt_base", "emformer_rnnt_model", "Hypothesis",
                 "RNNTBeamSearch", "WaveRNN", "Tacotron2", "HDemucs", "hdemucs_low",
                 "hdemucs_medium", "hdemucs_high"]:
        assert name in models.__all__ and hasattr(models, name)
    assert models.conv_tasnet_base().mask_generator.mask_activate.__class__ is nn.ReLU
    assert math.isclose(models.Tacotron2().decoder.gate_threshold, 0.5)


HDEMUCS_TINY = dict(sources=["a", "b"], audio_channels=1, channels=4, nfft=64, depth=4,
                    norm_starts=2, dconv_attn=2, dconv_lstm=3, norm_groups=2)


def _listing_digest(sd):
    import hashlib

    text = "\n".join(f"{k} {tuple(v.shape)}" for k, v in sd.items())
    return hashlib.sha256(text.encode()).hexdigest()


def test_hdemucs_state_dict_matches_torchaudio():
    sd = models.HDemucs(**HDEMUCS_TINY).state_dict()
    # facts from torchaudio 2.11: the number of entries, a digest of the "key shape" listing
    # in order, and a sample of entries
    assert len(sd) == 227
    assert _listing_digest(sd) == \
        "4aa01afd33eb48e3933c38f14ad4277b77d08b5c3f3d7f568987616f7728e896"
    sample = {
        "freq_encoder.0.dconv.layers.0.6.scale": (4,),
        "freq_encoder.2.dconv.layers.0.3.query_decay.bias": (16,),
        "freq_encoder.3.dconv.layers.0.3.lstm.weight_hh_l1_reverse": (32, 8),
        "freq_encoder.3.dconv.layers.1.4.query_decay.bias": (16,),
        "freq_decoder.0.conv_tr.weight": (32, 16, 4),
        "time_encoder.1.conv.weight": (8, 4, 8),
        "freq_emb.embedding.weight": (8, 4),
    }
    for k, shape in sample.items():
        assert tuple(sd[k].shape) == shape, k


@pytest.mark.parametrize("factory, n_entries, n_float, digest", [
    ("hdemucs_low", 277, 20040296,
     "50901ae3a529ac9dd02bf46dba9abad4d273d1be555aec34a8dcec98f6736baf"),
    ("hdemucs_medium", 397, 78908488,
     "8b415c225094ae4003f184def0329dcebb920ac9bed259cedefe2c3c21862506"),
    ("hdemucs_high", 397, 83639368,
     "92300dfd4a93103ebac10901ec6a2239757ab2f3d640942e17416cab7c1364bc"),
])
def test_hdemucs_factories_match_torchaudio(factory, n_entries, n_float, digest):
    sd = getattr(models, factory)(["drums", "bass", "other", "vocals"]).state_dict()
    assert len(sd) == n_entries
    assert sum(v.numel() for v in sd.values() if v.is_floating_point()) == n_float
    assert _listing_digest(sd) == digest


def test_hdemucs_forward_shape_and_gradients():
    fiamma.manual_seed(0)
    m = models.HDemucs(**HDEMUCS_TINY).double().eval()
    x = _rand(1, 1, 70).requires_grad_()
    y = m(x)
    assert tuple(y.shape) == (1, 2, 1, 70)
    # input gradient along random directions against central differences (a full gradcheck
    # of this model takes ~15 s)
    w = _rand(1, 2, 1, 70, seed=1)
    (y * w).sum().backward()
    for seed in (2, 3):
        v = _rand(1, 1, 70, seed=seed)
        with fiamma.no_grad():
            up = float((m(x + 1e-6 * v) * w).sum())
            down = float((m(x - 1e-6 * v) * w).sum())
        num, ana = (up - down) / 2e-6, float((x.grad * v).sum())
        assert abs(num - ana) <= 1e-5 * max(1.0, abs(num)), (num, ana)
    _numeric_param_grads(m, lambda: (m(x.detach()) ** 2).sum(), n_params=5, n_entries=1)


def test_hdemucs_long_input_frames_its_lstm():
    # more than 200 spectrogram frames at the LSTM layers: the BLSTM runs in windows
    blstm = models._hdemucs._BLSTM(3, layers=2, skip=True).double()
    x = _rand(2, 3, 450)
    y = blstm(x)
    assert tuple(y.shape) == (2, 3, 450)
    # the first window's centre is the plain LSTM of the first 200 steps
    plain = blstm.linear(blstm.lstm(x[..., :200].permute(2, 0, 1))[0]).permute(1, 2, 0)
    np.testing.assert_allclose(y[..., :150].detach().numpy(),
                               (plain[..., :150] + x[..., :150]).detach().numpy(), rtol=1e-12)


def test_hdemucs_bad_input():
    m = models.HDemucs(**HDEMUCS_TINY)
    with pytest.raises(ValueError, match=r"HDemucs: .*size 1 at dim 1, got shape \(1, 2, 64\)"):
        m(fiamma.zeros(1, 2, 64))
    with pytest.raises(ValueError, match=r"HDemucs: expected a 3-D .*2-D"):
        m(fiamma.zeros(1, 64))
