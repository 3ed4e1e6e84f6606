"""ResNet-50 forward, batch 8, 224x224, eval mode: fiamma.vision.models.resnet50 beside the same
network in PyTorch (a twin with torchvision's module names, built here because torchvision need
not be installed), loaded with the same weights. 2 threads each; runs alternate between the two
libraries and the medians are compared (ratio < 1: fiamma faster).

    PYTHONPATH=<the packages' src dirs> python benchmarks/bench_resnet50.py [--rounds 10]
"""

import argparse
import os
import statistics
import time

THREADS = 2
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402


def torch_resnet50(nn):
    """torchvision's ResNet-50 layout (Bottleneck with the stride on the 3x3 conv)."""

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
                layer = []
                for j in range(blocks):
                    layer.append(Bottleneck(cin, width, 2 if (i > 0 and j == 0) else 1))
                    cin = width * 4
                setattr(self, f"layer{i + 1}", nn.Sequential(*layer))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()

    import fiamma
    from fiamma.vision import models

    fm = models.resnet50().eval()
    x = np.random.default_rng(0).standard_normal((args.batch, 3, 224, 224)).astype(np.float32)
    xf = fiamma.from_numpy(x)

    def ours():
        with fiamma.no_grad():
            return fm(xf)

    try:
        import torch
    except ImportError:
        ours()
        ts = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            ours()
            ts.append(time.perf_counter() - t0)
        print(f"fiamma ResNet-50 fwd batch {args.batch}: {statistics.median(ts) * 1e3:.1f} ms "
              "(torch not installed: no ratio)")
        return
    torch.set_num_threads(THREADS)
    tm = torch_resnet50(torch.nn).eval()
    for m in tm.modules():  # non-trivial running stats, so BN is not an identity
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    fm.load_state_dict({k: fiamma.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    xt = torch.from_numpy(x)

    def ref():
        with torch.no_grad():
            return tm(xt)

    a, b = ours().numpy(), ref().numpy()
    err = float(np.abs(a - b).max() / np.abs(b).max())
    tf, tt = [], []
    for _ in range(args.rounds):
        for fn, ts in ((ours, tf), (ref, tt)):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    mf, mt = statistics.median(tf), statistics.median(tt)
    print(f"ResNet-50 fwd, batch {args.batch}, 224x224, eval, {THREADS} threads "
          f"(max rel. difference {err:.1e})")
    print(f"  fiamma  median {mf * 1e3:8.1f} ms   min {min(tf) * 1e3:8.1f} ms")
    print(f"  torch   median {mt * 1e3:8.1f} ms   min {min(tt) * 1e3:8.1f} ms")
    print(f"  ratio fiamma / torch: median {mf / mt:.2f}x   min {min(tf) / min(tt):.2f}x")


if __name__ == "__main__":
    main()
