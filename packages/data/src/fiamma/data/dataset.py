"""Datasets (``torch.utils.data``): map-style and iterable datasets and their combinators."""

import bisect
import math
import warnings
from typing import Generic, TypeVar

import fiamma

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "StackDataset", "Subset", "random_split"]


_T_co = TypeVar("_T_co", covariant=True)


class Dataset(Generic[_T_co]):
    """A map-style dataset: ``__getitem__(index)`` (and usually ``__len__``). ``a + b``
    concatenates. A dataset may define ``__getitems__(indices)`` to fetch a whole batch at
    once; the DataLoader uses it when present.

    >>> class Squares(Dataset):
    ...     def __len__(self): return 4
    ...     def __getitem__(self, i): return i * i
    >>> [x for x in Squares() + Squares()][:6]
    [0, 1, 4, 9, 0, 1]
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])

    def __iter__(self):
        # the sequence protocol, bounded by len() when there is one
        n = len(self) if hasattr(self, "__len__") else None
        i = 0
        while n is None or i < n:
            try:
                yield self[i]
            except IndexError:
                return
            i += 1


class IterableDataset(Dataset[_T_co]):
    """A dataset that is a stream: ``__iter__`` yields samples. With several DataLoader
    workers each worker iterates its own copy; use ``fiamma.data.get_worker_info()`` to
    split the stream, or let the DataLoader shard it (``shard=True`` in the DataLoader)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset and cannot be indexed")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the ``index``-th rows of several tensors of equal first dimension.

    >>> import fiamma
    >>> ds = TensorDataset(fiamma.arange(3), fiamma.arange(3) * 10)
    >>> [tuple(t.item() for t in ds[i]) for i in range(3)]
    [(0, 0), (1, 10), (2, 20)]
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        n = tensors[0].size(0)
        for i, t in enumerate(tensors):
            if t.dim() == 0 or t.size(0) != n:
                raise ValueError("Size mismatch between tensors: tensor 0 has "
                                 f"{n} rows, tensor {i} has shape {list(t.shape)}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset[_T_co]):
    """Zip datasets of equal length: samples are tuples (positional arguments) or dicts
    (keyword arguments)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: supported either tuple-like (positional) or "
                             "dict-like (keyword) input, but both were given")
        self.datasets = args or kwargs
        items = args if args else kwargs.values()
        lengths = {len(d) for d in items}
        if not items:
            raise ValueError("StackDataset: at least one dataset should be passed")
        if len(lengths) != 1:
            raise ValueError(f"Size mismatch between datasets: lengths {sorted(lengths)}")
        self._length = lengths.pop()

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        return [self[i] for i in indices]

    def __len__(self):
        return self._length


class ConcatDataset(Dataset[_T_co]):
    """Concatenation of map-style datasets (negative indices count from the end)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += n
        if idx >= n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {n}")
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[k][idx - (self.cumulative_sizes[k - 1] if k else 0)]


class ChainDataset(IterableDataset[_T_co]):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset[_T_co]):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        inner = getattr(self.dataset, "__getitems__", None)
        if callable(inner):
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random subsets of the given lengths, or of the given
    fractions (summing to 1; the remainder is dealt round-robin, as PyTorch does).

    >>> import fiamma
    >>> a, b = random_split(range(10), [0.7, 0.3], generator=fiamma.Generator().manual_seed(0))
    >>> len(a), len(b), sorted(list(a) + list(b)) == list(range(10))
    (7, 3, True)
    """
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, s in enumerate(sizes):
            if s == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", UserWarning, stacklevel=2)
        lengths = sizes
    if any(int(x) != x or x < 0 for x in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers, got {lengths}")
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = fiamma.randperm(n, generator=generator).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, order[start:start + int(k)]))
        start += int(k)
    return out
