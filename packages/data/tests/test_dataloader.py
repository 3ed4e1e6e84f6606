"""DataLoader in the main process: batching, shuffling, samplers, validation, iterables."""

import numpy as np
import pytest

import fiamma
from fiamma import data as D


class Squares(D.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": fiamma.full((2,), float(i)), "y": i * i}


class Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class Batched(D.Dataset):
    """A dataset with __getitems__, which the loader must use for whole batches."""

    def __init__(self):
        self.calls = []

    def __len__(self):
        return 10

    def __getitem__(self, i):
        raise AssertionError("__getitem__ should not be used")

    def __getitems__(self, idx):
        self.calls.append(list(idx))
        return [fiamma.tensor(float(i)) for i in idx]


def test_batches_in_order_with_a_short_last_batch():
    dl = D.DataLoader(Squares(10), batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 == len(batches)
    assert batches[0]["x"].shape == (4, 2) and batches[2]["y"].tolist() == [64, 81]
    assert [b["y"].shape[0] for b in batches] == [4, 4, 2]
    assert len(D.DataLoader(Squares(10), batch_size=4, drop_last=True)) == 2


def test_shuffle_is_a_permutation_and_reproducible_with_a_generator():
    def order(seed):
        dl = D.DataLoader(Squares(20), batch_size=3, shuffle=True,
                          generator=fiamma.Generator().manual_seed(seed))
        return [v for b in dl for v in b["y"].tolist()]

    a, b, c = order(1), order(1), order(2)
    assert sorted(a) == sorted(i * i for i in range(20)) and a == b and a != c


def test_no_batching_converts_samples():
    out = list(D.DataLoader([np.ones(2), np.zeros(2)], batch_size=None))
    assert all(isinstance(t, fiamma.Tensor) and t.shape == (2,) for t in out)


def test_batch_sampler_and_getitems():
    ds = Batched()
    dl = D.DataLoader(ds, batch_sampler=[[0, 1], [5, 6, 7]])
    got = [b.tolist() for b in dl]
    assert got == [[0.0, 1.0], [5.0, 6.0, 7.0]] and ds.calls == [[0, 1], [5, 6, 7]]


def test_custom_collate_and_sampler():
    dl = D.DataLoader(Squares(6), batch_size=2, sampler=[5, 4, 3, 2, 1, 0],
                      collate_fn=lambda b: [s["y"] for s in b])
    assert list(dl) == [[25, 16], [9, 4], [1, 0]]


def test_iterable_dataset():
    dl = D.DataLoader(Stream(7), batch_size=3)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]] and len(dl) == 3
    dl = D.DataLoader(Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5]]
    assert list(D.DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]  # ints stay ints


@pytest.mark.parametrize("kw,msg", [
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(shuffle=True, sampler=[0, 1]), "mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "disables auto-batching"),
    (dict(multiprocessing_context="spawn"), "multiprocessing_context can only be used"),
    (dict(worker_init_fn=3), "worker_init_fn must be callable"),
])
def test_argument_errors(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        D.DataLoader(Squares(4), **kw)


def test_iterable_dataset_refuses_shuffle_and_samplers():
    for kw in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError, match="IterableDataset"):
            D.DataLoader(Stream(3), **kw)


def test_pin_memory_warns_without_an_accelerator():
    # PyTorch's text, so that warnings.filterwarnings(message="'pin_memory' argument") filters
    # it (the message pattern matches from the start)
    with pytest.warns(UserWarning, match="no accelerator") as rec:
        D.DataLoader(Squares(2), pin_memory=True)
    assert str(rec[0].message) == ("'pin_memory' argument is set as true but no accelerator is "
                                   "found, then device pinned memory won't be used.")


def test_worker_info_is_none_in_the_main_process():
    assert D.get_worker_info() is None


@pytest.mark.parametrize("num_workers", [0, 2])
def test_tensor_dataset_batches_equal_stacked_samples(num_workers, monkeypatch):
    """A plain TensorDataset under the default collate gathers each batch's rows in one
    indexing op: the batches equal default_collate of the samples one by one (values, dtypes,
    shapes, contiguity), for every tensor kind and for the shorter last batch."""
    from fiamma.data import TensorDataset, default_collate

    rng = np.random.default_rng(0)
    x = fiamma.from_numpy(rng.standard_normal((23, 2, 3)).astype(np.float32))
    y = fiamma.from_numpy(rng.integers(0, 10, 23))
    m = fiamma.from_numpy(rng.random(23) > 0.5)
    h = fiamma.from_numpy(rng.standard_normal((40, 5)))[::2, 1:4]  # strided rows of float64
    ds = TensorDataset(x, y, m, h[:23] if len(h) >= 23 else fiamma.zeros(23, 3))
    order = [int(i) for i in rng.permutation(23)]
    loader = D.DataLoader(ds, batch_size=5, sampler=order, num_workers=num_workers)
    if num_workers == 0:  # the one-op gather, not the samples one by one
        with monkeypatch.context() as mp:
            mp.setattr(TensorDataset, "__getitem__", lambda self, i: 1 / 0)
            got = list(loader)
    else:
        got = list(loader)
    assert len(got) == 5
    for k, batch in enumerate(got):
        idx = order[5 * k:5 * k + 5]
        want = default_collate([ds[i] for i in idx])
        assert isinstance(batch, list) and len(batch) == 4
        for a, b in zip(batch, want):
            assert a.dtype == b.dtype and a.shape == b.shape and a.is_contiguous()
            assert np.array_equal(a.numpy(), b.numpy())


def test_tensor_dataset_batch_index_checks_and_other_index_kinds():
    from fiamma.data import TensorDataset

    ds = TensorDataset(fiamma.arange(6), fiamma.arange(6) * 10)
    # negative indices count from the end, as for one sample
    assert [[t.tolist() for t in b] for b in D.DataLoader(ds, batch_size=3, sampler=[-1, 0, -6])] \
        == [[[5, 0, 0], [50, 0, 0]]]
    # NumPy integers from a sampler take the per-sample path, with the same batches
    batches = D.DataLoader(ds, batch_size=2, sampler=np.arange(4)[::-1])
    assert [[t.tolist() for t in b] for b in batches] == [[[3, 2], [30, 20]], [[1, 0], [10, 0]]]
    # an index out of range still fails as the per-sample path does
    with pytest.raises(IndexError):
        list(D.DataLoader(ds, batch_size=2, sampler=[0, 6]))
    # a subclass (its own __getitem__) and a custom collate keep their own paths
    class Doubled(TensorDataset):
        def __getitem__(self, i):
            return tuple(t[i] * 2 for t in self.tensors)

    doubled = D.DataLoader(Doubled(fiamma.arange(3)), batch_size=3)
    assert [[t.tolist() for t in b] for b in doubled] == [[[0, 2, 4]]]
    assert D.DataLoader(ds, batch_size=2, collate_fn=lambda b: len(b)).__iter__().__next__() == 2


def test_iterator_classes_have_pytorchs_names():
    from fiamma.data import dataloader as dl

    ds = D.TensorDataset(fiamma.arange(8.0))
    it = iter(D.DataLoader(ds, batch_size=4))
    assert isinstance(it, dl._BaseDataLoaderIter)
    assert isinstance(it, dl._SingleProcessDataLoaderIter)
    assert iter(it) is it and len(list(it)) == 2
    loader = D.DataLoader(ds, batch_size=4, num_workers=1, persistent_workers=True)
    it = iter(loader)
    assert isinstance(it, dl._MultiProcessingDataLoaderIter)
    assert isinstance(it, dl._BaseDataLoaderIter) and not isinstance(it, dl._SingleProcessIter)
    assert [b[0].tolist() for b in it] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    it._shutdown_workers()
    assert it._shutdown_done and loader._iterator is it
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        dl.nope
