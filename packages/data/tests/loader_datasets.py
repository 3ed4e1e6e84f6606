"""Datasets for the worker-process tests (a module of its own, so that spawned and forkserver
workers can import them by name)."""

import os
import random
import signal
import time

import numpy as np

import fiamma
from fiamma import data as D


class Squares(D.Dataset):
    def __init__(self, n=40):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return fiamma.full((3,), float(i)), i * i


class Augmented(D.Dataset):
    """Samples carry draws from all three random generators a worker seeds."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        return fiamma.tensor([float(i), random.random(), float(np.random.rand()),
                              fiamma.rand(()).item()], dtype=fiamma.float64)


class Failing(D.Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        if i == 13:
            raise ValueError(f"sample {i} is broken")
        return i


class Suicidal(D.Dataset):
    """The worker that fetches sample 9 kills itself with SIGKILL."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        if i == 9:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


class Slow(D.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(5.0)
        return i


class WorkerIds(D.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        info = D.get_worker_info()
        return fiamma.tensor([i, info.id, info.num_workers])


class Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class SelfSharding(D.IterableDataset):
    """Splits itself by worker id (the PyTorch idiom), so auto_shard must be off."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = D.get_worker_info()
        return iter(range(info.id, self.n, info.num_workers))


class Big(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return fiamma.full((256, 1024), float(i))  # 1 MiB per sample


def record_init(worker_id):
    info = D.get_worker_info()
    assert info.id == worker_id
    random.seed(1000 + worker_id)  # a user's init function may reseed


class Mixed(D.Dataset):
    """Samples of several dtypes and structures (for the shared-slab transport)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return {"f": fiamma.full((2, 3), float(i)),
                "b": fiamma.full((3,), float(i), dtype=fiamma.bfloat16),
                "m": fiamma.tensor([i % 2 == 0, True]),
                "s": fiamma.tensor(i),
                "e": fiamma.zeros(0, 4),
                "name": f"s{i}"}


class Backed(D.Dataset):
    """Samples are rows of one big tensor the dataset holds (as MNIST-style datasets do); each
    sample also says whether the worker's copy of that tensor lives in shared memory."""

    def __init__(self, n=2000):
        rng = np.random.default_rng(7)
        self.array = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        self.x = fiamma.from_numpy(self.array)

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i].float(), fiamma.tensor(self.x.is_shared()), i


def _refuse():
    raise RuntimeError("shared memory 'fiamma_mp_x' is gone")


class Unrebuildable:
    """Unpickles into an error, as a batch whose shared memory its dead worker took along."""

    def __reduce__(self):
        return (_refuse, ())


class FailingBig(D.Dataset):
    """64x64 samples; sample 37 raises (issue 18's report)."""

    def __len__(self):
        return 60

    def __getitem__(self, i):
        if i == 37:
            raise ValueError(f"sample {i} is broken")
        return fiamma.full((64, 64), float(i))


class Labelled(fiamma.Tensor):
    """A tensor subclass with Python attributes (as MONAI's MetaTensor carries its metadata)."""


class Subclassed(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        t = fiamma.full((2, 2), float(i)).as_subclass(Labelled)
        t.meta = {"index": i, "affine": fiamma.eye(3) * i}
        return {"img": t, "plain": fiamma.tensor([i])}


def first_sample(batch):
    return batch[0]
