"""``fiamma.nn.functional``: the functions behind the layers (the first part: linear maps,
relu, softmax; the rest arrives with their C kernels in core)."""

import warnings

import fiamma
from fiamma.nn._activation_functional import *  # noqa: F401,F403
from fiamma.nn._activation_functional import __all__ as _activations
from fiamma.nn._loss_functional import *  # noqa: F401,F403
from fiamma.nn._loss_functional import __all__ as _losses

__all__ = (["linear", "bilinear", "relu", "softmax", "log_softmax", "pad", "dropout"] + _losses
           + _activations)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    if input.dim() == 2 and bias is not None:
        return fiamma.addmm(bias, input, weight.t())
    out = fiamma.matmul(input, weight.t())
    return out + bias if bias is not None else out


def bilinear(input1, input2, weight, bias=None):
    """``y[..., k] = sum_ij input1[..., i] weight[k, i, j] input2[..., j] + bias[k]``."""
    out = fiamma.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out + bias if bias is not None else out


def relu(input, inplace=False):
    return input.relu_() if inplace else fiamma.relu(input)


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    return fiamma.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    return fiamma.log_softmax(input, dim, dtype=dtype)


pad = fiamma.pad


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training);
    the input unchanged otherwise."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        mask = fiamma.zeros_like(input)
    else:
        keep = fiamma.bernoulli(fiamma.full_like(input, 1.0 - p))
        mask = keep / (1.0 - p)
    return input.mul_(mask) if inplace else input * mask
