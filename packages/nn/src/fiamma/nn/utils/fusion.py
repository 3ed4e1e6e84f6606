"""Folding an eval-mode batch norm into the convolution or linear layer before it
(``torch.nn.utils.fuse_conv_bn_eval`` and friends).

In eval mode ``bn(conv(x))`` is ``conv'(x)`` with ``w' = w * g / sqrt(v + eps)`` (per output
channel) and ``b' = (b - m) * g / sqrt(v + eps) + beta``; the fused layer computes the same
function with one layer less.

    >>> import fiamma
    >>> from fiamma import nn
    >>> conv, bn = nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()
    >>> fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    >>> x = fiamma.randn(1, 3, 8, 8)
    >>> bool((fused(x) - bn(conv(x))).abs().max() < 1e-5)
    True
"""
import copy

import fiamma
from fiamma.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _check_eval(op, *mods):
    if any(m.training for m in mods):
        raise RuntimeError(f"{op}: fusion is only for eval mode (call .eval() first); got "
                           + ", ".join(f"{type(m).__name__}.training={m.training}" for m in mods))


def _check_bn(op, bn):
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"{op}: the batch norm must track running statistics "
                         "(track_running_stats=True), got running_mean=None")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` (eval mode) computing ``bn(conv(x))`` of the eval-mode ``bn``.

    ``transpose=True`` for a ``ConvTranspose*d`` (whose weight holds the output channels in
    dimension 1). The copy always has a bias.
    """
    _check_eval("fuse_conv_bn_eval", conv, bn)
    _check_bn("fuse_conv_bn_eval", bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """``(weight, bias)`` Parameters of a convolution fused with batch-norm statistics
    ``bn_rm``/``bn_rv``/``bn_eps`` and affine ``bn_w``/``bn_b`` (None: 1 and 0; ``conv_b``
    None: 0, and then the bias does not require grad). The weight keeps ``conv_w``'s dtype and
    ``requires_grad``."""
    n = conv_w.shape[1] if transpose else conv_w.shape[0]
    if bn_rm.shape != (n,):
        raise ValueError(f"fuse_conv_bn_weights: the batch norm has {tuple(bn_rm.shape)} "
                         f"statistics, expected ({n},) for weight of shape {tuple(conv_w.shape)}"
                         f"{' (transposed)' if transpose else ''}")
    dtype = conv_w.dtype
    b = fiamma.zeros_like(bn_rm) if conv_b is None else conv_b.detach()
    g = fiamma.ones_like(bn_rm) if bn_w is None else bn_w.detach()
    beta = fiamma.zeros_like(bn_rm) if bn_b is None else bn_b.detach()
    inv_std = fiamma.rsqrt(bn_rv + bn_eps)
    shape = [1, -1] if transpose else [-1, 1]
    shape += [1] * (conv_w.dim() - 2)
    w = (conv_w.detach() * (g * inv_std).reshape(shape)).to(dtype)
    bias = ((b - bn_rm) * inv_std * g + beta).to(dtype)
    requires_b = False if conv_b is None else conv_b.requires_grad
    return Parameter(w, conv_w.requires_grad), Parameter(bias, requires_b)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` (eval mode) computing ``bn(linear(x))`` of the eval-mode
    ``BatchNorm1d`` ``bn`` (its ``num_features`` equal to ``out_features``, or 1)."""
    _check_eval("fuse_linear_bn_eval", linear, bn)
    _check_bn("fuse_linear_bn_eval", bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ValueError(f"fuse_linear_bn_eval: Linear out_features ({linear.out_features}) must "
                         f"equal BatchNorm num_features ({bn.num_features}) or it must be 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """``(weight, bias)`` Parameters of a linear layer fused with batch-norm statistics."""
    out = linear_w.shape[0]
    b = fiamma.zeros(out, dtype=linear_w.dtype) if linear_b is None else linear_b.detach()
    g = fiamma.ones_like(bn_rm) if bn_w is None else bn_w.detach()
    beta = fiamma.zeros_like(bn_rm) if bn_b is None else bn_b.detach()
    scale = g * fiamma.rsqrt(bn_rv + bn_eps)
    w = linear_w.detach() * scale.unsqueeze(-1)
    bias = (b - bn_rm) * scale + beta
    requires_b = False if linear_b is None else linear_b.requires_grad
    return Parameter(w, linear_w.requires_grad), Parameter(bias, requires_b)
