"""EmbeddingBag / F.embedding_bag with scale_grad_by_freq=True: each index's gradient divided
by its count in the whole input (modes sum and mean, offsets or 2-D input, padding_idx,
per_sample_weights), against NumPy; against PyTorch where its CPU kernel is right (PyTorch
2.13 divides a once-occurring index sorting after a repeated one by the wrong count,
pytorch/pytorch#190063); max mode refuses it as PyTorch."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F


def _ref(flat, bags, nb, g, n, mode, padding_idx=None, psw=None):
    counts = np.bincount(flat, minlength=n)
    sizes = np.zeros(nb)
    for b, r in zip(bags, flat):
        if r != padding_idx:
            sizes[b] += 1
    out = np.zeros((n, g.shape[1]))
    for k, (b, r) in enumerate(zip(bags, flat)):
        if r == padding_idx:
            continue
        scale = 1.0 / counts[r]
        if mode == "mean":
            scale /= max(sizes[b], 1)
        if psw is not None:
            scale *= psw[k]
        out[r] += g[b] * scale
    return out


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_offsets_against_numpy(mode, padding_idx):
    rng = np.random.default_rng(0)
    flat = np.array([1, 1, 3, 1, 4, 3, 3, 0])
    offsets = np.array([0, 3, 5])
    bags = np.repeat(np.arange(3), np.diff(np.r_[offsets, len(flat)]))
    w = fiamma.tensor(rng.standard_normal((6, 2)), requires_grad=True)
    out = F.embedding_bag(fiamma.tensor(flat), w, fiamma.tensor(offsets), mode=mode,
                          scale_grad_by_freq=True, padding_idx=padding_idx)
    g = rng.standard_normal((3, 2))
    out.backward(fiamma.tensor(g))
    np.testing.assert_allclose(w.grad.numpy(), _ref(flat, bags, 3, g, 6, mode, padding_idx),
                               rtol=1e-12)
    # the forward is unchanged by the option
    plain = F.embedding_bag(fiamma.tensor(flat), w, fiamma.tensor(offsets), mode=mode,
                            padding_idx=padding_idx)
    np.testing.assert_array_equal(out.detach().numpy(), plain.detach().numpy())


def test_module_2d_input_and_per_sample_weights():
    rng = np.random.default_rng(1)
    bag = nn.EmbeddingBag(5, 3, mode="sum", scale_grad_by_freq=True)
    assert "scale_grad_by_freq=True" in repr(bag)
    idx = np.array([[2, 2, 4], [4, 1, 2]])
    psw = rng.uniform(0.5, 2.0, idx.shape)
    pw = fiamma.tensor(psw, dtype=fiamma.float32, requires_grad=True)
    out = bag(fiamma.tensor(idx), per_sample_weights=pw)
    g = rng.standard_normal((2, 3)).astype(np.float32)
    out.backward(fiamma.tensor(g))
    ref = _ref(idx.reshape(-1), np.repeat([0, 1], 3), 2, g, 5, "sum", psw=psw.reshape(-1))
    np.testing.assert_allclose(bag.weight.grad.numpy(), ref, rtol=1e-5)
    # the per-sample weights' gradient is not scaled: <g[bag], row>
    rows = bag.weight.detach().numpy()[idx]
    np.testing.assert_allclose(pw.grad.numpy(), (rows * g[:, None, :]).sum(-1), rtol=1e-5)


def test_max_mode_refuses_scaling_and_sparse():
    w = fiamma.randn(4, 2, requires_grad=True)
    with pytest.raises(ValueError, match="max mode does not support scaling the gradient"):
        F.embedding_bag(fiamma.tensor([[0, 1]]), w, mode="max", scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        nn.EmbeddingBag(4, 2, sparse=True, mode="max")(fiamma.tensor([[0, 1]]))


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_sparse_gradient(mode, padding_idx, scale):
    """sparse=True: the weight's gradient is a sparse COO tensor with one entry per index of
    the input (padding entries left out) whose dense form is the dense mode's gradient."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((10, 3))
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = fiamma.tensor([0, 4])
    g = fiamma.tensor(rng.standard_normal((2, 3)))
    grads = []
    for sparse in (True, False):
        bag = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx, sparse=sparse,
                              scale_grad_by_freq=scale, _weight=fiamma.tensor(w))
        bag(fiamma.tensor(flat), offsets).backward(g)
        grads.append(bag.weight.grad)
    sp, dense = grads
    assert sp.is_sparse and not dense.is_sparse
    assert sp._indices().tolist() == [[i for i in flat if i != padding_idx]]
    np.testing.assert_allclose(sp.to_dense().numpy(), dense.numpy(), rtol=1e-12, atol=1e-15)
    if padding_idx is not None:
        assert not dense.numpy()[padding_idx].any()


@pytest.mark.parity
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_parity_where_pytorch_cpu_is_right(mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    # counts that the CPU kernel's mis-indexing does not change: the repeated index sorts last
    flat = np.array([5, 1, 5, 2, 5, 0])
    offsets = np.array([0, 2, 4])
    g = rng.standard_normal((3, 3)).astype(np.float32)
    wt, wf = torch.tensor(w, requires_grad=True), fiamma.tensor(w, requires_grad=True)
    torch.nn.functional.embedding_bag(torch.tensor(flat), wt, torch.tensor(offsets), mode=mode,
                                      scale_grad_by_freq=True).backward(torch.tensor(g))
    F.embedding_bag(fiamma.tensor(flat), wf, fiamma.tensor(offsets), mode=mode,
                    scale_grad_by_freq=True).backward(fiamma.tensor(g))
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_max_mode_ties_send_the_gradient_to_the_first_entry():
    # PyTorch's max_indices: the first entry of the bag (input order) holding the maximum gets
    # the whole gradient; empty bags are 0 and pass none
    w = fiamma.tensor([[1.0, 2.0], [3.0, 2.0], [0.0, 5.0], [1.0, 1.0]], dtype=fiamma.float64,
                      requires_grad=True)
    y = fiamma.nn.functional.embedding_bag(fiamma.tensor([0, 1, 3, 0, 3, 2]), w,
                                           fiamma.tensor([0, 3, 5, 5]), mode="max")
    assert y.tolist() == [[3.0, 2.0], [1.0, 2.0], [0.0, 0.0], [0.0, 5.0]]
    gw = fiamma.tensor([[1.0, 10.0], [100.0, 1000.0], [7.0, 8.0], [9.0, 11.0]],
                       dtype=fiamma.float64)
    (g,) = fiamma.autograd.grad((y * gw).sum(), w)
    assert g.tolist() == [[100.0, 1010.0], [1.0, 0.0], [9.0, 11.0], [0.0, 0.0]]
    # padding entries are never the maximum
    y = fiamma.nn.functional.embedding_bag(fiamma.tensor([[0, 1, 2], [2, 2, 1]]), w,
                                           mode="max", padding_idx=2)
    (g,) = fiamma.autograd.grad(y.sum(), w)
    assert y.tolist() == [[3.0, 2.0], [3.0, 2.0]]
    assert g.tolist() == [[0.0, 1.0], [2.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
