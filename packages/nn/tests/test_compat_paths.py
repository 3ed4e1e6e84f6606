"""PyTorch's module paths for classes fiamma defines elsewhere (programs name them there, e.g.
in ``torch.serialization.safe_globals`` lists), and autocast through nn's layers."""

import pytest

import fiamma
import fiamma.nn as nn
from fiamma.nn.modules import activation, linear


def test_torch_module_paths():
    assert activation.MultiheadAttention is nn.MultiheadAttention
    assert issubclass(linear.NonDynamicallyQuantizableLinear, nn.Linear)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        activation.Nope
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        linear.Nope


def test_layers_under_cpu_autocast():
    x = fiamma.randn(2, 3, 6, 6)
    conv, lin = nn.Conv2d(3, 4, 3), nn.Linear(64, 5)
    with fiamma.autocast("cpu"):
        h = conv(x)
        y = lin(h.flatten(1))
        loss = nn.functional.cross_entropy(y, fiamma.tensor([0, 1]))
        mse = nn.MSELoss()(y, fiamma.zeros(2, 5))
        p = nn.PReLU()(x)
    assert h.dtype is y.dtype is p.dtype is fiamma.bfloat16
    assert loss.dtype is mse.dtype is fiamma.float32
    assert lin(h.flatten(1).float()).dtype is fiamma.float32  # outside the region


def test_functional_module_has_nn_functional_as_F():
    """``from torch.functional import F`` (PyTorch's torch/functional.py imports
    torch.nn.functional as F): the transfer-learning tutorial's Co-Tuning head uses it."""
    import fiamma.nn.functional as nn_functional
    from fiamma.functional import F

    assert F is nn_functional
    with pytest.raises(AttributeError, match="no attribute 'G'"):
        fiamma.functional.G
