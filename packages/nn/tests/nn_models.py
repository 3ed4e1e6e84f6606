"""Model definitions written once against the torch.nn API and built from either namespace.

Every builder takes the ``nn`` module to use (``fiamma.nn`` or ``torch.nn``): the same source
builds both models, which is the porting promise of fiamma-nn (change the import, keep the code).
The tests load PyTorch's weights into the fiamma twin by state_dict and compare; the benchmarks
(benchmarks/bench.py) time the same architectures.
"""


def mlp(nn, sizes=(784, 512, 512, 10)):
    """Linear layers with ReLU between them."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def lenet(nn, classes=10):
    """conv 1->32 k3, relu, maxpool 2; conv 32->64 k3, relu, maxpool 2; linear 1600->128, relu;
    linear 128->10 (for 28x28 inputs)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, classes))


def _resnet(nn, bottleneck, blocks, num_classes):
    """torchvision's ResNet layout and module names (conv1, bn1, layer1.0.conv1,
    downsample.0, fc), so a torchvision state_dict loads by key. ``bottleneck``: the 1x1-3x3-1x1
    block with 4x expansion (ResNet-50) instead of two 3x3 convolutions (ResNet-18)."""
    expansion = 4 if bottleneck else 1

    class Block(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * expansion
            if bottleneck:
                self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(width)
                self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(width)
                self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
                self.bn3 = nn.BatchNorm2d(cout)
            else:
                self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(width)
                self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if bottleneck:
                out = self.bn3(self.conv3(self.relu(out)))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, (width, n) in enumerate(zip((64, 128, 256, 512), blocks)):
                layer = []
                for j in range(n):
                    layer.append(Block(cin, width, 2 if (i > 0 and j == 0) else 1))
                    cin = width * expansion
                setattr(self, f"layer{i + 1}", nn.Sequential(*layer))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * expansion, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()


def resnet18(nn, num_classes=1000):
    """ResNet-18 with torchvision's module names."""
    return _resnet(nn, False, (2, 2, 2, 2), num_classes)


def resnet50(nn, num_classes=1000):
    """ResNet-50 with torchvision's module names (stride on the 3x3 convolution)."""
    return _resnet(nn, True, (3, 4, 6, 3), num_classes)
