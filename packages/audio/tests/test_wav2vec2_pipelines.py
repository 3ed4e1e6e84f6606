"""torchaudio.pipelines' wav2vec 2.0 bundles (facts, local weights, offline errors), the
greedy CTC decoding of the tutorial, and the Hugging Face / fairseq importers on tiny
checkpoints written by the tests themselves (no transformers, fairseq or torch needed)."""

import json
import os
import re

import numpy as np
import pytest

import fiamma
from fiamma.audio import models, pipelines
from fiamma.audio.models.wav2vec2.utils import import_fairseq_model, import_huggingface_model
from fiamma.audio.pipelines._wav2vec2 import _Wav2Vec2Model

CONV = [(4, 10, 5), (4, 3, 2)]
TINY = dict(extractor_mode="group_norm", extractor_conv_layer_config=CONV,
            extractor_conv_bias=False, encoder_embed_dim=8, encoder_projection_dropout=0.0,
            encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=1,
            encoder_num_heads=2, encoder_attention_dropout=0.0, encoder_ff_interm_features=12,
            encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False,
            encoder_layer_drop=0.0)


# ---- bundle facts ------------------------------------------------------------------------------


def test_bundle_names_and_facts():
    names = [n for n in pipelines.__all__
             if n.isupper() and isinstance(getattr(pipelines, n), pipelines.Wav2Vec2Bundle)]
    assert len(names) == 30
    b = pipelines.WAV2VEC2_ASR_BASE_960H
    assert isinstance(b, pipelines.Wav2Vec2ASRBundle) and b.sample_rate == 16000
    assert b.url == ("https://download.pytorch.org/torchaudio/models/"
                     "wav2vec2_fairseq_base_ls960_asr_ls960.pth")
    assert b.get_labels() == ("-", "|", "E", "T", "A", "O", "N", "I", "H", "S", "R", "D", "L",
                              "U", "M", "W", "C", "F", "G", "Y", "P", "B", "V", "K", "'", "X",
                              "J", "Q", "Z")
    assert b.get_labels(blank="<b>")[0] == "<b>"
    assert b._params["aux_num_out"] == 29 and b._params["encoder_layer_drop"] == 0.05
    assert not isinstance(pipelines.HUBERT_BASE, pipelines.Wav2Vec2ASRBundle)
    assert pipelines.HUBERT_BASE.url.endswith("/hubert_fairseq_base_ls960.pth")
    assert pipelines.WAVLM_BASE._model_type == "WavLM"
    assert pipelines.WAVLM_BASE._params["encoder_num_buckets"] == 320
    assert pipelines.WAVLM_BASE._params["encoder_max_distance"] == 800
    assert pipelines.WAV2VEC2_XLSR_2B._params["encoder_embed_dim"] == 1920
    assert pipelines.HUBERT_LARGE._normalize_waveform
    assert not pipelines.HUBERT_BASE._normalize_waveform
    de = pipelines.VOXPOPULI_ASR_BASE_10K_DE
    assert de._remove_aux_axis == (1, 2, 3, 35) and de._params["aux_num_out"] == 32
    assert len(de.get_labels()) == 32 and de.url.endswith("wav2vec2_voxpopuli_base_10k_asr_de.pt")
    fa = pipelines.MMS_FA
    assert fa.url == ("https://dl.fbaipublicfiles.com/mms/torchaudio/ctc_alignment_mling_uroman/"
                      "model.pt")
    assert fa.get_labels()[0] == "-" and fa.get_labels()[-1] == "*" and len(fa.get_labels()) == 29
    assert len(fa.get_labels(star=None)) == 28 and fa.get_dict()["a"] == 1


# ---- get_model with local weights ------------------------------------------------------------


def tiny_bundle(path="tiny_asr.pth", normalize=False):
    params = dict(TINY, aux_num_out=4)
    return pipelines.Wav2Vec2ASRBundle(path, params, 16000, normalize, "Wav2Vec2", ("|", "A", "B"))


def save_tiny_checkpoint(folder, name="tiny_asr.pth"):
    fiamma.manual_seed(0)
    src = models.wav2vec2_model(**TINY, aux_num_out=7)     # 4 labels + fairseq's rows 1, 2, 3
    path = os.path.join(folder, name)
    fiamma.save(src.state_dict(), path)
    return src, path


def test_get_model_from_path_drops_fairseq_rows(tmp_path):
    src, path = save_tiny_checkpoint(str(tmp_path))
    model = tiny_bundle().get_model(path=path)
    assert not model.training
    w = src.state_dict()["aux.weight"].numpy()
    np.testing.assert_array_equal(model.aux.weight.detach().numpy(), w[[0, 4, 5, 6]])
    np.testing.assert_array_equal(model.aux.bias.detach().numpy(),
                                  src.state_dict()["aux.bias"].numpy()[[0, 4, 5, 6]])
    x = fiamma.randn(1, 200)
    np.testing.assert_allclose(model(x)[0].detach().numpy(),
                               src.eval()(x)[0].detach().numpy()[..., [0, 4, 5, 6]], atol=1e-6)


def test_get_model_from_model_dir_and_cache(tmp_path, monkeypatch):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_tiny_checkpoint(str(folder), "tiny_asr.pth")
    bundle = tiny_bundle()
    m1 = bundle.get_model(dl_kwargs={"model_dir": str(folder), "progress": False})
    # the hub cache: $FIAMMA_HOME/hub/checkpoints/<torchaudio's file name>
    home = tmp_path / "home"
    (home / "hub" / "checkpoints").mkdir(parents=True)
    save_tiny_checkpoint(str(home / "hub" / "checkpoints"), "tiny_asr.pth")
    monkeypatch.setenv("FIAMMA_HOME", str(home))
    monkeypatch.setattr(fiamma.hub, "_hub_dir", None)
    m2 = bundle.get_model()
    for a, b in zip(m1.state_dict().values(), m2.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_get_model_normalizes_waveform(tmp_path):
    src, path = save_tiny_checkpoint(str(tmp_path))
    model = tiny_bundle(normalize=True).get_model(path=path)
    assert isinstance(model, _Wav2Vec2Model) and model.normalize_waveform
    x = 3.0 + 2.0 * fiamma.randn(2, 200)
    xn = (x - x.mean()) / (x.var(unbiased=False) + 1e-5).sqrt()   # over the whole (2, 200)
    np.testing.assert_allclose(model(x)[0].detach().numpy(),
                               model.model(xn)[0].detach().numpy(), atol=1e-5)
    feats, _ = model.extract_features(x)
    assert len(feats) == 1


def test_fa_bundle_model(tmp_path):
    src, path = save_tiny_checkpoint(str(tmp_path))
    bundle = pipelines.Wav2Vec2FABundle("tiny_asr.pth", dict(TINY, aux_num_out=4), 16000, False,
                                        "Wav2Vec2", ("a", "b", "c"))
    model = bundle.get_model(path=path)
    out, _ = model(fiamma.randn(2, 200))
    assert out.shape[-1] == 5 and out[..., -1].abs().sum().item() == 0     # star column
    np.testing.assert_allclose(out[..., :4].exp().sum(-1).detach().numpy(), 1.0, atol=1e-5)
    assert bundle.get_model(with_star=False, path=path)(fiamma.randn(1, 200))[0].shape[-1] == 4


def test_fa_tokenizer_and_aligner():
    bundle = pipelines.MMS_FA
    tokens = bundle.get_tokenizer()(["ab", "c"])
    d = bundle.get_dict()
    assert tokens == [[d["a"], d["b"]], [d["c"]]]
    # an emission whose best path is: blank a a blank b blank blank c c
    path = [0, d["a"], d["a"], 0, d["b"], 0, 0, d["c"], d["c"]]
    emission = fiamma.full((len(path), len(d)), -8.0)
    emission[fiamma.arange(len(path)), fiamma.tensor(path)] = -0.01
    spans = bundle.get_aligner()(emission, tokens)
    assert [[(s.token, s.start, s.end) for s in word] for word in spans] == [
        [(d["a"], 1, 3), (d["b"], 4, 5)], [(d["c"], 7, 9)]]
    with pytest.raises(ValueError, match="'Q' is not a label"):
        bundle.get_tokenizer()(["Q"])
    with pytest.raises(ValueError, match=r"expected a 2-D emission \(frame, label\), got shape"):
        bundle.get_aligner()(emission[None], tokens)


def test_missing_file_errors(tmp_path):
    bundle = tiny_bundle()
    with pytest.raises(FileNotFoundError, match=r"no checkpoint file at .*nope\.pth.*"
                                                r"download\.pytorch\.org/torchaudio/models/"
                                                r"tiny_asr\.pth"):
        bundle.get_model(path=str(tmp_path / "nope.pth"))
    offline = pipelines.Wav2Vec2Bundle("https://127.0.0.1:9/w2v_tiny.pth",
                                       dict(TINY, aux_num_out=None), 16000, False, "Wav2Vec2")
    with pytest.raises(OSError) as info:
        offline.get_model(dl_kwargs={"model_dir": str(tmp_path), "progress": False})
    msg = str(info.value)
    assert "https://127.0.0.1:9/w2v_tiny.pth" in msg
    assert os.path.join(str(tmp_path), "w2v_tiny.pth") in msg and "path=" in msg
    with pytest.raises(ValueError, match=r"model type must be one of \('Wav2Vec2', 'WavLM'\), "
                                         r"got 'Conformer'"):
        pipelines.Wav2Vec2Bundle("x.pth", {}, 16000, False, "Conformer").get_model(path=__file__)


# ---- greedy CTC decoding (the tutorial's decoder) ----------------------------------------------


class GreedyCTCDecoder(fiamma.nn.Module):
    def __init__(self, labels, blank=0):
        super().__init__()
        self.labels = labels
        self.blank = blank

    def forward(self, emission):
        indices = fiamma.argmax(emission, dim=-1)
        indices = fiamma.unique_consecutive(indices, dim=-1)
        indices = [i for i in indices.tolist() if i != self.blank]
        return "".join(self.labels[i] for i in indices)


def test_greedy_ctc_decoder():
    labels = pipelines.WAV2VEC2_ASR_BASE_960H.get_labels()
    path = [labels.index(c) for c in "--HH-E-LL-L-OO||-W-O-R-L-DD-"]
    emission = fiamma.full((len(path), len(labels)), -5.0)
    emission[fiamma.arange(len(path)), fiamma.tensor(path)] = 0.0
    assert GreedyCTCDecoder(labels)(emission).replace("|", " ").strip() == "HELLO WORLD"


# ---- Hugging Face import ------------------------------------------------------------------------


def hf_state(model, prefix, wavlm=False):
    """The keys transformers' Wav2Vec2ForCTC / HubertModel / WavLMModel use for ``model``."""
    out = {}
    for key, value in model.state_dict().items():
        if key.startswith("aux."):
            out["lm_head." + key[4:]] = value
            continue
        key = key.replace("encoder.feature_projection.", "feature_projection.")
        key = key.replace("encoder.transformer.", "encoder.")
        m = re.fullmatch(r"(encoder\.layers\.\d+\.attention\.)attention\.(.*)", key)
        if wavlm and m:
            if m[2].startswith("in_proj_"):
                kind = m[2][len("in_proj_"):]
                for name, part in zip("qkv", value.chunk(3)):
                    out[f"{prefix}{m[1]}{name}_proj.{kind}"] = part.clone()
                continue
            key = m[1] + m[2]
        out[prefix + key] = value
    out[prefix + "masked_spec_embed"] = fiamma.zeros(8)
    return out


HF_CONFIG = {"feat_extract_norm": "group", "conv_dim": [4, 4], "conv_kernel": [10, 3],
             "conv_stride": [5, 2], "conv_bias": False, "hidden_size": 8,
             "feat_proj_dropout": 0.0, "num_conv_pos_embeddings": 4,
             "num_conv_pos_embedding_groups": 2, "num_hidden_layers": 1,
             "num_attention_heads": 2, "attention_dropout": 0.0, "intermediate_size": 12,
             "activation_dropout": 0.0, "hidden_dropout": 0.0, "do_stable_layer_norm": False,
             "layerdrop": 0.0, "vocab_size": 5}


def write_hf(folder, state, config):
    os.makedirs(folder, exist_ok=True)
    fiamma.safetensors.save_file({k: v.contiguous() for k, v in state.items()},
                                 os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def test_import_huggingface_ctc_folder(tmp_path):
    fiamma.manual_seed(1)
    src = models.wav2vec2_model(**TINY, aux_num_out=5).eval()
    write_hf(str(tmp_path / "hf"), hf_state(src, "wav2vec2."),
             dict(HF_CONFIG, architectures=["Wav2Vec2ForCTC"], model_type="wav2vec2"))
    model = import_huggingface_model(str(tmp_path / "hf")).eval()
    assert model.aux.out_features == 5
    x = fiamma.randn(2, 300)
    np.testing.assert_array_equal(model(x)[0].detach().numpy(), src(x)[0].detach().numpy())


def test_import_huggingface_hubert_state_dict_and_legacy_weight_norm():
    fiamma.manual_seed(2)
    src = models.wav2vec2_model(**TINY, aux_num_out=None).eval()
    state = hf_state(src, "")
    # older transformers checkpoints: weight_g / weight_v
    state["encoder.pos_conv_embed.conv.weight_g"] = state.pop(
        "encoder.pos_conv_embed.conv.parametrizations.weight.original0")
    state["encoder.pos_conv_embed.conv.weight_v"] = state.pop(
        "encoder.pos_conv_embed.conv.parametrizations.weight.original1")
    model = import_huggingface_model(state, config=dict(HF_CONFIG, model_type="hubert")).eval()
    assert model.aux is None
    x = fiamma.randn(1, 300)
    np.testing.assert_array_equal(model(x)[0].detach().numpy(), src(x)[0].detach().numpy())


def test_import_huggingface_wavlm(tmp_path):
    fiamma.manual_seed(3)
    args = dict(TINY, encoder_num_layers=2)
    src = models.wavlm_model(**{k: v for k, v in args.items() if not k.startswith("encoder_att")},
                             encoder_num_buckets=6, encoder_max_distance=20,
                             encoder_attention_dropout=0.0, aux_num_out=None).eval()
    write_hf(str(tmp_path / "wavlm"), hf_state(src, "", wavlm=True),
             dict(HF_CONFIG, num_hidden_layers=2, num_buckets=6, max_bucket_distance=20,
                  architectures=["WavLMModel"], model_type="wavlm"))
    model = import_huggingface_model(str(tmp_path / "wavlm")).eval()
    x = fiamma.randn(1, 300)
    np.testing.assert_allclose(model(x)[0].detach().numpy(), src(x)[0].detach().numpy(),
                               atol=1e-6)


class FakeHFModel:
    """Duck-typed stand-in for a transformers model object (``.config``, ``.state_dict()``)."""

    def __init__(self, state, config):
        self._state = state
        self.config = type("Config", (), config)()

    def state_dict(self):
        return self._state


def test_import_huggingface_model_object():
    fiamma.manual_seed(4)
    src = models.wav2vec2_model(**TINY, aux_num_out=5).eval()
    Wav2Vec2ForCTC = type("Wav2Vec2ForCTC", (FakeHFModel,), {})
    model = import_huggingface_model(Wav2Vec2ForCTC(hf_state(src, "wav2vec2."), HF_CONFIG))
    x = fiamma.randn(1, 300)
    np.testing.assert_array_equal(model.eval()(x)[0].detach().numpy(),
                                  src(x)[0].detach().numpy())


def test_import_huggingface_errors(tmp_path):
    with pytest.raises(TypeError, match="import_huggingface_model: a state dict needs config="):
        import_huggingface_model({})
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        import_huggingface_model(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="expected one of Wav2Vec2ForCTC.*got BertModel"):
        import_huggingface_model({}, config=dict(HF_CONFIG, architectures=["BertModel"]))
    with pytest.raises(TypeError, match="expected a transformers model.*got int"):
        import_huggingface_model(3)


# ---- fairseq import ----------------------------------------------------------------------------


def fairseq_state(model, mode):
    out = {}
    for key, value in model.state_dict().items():
        m = re.fullmatch(r"feature_extractor\.conv_layers\.(\d+)\.(conv|layer_norm)\.(\w+)", key)
        if m:
            sub = "0" if m[2] == "conv" else ("2" if mode == "group_norm" else "2.1")
            out[f"w2v_encoder.w2v_model.feature_extractor.conv_layers.{m[1]}.{sub}.{m[3]}"] = value
            continue
        for a, b in [("encoder.feature_projection.projection.", "post_extract_proj."),
                     ("encoder.feature_projection.layer_norm.", "layer_norm."),
                     ("encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original0",
                      "encoder.pos_conv.0.weight_g"),
                     ("encoder.transformer.pos_conv_embed.conv.parametrizations.weight.original1",
                      "encoder.pos_conv.0.weight_v"),
                     ("encoder.transformer.pos_conv_embed.conv.bias", "encoder.pos_conv.0.bias"),
                     (".attention.", ".self_attn."), (".feed_forward.intermediate_dense.", ".fc1."),
                     (".feed_forward.output_dense.", ".fc2."),
                     ("encoder.transformer.", "encoder.")]:
            key = key.replace(a, b)
        key = re.sub(r"(encoder\.layers\.\d+\.)layer_norm\.", r"\1self_attn_layer_norm.", key)
        if key.startswith("aux."):
            out["w2v_encoder.proj." + key[4:]] = value
        else:
            out["w2v_encoder.w2v_model." + key] = value
    out["w2v_encoder.w2v_model.mask_emb"] = fiamma.zeros(8)
    return out


STD_CONV = [(4, 10, 5)] + [(4, 3, 2)] * 4 + [(4, 2, 2)] * 2


@pytest.mark.parametrize("mode", ["group_norm", "layer_norm"])
def test_import_fairseq_state_dict(mode):
    fiamma.manual_seed(5)
    src = models.wav2vec2_model(mode, STD_CONV, mode == "layer_norm", 8, 0.0, 4, 2, 2, 2, 0.0,
                                12, 0.0, 0.0, mode == "layer_norm", 0.0, 6).eval()
    checkpoint = {"model": fairseq_state(src, mode), "args": None}
    model = import_fairseq_model(checkpoint, config={"encoder_num_heads": 2})
    assert model.encoder.transformer.layer_norm_first == (mode == "group_norm")
    assert [(b.conv.out_channels, b.kernel_size, b.stride)
            for b in model.feature_extractor.conv_layers] == STD_CONV
    x = fiamma.randn(1, 2000)
    np.testing.assert_array_equal(model.eval()(x)[0].detach().numpy(), src(x)[0].detach().numpy())


def test_import_fairseq_errors():
    src = models.wav2vec2_model(**TINY, aux_num_out=None)
    state = fairseq_state(src, "group_norm")
    with pytest.raises(ValueError, match=r"conv kernels \(10, 3\) are not fairseq's standard"):
        import_fairseq_model(state)
    model = import_fairseq_model(state, config={"extractor_conv_layer_config": CONV,
                                                "encoder_num_heads": 2})
    assert model.aux is None
    with pytest.raises(ValueError, match="unexpected key 'bogus.weight'"):
        import_fairseq_model({"bogus.weight": fiamma.zeros(1)})
    with pytest.raises(ValueError, match="expected a fairseq Wav2Vec2Model.*got int"):
        import_fairseq_model(3)
