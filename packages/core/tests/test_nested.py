"""fiamma.nested: construction, layouts, ops and autograd of nested tensors, each checked against
running the components one by one (NumPy / dense fiamma)."""

import numpy as np
import pytest

import fiamma
from fiamma import nested

RNG = np.random.default_rng(0)
LENS = (3, 1, 5)


def comps(lens=LENS, tail=(4,), dtype=np.float64):
    return [RNG.standard_normal((n,) + tuple(tail)).astype(dtype) for n in lens]


def jag(arrs, **kw):
    return nested.nested_tensor([fiamma.tensor(a) for a in arrs], layout=fiamma.jagged, **kw)


def close(nt, expected, tol=1e-10):
    got = [c.detach().numpy() for c in nt.unbind()]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


# ---- construction ---------------------------------------------------------------------------

def test_jagged_construction_parts_and_size():
    a = comps()
    nt = jag(a)
    assert nt.is_nested and not fiamma.ones(2).is_nested
    assert nt.layout is fiamma.jagged and nt.dtype is fiamma.float64
    assert nt.dim() == 3 and nt.size(0) == 3 and nt.size(2) == 4 and len(nt) == 3
    j = nt.size(1)
    assert type(j).__name__ == "NestedInt" and repr(j).startswith("j") and j == nt.size(1)
    assert repr(nt.shape) == f"fiamma.Size([3, {j!r}, 4])"
    assert nt.offsets().tolist() == [0, 3, 4, 9] and nt.lengths() is None
    np.testing.assert_array_equal(nt.values().numpy(), np.concatenate(a))
    close(nt, a)
    assert isinstance(nt, fiamma.Tensor) and nt.is_contiguous()
    assert "NestedTensor(size=(3, j" in repr(nt)


def test_strided_construction_any_dims_ragged():
    a = [RNG.standard_normal((2, 3)), RNG.standard_normal((4, 5))]
    nt = nested.nested_tensor([fiamma.tensor(x) for x in a])
    assert nt.layout is fiamma.strided and nt.dim() == 3 and nt.size(0) == 2
    for d in (1, 2):
        with pytest.raises(RuntimeError, match="irregular"):
            nt.size(d)
    with pytest.raises(RuntimeError, match="no shape"):
        nt.shape
    close(nt, a)
    assert repr(nt).startswith("nested_tensor([\n  tensor(")
    with pytest.raises(RuntimeError, match="jagged"):
        nt.values()


def test_construction_errors_name_the_op():
    with pytest.raises(RuntimeError, match="nested_tensor: all tensors must have the same dtype"):
        nested.nested_tensor([fiamma.ones(2), fiamma.ones(3, dtype=fiamma.int64)])
    with pytest.raises(RuntimeError, match="same number of dims"):
        nested.nested_tensor([fiamma.ones(2), fiamma.ones(3, 1)])
    with pytest.raises(RuntimeError, match="one ragged dim"):
        nested.nested_tensor([fiamma.ones(2, 3), fiamma.ones(2, 4)], layout=fiamma.jagged)
    with pytest.raises(RuntimeError, match="layout"):
        nested.nested_tensor([fiamma.ones(2)], layout=fiamma.sparse_coo)
    with pytest.raises(TypeError, match="as_nested_tensor"):
        nested.as_nested_tensor(3)
    nested.nested_tensor([fiamma.ones(2), fiamma.ones(3, dtype=fiamma.int64)],
                         dtype=fiamma.float64)  # converted first: fine


def test_nested_tensor_copies_and_has_no_history():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.ones(2, 3, requires_grad=True)
    nt = nested.nested_tensor([x, fiamma.ones(1, 3)], layout=fiamma.jagged)
    assert not nt.requires_grad and nt.grad_fn is None
    nt.values().add_(1.0)
    assert x.detach().numpy().max() == 1.0
    leaf = nested.nested_tensor([x, fiamma.ones(1, 3)], layout=fiamma.jagged,
                                requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad is None
    (leaf * 3.0).sum().backward()
    assert leaf.grad.is_nested and leaf.grad.offsets() is leaf.offsets()
    np.testing.assert_allclose(leaf.grad.values().numpy(), np.full((3, 3), 3.0))


@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_as_nested_tensor_gradients_reach_the_list(layout):
    pytest.importorskip("fiamma.autograd")
    a = comps()
    xs = [fiamma.tensor(c, requires_grad=True) for c in a]
    nt = nested.as_nested_tensor(xs, layout=layout)
    assert nt.requires_grad and not nt.is_leaf
    w = [RNG.standard_normal(c.shape) for c in a]
    loss = fiamma.stack([(c * fiamma.tensor(wi)).sum() for c, wi in
                         zip((nt.exp() * 2.0).unbind(), w)]).sum()
    loss.backward()
    for x, c, wi in zip(xs, a, w):
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.exp(c) * wi, rtol=1e-12)


def test_as_nested_tensor_of_a_dense_tensor_is_a_view():
    t = fiamma.tensor(RNG.standard_normal((2, 3, 4)))
    nt = nested.as_nested_tensor(t, layout=fiamma.jagged)
    assert nt.offsets().tolist() == [0, 3, 6]
    t.add_(1.0)
    np.testing.assert_array_equal(nt.values().numpy(), t.numpy().reshape(6, 4))
    assert nested.as_nested_tensor(nt, layout=fiamma.jagged) is nt


def test_nested_tensor_from_jagged_offsets_and_lengths():
    v = fiamma.tensor(RNG.standard_normal((9, 2)))
    nt = nested.nested_tensor_from_jagged(v, fiamma.tensor([0, 3, 4, 9]))
    close(nt, [v.numpy()[0:3], v.numpy()[3:4], v.numpy()[4:9]])
    assert nt.values() is v
    nc = nested.nested_tensor_from_jagged(v, fiamma.tensor([0, 4, 6]), fiamma.tensor([2, 3]))
    assert not nc.is_contiguous()
    close(nc, [v.numpy()[0:2], v.numpy()[4:7]])
    close(nc.contiguous(), [v.numpy()[0:2], v.numpy()[4:7]])
    nl = nested.nested_tensor_from_jagged(v, lengths=fiamma.tensor([4, 5]))
    assert nl.offsets().tolist() == [0, 4, 9]
    with pytest.raises(RuntimeError, match="out of range"):
        nested.nested_tensor_from_jagged(v, fiamma.tensor([0, 3, 12]))


@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_narrow(layout):
    t = RNG.standard_normal((2, 6, 3))
    nt = nested.narrow(fiamma.tensor(t), 1, fiamma.tensor([0, 2]), fiamma.tensor([3, 4]),
                       layout=layout)
    close(nt, [t[0, 0:3], t[1, 2:6]])
    with pytest.raises(RuntimeError, match="dim=1"):
        nested.narrow(fiamma.tensor(t), 2, 0, 1)


def test_masked_select_and_padding():
    t = RNG.standard_normal((3, 5))
    m = t > 0
    nt = nested.masked_select(fiamma.tensor(t), fiamma.tensor(m))
    close(nt, [t[i][m[i]] for i in range(3)])
    a = comps()
    padded = nested.to_padded_tensor(jag(a), -1.0)
    exp = np.full((3, 5, 4), -1.0)
    for i, c in enumerate(a):
        exp[i, :len(c)] = c
    np.testing.assert_array_equal(padded.numpy(), exp)
    assert jag(a).to_padded_tensor(0.0, output_size=(3, 7, 4)).shape == (3, 7, 4)
    with pytest.raises(RuntimeError, match="output_size"):
        jag(a).to_padded_tensor(0.0, output_size=(3, 2, 4))


def test_unbind_index_and_to():
    a = comps()
    nt = jag(a)
    np.testing.assert_array_equal(nt[2].numpy(), a[2])
    np.testing.assert_array_equal(nt[0, :, -1].numpy(), a[0][:, -1])
    assert not nt[0].is_nested
    f32 = nt.to(fiamma.float32)
    assert f32.dtype is fiamma.float32 and f32.is_nested and f32.offsets() is nt.offsets()
    assert nt.to(fiamma.float64) is nt and nt.float().dtype is fiamma.float32
    assert nt.numel() == sum(c.size for c in a)


# ---- ops -------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_pointwise_unary_and_binary(layout):
    a, b = comps(), comps()
    x = nested.nested_tensor([fiamma.tensor(c) for c in a], layout=layout)
    y = nested.nested_tensor([fiamma.tensor(c) for c in b], layout=layout)
    close(x.exp(), [np.exp(c) for c in a])
    close(fiamma.tanh(x), [np.tanh(c) for c in a])
    close(-x.abs(), [-np.abs(c) for c in a])
    close(x * y + 2.0, [p * q + 2.0 for p, q in zip(a, b)])
    close(1.0 - x / 4.0, [1.0 - p / 4.0 for p in a])
    close(fiamma.mul(x, y), [p * q for p, q in zip(a, b)])
    close(x.maximum(y), [np.maximum(p, q) for p, q in zip(a, b)])
    w = RNG.standard_normal(4)
    close(x + fiamma.tensor(w), [p + w for p in a])
    close(fiamma.tensor(w) * x, [w * p for p in a])
    rows = RNG.standard_normal((3, 1, 4))
    close(x - fiamma.tensor(rows), [p - r for p, r in zip(a, rows)])
    z = x.clone()
    z.mul_(2.0)
    close(z, [2 * p for p in a])
    close(x, a)


@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_function_forms_with_parameters(layout):
    a = comps()
    x = nested.nested_tensor([fiamma.tensor(c) for c in a], layout=layout)
    close(fiamma.pow(x, 3), [c ** 3 for c in a])
    close(fiamma.add(x, x, alpha=2), [3 * c for c in a])
    close(fiamma.sub(1.0, x), [1 - c for c in a])
    close(x.clamp(-0.5, 0.5),
          [np.clip(c, -0.5, 0.5) for c in a])
    with pytest.raises(NotImplementedError, match="out="):
        fiamma.exp(x, out=fiamma.empty(3))


def test_packed_and_strided_views_of_one_structure_combine():
    t = RNG.standard_normal((3, 6, 4))
    lens = [3, 1, 5]
    view = nested.narrow(fiamma.tensor(t), 1, fiamma.tensor([2, 0, 1]), fiamma.tensor(lens),
                         layout=fiamma.jagged)
    packed = jag([t[0, 2:5], t[1, 0:1], t[2, 1:6]])
    parts = [t[0, 2:5], t[1, 0:1], t[2, 1:6]]
    close(view + packed, [2 * p for p in parts])
    close(packed * view, [p * p for p in parts])
    close(fiamma.cat([packed, view], -1), [np.concatenate([p, p], -1) for p in parts])
    v2 = view.clone()
    v2.add_(packed)
    close(v2, [2 * p for p in parts])


def test_dense_operand_cannot_broadcast_along_the_ragged_dim():
    x = jag(comps())
    with pytest.raises(RuntimeError, match="ragged"):
        x + fiamma.ones(9, 4)
    other = jag(comps((2, 2, 2)))
    with pytest.raises(RuntimeError, match="ragged structure"):
        x + other


@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_matmul_with_a_dense_weight(layout):
    a = comps()
    w = RNG.standard_normal((4, 6))
    x = nested.nested_tensor([fiamma.tensor(c) for c in a], layout=layout)
    close(x @ fiamma.tensor(w), [c @ w for c in a])
    close(fiamma.matmul(x, fiamma.tensor(w)), [c @ w for c in a])


def test_strided_matmul_of_nested_tensors():
    a = [RNG.standard_normal((2, 2, 3)), RNG.standard_normal((2, 3, 3))]
    b = [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 5))]
    x = nested.nested_tensor([fiamma.tensor(c) for c in a])
    y = nested.nested_tensor([fiamma.tensor(c) for c in b])
    close(fiamma.matmul(x, y), [p @ q for p, q in zip(a, b)])


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_softmax_last_dim_and_errors():
    a = comps()
    x = jag(a)
    close(x.softmax(-1), [np_softmax(c, -1) for c in a])
    close(x.log_softmax(2), [np.log(np_softmax(c, -1)) for c in a])
    with pytest.raises(RuntimeError, match="batch dim"):
        x.softmax(0)
    s = nested.nested_tensor([fiamma.tensor(c) for c in a])  # strided: per component
    close(s.softmax(1), [np_softmax(c, 0) for c in a])
    close(x.softmax(1), [np_softmax(c, 0) for c in a])  # over the ragged dim: per component


@pytest.mark.parametrize("layout", [fiamma.jagged, fiamma.strided])
def test_cat_along_the_last_dim(layout):
    a, b = comps(), comps(tail=(2,))
    x = nested.nested_tensor([fiamma.tensor(c) for c in a], layout=layout)
    y = nested.nested_tensor([fiamma.tensor(c) for c in b], layout=layout)
    close(fiamma.cat([x, y * 2.0], -1), [np.concatenate([p, 2 * q], -1) for p, q in zip(a, b)])
    if layout is fiamma.jagged:
        with pytest.raises(RuntimeError, match="ragged dim"):
            fiamma.cat([x, x], 1)


def test_transpose_reshape_unflatten_flatten():
    a = comps(tail=(6,))
    x = jag(a)
    t = x.unflatten(-1, (2, 3)).transpose(1, 2)
    assert t.dim() == 4 and t._ragged_idx == 2 and t.values().shape == (2, 9, 3)
    close(t, [c.reshape(-1, 2, 3).transpose(1, 0, 2) for c in a])
    back = t.transpose(1, 2).flatten(-2)
    assert back._ragged_idx == 1
    close(back, a)
    close(x.reshape(3, -1, 3, 2), [c.reshape(-1, 3, 2) for c in a])
    close(x.view(3, -1, 6), a)
    with pytest.raises(RuntimeError, match="ragged dim must stay"):
        x.reshape(3, 2, -1)
    with pytest.raises(RuntimeError, match="batch dim"):
        x.transpose(0, 1)
    with pytest.raises(RuntimeError, match="ragged"):
        x.flatten(1, 2)
    s = nested.nested_tensor([fiamma.tensor(c) for c in a])
    close(s.reshape(3, -1, 2, 3).transpose(1, 2), [c.reshape(-1, 2, 3).transpose(1, 0, 2)
                                                   for c in a])


def test_split_and_chunk_last_dim():
    a = comps(tail=(6,))
    q, k, v = jag(a).chunk(3, -1)
    close(k, [c[:, 2:4] for c in a])
    p1, p2 = jag(a).split([4, 2], -1)
    close(p2, [c[:, 4:] for c in a])
    assert q.offsets() is v.offsets()
    with pytest.raises(RuntimeError, match="ragged"):
        jag(a).chunk(2, 1)


def test_reductions():
    a = comps()
    x = jag(a)
    close(x.sum(-1), [c.sum(-1) for c in a])
    close(x.mean(-1, keepdim=True), [c.mean(-1, keepdims=True) for c in a])
    s = x.sum(1)
    assert not s.is_nested
    np.testing.assert_allclose(s.numpy(), np.stack([c.sum(0) for c in a]), rtol=1e-12)
    np.testing.assert_allclose(x.mean(1).numpy(), np.stack([c.mean(0) for c in a]), rtol=1e-12)
    np.testing.assert_allclose(x.sum().item(), sum(c.sum() for c in a), rtol=1e-12)
    np.testing.assert_allclose(fiamma.sum(x, -1).values().numpy(),
                               np.concatenate([c.sum(-1) for c in a]), rtol=1e-12)
    with pytest.raises(RuntimeError, match="dim 0"):
        x.sum(0)


def test_unsupported_ops_name_the_op():
    x = jag(comps())
    with pytest.raises(NotImplementedError, match="cumsum: not supported for nested tensors"):
        fiamma.cumsum(x, 2)
    with pytest.raises(NotImplementedError, match="not supported for nested tensors"):
        fiamma.stack([x, x])
    with pytest.raises(RuntimeError, match="batch dim"):
        fiamma.cat([x, x], 0)
    with pytest.raises(NotImplementedError, match="stride"):
        x.stride()


def numgrad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def test_numerical_gradient_through_a_chain_of_nested_ops():
    pytest.importorskip("fiamma.autograd")
    a = comps(tail=(6,))
    vals = np.concatenate(a)
    w = RNG.standard_normal((3, 3))
    c = RNG.standard_normal((2, 3))
    offs = fiamma.tensor([0, 3, 4, 9])

    def run(v):
        nt = nested.nested_tensor_from_jagged(v, offs)
        t = nt.unflatten(-1, (2, 3)).transpose(1, 2)  # (B, 2, j, 3)
        y = (t @ fiamma.tensor(w)).softmax(-1) * fiamma.tensor(c).unsqueeze(1)
        y = y.transpose(1, 2).flatten(-2).tanh()
        return (y.sum(1) ** 2).sum() + y.mean(-1).sum()

    v = fiamma.tensor(vals, requires_grad=True)
    run(v).backward()
    num = numgrad(lambda x: run(fiamma.tensor(x)).item(), vals)
    np.testing.assert_allclose(v.grad.numpy(), num, rtol=1e-6, atol=1e-8)


def test_map_dense_per_component():
    a = comps()
    x = jag(a)
    y = jag(comps())
    out = x.map_dense(lambda p, q: p * q.sum(), y, per_component=True)
    close(out, [p * q.numpy().sum() for p, q in zip(a, y.unbind())])
    with pytest.raises(RuntimeError, match="ragged structure"):
        x.map_dense(lambda p: p[:1], per_component=True)
