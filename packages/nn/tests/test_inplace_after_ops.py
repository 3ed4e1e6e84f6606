"""An in-place op on a layer's output keeps the gradient to everything before it: the
result of a non-view op is never a view of the op's own temporary in autograd's eyes (a
GroupNorm output followed by ReLU(inplace=True) once lost every earlier gradient silently)."""

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn

LAYERS = {
    "group_norm": lambda: nn.GroupNorm(2, 8),
    "layer_norm": lambda: nn.LayerNorm([8, 6, 6]),
    "batch_norm": lambda: nn.BatchNorm2d(8),
    "instance_norm": lambda: nn.InstanceNorm2d(8, affine=True),
    "conv": lambda: nn.Conv2d(8, 8, 1),
    "avg_pool": lambda: nn.AvgPool2d(1),
    "upsample": lambda: nn.Upsample(scale_factor=1.0),
    "softmax": lambda: nn.Softmax(dim=1),
    "flatten_linear": lambda: nn.Sequential(nn.Flatten(), nn.Linear(288, 288)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("inplace", ["relu_", "mul_", "add_"])
def test_inplace_on_layer_output_keeps_earlier_gradients(name, inplace):
    fiamma.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3)
    layer = LAYERS[name]()
    x = fiamma.randn(2, 3, 8, 8)
    apply = {"relu_": (lambda t: t.relu_(), lambda t: t.relu()),
             "mul_": (lambda t: t.mul_(2.0), lambda t: t * 2.0),
             "add_": (lambda t: t.add_(1.0), lambda t: t + 1.0)}[inplace]
    if name == "softmax":  # saves its output: writing into it must raise, as in PyTorch
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (apply[0](layer(conv(x))) ** 2).sum().backward()
        return
    grads = []
    for fn in apply:
        conv.zero_grad()
        layer.zero_grad()
        y = fn(layer(conv(x)))
        (y * y).sum().backward()
        assert conv.weight.grad is not None, "the gradient before the layer was lost"
        grads.append(conv.weight.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_relu_inplace_after_group_norm_module_form():
    fiamma.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(4, 8), nn.ReLU(inplace=True),
                          nn.Conv2d(8, 4, 3))
    ref = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(4, 8), nn.ReLU(), nn.Conv2d(8, 4, 3))
    ref.load_state_dict(model.state_dict())
    x = fiamma.randn(2, 3, 10, 10)
    model(x).sum().backward()
    ref(x).sum().backward()
    for (k, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.grad is not None, k
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)

