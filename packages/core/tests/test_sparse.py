"""Sparse COO tensors: construction, conversion, ops, products, printing, save/load and errors,
each checked against the dense NumPy computation."""

import io
import pickle

import numpy as np
import pytest

import fiamma

RNG = np.random.default_rng(0)


def random_coo(shape, nnz, sparse_dim=None, dtype=np.float64, dup=True):
    """(indices, values, dense numpy array) with duplicates summed in the dense one."""
    sd = len(shape) if sparse_dim is None else sparse_dim
    idx = np.stack([RNG.integers(0, n, nnz) for n in shape[:sd]]) if sd else \
        np.zeros((0, nnz), np.int64)
    if dup and nnz > 2:
        idx[:, -1] = idx[:, 0]  # at least one duplicate
    vals = RNG.standard_normal((nnz,) + tuple(shape[sd:])).astype(dtype)
    dense = np.zeros(shape, dtype)
    for k in range(nnz):
        dense[tuple(idx[:, k])] += vals[k]
    return idx, vals, dense


def sp(idx, vals, shape, **kw):
    return fiamma.sparse_coo_tensor(fiamma.tensor(idx), fiamma.tensor(vals), shape, **kw)


# ---- construction and conversion ---------------------------------------------------------------

@pytest.mark.parametrize("shape,sd", [((5, 4), 2), ((3, 4, 5), 3), ((6,), 1), ((4, 3, 2), 1),
                                      ((4, 3, 2), 2)])
def test_to_dense_sums_duplicates(shape, sd):
    idx, vals, dense = random_coo(shape, 7, sd)
    s = sp(idx, vals, shape)
    assert s.is_sparse and isinstance(s, fiamma.Tensor)
    assert s.layout is fiamma.sparse_coo and fiamma.ones(1).layout is fiamma.strided
    assert isinstance(s.layout, fiamma.layout)
    assert s.shape == shape and s.size() == shape and s.dim() == len(shape)
    assert s.sparse_dim() == sd and s.dense_dim() == len(shape) - sd
    assert s._nnz() == 7 and not s.is_coalesced()
    assert s.dtype is fiamma.float64 and s.device == fiamma.device("cpu")
    assert s.numel() == int(np.prod(shape))
    np.testing.assert_allclose(s.to_dense().numpy(), dense)


def test_coalesce_sorts_and_sums():
    idx = np.array([[2, 0, 2, 1], [1, 3, 1, 0]])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    s = sp(idx, vals, (3, 4))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.indices()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.values()
    c = s.coalesce()
    assert c.is_coalesced() and c._nnz() == 3
    assert c.indices().tolist() == [[0, 1, 2], [3, 0, 1]]
    assert c.values().tolist() == [2.0, 4.0, 4.0]
    assert c.coalesce() is c
    np.testing.assert_allclose(c.to_dense().numpy(), s.to_dense().numpy())
    assert s._indices().shape == (2, 4) and s._values().shape == (4,)


def test_hybrid_coalesce():
    idx, vals, dense = random_coo((5, 4, 3), 9, 2)
    c = sp(idx, vals, (5, 4, 3)).coalesce()
    assert c.values().shape[1:] == (3,)
    np.testing.assert_allclose(c.to_dense().numpy(), dense)


def test_size_inferred_and_dtype_device():
    s = fiamma.sparse_coo_tensor([[0, 3], [1, 1]], [1, 2])
    assert s.shape == (4, 2) and s.dtype is fiamma.int64
    s2 = fiamma.sparse_coo_tensor([[0, 3]], [1, 2], (5,), dtype=fiamma.float32, device="cpu")
    assert s2.dtype is fiamma.float32
    assert s2.double().dtype is fiamma.float64 and s2.double().is_sparse
    assert s2.to(fiamma.float64).dtype is fiamma.float64
    assert s2.cpu() is s2 and s2.to("cpu") is s2
    assert s2.long().to_dense().tolist() == [1, 0, 0, 2, 0]
    e = fiamma.sparse_coo_tensor(fiamma.zeros(2, 0, dtype=fiamma.int64), fiamma.zeros(0, 2),
                                 (3, 3, 2))
    assert e._nnz() == 0 and e.sparse_dim() == 2 and e.dense_dim() == 1
    assert e.to_dense().tolist() == np.zeros((3, 3, 2)).tolist()
    assert e.coalesce()._nnz() == 0


@pytest.mark.parametrize("sd", [None, 1, 2])
def test_dense_to_sparse(sd):
    a = np.zeros((4, 3, 2))
    a[1, 2, 0] = 5.0
    a[3, 0, 1] = -1.0
    a[0, 0, 0] = 2.0
    s = fiamma.tensor(a).to_sparse(sd) if sd is not None else fiamma.tensor(a).to_sparse()
    assert s.is_coalesced() and s.sparse_dim() == (3 if sd is None else sd)
    np.testing.assert_allclose(s.to_dense().numpy(), a)
    nz = np.count_nonzero(a.reshape(int(np.prod(a.shape[:s.sparse_dim()])), -1).any(1))
    assert s._nnz() == nz
    assert s.to_sparse() is s and fiamma.tensor(a).to_dense().tolist() == a.tolist()
    assert fiamma.tensor(a).to_sparse_coo().is_sparse


def test_diag_to_sparse_matches_numpy():
    v = RNG.standard_normal(6)
    v[2] = 0
    s = fiamma.diag(fiamma.tensor(v)).to_sparse()
    assert s._nnz() == 5
    np.testing.assert_allclose(s.to_dense().numpy(), np.diag(v))


def test_bool_sparse_to_dense_is_or():
    s = fiamma.sparse_coo_tensor([[0, 0, 2]], fiamma.tensor([True, True, False]), (3,))
    assert s.to_dense().tolist() == [True, False, False]


def test_transpose_and_t():
    idx, vals, dense = random_coo((5, 4), 6)
    s = sp(idx, vals, (5, 4))
    np.testing.assert_allclose(s.t().to_dense().numpy(), dense.T)
    np.testing.assert_allclose(s.T.to_dense().numpy(), dense.T)
    np.testing.assert_allclose(s.transpose(0, 1).to_dense().numpy(), dense.T)
    idx, vals, dense = random_coo((3, 4, 2, 5), 6, 2)
    h = sp(idx, vals, (3, 4, 2, 5))
    np.testing.assert_allclose(h.transpose(2, 3).to_dense().numpy(), dense.transpose(0, 1, 3, 2))
    np.testing.assert_allclose(h.transpose(0, 1).to_dense().numpy(), dense.transpose(1, 0, 2, 3))
    with pytest.raises(RuntimeError, match="transpose"):
        h.transpose(1, 2)


# ---- arithmetic --------------------------------------------------------------------------------

def test_scalar_mul_div_neg():
    idx, vals, dense = random_coo((4, 5), 8)
    s = sp(idx, vals, (4, 5))
    for r, ref in ((s * 3, dense * 3), (3 * s, dense * 3), (s / 4, dense / 4), (-s, -dense),
                   (s.mul(2.5), dense * 2.5), (s.div(2), dense / 2), (s.neg(), -dense),
                   (s * fiamma.tensor(2.0, dtype=fiamma.float64), dense * 2)):
        assert r.is_sparse
        np.testing.assert_allclose(r.to_dense().numpy(), ref)


def test_add_sub():
    i1, v1, d1 = random_coo((4, 5), 6)
    i2, v2, d2 = random_coo((4, 5), 7)
    a, b = sp(i1, v1, (4, 5)), sp(i2, v2, (4, 5))
    d = RNG.standard_normal((4, 5))
    ss = a + b
    assert ss.is_sparse and ss._nnz() == 13
    np.testing.assert_allclose(ss.to_dense().numpy(), d1 + d2)
    np.testing.assert_allclose((a - b).to_dense().numpy(), d1 - d2)
    np.testing.assert_allclose(a.add(b, alpha=2).to_dense().numpy(), d1 + 2 * d2)
    assert (a.coalesce() + b.coalesce()).is_coalesced()
    for r, ref in ((fiamma.tensor(d) + a, d + d1), (a + fiamma.tensor(d), d1 + d),
                   (fiamma.tensor(d) - a, d - d1), (a - fiamma.tensor(d), d1 - d),
                   (fiamma.add(fiamma.tensor(d), a), d + d1),
                   (fiamma.add(fiamma.tensor(d), a, alpha=3), d + 3 * d1),
                   (fiamma.sub(fiamma.tensor(d), a), d - d1)):
        assert not r.is_sparse and r.layout is fiamma.strided
        np.testing.assert_allclose(r.numpy(), ref)


def test_add_promotes_like_dense():
    s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], fiamma.ones(2), (2, 2), dtype=fiamma.int64)
    r = fiamma.eye(2) + s
    assert r.dtype is fiamma.float32 and r.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_mul_with_dense_and_sparse():
    i1, v1, d1 = random_coo((4, 5), 6)
    i2, v2, d2 = random_coo((4, 5), 7)
    a, b = sp(i1, v1, (4, 5)), sp(i2, v2, (4, 5))
    d = RNG.standard_normal((4, 5))
    for r, ref in ((a * fiamma.tensor(d), d1 * d), (fiamma.tensor(d) * a, d * d1),
                   (a * b, d1 * d2), (a / fiamma.tensor(d), None),
                   (a * fiamma.tensor(d[0]), d1 * d[0])):
        assert r.is_sparse
        if ref is not None:
            np.testing.assert_allclose(r.to_dense().numpy(), ref)
    q = (a.coalesce() / fiamma.tensor(d)).to_dense().numpy()
    np.testing.assert_allclose(q, np.where(d1 != 0, d1 / d, 0))


def test_hybrid_mul_dense():
    idx, vals, dense = random_coo((3, 4, 2), 5, 2)
    s = sp(idx, vals, (3, 4, 2))
    d = RNG.standard_normal((3, 4, 2))
    np.testing.assert_allclose((s * fiamma.tensor(d)).to_dense().numpy(), dense * d)


@pytest.mark.parametrize("shape,sd,dims", [((4, 5), 2, None), ((4, 5), 2, 0), ((4, 5), 2, 1),
                                           ((4, 5), 2, (0, 1)), ((3, 4, 2), 2, 2),
                                           ((3, 4, 2), 2, 0), ((3, 4, 2), 2, (0, 1)),
                                           ((3, 4, 2), 1, (0,)), ((3, 4, 5), 3, (0, 2))])
def test_sum(shape, sd, dims):
    idx, vals, dense = random_coo(shape, 8, sd)
    s = sp(idx, vals, shape)
    for r in (s.sum(dims) if dims is not None else s.sum(),
              fiamma.sum(s, dims) if dims is not None else fiamma.sum(s),
              fiamma.sparse.sum(s, dims)):
        ref = dense.sum(axis=dims)
        got = r.to_dense() if r.is_sparse else r
        np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)
    if dims is not None:
        rem = [d for d in range(sd) if d not in ((dims,) if isinstance(dims, int) else dims)]
        assert s.sum(dims).is_sparse == bool(rem)


def test_sum_int_gives_int64():
    s = fiamma.sparse_coo_tensor([[0, 1], [1, 1]], fiamma.tensor([1, 2], dtype=fiamma.int32))
    assert s.sum().dtype is fiamma.int64 and s.sum().item() == 3
    assert s.sum(0).dtype is fiamma.int64


# ---- products ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_dense_products(dtype):
    idx, vals, dense = random_coo((6, 5), 11, dtype=dtype)
    s = sp(idx, vals, (6, 5))
    m = RNG.standard_normal((5, 3)).astype(dtype)
    w = RNG.standard_normal((4, 6)).astype(dtype)
    c = RNG.standard_normal((6, 3)).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12)
    M, W, C = fiamma.tensor(m), fiamma.tensor(w), fiamma.tensor(c)
    for r in (fiamma.mm(s, M), fiamma.matmul(s, M), s @ M, fiamma.spmm(s, M), s.mm(M),
              fiamma.sparse.mm(s, M)):
        assert r.layout is fiamma.strided
        np.testing.assert_allclose(r.numpy(), dense @ m, **tol)
    for r in (W @ s, fiamma.mm(W, s), fiamma.matmul(W, s), W.mm(s)):
        assert r.layout is fiamma.strided
        np.testing.assert_allclose(r.numpy(), w @ dense, **tol)
    np.testing.assert_allclose((s @ fiamma.tensor(m[:, 0])).numpy(), dense @ m[:, 0], **tol)
    np.testing.assert_allclose((fiamma.tensor(w[0]) @ s).numpy(), w[0] @ dense, **tol)
    for r in (fiamma.addmm(C, s, M, beta=0.5, alpha=2),
              fiamma.sparse.addmm(C, s, M, beta=0.5, alpha=2)):
        np.testing.assert_allclose(r.numpy(), 0.5 * c + 2 * (dense @ m), **tol)
    ss = s @ s.t()
    assert ss.is_sparse
    np.testing.assert_allclose(ss.to_dense().numpy(), dense @ dense.T, **tol)


def test_product_errors_name_the_op():
    s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="mm: .*cannot be multiplied"):
        fiamma.mm(s, fiamma.ones(3, 2))
    with pytest.raises(RuntimeError, match="mm: .*same dtype"):
        fiamma.mm(s, fiamma.ones(2, 2, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="matmul"):
        s @ fiamma.ones(2, 2, 2)
    h = fiamma.sparse_coo_tensor([[0, 1]], fiamma.ones(2, 2), (2, 2))
    with pytest.raises(RuntimeError, match="mm: .*sparse_dim 2"):
        fiamma.mm(h, fiamma.ones(2, 2))
    with pytest.raises(TypeError, match="spmm"):
        fiamma.spmm(fiamma.ones(2, 2), fiamma.ones(2, 2))


# ---- softmax -----------------------------------------------------------------------------------

def _np_sparse_softmax(idx, vals, shape, dim):
    dense = np.full(shape, -np.inf)
    present = np.zeros(shape, bool)
    for k in range(idx.shape[1]):
        t = tuple(idx[:, k])
        dense[t] = vals[k] if not present[t] else dense[t] + vals[k]
        present[t] = True
    m = np.max(np.where(present, dense, -np.inf), axis=dim, keepdims=True)
    e = np.where(present, np.exp(dense - np.where(np.isfinite(m), m, 0)), 0)
    den = e.sum(axis=dim, keepdims=True)
    return np.where(present, e / np.where(den == 0, 1, den), 0), present


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sparse_softmax(dim):
    idx, vals, _ = random_coo((5, 6), 12)
    s = sp(idx, vals, (5, 6))
    ref, present = _np_sparse_softmax(idx, vals, (5, 6), dim)
    r = fiamma.sparse.softmax(s, dim)
    assert r.is_sparse
    np.testing.assert_allclose(r.to_dense().numpy(), ref, rtol=1e-12, atol=1e-15)
    lr = fiamma.sparse.log_softmax(s, dim).to_dense().numpy()
    np.testing.assert_allclose(lr[present], np.log(ref[present]), rtol=1e-10)


def test_sparse_softmax_dense_dim():
    idx, vals, dense = random_coo((4, 3), 5, 1)
    s = sp(idx, vals, (4, 3)).coalesce()
    r = fiamma.sparse.softmax(s, 1).values().numpy()
    v = s.values().numpy()
    np.testing.assert_allclose(r, np.exp(v) / np.exp(v).sum(1, keepdims=True))


# ---- printing, pickling, save/load -------------------------------------------------------------

def test_repr_pytorch_style():
    s = fiamma.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    assert repr(s) == (
        "tensor(indices=tensor([[0, 1, 1],\n"
        "                       [2, 0, 2]]),\n"
        "       values=tensor([3., 4., 5.]),\n"
        "       size=(2, 3), nnz=3, layout=fiamma.sparse_coo)")
    d = s.double()
    assert repr(d).endswith("size=(2, 3), nnz=3, dtype=fiamma.float64, layout=fiamma.sparse_coo)")
    assert "values=tensor([3., 4., 5.])" in repr(d)
    assert s.type() == "fiamma.sparse.FloatTensor"


@pytest.mark.parametrize("coalesce", [False, True])
def test_save_load_round_trip(tmp_path, coalesce):
    idx, vals, dense = random_coo((4, 5, 2), 6, 2)
    s = sp(idx, vals, (4, 5, 2))
    s = s.coalesce() if coalesce else s
    p = tmp_path / "s.pt"
    fiamma.save({"adj": s, "w": fiamma.ones(2)}, p)
    back = fiamma.load(p)
    r = back["adj"]
    assert r.is_sparse and r.is_coalesced() == coalesce and r.shape == (4, 5, 2)
    np.testing.assert_allclose(r.to_dense().numpy(), dense)
    buf = io.BytesIO()
    fiamma.save(s, buf)
    buf.seek(0)
    np.testing.assert_allclose(fiamma.load(buf).to_dense().numpy(), dense)
    q = pickle.loads(pickle.dumps(s))
    np.testing.assert_allclose(q.to_dense().numpy(), dense)


def test_load_rejects_bad_sparse(tmp_path):
    s = fiamma.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,))
    # a file whose size is smaller than its indices (edited by hand)
    s._shape = (1,)
    p = tmp_path / "bad.pt"
    fiamma.save(s, p)
    with pytest.raises(Exception, match="size is inconsistent with indices"):
        fiamma.load(p)


# ---- errors ------------------------------------------------------------------------------------

def test_bad_construction_raises_naming_the_op():
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: size is inconsistent.*index 5"):
        fiamma.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (2,))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: found negative index -1"):
        fiamma.sparse_coo_tensor([[0, -1]], [1.0, 2.0])
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: negative size"):
        fiamma.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (-1,))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: indices must be 2-D"):
        fiamma.sparse_coo_tensor([0, 1], [1.0, 2.0], (2,))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: indices have 2 entries"):
        fiamma.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (2,))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: number of dimensions"):
        fiamma.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: the dense dims"):
        fiamma.sparse_coo_tensor([[0, 1]], fiamma.ones(2, 3), (2, 4))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: indices must be an integer"):
        fiamma.sparse_coo_tensor(fiamma.tensor([[0.0, 1.0]]), [1.0, 2.0], (2,))
    with pytest.raises(RuntimeError, match="sparse_coo_tensor: is_coalesced=True"):
        fiamma.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (2,), is_coalesced=True)
    ok = fiamma.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,), is_coalesced=True)
    assert ok.is_coalesced()


@pytest.mark.parametrize("call,name", [
    (lambda s: fiamma.relu(s), "relu"), (lambda s: s.exp(), "exp"), (lambda s: s.view(4), "view"),
    (lambda s: s > 0, "gt"), (lambda s: fiamma.cat([s, s]), "cat"), (lambda s: s.item(), "item"),
    (lambda s: s.tolist(), "tolist"), (lambda s: s.mean(), "mean"), (lambda s: s.abs_(), "abs_"),
    (lambda s: s.unsqueeze(0), "unsqueeze"), (lambda s: fiamma.atan2(s, s), "atan2"),
    (lambda s: s.reshape(4), "reshape"), (lambda s: s.is_contiguous(), "is_contiguous"),
    (lambda s: s.stride(), "stride"), (lambda s: s / s, "div"),
])
def test_dense_only_ops_raise_naming_the_op(call, name):
    s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(NotImplementedError, match=f"{name}.*sparse"):
        call(s)


def test_sum_keepdim_and_mismatched_add_raise():
    s = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(NotImplementedError, match="sum"):
        s.sum(0, keepdim=True)
    t = fiamma.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 3))
    with pytest.raises(RuntimeError, match="add: sizes"):
        s + t
    with pytest.raises(RuntimeError, match="mul: the dense operand's shape"):
        s * fiamma.ones(3, 3)


def test_zero_in_place_drops_every_entry():
    s = fiamma.sparse_coo_tensor([[0, 2], [1, 1]], fiamma.tensor([[1.0, 2.0], [3.0, 4.0]]),
                                 (3, 2, 2))
    assert s.zero_() is s
    assert s._nnz() == 0 and s.is_coalesced() and tuple(s.shape) == (3, 2, 2)
    assert s._indices().shape == (2, 0) and s._values().shape == (0, 2)
    assert s.to_dense().abs().sum().item() == 0.0
