"""Embedding and nn.utils (clipping, parameter vectors)."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None


def test_embedding_lookup_padding_and_grad():
    e = nn.Embedding(7, 4, padding_idx=-1)
    assert e.padding_idx == 6 and e.weight[6].abs().sum().item() == 0
    idx = fiamma.tensor([[1, 6, 1], [3, 0, 6]])
    out = e(idx)
    w = e.weight.detach().numpy()
    np.testing.assert_array_equal(out.detach().numpy(), w[idx.numpy()])
    out.sum().backward()
    g = e.weight.grad.numpy()
    counts = np.bincount(idx.numpy().ravel(), minlength=7).astype(np.float32)
    counts[6] = 0  # the padding row gets no gradient
    np.testing.assert_array_equal(g, np.repeat(counts[:, None], 4, 1))
    assert repr(e) == "Embedding(7, 4, padding_idx=6)"
    with pytest.raises(RuntimeError, match="integer index"):
        e(fiamma.tensor([0.5]))
    assert nn.Embedding(3, 2, sparse=True).sparse  # sparse gradients: test_embedding_sparse.py


def test_embedding_max_norm_and_pretrained():
    w = fiamma.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    e = nn.Embedding.from_pretrained(w.clone(), max_norm=1.0)
    assert not e.weight.requires_grad
    out = e(fiamma.tensor([0, 1]))
    np.testing.assert_allclose(out.numpy(), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-5)
    np.testing.assert_allclose(e.weight.numpy()[2], [6.0, 8.0])  # unreferenced row untouched


def test_clip_grad():
    a, b = nn.Parameter(fiamma.zeros(3)), nn.Parameter(fiamma.zeros(4))
    a.grad, b.grad = fiamma.full((3,), 3.0), fiamma.full((4,), -4.0)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    ref = np.sqrt(3 * 9 + 4 * 16)
    assert total.item() == pytest.approx(ref, rel=1e-6)
    scaled = np.concatenate([a.grad.numpy(), b.grad.numpy()])
    assert np.linalg.norm(scaled) == pytest.approx(1.0, rel=1e-5)
    a.grad = fiamma.tensor([5.0, -0.1, 0.0])
    nn.utils.clip_grad_value_([a], 0.5)
    assert a.grad.tolist() == pytest.approx([0.5, -0.1, 0.0])
    a.grad = fiamma.tensor([float("inf"), 0.0, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([a], 1.0, error_if_nonfinite=True)
    a.grad = fiamma.tensor([3.0, 4.0, 0.0])
    assert nn.utils.clip_grad_norm_(a, 10.0, norm_type=float("inf")).item() == 4.0
    assert a.grad.tolist() == [3.0, 4.0, 0.0]  # below the bound: unchanged


def test_clip_grad_norm_keeps_float64_precision():
    # A float64 model's norm must come back in float64 to full precision (NumPy reference);
    # it used to be cut to float32 (7 digits), which hid step-by-step parity in float64.
    rng = np.random.default_rng(3)
    ga, gb = rng.standard_normal(7), rng.standard_normal((3, 4))
    a = fiamma.zeros(7, dtype=fiamma.float64, requires_grad=True)
    b = fiamma.zeros(3, 4, dtype=fiamma.float64, requires_grad=True)
    a.grad, b.grad = fiamma.tensor(ga), fiamma.tensor(gb)
    ref = np.sqrt((ga ** 2).sum() + (gb ** 2).sum())
    total = nn.utils.clip_grad_norm_([a, b], max_norm=0.1)
    assert total.dtype == fiamma.float64
    assert abs(total.item() - ref) <= 1e-13 * ref
    coef = 0.1 / (ref + 1e-6)
    np.testing.assert_allclose(a.grad.numpy(), ga * coef, rtol=1e-13)
    f32 = fiamma.zeros(2, requires_grad=True)
    f32.grad = fiamma.tensor([3.0, 4.0])
    assert nn.utils.clip_grad_norm_(f32, 1.0).dtype == fiamma.float32


def test_parameter_vectors():
    lin = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(lin.parameters())
    assert v.shape == (8,)
    nn.utils.vector_to_parameters(fiamma.arange(8.0), lin.parameters())
    assert lin.weight.detach().reshape(-1).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert lin.bias.tolist() == [6.0, 7.0] and lin.weight.requires_grad
    with pytest.raises(ValueError, match="elements"):
        nn.utils.vector_to_parameters(fiamma.arange(9.0), lin.parameters())


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_embedding_and_clip_equal_pytorch():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((9, 5)).astype(np.float32)
    idx = rng.integers(0, 9, (4, 3))
    fw, tw = fiamma.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    fo = F.embedding(fiamma.tensor(idx), fw, padding_idx=2)
    to = torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=2)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy())
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    (fo * fiamma.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)
    fn = nn.utils.clip_grad_norm_([fw], 0.5, norm_type=3.0)
    tn = torch.nn.utils.clip_grad_norm_([tw], 0.5, norm_type=3.0)
    assert fn.item() == pytest.approx(tn.item(), rel=1e-5)
    assert str(fn.dtype).split(".")[-1] == str(tn.dtype).split(".")[-1]
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-7)


def _freq_reference(w, idx, g, pad):
    # each occurrence's gradient row divided by its index's count in the batch, summed per row
    flat, gr = idx.reshape(-1), g.reshape(-1, w.shape[1])
    counts = np.bincount(flat, minlength=w.shape[0])
    want = np.zeros_like(w)
    for i, r in zip(flat, gr):
        if i != pad:
            want[i] += r / counts[i]
    return want


@pytest.mark.parametrize("pad", [None, 1])
def test_embedding_scale_grad_by_freq(pad):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((10, 4))
    idx = np.array([[1, 2, 1, 3], [3, 1, 0, 2]])
    g = rng.standard_normal((2, 4, 4))
    e = fiamma.nn.Embedding(10, 4, padding_idx=pad, scale_grad_by_freq=True,
                            _weight=fiamma.tensor(w))
    y = e(fiamma.tensor(idx))
    np.testing.assert_array_equal(y.detach().numpy(), w[idx])  # the lookup is unchanged
    y.backward(fiamma.tensor(g))
    np.testing.assert_allclose(e.weight.grad.numpy(), _freq_reference(w, idx, g, pad),
                               rtol=1e-12, atol=1e-12)
    assert "scale_grad_by_freq=True" in repr(e)
    # the functional form, and without it every occurrence counts in full
    wt = fiamma.tensor(w, requires_grad=True)
    F.embedding(fiamma.tensor(idx), wt).backward(fiamma.tensor(g))
    assert wt.grad[1].tolist() != e.weight.grad[1].tolist() or pad == 1


@pytest.mark.parity
def test_embedding_scale_grad_by_freq_parity():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    w = rng.standard_normal((12, 3)).astype(np.float32)
    idx = rng.integers(0, 12, (5, 7))
    g = rng.standard_normal((5, 7, 3)).astype(np.float32)
    grads = []
    for lib in (torch, fiamma):
        e = lib.nn.Embedding(12, 3, padding_idx=2, scale_grad_by_freq=True,
                             _weight=lib.tensor(w))
        e(lib.tensor(idx)).backward(lib.tensor(g))
        grads.append(e.weight.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-6)
