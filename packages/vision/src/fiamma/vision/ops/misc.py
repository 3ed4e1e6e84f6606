"""Small layers the vision models are built from, with torchvision.ops.misc's names, arguments
and submodule names (so state dict keys match torchvision's)."""

import fiamma
from fiamma import nn

__all__ = ["Conv2dNormActivation", "Conv3dNormActivation", "SqueezeExcitation", "MLP", "Permute",
           "FrozenBatchNorm2d"]


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d whose statistics and affine parameters are fixed buffers (no
    ``num_batches_tracked``; a checkpoint that has it loads all the same)."""

    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", fiamma.ones(num_features))
        self.register_buffer("bias", fiamma.zeros(num_features))
        self.register_buffer("running_mean", fiamma.zeros(num_features))
        self.register_buffer("running_var", fiamma.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)

    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"


class _ConvNormActivation(nn.Sequential):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=None, activation_layer=None, dilation=1, inplace=True, bias=None,
                 conv_layer=None):
        nd = 3 if conv_layer is nn.Conv3d else 2
        if padding is None:
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                ks = kernel_size if not isinstance(kernel_size, int) else (kernel_size,) * nd
                dil = dilation if not isinstance(dilation, int) else (dilation,) * nd
                padding = tuple((ks[i] - 1) // 2 * dil[i] for i in range(nd))
        if bias is None:
            bias = norm_layer is None
        layers = [conv_layer(in_channels, out_channels, kernel_size, stride, padding,
                             dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            params = {} if inplace is None else {"inplace": inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        self.out_channels = out_channels


class Conv2dNormActivation(_ConvNormActivation):
    """Conv2d, then a norm layer (default BatchNorm2d), then an activation (default ReLU), as
    one ``nn.Sequential`` (keys ``0.weight``, ``1.running_mean``, ...). ``padding=None`` keeps
    the size ("same" for stride 1); ``bias=None`` means a bias only without a norm layer.

        >>> block = Conv2dNormActivation(3, 16, kernel_size=3, stride=2)
        >>> block(fiamma.randn(1, 3, 32, 32)).shape
        fiamma.Size([1, 16, 16, 16])
    """

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU, dilation=1, inplace=True,
                 bias=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, groups,
                         norm_layer, activation_layer, dilation, inplace, bias, nn.Conv2d)


class Conv3dNormActivation(_ConvNormActivation):
    """Conv3d + norm (default BatchNorm3d) + activation, like :class:`Conv2dNormActivation`."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=nn.BatchNorm3d, activation_layer=nn.ReLU, dilation=1, inplace=True,
                 bias=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, groups,
                         norm_layer, activation_layer, dilation, inplace, bias, nn.Conv3d)


class SqueezeExcitation(nn.Module):
    """Squeeze-and-Excitation (Hu et al.):
    ``x * scale_activation(fc2(activation(fc1(avgpool(x)))))`` with 1x1 convolutions
    ``fc1``/``fc2``.

        >>> se = SqueezeExcitation(32, 8)
        >>> se(fiamma.randn(2, 32, 7, 7)).shape
        fiamma.Size([2, 32, 7, 7])
    """

    def __init__(self, input_channels, squeeze_channels, activation=nn.ReLU,
                 scale_activation=nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def _scale(self, input):
        scale = self.avgpool(input)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale)

    def forward(self, input):
        return self._scale(input) * input


class MLP(nn.Sequential):
    """Multi-layer perceptron: for each hidden size but the last ``Linear`` [+ norm] +
    activation + ``Dropout``; then ``Linear`` + ``Dropout``.

        >>> mlp = MLP(16, [32, 8])
        >>> mlp(fiamma.randn(4, 16)).shape
        fiamma.Size([4, 8])
    """

    def __init__(self, in_channels, hidden_channels, norm_layer=None, activation_layer=nn.ReLU,
                 inplace=None, bias=True, dropout=0.0):
        params = {} if inplace is None else {"inplace": inplace}
        layers = []
        in_dim = in_channels
        for hidden_dim in hidden_channels[:-1]:
            layers.append(nn.Linear(in_dim, hidden_dim, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden_dim))
            layers.append(activation_layer(**params))
            layers.append(nn.Dropout(dropout, **params))
            in_dim = hidden_dim
        layers.append(nn.Linear(in_dim, hidden_channels[-1], bias=bias))
        layers.append(nn.Dropout(dropout, **params))
        super().__init__(*layers)


class Permute(nn.Module):
    """``x.permute(*dims)`` as a module."""

    def __init__(self, dims):
        super().__init__()
        self.dims = list(dims)

    def forward(self, x):
        return fiamma.permute(x, self.dims)


