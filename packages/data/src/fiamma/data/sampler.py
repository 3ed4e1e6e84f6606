"""Samplers (``torch.utils.data``): which indices a DataLoader fetches, in which order."""

import math
import warnings
from typing import Generic, TypeVar

import fiamma

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler"]


_T_co = TypeVar("_T_co", covariant=True)


class Sampler(Generic[_T_co]):
    """Base class: an iterable of indices (or of lists of indices, for batch samplers).
    Generic in what it yields, as PyTorch's (``Sampler[int]``, ``Sampler[list[int]]``)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


def _positive_int(value, what, op):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{op}: {what} should be a positive integer value, but got "
                         f"{what}={value!r}")


def _fresh_generator():
    """A generator seeded from the global one (so fiamma.manual_seed makes shuffling
    reproducible, as torch.manual_seed does)."""
    seed = int(fiamma.randint(0, 2 ** 62, (), dtype=fiamma.int64).item())
    return fiamma.Generator().manual_seed(seed)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation (``replacement=False``; ``num_samples`` larger than the dataset
    repeats whole permutations) or ``num_samples`` draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        _positive_int(self.num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = self.generator if self.generator is not None else _fresh_generator()
        k = self.num_samples
        if self.replacement:
            for _ in range(k // 32):
                yield from fiamma.randint(0, n, (32,), generator=g).tolist()
            yield from fiamma.randint(0, n, (k % 32,), generator=g).tolist()
        else:
            for _ in range(k // n):
                yield from fiamma.randperm(n, generator=g).tolist()
            yield from fiamma.randperm(n, generator=g).tolist()[:k % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        g = self.generator if self.generator is not None else _fresh_generator()
        for i in fiamma.randperm(len(self.indices), generator=g).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _positive_int(num_samples, "num_samples", "WeightedRandomSampler")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = fiamma.as_tensor(weights, dtype=fiamma.float64)
        if w.dim() != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        draws = fiamma.multinomial(self.weights, self.num_samples, self.replacement,
                                   generator=self.generator)
        yield from draws.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of ``batch_size`` (the last one shorter
    unless ``drop_last``).

    >>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
    [[0, 1, 2], [3, 4, 5], [6]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        _positive_int(batch_size, "batch_size", "BatchSampler")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _process_group():
    """(world size, rank) of the default process group of fiamma-distributed, an optional
    companion: fiamma-data does not depend on it and imports it only when asked."""
    import importlib.util

    if importlib.util.find_spec("fiamma.distributed") is None:
        raise ValueError("DistributedSampler: fiamma-distributed is not installed, so there is "
                         "no process group to ask; pass num_replicas and rank explicitly")
    import fiamma.distributed as dist

    if not dist.is_initialized():
        raise ValueError("DistributedSampler: the default process group has not been "
                         "initialized; call fiamma.distributed.init_process_group() first, or "
                         "pass num_replicas and rank explicitly")
    return dist.get_world_size(), dist.get_rank()


class DistributedSampler(Sampler):
    """The share of a dataset that process ``rank`` of ``num_replicas`` reads: every process
    permutes with the same seed (``seed + epoch``; call ``set_epoch`` each epoch), the list is
    padded by wrapping (or trimmed with ``drop_last``) to a multiple of ``num_replicas``, and
    rank r takes every num_replicas-th index starting at r. ``num_replicas`` and ``rank``
    default to the world size and rank of fiamma.distributed's default process group.

    Running a shuffling sampler to its end twice with the same epoch and no ``set_epoch`` call
    in between (``set_epoch`` forgotten) warns once: every epoch would see the same order. An
    iteration left before its end (a program peeking at the first batch) does not count.

    >>> from fiamma.data import DistributedSampler
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            world, me = _process_group()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        _positive_int(num_replicas, "num_replicas", "DistributedSampler")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed
        self._set_calls = 0  # set_epoch calls so far
        self._last_done = None  # (epoch, set_epoch calls) of the last iteration run to its end
        self._warned = False

    def __iter__(self):
        n = len(self.dataset)
        epoch, calls = self.epoch, self._set_calls
        if self.shuffle:
            g = fiamma.Generator().manual_seed(self.seed + self.epoch)
            indices = fiamma.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            elif indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        mine = indices[self.rank:self.total_size:self.num_replicas]
        if not self.shuffle:
            return iter(mine)
        return self._watched(mine, epoch, calls)

    def _watched(self, mine, epoch, calls):
        """``mine``'s indices; at their end, the forgotten-``set_epoch`` check."""
        yield from mine
        if self._last_done == (epoch, calls) and not self._warned:
            self._warned = True
            warnings.warn(f"DistributedSampler: two epochs ran with the same epoch number "
                          f"{epoch} (set_epoch was not called in between): call "
                          "sampler.set_epoch(epoch) at the start of every epoch, or each epoch "
                          "sees the same order", UserWarning, stacklevel=2)
        self._last_done = (epoch, calls)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Make the next shuffle differ (same on every replica)."""
        self.epoch = epoch
        self._set_calls += 1
