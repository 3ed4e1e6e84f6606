"""Datasets, samplers and collation (no worker processes)."""

import collections
import math
import warnings

import numpy as np
import pytest

import fiamma
from fiamma import data as D


class Range(D.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i


class Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_tensor_dataset():
    x, y = fiamma.arange(12.0).reshape(6, 2), fiamma.arange(6)
    ds = D.TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[4]
    assert a.tolist() == [8.0, 9.0] and b.item() == 4
    with pytest.raises(ValueError, match="Size mismatch"):
        D.TensorDataset(x, fiamma.arange(5))
    with pytest.raises(ValueError, match="at least one tensor"):
        D.TensorDataset()


def test_concat_and_chain():
    c = Range(3) + Range(4)
    assert isinstance(c, D.ConcatDataset) and len(c) == 7
    assert [c[i] for i in range(7)] == [0, 1, 2, 0, 1, 2, 3]
    assert c[-1] == 3 and c[-7] == 0
    with pytest.raises(ValueError, match="absolute value"):
        c[-8]
    with pytest.raises(IndexError):
        c[7]
    with pytest.raises(ValueError, match="empty"):
        D.ConcatDataset([])
    with pytest.raises(TypeError, match="IterableDataset"):
        D.ConcatDataset([Stream(2)])
    ch = Stream(2) + Stream(3)
    assert isinstance(ch, D.ChainDataset) and list(ch) == [0, 1, 0, 1, 2] and len(ch) == 5


def test_stack_and_subset():
    s = D.StackDataset(Range(3), Range(3))
    assert s[2] == (2, 2) and len(s) == 3
    d = D.StackDataset(a=Range(2), b=Range(2))
    assert d[1] == {"a": 1, "b": 1}
    with pytest.raises(ValueError, match="Size mismatch"):
        D.StackDataset(Range(2), Range(3))
    sub = D.Subset(Range(10), [9, 3, 5])
    assert [sub[i] for i in range(3)] == [9, 3, 5] and len(sub) == 3
    assert sub.__getitems__([0, 2]) == [9, 5]


def test_random_split_lengths_and_fractions():
    g = fiamma.Generator().manual_seed(1)
    parts = D.random_split(Range(10), [3, 7], generator=g)
    got = sorted(i for p in parts for i in (p[k] for k in range(len(p))))
    assert [len(p) for p in parts] == [3, 7] and got == list(range(10))
    # fractions: floor, remainder dealt round-robin (PyTorch's rule)
    parts = D.random_split(Range(11), [0.5, 0.3, 0.2], generator=g)
    assert [len(p) for p in parts] == [6, 3, 2]  # floors 5, 3, 2; one left for split 0
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(Range(10), [3, 3])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        D.random_split(Range(2), [0.9, 0.1])
    assert any("is 0" in str(x.message) for x in w)
    # same generator seed -> same split
    a = D.random_split(Range(20), [10, 10], generator=fiamma.Generator().manual_seed(7))
    b = D.random_split(Range(20), [10, 10], generator=fiamma.Generator().manual_seed(7))
    assert a[0].indices == b[0].indices


def test_samplers():
    assert list(D.SequentialSampler(Range(4))) == [0, 1, 2, 3]
    g = fiamma.Generator().manual_seed(0)
    perm = list(D.RandomSampler(Range(50), generator=g))
    assert sorted(perm) == list(range(50)) and perm != list(range(50))
    rs = D.RandomSampler(Range(5), replacement=True, num_samples=70, generator=g)
    draws = list(rs)
    assert len(draws) == 70 == len(rs) and set(draws) <= set(range(5))
    long = list(D.RandomSampler(Range(4), num_samples=10, generator=g))
    assert len(long) == 10 and sorted(long[:4]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        D.RandomSampler(Range(4), num_samples=0)
    sub = list(D.SubsetRandomSampler([10, 20, 30], generator=g))
    assert sorted(sub) == [10, 20, 30]
    ws = D.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 400, generator=g)
    counts = collections.Counter(ws)
    assert set(counts) == {1, 3} and 0.65 < counts[3] / 400 < 0.85
    with pytest.raises(ValueError, match="1d sequence"):
        D.WeightedRandomSampler([[1.0]], 2)
    assert list(D.BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]]
    assert len(D.BatchSampler(range(5), 2, False)) == 3
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        D.BatchSampler(range(5), 0, False)


def test_global_seed_makes_shuffling_reproducible():
    fiamma.manual_seed(123)
    a = list(D.RandomSampler(Range(30)))
    fiamma.manual_seed(123)
    b = list(D.RandomSampler(Range(30)))
    assert a == b


@pytest.mark.parametrize("n,replicas,drop_last,shuffle", [(10, 3, False, False),
                                                           (10, 3, True, True),
                                                           (2, 5, False, True),
                                                           (12, 4, False, True)])
def test_distributed_sampler_partitions(n, replicas, drop_last, shuffle):
    shards = [list(D.DistributedSampler(Range(n), replicas, r, shuffle=shuffle, seed=5,
                                        drop_last=drop_last)) for r in range(replicas)]
    sizes = {len(s) for s in shards}
    assert len(sizes) == 1
    per = sizes.pop()
    if drop_last:
        assert per == n // replicas
        flat = [i for s in shards for i in s]
        assert len(set(flat)) == len(flat)  # no index twice
    else:
        assert per == math.ceil(n / replicas)
        assert set(i for s in shards for i in s) == set(range(n))  # every index somewhere
    s = D.DistributedSampler(Range(n), replicas, 0, shuffle=True, seed=5)
    e0 = list(s)
    s.set_epoch(1)
    assert list(s) != e0 or n < 3
    with pytest.raises(ValueError, match="Invalid rank"):
        D.DistributedSampler(Range(n), replicas, replicas)
    with pytest.raises(ValueError, match="num_replicas and rank"):
        D.DistributedSampler(Range(n))


def test_distributed_sampler_warns_once_when_set_epoch_is_forgotten():
    s = D.DistributedSampler(Range(10), 2, 0, shuffle=True)
    list(s)
    with pytest.warns(UserWarning, match="call sampler.set_epoch"):
        list(s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(s)  # once only
        s.set_epoch(1)
        list(s)
        unshuffled = D.DistributedSampler(Range(10), 2, 0, shuffle=False)
        list(unshuffled)
        list(unshuffled)  # the same order is what was asked for


def test_default_collate():
    Point = collections.namedtuple("Point", "x y")
    batch = [{"img": fiamma.ones(2, 2) * i, "label": i, "name": f"s{i}", "w": float(i),
              "arr": np.full(3, i, dtype=np.int16), "pt": Point(i, [i, i]),
              "np0": np.float32(i)} for i in range(3)]
    out = D.default_collate(batch)
    assert out["img"].shape == (3, 2, 2) and out["img"][2].tolist() == [[2.0, 2.0]] * 2
    assert out["label"].dtype is fiamma.int64 and out["label"].tolist() == [0, 1, 2]
    assert out["w"].dtype is fiamma.float64
    assert out["name"] == ["s0", "s1", "s2"]
    assert out["arr"].dtype is fiamma.int16 and out["arr"].shape == (3, 3)
    assert isinstance(out["pt"], Point) and out["pt"].x.tolist() == [0, 1, 2]
    assert [t.tolist() for t in out["pt"].y] == [[0, 1, 2], [0, 1, 2]]
    assert out["np0"].dtype is fiamma.float32
    assert [t.tolist() for t in D.default_collate([(1, 2.0), (3, 4.0)])] == [[1, 3],
                                                                             [2.0, 4.0]]
    with pytest.raises(RuntimeError, match="equal size"):
        D.default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        D.default_collate([object()])
    with pytest.raises(TypeError, match="default_collate"):
        D.default_collate([np.array(["a"])])
    conv = D.default_convert({"a": np.ones(2), "b": [np.zeros(1)], "c": "x"})
    assert isinstance(conv["a"], fiamma.Tensor) and isinstance(conv["b"][0], fiamma.Tensor)
    assert conv["c"] == "x"


def test_distributed_sampler_peek_before_set_epoch_does_not_warn():
    """pytorch/examples' ddp-tutorial-series peeks at the first batch before set_epoch each
    epoch: an iteration left before its end is not an epoch."""
    s = D.DistributedSampler(Range(10), 2, 1, shuffle=True)
    loader = D.DataLoader(Range(10), batch_size=2, sampler=s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for epoch in range(3):
            next(iter(loader))
            s.set_epoch(epoch)
            assert len([b for b in loader]) == 3
    # two whole epochs with no set_epoch between them still warn, through a DataLoader too
    with pytest.warns(UserWarning, match="set_epoch was not called"):
        list(loader)


def test_dataset_and_sampler_classes_are_generic():
    # PyTorch's Dataset, IterableDataset, Sampler and DataLoader are typing.Generic: libraries
    # (timm) subclass ``Sampler[List[int]]`` and annotate ``Dataset[Tensor]``
    import typing

    class Batches(D.Sampler[typing.List[int]]):
        def __iter__(self):
            return iter([[0, 1], [2]])

        def __len__(self):
            return 2

    class Stream(D.IterableDataset[int]):
        def __iter__(self):
            return iter(range(3))

    assert typing.get_origin(D.Dataset[int]) is D.Dataset
    assert typing.get_origin(D.DataLoader[int]) is D.DataLoader
    assert list(Batches()) == [[0, 1], [2]]
    loader = D.DataLoader(list(range(10, 13)), batch_sampler=Batches())
    assert [b.tolist() for b in loader] == [[10, 11], [12]]
    assert list(D.DataLoader(Stream(), batch_size=None)) == [0, 1, 2]
    assert [len(s) for s in D.random_split(D.TensorDataset(fiamma.arange(4)), [3, 1])] == [3, 1]


def test_collate_fn_map_registry_and_torch_path():
    # PyTorch's torch.utils.data._utils.collate path: libraries register their own tensor types
    # in default_collate_fn_map (MONAI's MetaTensor) and call collate_tensor_fn themselves
    import fiamma.utils.data._utils.collate as C
    import fiamma.utils.data._utils.worker as W

    assert C.default_collate is D.default_collate and C.np_str_obj_array_pattern.search("<U3")
    assert W.get_worker_info is D.get_worker_info and W._worker_info is None

    class Tagged(fiamma.Tensor):
        pass

    def collate_tagged(batch, *, collate_fn_map=None):
        out = C.collate_tensor_fn(batch)
        out.tags = [b.tags for b in batch]
        return out

    items = []
    for i in range(3):
        t = fiamma.full((2,), float(i)).as_subclass(Tagged)
        t.tags = f"t{i}"
        items.append({"x": t, "flag": bool(i % 2)})
    C.default_collate_fn_map[Tagged] = collate_tagged
    try:
        out = D.default_collate(items)
    finally:
        del C.default_collate_fn_map[Tagged]
    assert out["x"].tags == ["t0", "t1", "t2"] and out["x"].shape == (3, 2)
    assert out["flag"].dtype is fiamma.bool and out["flag"].tolist() == [False, True, False]
    # without the entry, the subclass goes through collate_tensor_fn (isinstance match) and
    # stays a subclass through stack
    out = D.default_collate([it["x"] for it in items])
    assert type(out) is Tagged and not hasattr(out, "tags")
    # a custom map: only its own types, then the containers
    calls = []
    got = C.collate([[1, 2], [3, 4]], collate_fn_map={int: lambda b, **k: calls.append(b) or b})
    assert got == [[1, 3], [2, 4]] and calls == [[1, 3], [2, 4]]


def test_collate_keeps_mutable_mapping_type_and_attributes():
    class Meta(collections.UserDict):
        pass

    a, b = Meta(x=fiamma.ones(1)), Meta(x=fiamma.zeros(1))
    a.note = "kept"
    out = D.default_collate([a, b])
    assert type(out) is Meta and out.note == "kept" and out["x"].tolist() == [[1.0], [0.0]]
    assert a["x"].tolist() == [1.0]   # the sample itself is not changed
