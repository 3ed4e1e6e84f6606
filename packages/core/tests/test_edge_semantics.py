"""Edge cases found by a differential fuzz against PyTorch (2026-11-29): non-finite matrices
in the SVD-based linear algebra (NumPy's LAPACK loops forever on +-inf), in-place ops on
empty tensors, contiguity of empty tensors, cov of one variable, repeat_interleave's dtype."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fiamma
from fiamma import linalg as L

M = [[1.0, -0.66, -0.37], [1.19, 1.72, 1.47], [-1.79, -2.03, 0.048]]


def _bad(v):
    a = fiamma.tensor(M)
    a[0, 0] = v
    return a


def test_svd_of_an_infinite_matrix_returns_in_a_subprocess():
    # the regression this guards is a hang: run it where a timeout can end it
    code = textwrap.dedent("""
        import fiamma
        a = fiamma.tensor(%r); a[0, 0] = float("inf")
        for f in (fiamma.linalg.svd, fiamma.linalg.pinv, fiamma.svd, fiamma.pinverse):
            try:
                f(a)
            except fiamma.linalg.LinAlgError as e:
                assert "non-finite" in str(e), e
            else:
                raise SystemExit("no error from " + f.__name__)
        try:
            fiamma.linalg.lstsq(a, a[:, :1].clone())
        except fiamma.linalg.LinAlgError:
            pass
        else:
            raise SystemExit("no error from lstsq")
        print("done")
    """ % (M,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "done"


@pytest.mark.parametrize("v", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("fn", [L.svd, L.pinv, fiamma.svd, lambda a: L.svd(a, full_matrices=False)])
def test_svd_family_raises_on_non_finite(fn, v):
    with pytest.raises(L.LinAlgError, match="non-finite values"):
        fn(_bad(v))


@pytest.mark.parametrize("v", [float("inf"), -float("inf")])
def test_singular_values_of_infinite_matrices_are_nan(v):
    a = _bad(v)
    assert np.isnan(L.svdvals(a).numpy()).all()
    assert np.isnan(L.matrix_norm(a, 2).item()) and np.isnan(L.matrix_norm(a, "nuc").item())
    assert np.isnan(L.cond(a).item())
    assert L.matrix_rank(a).item() == 0
    # batched: only the element holding the infinity is NaN
    b = fiamma.stack([fiamma.tensor(M), a])
    s = L.svdvals(b).numpy()
    np.testing.assert_allclose(s[0], np.linalg.svd(np.array(M, np.float32), compute_uv=False),
                               rtol=1e-5)
    assert np.isnan(s[1]).all()


def test_singular_values_of_nan_matrices_raise():
    for fn in (L.svdvals, lambda a: L.matrix_norm(a, 2), L.cond, L.matrix_rank):
        with pytest.raises(L.LinAlgError, match="non-finite values"):
            fn(_bad(float("nan")))


def test_lstsq_raises_on_non_finite_right_hand_side():
    a = fiamma.tensor(M)
    b = fiamma.tensor([[1.0], [float("inf")], [0.0]])
    with pytest.raises(L.LinAlgError, match="lstsq"):
        L.lstsq(a, b)


@pytest.mark.parametrize("op", ["exp_", "relu_", "abs_", "sqrt_", "zero_", "neg_"])
def test_inplace_on_empty_tensors(op):
    # NumPy gives zero-size arrays zero strides: an empty tensor writes nothing, so no overlap
    for t in (fiamma.from_numpy(np.zeros((0, 3), np.float32)), fiamma.zeros(0, 3).t(),
              fiamma.zeros(2, 0, 4)):
        assert getattr(t, op)() is t
    t = fiamma.from_numpy(np.zeros((0, 3), np.float32))
    t.mul_(fiamma.ones(3))
    t.add_(fiamma.ones(1, 3))
    t.index_fill_(0, fiamma.tensor([], dtype=fiamma.int64), 1.0)
    assert t.shape == (0, 3)


def test_expanded_tensors_still_refuse_in_place_writes():
    t = fiamma.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        t.exp_()


def test_empty_tensors_are_contiguous_whatever_their_strides():
    t = fiamma.zeros(0, 3).t()
    assert t.stride() == (1, 3) and t.is_contiguous()
    assert t.is_contiguous(memory_format=fiamma.contiguous_format)
    assert fiamma.from_numpy(np.zeros((0, 3))).is_contiguous()
    assert not fiamma.zeros(2, 3).t().is_contiguous()


def test_cov_of_one_variable_is_a_scalar():
    x = fiamma.tensor([[1.0, 2.0, 4.0]])
    c = fiamma.cov(x)
    assert c.shape == ()
    assert c.item() == pytest.approx(np.cov([1.0, 2.0, 4.0]))
    assert fiamma.cov(fiamma.tensor([1.0, 2.0, 4.0])).shape == ()
    assert fiamma.cov(fiamma.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 1.0]])).shape == (2, 2)
    assert fiamma.corrcoef(x).item() == 1.0


@pytest.mark.parametrize("dt", [fiamma.int32, fiamma.int64, fiamma.int16, fiamma.uint8])
def test_repeat_interleave_of_counts_keeps_their_dtype(dt):
    r = fiamma.repeat_interleave(fiamma.tensor([1, 2, 0, 3], dtype=dt))
    assert r.dtype == dt
    assert r.tolist() == [0, 1, 1, 3, 3, 3]


def test_nan_to_num_takes_none_for_nan():
    x = fiamma.tensor([float("nan"), float("inf"), -float("inf"), 1.5])
    for r in (fiamma.nan_to_num(x, None), x.nan_to_num(None, 2.0), x.clone().nan_to_num_(None)):
        assert r[0].item() == 0.0 and r[3].item() == 1.5
    assert x.nan_to_num(None, 2.0)[1].item() == 2.0


def test_rsub_takes_alpha_positionally():
    x = fiamma.tensor([1.0, 2.0])
    assert fiamma.rsub(x, 4.0, 3).tolist() == [1.0, -2.0]
    assert fiamma.rsub(x, fiamma.tensor([4.0, 4.0]), alpha=2).tolist() == [2.0, 0.0]


def test_empty_index_tensors_with_zero_strides_read_nothing():
    # triu_indices(0, 0) gives rows of a (2, 0) tensor: empty, stride (0,), over no memory;
    # the index kernels' checking pass used to read an index from there (a garbage "index
    # ... out of bounds" error, or a read past the allocation)
    ii, jj = fiamma.triu_indices(0, 0, 1)
    assert ii.shape == (0,) and ii.stride() == (0,)
    x = fiamma.arange(12.0).reshape(4, 3)
    assert x[ii].shape == (0, 3)
    assert x[ii, jj].shape == (0,)
    assert fiamma.zeros(0, 3)[ii].shape == (0, 3)
    y = x.clone()
    y[ii] = 5.0
    y[ii] = fiamma.ones(0, 3)
    y.index_put_((ii,), fiamma.tensor(1.0), accumulate=True)
    assert fiamma.equal(y, x)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        y[ii] = fiamma.ones(2, 3)
    assert fiamma.pdist(fiamma.zeros(0, 3)).shape == (0,)
    assert fiamma.pdist(fiamma.zeros(0, 0)).shape == (0,)


def test_cosine_similarity_broadcasts_and_promotes():
    a = np.array([[0.3, -1.0, 2.0]], np.float32)
    b = np.array([1.0, 0.5, -0.25], np.float32)
    r = fiamma.cosine_similarity(fiamma.from_numpy(a), fiamma.from_numpy(b), dim=-1)
    ref = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b))
    np.testing.assert_allclose(r.numpy(), ref, rtol=1e-6)
    r = fiamma.cosine_similarity(fiamma.tensor([[1, 0], [0, 2]]), fiamma.tensor([1.0, 1.0]))
    assert r.dtype == fiamma.float32
    # default dim=1 over the broadcast (2, 2): rows [1, 0]·[1, 1] and [0, 2]·[1, 1]
    np.testing.assert_allclose(r.numpy(), [2 ** -0.5, 2 ** -0.5], rtol=1e-6)


@pytest.mark.parametrize("name, size, shape", [
    ("adaptive_avg_pool2d", (0, 2), (1, 2, 0, 2)), ("adaptive_max_pool2d", (2, 0), (1, 2, 2, 0)),
    ("adaptive_avg_pool1d", 0, (1, 2, 0)), ("adaptive_max_pool1d", 0, (1, 2, 0)),
    ("adaptive_avg_pool3d", (0, 1, 1), (2, 0, 1, 1)),
    ("adaptive_max_pool3d", (1, 0, 1), (2, 1, 0, 1))])
def test_adaptive_pools_to_an_empty_size(name, size, shape):
    rank = len(size) if isinstance(size, tuple) else 1
    lead = shape[:len(shape) - rank]
    x = fiamma.randn(*lead, *([3] * rank))
    r = getattr(fiamma, name)(x, size, **({"return_indices": False} if "max" in name else {}))
    assert r.shape == shape and r.dtype == x.dtype
    if "max" in name:
        v, i = getattr(fiamma, name)(x, size, return_indices=True)
        assert v.shape == i.shape == shape and i.dtype == fiamma.int64
    with pytest.raises(RuntimeError, match="must not be negative"):
        getattr(fiamma, name)(x, -1 if rank == 1 else (-1,) + (1,) * (rank - 1))


def test_torch_adaptive_max_pool1d_returns_values_and_indices():
    x = fiamma.tensor([[[1.0, 5.0, 2.0, 7.0]]])
    v, i = fiamma.adaptive_max_pool1d(x, 2)  # torch.adaptive_max_pool1d: a pair
    assert v.tolist() == [[[5.0, 7.0]]] and i.tolist() == [[[1, 3]]]
    assert fiamma.adaptive_max_pool1d(x, 2, return_indices=False).tolist() == [[[5.0, 7.0]]]


def test_add_and_sub_with_two_numbers_multiply_them():
    x = fiamma.arange(4.0)
    with pytest.warns(UserWarning, match="deprecated"):
        assert fiamma.add(x, 1, -2).tolist() == [-2.0, -1.0, 0.0, 1.0]
    with pytest.warns(UserWarning, match="deprecated"):
        assert x.sub(1, 2).tolist() == [-2.0, -1.0, 0.0, 1.0]
    with pytest.warns(UserWarning, match="deprecated"):
        assert x.clone().add_(2, 3).tolist() == [6.0, 7.0, 8.0, 9.0]
    with pytest.raises(TypeError, match="add"):
        x.add(1, "a")


def test_norm_with_p_none_and_split_methods_with_several_indices():
    x = fiamma.arange(12.0).reshape(3, 4)
    assert x.norm(None).item() == pytest.approx(float(np.linalg.norm(np.arange(12.0))))
    assert [t.shape[1] for t in x.hsplit(1, 3)] == [1, 2, 1]
    assert [t.shape[1] for t in x.hsplit([1, 3])] == [1, 2, 1]
    assert [t.shape[0] for t in x.vsplit(1, 2)] == [1, 1, 1]
    assert len(x.hsplit(2)) == 2
    with pytest.raises(TypeError, match="hsplit"):
        x.hsplit()


def test_histc_of_one_huge_value_counts_it():
    # min == max: the range widens by 1 each side, which rounding loses beyond 2**53
    for v, dt in ((1e308, fiamma.float64), (1e20, fiamma.float32), (2.0, fiamma.float32)):
        h = fiamma.histc(fiamma.tensor([v], dtype=dt))
        assert h.sum().item() == 1.0 and h.shape == (100,)


def test_cdata_names_the_tensor_object():
    a = fiamma.ones(2)
    assert isinstance(a._cdata, int) and a._cdata == a._cdata
    assert a.view(2)._cdata != a._cdata and a.detach()._cdata != a._cdata
    b = fiamma.ones(2)
    assert b._cdata != a._cdata
