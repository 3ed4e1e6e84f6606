"""F.embedding's gradient (padding rows get none), gradcheck and double backward, PyTorch's
gradients. (Its node is core's one recorded op, EmbeddingBackward0 as PyTorch's; see
test_nll_embedding_ops.py.)"""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F


def test_embedding_grad_with_padding_idx():
    w = fiamma.tensor(np.arange(15.0).reshape(5, 3), requires_grad=True)
    idx = fiamma.tensor([[0, 1, 3], [3, 3, 4]])
    out = F.embedding(idx, w, padding_idx=1)
    np.testing.assert_array_equal(out.detach().numpy(), np.arange(15.0).reshape(5, 3)[
        [[0, 1, 3], [3, 3, 4]]])
    g = np.arange(18.0).reshape(2, 3, 3)
    (out * fiamma.tensor(g)).sum().backward()
    ref = np.zeros((5, 3))
    for pos, row in zip(np.ndindex(2, 3), [0, 1, 3, 3, 3, 4]):
        if row != 1:  # padding_idx passes no gradient
            ref[row] += g[pos]
    np.testing.assert_array_equal(w.grad.numpy(), ref)


def test_embedding_module_and_no_grad_paths():
    e = nn.Embedding(4, 2)
    out = e(fiamma.tensor([2, 0]))
    assert out.grad_fn is not None and tuple(out.shape) == (2, 2)
    with fiamma.no_grad():
        assert e(fiamma.tensor([2, 0])).grad_fn is None
    e.weight.requires_grad_(False)
    assert e(fiamma.tensor([1])).grad_fn is None


def test_embedding_gradcheck_double_backward():
    idx = fiamma.tensor([[0, 2, 3], [3, 3, 4]])
    w = fiamma.randn(5, 3, dtype=fiamma.float64, requires_grad=True)

    def f(w):
        return F.embedding(idx, w).pow(2)

    assert fiamma.autograd.gradcheck(f, (w,))
    assert fiamma.autograd.gradgradcheck(f, (w,))


@pytest.mark.parity
def test_embedding_node_parity():
    torch = pytest.importorskip("torch")
    wt = torch.arange(12.0).reshape(4, 3).requires_grad_()
    ot = torch.nn.functional.embedding(torch.tensor([1, 1, 0]), wt, padding_idx=0)
    ot.sum().backward()
    wf = fiamma.arange(12.0).reshape(4, 3).requires_grad_()
    of = F.embedding(fiamma.tensor([1, 1, 0]), wf, padding_idx=0)
    of.sum().backward()
    np.testing.assert_array_equal(wf.grad.numpy(), wt.grad.numpy())
