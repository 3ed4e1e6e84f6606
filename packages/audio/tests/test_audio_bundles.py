"""torchaudio.pipelines' source separation, RNN-T and Tacotron2 TTS bundles: names and facts
(torchaudio 2.11's), local-weight routes and offline errors on small checkpoints the tests write,
the feature extractors, token processor, text processors and vocoders, and errors for bad input
or missing optional packages (sentencepiece, DeepPhonemizer)."""

import dataclasses
import functools
import json
import math
import os
import sys

import numpy as np
import pytest

import fiamma
from fiamma.audio import models, pipelines, transforms as T
from fiamma.audio.pipelines import _assets, _rnnt, _tts

TORCHAUDIO_PIPELINES = [  # torchaudio 2.11's torchaudio.pipelines.__all__
    "Wav2Vec2Bundle", "Wav2Vec2ASRBundle", "Wav2Vec2FABundle", "WAV2VEC2_BASE", "WAV2VEC2_LARGE",
    "WAV2VEC2_LARGE_LV60K", "WAV2VEC2_ASR_BASE_10M", "WAV2VEC2_ASR_BASE_100H",
    "WAV2VEC2_ASR_BASE_960H", "WAV2VEC2_ASR_LARGE_10M", "WAV2VEC2_ASR_LARGE_100H",
    "WAV2VEC2_ASR_LARGE_960H", "WAV2VEC2_ASR_LARGE_LV60K_10M", "WAV2VEC2_ASR_LARGE_LV60K_100H",
    "WAV2VEC2_ASR_LARGE_LV60K_960H", "WAV2VEC2_XLSR53", "WAV2VEC2_XLSR_300M", "WAV2VEC2_XLSR_1B",
    "WAV2VEC2_XLSR_2B", "VOXPOPULI_ASR_BASE_10K_EN", "VOXPOPULI_ASR_BASE_10K_ES",
    "VOXPOPULI_ASR_BASE_10K_DE", "VOXPOPULI_ASR_BASE_10K_FR", "VOXPOPULI_ASR_BASE_10K_IT",
    "HUBERT_BASE", "HUBERT_LARGE", "HUBERT_XLARGE", "HUBERT_ASR_LARGE", "HUBERT_ASR_XLARGE",
    "MMS_FA", "WAVLM_BASE", "WAVLM_BASE_PLUS", "WAVLM_LARGE", "Tacotron2TTSBundle",
    "TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH", "TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH",
    "TACOTRON2_WAVERNN_CHAR_LJSPEECH", "TACOTRON2_WAVERNN_PHONE_LJSPEECH", "RNNTBundle",
    "EMFORMER_RNNT_BASE_LIBRISPEECH", "SourceSeparationBundle", "CONVTASNET_BASE_LIBRI2MIX",
    "HDEMUCS_HIGH_MUSDB_PLUS", "HDEMUCS_HIGH_MUSDB", "SQUIM_OBJECTIVE", "SQUIM_SUBJECTIVE",
    "SquimObjectiveBundle", "SquimSubjectiveBundle"]


def test_all_torchaudio_pipeline_names():
    assert sorted(pipelines.__all__) == sorted(TORCHAUDIO_PIPELINES)
    for name in TORCHAUDIO_PIPELINES:
        assert getattr(pipelines, name) is not None


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k].numpy(), sb[k].numpy())


# ---- source separation ------------------------------------------------------------------------


def test_source_separation_facts():
    c = pipelines.CONVTASNET_BASE_LIBRI2MIX
    assert isinstance(c, pipelines.SourceSeparationBundle) and c.sample_rate == 8000
    assert c._model_path == "models/conv_tasnet_base_libri2mix.pt"
    assert c.url == "https://download.pytorch.org/torchaudio/models/conv_tasnet_base_libri2mix.pt"
    assert c._model_factory_func.keywords == {"num_sources": 2}
    plus, only = pipelines.HDEMUCS_HIGH_MUSDB_PLUS, pipelines.HDEMUCS_HIGH_MUSDB
    assert plus.sample_rate == only.sample_rate == 44100
    assert plus.url.endswith("/torchaudio/models/hdemucs_high_trained.pt")
    assert only.url.endswith("/torchaudio/models/hdemucs_high_musdbhq_only.pt")
    for b in (plus, only):
        assert b._model_factory_func.func is models.hdemucs_high
        assert b._model_factory_func.keywords == {"sources": ["drums", "bass", "other", "vocals"]}


def test_convtasnet_get_model_routes(tmp_path, monkeypatch):
    fiamma.manual_seed(0)
    src = models.conv_tasnet_base(num_sources=2).eval()
    (tmp_path / "d").mkdir()
    path = tmp_path / "d" / "conv_tasnet_base_libri2mix.pt"
    fiamma.save(src.state_dict(), str(path))
    bundle = pipelines.CONVTASNET_BASE_LIBRI2MIX
    model = bundle.get_model(path=str(path))
    assert isinstance(model, models.ConvTasNet) and not model.training
    same_weights(model, src)
    mix = fiamma.randn(1, 1, 800)
    with fiamma.no_grad():
        np.testing.assert_array_equal(model(mix).numpy(), src(mix).numpy())
    same_weights(bundle.get_model(dl_kwargs={"model_dir": str(tmp_path / "d"),
                                             "progress": False}), src)
    # torchaudio's own cache layout under the fiamma hub directory
    home = tmp_path / "home"
    (home / "hub" / "torchaudio" / "models").mkdir(parents=True)
    os.symlink(path, home / "hub" / "torchaudio" / "models" / "conv_tasnet_base_libri2mix.pt")
    monkeypatch.setenv("FIAMMA_HOME", str(home))
    monkeypatch.setattr(fiamma.hub, "_hub_dir", None)
    same_weights(bundle.get_model(), src)


def test_hdemucs_bundle_loads_its_factory(tmp_path):
    small = functools.partial(models.hdemucs_low, sources=["drums", "bass", "other", "vocals"])
    bundle = dataclasses.replace(pipelines.HDEMUCS_HIGH_MUSDB, _model_factory_func=small)
    fiamma.manual_seed(1)
    src = small().eval()
    path = tmp_path / "h.pt"
    fiamma.save(src.state_dict(), str(path))
    model = bundle.get_model(path=str(path))
    assert isinstance(model, models.HDemucs) and model.sources == src.sources
    same_weights(model, src)


def test_separation_offline_error(tmp_path, monkeypatch):
    monkeypatch.setattr(_assets, "BASE_URL", "https://127.0.0.1:9/")
    with pytest.raises(OSError) as info:
        pipelines.HDEMUCS_HIGH_MUSDB_PLUS.get_model(dl_kwargs={"model_dir": str(tmp_path),
                                                               "progress": False})
    msg = str(info.value)
    assert msg.startswith("HDEMUCS_HIGH_MUSDB_PLUS.get_model: ")
    assert "https://127.0.0.1:9/models/hdemucs_high_trained.pt" in msg
    assert os.path.join(str(tmp_path), "hdemucs_high_trained.pt") in msg and "path=" in msg


# ---- RNN-T ------------------------------------------------------------------------------------


def test_rnnt_bundle_facts():
    b = pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH
    assert isinstance(b, pipelines.RNNTBundle)
    assert (b.sample_rate, b.n_fft, b.n_mels, b.hop_length, b.segment_length,
            b.right_context_length) == (16000, 400, 80, 160, 16, 4)
    assert b._blank == 4096 and b._right_padding == 4
    assert b._rnnt_factory_func.func is models.emformer_rnnt_base
    assert b._rnnt_factory_func.keywords == {"num_symbols": 4097}
    assert b.url == ("https://download.pytorch.org/torchaudio/models/"
                     "emformer_rnnt_base_librispeech.pt")
    assert b._global_stats_path == "pipeline-assets/global_stats_rnnt_librispeech.json"
    assert b._sp_model_path == "pipeline-assets/spm_bpe_4096_librispeech.model"


def test_piecewise_linear_log_is_torchaudios_two_pass_mapping():
    x = fiamma.tensor([0.5, 1.0, math.e, 3.0, 10.0, 15.0, 15.2, 100.0], dtype=fiamma.float64)
    # values from torchaudio 2.11's _piecewise_linear_log: log(x)/e between e and e^e
    expected = [0.18393972058572117, 0.36787944117144233, 1.0, 0.4041568748193035,
                0.8470737172603432, 0.9962359946456931, 2.7212954278522306, 4.605170185988092]
    np.testing.assert_allclose(_rnnt._piecewise_linear_log(x).numpy(), expected, rtol=1e-14)
    assert abs(_rnnt._GAIN - 1073676289.0000038) < 1e-3          # 32767 ** 2


@pytest.fixture
def stats_file(tmp_path):
    rng = np.random.default_rng(0)
    stats = {"mean": (rng.standard_normal(80) + 8).tolist(),
             "invstddev": (rng.random(80) + 0.2).tolist()}
    path = tmp_path / "global_stats_rnnt_librispeech.json"
    path.write_text(json.dumps(stats))
    return str(path), stats


def test_rnnt_feature_extractors(stats_file):
    path, stats = stats_file
    b = pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH
    wave = 0.1 * fiamma.randn(8000)
    feats, length = b.get_feature_extractor(path=path)(wave)
    frames = 8000 // 160 + 1
    assert feats.shape == (frames + 4, 80) and length.tolist() == [frames + 4]
    assert (feats[-4:] == 0).all()                          # right padding
    mel = T.MelSpectrogram(sample_rate=16000, n_fft=400, n_mels=80, hop_length=160)(wave)
    x = mel.t().numpy().astype(np.float64) * 32767.0 ** 2
    y = np.where(x > math.e, np.log(np.maximum(x, math.e)), x)
    y = np.where(y <= math.e, y / math.e, y)
    ref = (y - np.array(stats["mean"])) * np.array(stats["invstddev"])
    np.testing.assert_allclose(feats[:frames].numpy(), ref, rtol=1e-4, atol=1e-4)
    # streaming: one segment of segment_length + right_context_length frames' samples
    seg = wave[:(16 + 4) * 160]
    sfeats, slen = b.get_streaming_feature_extractor(path=path)(seg)
    assert sfeats.shape == (21, 80) and slen.tolist() == [21]
    extractor = b.get_feature_extractor(path=path)
    assert set(dict(extractor.named_buffers())) >= {"pipeline.normalize.mean",
                                                    "pipeline.normalize.invstddev"}
    with pytest.raises(ValueError, match=r"RNNTBundle feature extractor: expected a 1-D "
                                         r"waveform \(time,\), got shape \[1, 8000\]"):
        extractor(wave[None])


def test_rnnt_stats_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mean": [0.0] * 80}))
    with pytest.raises(ValueError, match="has no 'invstddev' list"):
        pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH.get_feature_extractor(path=str(bad))
    with pytest.raises(FileNotFoundError, match=r"EMFORMER_RNNT_BASE_LIBRISPEECH\."
                                                r"get_streaming_feature_extractor: no file at"):
        pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH.get_streaming_feature_extractor(
            path=str(tmp_path / "missing.json"))


RNNT_TINY = dict(
    input_dim=80, encoding_dim=16, num_symbols=12, segment_length=4, right_context_length=2,
    time_reduction_input_dim=8, time_reduction_stride=2, transformer_num_heads=2,
    transformer_ffn_dim=16, transformer_num_layers=1, transformer_dropout=0.0,
    transformer_activation="relu", transformer_left_context_length=3,
    transformer_max_memory_size=2, transformer_weight_init_scale_strategy="depthwise",
    transformer_tanh_on_mem=True, symbol_embedding_dim=8, num_lstm_layers=1,
    lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0)


def test_rnnt_decoder_from_local_weights(tmp_path):
    fiamma.manual_seed(2)
    src = models.emformer_rnnt_model(**RNNT_TINY).eval()
    path = tmp_path / "emformer_rnnt_base_librispeech.pt"
    fiamma.save(src.state_dict(), str(path))
    bundle = dataclasses.replace(
        pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH, _blank=11,
        _rnnt_factory_func=functools.partial(models.emformer_rnnt_model, **RNNT_TINY))
    decoder = bundle.get_decoder(path=str(path))
    assert isinstance(decoder, models.RNNTBeamSearch) and decoder.blank == 11
    same_weights(decoder.model, src)
    assert not decoder.model.training
    feats = fiamma.randn(20, 80)
    with fiamma.no_grad():
        hyps = decoder(feats, fiamma.tensor([20]), 3)
    assert 1 <= len(hyps) <= 3
    scores = [h[3] for h in hyps]
    assert all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert all(h[0][0] == 11 for h in hyps)                  # every hypothesis starts at blank


def _spm_model(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("he hoped there would be stew for dinner turnips and carrots\n" * 50)
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "spm"),
                                   vocab_size=30, model_type="bpe", minloglevel=2)
    return str(tmp_path / "spm.model"), spm.SentencePieceProcessor(
        model_file=str(tmp_path / "spm.model"))


def test_rnnt_token_processor(tmp_path):
    path, sp = _spm_model(tmp_path)
    proc = pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH.get_token_processor(path=path)
    ids = sp.encode("he hoped there would be stew")
    # the first token (the start symbol) is dropped, as are unk / eos / pad ids
    tokens = [99] + ids[:3] + [sp.unk_id(), sp.eos_id()] + ids[3:]
    assert proc(tokens) == "he hoped there would be stew"
    assert proc(tokens, lstrip=False) == " he hoped there would be stew"
    assert proc([5]) == ""
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 30\) .* got \[4096\]"):
        proc([0, 3, 4096])


def test_rnnt_token_processor_without_sentencepiece(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(ModuleNotFoundError, match="EMFORMER_RNNT_BASE_LIBRISPEECH."
                                                  "get_token_processor: the token processor "
                                                  "needs the 'sentencepiece' package"):
        pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH.get_token_processor(path=__file__)


def test_rnnt_offline_error(tmp_path, monkeypatch):
    monkeypatch.setattr(_assets, "BASE_URL", "https://127.0.0.1:9/")
    with pytest.raises(OSError) as info:
        pipelines.EMFORMER_RNNT_BASE_LIBRISPEECH.get_feature_extractor(
            dl_kwargs={"model_dir": str(tmp_path), "progress": False})
    msg = str(info.value)
    assert msg.startswith("EMFORMER_RNNT_BASE_LIBRISPEECH.get_feature_extractor: ")
    assert "https://127.0.0.1:9/pipeline-assets/global_stats_rnnt_librispeech.json" in msg
    assert os.path.join(str(tmp_path), "global_stats_rnnt_librispeech.json") in msg


# ---- Tacotron2 TTS -------------------------------------------------------------------------


def test_tts_bundle_facts():
    names = ["TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH", "TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH",
             "TACOTRON2_WAVERNN_CHAR_LJSPEECH", "TACOTRON2_WAVERNN_PHONE_LJSPEECH"]
    files = ["tacotron2_english_characters_1500_epochs_ljspeech.pth",
             "tacotron2_english_phonemes_1500_epochs_ljspeech.pth",
             "tacotron2_english_characters_1500_epochs_wavernn_ljspeech.pth",
             "tacotron2_english_phonemes_1500_epochs_wavernn_ljspeech.pth"]
    for name, file in zip(names, files):
        b = getattr(pipelines, name)
        assert isinstance(b, pipelines.Tacotron2TTSBundle)
        assert b.tacotron2_url == "https://download.pytorch.org/torchaudio/models/" + file
        p = b._tacotron2_params
        assert p["n_symbol"] == (96 if "PHONE" in name else 38)
        assert (p["n_mels"], p["decoder_max_step"], p["attention_location_kernel_size"],
                p["mask_padding"], p["gate_threshold"]) == (80, 2000, 31, False, 0.5)
        assert len(p) == 22
        if "WAVERNN" in name:
            assert b.wavernn_url.endswith("/models/wavernn_10k_epochs_8bits_ljspeech.pth")
            assert b._wavernn_params == {
                "upsample_scales": [5, 5, 11], "n_classes": 256, "hop_length": 275,
                "n_res_block": 10, "n_rnn": 512, "n_fc": 512, "kernel_size": 5, "n_freq": 80,
                "n_hidden": 128, "n_output": 128}
        else:
            assert b.wavernn_url is None
    assert len(_tts._PHONES) == 96 and _tts._PHONES[12:16] == ("AA", "AA0", "AA1", "AA2")
    assert _tts._PHONES[-3:] == ("Y", "Z", "ZH") and _tts._PHONES.index("B") == 36


def test_char_text_processor():
    proc = pipelines.TACOTRON2_WAVERNN_CHAR_LJSPEECH.get_text_processor()
    assert isinstance(proc, pipelines.Tacotron2TTSBundle.TextProcessor)
    assert len(proc.tokens) == 38 and proc.tokens[:3] == ("_", "-", "!")
    tokens, lengths = proc(["Hello world! T T S stands for Text to Speech!", "Ok?"])
    # torchaudio 2.11's output for the same texts
    assert tokens[0].tolist() == [19, 16, 23, 23, 26, 11, 34, 26, 29, 23, 15, 2, 11, 31, 11, 31,
                                  11, 30, 11, 30, 31, 12, 25, 15, 30, 11, 17, 26, 29, 11, 31, 16,
                                  35, 31, 11, 31, 26, 11, 30, 27, 16, 16, 14, 19, 2]
    assert tokens[1].tolist()[:4] == [26, 22, 10, 0] and lengths.tolist() == [45, 3]
    assert tokens.dtype == fiamma.int64 and lengths.dtype == fiamma.int32
    single, n = proc("ÀB 1c")                 # unknown characters are dropped
    assert single.tolist() == [[13, 11, 14]] and n.tolist() == [3]
    with pytest.raises(TypeError, match="expected a str or a list of str, got int"):
        proc(3)


def test_phoneme_text_processor_needs_deepphonemizer(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp", None)
    monkeypatch.setitem(sys.modules, "dp.phonemizer", None)
    with pytest.raises(ModuleNotFoundError, match="need DeepPhonemizer .the 'dp' package"):
        pipelines.TACOTRON2_GRIFFINLIM_PHONE_LJSPEECH.get_text_processor()


TACO_TINY = dict(n_mels=80, n_symbol=38, symbol_embedding_dim=8, encoder_embedding_dim=8,
                 encoder_n_convolution=1, encoder_kernel_size=3, decoder_rnn_dim=10,
                 decoder_max_step=7, attention_rnn_dim=9, attention_hidden_dim=5,
                 attention_location_n_filter=3, attention_location_kernel_size=5, prenet_dim=7,
                 postnet_n_convolution=2, postnet_kernel_size=3, postnet_embedding_dim=6)
WAVERNN_TINY = dict(upsample_scales=[2, 3], n_classes=256, hop_length=6, n_res_block=1, n_rnn=8,
                    n_fc=6, kernel_size=5, n_freq=80, n_hidden=5, n_output=8)


@pytest.mark.filterwarnings("ignore:Reached max decoder steps")
def test_tacotron2_and_wavernn_from_local_weights(tmp_path):
    fiamma.manual_seed(3)
    taco = models.Tacotron2(**TACO_TINY).eval()
    wrnn = models.WaveRNN(**WAVERNN_TINY).eval()
    fiamma.save(taco.state_dict(), str(tmp_path / "t.pth"))
    fiamma.save(wrnn.state_dict(), str(tmp_path / "w.pth"))
    bundle = dataclasses.replace(pipelines.TACOTRON2_WAVERNN_CHAR_LJSPEECH,
                                 _tacotron2_params=TACO_TINY, _wavernn_params=WAVERNN_TINY)
    model = bundle.get_tacotron2(path=str(tmp_path / "t.pth"))
    assert isinstance(model, models.Tacotron2) and not model.training
    same_weights(model, taco)
    vocoder = bundle.get_vocoder(path=str(tmp_path / "w.pth"))
    assert isinstance(vocoder, pipelines.Tacotron2TTSBundle.Vocoder)
    assert vocoder.sample_rate == 22050
    same_weights(vocoder._model, wrnn)
    tokens, lengths = bundle.get_text_processor()("hi there")
    with fiamma.no_grad():
        spec, spec_lengths, _ = model.infer(tokens, lengths)
        waveform, wave_lengths = vocoder(spec, spec_lengths)
    assert spec.shape[:2] == (1, 80) and waveform.shape == (1, spec.shape[-1] * 6)
    assert wave_lengths.tolist() == [spec_lengths.item() * 6]
    assert (waveform.abs() <= 1).all()
    with pytest.raises(ValueError, match=r"WaveRNN vocoder: expected a mel spectrogram \(batch, "
                                         r"80, frames\) or \(80, frames\), got shape \[1, 40, 5\]"):
        vocoder(fiamma.zeros(1, 40, 5))


def test_wavernn_vocoder_pre_and_post_processing():
    vocoder = _tts._WaveRNNVocoder(models.WaveRNN(**WAVERNN_TINY))
    seen = {}

    def fake_infer(db, lengths):                 # deterministic stand-in for the sampler
        seen["db"] = db
        return fiamma.tanh(3 * (db[:, :1] - 0.5)), lengths

    vocoder._model.infer = fake_infer
    mel = fiamma.tensor(np.linspace(-14, 2, 80 * 3).reshape(1, 80, 3))
    waveform, _ = vocoder(mel)
    db = 20 * np.log10(np.maximum(np.exp(mel.numpy()), 1e-5))
    np.testing.assert_allclose(seen["db"].numpy(), np.clip((-100 - db) / -100, 0, 1), rtol=1e-6,
                               atol=1e-7)
    x = np.tanh(3 * (seen["db"].numpy()[:, :1] - 0.5))
    labels = np.clip((np.clip(x, -1, 1) + 1) * 255 / 2, 0, 255).astype(np.int32)
    y = labels / 255 * 2 - 1
    expected = np.sign(y) * (np.power(256.0, np.abs(y)) - 1) / 255
    np.testing.assert_allclose(waveform.numpy(), expected[:, 0], rtol=1e-5, atol=1e-6)


def test_griffinlim_vocoder():
    vocoder = pipelines.TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH.get_vocoder()
    assert vocoder.sample_rate == 22050
    inv, gl = vocoder._inv_mel, vocoder._griffin_lim
    assert (gl.n_fft, gl.hop_length, gl.win_length, gl.power, gl.n_iter) == (1024, 256, 1024, 1,
                                                                             32)
    assert tuple(inv.fb.shape) == (513, 80) and inv.f_max == 8000.0
    mel = fiamma.randn(2, 80, 12, requires_grad=True) - 3
    waveforms, lengths = vocoder(mel, fiamma.tensor([12, 9]))
    assert waveforms.shape == (2, 11 * 256) and lengths.tolist() == [12, 9]
    assert not waveforms.requires_grad and fiamma.isfinite(waveforms).all()
    with pytest.raises(ValueError, match=r"Griffin-Lim vocoder: expected a mel spectrogram .* "
                                         r"got shape \[80\]"):
        vocoder(fiamma.zeros(80))


def test_tts_offline_error(tmp_path, monkeypatch):
    monkeypatch.setattr(_assets, "BASE_URL", "https://127.0.0.1:9/")
    with pytest.raises(OSError) as info:
        pipelines.TACOTRON2_WAVERNN_CHAR_LJSPEECH.get_vocoder(
            dl_kwargs={"model_dir": str(tmp_path), "progress": False})
    msg = str(info.value)
    assert msg.startswith("TACOTRON2_WAVERNN_CHAR_LJSPEECH.get_vocoder: ")
    assert "https://127.0.0.1:9/models/wavernn_10k_epochs_8bits_ljspeech.pth" in msg
    with pytest.raises(FileNotFoundError, match="TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH."
                                                "get_tacotron2: no file at"):
        pipelines.TACOTRON2_GRIFFINLIM_CHAR_LJSPEECH.get_tacotron2(path=str(tmp_path / "x"))
