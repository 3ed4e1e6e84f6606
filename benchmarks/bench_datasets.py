"""Datasets for the DataLoader workloads of bench.py (a module of their own so that worker
processes can import them by name). The same definition in fiamma and in PyTorch: 60,000
uint8 28x28 images, each sample converted to float and normalised on access."""

import numpy as np

MEAN, STD = 0.1307, 0.3081


def images(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8), rng.integers(0, 10, size=n)


class FiammaDigits:
    def __init__(self, x, y):
        import fiamma

        self.x, self.y = fiamma.from_numpy(x), fiamma.from_numpy(y)

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return (self.x[i].float() / 255.0 - MEAN) / STD, self.y[i]


class TorchDigits:
    def __init__(self, x, y):
        import torch

        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return (self.x[i].float() / 255.0 - MEAN) / STD, self.y[i]
