"""Dynamic quantization: quantize_dynamic, its qconfigs and the nn.quantized.dynamic modules,
against a float64 reference of fbgemm's arithmetic and against PyTorch (parity)."""
import io
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.ao.quantization as tq
from fiamma import nn
from fiamma.ao.nn.quantized import dynamic as nnqd


def _f(a):
    return fiamma.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _ref_qparams(lo, hi, qmax=127):
    """ChooseQuantizationParams in float64 over [0, qmax] (the dynamic path's 7-bit range)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / qmax
    if np.float32(scale) == 0:
        scale = 0.1
    if scale < float(np.float32(6.1e-5)):
        raise AssertionError("the reference does not cover tiny ranges")
    z_lo, z_hi = -lo / scale, qmax - hi / scale
    err_lo, err_hi = -abs(lo / scale), qmax - abs(hi / scale)
    z = z_lo if err_lo < err_hi else z_hi
    return float(np.float32(scale)), int(np.clip(np.rint(z), 0, qmax))


def _ref_linear(x, qw, bias):
    """float64 reference: quantize ``x`` with its range, exact integer product with the int8
    weight, back to float with the scales and the bias."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
    s, z = _ref_qparams(x.min(), x.max())
    inv = np.float64(np.float32(1.0) / np.float32(s))
    xq = np.clip(np.rint((x * inv + z).astype(np.float32)), 0, 255).astype(np.int64)
    wi = qw.int_repr().numpy().astype(np.int64)
    if qw.qscheme() in (fiamma.per_channel_affine, fiamma.per_channel_symmetric):
        ws = qw.q_per_channel_scales().numpy().astype(np.float32)
        wz = qw.q_per_channel_zero_points().numpy().astype(np.int64)
    else:
        ws = np.full(wi.shape[0], qw.q_scale(), dtype=np.float32)
        wz = np.full(wi.shape[0], qw.q_zero_point(), dtype=np.int64)
    acc = (xq - z) @ (wi - wz[:, None]).T  # exact in int64
    mult = (np.float32(s) * ws).astype(np.float64)
    y = acc.astype(np.float64) * mult
    return y if bias is None else y + bias.detach().numpy().astype(np.float64)


def _dyn_linear(i, o, qconfig=None, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    m = nn.Sequential(nn.Linear(i, o, bias=bias))
    with fiamma.no_grad():
        m[0].weight.copy_(_f(rng.standard_normal((o, i)) * 0.2))
        if bias:
            m[0].bias.copy_(_f(rng.standard_normal(o)))
    spec = {nn.Linear} if qconfig is None else {nn.Linear: qconfig}
    return m, tq.quantize_dynamic(m, spec, dtype=fiamma.qint8)


@pytest.mark.parametrize("qconfig", [None, tq.per_channel_dynamic_qconfig])
@pytest.mark.parametrize("shape", [(5, 8, 16), (33, 300, 20), (4, 2100, 6)])
def test_linear_matches_float64_reference(qconfig, shape):
    n, i, o = shape
    m, q = _dyn_linear(i, o, qconfig)
    lin = q[0]
    assert isinstance(lin, nnqd.Linear)
    want = (fiamma.per_channel_affine if qconfig is not None else fiamma.per_tensor_affine)
    assert lin.weight().qscheme() == want and lin.weight().dtype == fiamma.qint8
    x = np.random.default_rng(1).standard_normal((n, i)) * 3
    y = q(_f(x)).numpy()
    ref = _ref_linear(x.astype(np.float32), lin.weight(), lin.bias())
    np.testing.assert_allclose(y, ref, rtol=2e-7, atol=1e-6)
    # and close to the float layer (quantization error only)
    np.testing.assert_allclose(y, m(_f(x)).detach().numpy(), atol=0.05 * np.abs(ref).max())


def test_linear_batch_range_and_3d_input():
    _, q = _dyn_linear(6, 4, bias=False)
    lin = q[0]
    x = np.random.default_rng(2).standard_normal((3, 5, 6)).astype(np.float32)
    y = lin(_f(x)).numpy()
    assert y.shape == (3, 5, 4)
    np.testing.assert_allclose(y.reshape(15, 4), _ref_linear(x.reshape(15, 6), lin.weight(), None),
                               rtol=2e-7, atol=1e-6)
    # each call takes its own range: scaling the input by 2 scales the output by 2 exactly
    np.testing.assert_allclose(lin(_f(2 * x)).numpy(), 2 * y, rtol=1e-6, atol=1e-6)
    # a float64 input gives a float64 output
    assert lin(_f(x).double()).dtype == fiamma.float64


def test_long_reduction_is_exact():
    """in_features beyond float32's exact range for one product are summed in chunks."""
    _, q = _dyn_linear(5000, 3)
    lin = q[0]
    x = np.random.default_rng(3).standard_normal((2, 5000)).astype(np.float32)
    np.testing.assert_allclose(lin(_f(x)).numpy(),
                               _ref_linear(x, lin.weight(), lin.bias()), rtol=2e-7, atol=1e-5)


def test_float16_dynamic_linear():
    m, _ = _dyn_linear(8, 5)
    q = tq.quantize_dynamic(m, {nn.Linear}, dtype=fiamma.float16)
    lin = q[0]
    assert isinstance(lin, nnqd.Linear) and lin._packed_params.dtype == fiamma.float16
    assert "dtype=fiamma.float16" in repr(lin) and "qscheme" not in repr(lin)
    x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
    w16 = m[0].weight.detach().numpy().astype(np.float16).astype(np.float64)
    ref = x.astype(np.float64) @ w16.T + m[0].bias.detach().numpy()
    np.testing.assert_allclose(lin(_f(x)).numpy(), ref, rtol=1e-5, atol=1e-5)


def _ref_lstm(x, h, c, mod):
    """One-layer LSTM in float64 whose gate products use the dynamic linear reference (the
    input projected over the whole sequence, the hidden state per step)."""
    w = mod.get_weight()
    b = mod.get_bias()
    gi_all = _ref_linear(x.reshape(-1, x.shape[-1]), w["weight_ih_l0"], b["bias_ih_l0"])
    gi_all = gi_all.reshape(x.shape[0], x.shape[1], -1)
    outs = []
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    for t in range(x.shape[0]):
        g = gi_all[t] + _ref_linear(h.astype(np.float32), w["weight_hh_l0"], b["bias_hh_l0"])
        i, f, gg, o = np.split(g, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(gg)
        h = sig(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def test_lstm_matches_float64_reference():
    rng = np.random.default_rng(5)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 6)
            self.head = nn.Linear(6, 2)

        def forward(self, x, hx):
            out, hx = self.lstm(x, hx)
            return self.head(out), hx
    m = M()
    q = tq.quantize_dynamic(m, {nn.LSTM, nn.Linear}, dtype=fiamma.qint8)
    assert isinstance(q.lstm, nnqd.LSTM) and isinstance(q.head, nnqd.Linear)
    assert isinstance(m.lstm, nn.LSTM)  # not in place
    x = rng.standard_normal((7, 2, 8)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 6)).astype(np.float32)
    c0 = rng.standard_normal((1, 2, 6)).astype(np.float32)
    out, (h, c) = q.lstm(_f(x), (_f(h0), _f(c0)))
    ro, rh, rc = _ref_lstm(x, h0[0].astype(np.float64), c0[0].astype(np.float64), q.lstm)
    np.testing.assert_allclose(out.numpy(), ro, atol=2e-5)
    np.testing.assert_allclose(h.numpy()[0], rh, atol=2e-5)
    np.testing.assert_allclose(c.numpy()[0], rc, atol=2e-5)
    fo, _ = m.lstm(_f(x), (_f(h0), _f(c0)))
    assert np.abs(out.numpy() - fo.detach().numpy()).max() < 0.05


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn_shapes_batch_first_bidirectional(kind):
    f = getattr(nn, kind)(5, 4, num_layers=2, batch_first=True, bidirectional=True)
    q = tq.quantize_dynamic(nn.Sequential(f), {getattr(nn, kind)})[0]
    assert repr(q) == (f"DynamicQuantized{kind}(5, 4, num_layers=2, batch_first=True, "
                       "bidirectional=True)")
    x = fiamma.randn(3, 7, 5)
    out, hx = q(x)
    assert out.shape == (3, 7, 8)
    h = hx[0] if kind == "LSTM" else hx
    assert h.shape == (4, 3, 4)
    # close to the float layer
    fo, _ = f(x)
    assert np.abs(out.numpy() - fo.detach().numpy()).max() < 0.05


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_close_to_float(kind):
    f = getattr(nn, kind)(6, 5)
    q = tq.quantize_dynamic(nn.Sequential(f), {getattr(nn, kind)})[0]
    assert type(q).__name__ == kind and repr(q) == f"DynamicQuantized{kind}(6, 5)"
    x = fiamma.randn(3, 6)
    h = fiamma.randn(3, 5)
    hx = (h, fiamma.randn(3, 5)) if kind == "LSTMCell" else h
    got, want = q(x, hx), f(x, hx)
    got = got[0] if kind == "LSTMCell" else got
    want = want[0] if kind == "LSTMCell" else want
    assert np.abs(got.numpy() - want.detach().numpy()).max() < 0.05
    one = q(x[0])  # unbatched, no state
    assert (one[0] if kind == "LSTMCell" else one).shape == (5,)


def test_qconfig_spec_forms_and_unsupported_left_float():
    m = nn.Sequential(nn.Conv2d(1, 1, 1), nn.Flatten(), nn.Linear(4, 4), nn.LayerNorm(4),
                      nn.Linear(4, 2))
    q = tq.quantize_dynamic(m)  # None: the default types with default_dynamic_qconfig
    assert [type(c).__name__ for c in q] == ["Conv2d", "Flatten", "Linear", "LayerNorm",
                                              "Linear"]
    assert isinstance(q[2], nnqd.Linear) and isinstance(q[0], nn.Conv2d)
    assert not q.training
    q = tq.quantize_dynamic(m, {"2"})  # by name
    assert isinstance(q[2], nnqd.Linear) and type(q[4]) is nn.Linear
    q = tq.quantize_dynamic(m, {"4": tq.per_channel_dynamic_qconfig})
    assert type(q[2]) is nn.Linear and q[4].weight().qscheme() == fiamma.per_channel_affine
    # a qconfig over the whole model (LayerNorm, Conv2d have no dynamic version: stay float)
    q = tq.quantize_dynamic(m, {"": tq.default_dynamic_qconfig})
    assert isinstance(q[3], nn.LayerNorm) and isinstance(q[0], nn.Conv2d)
    assert isinstance(q[2], nnqd.Linear)
    r = tq.quantize_dynamic(m, {nn.Linear}, inplace=True)
    assert r is m and isinstance(m[2], nnqd.Linear)


def test_embedding_dtypes_use_weight_only_qconfigs():
    m = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    q = tq.quantize_dynamic(m, dtype=fiamma.quint8)
    assert type(q[0]).__name__ == "Embedding" and q[0].weight().dtype == fiamma.quint8
    assert type(q[1]) is nn.Linear


def test_errors():
    m = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(RuntimeError, match="quantize_dynamic: unknown dtype"):
        tq.quantize_dynamic(m, {nn.Linear}, dtype=fiamma.int8)
    with pytest.raises(ValueError, match="default settings for"):
        tq.quantize_dynamic(m, dtype=fiamma.qint32)
    with pytest.raises(TypeError, match="qconfig_spec"):
        tq.quantize_dynamic(m, [nn.Linear])
    bad = tq.QConfig(activation=tq.default_dynamic_quant_observer,
                     weight=tq.MinMaxObserver.with_args(dtype=fiamma.quint8))
    with pytest.raises(RuntimeError, match="qint8 and float16, got"):
        tq.quantize_dynamic(m, {nn.Linear: bad})
    q = tq.quantize_dynamic(m, {nn.Linear})[0]
    with pytest.raises(RuntimeError, match="last dimension 5 does not match in_features 4"):
        q(fiamma.randn(2, 5))
    with pytest.raises(TypeError, match="expected a float tensor, got a quantized"):
        q(fiamma.quantize_per_tensor(fiamma.randn(2, 4), 0.1, 0, fiamma.quint8))
    with pytest.raises(TypeError, match="floating-point input"):
        q(fiamma.ones(2, 4, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="unsupported dtype"):
        nnqd.Linear(4, 3, dtype=fiamma.quint8)
    lstm = tq.quantize_dynamic(nn.Sequential(nn.LSTM(4, 3)), {nn.LSTM})[0]
    with pytest.raises(RuntimeError, match="input_size"):
        lstm(fiamma.randn(5, 2, 3))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size"):
        lstm(fiamma.randn(5, 2, 4), (fiamma.randn(1, 3, 3), fiamma.randn(1, 3, 3)))
    with pytest.raises(NotImplementedError, match="proj_size"):
        tq.quantize_dynamic(nn.Sequential(nn.LSTM(4, 3, proj_size=2)), {nn.LSTM})
    with pytest.raises(AssertionError, match="qconfig"):
        nnqd.Linear.from_float(nn.Linear(2, 2))


def test_aliases():
    import fiamma.nn.quantized.dynamic as legacy
    import fiamma.quantization as legacy_tq
    assert legacy is nnqd and legacy.LSTM is nnqd.LSTM
    assert legacy_tq.quantize_dynamic is tq.quantize_dynamic
    assert fiamma.ao.nn.quantized.dynamic is nnqd
    mapping = tq.get_default_dynamic_quant_module_mappings()
    assert mapping[nn.Linear] is nnqd.Linear and mapping[nn.GRUCell] is nnqd.GRUCell
    assert tq.default_dynamic_qconfig.activation().is_dynamic
    assert tq.float16_dynamic_qconfig.weight().dtype == fiamma.float16
    with pytest.raises(AttributeError, match="dynamic quantized convolutions"):
        nnqd.Conv2d  # noqa: B018


@pytest.mark.parametrize("kind", ["Linear", "LSTM", "GRUCell", "Linear16"])
def test_state_dict_round_trip(kind, tmp_path):
    if kind.startswith("Linear"):
        f = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
        dtype = fiamma.float16 if kind == "Linear16" else fiamma.qint8
        spec, x = {nn.Linear}, (fiamma.randn(2, 6),)
    elif kind == "LSTM":
        f, dtype = nn.Sequential(nn.LSTM(6, 4, num_layers=2, bidirectional=True)), fiamma.qint8
        spec, x = {nn.LSTM}, (fiamma.randn(5, 2, 6),)
    else:
        f, dtype, spec, x = nn.Sequential(nn.GRUCell(6, 4)), fiamma.qint8, {nn.GRUCell}, \
            (fiamma.randn(2, 6),)
    q = tq.quantize_dynamic(f, spec, dtype=dtype)
    sd = q.state_dict()
    if kind == "LSTM":
        assert sorted(sd)[:2] == ["0.bias_hh_l0", "0.bias_hh_l0_reverse"]
        assert sd["0.weight_ih_l1"].dtype == fiamma.qint8
    path = tmp_path / "q.pt"
    fiamma.save(sd, path)
    # a freshly quantized model of the same architecture (other weights) loads it
    other = tq.quantize_dynamic(type(f)(*[type(c)(*_args(c)) for c in f]), spec, dtype=dtype)
    other.load_state_dict(fiamma.load(path))

    def flat(o):
        return [o] if isinstance(o, fiamma.Tensor) else [t for e in o for t in flat(e)]
    for a, b in zip(flat(q(*x)), flat(other(*x))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="Missing key"):
        other.load_state_dict({})


def _args(c):
    if isinstance(c, nn.Linear):
        return (c.in_features, c.out_features)
    if isinstance(c, nn.ReLU):
        return ()
    if isinstance(c, nn.LSTM):
        return (c.input_size, c.hidden_size, c.num_layers, c.bias, c.batch_first, c.dropout,
                c.bidirectional)
    return (c.input_size, c.hidden_size)


# ---- parity with PyTorch (fbgemm / x86 engine) ----

def _torch():
    torch = pytest.importorskip("torch")
    if torch.backends.quantized.engine not in ("x86", "fbgemm"):
        pytest.skip("PyTorch's quantized engine is not fbgemm/x86")
    return torch


def _copy_params(tm, fm):
    for n, p in tm.named_parameters():
        getattr(fm, n).data = _f(p.detach().numpy())


def _flat_np(o):
    if isinstance(o, (tuple, list)):
        return [a for e in o for a in _flat_np(e)]
    return [o.detach().numpy() if hasattr(o, "detach") and not isinstance(o, fiamma.Tensor)
            else o.numpy()]


@pytest.mark.parity
@pytest.mark.parametrize("qc", ["default", "per_channel", "float16"])
@pytest.mark.parametrize("shape", [(7, 8, 16), (33, 300, 50), (4, 2000, 10), (3, 5, 3)])
def test_parity_linear(qc, shape):
    torch = _torch()
    n, i, o = shape
    rng = np.random.default_rng(sum(shape))
    tm = torch.nn.Sequential(torch.nn.Linear(i, o))
    fm = nn.Sequential(nn.Linear(i, o))
    _copy_params(tm[0], fm[0])
    name = {"default": "default_dynamic_qconfig", "per_channel": "per_channel_dynamic_qconfig",
            "float16": "float16_dynamic_qconfig"}[qc]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq_ = torch.ao.quantization.quantize_dynamic(
            tm, {torch.nn.Linear: getattr(torch.ao.quantization, name)})
    fq = tq.quantize_dynamic(fm, {nn.Linear: getattr(tq, name)})
    scale = 1e-7 if shape == (3, 5, 3) else 3.0  # a tiny range: the minimum-scale rule
    x = (rng.standard_normal((n, i)) * scale).astype(np.float32)
    yt = tq_(torch.from_numpy(x)).detach().numpy()
    yf = fq(_f(x)).numpy()
    if qc == "float16":  # fbgemm's float16 GEMM sums in its own order
        np.testing.assert_allclose(yf, yt, rtol=1e-5, atol=1e-4)
    else:  # int8: bit-equal
        np.testing.assert_array_equal(yf, yt)
        np.testing.assert_array_equal(fq[0].weight().int_repr().numpy(),
                                      tq_[0].weight().int_repr().numpy())
    assert repr(fq[0]).replace("fiamma.", "torch.") == repr(tq_[0])


@pytest.mark.parity
@pytest.mark.parametrize("kind,kw,xshape,dtype", [
    ("LSTM", {}, (20, 1, 8), "qint8"),
    ("LSTM", {"num_layers": 2}, (10, 3, 8), "qint8"),
    ("LSTM", {"bidirectional": True, "batch_first": True, "num_layers": 2}, (3, 10, 8), "qint8"),
    ("GRU", {"num_layers": 2}, (10, 3, 8), "qint8"),
    ("GRU", {"bidirectional": True}, (10, 3, 8), "qint8"),
    ("LSTMCell", {}, (4, 8), "qint8"),
    ("GRUCell", {}, (4, 8), "qint8"),
    ("RNNCell", {}, (4, 8), "qint8"),
    ("RNNCell", {"nonlinearity": "relu"}, (4, 8), "qint8"),
    ("LSTM", {"num_layers": 2}, (10, 3, 8), "float16"),
    ("GRUCell", {}, (4, 8), "float16"),
])
def test_parity_rnn(kind, kw, xshape, dtype):
    torch = _torch()
    rng = np.random.default_rng(len(xshape) + len(kw))
    tm = getattr(torch.nn, kind)(8, 6, **kw)
    fm = getattr(nn, kind)(8, 6, **kw)
    _copy_params(tm, fm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tqm = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(tm), {getattr(torch.nn, kind)},
            dtype=getattr(torch, dtype))[0]
    fqm = tq.quantize_dynamic(nn.Sequential(fm), {getattr(nn, kind)},
                              dtype=getattr(fiamma, dtype))[0]
    assert repr(fqm) == repr(tqm)
    x = rng.standard_normal(xshape).astype(np.float32)
    got, want = _flat_np(fqm(_f(x))), _flat_np(tqm(torch.from_numpy(x)))
    assert len(got) == len(want)
    for a, b in zip(got, want):  # the gate nonlinearities differ in the last float32 bits
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parity
def test_parity_torch_state_dict_loads_into_dynamic_linear():
    torch = _torch()
    tm = torch.nn.Sequential(torch.nn.Linear(12, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tqm = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear})
    buf = io.BytesIO()
    torch.save(tqm.state_dict(), buf)
    fm = tq.quantize_dynamic(nn.Sequential(nn.Linear(12, 5), nn.ReLU(), nn.Linear(5, 2)),
                             {nn.Linear})
    assert list(fm.state_dict()) == list(tqm.state_dict())
    buf.seek(0)
    fm.load_state_dict(fiamma.load(buf))
    x = np.random.default_rng(9).standard_normal((6, 12)).astype(np.float32)
    np.testing.assert_array_equal(fm(_f(x)).numpy(), tqm(torch.from_numpy(x)).numpy())


def test_quantize_per_tensor_dynamic():
    x = _f([-1.0, 0.5, 3.0])
    q = fiamma.quantize_per_tensor_dynamic(x, fiamma.quint8, False)
    assert q.q_zero_point() == 64 and q.q_scale() == 4.0 / 255  # the double scale
    np.testing.assert_array_equal(q.int_repr().numpy(), [0, 96, 255])
    q7 = fiamma.quantize_per_tensor_dynamic(x, fiamma.qint8, True)  # [-64, 63]
    assert q7.q_zero_point() == -32 and q7.int_repr().numpy().max() == 63
    z = fiamma.quantize_per_tensor_dynamic(fiamma.zeros(3), fiamma.quint8, False)
    assert z.q_scale() == 0.1 and z.q_zero_point() == 0  # an empty range: scale 0.1
    with pytest.raises(ValueError, match="quint8 or fiamma.qint8"):
        fiamma.quantize_per_tensor_dynamic(x, fiamma.qint32, False)
    with pytest.raises(TypeError, match="expected a float tensor"):
        fiamma.quantize_per_tensor_dynamic(fiamma.ones(2, dtype=fiamma.int64), fiamma.qint8,
                                           False)


@pytest.mark.parity
def test_parity_quantize_per_tensor_dynamic():
    torch = _torch()
    rng = np.random.default_rng(11)
    for trial in range(200):
        x = (rng.standard_normal(int(rng.integers(1, 60))) * 10 ** rng.uniform(-9, 4)
             + rng.uniform(-1, 1) * (trial % 2)).astype(np.float32)
        if trial % 5 == 0:
            x = np.abs(x)
        for dt in ("quint8", "qint8"):
            for rr in (False, True):
                t = torch.quantize_per_tensor_dynamic(torch.from_numpy(x), getattr(torch, dt), rr)
                f = fiamma.quantize_per_tensor_dynamic(_f(x), getattr(fiamma, dt), rr)
                assert (f.q_scale(), f.q_zero_point()) == (t.q_scale(), t.q_zero_point())
                np.testing.assert_array_equal(f.int_repr().numpy(), t.int_repr().numpy())


def test_linear_relu_dynamic():
    import fiamma.ao.nn.intrinsic as nni
    from fiamma.ao.nn.intrinsic.quantized import dynamic as nniqd
    m = tq.fuse_modules(nn.Sequential(nn.Linear(6, 5), nn.ReLU()).eval(), [["0", "1"]])
    assert type(tq.quantize_dynamic(m)[0]) is nni.LinearReLU  # the default spec: left float
    q = tq.quantize_dynamic(m, {nni.LinearReLU})
    assert isinstance(q[0], nniqd.LinearReLU)
    x = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)
    ref = np.maximum(_ref_linear(x, q[0].weight(), q[0].bias()), 0)
    np.testing.assert_allclose(q(_f(x)).numpy(), ref, rtol=2e-7, atol=1e-6)
    import fiamma.nn.intrinsic.quantized.dynamic as legacy
    assert legacy is nniqd


@pytest.mark.parity
def test_parity_linear_relu_dynamic():
    torch = _torch()
    import fiamma.ao.nn.intrinsic as nni
    tm = torch.ao.quantization.fuse_modules(
        torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU()).eval(), [["0", "1"]])
    fm = nn.Sequential(nn.Linear(6, 5), nn.ReLU())
    _copy_params(tm[0][0], fm[0])
    fm = tq.fuse_modules(fm.eval(), [["0", "1"]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tqm = torch.ao.quantization.quantize_dynamic(tm, {torch.ao.nn.intrinsic.LinearReLU})
    fqm = tq.quantize_dynamic(fm, {nni.LinearReLU})
    assert repr(fqm[0]).replace("fiamma.", "torch.") == repr(tqm[0])
    x = np.random.default_rng(7).standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_array_equal(fqm(_f(x)).numpy(), tqm(torch.from_numpy(x)).numpy())


def test_module_class_lookups():
    from fiamma.ao.nn.quantized import Linear as QLinear
    assert tq.get_dynamic_quant_module_class(nn.GRU) is nnqd.GRU
    assert tq.get_static_quant_module_class(nn.Linear) is QLinear
    assert tq.get_static_quant_module_class(nn.Linear, {nn.Linear: nnqd.Linear}) is nnqd.Linear
    with pytest.raises(AssertionError, match="does not have a corresponding quantized"):
        tq.get_dynamic_quant_module_class(nn.Conv2d)
    with pytest.raises(AssertionError, match="does not have a corresponding quantized"):
        tq.get_static_quant_module_class(nn.LSTM)


_AFFINE = tq.QConfig(activation=tq.default_dynamic_quant_observer,
                     weight=tq.MinMaxObserver.with_args(dtype=fiamma.qint8,
                                                        qscheme=fiamma.per_tensor_affine))


@pytest.mark.parametrize("route", ["core", "float32"])
@pytest.mark.parametrize("qconfig", [None, tq.per_channel_dynamic_qconfig, _AFFINE])
@pytest.mark.parametrize("shape", [(8, 2101, 40), (2, 5000, 3), (3, 8, 16)])
def test_both_product_routes_match_reference(route, qconfig, shape, monkeypatch):
    """core's int8 GEMM (big products) and the float32 GEMM of exact integers (small ones, or
    a core without the int8 GEMM) give the same exact sums, zero-point terms included."""
    from fiamma.ao.nn.quantized.dynamic import _ops
    if route == "core" and _ops._QGEMM is None:
        pytest.skip("this core build has no int8 GEMM")
    if route == "float32":
        monkeypatch.setattr(_ops, "_QGEMM", None)
    else:  # every product through core, however small
        monkeypatch.setattr(_ops, "_SMALL_WEIGHT", -1)
    n, i, o = shape
    _, q = _dyn_linear(i, o, qconfig, seed=n)
    lin = q[0]
    packed = lin._packed()
    assert (packed.bp is not None) == (route == "core")
    if qconfig is _AFFINE:
        assert lin.weight().q_zero_point() != 0
    x = np.random.default_rng(i).standard_normal((n, i)).astype(np.float32) * 2
    np.testing.assert_allclose(lin(_f(x)).numpy(), _ref_linear(x, lin.weight(), lin.bias()),
                               rtol=2e-7, atol=1e-5)
