"""DataLoader (``torch.utils.data.DataLoader``): batches from a dataset, in this process or in
worker processes that hand batches back through shared memory."""

import itertools
import math
import warnings
from typing import Generic, TypeVar

import fiamma
from fiamma.data._collate import default_collate, default_convert
from fiamma.data.dataset import IterableDataset, TensorDataset
from fiamma.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from fiamma.profiler import hook as _profiler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]


class WorkerInfo:
    """What a worker process knows about itself: ``id``, ``num_workers``, ``seed`` (this
    worker's base seed) and ``dataset`` (its copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


_worker_info = None


def get_worker_info():
    """The WorkerInfo of the current DataLoader worker, or None in the main process."""
    return _worker_info


class _InfiniteConstantSampler(Sampler):
    """Index source for iterable datasets: the index is ignored."""

    def __iter__(self):
        while True:
            yield None


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto, self.collate, self.drop_last = (dataset, auto_collation,
                                                                 collate_fn, drop_last)
        getitems = getattr(dataset, "__getitems__", None)
        self.getitems = getitems if callable(getitems) else None
        # a plain TensorDataset under the default collate: a batch is each tensor's rows
        # gathered in one indexing op, the same values, dtype, shape and autograd history as
        # stacking the samples one by one (PyTorch's way: ~3 us a sample)
        self.rows = (auto_collation and type(dataset) is TensorDataset and
                     collate_fn is default_collate)

    def fetch(self, index):
        if self.auto:
            if self.rows and index and _int_list(index):
                tensors = self.dataset.tensors
                if all(type(t) is fiamma.Tensor and t.device.type == "cpu" for t in tensors):
                    n = len(tensors[0])
                    if all(-n <= i < n for i in index):
                        rows = fiamma.tensor(index, dtype=fiamma.int64)
                        return [t[rows] for t in tensors]
            if self.getitems is not None:
                data = self.getitems(index)
            else:
                data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate(data)


def _int_list(index):
    return type(index) is list and all(type(i) is int for i in index)


class _IterFetcher:
    """Pulls samples from the dataset's iterator; with ``shard=(k, n)`` keeps only samples
    k, k + n, k + 2n, ... of the stream (automatic sharding across n workers)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last, shard=None):
        it = iter(dataset)
        if shard is not None:
            it = itertools.islice(it, shard[0], None, shard[1])
        self.it, self.auto, self.collate, self.drop_last = (it, auto_collation, collate_fn,
                                                            drop_last)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto:
            data = []
            for _ in index:
                try:
                    data.append(next(self.it))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.it)
        return self.collate(data)


_T_co = TypeVar("_T_co", covariant=True)


class DataLoader(Generic[_T_co]):
    """Iterate over ``dataset`` in batches (PyTorch's arguments and defaults).

    ``num_workers=0`` loads in this process; ``num_workers > 0`` starts worker processes
    (``multiprocessing_context``: by default ``'fork'`` on Linux, as PyTorch, so a script needs
    no main guard; ``'forkserver'`` elsewhere) that run one thread each and return batches
    through shared memory. Each worker's
    Python, NumPy and fiamma random states are seeded from the loader's ``generator`` (or the
    global one) plus the worker id, so runs are reproducible. Iterable datasets are sharded
    across workers automatically (sample i goes to worker i mod num_workers) unless
    ``auto_shard=False`` (for datasets that split themselves with ``get_worker_info()``).

    >>> import fiamma
    >>> from fiamma.data import TensorDataset
    >>> ds = TensorDataset(fiamma.arange(10.0), fiamma.arange(10))
    >>> [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, auto_shard=True):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self._pin = bool(pin_memory) and fiamma.cuda.is_available()
        if pin_memory and not self._pin:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", UserWarning, stacklevel=2)
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process "
                             "loading (num_workers > 0), but got num_workers=0")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError("worker_init_fn must be callable")

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.auto_shard = auto_shard
        self._iterable = iterable
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        from fiamma.data._workers import MultiProcessIter

        if self.persistent_workers:
            if self._iterator is None or self._iterator._shutdown_done:
                self._iterator = MultiProcessIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        return MultiProcessIter(self)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        return len(self._index_sampler)

    def _base_seed(self):
        """A fresh 62-bit seed from the loader's generator (or the global one) per epoch."""
        return int(fiamma.randint(0, 2 ** 62, (), dtype=fiamma.int64,
                                  generator=self.generator).item())


class _BaseDataLoaderIter:
    """The base class of a DataLoader's iterators (PyTorch's name, for ``isinstance``)."""

    def __iter__(self):
        return self


class _SingleProcessIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        if loader._iterable:
            self._fetcher = _IterFetcher(loader.dataset, loader._auto_collation,
                                         loader.collate_fn, loader.drop_last)
        else:
            self._fetcher = _MapFetcher(loader.dataset, loader._auto_collation,
                                        loader.collate_fn, loader.drop_last)
        self._yielded = 0

    def __iter__(self):
        return self

    def __next__(self):
        if _profiler.enabled:  # PyTorch's event: "enumerate(DataLoader)#<iterator>.__next__"
            return _profiler.call("enumerate(DataLoader)#_SingleProcessIter.__next__",
                                  self._next)
        return self._next()

    def _next(self):
        index = next(self._sampler_iter)
        data = self._fetcher.fetch(index)
        self._yielded += 1
        return pin_batch(data) if self._loader._pin else data

    def __len__(self):
        return len(self._loader)


def pin_batch(data):
    """``data`` (a tensor, or tensors nested in mappings, sequences, namedtuples) with every
    tensor copied into pinned host memory: what a loader with ``pin_memory=True`` yields, so
    ``.to("cuda", non_blocking=True)`` overlaps the copy with the GPU's work."""
    if isinstance(data, fiamma.Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, dict):
        pinned = {k: pin_batch(v) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:  # a mapping type that can't be built from a dict
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pin_batch(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(pin_batch(v) for v in data)
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data


# PyTorch's names of the two iterator classes
_SingleProcessDataLoaderIter = _SingleProcessIter


def __getattr__(name):
    if name == "_MultiProcessingDataLoaderIter":
        from fiamma.data._workers import MultiProcessIter

        return MultiProcessIter
    raise AttributeError(f"module 'fiamma.data.dataloader' has no attribute {name!r}")
