"""Core's one-op nll_loss (fiamma.fused.nll_loss) and embedding (fiamma.embedding,
fiamma.embedding_renorm_): forward values against NumPy and their errors, without
fiamma-autograd; with it, one recorded node each."""

import numpy as np
import pytest

import fiamma


def test_embedding_values_and_shapes():
    w = np.arange(12.0).reshape(4, 3)
    for idx in ([3, 0, 3], [[1, 2], [0, 0]], 2):
        i = np.asarray(idx)
        out = fiamma.embedding(fiamma.tensor(w), fiamma.tensor(i))
        assert tuple(out.shape) == i.shape + (3,)
        np.testing.assert_array_equal(out.numpy(), w[i])
    i32 = fiamma.tensor([1, 3], dtype=fiamma.int32)
    np.testing.assert_array_equal(fiamma.embedding(fiamma.tensor(w), i32).numpy(), w[[1, 3]])


def test_embedding_errors():
    w = fiamma.zeros(4, 3)
    with pytest.raises(IndexError, match=r"embedding: index 7 is out of range for a weight of "
                                         r"4 rows"):
        fiamma.embedding(w, fiamma.tensor([0, 7]))
    with pytest.raises(RuntimeError, match=r"embedding: 'weight' must be 2-D"):
        fiamma.embedding(fiamma.zeros(4), fiamma.tensor([0]))
    with pytest.raises(RuntimeError, match="expected indices of dtype int64 or int32, got "
                                           "fiamma.float32"):
        fiamma.embedding(w, fiamma.tensor([0.0]))
    with pytest.raises(TypeError, match="expected weight and indices to be Tensors"):
        fiamma.embedding(w, [0])


def test_embedding_renorm_in_place():
    w0 = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    w = fiamma.tensor(w0)
    v = w._version
    assert fiamma.embedding_renorm_(w, fiamma.tensor([0, 1, 0]), 1.0) is w
    assert w._version > v
    np.testing.assert_allclose(w.numpy(), [w0[0] / (5 + 1e-7), w0[1], w0[2]], rtol=1e-12)
    with pytest.raises(IndexError, match="embedding_renorm_: an index is out of range"):
        fiamma.embedding_renorm_(w, fiamma.tensor([3]), 1.0)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_values(reduction):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 3))
    t = rng.integers(0, 5, (4, 3))
    t[0, 0] = -100
    w = rng.uniform(0.5, 2, 5)
    keep = t != -100
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(x, safe[:, None, :], 1)[:, 0, :]
    wt = w[safe] * keep
    loss = -picked * wt
    want = {"none": loss, "sum": loss.sum(), "mean": loss.sum() / wt.sum()}[reduction]
    got = fiamma.fused.nll_loss(fiamma.tensor(x), fiamma.tensor(t), fiamma.tensor(w), reduction)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_nll_loss_errors():
    x = fiamma.zeros(2, 3)
    with pytest.raises(IndexError, match=r"nll_loss: Target 3 is out of bounds"):
        fiamma.fused.nll_loss(x, fiamma.tensor([0, 3]))
    with pytest.raises(TypeError, match="expected a floating point input"):
        fiamma.fused.nll_loss(fiamma.zeros(2, 3, dtype=fiamma.int64), fiamma.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"expected target of shape \[2\]"):
        fiamma.fused.nll_loss(x, fiamma.tensor([[0, 1]]))


def test_one_recorded_node_each():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.zeros(2, 3, requires_grad=True)
    assert fiamma.fused.nll_loss(x, fiamma.tensor([0, 2])).grad_fn.name() == "NllLossBackward0"
    w = fiamma.zeros(3, 2, requires_grad=True)
    e = fiamma.embedding(w, fiamma.tensor([1]))
    assert e.grad_fn.name() == "EmbeddingBackward0"
    assert type(e.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
