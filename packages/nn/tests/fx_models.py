"""Models the fiamma.fx tests trace: real layers, the shapes of real programs."""

import math

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F


class MLP(nn.Module):
    def __init__(self, sizes=(16, 32, 32, 4)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        for i, layer in enumerate(self.layers):   # a Python loop over modules unrolls
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.dropout(fiamma.relu(x))
        return F.log_softmax(x, dim=-1)


class SelfAttentionBlock(nn.Module):
    """A pre-norm transformer block written out (attention by matmul/softmax), with the
    branches real code has: an optional mask and an optional residual."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))

    def forward(self, x, mask=None, residual=True):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        att = fiamma.softmax(scores, dim=-1)
        out = (att @ v).transpose(1, 2).reshape(b, t, d)
        out = self.proj(out)
        if residual:
            out = out + x
        return out + self.ff(self.norm2(out))


class ConvBNNet(nn.Module):
    """conv -> bn -> relu twice, a residual, pooling and a classifier: the fusion tutorial's
    shape."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = fiamma.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(fiamma.flatten(self.pool(y), 1))


def randomize_bn(model, seed=0):
    """Give every BatchNorm non-trivial running statistics and affine parameters."""
    g = fiamma.Generator().manual_seed(seed)
    with fiamma.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(fiamma.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(fiamma.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(fiamma.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(fiamma.randn(m.num_features, generator=g) * 0.1)
    return model
