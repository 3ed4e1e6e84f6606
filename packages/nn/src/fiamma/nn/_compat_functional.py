"""torch.nn.functional names that older and newer scripts use besides the main forms: the
in-place activations (``F.relu_``, ``F.elu_``, ...), the deprecated ``F.sigmoid``/``F.tanh``
and ``gumbel_softmax``."""

import fiamma
from fiamma.nn import _activation_functional as A

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_", "rrelu_",
           "threshold_", "sigmoid", "tanh", "gumbel_softmax"]


def relu_(input):
    """In-place ``relu``."""
    return input.relu_()


def elu_(input, alpha=1.0):
    """In-place ``elu``."""
    return A.elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """In-place ``leaky_relu``."""
    return A.leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place ``hardtanh``."""
    return A.hardtanh(input, min_val, max_val, inplace=True)


def selu_(input):
    """In-place ``selu``."""
    return A.selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """In-place ``celu``."""
    return A.celu(input, alpha, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """In-place ``rrelu``."""
    return A.rrelu(input, lower, upper, training, inplace=True)


def threshold_(input, threshold, value):
    """In-place ``threshold``."""
    return A.threshold(input, threshold, value, inplace=True)


def sigmoid(input):
    """``fiamma.sigmoid`` (PyTorch keeps ``F.sigmoid`` as a deprecated alias)."""
    return fiamma.sigmoid(input)


def tanh(input):
    """``fiamma.tanh`` (PyTorch keeps ``F.tanh`` as a deprecated alias)."""
    return fiamma.tanh(input)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """Samples from the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with
    Gumbel noise g = -log(Exp(1)); ``hard`` returns one-hot vectors whose gradient is the soft
    sample's (straight-through).

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.gumbel_softmax(fiamma.zeros(2, 3), hard=True).sum(-1).tolist()
    [1.0, 1.0]
    """
    g = -fiamma.empty_like(logits).exponential_().log()
    y = fiamma.softmax((logits + g) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    one_hot = fiamma.zeros_like(logits).scatter_(dim, index, 1.0)
    return one_hot - y.detach() + y
