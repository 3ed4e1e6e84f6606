"""fiamma.nn on nested tensors (fiamma.nested): linear, layer_norm, gelu, dropout, softmax and
scaled_dot_product_attention, each equal to running every sequence alone; gradients checked
numerically; a transformer block against PyTorch's torch.nested with the same weights."""

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma import nested
from fiamma.nn.attention import SDPBackend, sdpa_kernel

RNG = np.random.default_rng(1)
LENS = (4, 1, 6)


def seqs(lens=LENS, e=8, dtype=np.float64):
    return [RNG.standard_normal((n, e)).astype(dtype) for n in lens]


def jag(arrs, **kw):
    return nested.nested_tensor([fiamma.tensor(a) for a in arrs], layout=fiamma.jagged, **kw)


def close(nt, expected, tol=1e-10):
    got = [c.detach().numpy() for c in nt.unbind()]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


class Block(nn.Module):
    """A pre-norm attention + MLP block written as NaViT / the nested tensor tutorial write it."""

    def __init__(self, dim=8, heads=2, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim, bias=False)
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(),
                                nn.Dropout(0.0), nn.Linear(2 * dim, dim))

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.out(y.transpose(1, 2).flatten(-2))
        return x + self.ff(x)


@pytest.mark.parametrize("causal", [False, True])
def test_block_on_nested_equals_each_sequence_alone(causal):
    fiamma.manual_seed(0)
    m = Block(causal=causal).double()
    a = seqs()
    out = m(jag(a))
    assert out.is_nested and out.size(2) == 8
    close(out, [m(fiamma.tensor(s).unsqueeze(0))[0].detach().numpy() for s in a], tol=1e-12)


def test_functional_ops_per_sequence():
    a = seqs()
    x = jag(a)
    w, b = RNG.standard_normal((5, 8)), RNG.standard_normal(5)
    close(F.linear(x, fiamma.tensor(w), fiamma.tensor(b)), [s @ w.T + b for s in a])
    close(F.linear(x, fiamma.tensor(w)), [s @ w.T for s in a])
    ln = [(s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5) for s in a]
    close(F.layer_norm(x, (8,)), ln, tol=1e-9)
    close(F.gelu(x, approximate="tanh"),
          [F.gelu(fiamma.tensor(s), approximate="tanh").numpy() for s in a])
    close(F.softmax(x, -1), [F.softmax(fiamma.tensor(s), -1).numpy() for s in a])
    close(F.relu(x), [np.maximum(s, 0) for s in a])
    for act in (F.silu, F.leaky_relu, F.elu, F.mish, F.hardswish, F.relu6):
        close(act(x), [act(fiamma.tensor(s)).numpy() for s in a])
    y = x.clone()
    F.silu(y, inplace=True)
    close(y, [F.silu(fiamma.tensor(s)).numpy() for s in a])
    with pytest.raises(RuntimeError, match="ragged"):
        F.layer_norm(x.transpose(1, 2), (4,))
    # the strided layout: per component
    s = nested.nested_tensor([fiamma.tensor(c) for c in a])
    close(F.layer_norm(s, (8,)), ln, tol=1e-9)


def test_embedding_of_nested_indices():
    w = RNG.standard_normal((5, 3))
    ids = nested.nested_tensor([fiamma.tensor([1, 4, 0]), fiamma.tensor([2])],
                               layout=fiamma.jagged)
    out = F.embedding(ids, fiamma.tensor(w))
    assert out.dim() == 3 and out.offsets() is ids.offsets()
    close(out, [w[[1, 4, 0]], w[[2]]])


def test_dropout_on_nested():
    x = jag(seqs())
    assert F.dropout(x, 0.5, training=False) is x
    y = F.dropout(x, 0.5, training=True)
    assert y.is_nested and y.offsets() is x.offsets()
    v, yv = x.values().numpy(), y.values().numpy()
    kept = yv != 0
    np.testing.assert_allclose(yv[kept], 2 * v[kept])
    assert 0 < kept.mean() < 1


def test_sdpa_nested_q_and_kv_of_different_lengths():
    q = [RNG.standard_normal((2, n, 4)) for n in (1, 3, 2)]
    kv = [RNG.standard_normal((2, n, 4)) for n in (5, 2, 4)]

    def nt(parts):  # (B, heads, j, E) from components (heads, L, E)
        return nested.nested_tensor([fiamma.tensor(p).transpose(0, 1) for p in parts],
                                    layout=fiamma.jagged).transpose(1, 2)

    out = F.scaled_dot_product_attention(nt(q), nt(kv), nt(kv))
    assert out._ragged_idx == 2
    exp = []
    for qi, ki in zip(q, kv):
        s = qi @ ki.transpose(0, 2, 1) / 2.0
        exp.append(np.exp(s - s.max(-1, keepdims=True)) /
                   np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True) @ ki)
    close(out, exp, tol=1e-12)
    assert out.transpose(1, 2).values().is_contiguous()  # laid out as PyTorch's


def test_sdpa_nested_errors():
    x = jag(seqs()).unflatten(-1, (2, 4)).transpose(1, 2)
    with pytest.raises(RuntimeError, match="all nested"):
        F.scaled_dot_product_attention(x, fiamma.ones(3, 2, 4, 4), x)
    with pytest.raises(RuntimeError, match="attn_mask"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=fiamma.ones(1, dtype=fiamma.bool))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(x, x, x)
    with sdpa_kernel(SDPBackend.MATH):
        assert F.scaled_dot_product_attention(x, x, x).is_nested


def test_numerical_gradient_through_the_block():
    pytest.importorskip("fiamma.autograd")
    fiamma.manual_seed(0)
    m = Block(dim=4, heads=2, causal=True).double()
    a = seqs(lens=(3, 1, 2), e=4)
    vals = np.concatenate(a)
    offs = fiamma.tensor([0, 3, 4, 6])
    c = RNG.standard_normal(vals.shape)

    def loss(v):
        y = m(nested.nested_tensor_from_jagged(v, offs))
        return (y.values() * fiamma.tensor(c)).sum()

    v = fiamma.tensor(vals, requires_grad=True)
    loss(v).backward()
    eps = 1e-6
    num = np.zeros_like(vals)
    for i in np.ndindex(vals.shape):
        p, q = vals.copy(), vals.copy()
        p[i] += eps
        q[i] -= eps
        num[i] = (loss(fiamma.tensor(p)).item() - loss(fiamma.tensor(q)).item()) / (2 * eps)
    np.testing.assert_allclose(v.grad.numpy(), num, rtol=1e-5, atol=1e-8)
    assert m.qkv.weight.grad is not None


@pytest.mark.parity
def test_block_parity_with_torch_nested():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    fiamma.manual_seed(0)
    m = Block(causal=False)
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    a = seqs(dtype=np.float32)

    def torch_block(x):
        t = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in sd.items()}
        h = tF.layer_norm(x, (8,), t["norm.weight"], t["norm.bias"])
        q, k, v = tF.linear(h, t["qkv.weight"], t["qkv.bias"]).chunk(3, -1)
        # PyTorch's CPU nested SDPA wants (B, j, H, E)-contiguous inputs: chunk's are not
        q, k, v = (z.contiguous().unflatten(-1, (2, 4)).transpose(1, 2) for z in (q, k, v))
        y = tF.scaled_dot_product_attention(q, k, v)
        x = x + tF.linear(y.transpose(1, 2).flatten(-2), t["out.weight"])
        h = tF.layer_norm(x, (8,), t["ff.0.weight"], t["ff.0.bias"])
        h = tF.gelu(tF.linear(h, t["ff.1.weight"], t["ff.1.bias"]))
        return x + tF.linear(h, t["ff.4.weight"], t["ff.4.bias"]), t

    tx = torch.nested.nested_tensor([torch.from_numpy(s) for s in a], layout=torch.jagged)
    ref, tw = torch_block(tx)
    ref.values().sum().backward()
    out = m(jag(a))
    np.testing.assert_allclose(out.values().detach().numpy(), ref.values().detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    out.values().sum().backward()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tw[k].grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parity
def test_constructors_parity_with_torch():
    torch = pytest.importorskip("torch")
    a = seqs(dtype=np.float32)
    t = torch.nested.nested_tensor([torch.from_numpy(s) for s in a], layout=torch.jagged)
    f = jag(a)
    assert f.offsets().tolist() == t.offsets().tolist()
    assert f.dim() == t.dim() and f.size(2) == t.size(2)
    np.testing.assert_array_equal(f.values().numpy(), t.values().numpy())
    tn = torch.nested.narrow(torch.arange(12.).reshape(2, 6), 1, torch.tensor([1, 0]),
                             torch.tensor([3, 5]), layout=torch.jagged)
    fn = nested.narrow(fiamma.arange(12.).reshape(2, 6), 1, fiamma.tensor([1, 0]),
                       fiamma.tensor([3, 5]), layout=fiamma.jagged)
    assert fn.offsets().tolist() == tn.offsets().tolist()
    assert fn.lengths().tolist() == tn.lengths().tolist()
    for x, y in zip(fn.unbind(), tn.unbind()):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    np.testing.assert_allclose(
        nested.to_padded_tensor(f.softmax(-1), -1.0).numpy(),
        torch.nested.to_padded_tensor(t.softmax(-1), -1.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f.sum(1).numpy(), t.sum(1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f.transpose(1, 2).values().numpy(),
                               t.transpose(1, 2).values().numpy())
