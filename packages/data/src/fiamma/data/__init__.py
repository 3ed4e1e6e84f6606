"""fiamma.data: datasets, samplers and a DataLoader with PyTorch's torch.utils.data API.

>>> import fiamma
>>> from fiamma.data import DataLoader, TensorDataset
>>> x, y = fiamma.randn(100, 3), fiamma.randint(0, 2, (100,))
>>> batches = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
>>> [tuple(b[0].shape) for b in batches]
[(32, 3), (32, 3), (32, 3), (4, 3)]
"""

from fiamma.data._collate import default_collate, default_convert
from fiamma.data._version import __version__
from fiamma.data.dataloader import DataLoader, WorkerInfo, get_worker_info
from fiamma.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from fiamma.data.sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
    "StackDataset", "Subset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
    "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
    "DataLoader", "get_worker_info", "WorkerInfo", "default_collate", "default_convert",
    "__version__",
]
