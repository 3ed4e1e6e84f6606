"""Across packages, on the real digits shipped in examples/data: core + autograd + nn + optim +
data train a model to a known held-out accuracy with DataLoader workers, and a run saved with
fiamma.save after one epoch and resumed (model and optimizer state) continues exactly as the
uninterrupted run does.

Skipped when the tests run from a copy outside a checkout (the data lives in examples/).
"""

import gzip
from pathlib import Path

import numpy as np
import pytest

import fiamma
from fiamma import nn, optim
from fiamma.data import DataLoader, TensorDataset

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "mnist_5k.csv.gz"

pytestmark = pytest.mark.skipif(not DATA.exists(), reason="not running from a checkout")


@pytest.fixture(scope="module")
def digits():
    with gzip.open(DATA, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x, y = raw[:, :784] / 255.0, raw[:, 784].astype(np.int64)
    test = np.arange(len(y)) % 500 >= 400          # the last 100 digits of each class
    return (fiamma.tensor(x[~test]), fiamma.tensor(y[~test]),
            fiamma.tensor(x[test]), fiamma.tensor(y[test]))


def _model():
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def _epoch(model, opt, loader):
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def _loader(train, epoch, workers=0):
    g = fiamma.Generator().manual_seed(100 + epoch)   # the same batch order in every run
    return DataLoader(train, batch_size=64, shuffle=True, generator=g, num_workers=workers)


def test_trains_to_known_accuracy_with_workers(digits):
    xtr, ytr, xte, yte = digits
    fiamma.manual_seed(0)
    model = _model()
    opt = optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        _epoch(model, opt, _loader(TensorDataset(xtr, ytr), epoch, workers=2))
    model.eval()
    with fiamma.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    assert acc >= 0.88, f"held-out accuracy {acc:.3f}"  # 0.912 when written


def test_resumed_run_continues_exactly(digits, tmp_path):
    xtr, ytr, _, _ = digits
    train = TensorDataset(xtr, ytr)

    def start():
        fiamma.manual_seed(1)
        model = _model()
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return model, opt, sched

    # uninterrupted: two epochs
    model, opt, sched = start()
    for epoch in range(2):
        _epoch(model, opt, _loader(train, epoch))
        sched.step()
    straight = {k: v.clone() for k, v in model.state_dict().items()}

    # one epoch, save, then a fresh process-like start that loads and does the second epoch
    model, opt, sched = start()
    _epoch(model, opt, _loader(train, 0))
    sched.step()
    path = tmp_path / "ckpt.pt"
    fiamma.save({"model": model.state_dict(), "optim": opt.state_dict(),
                 "sched": sched.state_dict(), "epoch": 1}, path)

    model, opt, sched = start()
    ckpt = fiamma.load(path)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optim"])
    sched.load_state_dict(ckpt["sched"])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
    for epoch in range(ckpt["epoch"], 2):
        _epoch(model, opt, _loader(train, epoch))
        sched.step()
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), straight[k].numpy(), err_msg=k)
