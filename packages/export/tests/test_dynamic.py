"""Symbolic sizes: sizes read from ``x.shape`` / ``x.size()`` follow the inputs in the traced
module and in the ONNX file (dynamic batch and sequence axes through reshapes)."""

import io
import subprocess
import sys
import warnings

import numpy as np
import pytest
from models import CausalSelfAttention, randn

import fiamma
import fiamma.jit
import fiamma.nn as nn
from fiamma.jit._symbolic import SymInt, evaluate


def shapes_fn(x):
    b, t, c = x.shape
    flat = x.view(x.size(0), -1)                       # (B, T*C)
    heads = x.reshape(b, t, 2, c // 2).transpose(1, 2)   # (B, 2, T, C/2)
    z = fiamma.zeros(x.shape[0], 2) + flat.sum(1, keepdim=True)
    pos = fiamma.arange(t).float()
    ones = x.new_ones(b, 1, 1) + fiamma.zeros_like(x)
    return z, heads.contiguous().view(b, 2, -1), pos * 2, ones, x.flatten(1)


SIZES = [(5, 7, 4), (1, 1, 4), (3, 2, 4)]


def _close(a, b):
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_symint_arithmetic_keeps_the_expression():
    x = fiamma.zeros(3, 4)
    n = SymInt(6, ("dim", x, 0))
    m = (n * 2 + 1) // 3 - n % 4
    assert m == (6 * 2 + 1) // 3 - 6 % 4 and isinstance(m, SymInt)
    assert evaluate(m.expr) == (3 * 2 + 1) // 3 - 3 % 4  # recomputed from x's shape
    assert isinstance(-n, SymInt) and evaluate((-n).expr) == -3
    assert n / 4 == 1.5 and not isinstance(n / 4, SymInt)
    assert n * 0.5 == 3.0 and isinstance(n * 0.5, float)


def test_traced_module_follows_sizes_read_in_python(tmp_path):
    tm = fiamma.jit.trace(shapes_fn, randn(2, 3, 4))
    for s in SIZES:
        x = randn(*s, seed=1)
        for got, want in zip(tm(x), shapes_fn(x)):
            _close(got, want)
    p = tmp_path / "m.pt"
    tm.save(str(p))
    loaded = fiamma.jit.load(str(p))
    x = randn(4, 6, 4, seed=2)
    for got, want in zip(loaded(x), shapes_fn(x)):
        _close(got, want)


def test_size_1_batch_traced_transposes_follow():
    """A transpose that moves only a size-1 batch dim is recorded as the permutation."""
    M = pytest.importorskip("fiamma.vision.models")
    fiamma.manual_seed(0)
    vit = M.vision_transformer.VisionTransformer(
        image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32,
        num_classes=10).eval()
    tm = fiamma.jit.trace(vit, randn(1, 3, 32, 32))
    x = randn(3, 3, 32, 32, seed=1)
    with fiamma.no_grad():
        _close(tm(x), vit(x))


def test_nanogpt_attention_batch_and_sequence():
    m = CausalSelfAttention().eval()
    tm = fiamma.jit.trace(m, randn(2, 6, 16))
    for s in [(3, 9, 16), (1, 2, 16)]:
        x = randn(*s, seed=3)
        with fiamma.no_grad():
            _close(tm(x), m(x))


class BufferMask(nn.Module):
    """nanoGPT's non-flash path: a causal buffer sliced to the sequence length."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bias", fiamma.ones(16, 16).tril().view(1, 1, 16, 16))

    def forward(self, x):
        B, T, C = x.size()
        att = (x @ x.transpose(1, 2)).unsqueeze(1)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return att.softmax(-1)[..., -T:, 1:T].squeeze(1)


def from_end(x):
    """Positions counted from the end follow the size (a sequence model's ``out[:, -1]``)."""
    return x[:, -1], x[..., -3:, None], x[-2:, 1:-1], x[:, -2, None, 1]


def test_indices_from_the_end_follow_the_size():
    tm = fiamma.jit.trace(from_end, randn(2, 5, 4))
    for s in [(3, 9, 4), (4, 3, 6)]:
        x = randn(*s, seed=2)
        for got, want in zip(tm(x), from_end(x)):
            _close(got, want)


class Skip(nn.Module):
    """A U-Net-style skip: upsampled back to the input's own spatial size."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.up = nn.Conv2d(4, 3, 1)

    def forward(self, x):
        y = nn.functional.interpolate(self.down(x), size=x.shape[2:], mode="bilinear")
        return x + self.up(y)


def test_interpolate_to_a_size_read_from_shapes():
    m = Skip().eval()
    tm = fiamma.jit.trace(m, randn(1, 3, 9, 7))
    x = randn(2, 3, 13, 10, seed=1)
    with fiamma.no_grad():
        _close(tm(x), m(x))


def test_slices_with_bounds_read_from_shapes():
    m = BufferMask()
    tm = fiamma.jit.trace(m, randn(2, 5, 4))
    x = randn(3, 9, 4, seed=1)
    _close(tm(x), m(x))


onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.onnx  # noqa: E402


def _session(m, args, **kw):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        fiamma.onnx.export(m, args, buf, **kw)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    return ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def test_onnx_sizes_read_in_python():
    names = ["z", "heads", "pos", "ones", "flat"]
    sess = _session(shapes_fn, (randn(2, 3, 4),), output_names=names,
                    dynamic_axes={"input_0": {0: "B", 1: "T"}, "z": [0], "heads": [0, 2],
                                  "pos": [0], "ones": [0, 1], "flat": [0, 1]})
    for s in SIZES:
        x = randn(*s, seed=1)
        for got, want in zip(sess.run(None, {"input_0": x.numpy()}), shapes_fn(x)):
            _close(got, want.numpy())


def test_onnx_nanogpt_attention_batch_and_sequence():
    m = CausalSelfAttention().eval()
    sess = _session(m, (randn(2, 6, 16),),
                    dynamic_axes={"input_0": {0: "B", 1: "T"}, "output_0": {0: "B", 1: "T"}})
    for s in [(3, 9, 16), (1, 2, 16)]:
        x = randn(*s, seed=3)
        with fiamma.no_grad():
            _close(sess.run(None, {"input_0": x.numpy()})[0], m(x).numpy())


def test_onnx_slices_with_bounds_read_from_shapes():
    m = BufferMask()
    sess = _session(m, (randn(2, 5, 4),),
                    dynamic_axes={"input_0": {0: "B", 1: "T"}, "output_0": [0, 1, 2]})
    for s in [(3, 9, 4), (1, 2, 4)]:
        x = randn(*s, seed=1)
        _close(sess.run(None, {"input_0": x.numpy()})[0], m(x).numpy())


def test_onnx_indices_from_the_end():
    sess = _session(from_end, (randn(2, 5, 4),),
                    dynamic_axes={"input_0": [0, 1, 2], "output_0": [0, 1],
                                  "output_1": [0, 1], "output_2": [1, 2], "output_3": [0]})
    for s in [(3, 9, 4), (4, 3, 6)]:
        x = randn(*s, seed=2)
        for got, want in zip(sess.run(None, {"input_0": x.numpy()}), from_end(x)):
            _close(got, want.numpy())


def test_onnx_interpolate_to_a_size_read_from_shapes():
    m = Skip().eval()
    sess = _session(m, (randn(1, 3, 9, 7),),
                    dynamic_axes={"input_0": [0, 2, 3], "output_0": [0, 2, 3]})
    x = randn(2, 3, 13, 10, seed=1)
    with fiamma.no_grad():
        _close(sess.run(None, {"input_0": x.numpy()})[0], m(x).numpy())


class RNNModel(nn.Module):
    """pytorch/examples word_language_model's RNNModel (sequence first: (T, B) ids)."""

    def __init__(self, rnn_type, ntoken=30, ninp=8, nhid=12, nlayers=2):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=0.2)
        else:
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=rnn_type[4:].lower(),
                              dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        z = fiamma.zeros(self.nlayers, bsz, self.nhid)
        return (z, z.clone()) if self.rnn_type == "LSTM" else z


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH"])
def test_word_language_model_dynamic_batch_and_sequence(kind):
    """main.py's export (``model, (input, hidden)``, traced at T=35, B=1) with the sequence and
    batch axes dynamic runs in ORT at other lengths and batch sizes."""
    m = RNNModel(kind).eval()
    ids = fiamma.zeros(35, 1, dtype=fiamma.int64)
    hidden = m.init_hidden(1)
    lstm = kind == "LSTM"
    hnames = ["h0", "c0"] if lstm else ["h0"]
    onames = ["hn", "cn"] if lstm else ["hn"]
    dyn = {"ids": {0: "T", 1: "B"}, "logp": {0: "TB"}}
    dyn.update({n: {1: "B"} for n in hnames + onames})
    sess = _session(m, (ids, hidden), input_names=["ids"] + hnames,
                    output_names=["logp"] + onames, dynamic_axes=dyn)
    for T, B in [(9, 4), (50, 2), (1, 1)]:
        fiamma.manual_seed(T)
        x = fiamma.randint(0, 30, (T, B))
        h = (randn(2, B, 12), randn(2, B, 12, seed=1)) if lstm else randn(2, B, 12)
        flat = [x] + (list(h) if lstm else [h])
        got = sess.run(None, {n: t.numpy() for n, t in zip(["ids"] + hnames, flat)})
        with fiamma.no_grad():
            out, hn = m(x, h)
        for g, w in zip(got, [out] + (list(hn) if lstm else [hn])):
            _close(g, w.numpy())


def test_traced_module_sizes_in_a_fresh_process(tmp_path):
    """Saved with symbolic sizes, loaded where the model code was never imported."""
    m = RNNModel("GRU").eval()
    tm = fiamma.jit.trace(m, (fiamma.zeros(35, 1, dtype=fiamma.int64), m.init_hidden(1)))
    p = tmp_path / "lm.pt"
    tm.save(str(p))
    x = fiamma.randint(0, 30, (7, 3))
    h = randn(2, 3, 12)
    with fiamma.no_grad():
        want = m(x, h)[0]
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "h.npy", h.numpy())
    np.save(tmp_path / "want.npy", want.numpy())
    code = (
        "import sys, numpy as np, fiamma, fiamma.jit\n"
        "d = sys.argv[1]\n"
        "tm = fiamma.jit.load(d + '/lm.pt')\n"
        "out, _ = tm(fiamma.from_numpy(np.load(d + '/x.npy')), "
        "fiamma.from_numpy(np.load(d + '/h.npy')))\n"
        "np.testing.assert_allclose(out.numpy(), np.load(d + '/want.npy'), rtol=1e-5, "
        "atol=1e-6)\n"
        "assert 'test_dynamic' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
