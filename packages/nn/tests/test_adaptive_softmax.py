"""nn.AdaptiveLogSoftmaxWithLoss: the log-probabilities against a float64 reference built from
the module's own layers, gradients by finite differences, predict, errors, PyTorch parity."""

import numpy as np
import pytest

import fiamma
from fiamma import nn


def _ref_log_prob(m, x):
    """Every class's log-probability, from the layers' weights with NumPy."""
    def lsm(z):
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))

    head = x @ m.head.weight.detach().numpy().T
    if m.head.bias is not None:
        head = head + m.head.bias.detach().numpy()
    hl = lsm(head)
    parts = [hl[:, :m.shortlist_size]]
    for i, proj in enumerate(m.tail):
        z = x @ proj[0].weight.detach().numpy().T @ proj[1].weight.detach().numpy().T
        parts.append(lsm(z) + hl[:, m.shortlist_size + i:m.shortlist_size + i + 1])
    return np.concatenate(parts, 1)


@pytest.mark.parametrize("cutoffs,div,head_bias", [([4, 8], 4.0, False), ([2, 5, 9], 2.0, True),
                                                   ([1], 1.0, False)])
def test_against_reference(cutoffs, div, head_bias):
    fiamma.manual_seed(0)
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 12, cutoffs, div_value=div, head_bias=head_bias).double()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 8))
    y = rng.integers(0, 12, 20)
    ref = _ref_log_prob(m, x)
    np.testing.assert_allclose(np.log(np.exp(ref).sum(1)), 0, atol=1e-12)  # a distribution
    out = m(fiamma.tensor(x), fiamma.tensor(y))
    np.testing.assert_allclose(out.output.detach().numpy(), ref[np.arange(20), y], rtol=1e-12)
    np.testing.assert_allclose(out.loss.item(), -ref[np.arange(20), y].mean(), rtol=1e-12)
    np.testing.assert_allclose(m.log_prob(fiamma.tensor(x)).detach().numpy(), ref, rtol=1e-12)
    assert m.predict(fiamma.tensor(x)).tolist() == ref.argmax(1).tolist()
    # unbatched: a 1-D input with a 0-d target
    one = m(fiamma.tensor(x[3]), fiamma.tensor(int(y[3])))
    assert one.output.shape == () and abs(one.output.item() - ref[3, y[3]]) < 1e-12
    assert m.predict(fiamma.tensor(x[3])).item() == ref[3].argmax()


def test_gradients_match_finite_differences():
    pytest.importorskip("fiamma.autograd")
    fiamma.manual_seed(2)
    m = nn.AdaptiveLogSoftmaxWithLoss(6, 9, [3, 6], div_value=2.0).double()
    x = fiamma.randn(7, 6, dtype=fiamma.float64, requires_grad=True)
    y = fiamma.tensor([0, 4, 8, 2, 7, 5, 1])
    assert fiamma.autograd.gradcheck(lambda inp: m(inp, y).loss, (x,))
    w = m.tail[1][0].weight
    m(x, y).loss.backward()
    g = w.grad.clone()
    eps = 1e-6
    with fiamma.no_grad():
        w[0, 0] += eps
        up = m(x, y).loss.item()
        w[0, 0] -= 2 * eps
        down = m(x, y).loss.item()
        w[0, 0] += eps
    assert abs(g[0, 0].item() - (up - down) / (2 * eps)) < 1e-6


def test_errors():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [10])
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(fiamma.ones(2, 4), fiamma.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        m(fiamma.ones(2, 4), fiamma.tensor([[1]]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(fiamma.ones(2, 4), fiamma.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="expected a 1D or 2D input with 4 features"):
        m.log_prob(fiamma.ones(2, 5))


@pytest.mark.parity
def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 50, [5, 20, 30], div_value=2.0,
                                            head_bias=True).double()
    f = nn.AdaptiveLogSoftmaxWithLoss(16, 50, [5, 20, 30], div_value=2.0, head_bias=True).double()
    assert repr(t) == repr(f) and list(t.state_dict()) == list(f.state_dict())
    f.load_state_dict({k: fiamma.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x, y = rng.standard_normal((12, 16)), rng.integers(0, 50, 12)
    xt, xf = torch.tensor(x, requires_grad=True), fiamma.tensor(x, requires_grad=True)
    ot, of = t(xt, torch.tensor(y)), f(xf, fiamma.tensor(y))
    ot.loss.backward()
    of.loss.backward()
    np.testing.assert_allclose(of.output.detach().numpy(), ot.output.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-15)
    for p, q in zip(t.parameters(), f.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-15)
    assert f.predict(xf).tolist() == t.predict(xt).tolist()
