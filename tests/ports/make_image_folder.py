"""Write a tiny ImageFolder tree (train/ and val/, one folder per class) of PNG images for
imagenet.py: each class a colour pattern plus noise. ``python make_image_folder.py DIR``."""

import sys
from pathlib import Path

import numpy as np
from PIL import Image


def make(root, classes=6, per_class=8, val_per_class=4, size=40, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 255, (classes, 3))
    for split, n in (("train", per_class), ("val", val_per_class)):
        for c in range(classes):
            d = Path(root) / split / f"class_{c:02d}"
            d.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                img = np.empty((size, size, 3))
                img[:] = base[c]
                stripe = (c * 7) % size
                img[stripe:stripe + 6] = 255 - base[c]
                img += rng.normal(0, 20, img.shape)
                Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(d / f"{i}.png")


if __name__ == "__main__":
    make(sys.argv[1])
