"""Synthetic stand-ins for the data sets of the port corpus, so the programs run offline and in
seconds: digit-like 28x28 images (one smooth template per class, shifted and noised), and a
small word corpus drawn from a grammar. Generated with NumPy from a seed, so PyTorch and fiamma
see identical data."""

import numpy as np
import torch
from torch.utils.data import Dataset


def _templates(num_classes, size, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1)
    out = []
    for _ in range(num_classes):
        img = np.zeros((size, size))
        for _ in range(3):  # three strokes: blobs along a random segment
            (x0, y0), (x1, y1) = rng.uniform(0.2, 0.8, (2, 2))
            for t in np.linspace(0, 1, 8):
                cx, cy = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                img += np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 0.004)
        out.append(np.clip(img, 0, 1))
    return np.stack(out)


class SyntheticDigits(Dataset):
    """``n`` grey 1x``size``x``size`` images of ``num_classes`` classes, values in [0, 1],
    normalised like MNIST (mean 0.1307, std 0.3081) unless ``normalize=False``."""

    def __init__(self, n=512, num_classes=10, size=28, train=True, seed=0, normalize=True):
        rng = np.random.default_rng(seed + (0 if train else 1000))
        tmpl = _templates(num_classes, size, seed)
        self.targets = rng.integers(0, num_classes, n)
        imgs = np.empty((n, 1, size, size), dtype=np.float32)
        for i, k in enumerate(self.targets):
            dx, dy = rng.integers(-2, 3, 2)
            img = np.roll(np.roll(tmpl[k], dx, 1), dy, 0)
            imgs[i, 0] = np.clip(img + rng.normal(0, 0.15, img.shape), 0, 1)
        if normalize:
            imgs = (imgs - 0.1307) / 0.3081
        self.data = imgs

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return torch.from_numpy(self.data[i]), int(self.targets[i])


_SUBJ = ["the cat", "a dog", "the bird", "my friend", "the teacher", "a child"]
_VERB = ["sees", "likes", "finds", "follows", "calls", "watches"]
_OBJ = ["the ball", "a tree", "the house", "the river", "a car", "the garden"]
_END = ["today", "again", "at night", "in the morning", "slowly", "quietly"]


def word_corpus(n_sentences, seed):
    """Sentences ``subject verb object ending .`` with fixed transition preferences, so a
    language model can learn them (perplexity well below the vocabulary size)."""
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(n_sentences):
        s = rng.integers(len(_SUBJ))
        v = (s + rng.integers(0, 2)) % len(_VERB)
        o = (v + rng.integers(0, 2)) % len(_OBJ)
        e = rng.integers(len(_END))
        words += f"{_SUBJ[s]} {_VERB[v]} {_OBJ[o]} {_END[e]} . <eos>".split()
    return words
