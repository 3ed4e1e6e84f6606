"""cat/stack and friends, and the splits, against NumPy: strided inputs, mixed dtypes, empty
tensors, negative dims; the splits must be views."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma as F

ALL = [F.bool, F.uint8, F.int8, F.int16, F.int32, F.int64, F.float16, F.bfloat16, F.float32,
       F.float64]


def ft(a, dt):
    a = np.asarray(a)
    if dt is F.bfloat16:
        return F.from_numpy(np.array(a, dtype=np.float32, order="C")).to(F.bfloat16)
    return F.from_numpy(np.array(a, dtype=dt._np, order="C"))


def to_np(t):
    return (t.float() if t.dtype is F.bfloat16 else t).numpy()


def np_of(dt):
    return np.float32 if dt is F.bfloat16 else dt._np


def rand(shape, rng):
    # small integers: exact in every dtype, so casts compare exactly
    return rng.integers(0, 5, shape)


def make(a, dt, layout):
    """'c' contiguous, 't' reversed dims in memory, 's' stepped by 2 along the last dim."""
    a = np.asarray(a)
    if layout == "t" and a.ndim >= 2:
        return ft(a.transpose(), dt).permute(*range(a.ndim - 1, -1, -1))
    if layout == "s" and a.ndim >= 1:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), dtype=a.dtype)
        big[..., :-1:2] = a
        t = ft(big, dt)
        return t.as_strided(a.shape, t.stride()[:-1] + (2,))
    return ft(a, dt)


def same(t, want, dt):
    assert t.dtype is dt, (t.dtype, dt)
    g = to_np(t)
    assert g.shape == want.shape, (g.shape, want.shape)
    np.testing.assert_array_equal(g, want.astype(np_of(dt)))


# ---- cat -------------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.data())
def test_cat_random(data):
    nd = data.draw(st.integers(1, 4))
    base = data.draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    d = data.draw(st.integers(-nd, nd - 1))
    count = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    arrays, tensors, dts = [], [], []
    for _ in range(count):
        shape = list(base)
        shape[d] = data.draw(st.integers(0, 3))
        a = rand(shape, rng)
        dt = data.draw(st.sampled_from(ALL))
        if dt is F.bool:
            a = a > 2
        arrays.append(a)
        dts.append(dt)
        tensors.append(make(a, dt, data.draw(st.sampled_from("cts"))))
    want_dt = dts[0]
    for dt in dts[1:]:
        want_dt = F.promote_types(want_dt, dt)
    same(F.cat(tensors, d), np.concatenate(arrays, d), want_dt)
    same(F.cat(tuple(tensors), dim=d), np.concatenate(arrays, d), want_dt)


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_cat_each_dtype_noncontiguous(dt):
    rng = np.random.default_rng(1)
    a, b, c = rand((3, 4), rng), rand((3, 2), rng), rand((3, 5), rng)
    got = F.cat([make(a, dt, "t"), make(b, dt, "s"), make(c, dt, "c")], dim=-1)
    same(got, np.concatenate([a, b, c], 1).astype(np_of(dt)), dt)
    assert got.is_contiguous()
    for f in (F.concat, F.concatenate):
        same(f([make(a, dt, "s"), make(a, dt, "t")], 0), np.concatenate([a, a], 0), dt)
    same(F.concatenate([ft(a, dt), ft(c, dt)], axis=1), np.concatenate([a, c], 1), dt)


def test_cat_promotion():
    r = F.cat([ft([1, 2], F.uint8), ft([3], F.int8)])
    assert r.dtype is F.int16
    r = F.cat([ft([1, 2], F.int64), ft([0.5], F.float16)])
    assert r.dtype is F.float16
    np.testing.assert_array_equal(r.numpy(), [1, 2, 0.5])
    r = F.cat([ft([True], F.bool), ft([3], F.int32)])
    assert r.dtype is F.int32
    r = F.cat([ft([1.0], F.float16), ft([2.0], F.bfloat16)])
    assert r.dtype is F.float32


def test_cat_empty_and_legacy_skip():
    a = ft(np.ones((2, 3)), F.float32)
    # legacy 1-D empty tensors are skipped whatever the others' shape; their dtype still counts
    r = F.cat([F.empty(0, dtype=F.float64), a], dim=1)
    assert r.shape == (2, 3) and r.dtype is F.float64
    r = F.cat([a, F.empty(0), a, F.empty(0)])
    assert r.shape == (4, 3)
    assert F.cat([F.empty(0), F.empty(0)]).shape == (0,)
    # 0-size along the cat dim and elsewhere
    r = F.cat([F.empty(2, 0), a, F.empty(2, 0)], dim=1)
    same(r, np.ones((2, 3)), F.float32)
    r = F.cat([F.empty(0, 3), F.empty(0, 3)])
    assert r.shape == (0, 3)
    assert F.cat([F.empty(3, 0), F.empty(2, 0)]).shape == (5, 0)


def test_cat_out():
    a, b = ft(np.ones((2, 2)), F.float32), ft(np.zeros((1, 2)), F.float32)
    out = F.empty(3, 2, dtype=F.float64)
    r = F.cat([a, b], out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [1, 1], [0, 0]])
    out = F.empty(0)
    F.cat([a, b], out=out)
    assert out.shape == (3, 2)
    outT = F.empty(2, 3).transpose(0, 1)  # a strided out gets the values in its layout
    F.cat([a, b], out=outT)
    np.testing.assert_array_equal(outT.numpy(), [[1, 1], [1, 1], [0, 0]])
    with pytest.raises(RuntimeError, match="cat"):
        F.cat([a, b], out=F.empty(3, 2, dtype=F.int64))  # float into int: not allowed
    o = F.empty(4, 2)
    with pytest.warns(UserWarning, match="cat: an output .* was resized"):  # as PyTorch
        F.cat([a, b], out=o)
    assert o.shape == (3, 2)
    # out aliasing an input: computed aside first
    x = ft(np.arange(6.0).reshape(3, 2), F.float32)
    top = x.narrow(0, 0, 1)
    F.cat([top, top, top], out=x)
    np.testing.assert_array_equal(x.numpy(), [[0, 1], [0, 1], [0, 1]])


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.cat([]), RuntimeError, "cat: expected a non-empty list"),
    (lambda: F.cat([F.ones(2, 3), F.ones(2, 4)]), RuntimeError,
     "cat: Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 "
     "for tensor number 1"),
    (lambda: F.cat([F.ones(2, 3), F.ones(2, 3, 1)]), RuntimeError,
     "cat: Tensors must have same number of dimensions: got 2 and 3"),
    (lambda: F.cat([F.ones(()), F.ones(2)]), RuntimeError,
     r"cat: zero-dimensional tensor \(at position 0\)"),
    (lambda: F.cat(F.ones(2, 3)), TypeError, "cat: argument 'tensors' must be a sequence"),
    (lambda: F.cat([F.ones(2), 3]), TypeError, "element 1 is int"),
    (lambda: F.cat([F.ones(2, 3)], dim=2), IndexError, r"cat: Dimension out of range"),
    (lambda: F.stack([F.ones(2, 3), F.ones(2, 4)]), RuntimeError,
     r"stack: expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[2, 4\] "
     "at entry 1"),
    (lambda: F.stack([]), RuntimeError, "stack: expects a non-empty"),
    (lambda: F.stack([F.ones(2)], dim=2), IndexError, "stack"),
])
def test_join_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---- stack family ----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [F.float32, F.int64, F.bfloat16, F.bool], ids=str)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 0, 3), (1, 2, 3)], ids=str)
def test_stack_family_vs_numpy(shape, dt):
    rng = np.random.default_rng(2)
    arrs = [rand(shape, rng) for _ in range(3)]
    if dt is F.bool:
        arrs = [a > 2 for a in arrs]
    ts = [make(a, dt, lay) for a, lay in zip(arrs, "cts")]
    for d in range(-len(shape) - 1, len(shape) + 1):
        same(F.stack(ts, d), np.stack(arrs, d), dt)
    same(F.stack(ts), np.stack(arrs), dt)
    same(F.hstack(ts), np.hstack(arrs), dt)
    same(F.vstack(ts), np.vstack(arrs), dt)
    same(F.row_stack(ts), np.vstack(arrs), dt)
    same(F.dstack(ts), np.dstack(arrs), dt)
    if len(shape) <= 2:
        same(F.column_stack(ts), np.column_stack(arrs), dt)


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 0, 3), (3, 1, 2)], ids=str)
def test_stack_contiguous_vs_numpy(shape, dt):
    """All parts contiguous and of one dtype (the DataLoader's batches): the one-call path,
    including parts that are views at an offset into a bigger storage."""
    rng = np.random.default_rng(3)
    arrs = [rand(shape, rng) for _ in range(5)]
    if dt is F.bool:
        arrs = [a > 2 for a in arrs]
    big = ft(np.stack(arrs), dt)
    for ts in ([ft(a, dt) for a in arrs], [big[i] for i in range(5)]):
        for d in range(-len(shape) - 1, len(shape) + 1):
            r = F.stack(ts, d)
            assert r.dtype is dt and r.is_contiguous()
            same(r, np.stack(arrs, d), dt)


def test_stack_records_grad_and_keeps_inputs_apart():
    pytest.importorskip("fiamma.autograd")
    a = F.ones(3, requires_grad=True)
    b = F.zeros(3)
    r = F.stack([a, b], 1)
    assert r.requires_grad
    r.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 1.0])
    c = F.zeros(2, 2)
    s = F.stack([c, c])
    s[0, 0, 0] = 5.0
    assert c[0, 0].item() == 0.0


def test_stack_mixed_dtypes_and_out():
    r = F.stack([ft([1, 2], F.int8), ft([1.5, 2.5], F.float64)])
    assert r.dtype is F.float64
    np.testing.assert_array_equal(r.numpy(), [[1, 2], [1.5, 2.5]])
    out = F.empty(2, 2, dtype=F.float64)
    assert F.stack([ft([1, 2], F.int8), ft([3, 4], F.int8)], dim=1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [[1, 3], [2, 4]])
    r = F.column_stack([ft([1, 2], F.int32), ft([[3, 4], [5, 6]], F.int32)])
    np.testing.assert_array_equal(r.numpy(), [[1, 3, 4], [2, 5, 6]])


# ---- splits ------------------------------------------------------------------------------------

def check_views(x, pieces, d):
    """Each piece is a view of x starting where the previous one ended along d."""
    off = 0
    isz = x.element_size()
    for p in pieces:
        assert p.untyped_storage() is x.untyped_storage()
        assert p.data_ptr() == x.data_ptr() + off * x.stride(d) * isz
        assert p.stride() == x.stride()
        off += p.shape[d]
    assert off == x.shape[d]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_split_chunk_tensor_split_random(data):
    nd = data.draw(st.integers(1, 3))
    shape = data.draw(st.lists(st.integers(0, 7), min_size=nd, max_size=nd))
    d = data.draw(st.integers(-nd, nd - 1))
    a = np.arange(int(np.prod(shape))).reshape(shape)
    x = make(a, F.int64, data.draw(st.sampled_from("cts")))
    n = shape[d]
    # split by size
    s = data.draw(st.integers(1, 8))
    pieces = F.split(x, s, d)
    want = np.split(a, list(range(s, n, s)), axis=d) if n else [a]
    assert len(pieces) == len(want)
    for p, w in zip(pieces, want):
        same(p, w, F.int64)
    check_views(x, pieces, d)
    # split by sizes
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sizes = np.diff([0] + cuts + [n]).tolist()
    pieces = x.split(sizes, dim=d)
    for p, w in zip(pieces, np.split(a, cuts, axis=d)):
        same(p, w, F.int64)
    check_views(x, pieces, d)
    # chunk
    c = data.draw(st.integers(1, 9))
    pieces = x.chunk(c, d)
    size = -(-n // c) if n else 0
    if n:
        assert [p.shape[d] for p in pieces] == [min(size, n - i) for i in range(0, n, size)]
    else:
        assert len(pieces) == c
    check_views(x, pieces, d)
    # tensor_split: sections, indices (also out of order and out of range, like array_split)
    sec = data.draw(st.integers(1, 9))
    pieces = F.tensor_split(x, sec, d)
    want = np.array_split(a, sec, axis=d)
    assert len(pieces) == sec
    for p, w in zip(pieces, want):
        same(p, w, F.int64)
    check_views(x, pieces, d)
    idx = data.draw(st.lists(st.integers(-9, 9), max_size=4))
    pieces = x.tensor_split(idx, d)
    want = np.array_split(a, idx, axis=d)
    assert len(pieces) == len(want)
    for p, w in zip(pieces, want):
        same(p, w, F.int64)


def test_split_results_are_views_writes_show_through():
    x = ft(np.zeros((4, 6)), F.float32)
    a, b = x.split(3, dim=1)
    b.copy_(F.ones(4, 3))
    np.testing.assert_array_equal(x.numpy()[:, 3:], np.ones((4, 3)))
    np.testing.assert_array_equal(x.numpy()[:, :3], np.zeros((4, 3)))
    c = x.chunk(2)[1]
    c.copy_(F.full((2, 6), 7.0))
    assert (x.numpy()[2:] == 7).all()
    t = x.tensor_split([1], dim=0)[0]
    assert t.data_ptr() == x.data_ptr()
    h = F.hsplit(x, 2)[1]
    assert h.data_ptr() == x.data_ptr() + 3 * 4


def test_tensor_split_tensor_arg_and_dir_splits():
    x = ft(np.arange(10), F.int64)
    assert [p.numel() for p in F.tensor_split(x, ft(np.array(3), F.int64))] == [4, 3, 3]
    assert [p.numel() for p in F.tensor_split(x, ft([1, 4], F.int64))] == [1, 3, 6]
    m = ft(np.arange(24).reshape(2, 4, 3), F.int64)
    for p, w in zip(F.hsplit(m, 2), np.hsplit(np.arange(24).reshape(2, 4, 3), 2)):
        same(p, w, F.int64)
    for p, w in zip(F.vsplit(m, [1]), np.vsplit(np.arange(24).reshape(2, 4, 3), [1])):
        same(p, w, F.int64)
    for p, w in zip(m.dsplit(3), np.dsplit(np.arange(24).reshape(2, 4, 3), 3)):
        same(p, w, F.int64)
    for p, w in zip(x.hsplit([2, 3]), np.hsplit(np.arange(10), [2, 3])):
        same(p, w, F.int64)
    assert len(m.vsplit(2)) == 2 and len(m.hsplit([1])) == 2


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.chunk(F.ones(3), 0), RuntimeError, "chunk: expects `chunks` to be greater than 0"),
    (lambda: F.split(F.ones(3), 0), RuntimeError, "split: split_size can only be 0 if dimension"),
    (lambda: F.split(F.ones(3), -1), RuntimeError, "split: expects split_size be non-negative"),
    (lambda: F.split(F.ones(10), [2, 2]), RuntimeError,
     r"split_with_sizes: expects split_sizes to sum exactly to 10"),
    (lambda: F.split(F.ones(10), [5, -1, 6]), RuntimeError, "non-negative entries"),
    (lambda: F.split(F.ones(3), 1, dim=1), IndexError, "split: Dimension out of range"),
    (lambda: F.tensor_split(F.ones(3), 0), RuntimeError, "number of sections must be larger"),
    (lambda: F.tensor_split(F.ones(3), F.ones(2)), RuntimeError, "dtype of long"),
    (lambda: F.tensor_split(F.ones(3), F.ones(1, 2, dtype=F.int64)), RuntimeError,
     "zero-dimensional or one-dimensional"),
    (lambda: F.hsplit(F.ones(2, 6), 4), RuntimeError,
     "hsplit: attempted to split along dimension 1, but the size of the dimension 6 is not "
     "divisible by the split_size 4"),
    (lambda: F.hsplit(F.ones(()), 2), RuntimeError, "hsplit: requires a tensor with at least 1"),
    (lambda: F.vsplit(F.ones(6), 2), RuntimeError, "vsplit: requires a tensor with at least 2"),
    (lambda: F.dsplit(F.ones(2, 2), 2), RuntimeError, "dsplit: requires a tensor with at least 3"),
])
def test_split_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_split_of_empty():
    assert len(F.split(F.empty(0), 2)) == 1
    assert len(F.split(F.empty(0), 0)) == 1
    assert [p.shape for p in F.chunk(F.empty(0, 2), 3)] == [(0, 2)] * 3
    assert [p.shape for p in F.tensor_split(F.empty(2, 0), 3, dim=1)] == [(2, 0)] * 3


def test_cat_one_pass_path_against_numpy():
    # same-dtype contiguous parts (the one-pass path) and the cases it hands to the general
    # path (mixed dtypes, strided parts, a legacy (0,) part, bad ranks and sizes, 0-d)
    rng = np.random.default_rng(4)
    for _ in range(60):
        nd = int(rng.integers(1, 4))
        base = [int(v) for v in rng.integers(0, 4, nd)]
        d = int(rng.integers(-nd, nd))
        arrs = []
        for _ in range(int(rng.integers(1, 4))):
            s = list(base)
            s[d] = int(rng.integers(0, 4))
            arrs.append(rng.standard_normal(s).astype(np.float32))
        ts = [F.from_numpy(a) for a in arrs]
        for seq in (ts, tuple(ts)):
            got = F.cat(seq, d)
            np.testing.assert_array_equal(got.numpy(), np.concatenate(arrs, d))
            assert got.is_contiguous() and got.dtype == F.float32
    a = F.ones(2, 3)
    assert F.cat([a, a.double()]).dtype == F.float64
    np.testing.assert_array_equal(F.cat([a.t(), a.t()], 1).numpy(), np.ones((3, 4)))
    assert F.cat([F.zeros(0), a]).shape == (2, 3)
    with pytest.raises(RuntimeError, match="cat: Sizes of tensors must match"):
        F.cat([a, F.ones(2, 4)])
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.cat([a, F.ones(3)])
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        F.cat([F.tensor(1.0), F.tensor(2.0)])
    with pytest.raises(IndexError):
        F.cat([a, a], 2)
    with pytest.raises(TypeError):
        F.cat([a, 1.0])


def test_cat_of_only_skipped_empty_inputs_keeps_the_graph():
    # every input is a legacy (0,) tensor (skipped by the copy): the result still depends on
    # them, as in PyTorch, so it requires grad and backward reaches them
    pytest.importorskip("fiamma.autograd")
    x = F.from_numpy(np.zeros(0)).requires_grad_(True)  # not the C fast path
    y = F.cat([x, x])
    assert y.requires_grad and tuple(y.shape) == (0,)
    g, = F.autograd.grad(y.sum(), x)
    assert tuple(g.shape) == (0,)
