"""Attention and Transformers: scaled_dot_product_attention and MultiheadAttention against
float64 NumPy references, gradients by gradcheck, and (parity) outputs, attention weights and
every gradient against torch.nn with the same weights."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck, gradgradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

# nn.LayerNorm once merged; the transformer module's fallback until then
_LayerNorm = getattr(nn, "LayerNorm", None) or __import__(
    "fiamma.nn.modules.transformer", fromlist=["LayerNorm"]).LayerNorm

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def _t(a, grad=False):
    t = fiamma.tensor(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


def _np(t):
    return t.detach().numpy()


# ----------------------------------------------------------------------------------------
# NumPy references

def _softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return e / s


def _sdpa_ref(q, k, v, mask=None, is_causal=False, scale=None, gqa=False):
    L, S = q.shape[-2], k.shape[-2]
    if gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if is_causal:
        mask = np.tril(np.ones((L, S), bool))
    if mask is not None:
        add = np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask
        s = s + add
    p = _softmax(s)
    p = np.where(np.isnan(p), 0.0, p)        # fully masked rows give zeros
    return np.matmul(p, v)


def _mha_ref(q, k, v, H, w_q, w_k, w_v, b_in, w_o, b_o, kpm=None, attn_mask=None,
             bias_k=None, bias_v=None, add_zero_attn=False):
    """Sequence-first (L, N, E) multi-head attention in float64; bool masks True = masked."""
    E = w_q.shape[0]
    hd = E // H
    bq, bk, bv = (None, None, None) if b_in is None else (b_in[:E], b_in[E:2 * E], b_in[2 * E:])
    Q = q @ w_q.T + (0 if bq is None else bq)
    K = k @ w_k.T + (0 if bk is None else bk)
    V = v @ w_v.T + (0 if bv is None else bv)
    L, N, _ = Q.shape
    mask = np.zeros((N, L, K.shape[0]))
    if attn_mask is not None:
        mask = mask + (np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool
                       else attn_mask)
    if kpm is not None:
        mask = mask + np.where(kpm, -np.inf, 0.0)[:, None, :]
    if bias_k is not None:
        K = np.concatenate([K, np.broadcast_to(bias_k, (1, N, E))])
        V = np.concatenate([V, np.broadcast_to(bias_v, (1, N, E))])
        mask = np.concatenate([mask, np.zeros((N, L, 1))], -1)
    S = K.shape[0]
    Qh = Q.reshape(L, N, H, hd).transpose(1, 2, 0, 3)
    Kh = K.reshape(S, N, H, hd).transpose(1, 2, 0, 3)
    Vh = V.reshape(S, N, H, hd).transpose(1, 2, 0, 3)
    if add_zero_attn:
        Kh = np.concatenate([Kh, np.zeros((N, H, 1, hd))], 2)
        Vh = np.concatenate([Vh, np.zeros((N, H, 1, hd))], 2)
        mask = np.concatenate([mask, np.zeros((N, L, 1))], -1)
    p = _softmax(Qh @ np.swapaxes(Kh, -1, -2) / np.sqrt(hd) + mask[:, None])
    o = (p @ Vh).transpose(2, 0, 1, 3).reshape(L, N, E)
    return o @ w_o.T + (0 if b_o is None else b_o), p


# ----------------------------------------------------------------------------------------
# scaled_dot_product_attention

SDPA_CASES = [
    # q shape, k shape, v shape, kwargs
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), {}),
    ((5, 4), (7, 4), (7, 3), {}),                                   # unbatched
    ((2, 1, 5, 4), (1, 3, 7, 4), (1, 3, 7, 4), {}),                 # broadcast batch dims
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), {"scale": 0.3}),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4), {"is_causal": True}),
    ((2, 3, 7, 4), (2, 3, 5, 4), (2, 3, 5, 4), {"is_causal": True}),  # L > S
    ((2, 4, 5, 4), (2, 2, 7, 4), (2, 1, 7, 4), {"enable_gqa": True}),
    ((3, 0, 5, 4), (3, 0, 7, 4), (3, 0, 7, 4), {}),                 # empty batch
]


@pytest.mark.parametrize("qs,ks,vs,kw", SDPA_CASES)
def test_sdpa_against_numpy(qs, ks, vs, kw):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s) for s in (qs, ks, vs))
    out = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), **kw)
    ref = _sdpa_ref(q, k, v, is_causal=kw.get("is_causal", False), scale=kw.get("scale"),
                    gqa=kw.get("enable_gqa", False))
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mshape", [(5, 7), (1, 7), (2, 1, 5, 7), (2, 3, 5, 7), (7,)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_masks_against_numpy(mshape, kind):
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 7, 4)), \
        rng.standard_normal((2, 3, 7, 6))
    if kind == "bool":
        m = rng.random(mshape) > 0.3
        m[..., 0] = True
    else:
        m = rng.standard_normal(mshape)
        m[rng.random(mshape) > 0.7] = -np.inf
        m[..., 0] = 0.0
    out = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=_t(m))
    np.testing.assert_allclose(out.numpy(), _sdpa_ref(q, k, v, m), rtol=1e-10, atol=1e-12)


def test_sdpa_fully_masked_rows_are_zero_with_finite_gradients():
    rng = np.random.default_rng(2)
    q, k, v = (_t(rng.standard_normal((1, 2, 3, 4)), grad=True) for _ in range(3))
    m = np.ones((3, 3), bool)
    m[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=_t(m))
    assert np.all(_np(out)[:, :, 1] == 0.0)
    out.sum().backward()
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad.numpy()))
    np.testing.assert_allclose(q.grad.numpy()[:, :, 1], 0.0)


def test_sdpa_non_contiguous_and_float32():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((2, 6, 3, 8)).astype(np.float32)
    q = _t(base).transpose(1, 2)                         # (2, 3, 6, 8), transposed
    k = _t(rng.standard_normal((2, 3, 10, 8)).astype(np.float32))[:, :, ::2]
    v = _t(rng.standard_normal((2, 3, 5, 16)).astype(np.float32))[..., ::2]
    assert not q.is_contiguous() and not k.is_contiguous()
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.dtype == fiamma.float32
    ref = _sdpa_ref(*(t.numpy().astype(np.float64) for t in (q, k, v)))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_sdpa_dropout():
    rng = np.random.default_rng(4)
    q, k, v = (_t(rng.standard_normal((2, 4, 6))) for _ in range(3))
    assert np.all(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy() == 0.0)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    b = F.scaled_dot_product_attention(q, k, v).numpy()
    assert not np.allclose(a, b)


def test_sdpa_errors():
    q = fiamma.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=fiamma.ones(3, 3, dtype=fiamma.bool),
                                       is_causal=True)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*attn_mask"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=fiamma.ones(2, 4))
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*embedding size"):
        F.scaled_dot_product_attention(q, fiamma.randn(2, 3, 5), q)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*dtype"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*heads"):
        F.scaled_dot_product_attention(fiamma.randn(1, 3, 2, 4), fiamma.randn(1, 2, 2, 4),
                                       fiamma.randn(1, 2, 2, 4), enable_gqa=True)


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.7}, {"mask": "bool"},
                                {"mask": "float"}, {"mask": "dead"}, {"enable_gqa": True}])
def test_sdpa_gradcheck(kw):
    rng = np.random.default_rng(5)
    hq = 2
    q = _t(rng.standard_normal((1, hq, 3, 2)), grad=True)
    hk = 1 if kw.get("enable_gqa") else hq
    k = _t(rng.standard_normal((1, hk, 4, 2)), grad=True)
    v = _t(rng.standard_normal((1, hk, 4, 3)), grad=True)
    kw = dict(kw)
    mask = kw.pop("mask", None)
    if mask == "bool":
        kw["attn_mask"] = _t(rng.random((3, 4)) > 0.4) | _t(np.eye(3, 4, dtype=bool))
    elif mask == "float":
        kw["attn_mask"] = _t(rng.standard_normal((3, 4)), grad=True)
    elif mask == "dead":
        m = np.ones((3, 4), bool)
        m[2] = False
        kw["attn_mask"] = _t(m)
    args = (q, k, v) + ((kw.pop("attn_mask"),) if "attn_mask" in kw else ())
    assert gradcheck(lambda *a: F.scaled_dot_product_attention(*a, **kw), args)


# ----------------------------------------------------------------------------------------
# MultiheadAttention against NumPy, gradcheck, errors

def _mha_params(m):
    E = m.embed_dim
    g = lambda t: None if t is None else _np(t).astype(np.float64)  # noqa: E731
    if m._qkv_same_embed_dim:
        w = g(m.in_proj_weight)
        wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
    else:
        wq, wk, wv = g(m.q_proj_weight), g(m.k_proj_weight), g(m.v_proj_weight)
    return wq, wk, wv, g(m.in_proj_bias), g(m.out_proj.weight), g(m.out_proj.bias)


@pytest.mark.parametrize("opts", [
    {}, {"bias": False}, {"kdim": 3, "vdim": 5}, {"add_bias_kv": True},
    {"add_zero_attn": True}, {"add_bias_kv": True, "add_zero_attn": True, "kdim": 4},
])
@pytest.mark.parametrize("masks", [False, True])
def test_mha_against_numpy(opts, masks):
    rng = np.random.default_rng(6)
    E, H, L, S, N = 8, 2, 4, 5, 3
    m = nn.MultiheadAttention(E, H, dtype=fiamma.float64, **opts)
    q = rng.standard_normal((L, N, E))
    k = rng.standard_normal((S, N, opts.get("kdim", E)))
    v = rng.standard_normal((S, N, opts.get("vdim", E)))
    kw, ref_kw = {}, {}
    if masks:
        kpm = rng.random((N, S)) > 0.7
        kpm[:, 0] = False
        am = rng.standard_normal((L, S))
        kw = {"key_padding_mask": _t(kpm), "attn_mask": _t(am)}
        ref_kw = {"kpm": kpm, "attn_mask": am}
    if opts.get("add_bias_kv"):
        ref_kw["bias_k"], ref_kw["bias_v"] = _np(m.bias_k), _np(m.bias_v)
    out, w = m(_t(q), _t(k), _t(v), average_attn_weights=False, **kw)
    ref, p = _mha_ref(q, k, v, H, *_mha_params(m), add_zero_attn=opts.get("add_zero_attn"),
                      **ref_kw)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(w), p, rtol=1e-10, atol=1e-12)
    out2, w2 = m(_t(q), _t(k), _t(v), need_weights=False, **kw)
    assert w2 is None
    np.testing.assert_allclose(_np(out2), ref, rtol=1e-10, atol=1e-12)


def test_mha_batch_first_unbatched_and_averaged_weights():
    rng = np.random.default_rng(7)
    m = nn.MultiheadAttention(6, 3, batch_first=True, dtype=fiamma.float64)
    x = rng.standard_normal((2, 4, 6))
    out, w = m(_t(x), _t(x), _t(x))
    ref, p = _mha_ref(x.transpose(1, 0, 2), *(x.transpose(1, 0, 2),) * 2, 3, *_mha_params(m))
    np.testing.assert_allclose(_np(out), ref.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(w), p.mean(1), rtol=1e-10, atol=1e-12)
    # unbatched (L, E)
    o1, w1 = m(_t(x[0]), _t(x[0]), _t(x[0]))
    assert tuple(o1.shape) == (4, 6) and tuple(w1.shape) == (4, 4)
    np.testing.assert_allclose(_np(o1), _np(out)[0], rtol=1e-10, atol=1e-12)


def test_mha_init_and_state_dict():
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "bias_k", "bias_v",
                                    "out_proj.weight", "out_proj.bias"]
    assert np.all(m.in_proj_bias.detach().numpy() == 0)
    assert np.all(m.out_proj.bias.detach().numpy() == 0)
    bound = np.sqrt(6 / (8 + 24))
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 4
    m2 = nn.MultiheadAttention(8, 2, bias=False, kdim=3, vdim=5)
    assert list(m2.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                     "out_proj.weight"]
    assert tuple(m2.k_proj_weight.shape) == (8, 3)
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def test_mha_gradcheck():
    rng = np.random.default_rng(8)
    m = nn.MultiheadAttention(4, 2, add_bias_kv=True, kdim=3, dtype=fiamma.float64)
    q, k, v = (_t(rng.standard_normal(s), grad=True) for s in ((3, 2, 4), (2, 2, 3),
                                                                 (2, 2, 4)))
    kpm = _t(np.array([[False, True], [False, False]]))
    params = list(m.parameters())

    def f(q, k, v, *ps):
        return m(q, k, v, key_padding_mask=kpm)[0]
    assert gradcheck(f, (q, k, v) + tuple(params))

    m2 = nn.MultiheadAttention(4, 2, add_zero_attn=True, dtype=fiamma.float64)
    assert gradcheck(lambda x, *ps: m2(x, x, x, need_weights=False)[0].sum(0),
                     (q,) + tuple(m2.parameters()))


def test_mha_errors():
    m = nn.MultiheadAttention(8, 2)
    x = fiamma.randn(4, 3, 8)
    with pytest.raises(AssertionError, match="MultiheadAttention.*embedding dimension of 8"):
        m(fiamma.randn(4, 3, 6), x, x)
    with pytest.raises(RuntimeError, match="MultiheadAttention.*2D attn_mask"):
        m(x, x, x, attn_mask=fiamma.zeros(4, 5))
    with pytest.raises(RuntimeError, match="MultiheadAttention.*3D attn_mask"):
        m(x, x, x, attn_mask=fiamma.zeros(3, 4, 4))
    with pytest.raises(AssertionError, match="MultiheadAttention.*key_padding_mask"):
        m(x, x, x, key_padding_mask=fiamma.zeros(3, 5, dtype=fiamma.bool))
    with pytest.raises(AssertionError, match="MultiheadAttention.*4-D"):
        m(fiamma.randn(1, 4, 3, 8), x, x)
    with pytest.raises(RuntimeError, match="MultiheadAttention.*is_causal"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="MultiheadAttention.*divisible"):
        nn.MultiheadAttention(9, 2)
    with pytest.raises(ValueError, match="MultiheadAttention"):
        nn.MultiheadAttention(0, 2)


def test_transformer_errors_and_mask():
    m = nn.Transformer.generate_square_subsequent_mask(3)
    ref = np.triu(np.full((3, 3), -np.inf), 1)
    ref[np.tril_indices(3)] = 0.0
    np.testing.assert_array_equal(m.numpy(), ref)
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    with pytest.raises(RuntimeError, match="TransformerEncoderLayer.*8"):
        layer(fiamma.randn(3, 2, 6))
    t = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="Transformer.*batch number"):
        t(fiamma.randn(3, 2, 8), fiamma.randn(3, 4, 8))
    with pytest.raises(RuntimeError, match="Transformer.*d_model"):
        t(fiamma.randn(3, 2, 8), fiamma.randn(3, 2, 6))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


def test_fallback_layer_norm_against_numpy():
    from fiamma.nn.modules.transformer import _layer_norm
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((3, 4, 5)), rng.standard_normal(5), rng.standard_normal(5)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(_layer_norm(_t(x), (5,), _t(w), _t(b), 1e-5).numpy(),
                               (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-10)


def test_transformer_layers_gradcheck():
    rng = np.random.default_rng(10)
    enc = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True,
                                     dtype=fiamma.float64)
    dec = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, activation="gelu",
                                     dtype=fiamma.float64)
    src = _t(rng.standard_normal((3, 2, 4)), grad=True)
    tgt = _t(rng.standard_normal((2, 2, 4)), grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(2, dtype=fiamma.float64)
    assert gradcheck(lambda s, t: dec(t, enc(s), tgt_mask=mask), (src, tgt))


def test_transformer_train_eval_dropout():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5), 2)
    assert enc.layers[0] is not enc.layers[1]
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    x = fiamma.randn(5, 2, 8)
    enc.eval()
    a, b = _np(enc(x)), _np(enc(x))
    np.testing.assert_array_equal(a, b)
    enc.train()
    assert not np.allclose(_np(enc(x)), a)


# ----------------------------------------------------------------------------------------
# parity with torch

def _load(fm, tm):
    sd = tm.state_dict()
    assert list(fm.state_dict()) == list(sd)
    for (k, a), b in zip(sd.items(), fm.state_dict().values()):
        assert tuple(a.shape) == tuple(b.shape), k
    fm.load_state_dict({k: fiamma.tensor(v.detach().numpy()) for k, v in sd.items()})


def _pair(rng, shape, requires_grad=True):
    a = rng.standard_normal(shape).astype(np.float32)
    f = fiamma.tensor(a)
    t = torch.tensor(a)
    if requires_grad:
        f.requires_grad_()
        t.requires_grad_()
    return f, t


def _close(a, b, what):
    np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=what)


def _compare_grads(fm, tm, fins, tins):
    fp, tp = dict(fm.named_parameters()), dict(tm.named_parameters())
    assert list(fp) == list(tp)
    for k in tp:
        assert tp[k].grad is not None, k
        _close(fp[k].grad, tp[k].grad, f"grad of {k}")
    for i, (f, t) in enumerate(zip(fins, tins)):
        if t.grad is not None:
            _close(f.grad, t.grad, f"grad of input {i}")


MHA_OPTS = [
    {}, {"bias": False}, {"kdim": 5, "vdim": 6}, {"add_bias_kv": True},
    {"add_zero_attn": True}, {"batch_first": True},
    {"add_bias_kv": True, "add_zero_attn": True, "kdim": 5, "batch_first": True},
]
MHA_CALLS = [
    {}, {"need_weights": False}, {"average_attn_weights": False}, {"kpm": "bool"},
    {"kpm": "float"}, {"mask": "bool2"}, {"mask": "float3"}, {"mask": "causal"},
    {"kpm": "bool", "mask": "float2", "need_weights": False},
]


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("opts", MHA_OPTS)
@pytest.mark.parametrize("call", MHA_CALLS)
def test_mha_parity(opts, call):
    rng = np.random.default_rng(11)
    torch.manual_seed(0)
    E, H, L, S, N = 8, 2, 4, 5, 3
    tm = torch.nn.MultiheadAttention(E, H, **opts)
    fm = nn.MultiheadAttention(E, H, **opts)
    _load(fm, tm)
    bf = opts.get("batch_first", False)
    shape = lambda n, e: (N, n, e) if bf else (n, N, e)  # noqa: E731
    self_attn = "kdim" not in opts and call.get("mask") == "causal"
    fq, tq = _pair(rng, shape(L, E))
    if self_attn:
        S = L
        (fk, tk), (fv, tv) = (fq, tq), (fq, tq)
    else:
        fk, tk = _pair(rng, shape(S, opts.get("kdim", E)))
        fv, tv = _pair(rng, shape(S, opts.get("vdim", E)))
    kw_f, kw_t = {}, {}
    for k in ("need_weights", "average_attn_weights"):
        if k in call:
            kw_f[k] = kw_t[k] = call[k]
    if "kpm" in call:
        kpm = rng.random((N, S)) > 0.6
        kpm[:, 0] = False
        if call["kpm"] == "float":
            kpm = np.where(kpm, -1e9, 0.0).astype(np.float32)
        kw_f["key_padding_mask"], kw_t["key_padding_mask"] = fiamma.tensor(kpm), \
            torch.tensor(kpm)
    mk = call.get("mask")
    if mk:
        if mk == "bool2":
            am = rng.random((L, S)) > 0.7
            am[:, 1] = False
        elif mk == "float2":
            am = rng.standard_normal((L, S)).astype(np.float32)
        elif mk == "float3":
            am = rng.standard_normal((N * H, L, S)).astype(np.float32)
        else:
            am = np.triu(np.ones((L, S), bool), 1)
            kw_f["is_causal"] = kw_t["is_causal"] = True
        kw_f["attn_mask"], kw_t["attn_mask"] = fiamma.tensor(am), torch.tensor(am)
    fo, fw = fm(fq, fk, fv, **kw_f)
    to, tw = tm(tq, tk, tv, **kw_t)
    _close(fo, to, "output")
    assert (fw is None) == (tw is None)
    if tw is not None:
        _close(fw, tw, "weights")
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    (fo * fiamma.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _compare_grads(fm, tm, (fq, fk, fv), (tq, tk, tv))


@pytest.mark.parity
@needs_torch
def test_mha_parity_unbatched():
    rng = np.random.default_rng(12)
    tm, fm = torch.nn.MultiheadAttention(8, 4), nn.MultiheadAttention(8, 4)
    _load(fm, tm)
    fx, tx = _pair(rng, (5, 8))
    am = np.triu(np.ones((5, 5), bool), 1)
    fo, fw = fm(fx, fx, fx, attn_mask=fiamma.tensor(am))
    to, tw = tm(tx, tx, tx, attn_mask=torch.tensor(am))
    _close(fo, to, "output")
    _close(fw, tw, "weights")
    fo.sum().backward()
    to.sum().backward()
    _compare_grads(fm, tm, (fx,), (tx,))


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("kw", [
    {"is_causal": True}, {"scale": 0.2}, {"enable_gqa": True}, {"mask": "bool"},
    {"mask": "float"}, {"mask": "dead"},
])
def test_sdpa_parity(kw):
    rng = np.random.default_rng(13)
    kw = dict(kw)
    hk = 2 if kw.get("enable_gqa") else 4
    fq, tq = _pair(rng, (2, 4, 6, 8))
    fk, tk = _pair(rng, (2, hk, 7, 8))
    fv, tv = _pair(rng, (2, hk, 7, 5))
    mk = kw.pop("mask", None)
    if mk:
        if mk == "float":
            am = rng.standard_normal((2, 1, 6, 7)).astype(np.float32)
        else:
            am = rng.random((6, 7)) > 0.4
            am[:, 0] = True
            if mk == "dead":
                am[2] = False
        kw["attn_mask"] = am
    fkw = {k: fiamma.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    fo = F.scaled_dot_product_attention(fq, fk, fv, **fkw)
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw)
    _close(fo, to, "output")
    fo.sum().backward()
    to.sum().backward()
    for f, t, n in ((fq, tq, "q"), (fk, tk, "k"), (fv, tv, "v")):
        _close(f.grad, t.grad, f"grad {n}")


def _layer_inputs(rng, bf, L, N, E):
    return _pair(rng, (N, L, E) if bf else (L, N, E))


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("opts", [
    {}, {"norm_first": True}, {"activation": "gelu"}, {"batch_first": True},
    {"bias": False, "norm_first": True, "batch_first": True}, {"layer_norm_eps": 1e-3},
])
@pytest.mark.parametrize("masks", [False, True])
def test_encoder_decoder_layer_parity(opts, masks):
    rng = np.random.default_rng(14)
    torch.manual_seed(1)
    E, H, FF, L, T, N = 8, 2, 12, 5, 4, 3
    bf = opts.get("batch_first", False)
    for kind in ("enc", "dec"):
        tcls = torch.nn.TransformerEncoderLayer if kind == "enc" else \
            torch.nn.TransformerDecoderLayer
        fcls = nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
        tm, fm = tcls(E, H, FF, dropout=0.0, **opts), fcls(E, H, FF, dropout=0.0, **opts)
        _load(fm, tm)
        fs, ts = _layer_inputs(rng, bf, L, N, E)
        fins, tins = [fs], [ts]
        kf, kt = {}, {}
        if masks:
            kpm = rng.random((N, L)) > 0.6
            kpm[:, 0] = False
            sm = np.triu(np.full((L, L), -np.inf, np.float32), 1)
            names = ("src_key_padding_mask", "src_mask") if kind == "enc" else \
                ("memory_key_padding_mask", "tgt_mask")
            if kind == "dec":
                sm = sm[:T, :T]
            kf = {names[0]: fiamma.tensor(kpm), names[1]: fiamma.tensor(sm)}
            kt = {names[0]: torch.tensor(kpm), names[1]: torch.tensor(sm)}
        if kind == "dec":
            ft, tt = _layer_inputs(rng, bf, T, N, E)
            fo, to = fm(ft, fs, **kf), tm(tt, ts, **kt)
            fins, tins = [ft, fs], [tt, ts]
        else:
            fo, to = fm(fs, **kf), tm(ts, **kt)
        _close(fo, to, f"{kind} output")
        g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
        (fo * fiamma.tensor(g)).sum().backward()
        (to * torch.tensor(g)).sum().backward()
        _compare_grads(fm, tm, fins, tins)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("opts", [{}, {"norm_first": True, "batch_first": True,
                                       "activation": "gelu"}])
def test_transformer_parity(opts):
    rng = np.random.default_rng(15)
    torch.manual_seed(2)
    E, H, FF, L, T, N = 8, 2, 16, 6, 5, 2
    kw = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=FF, dropout=0.0, **opts)
    tm, fm = torch.nn.Transformer(**kw), nn.Transformer(**kw)
    _load(fm, tm)
    assert str(fm.encoder.layers[0].self_attn) == str(tm.encoder.layers[0].self_attn)
    bf = opts.get("batch_first", False)
    fs, ts = _layer_inputs(rng, bf, L, N, E)
    ft, tt = _layer_inputs(rng, bf, T, N, E)
    kpm = np.zeros((N, L), bool)
    kpm[0, -2:] = True
    fmask = nn.Transformer.generate_square_subsequent_mask(T)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(T)
    np.testing.assert_array_equal(fmask.numpy(), tmask.numpy())
    fo = fm(fs, ft, tgt_mask=fmask, src_key_padding_mask=fiamma.tensor(kpm),
            memory_key_padding_mask=fiamma.tensor(kpm))
    to = tm(ts, tt, tgt_mask=tmask, src_key_padding_mask=torch.tensor(kpm),
            memory_key_padding_mask=torch.tensor(kpm))
    _close(fo, to, "output")
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    (fo * fiamma.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _compare_grads(fm, tm, (fs, ft), (ts, tt))


@pytest.mark.parity
@needs_torch
def test_encoder_decoder_stacks_parity():
    rng = np.random.default_rng(16)
    torch.manual_seed(3)
    E, H, FF = 8, 4, 16
    tenc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
        E, H, FF, dropout=0.0, batch_first=True), 3, norm=torch.nn.LayerNorm(E),
        enable_nested_tensor=False)
    fenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0,
                                                            batch_first=True), 3,
                                 norm=_LayerNorm(E))
    tdec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(
        E, H, FF, dropout=0.0, batch_first=True), 2)
    fdec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, dropout=0.0,
                                                            batch_first=True), 2)
    _load(fenc, tenc)
    _load(fdec, tdec)
    fs, ts = _pair(rng, (2, 7, E))
    ft, tt = _pair(rng, (2, 3, E))
    m = np.triu(np.ones((7, 7), bool), 1)
    fmem, tmem = fenc(fs, mask=fiamma.tensor(m)), tenc(ts, mask=torch.tensor(m))
    _close(fmem, tmem, "encoder output")
    fo = fdec(ft, fmem, tgt_is_causal=True,
              tgt_mask=nn.Transformer.generate_square_subsequent_mask(3))
    to = tdec(tt, tmem, tgt_is_causal=True,
              tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(3))
    _close(fo, to, "decoder output")
    fo.sum().backward()
    to.sum().backward()
    _compare_grads(fenc, tenc, (fs,), (ts,))
    _compare_grads(fdec, tdec, (ft,), (tt,))



def test_mha_mismatched_mask_types_warn_and_float_mask_dtype():
    m = nn.MultiheadAttention(4, 2)
    x = fiamma.randn(3, 2, 4)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        m(x, x, x, key_padding_mask=fiamma.zeros(2, 3, dtype=fiamma.bool),
          attn_mask=fiamma.zeros(3, 3))
    q = fiamma.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention.*attn_mask dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=fiamma.zeros(3, 3,
                                                                       dtype=fiamma.float64))


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("kpm_kind", ["left", "holes"])
def test_encoder_eval_padding_parity(kpm_kind):
    """PyTorch's inference path (nested tensors) returns zeros at padded positions (before
    the final norm); fiamma reproduces it, and not where PyTorch does not take that path."""
    rng = np.random.default_rng(17)
    torch.manual_seed(4)
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**kw), 2,
                                     norm=torch.nn.LayerNorm(8)).eval()
    fm = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kw), 2, norm=_LayerNorm(8)).eval()
    _load(fm, tm)
    assert fm.use_nested_tensor
    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    kpm = np.zeros((3, 5), bool)
    kpm[0, 3:] = True
    kpm[2, 4] = True
    if kpm_kind == "holes":
        kpm[1, 1] = True
    with torch.no_grad():
        to = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm))
    with fiamma.no_grad():
        fo = fm(fiamma.tensor(x), src_key_padding_mask=fiamma.tensor(kpm))
    np.testing.assert_allclose(fo.numpy(), to.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("N", [1, 0, 3])
def test_mha_parity_non_contiguous_and_batch_sizes(N):
    rng = np.random.default_rng(18)
    torch.manual_seed(5)
    tm, fm = torch.nn.MultiheadAttention(8, 2, kdim=6), nn.MultiheadAttention(8, 2, kdim=6)
    _load(fm, tm)
    q = rng.standard_normal((N, 4, 8)).astype(np.float32)       # transposed below
    k = rng.standard_normal((10, N, 6)).astype(np.float32)      # sliced with a step
    v = rng.standard_normal((5, N, 16)).astype(np.float32)      # sliced last dim
    fq, tq = fiamma.tensor(q).requires_grad_(), torch.tensor(q).requires_grad_()
    fk, tk = fiamma.tensor(k).requires_grad_(), torch.tensor(k).requires_grad_()
    fv, tv = fiamma.tensor(v).requires_grad_(), torch.tensor(v).requires_grad_()
    fargs = (fq.transpose(0, 1), fk[::2], fv[..., ::2])
    targs = (tq.transpose(0, 1), tk[::2], tv[..., ::2])
    if N:  # (empty tensors are contiguous whatever their strides, as PyTorch's)
        assert not fargs[1].is_contiguous() and not fargs[2].is_contiguous()
    fo, fw = fm(*fargs)
    to, tw = tm(*targs)
    _close(fo, to, "output")
    _close(fw, tw, "weights")
    if N:
        fo.sum().backward()
        to.sum().backward()
        _compare_grads(fm, tm, (fq, fk, fv), (tq, tk, tv))


@pytest.mark.parametrize("dt,tol", [("float16", 2e-3), ("bfloat16", 2e-2)])
def test_sdpa_and_mha_half_precision(dt, tol):
    dt = getattr(fiamma, dt)
    rng = np.random.default_rng(19)
    q, k, v = (_t(rng.standard_normal((2, 3, 5, 4)).astype(np.float32)) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    out = F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), is_causal=True)
    assert out.dtype == dt
    np.testing.assert_allclose(out.float().numpy(), ref, atol=tol * 4, rtol=tol)
    m = nn.MultiheadAttention(8, 2)
    x = _t(rng.standard_normal((3, 2, 8)).astype(np.float32))
    ref_o, ref_w = m(x, x, x)
    m.to(dt)
    o, w = m(x.to(dt), x.to(dt), x.to(dt))
    assert o.dtype == dt and w.dtype == dt
    np.testing.assert_allclose(o.float().detach().numpy(), _np(ref_o), atol=tol * 8, rtol=tol)


@pytest.mark.parametrize("kw", [{"is_causal": True}, {"mask": "dead"}])
def test_sdpa_gradgradcheck(kw):
    """Second derivatives (create_graph) through the in-place masking and safe softmax."""
    rng = np.random.default_rng(20)
    q, k, v = (_t(rng.standard_normal((1, 2, 3, 2)), grad=True) for _ in range(3))
    kw = dict(kw)
    if kw.pop("mask", None):
        m = np.ones((3, 3), bool)
        m[1] = False
        m[0, 2] = False
        kw["attn_mask"] = _t(m)
    assert gradgradcheck(lambda *a: F.scaled_dot_product_attention(*a, **kw), (q, k, v))


# fiamma.nn.attention: sdpa_kernel and SDPBackend (torch.nn.attention)

def _np_sdpa(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def test_sdpa_kernel_switches_and_restores():
    from fiamma.backends import cuda as bc
    from fiamma.nn.attention import SDPBackend, sdpa_kernel
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 5, 4))
    before = (bc.flash_sdp_enabled(), bc.mem_efficient_sdp_enabled(), bc.math_sdp_enabled(),
              bc.cudnn_sdp_enabled())
    with sdpa_kernel(SDPBackend.MATH):
        assert (bc.flash_sdp_enabled(), bc.mem_efficient_sdp_enabled(),
                bc.math_sdp_enabled(), bc.cudnn_sdp_enabled()) == (False, False, True, False)
        out = F.scaled_dot_product_attention(_t(q), _t(q), _t(q))
        np.testing.assert_allclose(_np(out), _np_sdpa(q, q, q), rtol=1e-5, atol=1e-6)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
        assert (bc.flash_sdp_enabled(), bc.math_sdp_enabled(), bc.cudnn_sdp_enabled()) == (
            True, False, True)
        F.scaled_dot_product_attention(_t(q), _t(q), _t(q))
    assert (bc.flash_sdp_enabled(), bc.mem_efficient_sdp_enabled(), bc.math_sdp_enabled(),
            bc.cudnn_sdp_enabled()) == before
    with pytest.raises(ValueError):
        with sdpa_kernel([SDPBackend.MATH]):
            raise ValueError("inside")
    assert bc.math_sdp_enabled() == before[2] and bc.flash_sdp_enabled() == before[0]


@pytest.mark.parametrize("backends", [[], "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"])
def test_sdpa_kernel_without_a_cpu_kernel_raises(backends):
    from fiamma.nn.attention import SDPBackend, sdpa_kernel
    b = [] if backends == [] else [getattr(SDPBackend, backends)]
    q = _t(np.ones((1, 1, 2, 2)))
    with sdpa_kernel(b):
        with pytest.raises(RuntimeError, match="scaled_dot_product_attention: no viable"):
            F.scaled_dot_product_attention(q, q, q)
    F.scaled_dot_product_attention(q, q, q)


def test_sdpa_kernel_bad_backends():
    from fiamma.nn.attention import SDPBackend, sdpa_kernel
    for bad in ("math", 0, [SDPBackend.MATH, "flash"]):
        with pytest.raises(TypeError, match="sdpa_kernel"):
            with sdpa_kernel(bad):
                pass


@pytest.mark.parity
def test_sdp_backend_parity():
    torch = pytest.importorskip("torch")
    from torch.nn import attention as TA

    from fiamma.nn import attention as FA
    for name, b in TA.SDPBackend.__members__.items():
        fb = getattr(FA.SDPBackend, name)
        assert int(fb) == int(b) and repr(fb) == repr(b) and str(fb) == str(b)
    assert FA.SDPBackend.__members__.keys() == TA.SDPBackend.__members__.keys()
    assert FA.WARN_FOR_UNFUSED_KERNELS == TA.WARN_FOR_UNFUSED_KERNELS
    assert FA.list_flash_attention_impls() == [] and FA.current_flash_attention_impl() is None
    # which switches each backend list turns on, and whether the CPU attention runs
    from fiamma.backends import cuda as fbc
    q = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    for names in ([], ["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION", "CUDNN_ATTENTION"],
                  ["MATH", "EFFICIENT_ATTENTION"]):
        got = []
        tsdpa = torch.nn.functional.scaled_dot_product_attention
        for mod, bc, f, tensor in ((TA, torch.backends.cuda, tsdpa, torch.from_numpy),
                                   (FA, fbc, F.scaled_dot_product_attention, _t)):
            with mod.sdpa_kernel([getattr(mod.SDPBackend, n) for n in names]):
                flags = (bc.flash_sdp_enabled(), bc.mem_efficient_sdp_enabled(),
                         bc.math_sdp_enabled(), bc.cudnn_sdp_enabled())
                try:
                    out = np.asarray(f(tensor(q), tensor(q), tensor(q)).numpy())
                except RuntimeError:
                    out = None
            got.append((flags, out))
        assert got[0][0] == got[1][0], names
        assert (got[0][1] is None) == (got[1][1] is None), names
        if got[0][1] is not None:
            np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-5, atol=1e-6)


# ---- torch.nn.attention.flex_attention: names only -------------------------------------------

def test_flex_attention_names_and_clear_errors():
    from fiamma.nn.attention import flex_attention as fa

    assert fa._DEFAULT_SPARSE_BLOCK_SIZE == 128
    assert not isinstance(fiamma.ones(2), fa.BlockMask)
    q = fiamma.randn(1, 2, 4, 8)
    for call in (lambda: fa.flex_attention(q, q, q), lambda: fa.BlockMask(),
                 lambda: fa.create_block_mask(fa.noop_mask, 1, 1, 4, 4),
                 lambda: fa.create_mask(fa.noop_mask, 1, 1, 4, 4)):
        with pytest.raises(NotImplementedError, match="FlexAttention"):
            call()


def test_flex_attention_mask_combinators():
    from fiamma.nn.attention import flex_attention as fa

    def causal(b, h, q, kv):
        return q >= kv

    def even(b, h, q, kv):
        return kv % 2 == 0

    q, kv = fiamma.arange(4).reshape(4, 1), fiamma.arange(4).reshape(1, 4)
    qn, kvn = np.arange(4)[:, None], np.arange(4)[None, :]
    both = fa.and_masks(causal, even)(0, 0, q, kv)
    either = fa.or_masks(causal, even)(0, 0, q, kv)
    np.testing.assert_array_equal(both.numpy(), (qn >= kvn) & (kvn % 2 == 0))
    np.testing.assert_array_equal(either.numpy(), (qn >= kvn) | (kvn % 2 == 0))
    assert fa.noop_mask(0, 0, 0, 0).item() is True


def test_sdpa_under_cpu_autocast_casts_a_float_mask():
    # scaled_dot_product_attention is on PyTorch's CPU autocast lower-precision list: q, k, v
    # and a float mask all go to bfloat16 (a float32 mask beside bfloat16 queries used to fail
    # the dtype check); the result is that of the explicitly cast call
    fiamma.manual_seed(0)
    q, k, v = (fiamma.randn(2, 2, 5, 8) for _ in range(3))
    mask = fiamma.randn(1, 1, 5, 5)
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0)
    want = F.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                          attn_mask=mask.bfloat16())
    assert out.dtype == fiamma.bfloat16 and out_bool.dtype == fiamma.bfloat16
    assert fiamma.equal(out, want)
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=mask).dtype == fiamma.float32
