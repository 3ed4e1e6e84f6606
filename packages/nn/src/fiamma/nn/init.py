"""Parameter initialisation (``torch.nn.init``): in-place fills under no_grad, with PyTorch's
gains and fan computations.

>>> import fiamma
>>> from fiamma.nn import init
>>> w = fiamma.empty(64, 32)
>>> _ = init.kaiming_uniform_(w, a=5 ** 0.5)
>>> bool(w.abs().max() <= 1 / 32 ** 0.5)
True
"""

import math
import warnings

import fiamma

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


# PyTorch's private names for the two helpers above, imported by libraries (timm's
# weight_init); same results and errors
def _calculate_fan_in_and_fan_out(tensor):
    return _fans(tensor)


def _calculate_correct_fan(tensor, mode):
    return _fan(tensor, mode)


def _empty_warning(tensor):
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with fiamma.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with fiamma.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b], by the inverse CDF of a uniform draw."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", UserWarning, stacklevel=2)
    with fiamma.no_grad():
        lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        tensor.erfinv_()  # float32: the vectorised float kernel, in place
        tensor.mul_(std * math.sqrt(2.0)).add_(mean)
        return tensor.clamp_(a, b)


def constant_(tensor, val):
    with fiamma.no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with fiamma.no_grad():
        return tensor.zero_()


def eye_(tensor):
    """The identity (2-D tensors)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with fiamma.no_grad():
        tensor.copy_(fiamma.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """The Dirac delta for 3-5-D conv weights: each output channel passes one input channel
    through unchanged (``groups`` splits the output channels)."""
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = tensor.shape[0] // groups
    n = min(out_per_group, tensor.shape[1])
    with fiamma.no_grad():
        tensor.zero_()
        centre = tuple(s // 2 for s in tensor.shape[2:])
        for g in range(groups):
            for c in range(n):
                tensor[(g * out_per_group + c, c) + centre] = 1
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialisation, uniform: bound sqrt(3) * gain / sqrt(fan)."""
    if _empty_warning(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if _empty_warning(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw (signs fixed so
    the result is uniformly distributed), reshaped to the tensor, times ``gain``."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor.device.type == "meta":
        return tensor  # a meta tensor has no values to set (PyTorch's result is the same)
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = fiamma.empty(rows, cols, dtype=tensor.dtype, device=tensor.device).normal_(
        0, 1, generator=generator)
    if rows < cols:
        flat = flat.t()
    q, r = fiamma.linalg.qr(flat)
    q = q * fiamma.diagonal(r, 0).sign()
    if rows < cols:
        q = q.t()
    with fiamma.no_grad():
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D normal(0, std) matrix with a fraction ``sparsity`` of each column set to zero."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with fiamma.no_grad():
        tensor.normal_(0, std, generator=generator)
        for c in range(cols):
            idx = fiamma.randperm(rows, generator=generator)[:zeros]
            tensor[idx, c] = 0
    return tensor


def _deprecated(fn):
    old = fn.__name__[:-1]

    def alias(*args, **kwargs):
        warnings.warn(f"nn.init.{old} is now deprecated in favor of nn.init.{fn.__name__}.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of ``{fn.__name__}`` (warns, as PyTorch)."
    return alias


# PyTorch's pre-underscore names, kept (with a warning) for old scripts
uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

from fiamma import _torch_function  # noqa: E402

_torch_function.register_namespace(__name__)  # __torch_function__ (once it is active)
