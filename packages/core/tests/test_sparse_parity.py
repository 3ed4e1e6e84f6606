"""Sparse COO tensors against PyTorch: values, layouts, coalescing, reprs and checkpoint files
crossing both ways."""

import warnings

import numpy as np
import pytest

import fiamma

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

IDX = [[0, 2, 2, 1, 0], [1, 0, 3, 2, 1]]
VALS = [1.5, -2.0, 3.0, 4.0, 0.5]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "invariant checks are disabled" notice
        yield


def both(shape=(3, 4), dtype="float64"):
    f = fiamma.sparse_coo_tensor(IDX, fiamma.tensor(VALS, dtype=getattr(fiamma, dtype)), shape)
    t = torch.sparse_coo_tensor(IDX, torch.tensor(VALS, dtype=getattr(torch, dtype)), shape)
    return f, t


def same(a, b, flag=True):
    assert (a.layout is fiamma.sparse_coo) == (b.layout == torch.sparse_coo)
    if b.layout == torch.sparse_coo:
        assert a.is_coalesced() == b.is_coalesced() or not flag
        a, b = a.to_dense(), b.to_dense()
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
    assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]


def test_ops_match_torch():
    f, t = both()
    m = np.arange(8.0).reshape(4, 2)
    w = np.arange(6.0).reshape(2, 3)
    d = np.arange(12.0).reshape(3, 4) / 7
    F = fiamma.tensor
    T = torch.tensor
    pairs = [
        (f.coalesce(), t.coalesce()), (f * 2, t * 2), (f / 4, t / 4), (-f, -t), (f + f, t + t),
        (f.coalesce() + f.coalesce(), t.coalesce() + t.coalesce()),
        (F(d) + f, T(d) + t), (f * F(d), t * T(d)), (F(d) * f, T(d) * t),
        (fiamma.mm(f, F(m)), torch.mm(t, T(m))), (f @ F(m), t @ T(m)),
        (fiamma.spmm(f, F(m)), torch.spmm(t, T(m))), (F(w) @ f, T(w) @ t),
        (fiamma.sparse.mm(f, F(m)), torch.sparse.mm(t, T(m))),
        (fiamma.addmm(F(np.ones((3, 2))), f, F(m), beta=2, alpha=0.5),
         torch.addmm(T(np.ones((3, 2))), t, T(m), beta=2, alpha=0.5)),
        (fiamma.sparse.addmm(F(np.ones((3, 2))), f, F(m)),
         torch.sparse.addmm(T(np.ones((3, 2))), t, T(m))),
        (f.sum(), t.sum()), (fiamma.sum(f, 1), torch.sum(t, 1)), (f.sum(0), t.sum(0)),
        (fiamma.sparse.sum(f, (0, 1)), torch.sparse.sum(t, (0, 1))),
        (fiamma.sparse.softmax(f, 1), torch.sparse.softmax(t, 1)),
        (fiamma.sparse.log_softmax(f, 0), torch.sparse.log_softmax(t, 0)),
        (f.t(), t.t()), (F(d).to_sparse(), T(d).to_sparse()),
        (F(d).to_sparse(1), T(d).to_sparse(1)), (f.float(), t.float()),
    ]
    for a, b in pairs:
        same(a, b)
    assert f.coalesce().indices().tolist() == t.coalesce().indices().tolist()
    assert f.sparse_dim() == t.sparse_dim() and f._nnz() == t._nnz()


def test_gcn_preprocessing_matches_torch():
    """The pytorch/examples gcn load_cora arithmetic: int64 sparse + eye, degree scaling."""
    edges = np.array([[0, 1, 2, 3, 1], [1, 2, 3, 0, 0]])
    out = []
    for lib in (fiamma, torch):
        adj = lib.sparse_coo_tensor(edges, lib.ones(5), (4, 4), dtype=lib.int64)
        adj = lib.eye(4) + adj
        deg = lib.sqrt(1 / lib.sum(adj, dim=1))
        deg = lib.diag(deg).to_sparse()
        out.append((deg @ adj @ deg).to_sparse())
    same(*out)


def test_repr_matches_torch():
    f, t = both(dtype="float32")
    assert repr(f).replace("fiamma.", "torch.") == repr(t)
    f64, t64 = both()
    assert repr(f64).replace("fiamma.", "torch.") == repr(t64)
    h = fiamma.ones(2, 3).to_sparse(1)
    assert repr(h).replace("fiamma.", "torch.") == repr(torch.ones(2, 3).to_sparse(1))
    e = fiamma.sparse_coo_tensor(fiamma.zeros(2, 0, dtype=fiamma.int64), fiamma.zeros(0, 2),
                                 (3, 3, 2))
    te = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 2),
                                 (3, 3, 2))
    assert repr(e).replace("fiamma.", "torch.") == repr(te)


def test_leaf_grad_matches_torch():
    f = fiamma.sparse_coo_tensor(IDX, fiamma.tensor(VALS, dtype=fiamma.float64), (3, 4),
                                 requires_grad=True)
    t = torch.sparse_coo_tensor(IDX, torch.tensor(VALS, dtype=torch.float64), (3, 4),
                                requires_grad=True)
    w = np.arange(12.0).reshape(3, 4)
    (f.to_dense() * fiamma.tensor(w)).sum().backward()
    (t.to_dense() * torch.tensor(w)).sum().backward()
    # same entries; PyTorch may leave the flag off for a grad whose indices are coalesced
    same(f.grad, t.grad, flag=False)
    m = np.arange(8.0).reshape(4, 2)
    f.grad = None
    t.grad = None
    fiamma.sparse.mm(f, fiamma.tensor(m)).sum().backward()
    torch.sparse.mm(t, torch.tensor(m)).sum().backward()
    same(f.grad, t.grad, flag=False)  # PyTorch flags this one uncoalesced (its indices are)


@pytest.mark.parametrize("coalesce", [False, True])
def test_checkpoints_cross_both_ways(tmp_path, coalesce):
    f, t = both((3, 4))
    h = fiamma.ones(2, 3).to_sparse(1)
    if coalesce:
        f, t = f.coalesce(), t.coalesce()
    fiamma.save({"s": f, "h": h}, tmp_path / "f.pt")
    got = torch.load(tmp_path / "f.pt")
    assert got["s"].is_coalesced() == coalesce
    np.testing.assert_allclose(got["s"].to_dense().numpy(), f.to_dense().numpy())
    np.testing.assert_allclose(got["h"].to_dense().numpy(), np.ones((2, 3)))
    torch.save({"s": t}, tmp_path / "t.pt")
    back = fiamma.load(tmp_path / "t.pt")["s"]
    assert back.is_sparse and back.is_coalesced() == coalesce
    np.testing.assert_allclose(back.to_dense().numpy(), t.to_dense().numpy())
