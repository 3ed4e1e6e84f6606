"""Activation functions (``torch.nn.functional``): the common ones are core's fused kernels
(``fiamma.gelu``, ``fiamma.fused.activation``: one pass forward and backward, one recorded op
named as PyTorch's), the rest compositions of differentiable core ops."""

import fiamma
from fiamma import fused as _fused
from fiamma.nn._qtensor import QTensor as _QT

__all__ = ["leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "hardtanh", "relu6",
           "hardswish", "hardsigmoid", "softplus", "softsign", "softshrink", "hardshrink",
           "tanhshrink", "threshold", "glu", "logsigmoid", "softmin", "prelu", "rrelu"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _maybe_inplace(input, fn, inplace):
    """``fn(input)``, written into ``input`` when ``inplace``.

    The compositions save their input for backward, so when gradients are recorded the result
    is computed from a copy of the input: writing it into ``input`` then leaves what backward
    needs intact (PyTorch keeps the original value of an in-place op's input the same way)."""
    if not inplace:
        return fn(input)
    if input.requires_grad and fiamma.is_grad_enabled():
        return input.copy_(fn(input.clone()))
    return input.copy_(fn(input))


def _qF():
    from fiamma.ao.nn.quantized import functional as qF
    return qF


def _no_quantized(input, op):
    if type(input) is _QT:
        raise NotImplementedError(f"{op}: not implemented for quantized tensors (as in PyTorch; "
                                  "dequantize() first)")


def _floating(t):
    return isinstance(t, fiamma.Tensor) and t.dtype.is_floating_point and type(t) is not _QT


def _act(name, *params):
    def run(x):
        if x.is_nested:  # on the values (jagged) or each component (strided)
            return x.map_dense(run)
        _no_quantized(x, name)
        return _fused.activation(name, x, *params)
    return run


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if type(input) is _QT:
        return _qF().leaky_relu(input, negative_slope)
    return _maybe_inplace(input, _act("leaky_relu", negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, _act("elu", alpha, 1.0, 1.0), inplace)


def selu(input, inplace=False):
    _no_quantized(input, "selu")
    return _maybe_inplace(input, _act("elu", _SELU_ALPHA, _SELU_SCALE, 1.0), inplace)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise ValueError("ZeroDivisionError: alpha cannot be 0 for CELU")
    _no_quantized(input, "celu")
    return _maybe_inplace(input, _act("elu", alpha, 1.0, 1.0 / alpha), inplace)


def gelu(input, approximate="none"):
    """``x * Phi(x)`` (``approximate='tanh'``: the tanh approximation): core's fused
    :func:`fiamma.gelu`, one pass and one recorded op."""
    if input.is_nested:
        return input.map_dense(lambda v: fiamma.gelu(v, approximate=approximate))
    return fiamma.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _maybe_inplace(input, _act("silu"), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    _no_quantized(input, "softplus")
    return _fused.activation("softplus", input, beta, threshold)


def mish(input, inplace=False):
    return _maybe_inplace(input, _act("mish"), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if not min_val <= max_val:
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        # a NaN bound: every element NaN (PyTorch's clamp), not the kernel's bound-ignoring
        return _maybe_inplace(input, lambda x: x.clamp(min_val, max_val), inplace)
    if type(input) is _QT:
        if (min_val, max_val) == (0.0, 6.0):
            return _qF().relu6(input)
        return _qF().hardtanh(input, min_val, max_val)
    if _floating(input):
        return _maybe_inplace(input, _act("hardtanh", min_val, max_val), inplace)
    if isinstance(input, fiamma.Tensor) and input.dtype is not fiamma.bool:
        min_val, max_val = int(min_val), int(max_val)  # an integer tensor stays integer
    return _maybe_inplace(input, lambda x: x.clamp(min_val, max_val), inplace)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    if type(input) is _QT:
        from fiamma.ao.nn.quantized import functional as qF
        return qF.hardsigmoid(input)
    return _maybe_inplace(input, _act("hardsigmoid"), inplace)


def hardswish(input, inplace=False):
    return _maybe_inplace(input, _act("hardswish"), inplace)


def softsign(input):
    return input / (1.0 + input.abs())


def softshrink(input, lambd=0.5):
    if not lambd >= 0:  # NaN too (PyTorch refuses it)
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    if _floating(input):
        return _fused.activation("softshrink", input, lambd)
    zero = fiamma.zeros((), dtype=input.dtype, device=input.device)
    return fiamma.where(input > lambd, input - lambd,
                        fiamma.where(input < -lambd, input + lambd, zero))


def hardshrink(input, lambd=0.5):
    if _floating(input):
        return _fused.activation("hardshrink", input, lambd)
    zero = fiamma.zeros((), dtype=input.dtype, device=input.device)
    return fiamma.where(input.abs() > lambd, input, zero)


def tanhshrink(input):
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):
    """``value`` where ``x <= threshold``, else ``x`` (NaN stays)."""
    if type(input) is _QT:
        return _qF().threshold(input, threshold, value)
    if _floating(input):
        return _maybe_inplace(input, _act("threshold", threshold, value), inplace)
    v = fiamma.full((), value, dtype=input.dtype, device=input.device)
    return _maybe_inplace(input, lambda x: fiamma.where(x > threshold, x, v), inplace)


def glu(input, dim=-1):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves of ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def logsigmoid(input):
    """``log(sigmoid(x))`` without overflow (``min(x, 0) - log1p(exp(-|x|))``); its gradient is
    ``sigmoid(-x)``."""
    _no_quantized(input, "logsigmoid")
    return _fused.activation("log_sigmoid", input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # _stacklevel: PyTorch's, unused
    from fiamma.nn.functional import softmax

    return softmax(-input, dim, dtype=dtype)


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight * x``; a weight of C values applies per channel
    (dimension 1). (``fiamma.prelu``, core's; the gradient at 0 is the slope, as PyTorch's.)"""
    return fiamma.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a random slope from U(lower, upper) per element in training, the mean
    slope otherwise."""
    if lower > upper:
        raise RuntimeError(f"rrelu: Lower bound should be less than or equal to the upper "
                           f"bound, got lower={lower} and upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slope = fiamma.empty(input.shape, dtype=input.dtype, device=input.device).uniform_(
        lower, upper)
    return _maybe_inplace(input, lambda x: fiamma.where(x >= 0, x, x * slope), inplace)
