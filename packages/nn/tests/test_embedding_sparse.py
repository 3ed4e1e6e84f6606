"""Embedding(sparse=True) / F.embedding(..., sparse=True): the weight's gradient is a sparse
COO tensor of the looked-up rows (padding_idx's left out, uncoalesced, accumulated by
concatenation), as PyTorch's; mixed with a dense use of the same weight it sums densely."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F


def _dense_ref(idx, g, n, padding_idx=None, scale=False):
    flat = np.asarray(idx).reshape(-1)
    gf = np.asarray(g).reshape(len(flat), -1)
    counts = np.bincount(flat, minlength=n)
    out = np.zeros((n, gf.shape[1]))
    for i, r in enumerate(flat):
        if r != padding_idx:
            out[r] += gf[i] / (counts[r] if scale else 1)
    return out


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_sparse_gradient_rows_and_values(padding_idx, scale):
    rng = np.random.default_rng(0)
    w = fiamma.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    idx = np.array([[1, 2, 5], [1, 2, 1]])
    out = F.embedding(fiamma.tensor(idx), w, padding_idx=padding_idx, scale_grad_by_freq=scale,
                      sparse=True)
    assert out.grad_fn.name() == "EmbeddingBackward0"
    g = rng.standard_normal((2, 3, 3))
    out.backward(fiamma.tensor(g))
    assert w.grad.is_sparse and w.grad.layout is fiamma.sparse_coo
    kept = [r for r in idx.reshape(-1) if r != padding_idx]
    assert w.grad._indices().tolist() == [kept]
    assert not w.grad.is_coalesced()
    np.testing.assert_allclose(w.grad.to_dense().numpy(),
                               _dense_ref(idx, g, 6, padding_idx, scale), rtol=1e-12)


def test_sparse_gradients_accumulate_by_concatenation():
    emb = nn.Embedding(5, 2, sparse=True)
    assert "sparse=True" in repr(emb)
    emb(fiamma.tensor([1, 3])).sum().backward()
    emb(fiamma.tensor([3])).sum().backward()
    assert emb.weight.grad.is_sparse and emb.weight.grad._nnz() == 3
    ref = np.zeros((5, 2))
    ref[1] = 1
    ref[3] = 2
    np.testing.assert_array_equal(emb.weight.grad.to_dense().numpy(), ref)


def test_sparse_gradient_into_a_dense_grad_and_tied_dense_use():
    w = fiamma.ones(4, 2, requires_grad=True)
    w.grad = fiamma.zeros(4, 2)
    F.embedding(fiamma.tensor([0, 0, 2]), w, sparse=True).sum().backward()
    assert not w.grad.is_sparse
    np.testing.assert_array_equal(w.grad.numpy(), [[2, 2], [0, 0], [1, 1], [0, 0]])
    # tied: the same weight used densely too (an output projection): the two sum densely
    v = fiamma.ones(4, 2, requires_grad=True)
    e = F.embedding(fiamma.tensor([1]), v, sparse=True)   # (1, 2)
    (e.sum() + (v * 3.0).sum()).backward()
    dense = v.grad.to_dense() if v.grad.is_sparse else v.grad
    np.testing.assert_array_equal(dense.numpy(), [[3, 3], [4, 4], [3, 3], [3, 3]])


def test_sparse_gradient_double_backward_through_values():
    w = fiamma.randn(5, 2, dtype=fiamma.float64, requires_grad=True)
    out = F.embedding(fiamma.tensor([1, 4, 1]), w, sparse=True)
    go = fiamma.randn(3, 2, dtype=fiamma.float64, requires_grad=True)
    (gw,) = fiamma.autograd.grad(out, w, go, create_graph=True)
    assert gw.is_sparse
    (ggo,) = fiamma.autograd.grad(gw._values().sum(), go)
    np.testing.assert_array_equal(ggo.numpy(), np.ones((3, 2)))


@pytest.mark.parity
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_sparse_gradient_parity(padding_idx):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    idx = np.array([[0, 3, 3], [7, 0, 1]])
    g = rng.standard_normal((2, 3, 4)).astype(np.float32)
    wt, wf = torch.tensor(w, requires_grad=True), fiamma.tensor(w, requires_grad=True)
    for k in range(2):  # two backward passes: accumulation
        torch.nn.functional.embedding(torch.tensor(idx), wt, padding_idx=padding_idx,
                                      sparse=True).backward(torch.tensor(g))
        F.embedding(fiamma.tensor(idx), wf, padding_idx=padding_idx,
                    sparse=True).backward(fiamma.tensor(g))
        if k == 0:  # the entries themselves (PyTorch's in-place sparse add may then merge
            # entries of identical index lists where fiamma concatenates: same values)
            assert wf.grad._indices().tolist() == wt.grad._indices().tolist()
            np.testing.assert_allclose(wf.grad._values().numpy(), wt.grad._values().numpy(),
                                       rtol=1e-6)
    np.testing.assert_allclose(wf.grad.to_dense().numpy(), wt.grad.to_dense().numpy(),
                               rtol=1e-6)
