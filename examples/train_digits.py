"""Train a small convolutional network on real handwritten digits (the main job).

    python examples/train_digits.py [--epochs N] [--batch-size B] [--workers W] [--out DIR]
    nox -s train [-- options]

By default it trains on the 5,000 real MNIST digits shipped in ``examples/data/mnist_5k.csv.gz``
(500 per class): 4,000 for training and a fixed held-out test split of 1,000 (the last 100
digits of each class). ``--data DIR`` trains on IDX files instead (MNIST or Fashion-MNIST:
``train-images-idx3-ubyte[.gz]`` and friends in DIR), read with ``fiamma.vision.datasets``.

It shows a progress bar per epoch (running loss and accuracy), the train loss/accuracy and the
test accuracy of each epoch, saves a checkpoint with ``fiamma.save``, reloads it into a fresh
model and checks that it predicts the same, and writes two PNGs: a grid of test digits with
their predicted labels and the loss/accuracy curves (drawn with Pillow).
"""

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.data import DataLoader, Dataset
from fiamma.vision.utils import make_grid

HERE = Path(__file__).resolve().parent
DIGITS = HERE / "data" / "mnist_5k.csv.gz"
TEST_PER_CLASS = 100
MEAN, STD = 0.1307, 0.3081


# ---- data -----------------------------------------------------------------------------------

def load_digits(limit=None):
    """The shipped digits as (train_x, train_y, test_x, test_y): uint8 (N, 28, 28), int64 (N,)."""
    with gzip.open(DIGITS, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    images, labels = table[:, :-1].reshape(-1, 28, 28), table[:, -1].astype(np.int64)
    test = np.zeros(len(labels), dtype=bool)
    for c in range(10):  # the file is sorted by class: the last 100 of each class are held out
        test[np.flatnonzero(labels == c)[-TEST_PER_CLASS:]] = True
    train_x, train_y = images[~test], labels[~test]
    if limit:  # a class-balanced subset of the training digits (for quick runs)
        keep = np.random.default_rng(0).permutation(len(train_y))[:limit]
        train_x, train_y = train_x[keep], train_y[keep]
    return train_x, train_y, images[test], labels[test], [str(c) for c in range(10)]


def load_idx(folder, limit=None):
    """MNIST-format IDX files in ``folder`` (Fashion-MNIST when the folder's name says so)."""
    from fiamma.vision import datasets
    cls = datasets.FashionMNIST if "fashion" in str(folder).lower() else datasets.MNIST
    train, test = cls(folder, train=True), cls(folder, train=False)
    train_x, train_y = train.data.numpy(), train.targets.numpy().astype(np.int64)
    if limit:
        train_x, train_y = train_x[:limit], train_y[:limit]
    names = [str(c).split(" - ")[0] for c in cls.classes]  # "0 - zero" -> "0"
    return train_x, train_y, test.data.numpy(), test.targets.numpy().astype(np.int64), names


class Digits(Dataset):
    """uint8 images -> normalised float32 (1, 28, 28) tensors, with random shifts of up to
    ``shift`` pixels when training (the augmentation)."""

    def __init__(self, images, labels, shift=0, seed=0):
        self.images, self.labels, self.shift = images, labels, shift
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        if self.shift:
            s = self.shift
            dy, dx = self.rng.integers(-s, s + 1, size=2)
            img = np.roll(np.pad(img, s), (dy, dx), axis=(0, 1))[s:-s, s:-s]
        x = (img.astype(np.float32) / 255.0 - MEAN) / STD
        return fiamma.from_numpy(np.ascontiguousarray(x[None])), int(self.labels[i])


def seed_worker(worker_id):
    """A different augmentation stream in each worker process."""
    info = fiamma.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed % 2**32)


# ---- model ----------------------------------------------------------------------------------

def make_model():
    """Two conv blocks (conv-BN-ReLU-pool) and a small classifier: ~0.42 M parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 10))


def predict(model, images, batch=500):
    """Logits of ``model`` (in eval mode) for uint8 images, as a NumPy array."""
    model.eval()
    out = []
    with fiamma.no_grad():
        for i in range(0, len(images), batch):
            x = (images[i:i + batch].astype(np.float32) / 255.0 - MEAN) / STD
            out.append(model(fiamma.from_numpy(x[:, None].copy())).numpy())
    return np.concatenate(out)


def export_onnx(model, images, logits, path):
    """Export ``model`` to ONNX with a free batch axis; when ONNX Runtime is installed, run the
    file on ``images`` and compare with fiamma's ``logits``. Returns whether they agree."""
    from fiamma import onnx as fiamma_onnx

    def prep(imgs):
        return ((imgs.astype(np.float32) / 255.0 - MEAN) / STD)[:, None].copy()

    model.eval()
    fiamma_onnx.export(model, fiamma.from_numpy(prep(images[:2])), path,
                       input_names=["image"], output_names=["logits"],
                       dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    msg = f"onnx: {path} ({Path(path).stat().st_size / 1e6:.2f} MB)"
    try:
        import onnxruntime as ort
    except ImportError:
        print(msg + "; onnxruntime is not installed, so it was not run")
        return True
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(["logits"], {"image": prep(images)})[0]
    same = bool(np.array_equal(got.argmax(1), logits.argmax(1)) and
                np.abs(got - logits).max() <= 1e-4 * np.abs(logits).max())
    print(f"{msg}; ONNX Runtime on the {len(images)} test digits: predictions "
          f"{'identical' if same else 'DIFFER'} (onnx check {'passed' if same else 'FAILED'})")
    return same


# ---- progress -------------------------------------------------------------------------------

def progress(epoch, epochs, done, total, loss, acc, t0, width=28):
    filled = int(width * done / total)
    bar = "#" * filled + "." * (width - filled)
    sys.stderr.write(f"\repoch {epoch}/{epochs} [{bar}] {done}/{total} "
                     f"loss {loss:.4f} acc {acc:.2%} {time.perf_counter() - t0:5.1f}s")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# ---- pictures -------------------------------------------------------------------------------

def _font(size):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: the fixed-size bitmap font
        return ImageFont.load_default()


def save_predictions(images, labels, preds, names, path, n=64, nrow=8, scale=2):
    """A grid of ``n`` test digits; the predicted label under each (red when wrong)."""
    x = fiamma.from_numpy(images[:n, None].astype(np.float32) / 255.0)
    grid = make_grid(x, nrow=nrow, padding=2, pad_value=0.0)        # (3, H, W) in [0, 1]
    arr = (grid.numpy().transpose(1, 2, 0) * 255).astype(np.uint8)
    cell, text_h = 30 * scale, 14
    img = Image.fromarray(arr).resize((arr.shape[1] * scale, arr.shape[0] * scale),
                                      Image.NEAREST)
    rows = (n + nrow - 1) // nrow
    canvas = Image.new("RGB", (img.width, rows * (cell + text_h) + 2), "white")
    draw = ImageDraw.Draw(canvas)
    font = _font(12)
    for k in range(n):
        r, c = divmod(k, nrow)
        tile = img.crop((c * cell, r * cell, (c + 1) * cell + 2 * scale, (r + 1) * cell
                         + 2 * scale))
        y0 = r * (cell + text_h)
        canvas.paste(tile, (c * cell, y0))
        ok = preds[k] == labels[k]
        text = names[preds[k]] if ok else f"{names[preds[k]]} ({names[labels[k]]})"
        draw.text((c * cell + 4, y0 + cell + 1), text[:10], fill=(0, 110, 0) if ok else
                  (200, 0, 0), font=font)
    canvas.save(path)


def save_curves(history, path, size=(720, 420)):
    """Train loss (left axis) and train/test accuracy (right axis) per epoch."""
    w, h = size
    left, right, top, bottom = 60, 70, 30, 50
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    pw, ph = w - left - right, h - top - bottom
    d.rectangle((left, top, left + pw, top + ph), outline="black")
    epochs = len(history)
    max_loss = max(max(e["loss"] for e in history), 1e-6) * 1.1

    def px(i):
        return left + (pw * i / max(epochs - 1, 1) if epochs > 1 else pw / 2)

    for k in range(6):  # grid and tick labels
        y = top + ph * k / 5
        d.line((left, y, left + pw, y), fill=(225, 225, 225))
        d.text((6, y - 6), f"{max_loss * (1 - k / 5):.2f}", fill="black")
        d.text((left + pw + 6, y - 6), f"{100 * (1 - k / 5):.0f}%", fill="black")
    for i in range(epochs):
        d.text((px(i) - 3, top + ph + 6), str(i + 1), fill="black")
    d.text((left + pw / 2 - 15, h - 22), "epoch", fill="black")
    d.text((6, 8), "loss", fill="black")
    d.text((left + pw + 6, 8), "accuracy", fill="black")

    series = [("train loss", [e["loss"] / max_loss for e in history], (30, 90, 200)),
              ("train acc", [e["acc"] for e in history], (230, 130, 0)),
              ("test acc", [e["test_acc"] for e in history], (0, 150, 60))]
    for label, values, color in series:
        points = [(px(i), top + ph * (1 - v)) for i, v in enumerate(values)]
        if len(points) > 1:
            d.line(points, fill=color, width=2)
        for x, y in points:
            d.ellipse((x - 3, y - 3, x + 3, y + 3), fill=color)
    lx, ly = left + 80, 8  # legend, in the top margin
    for k, (label, _, color) in enumerate(series):
        x = lx + 150 * k
        d.line((x, ly + 6, x + 24, ly + 6), fill=color, width=3)
        d.text((x + 30, ly), label, fill="black")
    img.save(path)


# ---- main -----------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="a folder of MNIST-format IDX files (default: the shipped "
                                  "5,000 MNIST digits)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=4e-3, help="peak learning rate (one-cycle)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--limit", type=int, help="train on only this many images (quick runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/digits", help="folder for the checkpoint and PNGs")
    p.add_argument("--profile", action="store_true",
                   help="profile training steps 3-5 with fiamma.profiler: write OUT/trace.json "
                        "(Chrome trace; open in https://ui.perfetto.dev) and print the ops "
                        "that took the most time")
    p.add_argument("--export", metavar="MODEL.onnx",
                   help="also export the trained model to ONNX (needs fiamma-export[onnx]) and, "
                        "when onnxruntime is installed, check it on the test digits")
    return p.parse_args(argv)


def start_profile(out):
    """A running fiamma.profiler.profile that records steps 3-5 (after one idle and one warmup
    step) and writes their Chrome trace to ``out/trace.json``; its ``table`` attribute gets the
    summary to print when the cycle is done."""
    from fiamma.profiler import ProfilerActivity, profile, schedule, supported_activities

    trace = out / "trace.json"

    def ready(p):
        p.export_chrome_trace(str(trace))
        p.table = (f"profile of training steps {p.step_num - 2}-{p.step_num} "
                   f"({ProfilerActivity.CPU.name} time; trace: {trace}, open it in "
                   "https://ui.perfetto.dev):\n"
                   + p.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))

    prof = profile(activities=supported_activities(), record_shapes=True, profile_memory=True,
                   schedule=schedule(wait=1, warmup=1, active=3, repeat=1), on_trace_ready=ready)
    prof.table = None
    prof.start()
    return prof


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    fiamma.manual_seed(args.seed)
    np.random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.data:
        train_x, train_y, test_x, test_y, names = load_idx(args.data, args.limit)
        source = f"IDX files in {args.data}"
    else:
        train_x, train_y, test_x, test_y, names = load_digits(args.limit)
        source = f"{DIGITS.name} (real MNIST digits)"
    print(f"data: {source}: {len(train_y)} training and {len(test_y)} held-out test images")

    train_set = Digits(train_x, train_y, shift=2, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True,
                        worker_init_fn=seed_worker if args.workers else None,
                        persistent_workers=args.workers > 0)
    model = make_model()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters; Adam + one-cycle lr (peak {args.lr}), label "
          f"smoothing 0.1, random shifts of up to 2 pixels, "
          f"{args.epochs} epochs of {len(loader)} batches of {args.batch_size}, "
          f"{args.workers} worker(s)")
    opt = fiamma.optim.Adam(model.parameters(), lr=args.lr)
    sched = fiamma.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                 steps_per_epoch=len(loader))

    prof = start_profile(out) if args.profile else None
    history = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        total_loss = correct = seen = 0
        for step, (x, y) in enumerate(loader, 1):
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item() * len(y)
            correct += int((logits.argmax(1) == y).sum().item())
            seen += len(y)
            if prof is not None:
                prof.step()
            if step % 5 == 0 or step == len(loader):
                progress(epoch, args.epochs, step, len(loader), total_loss / seen,
                         correct / seen, t0)
        test_acc = float((predict(model, test_x).argmax(1) == test_y).mean())
        history.append({"loss": total_loss / seen, "acc": correct / seen, "test_acc": test_acc})
        print(f"epoch {epoch}: train loss {total_loss / seen:.4f}  train acc "
              f"{correct / seen:.2%}  test acc {test_acc:.2%}  ({time.perf_counter() - t0:.1f}s)",
              flush=True)
    train_time = time.perf_counter() - start
    if prof is not None:
        prof.stop()
        print(prof.table or "profile: fewer than 3 training steps ran, nothing was recorded")

    # checkpoint: save, reload into a fresh model, check the predictions agree
    ckpt = out / "checkpoint.pt"
    fiamma.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                 "epoch": args.epochs, "history": history}, ckpt)
    logits = predict(model, test_x)
    state = fiamma.load(ckpt)
    fresh = make_model()
    fresh.load_state_dict(state["model"])
    fiamma.optim.Adam(fresh.parameters(), lr=args.lr).load_state_dict(state["optimizer"])
    again = predict(fresh, test_x)
    same = bool(np.array_equal(logits.argmax(1), again.argmax(1))
                and np.allclose(logits, again, rtol=1e-5, atol=1e-5))
    print(f"checkpoint: {ckpt} ({ckpt.stat().st_size / 1e6:.2f} MB); reloaded into a fresh "
          f"model: predictions {'identical' if same else 'DIFFER'} "
          f"(reload check {'passed' if same else 'FAILED'})")

    if args.export:
        same = export_onnx(model, test_x, logits, args.export) and same

    preds = logits.argmax(1)
    grid_png, curves_png = out / "predictions.png", out / "curves.png"
    show = np.random.default_rng(1).permutation(len(test_y))[:64]  # a fixed mix of classes
    save_predictions(test_x[show], test_y[show], preds[show], names, grid_png)
    save_curves(history, curves_png)
    print(f"predictions grid: {grid_png}")
    print(f"loss/accuracy curves: {curves_png}")
    final = history[-1]["test_acc"]
    print(f"final test accuracy {final:.2%} on {len(test_y)} held-out images; training "
          f"{train_time:.1f}s, total time {time.perf_counter() - start:.1f}s "
          f"({os.cpu_count()} CPUs)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
