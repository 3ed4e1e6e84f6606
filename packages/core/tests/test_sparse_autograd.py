"""Gradients through sparse COO tensors: to the dense operand of products and to the values of
a sparse tensor, checked numerically in float64; a sparse leaf's .grad is sparse."""

import numpy as np
import pytest

import fiamma

autograd = pytest.importorskip("fiamma.autograd", reason="needs fiamma-autograd")
gradcheck = autograd.gradcheck

RNG = np.random.default_rng(1)
IDX = np.array([[0, 2, 2, 4, 1, 0], [1, 0, 3, 2, 2, 1]])  # (0, 1) twice


def sparse_of(values, shape=(5, 4)):
    return fiamma.sparse_coo_tensor(fiamma.tensor(IDX), values, shape)


def dense_ref(values, shape=(5, 4)):
    d = np.zeros(shape)
    for k in range(IDX.shape[1]):
        d[tuple(IDX[:, k])] += values[k]
    return d


def test_gradcheck_sparse_dense_product_both_inputs():
    v = fiamma.tensor(RNG.standard_normal(6), requires_grad=True)
    m = fiamma.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda v, m: fiamma.mm(sparse_of(v), m), (v, m))
    assert gradcheck(lambda v, m: sparse_of(v) @ m[:, 0], (v, m))


def test_gradcheck_dense_sparse_product():
    v = fiamma.tensor(RNG.standard_normal(6), requires_grad=True)
    w = fiamma.tensor(RNG.standard_normal((3, 5)), requires_grad=True)
    assert gradcheck(lambda v, w: w @ sparse_of(v), (v, w))
    assert gradcheck(lambda v, w: fiamma.addmm(fiamma.ones(3, 4, dtype=fiamma.float64), w,
                                               sparse_of(v), beta=0.5, alpha=2), (v, w))


def test_gradcheck_to_dense_coalesce_sum_softmax():
    v = fiamma.tensor(RNG.standard_normal(6), requires_grad=True)
    d = fiamma.tensor(RNG.standard_normal((5, 4)))
    assert gradcheck(lambda v: sparse_of(v).to_dense(), (v,))
    assert gradcheck(lambda v: sparse_of(v).coalesce().values(), (v,))
    assert gradcheck(lambda v: sparse_of(v).sum(0).to_dense(), (v,))
    assert gradcheck(lambda v: (sparse_of(v) * d + d).sum(1), (v,))
    assert gradcheck(lambda v: fiamma.sparse.softmax(sparse_of(v), 1).values(), (v,))
    assert gradcheck(lambda v: fiamma.sparse.log_softmax(sparse_of(v), 0).values(), (v,))


def test_gradcheck_to_sparse_of_dense():
    x = fiamma.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    m = fiamma.tensor(RNG.standard_normal((3, 2)))
    assert gradcheck(lambda x: x.to_sparse() @ m, (x,))


def test_sparse_leaf_grad_is_sparse_with_its_pattern():
    vals = RNG.standard_normal(6)
    s = fiamma.sparse_coo_tensor(fiamma.tensor(IDX), fiamma.tensor(vals), (5, 4),
                                 requires_grad=True)
    assert s.requires_grad and s.is_leaf and s.grad_fn is None
    assert "requires_grad=True" in repr(s)
    w = RNG.standard_normal((5, 4))
    (s.to_dense() * fiamma.tensor(w)).sum().backward()
    g = s.grad
    assert g.is_sparse and g.is_coalesced()
    # d/d(entry) of sum(w * dense) is w at the entry's position, on s's (coalesced) pattern
    mask = dense_ref(np.ones(6)) != 0
    np.testing.assert_allclose(g.to_dense().numpy(), np.where(mask, w, 0))
    s.grad = None
    assert s.grad is None
    m = RNG.standard_normal((4, 2))
    fiamma.sparse.mm(s, fiamma.tensor(m)).sum().backward()
    np.testing.assert_allclose(g.to_dense().numpy() * 0 + s.grad.to_dense().numpy(),
                               np.where(mask, m.sum(1)[None, :], 0))


def test_non_leaf_sparse_tracks_history():
    v = fiamma.tensor(RNG.standard_normal(6), requires_grad=True)
    s = sparse_of(v)
    assert s.requires_grad and s.grad is None
    s2 = s * 2
    assert not s2.is_leaf and s2.grad_fn is not None and "grad_fn=<" in repr(s2)
    s2.to_dense().sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), np.full(6, 2.0))
    assert s2.detach().requires_grad is False


def test_requires_grad_on_integer_values_raises():
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: only floating point"):
        fiamma.sparse_coo_tensor([[0]], [1], (2,), requires_grad=True)


def test_gcn_layer_trains():
    """A two-layer GCN step on a random graph: the loss goes down with SGD."""
    n, f, h, c = 30, 8, 6, 3
    rng = np.random.default_rng(2)
    edges = rng.integers(0, n, (2, 90))
    adj = fiamma.sparse_coo_tensor(fiamma.tensor(edges), fiamma.ones(90), (n, n)).coalesce()
    deg = fiamma.sparse.sum(adj, 1).to_dense() + 1
    adj = adj + fiamma.eye(n)  # dense
    adj = (adj / deg.unsqueeze(1)).to_sparse()
    x = fiamma.tensor(rng.standard_normal((n, f)), dtype=fiamma.float32).to_sparse()
    y = fiamma.tensor(rng.integers(0, c, n))
    w1 = fiamma.tensor(rng.standard_normal((f, h)) * 0.3, dtype=fiamma.float32,
                       requires_grad=True)
    w2 = fiamma.tensor(rng.standard_normal((h, c)) * 0.3, dtype=fiamma.float32,
                       requires_grad=True)
    losses = []
    for _ in range(30):
        z = fiamma.spmm(adj, fiamma.mm(x, w1)).relu()
        out = (adj @ (z @ w2)).log_softmax(1)
        loss = -out[fiamma.arange(n), y].mean()
        losses.append(loss.item())
        w1.grad = w2.grad = None
        loss.backward()
        with fiamma.no_grad():
            w1 -= 0.5 * w1.grad
            w2 -= 0.5 * w2.grad
    assert losses[-1] < losses[0] * 0.9
