"""Which module sequences fuse, and into what (``torch.ao.quantization.fuser_method_mappings``).

A fuser method takes ``(is_qat, *modules)`` and returns the fused module. ``is_qat=False``
(post-training, eval mode) folds a batch norm into the conv/linear before it;
``is_qat=True`` keeps it as a module inside an ``nn.intrinsic`` sequence.

    >>> from fiamma import nn
    >>> from fiamma.ao.quantization import get_fuser_method
    >>> get_fuser_method((nn.Conv2d, nn.BatchNorm2d, nn.ReLU)).__name__
    'fuse_conv_bn_relu'
"""
from fiamma import nn
from fiamma.ao.nn import intrinsic as nni

__all__ = ["fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_convtranspose_bn",
           "get_fuser_method"]


def _same_mode(op, *mods):
    if len({m.training for m in mods}) != 1:
        raise ValueError(f"{op}: all modules must be in the same mode (train or eval), got "
                         + ", ".join(f"{type(m).__name__}.training={m.training}" for m in mods))


def _check_qat_bn(op, out, bn):
    if bn.num_features != out:
        raise ValueError(f"{op}: output channels ({out}) must match the batch norm's "
                         f"num_features ({bn.num_features})")
    if not bn.affine:
        raise ValueError(f"{op}: only a batch norm with affine=True can be fused for QAT")
    if not bn.track_running_stats:
        raise ValueError(f"{op}: only a batch norm with track_running_stats=True can be fused "
                         "for QAT")


_CONV_BN = {nn.Conv1d: nni.ConvBn1d, nn.Conv2d: nni.ConvBn2d, nn.Conv3d: nni.ConvBn3d}
_CONV_BN_RELU = {nn.Conv1d: nni.ConvBnReLU1d, nn.Conv2d: nni.ConvBnReLU2d,
                 nn.Conv3d: nni.ConvBnReLU3d}
_CONV_RELU = {nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d, nn.Conv3d: nni.ConvReLU3d}


def fuse_conv_bn(is_qat, conv, bn):
    """Conv + BatchNorm: ``ConvBn{1,2,3}d`` for QAT, else the conv with the BN folded in."""
    _same_mode("fuse_conv_bn", conv, bn)
    if is_qat:
        _check_qat_bn("fuse_conv_bn", conv.out_channels, bn)
        cls = _CONV_BN.get(type(conv))
        if cls is None:
            raise TypeError(f"fuse_conv_bn: cannot fuse {type(conv).__name__} for QAT")
        return cls(conv, bn)
    return nn.utils.fuse_conv_bn_eval(conv, bn)


def fuse_conv_bn_relu(is_qat, conv, bn, relu):
    """Conv + BatchNorm + ReLU: ``ConvBnReLU{1,2,3}d`` for QAT, else ``ConvReLU{1,2,3}d`` of the
    conv with the BN folded in."""
    _same_mode("fuse_conv_bn_relu", conv, bn, relu)
    if is_qat:
        _check_qat_bn("fuse_conv_bn_relu", conv.out_channels, bn)
        cls = _CONV_BN_RELU.get(type(conv))
        if cls is None:
            raise TypeError(f"fuse_conv_bn_relu: cannot fuse {type(conv).__name__} for QAT")
        return cls(conv, bn, relu)
    cls = _CONV_RELU.get(type(conv))
    if cls is None:
        raise TypeError(f"fuse_conv_bn_relu: cannot fuse {type(conv).__name__}")
    return cls(nn.utils.fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat, linear, bn):
    """Linear + BatchNorm1d: ``LinearBn1d`` for QAT, else the linear with the BN folded in."""
    _same_mode("fuse_linear_bn", linear, bn)
    if is_qat:
        _check_qat_bn("fuse_linear_bn", linear.out_features, bn)
        return nni.LinearBn1d(linear, bn)
    return nn.utils.fuse_linear_bn_eval(linear, bn)


def fuse_convtranspose_bn(is_qat, convt, bn):
    """ConvTranspose + BatchNorm (eval only): the transposed conv with the BN folded in."""
    _same_mode("fuse_convtranspose_bn", convt, bn)
    if is_qat:
        raise NotImplementedError("fuse_convtranspose_bn: fusing ConvTranspose+BatchNorm is not "
                                  "supported for QAT (as in PyTorch)")
    return nn.utils.fuse_conv_bn_eval(convt, bn, transpose=True)


def _wrap2(cls):
    def fuser(is_qat, m1, m2):
        _same_mode(cls.__name__, m1, m2)
        return cls(m1, m2)
    fuser.__name__ = f"fuse_{cls.__name__}"
    return fuser


_DEFAULT = {
    (nn.Conv1d, nn.BatchNorm1d): fuse_conv_bn,
    (nn.Conv1d, nn.BatchNorm1d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv2d, nn.BatchNorm2d): fuse_conv_bn,
    (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv3d, nn.BatchNorm3d): fuse_conv_bn,
    (nn.Conv3d, nn.BatchNorm3d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv1d, nn.ReLU): _wrap2(nni.ConvReLU1d),
    (nn.Conv2d, nn.ReLU): _wrap2(nni.ConvReLU2d),
    (nn.Conv3d, nn.ReLU): _wrap2(nni.ConvReLU3d),
    (nn.Linear, nn.BatchNorm1d): fuse_linear_bn,
    (nn.Linear, nn.ReLU): _wrap2(nni.LinearReLU),
    (nn.BatchNorm2d, nn.ReLU): _wrap2(nni.BNReLU2d),
    (nn.BatchNorm3d, nn.ReLU): _wrap2(nni.BNReLU3d),
    (nn.ConvTranspose1d, nn.BatchNorm1d): fuse_convtranspose_bn,
    (nn.ConvTranspose2d, nn.BatchNorm2d): fuse_convtranspose_bn,
    (nn.ConvTranspose3d, nn.BatchNorm3d): fuse_convtranspose_bn,
}


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    """The fuser method for the tuple of module types ``op_list`` (the defaults above, then
    ``additional_fuser_method_mapping``); an unknown sequence raises ValueError naming it."""
    method = {**_DEFAULT, **(additional_fuser_method_mapping or {})}.get(tuple(op_list))
    if method is None:
        names = ", ".join(getattr(t, "__name__", repr(t)) for t in op_list)
        known = "; ".join("(" + ", ".join(t.__name__ for t in k) + ")" for k in _DEFAULT)
        raise ValueError(f"get_fuser_method: cannot fuse modules ({names}); known sequences: "
                         f"{known}")
    return method
