"""Quantization-aware training of a small CNN on real MNIST digits, as in PyTorch's QAT
tutorial: train in float, fuse for QAT, ``prepare_qat``, fine-tune with fake-quantized
weights and activations (observers frozen and batch-norm statistics frozen after a few
epochs), ``convert`` to int8, and compare the int8 accuracy with the float one.

    python examples/qat_digits.py     # about a minute of CPU time on 2 cores

It printed: float 0.9430, QAT (fake-quantized) 0.9690, int8 0.9680 (the QAT model trained
4 more epochs than the float one).

Data: examples/data/mnist_5k.csv.gz (the first 400 digits of each class train, the last 100
test; see examples/data/README.md).
"""
import copy
import gzip
from pathlib import Path

import numpy as np

import fiamma
import fiamma.ao.nn.intrinsic.qat as nniqat
import fiamma.ao.quantization as tq
from fiamma import nn

DATA = Path(__file__).parent / "data" / "mnist_5k.csv.gz"


def load():
    with gzip.open(DATA, "rt") as f:
        a = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x = (a[:, :784] / 255.0 - 0.1307) / 0.3081
    y = a[:, 784].astype(np.int64)
    idx = np.arange(len(a)) % 500
    tr, te = idx < 400, idx >= 400
    return (fiamma.tensor(x[tr].reshape(-1, 1, 28, 28)), fiamma.tensor(y[tr]),
            fiamma.tensor(x[te].reshape(-1, 1, 28, 28)), fiamma.tensor(y[te]))


def model():
    return nn.Sequential(
        tq.QuantStub(),
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
        tq.DeQuantStub())


def train_epoch(m, opt, x, y, rng, batch=64):
    m.train()
    order = rng.permutation(len(x))
    for i in range(0, len(x), batch):
        j = fiamma.tensor(order[i:i + batch])
        loss = nn.functional.cross_entropy(m(x[j]), y[j])
        opt.zero_grad()
        loss.backward()
        opt.step()


def accuracy(m, x, y):
    m.eval()
    with fiamma.no_grad():
        return float((m(x).argmax(1) == y).float().mean())


def main():
    fiamma.manual_seed(0)
    rng = np.random.default_rng(0)
    xtr, ytr, xte, yte = load()
    float_model = model()
    opt = fiamma.optim.SGD(float_model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        train_epoch(float_model, opt, xtr, ytr, rng)
    acc_float = accuracy(float_model, xte, yte)

    qat = copy.deepcopy(float_model).train()
    tq.fuse_modules_qat(qat, [["1", "2", "3"], ["5", "6", "7"], ["10", "11"]], inplace=True)
    qat.qconfig = tq.get_default_qat_qconfig("x86")
    tq.prepare_qat(qat, inplace=True)
    opt = fiamma.optim.SGD(qat.parameters(), lr=0.005, momentum=0.9)
    for epoch in range(4):
        train_epoch(qat, opt, xtr, ytr, rng)
        if epoch >= 2:
            qat.apply(tq.disable_observer)
        if epoch >= 1:
            qat.apply(nniqat.freeze_bn_stats)
    acc_fake = accuracy(qat, xte, yte)
    int8 = tq.convert(copy.deepcopy(qat).eval())
    acc_int8 = accuracy(int8, xte, yte)
    print(f"float {acc_float:.4f}  QAT (fake-quantized) {acc_fake:.4f}  int8 {acc_int8:.4f}")
    return acc_float, acc_int8


if __name__ == "__main__":
    main()
