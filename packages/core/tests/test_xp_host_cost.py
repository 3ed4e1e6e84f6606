"""What the array-module backend does to keep its host cost per op down, on every device
besides the CPU: one device object per (type, index), array views kept per storage, and index
checks that skip the host read when an index tensor's range is known (benchmarks/
bench_xp_host.py measures the cost)."""

import numpy as np
import pytest

import fiamma


def test_devices_are_interned():
    assert fiamma.device("xp") is fiamma.device("xp")
    assert fiamma.device("cuda", 0) is fiamma.device("cuda:0")
    assert fiamma.device("cuda:1") is not fiamma.device("cuda:0")
    assert fiamma.device("cpu") is fiamma.device("cpu")
    x = fiamma.ones(2, device="xp")
    y = fiamma.ones(2).to(fiamma.device("xp"))
    assert x.device is y.device


def test_views_are_kept_and_stay_correct(device):
    x = fiamma.arange(12.0, device=device)
    be = x._storage.backend
    a = be.raw(x)
    assert be.raw(x) is a  # the same layout: the same array object
    m = x.view(3, 4)
    v = be.raw(m)
    assert v.shape == (3, 4)
    t = m.t()
    assert be.raw(t).shape == (4, 3)
    assert be.to_numpy(be.raw(t)).tolist() == np.arange(12.0).reshape(3, 4).T.tolist()
    # in-place writes go through the kept views: every view sees them
    x.add_(1)
    assert m.cpu().tolist() == (np.arange(12.0).reshape(3, 4) + 1).tolist()
    assert t.cpu().tolist() == (np.arange(12.0).reshape(3, 4).T + 1).tolist()
    # many layouts of one storage: the cache stays bounded and every view correct
    for k in range(1, 12):
        assert x[k:].cpu().tolist() == (np.arange(12.0)[k:] + 1).tolist()
    assert len(x._storage.views) <= 8
    # the same bytes in another dtype are another view
    i = x.view(fiamma.int64)
    assert be.raw(i).dtype == np.int64


@pytest.mark.parametrize("dt", [fiamma.int64, fiamma.int32])
def test_uploaded_indices_have_a_known_range(device, dt):
    t = fiamma.tensor([3, 0, 7], dtype=dt).to(device)
    be = t._storage.backend
    assert be.known_in(t, 0, 8)
    assert not be.known_in(t, 0, 7)       # 7 is not below 7
    assert not be.known_in(t, 1, 8)       # 0 is below 1
    assert be.known_in(t[1:], 0, 8)       # a view of the storage: within the whole's range
    assert not be.known_in(t.view(fiamma.uint8) if dt is fiamma.int64 else
                           t.view(fiamma.int16), 0, 8)  # other dtype: nothing known
    t[0] = 9                              # an in-place write forgets the range
    assert not be.known_in(t, 0, 100)


def test_index_checks_skip_the_host_read_only_when_known(device, monkeypatch):
    F = pytest.importorskip("fiamma.nn.functional")  # (fiamma-nn: not a core dependency)
    emb = fiamma.randn(10, 4).to(device)
    be = emb._storage.backend
    reads = []
    first_bad = be._first_bad

    def counting(badmask, values):
        reads.append(1)
        return first_bad(badmask, values)

    monkeypatch.setattr(be, "_first_bad", counting)
    tok = fiamma.tensor([[1, 9], [0, 4]]).to(device)
    want = emb.cpu().numpy()[[[1, 9], [0, 4]]]
    got = F.embedding(tok, emb)
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    assert reads == []                    # uploaded from the host: range known, no check
    made = fiamma.randint(0, 10, (2, 2), device=device)
    F.embedding(made, emb)
    assert len(reads) == 1                # made on the device: checked once ...
    F.embedding(made, emb)
    assert len(reads) == 1                # ... and known after that
    made.add_(10)                         # written: checked again, and the error raised
    with pytest.raises(IndexError):
        F.embedding(made, emb)
    assert len(reads) == 2


def test_bad_uploaded_indices_still_raise(device):
    F = pytest.importorskip("fiamma.nn.functional")  # (fiamma-nn: not a core dependency)
    emb = fiamma.randn(10, 4).to(device)
    x = fiamma.randn(3, 10).to(device)
    bad = fiamma.tensor([1, 10, 2]).to(device)
    with pytest.raises(IndexError):
        F.embedding(bad, emb)
    with pytest.raises(IndexError):
        emb[bad]
    with pytest.raises(IndexError):
        F.cross_entropy(x, bad)
    neg = fiamma.tensor([1, -1, 2]).to(device)
    assert emb[neg].cpu().tolist() == emb.cpu()[fiamma.tensor([1, -1, 2])].tolist()
    with pytest.raises(IndexError):
        F.cross_entropy(x, neg)
    # ignore_index among the targets: in range by the check, not by the known range
    ign = fiamma.tensor([1, -100, 2]).to(device)
    loss = F.cross_entropy(x, ign)
    want = F.cross_entropy(x.cpu(), fiamma.tensor([1, -100, 2]))
    assert abs(loss.item() - want.item()) < 1e-5


def test_arange_positions_have_a_known_range(device):
    t = fiamma.arange(5, device=device)
    be = t._storage.backend
    assert be.known_in(t, 0, 5) and not be.known_in(t, 0, 4)
    d = fiamma.arange(10, 0, -3, device=device)   # 10, 7, 4, 1
    assert be.known_in(d, 1, 11) and not be.known_in(d, 2, 11)
    assert not be.known_in(fiamma.arange(3.0, device=device), 0, 3)  # floats: nothing noted

