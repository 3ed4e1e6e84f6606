"""torchaudio.models' SQUIM estimators (SquimObjective, SquimSubjective and their builders):
state-dict keys and shapes against torchaudio 2.11's (hard-coded facts), outputs against
torchaudio's for deterministic weights (hard-coded facts), the dual-path chunking, ranges,
gradients against finite differences and the errors for bad input. Parity with torchaudio
itself is checked outside the repository (its C library does not load beside this torch)."""

import hashlib

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.audio import models
from fiamma.audio.models.squim import objective as O, subjective as S
from fiamma.autograd import gradcheck

TINY = dict(feat_dim=8, win_len=8, d_model=8, nhead=2, hidden_dim=6, num_blocks=2,
            rnn_type="LSTM", chunk_size=5)
W2V_TINY = dict(extractor_mode="group_norm", extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)],
                extractor_conv_bias=False, encoder_embed_dim=12, encoder_projection_dropout=0.0,
                encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=2,
                encoder_num_heads=2, encoder_attention_dropout=0.0,
                encoder_ff_interm_features=16, encoder_ff_interm_dropout=0.0,
                encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0,
                aux_num_out=None)


def listing(model):
    return [f"{k}:{'x'.join(map(str, v.shape)) or '-'}" for k, v in model.state_dict().items()]


def digest(lines):
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# ---- state-dict facts (torchaudio 2.11) ---------------------------------------------------------


def _objective_base_listing():
    """torchaudio's squim_objective_base() state dict, key:shape, in order."""
    out = ["encoder.conv1d.weight:256x1x64"]
    rnn = ["weight_ih_l0:1024x256", "weight_hh_l0:1024x256", "bias_ih_l0:1024", "bias_hh_l0:1024"]
    for side in ("row", "col"):
        for i in range(2):
            p = f"dprnn.{side}_rnn.{i}."
            out += [p + "rnn." + r for r in rnn]
            out += [p + "rnn." + r.replace(":", "_reverse:") for r in rnn]
            out += [p + "proj.weight:256x512", p + "proj.bias:256"]
    for side in ("row", "col"):
        for i in range(2):
            out += [f"dprnn.{side}_norm.{i}.weight:256", f"dprnn.{side}_norm.{i}.bias:256"]
    out += ["dprnn.conv.0.weight:256x256x1x1", "dprnn.conv.0.bias:256", "dprnn.conv.1.weight:1"]
    for b in range(3):
        p = f"branches.{b}."
        out += [p + "0.self_attn.in_proj_weight:768x256", p + "0.self_attn.in_proj_bias:768",
                p + "0.self_attn.out_proj.weight:256x256", p + "0.self_attn.out_proj.bias:256",
                p + "0.linear1.weight:1024x256", p + "0.linear1.bias:1024",
                p + "0.linear2.weight:256x1024", p + "0.linear2.bias:256",
                p + "0.norm1.weight:256", p + "0.norm1.bias:256",
                p + "0.norm2.weight:256", p + "0.norm2.bias:256", p + "1.alpha:1",
                p + "2.0.weight:256x256", p + "2.0.bias:256", p + "2.1.weight:1",
                p + "2.2.weight:1x256", p + "2.2.bias:1"]
    return out


def test_objective_base_state_dict_matches_torchaudio():
    model = models.squim_objective_base()
    got = listing(model)
    assert got == _objective_base_listing()
    # the digest of torchaudio's own listing (joined by newlines)
    assert digest(got) == "635dc65a076ee830b28072ca6223de115682b231d61a9d2f6d4545aa3cb49f81"
    assert sum(p.numel() for p in model.parameters()) == 7387658


def test_objective_tiny_gru_state_dict_digest():
    model = models.squim_objective_model(**dict(TINY, num_blocks=1, rnn_type="GRU"))
    got = listing(model)
    assert len(got) == 82
    assert "dprnn.row_rnn.0.rnn.weight_hh_l0_reverse:18x6" in got
    assert digest(got) == "9ba003599c0a8ab4d87e074a31fbbb461de255f41fe6b4499fb83af6a1602bea"


def test_subjective_base_state_dict_matches_torchaudio():
    model = models.squim_subjective_base()
    got = listing(model)
    assert len(got) == 216
    ssl = [line for line in got if line.startswith("ssl_model.")]
    assert ssl == ["ssl_model." + line for line in listing(models.wav2vec2_base())]
    assert [line for line in got if not line.startswith("ssl_model.")] == [
        "projector.weight:32x768", "projector.bias:32",
        "predictor.att_pool_layer.linear1.weight:1x64", "predictor.att_pool_layer.linear1.bias:1",
        "predictor.att_pool_layer.linear2.weight:5x64", "predictor.att_pool_layer.linear2.bias:5"]
    assert digest(got) == "a61c9b362de30990f82ec7ff40bcc62592bdce996f1d5e3ba27c346d25214dc9"
    assert model.ssl_model.encoder.transformer.layer_drop == 0.1     # wav2vec2_base's defaults


# ---- outputs against torchaudio's (deterministic weights and inputs) -----------------------------


def det_init(model):
    """Every state-dict entry i of n elements: sin(k^2 * 0.731 + 1.3 i) * 0.5 / sqrt(last dim)."""
    with fiamma.no_grad():
        for i, (_, p) in enumerate(model.state_dict().items()):
            k = np.arange(p.numel(), dtype=np.float64)
            scale = 0.5 / np.sqrt(max(p.shape[-1] if p.ndim else 1, 1))
            v = np.sin(k * k * 0.731 + 1.3 * i) * scale
            p.copy_(fiamma.tensor(v.reshape(tuple(p.shape)), dtype=p.dtype))
    return model


def wave(batch, length, seed):
    t = np.arange(length, dtype=np.float64)
    rows = [np.sin(0.05 * (b + seed + 1) * t) + 0.7 * np.sin(0.002 * (b + 2) * t * t)
            for b in range(batch)]
    return fiamma.tensor(np.stack(rows))


@pytest.mark.parametrize("cfg,expected", [
    (TINY, [[0.6272937411, 0.627283584339], [2.749999714023, 2.750095772123],
            [-0.577367154303, -0.577279754276]]),
    (dict(TINY, rnn_type="GRU", chunk_size=4, chunk_stride=3, num_blocks=1),
     [[0.619830965855, 0.619820304346], [2.857142153259, 2.857321183503],
      [-0.579656146499, -0.579351416141]]),
])
def test_objective_outputs_match_torchaudio(cfg, expected):
    model = det_init(models.squim_objective_model(**cfg).double().eval())
    scores = model(wave(2, 97, 0))
    assert len(scores) == 3 and all(s.shape == (2,) for s in scores)
    np.testing.assert_allclose(np.stack([s.detach().numpy() for s in scores]), expected,
                               rtol=1e-9, atol=1e-11)


def test_subjective_outputs_match_torchaudio():
    ssl = models.wav2vec2_model(**W2V_TINY)
    model = models.SquimSubjective(ssl, nn.Linear(12, 4), S.Predictor(8, 5))
    det_init(model.double().eval())
    mos = model(wave(2, 400, 1), wave(2, 170, 5))
    np.testing.assert_allclose(mos.detach().numpy(), [2.929606460499, 2.929615776583],
                               rtol=1e-9, atol=1e-11)


# ---- pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size,stride", [(5, 2), (7, 3), (4, 4), (5, 7), (71, 35)])
@pytest.mark.parametrize("frames", [1, 3, 5, 6, 12, 40, 203])
def test_dprnn_chunking_round_trip(size, stride, frames):
    dprnn = O.DPRNN(feat_dim=3, hidden_dim=2, num_blocks=0, d_model=3, chunk_size=size,
                    chunk_stride=stride)
    x = fiamma.randn(2, 3, frames)
    chunks, rest = dprnn.chunking(x)
    assert chunks.shape[:3] == (2, 3, size)
    # each frame lands in exactly two chunks (one of each offset), so merging gives 2 x
    np.testing.assert_array_equal(dprnn.merging(chunks, rest).numpy(), 2 * x.numpy())
    # chunk 0 starts stride frames before the signal (zero padding)
    first = chunks[:, :, :, 0]
    assert (first[:, :, :min(stride, size)] == 0).all()


def test_autopool_and_range_sigmoid():
    pool = O.AutoPool()
    x = fiamma.randn(3, 7, 4)
    w = np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True)
    np.testing.assert_allclose(pool(x).detach().numpy(), (x.numpy() * w).sum(1), rtol=1e-5)
    with fiamma.no_grad():
        pool.alpha.fill_(0.0)                  # uniform weights: the mean
    np.testing.assert_allclose(pool(x).detach().numpy(), x.numpy().mean(1), rtol=1e-5)
    rs = O.RangeSigmoid(O.PESQRange)
    y = rs(fiamma.tensor([-50.0, 0.0, 50.0])).numpy()
    np.testing.assert_allclose(y, [1.0, (1.0 + O.PESQRange[1]) / 2, O.PESQRange[1]], rtol=1e-6)
    assert O.PESQRange[0] == 1.0
    assert abs(O.PESQRange[1] - (0.999 + 4.0 / (1 + np.exp(-1.3669 * 4.5 + 3.8224)))) < 1e-12
    assert abs(O.transform_wb_pesq_range(1.0) - 1.3151490960672) < 1e-12


def test_objective_base_scores_are_in_range():
    fiamma.manual_seed(0)
    model = models.squim_objective_base().eval()
    with fiamma.no_grad():
        stoi, pesq, sisdr = model(0.1 * fiamma.randn(2, 4000))
    assert stoi.shape == pesq.shape == sisdr.shape == (2,)
    assert ((stoi > 0) & (stoi < 1)).all() and ((pesq > 1) & (pesq < O.PESQRange[1])).all()
    assert fiamma.isfinite(sisdr).all()


def test_objective_is_scale_invariant():
    model = det_init(models.squim_objective_model(**TINY).double().eval())
    x = wave(2, 150, 3)
    a = fiamma.stack(model(x)).detach().numpy()
    b = fiamma.stack(model(37.0 * x)).detach().numpy()
    np.testing.assert_allclose(a, b, rtol=1e-10)


def test_subjective_reference_alignment():
    model = S.SquimSubjective(None, None, None)
    w = fiamma.zeros(2, 10)
    ref = fiamma.arange(8.0).reshape(2, 4)
    _, r = model._align_shapes(w, ref)
    np.testing.assert_array_equal(r.numpy(), [[0, 1, 2, 3, 0, 1, 2, 3, 0, 1],
                                              [4, 5, 6, 7, 4, 5, 6, 7, 4, 5]])
    _, r = model._align_shapes(fiamma.zeros(2, 3), ref)
    np.testing.assert_array_equal(r.numpy(), [[0, 1, 2], [4, 5, 6]])


def test_subjective_base_score_range():
    fiamma.manual_seed(0)
    model = models.squim_subjective_base().eval()
    with fiamma.no_grad():
        mos = model(fiamma.randn(1, 3000), fiamma.randn(1, 1000))
    assert mos.shape == (1,) and 1.0 <= mos.item() <= 5.0


# ---- gradients ------------------------------------------------------------------------------


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN"])
def test_objective_gradients_finite_differences(rnn_type):
    cfg = dict(feat_dim=3, win_len=4, d_model=4, nhead=2, hidden_dim=2, num_blocks=1,
               rnn_type=rnn_type, chunk_size=3)
    fiamma.manual_seed(1)
    model = models.squim_objective_model(**cfg).double().eval()
    x = fiamma.randn(2, 22, dtype=fiamma.float64, requires_grad=True)
    weights = [fiamma.randn(2, dtype=fiamma.float64) for _ in range(3)]

    def f(x):
        return sum((s * w).sum() for s, w in zip(model(x), weights))

    assert gradcheck(f, (x,), eps=1e-6, atol=1e-5)
    f(x).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and fiamma.isfinite(p.grad).all(), name


def test_subjective_gradients_finite_differences():
    fiamma.manual_seed(2)
    ssl = models.wav2vec2_model(**dict(W2V_TINY, encoder_embed_dim=4, encoder_num_layers=1,
                                       encoder_ff_interm_features=6,
                                       extractor_conv_layer_config=[(3, 10, 5), (3, 3, 2)]))
    model = models.SquimSubjective(ssl, nn.Linear(4, 3), S.Predictor(6, 5)).double().eval()
    x = fiamma.randn(1, 120, dtype=fiamma.float64, requires_grad=True)
    ref = fiamma.randn(1, 50, dtype=fiamma.float64, requires_grad=True)
    assert gradcheck(lambda a, b: model(a, b).sum(), (x, ref), eps=1e-6, atol=1e-5)


def test_objective_trains():
    # (fitting one shared target per metric: per-sample targets on a model this small barely
    # move in a few steps, in torchaudio too)
    fiamma.manual_seed(3)
    # (Adam written out: fiamma-audio's tests run without fiamma-optim)
    model = models.squim_objective_model(**TINY)
    params = [p for p in model.parameters() if p.requires_grad]
    m = [fiamma.zeros_like(p) for p in params]
    v = [fiamma.zeros_like(p) for p in params]
    x = fiamma.randn(4, 120)
    targets = (0.95, 4.0, 12.0)
    losses = []
    for step in range(1, 21):
        for p in params:
            p.grad = None
        loss = sum((s - t).pow(2).mean() for s, t in zip(model(x), targets))
        loss.backward()
        with fiamma.no_grad():
            for p, mi, vi in zip(params, m, v):
                if p.grad is None:
                    continue
                mi.mul_(0.9).add_(p.grad, alpha=0.1)
                vi.mul_(0.999).add_(p.grad * p.grad, alpha=0.001)
                mhat = mi / (1 - 0.9 ** step)
                vhat = vi / (1 - 0.999 ** step)
                p.sub_(1e-2 * mhat / (vhat.sqrt() + 1e-8))
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


# ---- bad input ----------------------------------------------------------------------------


def test_errors():
    model = models.squim_objective_model(**TINY)
    with pytest.raises(ValueError, match=r"SquimObjective: expected a 2-D input \(batch, time\), "
                                         r"got shape \[1, 1, 100\] \(3-D\)"):
        model(fiamma.randn(1, 1, 100))
    with pytest.raises(ValueError, match=r"DPRNN: expected a 3-D input .* got shape \[4, 5\]"):
        model.dprnn(fiamma.randn(4, 5))
    with pytest.raises(ValueError, match="SingleRNN: rnn_type must be one of 'RNN', 'LSTM', "
                                         "'GRU', got 'Transformer'"):
        models.squim_objective_model(**dict(TINY, rnn_type="Transformer"))
    with pytest.raises(ValueError, match="chunk_size and chunk_stride must be positive, got "
                                         "chunk_size=5, chunk_stride=0"):
        models.squim_objective_model(**TINY, chunk_stride=0)
    with pytest.raises(ValueError, match=r"RangeSigmoid: val_range must be a \(low, high\) "
                                         r"tuple, got \[0, 1\]"):
        O.RangeSigmoid([0, 1])
    with pytest.raises(ValueError, match="ssl_type must name a wav2vec 2.0 family builder such "
                                         "as 'wav2vec2_base', got 'resnet50'"):
        models.squim_subjective_model("resnet50", 768, 32, 5)
    sub = models.SquimSubjective(models.wav2vec2_model(**W2V_TINY), nn.Linear(12, 4),
                                 S.Predictor(8, 5))
    with pytest.raises(ValueError, match=r"expected a 2-D reference \(batch, time\), got shape "
                                         r"\[300\]"):
        sub(fiamma.randn(1, 300), fiamma.randn(300))
    with pytest.raises(ValueError, match="same batch size, got 2 and 1"):
        sub(fiamma.randn(2, 300), fiamma.randn(1, 300))
    with pytest.raises(ValueError, match=r"the reference is empty \(shape \[1, 0\]\)"):
        sub(fiamma.randn(1, 300), fiamma.zeros(1, 0))


def test_names_exported():
    for name in ("SquimObjective", "SquimSubjective", "squim_objective_model",
                 "squim_objective_base", "squim_subjective_model", "squim_subjective_base"):
        assert name in models.__all__ and getattr(models, name) is getattr(models.squim, name)
