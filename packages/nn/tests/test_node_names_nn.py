"""grad_fn.name() of nn.functional's fused ops gives the node PyTorch's own implementation
ends in: the native normalisation and pooling kernels, the 1-d pools PyTorch runs as 2-d ones
and squeezes, adaptive average pooling to ones as a mean, cross entropy's last node (nll_loss,
or the label-smoothing sum), upsampling by mode and rank, padding by mode."""

import pytest

import fiamma

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

EXPRS = {
    "F.layer_norm(x3, (8,))": "NativeLayerNormBackward0",
    "F.batch_norm(x4, None, None, training=True)": "NativeBatchNormBackward0",
    "F.group_norm(x4, 3)": "NativeGroupNormBackward0",
    "F.max_pool2d(x4, 2)": "MaxPool2DWithIndicesBackward0",
    "F.max_pool3d(x5, 2)": "MaxPool3DWithIndicesBackward0",
    "F.avg_pool2d(x4, 2)": "AvgPool2DBackward0",
    "F.avg_pool3d(x5, 2)": "AvgPool3DBackward0",
    "F.max_pool1d(x3, 2)": "SqueezeBackward1",
    "F.avg_pool1d(x3, 2)": "SqueezeBackward1",
    "F.adaptive_avg_pool1d(x3, 2)": "SqueezeBackward1",
    "F.adaptive_max_pool1d(x3, 2)": "SqueezeBackward1",
    "F.adaptive_avg_pool2d(x4, 1)": "MeanBackward1",
    "F.adaptive_avg_pool2d(x4, 2)": "AdaptiveAvgPool2DBackward0",
    "F.adaptive_avg_pool3d(x5, 1)": "MeanBackward1",
    "F.adaptive_avg_pool3d(x5, 2)": "AdaptiveAvgPool3DBackward0",
    "F.adaptive_max_pool2d(x4, 2)": "AdaptiveMaxPool2DBackward0",
    "F.adaptive_max_pool3d(x5, 2)": "AdaptiveMaxPool3DBackward0",
    "F.cross_entropy(x2, t)": "NllLossBackward0",
    "F.cross_entropy(x2, t, reduction='none')": "NllLossBackward0",
    "F.cross_entropy(x2, t, label_smoothing=0.1)": "AddBackward0",
    "F.nll_loss(x2, t)": "NllLossBackward0",
    "F.nll_loss(x2, t, reduction='none')": "NllLossBackward0",
    "F.nll_loss(x4, t4, ignore_index=1)": "NllLoss2DBackward0",
    "F.nll_loss(x3, t3)": "NllLoss2DBackward0",
    "F.nll_loss(x3, t3, reduction='none')": "ViewBackward0",
    "F.embedding(t, x2)": "EmbeddingBackward0",
    "F.embedding(t, x2, padding_idx=0, scale_grad_by_freq=True)": "EmbeddingBackward0",
    "F.interpolate(x4, scale_factor=2)": "UpsampleNearest2DBackward0",
    "F.interpolate(x3, scale_factor=2)": "UpsampleNearest1DBackward0",
    "F.interpolate(x5, scale_factor=2)": "UpsampleNearest3DBackward0",
    "F.interpolate(x4, scale_factor=2, mode='nearest-exact')": "UpsampleNearestExact2DBackward0",
    "F.interpolate(x3, scale_factor=2, mode='linear')": "UpsampleLinear1DBackward0",
    "F.interpolate(x4, scale_factor=2, mode='bilinear')": "UpsampleBilinear2DBackward0",
    "F.interpolate(x5, scale_factor=2, mode='trilinear')": "UpsampleTrilinear3DBackward0",
    "F.interpolate(x4, scale_factor=2, mode='bicubic')": "UpsampleBicubic2DBackward0",
    "F.interpolate(x4, scale_factor=2, mode='area')": "AdaptiveAvgPool2DBackward0",
    "F.pad(x4, (1, 1))": "ConstantPadNdBackward0",
    "F.pad(x3, (1, 1), mode='reflect')": "ReflectionPad1DBackward0",
    "F.pad(x4, (1, 1, 1, 1), mode='reflect')": "ReflectionPad2DBackward0",
    "F.pad(x5, (1,) * 6, mode='reflect')": "ReflectionPad3DBackward0",
    "F.pad(x3, (1, 1), mode='replicate')": "ReplicationPad1DBackward0",
    "F.pad(x4, (1, 1, 1, 1), mode='replicate')": "ReplicationPad2DBackward0",
    "F.pad(x4, (1, 1, 1, 1), mode='circular')": "torch::autograd::CopySlices",
}


def _inputs(M):
    return {"F": M.nn.functional, "x2": M.randn(4, 6, requires_grad=True),
            "x3": M.randn(2, 3, 8, requires_grad=True),
            "x4": M.randn(2, 3, 6, 6, requires_grad=True),
            "x5": M.randn(1, 2, 4, 4, 4, requires_grad=True), "t": M.tensor([0, 1, 2, 3]),
            "t4": M.tensor([[[0, 1] * 3] * 6] * 2), "t3": M.tensor([[0, 1, 2, 0, 1, 2, 0, 1]] * 2)}


@pytest.mark.parametrize("expr,name", list(EXPRS.items()))
def test_nn_node_names(expr, name):
    ins = _inputs(fiamma)
    y = eval(expr, {}, ins)
    assert y.grad_fn.name() == name
    assert f"grad_fn=<{name}>" in repr(y)
    y.sum().backward()  # the renamed node still runs its formula
    for k, v in ins.items():
        if isinstance(v, fiamma.Tensor) and v.requires_grad and v.grad is not None:
            assert v.grad.shape == v.shape, k


@pytest.mark.parity
def test_nn_node_names_equal_pytorch():
    if torch is None:
        pytest.skip("PyTorch not installed")
    for expr, name in EXPRS.items():
        assert eval(expr, {}, _inputs(torch)).grad_fn.name() == name, expr
