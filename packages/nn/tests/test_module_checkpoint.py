"""Whole-module checkpoints: ``fiamma.save(model)`` writes the module as PyTorch's torch.save does
(a pickle of the object, tensors as storages of the zip format) and ``fiamma.load`` rebuilds it
only from classes allowlisted with ``fiamma.serialization.add_safe_globals`` / ``safe_globals``.
A rebuilt module works: forward, state_dict, parameters, backward, save again."""

import io
import pickle

import numpy as np
import pytest

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.serialization import clear_safe_globals, get_safe_globals, safe_globals


class Net(nn.Module):
    """A user-defined model: submodules, a ModuleList, a persistent and a non-persistent buffer,
    plain attributes, a function kept as an attribute."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.blocks = nn.ModuleList([nn.Linear(12, 12), nn.Linear(12, 12)])
        self.head = nn.Linear(12, 2)
        self.register_buffer("scale", fiamma.tensor([0.5]))
        self.register_buffer("cache", fiamma.zeros(2), persistent=False)
        self.act = F.relu
        self.depth = 2

    def forward(self, x):
        x = self.bn(self.conv(x)).flatten(1)
        for b in self.blocks:
            x = self.act(b(x))
        return self.head(x) * self.scale


ALLOW = [Net, nn.Conv2d, nn.BatchNorm2d, nn.ModuleList, nn.Linear, F.relu]


def roundtrip(obj):
    buf = io.BytesIO()
    fiamma.save(obj, buf)
    buf.seek(0)
    return fiamma.load(buf)


@pytest.fixture(autouse=True)
def _clean_allowlist():
    clear_safe_globals()
    yield
    clear_safe_globals()


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        np.testing.assert_array_equal(sa[k].numpy(), sb[k].numpy(), err_msg=k)


def test_sequential_roundtrip():
    fiamma.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with pytest.raises(pickle.UnpicklingError,
                       match=r"fiamma\.nn\.modules\.container\.Sequential.*"
                       r"add_safe_globals\(\[Sequential\]\)"):
        roundtrip(m)
    with pytest.raises(pickle.UnpicklingError, match=r"fiamma\.nn\.modules\.linear\.Linear"):
        with safe_globals([nn.Sequential]):  # every class in the file must be allowlisted
            roundtrip(m)
    with safe_globals([nn.Sequential, nn.Linear, nn.ReLU]):
        m2 = roundtrip(m)
    assert get_safe_globals() == []
    x = fiamma.randn(5, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())
    _same_state(m, m2)
    assert all(type(p) is nn.Parameter and p.requires_grad for p in m2.parameters())
    assert len(list(m2.parameters())) == 4


def test_user_module_roundtrip_trains_and_saves_again(tmp_path):
    fiamma.manual_seed(1)
    m = Net()
    m.eval()
    m.bn.running_mean.fill_(0.25)
    path = tmp_path / "net.pt"
    fiamma.save(m, path)
    with safe_globals(ALLOW):
        m2 = fiamma.load(path)
    assert type(m2) is Net and not m2.training and not m2.bn.training
    assert m2.act is F.relu and m2.depth == 2
    assert "cache" not in m2.state_dict() and m2.cache.tolist() == [0.0, 0.0]
    _same_state(m, m2)
    x = fiamma.randn(2, 1, 2, 2)
    np.testing.assert_allclose(m(x).detach().numpy(), m2(x).detach().numpy(), rtol=0, atol=0)
    # it trains: gradients reach the rebuilt parameters, an optimizer step changes them
    m2.train()
    m2(x).sum().backward()
    assert m2.head.weight.grad is not None and m2.conv.weight.grad.shape == (3, 1, 3, 3)
    names = [n for n, _ in m2.named_parameters()]
    assert names == [n for n, _ in m.named_parameters()]
    # the rebuilt module saves and loads again, and into a fresh model by state_dict
    fiamma.save(m2, path)
    with safe_globals(ALLOW):
        m3 = fiamma.load(path)
    _same_state(m2, m3)
    fresh = Net()
    fresh.load_state_dict(m3.state_dict())
    _same_state(fresh, m3)


def test_shared_parameters_stay_shared():
    lin = nn.Linear(4, 4)
    m = nn.Sequential(lin, nn.Tanh(), lin)  # one layer used twice
    with safe_globals([nn.Sequential, nn.Linear, nn.Tanh]):
        m2 = roundtrip(m)
    assert m2[0] is m2[2]
    assert len(list(m2.parameters())) == 2


def test_recurrent_and_attention_modules():
    fiamma.manual_seed(2)
    lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True)
    enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    allow = [nn.LSTM, nn.TransformerEncoderLayer, nn.MultiheadAttention, nn.Linear,
             nn.Dropout, nn.LayerNorm, F.relu,
             nn.modules.transformer.NonDynamicallyQuantizableLinear]
    with safe_globals(allow):
        lstm2, enc2 = roundtrip([lstm, enc])
    x = fiamma.randn(2, 3, 4)
    np.testing.assert_array_equal(lstm(x)[0].detach().numpy(), lstm2(x)[0].detach().numpy())
    y = fiamma.randn(2, 3, 8)
    enc.eval()
    enc2.eval()
    np.testing.assert_allclose(enc(y).detach().numpy(), enc2(y).detach().numpy(), atol=1e-6)


@pytest.mark.parity
def test_torch_reads_a_fiamma_module_and_fiamma_refuses_torchs(tmp_path):
    torch = pytest.importorskip("torch")
    fiamma.manual_seed(3)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    path = tmp_path / "f.pt"
    fiamma.save(m, path)
    # torch refuses it by default (weights_only=True) and reads it with weights_only=False:
    # the object is fiamma's Sequential holding torch Parameters (torch rebuilds tensors)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    t = torch.load(path, weights_only=False)
    assert type(t).__name__ == "Sequential" and isinstance(t[0].weight, torch.nn.Parameter)
    np.testing.assert_array_equal(t[0].weight.detach().numpy(), m[0].weight.detach().numpy())
    assert t[0].weight.requires_grad
    # torch's own pickled model is refused here by name by default, and read as fiamma's
    # classes when the caller trusts the file (weights_only=False)
    torch.save(torch.nn.Sequential(torch.nn.Linear(3, 4)), path)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"global torch\.nn\.modules\.container\.Sequential.*state_dict"):
        fiamma.load(path)
    f = fiamma.load(path, weights_only=False)
    assert type(f) is nn.Sequential and type(f[0]) is nn.Linear


class RNNModel(nn.Module):
    """The shape of pytorch/examples' word_language_model: saved whole with torch.save(model, f)
    and loaded under torch.serialization.safe_globals([...])."""

    def __init__(self, ntoken=20, ninp=6, nhid=8):
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, 2, dropout=0.5)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight if ninp == nhid else self.decoder.weight
        self.rnn_type, self.nhid, self.nlayers = "LSTM", nhid, 2

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


def test_word_language_model_flow(tmp_path):
    fiamma.manual_seed(4)
    model = RNNModel(ninp=8)  # tied weights: decoder.weight is encoder.weight
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        fiamma.save(model, f)
    allow = [RNNModel, nn.Dropout, nn.Linear, nn.GRU, nn.LSTM, nn.RNN, nn.Embedding]
    with open(path, "rb") as f, safe_globals(allow):
        m2 = fiamma.load(f)
    assert m2.decoder.weight is m2.encoder.weight
    model.eval()
    m2.eval()
    x = fiamma.randint(0, 20, (5, 3))
    h = (fiamma.zeros(2, 3, 8), fiamma.zeros(2, 3, 8))
    np.testing.assert_array_equal(model(x, h)[0].detach().numpy(), m2(x, h)[0].detach().numpy())
