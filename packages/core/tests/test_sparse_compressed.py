"""Sparse compressed layouts (CSR, CSC, BSR, BSC): construction and its checks, conversions,
accessors, printing, products (the C kernel and the composed path), elementwise ops, sums,
autograd, the hybrid COO products and segment_reduce. References are built with NumPy; the
parity tests compare with PyTorch 2.13."""

import numpy as np
import pytest

import fiamma


def rand_sparse(rng, m, n, density, dtype=np.float32):
    a = rng.standard_normal((m, n)).astype(dtype)
    a[rng.random((m, n)) >= density] = 0
    return a


def csr_parts(a):
    """NumPy CSR arrays of a dense 2-D array (row-major nonzeros)."""
    rows, cols = np.nonzero(a)
    crow = np.zeros(a.shape[0] + 1, np.int64)
    np.add.at(crow, rows + 1, 1)
    return np.cumsum(crow), cols.astype(np.int64), a[rows, cols]


# ---- construction -------------------------------------------------------------------------------

def test_csr_constructor_and_accessors():
    s = fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0])
    assert s.layout is fiamma.sparse_csr and s.shape == (2, 3)
    assert s.is_sparse_csr and not s.is_sparse
    assert s._nnz() == 3 and s.sparse_dim() == 2 and s.dense_dim() == 0 and s.numel() == 6
    assert s.crow_indices().tolist() == [0, 2, 3]
    assert s.col_indices().tolist() == [0, 2, 1]
    assert s.values().tolist() == [1.0, 2.0, 3.0]
    assert s.to_dense().tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    assert fiamma.crow_indices_copy(s).tolist() == [0, 2, 3]
    assert fiamma.col_indices_copy(s).tolist() == [0, 2, 1]
    with pytest.raises(RuntimeError, match="ccol_indices expected sparse column"):
        s.ccol_indices()
    with pytest.raises(RuntimeError, match="row_indices_copy"):
        fiamma.row_indices_copy(fiamma.ones(2, 2))
    with pytest.raises(RuntimeError, match="indices expected sparse coordinate"):
        s.indices()
    with pytest.raises(RuntimeError, match="do not have strides"):
        s.stride()


def test_size_inference_blocks_and_dense_dims():
    b = fiamma.sparse_bsr_tensor([0, 2, 3], [0, 2, 1], fiamma.ones(3, 2, 2))
    assert b.shape == (4, 6) and b.layout is fiamma.sparse_bsr
    h = fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], fiamma.arange(6.0).reshape(3, 2))
    assert h.shape == (2, 3, 2) and h.dense_dim() == 1
    ref = np.zeros((2, 3, 2), np.float32)
    ref[0, 0], ref[0, 2], ref[1, 1] = [0, 1], [2, 3], [4, 5]
    np.testing.assert_array_equal(h.to_dense().numpy(), ref)
    c = fiamma.sparse_compressed_tensor([0, 1, 2], [1, 0], [5.0, 6.0], layout=fiamma.sparse_csc)
    assert c.to_dense().tolist() == [[0.0, 6.0], [5.0, 0.0]]
    assert c.ccol_indices().tolist() == [0, 1, 2] and c.row_indices().tolist() == [1, 0]
    i32 = fiamma.sparse_csr_tensor(fiamma.tensor([0, 1], dtype=fiamma.int32),
                                   fiamma.tensor([2], dtype=fiamma.int32), [1.0], (1, 3))
    assert i32.crow_indices().dtype == fiamma.int32
    assert i32.to_dense().tolist() == [[0.0, 0.0, 1.0]]


@pytest.mark.parametrize("crow, col, size, match", [
    ([1, 2, 3], [0, 2, 1], (2, 3), r"crow_indices\[..., 0\] == 0"),
    ([0, 2, 4], [0, 2, 1], (2, 3), r"crow_indices\[..., -1\] == nnz"),
    ([0, 3, 2, 3], [0, 2, 1], (3, 3), "crow_indices decreases"),
    ([0, 2, 3], [0, 3, 1], (2, 3), r"0 <= col_indices < ncols"),
    ([0, 2, 3], [0, -1, 1], (2, 3), r"0 <= col_indices < ncols"),
    ([0, 2, 3], [0, 2, 1], (3, 3), "number of rows \\+ 1"),
])
def test_constructor_checks_structure_always(crow, col, size, match):
    with pytest.raises(RuntimeError, match=f"sparse_csr_tensor: .*{match}"):
        fiamma.sparse_csr_tensor(crow, col, [1.0, 2.0, 3.0], size)


def test_empty_and_batched_construction():
    e = fiamma.sparse_csr_tensor([0, 0, 0], fiamma.tensor([], dtype=fiamma.int64),
                                 fiamma.tensor([]))
    assert e.shape == (2, 0) and e._nnz() == 0
    z = fiamma.sparse_csr_tensor([0], fiamma.tensor([], dtype=fiamma.int64), fiamma.tensor([]),
                                 (0, 3))
    assert z.shape == (0, 3) and z.to_dense().shape == (0, 3)
    c = fiamma.sparse_csr_tensor([0, 0, 0], fiamma.tensor([], dtype=fiamma.int64),
                                 fiamma.tensor([]), (2, 3))
    assert (c @ fiamma.ones(3, 2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert (fiamma.ones(1, 2) @ c).tolist() == [[0.0, 0.0, 0.0]]
    b = fiamma.sparse_csr_tensor([[0, 1], [0, 1]], [[1], [0]], [[1.0], [2.0]])
    assert b.shape == (2, 1, 2)
    assert b.to_dense().tolist() == [[[0.0, 1.0]], [[2.0, 0.0]]]
    with pytest.raises(RuntimeError, match=r"crow_indices\[..., -1\] == nnz"):
        fiamma.sparse_csr_tensor([[0, 1], [0, 0]], [[1], [0]], [[1.0], [2.0]])


def test_constructor_checks():
    with pytest.raises(RuntimeError, match="values must have shape"):
        fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0], (2, 3))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        fiamma.sparse_csr_tensor(fiamma.tensor([0.0, 1.0]), [0], [1.0])
    with pytest.raises(RuntimeError, match="same dtype"):
        fiamma.sparse_csr_tensor(fiamma.tensor([0, 1], dtype=fiamma.int32), [0], [1.0])
    with pytest.raises(RuntimeError, match="expected sparse compressed tensor layout"):
        fiamma.sparse_compressed_tensor([0, 1], [0], [1.0], layout=fiamma.strided)
    with pytest.raises(RuntimeError, match="divisible by the blocksize"):
        fiamma.sparse_bsr_tensor([0, 1], [0], fiamma.ones(1, 2, 2), (3, 2))
    # unsorted / repeated columns: only with check_invariants (as PyTorch)
    s = fiamma.sparse_csr_tensor([0, 2, 3], [2, 0, 1], [1.0, 2.0, 3.0], (2, 3))
    assert s.to_dense().tolist() == [[2.0, 0.0, 1.0], [0.0, 3.0, 0.0]]
    with pytest.raises(RuntimeError, match="sorted and distinct"):
        fiamma.sparse_csr_tensor([0, 2, 3], [2, 0, 1], [1.0, 2.0, 3.0], (2, 3),
                                 check_invariants=True)
    with fiamma.sparse.check_sparse_tensor_invariants():
        assert fiamma.sparse.check_sparse_tensor_invariants.is_enabled()
        with pytest.raises(RuntimeError, match="sorted and distinct"):
            fiamma.sparse_csr_tensor([0, 2, 3], [0, 0, 1], [1.0, 2.0, 3.0], (2, 3))
    assert not fiamma.sparse.check_sparse_tensor_invariants.is_enabled()


# ---- conversions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_dense_roundtrip_matches_numpy(layout):
    rng = np.random.default_rng(0)
    a = rand_sparse(rng, 7, 5, 0.3)
    s = getattr(fiamma.from_numpy(a), f"to_sparse_{layout}")()
    np.testing.assert_array_equal(s.to_dense().numpy(), a)
    crow, col, val = csr_parts(a if layout == "csr" else a.T.copy())
    ci = s.crow_indices() if layout == "csr" else s.ccol_indices()
    pi = s.col_indices() if layout == "csr" else s.row_indices()
    np.testing.assert_array_equal(ci.numpy(), crow)
    np.testing.assert_array_equal(pi.numpy(), col)
    np.testing.assert_array_equal(s.values().numpy(), val)


def test_blocked_roundtrip_and_conversions():
    rng = np.random.default_rng(1)
    a = rand_sparse(rng, 6, 8, 0.15)
    x = fiamma.from_numpy(a)
    for lay in ("bsr", "bsc"):
        s = getattr(x, f"to_sparse_{lay}")((2, 4))
        assert s.values().shape[1:] == (2, 4)
        np.testing.assert_array_equal(s.to_dense().numpy(), a)
        np.testing.assert_array_equal(s.to_sparse_csr().to_dense().numpy(), a)
        np.testing.assert_array_equal(s.to_sparse_coo().to_dense().numpy(), a)
    b = x.to_sparse_bsr((2, 2))
    np.testing.assert_array_equal(b.to_sparse_bsc((2, 2)).to_dense().numpy(), a)
    with pytest.raises(RuntimeError, match=r"must be divisible by given blocksize \(4,4\)"):
        x.to_sparse_bsr((4, 4))
    s = x.to_sparse(layout=fiamma.sparse_bsc, blocksize=(3, 2))
    assert s.layout is fiamma.sparse_bsc
    np.testing.assert_array_equal(s.to_dense().numpy(), a)


def test_coo_and_compressed_conversions():
    rng = np.random.default_rng(2)
    a = rand_sparse(rng, 5, 6, 0.4)
    coo = fiamma.from_numpy(a).to_sparse()
    for lay in ("csr", "csc"):
        s = getattr(coo, f"to_sparse_{lay}")()
        np.testing.assert_array_equal(s.to_dense().numpy(), a)
        back = s.to_sparse_coo()
        assert back.layout is fiamma.sparse_coo and back.is_coalesced()
        np.testing.assert_array_equal(back.to_dense().numpy(), a)
        assert s.to_sparse(layout=fiamma.sparse_csr).layout is fiamma.sparse_csr
    # a CSR built with unsorted or repeated columns (allowed without check_invariants) still
    # gives a coalesced COO tensor
    u = fiamma.sparse_csr_tensor([0, 2, 3], [2, 0, 1], [1.0, 2.0, 3.0], (2, 3)).to_sparse_coo()
    assert u.is_coalesced() and u.indices().tolist() == [[0, 0, 1], [0, 2, 1]]
    assert u.values().tolist() == [2.0, 1.0, 3.0]
    r = fiamma.sparse_csr_tensor([0, 2, 3], [1, 1, 1], [1.0, 2.0, 3.0], (2, 3)).to_sparse_coo()
    assert r.indices().tolist() == [[0, 1], [1, 1]] and r.values().tolist() == [3.0, 3.0]
    # duplicates of an uncoalesced COO add up
    u = fiamma.sparse_coo_tensor([[0, 0, 1], [1, 1, 0]], [1.0, 2.0, 4.0], (2, 2))
    c = u.to_sparse_csr()
    assert c._nnz() == 2 and c.to_dense().tolist() == [[0.0, 3.0], [4.0, 0.0]]


def test_batched_and_hybrid_from_dense():
    x = fiamma.zeros(2, 3, 4)
    x[0, 1, 2] = 1
    x[1, 0, 0] = 5
    s = x.to_sparse_csr()
    assert s.crow_indices().tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]
    assert s.col_indices().tolist() == [[2], [0]]
    assert fiamma.equal(s.to_dense(), x)
    x[1, 2, 2] = 3
    with pytest.raises(RuntimeError, match="same number of specified elements per batch"):
        x.to_sparse_csr()
    h = fiamma.zeros(2, 3, 4)
    h[0, 1] = 1
    h[1, 2, 3] = 5
    s = h.to_sparse_csr(dense_dim=1)
    assert s.shape == (2, 3, 4) and s.values().shape == (2, 4)
    assert fiamma.equal(s.to_dense(), h)


def test_transpose_and_layout_changes():
    a = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], np.float32)
    s = fiamma.from_numpy(a).to_sparse_csr()
    t = s.t()
    assert t.layout is fiamma.sparse_csc and t.shape == (3, 2)
    np.testing.assert_array_equal(t.to_dense().numpy(), a.T)
    assert s.transpose(0, 1).transpose(0, 1).layout is fiamma.sparse_csr
    b = fiamma.arange(16.0).reshape(4, 4).to_sparse_bsr((2, 2))
    np.testing.assert_array_equal(b.t().to_dense().numpy(),
                                  np.arange(16.0).reshape(4, 4).T)
    assert b.t().layout is fiamma.sparse_bsc


def test_printing():
    s = fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0])
    assert repr(s) == (
        "tensor(crow_indices=tensor([0, 2, 3]),\n"
        "       col_indices=tensor([0, 2, 1]),\n"
        "       values=tensor([1., 2., 3.]), size=(2, 3), nnz=3,\n"
        "       layout=fiamma.sparse_csr)")
    assert "dtype=fiamma.float64" in repr(s.to(fiamma.float64))
    assert repr(s.t()).startswith("tensor(ccol_indices=tensor([0, 2, 3]),\n       row_indices=")


def test_save_load_and_pickle(tmp_path):
    import pickle

    x = fiamma.tensor([[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 3.0, 0.0]])
    for s in (x.to_sparse_csr(), x.to_sparse_csc(), x.to_sparse_bsr((1, 2)),
              x.to_sparse_bsc((2, 2))):
        fiamma.save({"s": s}, tmp_path / "s.pt")
        r = fiamma.load(tmp_path / "s.pt")["s"]
        assert r.layout is s.layout and fiamma.equal(r.to_dense(), x)
        assert fiamma.equal(r._compressed_indices(), s._compressed_indices())
        p = pickle.loads(pickle.dumps(s))
        assert p.layout is s.layout and fiamma.equal(p.to_dense(), x)


@pytest.mark.parity
def test_save_load_parity(tmp_path):
    torch = pytest.importorskip("torch")
    import warnings

    warnings.simplefilter("ignore")
    x = fiamma.tensor([[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 3.0, 0.0]])
    fiamma.save(x.to_sparse_bsr((1, 2)), tmp_path / "f.pt")
    t = torch.load(tmp_path / "f.pt")
    assert t.layout == torch.sparse_bsr
    assert t.to_dense().tolist() == x.tolist()
    bad = torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 9]),
                                  torch.tensor([1.0, 2.0]), (2, 10))
    bad.col_indices()[1] = 50  # a corrupted file: refused before any tensor is built on it
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(Exception, match="0 <= col_indices < ncols"):
        fiamma.load(tmp_path / "bad.pt")


# ---- products ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_sparse_dense_products_match_numpy(dtype, layout):
    rng = np.random.default_rng(3)
    a = rand_sparse(rng, 40, 30, 0.1, dtype)
    d = rng.standard_normal((30, 7)).astype(dtype)
    e = rng.standard_normal((5, 40)).astype(dtype)
    s = getattr(fiamma.from_numpy(a), f"to_sparse_{layout}")()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose((s @ fiamma.from_numpy(d)).numpy(), a @ d, rtol=tol, atol=tol)
    np.testing.assert_allclose(fiamma.mm(s, fiamma.from_numpy(d)).numpy(), a @ d, rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(fiamma.sparse.mm(s, fiamma.from_numpy(d)).numpy(), a @ d,
                               rtol=tol, atol=tol)
    np.testing.assert_allclose((s @ fiamma.from_numpy(d[:, 0])).numpy(), a @ d[:, 0], rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(fiamma.mv(s, fiamma.from_numpy(d[:, 0])).numpy(), a @ d[:, 0],
                               rtol=tol, atol=tol)
    np.testing.assert_allclose((fiamma.from_numpy(e) @ s).numpy(), e @ a, rtol=tol, atol=tol)
    c = rng.standard_normal((40, 7)).astype(dtype)
    r = fiamma.addmm(fiamma.from_numpy(c), s, fiamma.from_numpy(d), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(r.numpy(), 0.5 * c + 2 * (a @ d), rtol=tol * 10, atol=tol * 10)
    r = fiamma.sparse.addmm(fiamma.from_numpy(c), s, fiamma.from_numpy(d))
    np.testing.assert_allclose(r.numpy(), c + a @ d, rtol=tol * 10, atol=tol * 10)


def test_large_product_on_threads_matches_numpy():
    # above the kernel's threading threshold (nnz * columns > 2e5): rows split over threads
    rng = np.random.default_rng(9)
    a = rand_sparse(rng, 3000, 2000, 0.01)
    d = rng.standard_normal((2000, 16)).astype(np.float32)
    prev = fiamma.get_num_threads()
    try:
        for nt in (1, 2):
            fiamma.set_num_threads(nt)
            s = fiamma.from_numpy(a).to_sparse_csr()
            np.testing.assert_allclose((s @ fiamma.from_numpy(d)).numpy(), a @ d, rtol=1e-4,
                                       atol=1e-4)
            e = rng.standard_normal((16, 3000)).astype(np.float32)
            np.testing.assert_allclose((fiamma.from_numpy(e) @ s).numpy(), e @ a, rtol=1e-4,
                                       atol=1e-4)
    finally:
        fiamma.set_num_threads(prev)


def test_composed_paths_blocks_ints_batches():
    rng = np.random.default_rng(4)
    a = rand_sparse(rng, 8, 6, 0.3)
    d = rng.standard_normal((6, 3)).astype(np.float32)
    x = fiamma.from_numpy(a)
    for s in (x.to_sparse_bsr((2, 3)), x.to_sparse_bsc((4, 2))):
        np.testing.assert_allclose((s @ fiamma.from_numpy(d)).numpy(), a @ d, rtol=1e-5,
                                   atol=1e-5)
    ai = (a != 0).astype(np.int64) * 3
    si = fiamma.from_numpy(ai).to_sparse_csr()
    di = np.arange(18).reshape(6, 3)
    np.testing.assert_array_equal((si @ fiamma.from_numpy(di)).numpy(), ai @ di)
    xb = np.zeros((2, 4, 5), np.float32)
    xb[0, 1, 2], xb[0, 3, 0], xb[1, 0, 4], xb[1, 2, 2] = 1, 2, 3, 4
    sb = fiamma.from_numpy(xb).to_sparse_csr()
    db = rng.standard_normal((2, 5, 3)).astype(np.float32)
    np.testing.assert_allclose((sb @ fiamma.from_numpy(db)).numpy(), xb @ db, rtol=1e-5,
                               atol=1e-6)


def test_sparse_sparse_product_and_sampled_addmm():
    rng = np.random.default_rng(5)
    a = rand_sparse(rng, 6, 5, 0.4)
    b = rand_sparse(rng, 5, 4, 0.4)
    p = fiamma.from_numpy(a).to_sparse_csr() @ fiamma.from_numpy(b).to_sparse_csr()
    assert p.layout is fiamma.sparse_csr
    np.testing.assert_allclose(p.to_dense().numpy(), a @ b, rtol=1e-5, atol=1e-6)
    m1 = rng.standard_normal((6, 3)).astype(np.float32)
    m2 = rng.standard_normal((3, 5)).astype(np.float32)
    s = fiamma.from_numpy(a).to_sparse_csr()
    r = fiamma.sparse.sampled_addmm(s, fiamma.from_numpy(m1), fiamma.from_numpy(m2), beta=0.5,
                                    alpha=2.0)
    assert r.layout is fiamma.sparse_csr and fiamma.equal(r.col_indices(), s.col_indices())
    ref = np.where(a != 0, 0.5 * a + 2 * (m1 @ m2), 0)
    np.testing.assert_allclose(r.to_dense().numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="sampled_addmm: Expected result to have sparse csr"):
        fiamma.sparse.sampled_addmm(s.to_sparse_csc(), fiamma.from_numpy(m1),
                                    fiamma.from_numpy(m2))


def test_product_errors_name_the_op():
    s = fiamma.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 4x2\)"):
        fiamma.mm(s, fiamma.ones(4, 2))
    with pytest.raises(RuntimeError, match="matmul: expected mat1 and mat2 to have the same "
                                           "dtype"):
        s @ fiamma.ones(3, 2, dtype=fiamma.float64)
    with pytest.raises(RuntimeError, match="cos: unsupported tensor layout"):
        fiamma.cos(s)
    with pytest.raises(NotImplementedError, match="sparse compressed"):
        s.reshape(3, 2)


def test_kernel_checks_structure_itself():
    # parts that bypass the constructor (as a corrupted tensor would) still never reach memory
    # (the C kernel's check, or the array-module backend's under FIAMMA_CPU_BACKEND=xp)
    from fiamma._sparse_compressed import SparseCSR, _make
    from fiamma._sparse_compressed_ops import csr_mm

    bad = _make(SparseCSR, fiamma.tensor([0, 1, 2]), fiamma.tensor([0, 7]),
                fiamma.tensor([1.0, 2.0]), (2, 3))
    with pytest.raises(IndexError, match="col_indices at position 1"):
        csr_mm(bad, fiamma.ones(3, 2), False)
    bad = _make(SparseCSR, fiamma.tensor([0, 5, 2]), fiamma.tensor([0, 1]),
                fiamma.tensor([1.0, 2.0]), (2, 3))
    with pytest.raises(IndexError, match="crow_indices at position 1"):
        csr_mm(bad, fiamma.ones(3, 2), False)


# ---- elementwise, reductions ---------------------------------------------------------------------

def test_elementwise_ops_keep_the_pattern():
    a = np.array([[1.0, 0.0, -2.0], [0.0, 3.0, 0.0]], np.float32)
    s = fiamma.from_numpy(a).to_sparse_csr()
    for r, ref in ((s * 2, a * 2), (2 * s, a * 2), (-s, -a), (s / 2, a / 2), (s.abs(), abs(a)),
                   (fiamma.relu(s), np.maximum(a, 0)), (fiamma.sin(s), np.sin(a)),
                   (s * fiamma.from_numpy(a), a * a)):
        assert r.layout is fiamma.sparse_csr and r._nnz() == 3
        np.testing.assert_allclose(r.to_dense().numpy(), ref, rtol=1e-6)
    b = np.array([[0.0, 5.0, 1.0], [0.0, 0.0, 0.0]], np.float32)
    t = fiamma.from_numpy(b).to_sparse_csr()
    r = s + t
    assert r.layout is fiamma.sparse_csr
    np.testing.assert_array_equal(r.to_dense().numpy(), a + b)
    np.testing.assert_array_equal((s - t).to_dense().numpy(), a - b)
    np.testing.assert_array_equal(fiamma.add(s, t, alpha=2).to_dense().numpy(), a + 2 * b)
    d = fiamma.ones(2, 3)
    np.testing.assert_array_equal((s + d).numpy(), a + 1)
    np.testing.assert_array_equal((d + s).numpy(), a + 1)
    m = s * t  # the entries both store (PyTorch's intersection)
    assert m._nnz() == 1 and m.col_indices().tolist() == [2]
    np.testing.assert_array_equal(m.to_dense().numpy(), a * b)
    c = s.to_sparse_csc()
    assert (c * 2).layout is fiamma.sparse_csc and c.abs().layout is fiamma.sparse_csc
    np.testing.assert_array_equal((c + c).to_dense().numpy(), 2 * a)  # as PyTorch: self + self
    with pytest.raises(NotImplementedError, match="add: not supported .*sparse_csc"):
        c + c.clone()
    with pytest.raises(RuntimeError, match="add: expected both operands to have the same "
                                           "layout"):
        s + c


def test_sums():
    a = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]], np.float32)
    s = fiamma.from_numpy(a).to_sparse_csr()
    assert s.sum().item() == 6.0 and fiamma.sparse.sum(s).item() == 6.0
    r = s.sum(1, keepdim=True)
    assert r.layout is fiamma.sparse_csr and r.shape == (3, 1) and r._nnz() == 2
    np.testing.assert_array_equal(r.to_dense().numpy(), a.sum(1, keepdims=True))
    r = s.sum(0, keepdim=True)
    assert r.shape == (1, 3) and r._nnz() == 3  # every column holds an entry
    np.testing.assert_array_equal(r.to_dense().numpy(), a.sum(0, keepdims=True))
    with pytest.raises(RuntimeError, match="keepdim=False is unsupported"):
        s.sum(0)


def test_clone_detach_to():
    s = fiamma.sparse_csr_tensor([0, 1], [0], [1.5], (1, 2))
    c = s.clone()
    assert c.layout is fiamma.sparse_csr and c.values().tolist() == [1.5]
    assert c.values() is not s.values()
    assert s.to(fiamma.float64).dtype == fiamma.float64
    assert s.double().layout is fiamma.sparse_csr
    assert s.detach().layout is fiamma.sparse_csr


# ---- autograd ------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_gradients_of_sparse_dense_product(layout):
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(6)
    a = rand_sparse(rng, 9, 7, 0.3, np.float64)
    dn = rng.standard_normal((7, 4))
    w = rng.standard_normal((9, 4))
    s0 = getattr(fiamma.from_numpy(a), f"to_sparse_{layout}")()
    v = s0.values().clone().requires_grad_()
    ci = s0.crow_indices() if layout == "csr" else s0.ccol_indices()
    pi = s0.col_indices() if layout == "csr" else s0.row_indices()
    ctor = fiamma.sparse_csr_tensor if layout == "csr" else fiamma.sparse_csc_tensor
    s = ctor(ci, pi, v, a.shape)
    d = fiamma.from_numpy(dn).requires_grad_()
    ((s @ d) * fiamma.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(d.grad.numpy(), a.T @ w, rtol=1e-10)
    # dL/dA = w @ d^T, read at the stored entries (in the layout's order)
    full = w @ dn.T
    rows, cols = np.nonzero(a if layout == "csr" else a.T)
    if layout == "csc":
        rows, cols = cols, rows
    np.testing.assert_allclose(v.grad.numpy(), full[rows, cols], rtol=1e-10)
    # dense @ sparse
    v.grad = None
    e = fiamma.from_numpy(rng.standard_normal((3, 9))).requires_grad_()
    (e @ s).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), np.ones((3, 7)) @ a.T, rtol=1e-10)
    np.testing.assert_allclose(v.grad.numpy(), (e.detach().numpy().T @ np.ones((3, 7)))[
        rows, cols], rtol=1e-10)


def test_gradcheck_and_leaf_grad():
    ag = pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(7)
    a = rand_sparse(rng, 5, 4, 0.5, np.float64)
    s0 = fiamma.from_numpy(a).to_sparse_csr()
    ci, pi = s0.crow_indices(), s0.col_indices()

    def f(v, d):
        return fiamma.sparse_csr_tensor(ci, pi, v, (5, 4)) @ d

    v = s0.values().clone().requires_grad_()
    d = fiamma.from_numpy(rng.standard_normal((4, 3))).requires_grad_()
    assert ag.gradcheck(f, (v, d))
    assert ag.gradgradcheck(f, (v, d))
    m1 = fiamma.from_numpy(rng.standard_normal((5, 2))).requires_grad_()
    m2 = fiamma.from_numpy(rng.standard_normal((2, 4))).requires_grad_()
    assert ag.gradcheck(lambda x, y: fiamma.sparse.sampled_addmm(s0, x, y).values(), (m1, m2))
    leaf = fiamma.from_numpy(a).to_sparse_csr().requires_grad_()
    (leaf @ d.detach()).sum().backward()
    g = leaf.grad
    assert g.layout is fiamma.sparse_csr
    full = np.ones((5, 3)) @ d.detach().numpy().T
    rows, cols = np.nonzero(a)
    np.testing.assert_allclose(g.values().numpy(), full[rows, cols], rtol=1e-12)


def test_to_dense_and_conversion_are_differentiable():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
    s = x.to_sparse_csr()
    (s.to_dense() * fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0], [3.0, 0.0]]


# ---- hybrid COO products, segment_reduce --------------------------------------------------------

def test_hybrid_coo_products():
    s = fiamma.sparse_coo_tensor([[0, 0, 2], [1, 2, 0]], [1.0, 2.0, 3.0], (3, 3))
    d = fiamma.arange(6.0).reshape(3, 2)
    ref = s.to_dense().numpy() @ d.numpy()
    h = fiamma.hspmm(s, d)
    assert h.layout is fiamma.sparse_coo and h.sparse_dim() == 1 and h.dense_dim() == 1
    assert h.indices().tolist() == [[0, 2]]
    np.testing.assert_array_equal(h.to_dense().numpy(), ref)
    np.testing.assert_array_equal(fiamma.hsmm(s, d).to_dense().numpy(), ref)
    np.testing.assert_array_equal(fiamma.dsmm(s, d).numpy(), ref)
    r = fiamma.sspaddmm(s, s, fiamma.eye(3), beta=2.0, alpha=3.0)
    assert r.layout is fiamma.sparse_coo
    np.testing.assert_array_equal(r.to_dense().numpy(), 5 * s.to_dense().numpy())
    np.testing.assert_array_equal(fiamma.saddmm(s, s, fiamma.eye(3)).to_dense().numpy(),
                                  2 * s.to_dense().numpy())
    with pytest.raises(RuntimeError, match="hspmm: mat1 must be a sparse COO tensor"):
        fiamma.hspmm(d, d)


def _segments_ref(x, lengths, reduce, initial=None):
    # PyTorch's rule: initial joins every segment's reduction; mean is (sum + initial) / length,
    # an empty segment gives initial
    out, i = [], 0
    for n in lengths:
        seg = list(x[i:i + n])
        i += n
        if reduce == "mean" and initial is not None:
            out.append((np.sum(seg) + initial) / n if n else initial)
            continue
        seg += [] if initial is None else [initial]
        if not seg:
            out.append({"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf,
                        "prod": 1.0}[reduce])
        else:
            out.append({"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
                        "prod": np.prod}[reduce](seg))
    return np.array(out)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce_matches_numpy(reduce, initial):
    x = np.array([1.0, -2.0, 3.0, 4.0, 0.5, 6.0])
    lengths = [2, 0, 3, 1]
    r = fiamma.segment_reduce(fiamma.from_numpy(x), reduce, lengths=fiamma.tensor(lengths),
                              initial=initial)
    np.testing.assert_allclose(r.numpy(), _segments_ref(x, lengths, reduce, initial))
    r2 = fiamma.segment_reduce(fiamma.from_numpy(x), reduce,
                               offsets=fiamma.tensor([0, 2, 2, 5, 6]), initial=initial)
    np.testing.assert_allclose(r2.numpy(), r.numpy())


def test_segment_reduce_axis_batches_and_checks():
    d = np.arange(12.0).reshape(2, 6)
    r = fiamma.segment_reduce(fiamma.from_numpy(d), "sum",
                              lengths=fiamma.tensor([[2, 4], [3, 3]]), axis=1)
    assert r.tolist() == [[1.0, 14.0], [21.0, 30.0]]
    d2 = np.arange(12.0).reshape(6, 2)
    r = fiamma.segment_reduce(fiamma.from_numpy(d2), "max", lengths=fiamma.tensor([2, 4]))
    assert r.tolist() == [[2.0, 3.0], [10.0, 11.0]]
    x = fiamma.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    with pytest.raises(RuntimeError, match="segment_reduce: the segments must cover"):
        fiamma.segment_reduce(x, "sum", lengths=fiamma.tensor([2, 2]))
    assert fiamma.segment_reduce(x, "sum", lengths=fiamma.tensor([2, 2]),
                                 unsafe=True).tolist() == [3.0, 7.0]
    with pytest.raises(RuntimeError, match="segment_reduce: lengths must be nonnegative"):
        fiamma.segment_reduce(x, "sum", lengths=fiamma.tensor([2, -1, 4]))
    with pytest.raises(RuntimeError, match="segment_reduce: reduce must be one of"):
        fiamma.segment_reduce(x, "median", lengths=fiamma.tensor([5]))


def test_segment_reduce_gradients():
    pytest.importorskip("fiamma.autograd")
    for reduce, ref in (("max", [0.0, 0.5, 0.5, 1.0]), ("prod", [9.0, 3.0, 3.0, 1.0]),
                        ("mean", [1 / 3, 1 / 3, 1 / 3, 1.0]), ("sum", [1.0, 1.0, 1.0, 1.0])):
        x = fiamma.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
        fiamma.segment_reduce(x, reduce, lengths=fiamma.tensor([3, 1])).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-6)


# ---- parity with PyTorch ------------------------------------------------------------------------

@pytest.mark.parity
def test_parity_with_torch():
    torch = pytest.importorskip("torch")
    import warnings

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(8)
    a = rand_sparse(rng, 12, 10, 0.2)
    d = rng.standard_normal((10, 4)).astype(np.float32)
    ta, fa = torch.from_numpy(a), fiamma.from_numpy(a)
    for lay in ("csr", "csc"):
        ts, fs = getattr(ta, f"to_sparse_{lay}")(), getattr(fa, f"to_sparse_{lay}")()
        for name in (("crow_indices", "col_indices") if lay == "csr" else
                     ("ccol_indices", "row_indices")) + ("values",):
            np.testing.assert_array_equal(getattr(fs, name)().numpy(),
                                          getattr(ts, name)().numpy())
        np.testing.assert_allclose((fs @ fiamma.from_numpy(d)).numpy(),
                                   (ts @ torch.from_numpy(d)).numpy(), rtol=1e-5, atol=1e-6)
        assert repr(fs).replace("fiamma.", "torch.") == repr(ts)
    for bs in ((2, 2), (3, 5)):
        for lay in ("bsr", "bsc"):
            ts, fs = getattr(ta, f"to_sparse_{lay}")(bs), getattr(fa, f"to_sparse_{lay}")(bs)
            np.testing.assert_array_equal(fs.values().numpy(), ts.values().numpy())
            np.testing.assert_array_equal(fs._compressed_indices().numpy(),
                                          (ts.crow_indices() if lay == "bsr" else
                                           ts.ccol_indices()).numpy())
            assert repr(fs).replace("fiamma.", "torch.") == repr(ts)
    # batched CSR and hybrid
    x = np.zeros((2, 3, 4), np.float32)
    x[0, 1, 2], x[1, 0, 0] = 1, 5
    assert repr(fiamma.from_numpy(x).to_sparse_csr()).replace("fiamma.", "torch.") == \
        repr(torch.from_numpy(x).to_sparse_csr())
    assert repr(fiamma.from_numpy(x).to_sparse_csr(dense_dim=1)).replace("fiamma.", "torch.") == \
        repr(torch.from_numpy(x).to_sparse_csr(dense_dim=1))


@pytest.mark.parity
def test_parity_gradients_with_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("fiamma.autograd")
    import warnings

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(8)
    a = rand_sparse(rng, 12, 10, 0.2)
    d = rng.standard_normal((10, 4)).astype(np.float32)
    ta, fa = torch.from_numpy(a), fiamma.from_numpy(a)
    # gradients w.r.t. the values and the dense operand
    v = torch.from_numpy(ta.to_sparse_csr().values().numpy()).requires_grad_()
    fv = fiamma.from_numpy(v.detach().numpy().copy()).requires_grad_()
    ts = torch.sparse_csr_tensor(ta.to_sparse_csr().crow_indices(),
                                 ta.to_sparse_csr().col_indices(), v, (12, 10))
    fs = fiamma.sparse_csr_tensor(fa.to_sparse_csr().crow_indices(),
                                  fa.to_sparse_csr().col_indices(), fv, (12, 10))
    td = torch.from_numpy(d).requires_grad_()
    fd = fiamma.from_numpy(d.copy()).requires_grad_()
    (ts @ td).pow(2).sum().backward()
    (fs @ fd).pow(2).sum().backward()
    np.testing.assert_allclose(fv.grad.numpy(), v.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fd.grad.numpy(), td.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parity
def test_parity_segment_reduce_and_hybrid_products():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    for reduce in ("sum", "mean", "max", "min", "prod"):
        for initial in (None, 10.0):
            t = torch.segment_reduce(torch.from_numpy(x), reduce,
                                     lengths=torch.tensor([2, 0, 3]), initial=initial)
            f = fiamma.segment_reduce(fiamma.from_numpy(x), reduce,
                                      lengths=fiamma.tensor([2, 0, 3]), initial=initial)
            np.testing.assert_allclose(f.numpy(), t.numpy(), rtol=1e-6)
    idx, val = [[0, 0, 2], [1, 2, 0]], [1.0, 2.0, 3.0]
    ts, fs = torch.sparse_coo_tensor(idx, val, (3, 3)), fiamma.sparse_coo_tensor(idx, val, (3, 3))
    td, fd = torch.arange(6.0).reshape(3, 2), fiamma.arange(6.0).reshape(3, 2)
    assert repr(fiamma.hspmm(fs, fd)).replace("fiamma.", "torch.") == repr(torch.hspmm(ts, td))
    np.testing.assert_array_equal(fiamma.sspaddmm(fs, fs, fiamma.eye(3)).to_dense().numpy(),
                                  torch.sspaddmm(ts, ts, torch.eye(3)).to_dense().numpy())


# ---- indexing ------------------------------------------------------------------------------------

def _as_list(x):
    return x.to_dense().tolist() if x.layout is not fiamma.strided else x.tolist()


@pytest.mark.parametrize("layout", ["csr", "csc", "bsr", "bsc"])
def test_select_and_getitem_of_2d(layout):
    rng = np.random.default_rng(21)
    a = rand_sparse(rng, 5, 6, 0.4)
    conv = getattr(fiamma.from_numpy(a), f"to_sparse_{layout}")
    s = conv((1, 1)) if layout in ("bsr", "bsc") else conv()
    for i in range(-5, 5):
        r = s[i]
        assert r.layout is fiamma.sparse_coo and r.shape == (6,) and r.is_coalesced()
        np.testing.assert_array_equal(r.to_dense().numpy(), a[i])
        for j in (0, 3, -1):
            e = s[i, j]
            assert e.layout is fiamma.strided and e.shape == ()
            assert e.item() == a[i, j]
    for j in range(6):
        c = s.select(1, j)
        assert c.layout is fiamma.sparse_coo and c.is_coalesced()
        np.testing.assert_array_equal(c.to_dense().numpy(), a[:, j])
        np.testing.assert_array_equal(fiamma.select(s, -1, j).to_dense().numpy(), a[:, j])
    with pytest.raises(IndexError, match="select.*index 5 out of range"):
        s[5]
    with pytest.raises(IndexError, match="select.*index -7 out of range"):
        s.select(1, -7)
    with pytest.raises(IndexError, match="select.*Dimension out of range"):
        s.select(2, 0)
    np.testing.assert_array_equal(s[fiamma.tensor(2)].to_dense().numpy(), a[2])
    np.testing.assert_array_equal(s[np.int64(3)].to_dense().numpy(), a[3])
    for bad in (slice(0, 2), None, Ellipsis, True, fiamma.tensor([0, 1]), fiamma.tensor(1.0),
                (1, slice(None))):
        with pytest.raises(RuntimeError, match="getitem: Sparse .* do not have strides"):
            s[bad]
    with pytest.raises(RuntimeError, match="narrow: Sparse .* do not have strides"):
        s.narrow(0, 1, 2)
    with pytest.raises(IndexError, match="too many indices"):
        s[0, 0, 0]


def test_select_of_batched_hybrid_and_blocked():
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    x[x % 3 == 0] = 0
    b = fiamma.from_numpy(x).to_sparse_csr()
    r = b[1]
    assert r.layout is fiamma.sparse_csr and r.shape == (3, 4)
    np.testing.assert_array_equal(r.to_dense().numpy(), x[1])
    np.testing.assert_array_equal(b[1, 2].to_dense().numpy(), x[1, 2])
    assert b[1, 2, 1].item() == x[1, 2, 1]
    with pytest.raises(RuntimeError, match="select.*batched"):
        b.select(1, 0)
    # hybrid: a dense dim keeps the layout; a sparse dim gives COO with the dense dim
    h = fiamma.arange(1, 13, dtype=fiamma.float32).reshape(3, 2, 2).to_sparse_csr(dense_dim=1)
    hd = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
    assert h.select(2, 1).layout is fiamma.sparse_csr
    np.testing.assert_array_equal(h.select(2, 1).to_dense().numpy(), hd[..., 1])
    assert h[1].layout is fiamma.sparse_coo and h[1].shape == (2, 2)
    np.testing.assert_array_equal(h[1].to_dense().numpy(), hd[1])
    np.testing.assert_array_equal(h.select(1, 0).to_dense().numpy(), hd[:, 0])
    assert h[1, 1].tolist() == [7.0, 8.0]
    # blocks larger than 1 x 1: no view (as PyTorch); select_copy gives the COO slice
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    a[a % 3 == 0] = 0
    for lay in ("bsr", "bsc"):
        s = getattr(fiamma.from_numpy(a), f"to_sparse_{lay}")((2, 2))
        with pytest.raises(RuntimeError, match="select.*blocksize \\(2, 2\\).*select_copy"):
            s[1]
        for dim in (0, 1):
            for i in range(4):
                c = fiamma.select_copy(s, dim, i)
                assert c.layout is fiamma.sparse_coo
                np.testing.assert_array_equal(c.to_dense().numpy(), a.take(i, axis=dim))


def test_select_is_differentiable():
    pytest.importorskip("fiamma.autograd")
    v = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = fiamma.sparse_csr_tensor([0, 1, 3], [0, 0, 1], v, (2, 2))
    (s[1].to_dense() * fiamma.tensor([1.0, 10.0])).sum().backward()
    assert v.grad.tolist() == [0.0, 1.0, 10.0]
    v.grad = None
    (s.select(1, 0).to_dense() * fiamma.tensor([1.0, 10.0])).sum().backward()
    assert v.grad.tolist() == [1.0, 10.0, 0.0]


@pytest.mark.parity
def test_parity_indexing_with_torch():
    torch = pytest.importorskip("torch")
    import warnings

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(5)
    a = rand_sparse(rng, 4, 6, 0.5)
    x = np.stack([a, 2 * a])
    for lay in ("csr", "csc", "bsr", "bsc"):
        args = ((1, 1),) if lay in ("bsr", "bsc") else ()
        for arr in (a, x):
            ts = getattr(torch.from_numpy(arr), f"to_sparse_{lay}")(*args)
            fs = getattr(fiamma.from_numpy(arr), f"to_sparse_{lay}")(*args)
            idxs = [1, -1, (1, 3), (0, -2)] + ([(1, 2, 5)] if arr.ndim == 3 else [])
            for idx in idxs:
                f = fs[idx]
                np.testing.assert_array_equal(np.array(_as_list(f)), arr[idx])
                try:
                    t = ts[idx]
                except RuntimeError as e:  # the plain dim with unevenly spaced entries
                    assert "no view" in str(e)
                    continue
                assert f.layout.name == repr(t.layout).split(".")[-1]
                assert tuple(f.shape) == tuple(t.shape)
            for dim in range(arr.ndim):
                for i in (0, -1):
                    try:
                        t = ts.select(dim, i)
                    except RuntimeError as e:
                        if "no view" not in str(e):  # selecting a sparse dim of a batch
                            with pytest.raises(RuntimeError, match="select"):
                                fs.select(dim, i)
                            continue
                        # PyTorch views the plain dim only where its entries lie evenly
                        # spaced; fiamma always gives the slice (select_copy's result)
                        t = torch.select_copy(ts, dim, i)
                    f = fs.select(dim, i)
                    assert f.layout.name == repr(t.layout).split(".")[-1]
                    np.testing.assert_array_equal(f.to_dense().numpy(), t.to_dense().numpy())
            with pytest.raises(RuntimeError):
                ts[0:1]
            with pytest.raises(RuntimeError):
                fs[0:1]


# ---- batched sampled_addmm and out= ------------------------------------------------------------

def test_sampled_addmm_batched_and_out():
    rng = np.random.default_rng(3)
    mask = np.arange(20).reshape(4, 5) % 3 == 0  # the same nnz in every batch
    x = np.where(mask, rng.standard_normal((3, 4, 5)), 0).astype(np.float32)
    a = rng.standard_normal((3, 4, 6)).astype(np.float32)
    b = rng.standard_normal((3, 6, 5)).astype(np.float32)
    s = fiamma.from_numpy(x).to_sparse_csr()
    r = fiamma.sparse.sampled_addmm(s, fiamma.from_numpy(a), fiamma.from_numpy(b), beta=0.5,
                                    alpha=2.0)
    assert r.layout is fiamma.sparse_csr and r.shape == (3, 4, 5)
    want = np.where(x != 0, 0.5 * x + 2.0 * (a @ b), 0)
    np.testing.assert_allclose(r.to_dense().numpy(), want, rtol=1e-5, atol=1e-5)
    # a 2-D input: its pattern for every batch
    r2 = fiamma.sparse.sampled_addmm(s[1], fiamma.from_numpy(a), fiamma.from_numpy(b))
    assert r2.shape == (3, 4, 5)
    np.testing.assert_allclose(r2.to_dense().numpy(), np.where(x[1] != 0, x[1] + a @ b, 0),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="sampled_addmm: Expected mat1 and mat2 to have the "
                       "same batch size, but got \\[3\\] and \\[\\]"):
        fiamma.sparse.sampled_addmm(s, fiamma.from_numpy(a), fiamma.from_numpy(b[0]))
    with pytest.raises(RuntimeError, match="sampled_addmm: Expected self and mat1 to have the "
                       "same batch size, but got \\[3\\] and \\[2\\]"):
        fiamma.sparse.sampled_addmm(s, fiamma.from_numpy(a[:2]), fiamma.from_numpy(b[:2]))
    # out=: takes the result's pattern, values and size
    out = fiamma.eye(2).to_sparse_csr()
    got = fiamma.sparse.sampled_addmm(s, fiamma.from_numpy(a), fiamma.from_numpy(b), out=out)
    assert got is out and out.shape == (3, 4, 5)
    np.testing.assert_allclose(out.to_dense().numpy(), np.where(x != 0, x + a @ b, 0),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="sampled_addmm: Expected out to have sparse_csr"):
        fiamma.sparse.sampled_addmm(s[0], fiamma.from_numpy(a[0]), fiamma.from_numpy(b[0]),
                                    out=fiamma.zeros(4, 5))
    with pytest.raises(RuntimeError, match="sampled_addmm: Expected result and self to have "
                       "the same dtype"):
        fiamma.sparse.sampled_addmm(s[0], fiamma.from_numpy(a[0]), fiamma.from_numpy(b[0]),
                                    out=fiamma.eye(2, dtype=fiamma.float64).to_sparse_csr())


def test_sampled_addmm_batched_gradients():
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(4)
    x = np.ones((2, 3, 3), np.float32)
    x[:, 0, 1] = 0
    s = fiamma.from_numpy(x).to_sparse_csr()
    a = fiamma.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32)).requires_grad_()
    b = fiamma.from_numpy(rng.standard_normal((2, 4, 3)).astype(np.float32)).requires_grad_()
    fiamma.sparse.sampled_addmm(s, a, b).values().sum().backward()
    mask = fiamma.from_numpy((x != 0).astype(np.float32))
    np.testing.assert_allclose(a.grad.numpy(), (mask @ b.detach().mT).numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), (a.detach().mT @ mask).numpy(), rtol=1e-5)


def test_products_out():
    a = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], np.float32)
    s = fiamma.from_numpy(a).to_sparse_csr()
    d = np.arange(6, dtype=np.float32).reshape(3, 2)
    for fn in (fiamma.mm, fiamma.matmul):
        out = fiamma.empty(2, 2)
        assert fn(s, fiamma.from_numpy(d), out=out) is out
        np.testing.assert_allclose(out.numpy(), a @ d)
    out = fiamma.empty(0)
    fiamma.mm(fiamma.from_numpy(d.T.copy()), s.t(), out=out)  # dense @ CSC, resized
    np.testing.assert_allclose(out.numpy(), d.T @ a.T)
    out = fiamma.empty(2, 2)
    fiamma.addmm(fiamma.ones(2, 2), s, fiamma.from_numpy(d), beta=2.0, alpha=0.5, out=out)
    np.testing.assert_allclose(out.numpy(), 2.0 + 0.5 * (a @ d))
    out = fiamma.empty(2)
    fiamma.mv(s, fiamma.ones(3), out=out)
    np.testing.assert_allclose(out.numpy(), a.sum(1))
    out = fiamma.eye(3).to_sparse_csr()
    assert fiamma.mm(s, fiamma.from_numpy(d).to_sparse_csr(), out=out) is out
    assert out.layout is fiamma.sparse_csr and out.shape == (2, 2)
    np.testing.assert_allclose(out.to_dense().numpy(), a @ d)
    with pytest.raises(RuntimeError, match="mm: out has size \\(5,\\), expected \\(2, 2\\)"):
        fiamma.mm(s, fiamma.from_numpy(d), out=fiamma.empty(5))
    with pytest.raises(RuntimeError, match="mm: expected out to have dtype fiamma.float32"):
        fiamma.mm(s, fiamma.from_numpy(d), out=fiamma.empty(2, 2, dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="mm: out must be a dense"):
        fiamma.mm(s, fiamma.from_numpy(d), out=fiamma.eye(2).to_sparse_csr())


@pytest.mark.parity
def test_parity_batched_sampled_addmm_and_out():
    torch = pytest.importorskip("torch")
    import warnings

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(9)
    x = np.zeros((2, 3, 4), np.float32)
    x[:, [0, 1, 2, 2], [1, 0, 2, 3]] = rng.standard_normal((2, 4))
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)
    for inp in (x, x[0]):
        ts = torch.from_numpy(inp).to_sparse_csr()
        fs = fiamma.from_numpy(inp).to_sparse_csr()
        t = torch.sparse.sampled_addmm(ts, torch.from_numpy(a), torch.from_numpy(b), beta=0.3,
                                       alpha=1.5)
        f = fiamma.sparse.sampled_addmm(fs, fiamma.from_numpy(a), fiamma.from_numpy(b),
                                        beta=0.3, alpha=1.5)
        assert tuple(f.shape) == tuple(t.shape)
        np.testing.assert_array_equal(f.crow_indices().numpy(), t.crow_indices().numpy())
        np.testing.assert_array_equal(f.col_indices().numpy(), t.col_indices().numpy())
        np.testing.assert_allclose(f.values().numpy(), t.values().numpy(), rtol=1e-5,
                                   atol=1e-6)
    d = rng.standard_normal((4, 2)).astype(np.float32)
    to, fo = torch.empty(3, 2), fiamma.empty(3, 2)
    torch.mm(torch.from_numpy(x[0]).to_sparse_csr(), torch.from_numpy(d), out=to)
    fiamma.mm(fiamma.from_numpy(x[0]).to_sparse_csr(), fiamma.from_numpy(d), out=fo)
    np.testing.assert_allclose(fo.numpy(), to.numpy(), rtol=1e-5, atol=1e-6)


def test_constructor_grad_fn_is_shown_as_pytorch():
    pytest.importorskip("fiamma.autograd")
    v = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = fiamma.sparse_csr_tensor([0, 1, 3], [0, 0, 1], v, (2, 2))
    g = s.grad_fn
    assert g.name() == "SparseCompressedTensorBackward0" and not s.is_leaf
    assert "grad_fn=<SparseCompressedTensorBackward0>" in repr(s)
    (acc, nr), = g.next_functions
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is v and nr == 0
    w = v * 2
    s2 = fiamma.sparse_bsr_tensor([0, 1, 3], [0, 0, 1], w.reshape(3, 1, 1), (2, 2))
    assert s2.grad_fn.name() == "SparseCompressedTensorBackward0"
    assert s2.grad_fn.next_functions[0][0].name() == "ViewBackward0"
    # gradients still reach the values
    (s @ fiamma.ones(2, 1)).sum().backward()
    assert v.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="requires_grad_: you can only change"):
        s.requires_grad_(False)
    # a leaf built with requires_grad=True, a detached one and the values' own: no node
    assert fiamma.sparse_csr_tensor([0, 1], [0], [1.0], (1, 1), requires_grad=True).grad_fn \
        is None
    assert s.detach().grad_fn is None
    s.detach_()
    assert s.grad_fn is None and not s.requires_grad


@pytest.mark.parity
def test_parity_constructor_grad_fn():
    torch = pytest.importorskip("torch")
    pytest.importorskip("fiamma.autograd")
    import warnings

    warnings.simplefilter("ignore")
    for lib in (torch, fiamma):
        v = lib.tensor([1.0, 2.0], requires_grad=True)
        s = lib.sparse_csc_tensor(lib.tensor([0, 1, 2]), lib.tensor([1, 0]), v * 3, (2, 2))
        assert s.grad_fn.name() == "SparseCompressedTensorBackward0"
        assert s.grad_fn.next_functions[0][0].name() == "MulBackward0"
        assert repr(s).endswith("grad_fn=<SparseCompressedTensorBackward0>)")
