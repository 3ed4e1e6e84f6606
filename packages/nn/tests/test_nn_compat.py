"""nn names kept for ported scripts: in-place functional activations, F.sigmoid/F.tanh,
gumbel_softmax, the deprecated pre-underscore nn.init names; (parity) against torch."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

_INPLACE = [("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
            ("selu_", ()), ("celu_", (1.5,)), ("threshold_", (0.1, -3.0))]


@pytest.mark.parametrize("name,args", _INPLACE)
def test_inplace_activations_match_out_of_place(name, args):
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = fiamma.tensor(a)
    ptr = x.data_ptr()
    out = getattr(F, name)(x, *args)
    assert out is x and x.data_ptr() == ptr
    ref = getattr(F, name[:-1])(fiamma.tensor(a), *args)
    np.testing.assert_allclose(x.numpy(), ref.numpy(), rtol=1e-12)


def test_rrelu_inplace_eval_and_deprecated_aliases():
    x = fiamma.tensor([-4.0, 2.0])
    F.rrelu_(x)
    np.testing.assert_allclose(x.numpy(), [-4.0 * (1 / 8 + 1 / 3) / 2, 2.0])
    y = fiamma.tensor([-1.0, 0.0, 3.0])
    np.testing.assert_allclose(F.sigmoid(y).numpy(), 1 / (1 + np.exp([1.0, 0.0, -3.0])),
                               rtol=1e-6)
    np.testing.assert_allclose(F.tanh(y).numpy(), np.tanh([-1.0, 0.0, 3.0]), rtol=1e-6)


def test_gumbel_softmax():
    fiamma.manual_seed(0)
    logits = fiamma.tensor([[0.0, 3.0, -1.0]] * 2000)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-5)
    hard = F.gumbel_softmax(logits, hard=True)
    assert set(hard.sum(-1).tolist()) == {1.0} and set(hard.reshape(-1).tolist()) <= {0.0, 1.0}
    # the argmax of logits + Gumbel noise is a sample of softmax(logits)
    freq = hard.mean(0).numpy()
    p = np.exp([0.0, 3.0, -1.0]) / np.exp([0.0, 3.0, -1.0]).sum()
    np.testing.assert_allclose(freq, p, atol=0.03)
    w = fiamma.zeros(1, 3, requires_grad=True)
    (F.gumbel_softmax(w, hard=True) * fiamma.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert w.grad is not None and abs(w.grad.sum().item()) < 1e-6  # softmax's gradient


def test_deprecated_init_names_warn_and_work():
    w = fiamma.empty(3, 4)
    with pytest.warns(FutureWarning, match="xavier_uniform_"):
        nn.init.xavier_uniform(w)
    bound = np.sqrt(6.0 / 7.0)
    assert w.abs().max().item() <= bound
    with pytest.warns(FutureWarning, match="constant_"):
        nn.init.constant(w, 2.0)
    assert w.tolist() == [[2.0] * 4] * 3
    for name in ("uniform", "normal", "eye", "dirac", "xavier_normal", "kaiming_uniform",
                 "kaiming_normal", "orthogonal", "sparse"):
        assert callable(getattr(nn.init, name))


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("name,args", _INPLACE)
def test_inplace_activation_parity(name, args):
    a = np.random.default_rng(1).standard_normal((5,))
    x, t = fiamma.tensor(a), torch.tensor(a)
    getattr(F, name)(x, *args)
    getattr(torch.nn.functional, name)(t, *args)
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-12)


def test_uninitialized_parameter_types():
    from fiamma.nn.parameter import UninitializedBuffer, UninitializedParameter

    p = nn.Parameter(fiamma.zeros(2))
    assert not isinstance(p, UninitializedParameter)
    assert issubclass(UninitializedParameter, nn.Parameter)
    assert isinstance(UninitializedParameter(), nn.Parameter)
    assert not isinstance(UninitializedBuffer(), nn.Parameter)  # lazy modules: test_lazy_modules


def test_nn_parallel_distributed_module_path():
    import fiamma.nn.parallel.distributed as ddp_module

    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        ddp_module.Nope
    pytest.importorskip("fiamma.distributed")
    from fiamma.nn.parallel.distributed import DistributedDataParallel

    assert DistributedDataParallel is nn.parallel.DistributedDataParallel
