import io
import warnings

import numpy as np
import pytest
from models import MLP, RNNLM, BiLSTM, CausalSelfAttention, SmallCNN, randn, transformer_encoder

import fiamma
import fiamma.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.jit  # noqa: E402
import fiamma.onnx  # noqa: E402


def _export(m, args, **kw):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)  # nothing baked in
        fiamma.onnx.export(m, args, buf, **kw)
    data = buf.getvalue()
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return data, ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _run_eager(m, args):
    with fiamma.no_grad():
        out = m(*args)
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in out]


def _check(m, args, runs=(), rtol=1e-4, **kw):
    if isinstance(m, nn.Module):
        m.eval()
    args = args if isinstance(args, tuple) else (args,)
    _, sess = _export(m, args, **kw)
    names = [i.name for i in sess.get_inputs()]
    for a in (args,) + tuple(runs):
        want = _run_eager(m, a)
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, a)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            scale = np.abs(w).max() + 1e-12
            assert np.abs(g - w).max() <= rtol * scale, (np.abs(g - w).max(), scale)


BATCH = {"input_0": {0: "batch"}, "output_0": {0: "batch"}}


def test_small_cnn_dynamic_batch():
    _check(SmallCNN(), randn(2, 1, 8, 8), runs=[(randn(5, 1, 8, 8, seed=1),)],
           dynamic_axes=BATCH)


def test_mlp_names_and_opset():
    data, sess = _export(MLP().eval(), randn(2, 64), input_names=["x"], output_names=["y"],
                         opset_version=17, dynamic_axes={"x": [0], "y": [0]})
    model = onnx.load_from_string(data)
    assert model.opset_import[0].version == 17
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert sess.get_inputs()[0].shape[0] == "x_dynamic_axes_1"
    assert {i.name for i in model.graph.initializer} >= {"net.0.bias"}


def test_default_opset_is_newest():
    data, _ = _export(MLP().eval(), randn(2, 64))
    assert onnx.load_from_string(data).opset_import[0].version == onnx.defs.onnx_opset_version()


def test_bad_opset():
    with pytest.raises(ValueError, match="opset_version must be at most"):
        fiamma.onnx.export(MLP(), randn(1, 64), io.BytesIO(),
                           opset_version=onnx.defs.onnx_opset_version() + 1)


def test_older_opset_converted_or_kept_with_a_warning():
    ort = pytest.importorskip("onnxruntime")

    m, x = MLP().eval(), randn(2, 64)
    want = m(x).detach().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 16 converts: no warning
        prog = fiamma.onnx.export(m, x, None, opset_version=16)
    assert prog.model_proto.opset_import[0].version == 16
    # 10: ONNX's converter has no adapter for some op: kept at 17, said so (PyTorch keeps 18)
    with pytest.warns(UserWarning, match="opset_version 10 is older .* uses opset 17"):
        prog10 = fiamma.onnx.export(m, x, None, opset_version=10)
    assert prog10.model_proto.opset_import[0].version == 17
    for p in (prog, prog10):
        sess = ort.InferenceSession(p.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"input_0": x.numpy()})[0], want,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_rnn_language_models(kind):
    ids = fiamma.randint(0, 50, (7, 3))
    _check(RNNLM(kind), ids, runs=[(fiamma.randint(0, 50, (11, 3)),)],
           dynamic_axes={"input_0": {0: "seq"}, "output_0": {0: "seq"}})


def test_bidirectional_lstm_with_state():
    _check(BiLSTM(), (randn(3, 4, 8), randn(2, 3, 6, seed=1), randn(2, 3, 6, seed=2)))


def test_transformer_encoder():
    _check(transformer_encoder(), randn(2, 5, 16), runs=[(randn(4, 5, 16, seed=1),)],
           dynamic_axes=BATCH)


def test_sdpa_attention():
    _check(CausalSelfAttention(), randn(2, 6, 16), runs=[(randn(3, 6, 16, seed=1),)],
           dynamic_axes=BATCH)


def test_norms_pooling_resampling_padding():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = nn.GroupNorm(2, 4)
            self.conv = nn.Conv2d(4, 4, 3, groups=2, padding=1)
            self.ct = nn.ConvTranspose2d(4, 2, 2, stride=2)

        def forward(self, x):
            F = nn.functional
            y = self.gn(x)
            y = F.avg_pool2d(self.conv(y), 2, ceil_mode=True)
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = F.interpolate(y, size=(6, 6), mode="nearest")
            y = F.pad(y, (1, 2, 0, 1), mode="reflect")
            y = F.adaptive_avg_pool2d(self.ct(F.hardswish(y)), (7, 9))
            return F.softplus(F.leaky_relu(y, 0.1)) + F.silu(y).clamp(max=0.5)

    _check(M(), randn(2, 4, 6, 6), runs=[(randn(3, 4, 6, 6, seed=1),)], dynamic_axes=BATCH)


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "mish", "hardsigmoid", "logsigmoid",
                                  "silu", "leaky_relu", "softplus", "hardswish", "elu_scaled",
                                  "hardtanh", "relu6", "softshrink", "hardshrink", "threshold"])
def test_fused_activations(name):
    """core's fused activations (one recorded op with its parameters) in a trace and in ONNX:
    Elu/Selu/Celu where one matches, the formula for other ELU parameters."""
    F = nn.functional
    fns = {"elu": lambda t: F.elu(t, 0.7), "celu": lambda t: F.celu(t, 2.0),
           "leaky_relu": lambda t: F.leaky_relu(t, 0.3),
           "softplus": lambda t: F.softplus(t, 2.0, 5.0),
           "elu_scaled": lambda t: fiamma.fused.activation("elu", t, 0.5, 2.0, 3.0),
           "hardtanh": lambda t: F.hardtanh(t, -2.0, 1.5),
           "softshrink": lambda t: F.softshrink(t, 1.0),
           "hardshrink": lambda t: F.hardshrink(t, 1.0),
           "threshold": lambda t: F.threshold(t, 0.5, -4.0)}
    fn = fns.get(name) or getattr(F, name)

    class M(nn.Module):
        def forward(self, x):
            return fn(x * 3.0) + 1.0

    x = randn(2, 3, 4)
    tr = fiamma.jit.trace(M(), (x,))
    np.testing.assert_array_equal(tr(x).numpy(), M()(x).numpy())
    _check(M(), x, runs=[(randn(2, 3, 4, seed=2),)], rtol=1e-5)


def test_embedding_and_tensor_ops():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)

        def forward(self, ids, x):
            e = self.emb(ids)                          # (B, T, 8)
            y = fiamma.cat([e, x], dim=-1).permute(0, 2, 1)
            y = y[:, 2:, 1:].mean(dim=1) + y[:, :, :4].amax(dim=1)
            return fiamma.where(y > 0, y, y * 0.5).softmax(-1), e.flatten(1)

    _check(M(), (fiamma.randint(0, 20, (2, 5)), randn(2, 5, 4)))


def test_unsupported_op_names_op_and_line():
    def f(x):
        return fiamma.linalg.inv(x)

    with pytest.raises(fiamma.onnx.UnsupportedOpError, match=r"linalg_inv.*test_onnx.py:\d+"):
        fiamma.onnx.export(f, randn(4, 4), io.BytesIO())


def test_export_params_false_makes_weights_inputs():
    data, sess = _export(MLP().eval(), randn(2, 64), export_params=False,
                         do_constant_folding=False)
    names = {i.name for i in sess.get_inputs()}
    assert "net.0.weight" in names


def test_export_to_path(tmp_path):
    p = tmp_path / "m.onnx"
    fiamma.onnx.export(SmallCNN(), randn(1, 1, 8, 8), str(p))
    onnx.checker.check_model(str(p), full_check=True)


@pytest.mark.parametrize("shape,size", [((2, 3, 2, 2), (7, 7)), ((1, 2, 10, 7), (3, 4)),
                                        ((1, 2, 6, 9), (3, 3))])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pools_any_size(shape, size, kind):
    fn = getattr(nn.functional, f"adaptive_{kind}_pool2d")
    _check(lambda x: fn(x, size), randn(*shape))


def test_word_language_model_export_shape():
    """pytorch/examples' word_language_model exports ``model, (input, hidden)`` with hidden an
    (h, c) tuple for LSTM: nested inputs become input_0..2, outputs (decoded, h, c)."""

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(30, 8)
            self.rnn = nn.LSTM(8, 12, 2, dropout=0.2)
            self.decoder = nn.Linear(12, 30)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            decoded = self.decoder(output).view(-1, 30)
            return nn.functional.log_softmax(decoded, dim=1), hidden

    m = RNNModel().eval()
    ids = fiamma.zeros(35, 1, dtype=fiamma.int64)
    hidden = (fiamma.zeros(2, 1, 12), fiamma.zeros(2, 1, 12))
    data, sess = _export(m, (ids, hidden))
    assert [i.name for i in sess.get_inputs()] == ["input_0", "input_1", "input_2"]
    x = fiamma.randint(0, 30, (35, 1))
    h = (randn(2, 1, 12), randn(2, 1, 12, seed=1))
    got = sess.run(None, {"input_0": x.numpy(), "input_1": h[0].numpy(),
                          "input_2": h[1].numpy()})
    with fiamma.no_grad():
        out, (hn, cn) = m(x, h)
    for g, w in zip(got, (out, hn, cn)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class ClassToken(nn.Module):
    """ViT's pattern: a parameter expanded to the batch size read in Python."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Parameter(fiamma.randn(1, 1, 4))

    def forward(self, x):
        n = x.shape[0]
        y = fiamma.cat([self.tok.expand(n, -1, -1), x], dim=1)
        return y.reshape(n * 4, -1)[:, :2]


def test_sizes_read_in_python_follow_the_batch():
    """Traced twice more with other batch sizes, the expand/reshape sizes that move with the
    batch are computed from the input's shape in the file."""
    _check(ClassToken(), randn(1, 3, 4), runs=[(randn(3, 3, 4, seed=1),)], dynamic_axes=BATCH)


def test_baked_batch_size_is_reported():
    def f(x):
        # len() gives a plain int (not a symbolic size): the batch is baked in
        return fiamma.cat([fiamma.zeros(len(x), 1, 4), x], dim=1)

    with pytest.warns(fiamma.jit.TracerWarning, match="dynamic axes"):
        fiamma.onnx.export(f, randn(2, 3, 4), io.BytesIO(), dynamic_axes=BATCH)


def test_verify_and_model_return():
    m = fiamma.onnx.export(SmallCNN().eval(), randn(2, 1, 8, 8), None, verify=True,
                           dynamo=True)
    assert isinstance(m.model_proto, onnx.ModelProto)
    with pytest.raises(ValueError, match="not inputs of the forward"):
        fiamma.onnx.export(MLP(), randn(1, 64), None, dynamic_shapes={"y": {0: "b"}})


INDEX_OPS = {
    "argmax": lambda x: x.argmax(1).float() + fiamma.argmin(x).float(),
    "casts": lambda x: (x * 3).long().float() + x.to(fiamma.float64).float(),
    "max_dim": lambda x: (x.max(1).values + x.max(1).indices.float()
                          + x.min(1, keepdim=True)[0].sum()),
    "max_all": lambda x: x.max() + x.min(),
    "topk": lambda x: x.topk(2, 1).indices.float() + x.topk(2, 1, largest=False).values,
    "sort": lambda x: x.sort(1, descending=True).values,
    "one_hot": lambda x: nn.functional.one_hot(x.argmax(1), 4).float(),
    "any_all": lambda x: (x > 0).any(1).float() + (x > 0).all().float(),
    "var_std_norm": lambda x: x.var(1) + x.std() + x.norm(dim=1) + x.norm(p=1, dim=1),
    "detach": lambda x: x.detach() * 2 + x.detach()[:, 1:2],
}


@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_ops_core_does_not_record_for_autograd(name):
    """Integer-valued results, casts and detach are recorded by the tracer itself: in the
    trace and in ONNX Runtime they follow the input instead of being baked in."""
    f = INDEX_OPS[name]
    x = randn(3, 4)
    _check(f, x, runs=[(randn(3, 4, seed=5),)])
    tm = fiamma.jit.trace(f, x)
    x2 = randn(3, 4, seed=6)
    np.testing.assert_allclose(tm(x2).numpy(), f(x2).numpy(), rtol=1e-6, atol=1e-6)


MORE = {
    "instance_norm": (nn.InstanceNorm2d(4, affine=True), (2, 4, 6, 6)),
    "bicubic": (lambda x: nn.functional.interpolate(x, scale_factor=2, mode="bicubic"),
                (2, 4, 6, 6)),
    "nearest_exact": (lambda x: nn.functional.interpolate(x, size=(9, 7), mode="nearest-exact"),
                      (2, 4, 6, 6)),
    "unfold": (nn.Unfold(2, dilation=1, padding=1, stride=2), (2, 3, 6, 6)),
    "sdpa_bool_mask": (lambda x: nn.functional.scaled_dot_product_attention(
        x, x, x, attn_mask=fiamma.ones(5, 5).tril().bool()), (2, 5, 8)),
    "scatter_masked_fill": (lambda x: x.scatter(2, fiamma.zeros(2, 5, 3, dtype=fiamma.int64), 1.0)
                            + x.masked_fill(x > 1, 0.0), (2, 5, 8)),
    "pixel_shuffle_glu": (lambda x: nn.functional.glu(nn.functional.pixel_shuffle(x, 2), 1),
                          (2, 8, 3, 3)),
    "multihead_attention": (nn.MultiheadAttention(8, 2), None),
}


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_layers(name):
    m, shape = MORE[name]
    if shape is None:
        args = (randn(5, 2, 8), randn(5, 2, 8, seed=1), randn(5, 2, 8, seed=2))
    else:
        args = (randn(*shape),)
    _check(m, args)


def test_forward_under_no_grad_is_not_constant():
    # segment-anything's export script: a forward decorated with @no_grad() (and an export
    # inside ``with no_grad():``) wrote a file of Identity nodes on the traced outputs
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        @fiamma.no_grad()
        def forward(self, x):
            return self.lin(x).relu() * 3

    m = M().eval()
    with fiamma.no_grad():
        data, _ = _export(m, (randn(4, 3),), dynamic_axes=BATCH)
    ops = [n.op_type for n in onnx.load_from_string(data).graph.node]
    assert "Gemm" in ops or "MatMul" in ops, ops
    _check(m, (randn(4, 3),), runs=((randn(7, 3, seed=5),),), dynamic_axes=BATCH)


def test_repeat_interleave():
    # segment-anything's mask decoder: repeat_interleave(image_embeddings, n, dim=0)
    class M(nn.Module):
        def forward(self, x):
            return (fiamma.repeat_interleave(x, 2, dim=0),
                    fiamma.repeat_interleave(x, fiamma.tensor([1, 3]), dim=1),
                    x.repeat_interleave(3), x.repeat_interleave(fiamma.tensor(2), dim=-1))

    axes = {"input_0": {0: "b"}, **{f"output_{i}": {0: f"o{i}"} for i in range(4)}}
    _check(M(), randn(4, 2, 3), runs=((randn(6, 2, 3, seed=2),),), dynamic_axes=axes)
    tm = fiamma.jit.trace(M(), randn(4, 2, 3))
    for got, want in zip(tm(randn(5, 2, 3, seed=3)), M()(randn(5, 2, 3, seed=3))):
        assert got.shape == want.shape and fiamma.equal(got, want)


def test_repeat_interleave_counts_from_the_model_are_refused():
    class M(nn.Module):
        def forward(self, x, n):
            return x.repeat_interleave(n, dim=0)

    with pytest.raises(fiamma.onnx.UnsupportedOpError, match="repeat_interleave"):
        _export(M(), (randn(2, 3), fiamma.tensor([1, 2])))


def test_is_in_onnx_export_is_true_only_while_exporting():
    seen = []

    class M(fiamma.nn.Module):
        def forward(self, x):
            seen.append(fiamma.onnx.is_in_onnx_export())
            return x * 2 if fiamma.onnx.is_in_onnx_export() else x

    assert fiamma.onnx.is_in_onnx_export() is False
    buf = io.BytesIO()
    fiamma.onnx.export(M(), fiamma.ones(1, 3), buf)
    assert seen and all(seen)
    assert fiamma.onnx.is_in_onnx_export() is False
    assert M()(fiamma.ones(1)).item() == 1.0
