"""Mixed-precision training across packages: fiamma.nn under CPU autocast with
fiamma.amp.GradScaler and fiamma.optim, and (parity) the dtypes PyTorch's CPU autocast gives."""

import numpy as np
import pytest

import fiamma

nn = pytest.importorskip("fiamma.nn")
optim = pytest.importorskip("fiamma.optim")
F = nn.functional


def model():
    fiamma.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 16), nn.ReLU(), nn.Linear(16, 3))


def data():
    rng = np.random.default_rng(0)
    x = fiamma.from_numpy(rng.standard_normal((64, 1, 6, 6)).astype(np.float32))
    y = fiamma.from_numpy((rng.random(64) * 3).astype(np.int64))
    return x, y


def test_autocast_training_with_gradscaler_learns():
    net = model()
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scaler = fiamma.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=5)
    x, y = data()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
            out = net(x)
            loss = F.cross_entropy(out, y)
        assert out.dtype is fiamma.bfloat16 and loss.dtype is fiamma.float32
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype is fiamma.float32 for p in net.parameters())
    assert losses[-1] < 0.5 * losses[0]
    assert scaler.get_scale() > 1024.0  # no overflow: the scale grew


def test_overflowing_step_is_skipped_and_scale_backs_off():
    net = model()
    opt = optim.SGD(net.parameters(), lr=0.1)
    before = [p.detach().clone() for p in net.parameters()]
    scaler = fiamma.amp.GradScaler("cpu", init_scale=2.0 ** 60)
    x, y = data()
    with fiamma.autocast("cpu"):
        loss = F.cross_entropy(net(x), y) * 1e30
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(bool((p == b).all()) for p, b in zip(net.parameters(), before))
    assert scaler.get_scale() == 2.0 ** 59


@pytest.mark.parity
def test_autocast_output_dtypes_match_pytorch():
    torch = pytest.importorskip("torch")

    def probe(lib, functional):
        x = lib.ones(4, 8)
        w = lib.ones(8, 8)
        img = lib.ones(2, 3, 8, 8)
        k = lib.ones(4, 3, 3, 3)
        t = lib.zeros(4, dtype=lib.int64)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            xb = functional.linear(x, w)
            return [str(r.dtype).split(".")[-1] for r in (
                lib.mm(x, w), x @ w, lib.bmm(x[None], w[None]), lib.addmm(x[0], x, w),
                functional.linear(x, w, x[0]), functional.conv2d(img, k),
                functional.conv_transpose2d(img, k.transpose(0, 1)), lib.mv(w, x[0]),
                functional.cross_entropy(xb, t), functional.mse_loss(xb, x),
                functional.softmax(xb, 1), xb + x, lib.mm(x.double(), w.double()),
                functional.relu(xb), functional.prelu(x, lib.ones(1)),
                lib.einsum("ij,jk->ik", x, w))]

    assert probe(fiamma, F) == probe(torch, torch.nn.functional)
