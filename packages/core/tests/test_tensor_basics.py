"""The Tensor basics: views against NumPy's views of the same memory, copies and conversions,
Python protocols, pickling, creation functions, fiamma.tensor's dtype inference, and the CPU
allocator's statistics."""

import copy
import math
import operator
import pickle

import numpy as np
import pytest
from conftest import (
    ALL_DTYPES,
    LAYOUTS,
    NP_DTYPE,
    NUMPY_DTYPES,
    assert_close,
    dtype_id,
    make_pair,
    shapes,
    to_numpy,
    to_tensor,
)
from hypothesis import assume, given, settings, strategies as st

import fiamma

EXAMPLES = settings(max_examples=60, deadline=None)


# ---- NumPy views of the same memory as the reference -------------------------------------------

@st.composite
def layouts(draw, min_dims=0, max_dims=4, max_side=5):
    """(base, view): a NumPy view (transposed, stepped, offset) of a float64 ``base`` holding
    distinct values; ``fiamma.from_numpy(view)`` is the fiamma tensor with the same layout."""
    shape = draw(shapes(min_dims, max_dims, 0, max_side))
    nd = len(shape)
    perm = draw(st.permutations(range(nd)))
    steps = draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd))
    starts = draw(st.lists(st.integers(0, 1), min_size=nd, max_size=nd))
    pre = [0] * nd
    for i in range(nd):
        pre[perm[i]] = shape[i]
    big = [starts[d] + steps[d] * max(pre[d], 1) for d in range(nd)]
    base = np.arange(math.prod(big), dtype=np.float64).reshape(big)
    view = base[tuple(slice(starts[d], starts[d] + steps[d] * pre[d], steps[d])
                      for d in range(nd)) + (Ellipsis,)].transpose(perm)
    assert view.shape == tuple(shape)
    return base, view


def elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def ptr(x):
    return x.data_ptr() if isinstance(x, fiamma.Tensor) else x.__array_interface__["data"][0]


def assert_same_view(t, a, src):
    """``t`` (a fiamma view of ``src``) has the shape, values, and (where it matters) the
    address and element strides of the NumPy view ``a``."""
    assert t.shape == a.shape
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.untyped_storage() is src.untyped_storage(), "a view must share the storage"
    if a.size:
        assert ptr(t) == ptr(a)
        big = [i for i, n in enumerate(a.shape) if n > 1]
        assert [t.stride(i) for i in big] == [elem_strides(a)[i] for i in big]
        assert t.storage_offset() == (ptr(t) - src.untyped_storage().data_ptr()) // t.element_size()


def factor_shapes(n):
    """Strategy for shapes holding ``n`` elements (with 1s, and maybe one -1)."""
    primes = []
    m, p = n, 2
    while m > 1 and p * p <= m:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    if m > 1:
        primes.append(m)

    @st.composite
    def build(draw):
        if n == 0:
            dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
            assume(0 in dims)
            return tuple(dims)
        order = draw(st.permutations(primes))
        k = draw(st.integers(1, 4))
        groups = [1] * k
        for f in order:
            groups[draw(st.integers(0, k - 1))] *= f
        ones = draw(st.lists(st.integers(0, k), max_size=2))
        for pos in ones:
            groups.insert(pos, 1)
        if draw(st.booleans()):
            groups[draw(st.integers(0, len(groups) - 1))] = -1
        return tuple(groups)

    return build()


def np_reshape_view(a, shape):
    """NumPy's reshape of ``a`` when it can be a view, else None."""
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        return None


@EXAMPLES
@given(layout=layouts(), data=st.data())
def test_reshape_and_view_match_numpy(layout, data):
    _, a = layout
    t = fiamma.from_numpy(a)
    target = data.draw(factor_shapes(a.size))
    expected = np.reshape(a, target)
    r = t.reshape(target)
    assert r.shape == expected.shape
    np.testing.assert_array_equal(r.numpy(), expected)
    nv = np_reshape_view(a, target)
    if nv is not None:
        assert_same_view(r, nv, t)
        assert_same_view(t.view(target), nv, t)
    else:
        assert r.untyped_storage() is not t.untyped_storage()
        assert r.is_contiguous()
        with pytest.raises(RuntimeError, match="view"):
            t.view(target)


@EXAMPLES
@given(layout=layouts(), data=st.data())
def test_permute_transpose_and_friends_match_numpy(layout, data):
    _, a = layout
    t = fiamma.from_numpy(a)
    nd = a.ndim
    perm = data.draw(st.permutations(range(nd)))
    assert_same_view(t.permute(perm), np.transpose(a, perm), t)
    assert_same_view(t.permute(*perm), np.transpose(a, perm), t)
    if nd:
        d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
        assert_same_view(t.transpose(d0, d1), np.swapaxes(a, d0, d1), t)
        assert_same_view(t.swapaxes(d0, d1), np.swapaxes(a, d0, d1), t)
        assert_same_view(t.swapdims(d0, d1), np.swapaxes(a, d0, d1), t)
    assert_same_view(t.T, a.T, t)
    if nd <= 2:
        assert_same_view(t.t(), a.T, t)
    else:
        with pytest.raises(RuntimeError):
            t.t()
    if nd >= 2:
        assert_same_view(t.mT, np.swapaxes(a, -2, -1), t)
    else:
        with pytest.raises(RuntimeError):
            _ = t.mT


@EXAMPLES
@given(layout=layouts(), data=st.data())
def test_squeeze_unsqueeze_flatten_unflatten_match_numpy(layout, data):
    _, a = layout
    t = fiamma.from_numpy(a)
    nd = a.ndim
    assert_same_view(t.squeeze(), np.squeeze(a), t)
    if nd:
        d = data.draw(st.integers(-nd, nd - 1))
        expect = np.squeeze(a, axis=d) if a.shape[d] == 1 else a
        assert_same_view(t.squeeze(d), expect, t)
        ds = tuple(data.draw(st.sets(st.integers(0, nd - 1))))
        ones = tuple(x for x in ds if a.shape[x] == 1)
        assert_same_view(t.squeeze(ds), np.squeeze(a, axis=ones) if ones else a, t)
    u = data.draw(st.integers(-nd - 1, nd))
    assert_same_view(t.unsqueeze(u), np.expand_dims(a, u), t)
    # flatten(start, end) is a reshape
    if nd:
        s = data.draw(st.integers(0, nd - 1))
        e = data.draw(st.integers(s, nd - 1))
        shape = a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:]
        f = t.flatten(s, e)
        np.testing.assert_array_equal(f.numpy(), np.reshape(a, shape))
        nv = np_reshape_view(a, shape)
        if nv is not None:
            assert_same_view(f, nv, t)
        if s == e:
            assert f.shape == t.shape
        # unflatten undoes it
        back = f.unflatten(s, a.shape[s:e + 1])
        np.testing.assert_array_equal(back.numpy(), a)
    assert t.flatten().shape == (a.size,)
    np.testing.assert_array_equal(t.flatten().numpy(), a.reshape(-1))


def test_flatten_unflatten_edge_cases():
    s = fiamma.full((), 5.0)
    assert s.flatten().shape == (1,)
    x = fiamma.zeros(2, 3, 4)
    assert x.flatten(1, 1) is x or x.flatten(1, 1).shape == x.shape
    assert x.unflatten(1, (3, 1)).shape == (2, 3, 1, 4)
    assert x.unflatten(-1, (2, -1)).shape == (2, 3, 2, 2)
    with pytest.raises(RuntimeError):
        x.flatten(2, 1)
    with pytest.raises(RuntimeError):
        x.unflatten(1, (2, 2))
    with pytest.raises(IndexError):
        x.flatten(0, 3)


@EXAMPLES
@given(layout=layouts(), data=st.data())
def test_expand_narrow_select_unbind_match_numpy(layout, data):
    _, a = layout
    t = fiamma.from_numpy(a)
    nd = a.ndim
    # expand: size-1 dims to any size, plus new leading dims; -1 keeps a size
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    sizes = [data.draw(st.integers(0, 3)) if n == 1 else data.draw(st.sampled_from([n, -1]))
             for n in a.shape]
    target = tuple(lead) + tuple(sizes)
    np_target = tuple(lead) + tuple(n if s == -1 else s for s, n in zip(sizes, a.shape))
    e = t.expand(target)
    assert_same_view(e, np.broadcast_to(a, np_target), t)
    assert_same_view(t.expand(*target), np.broadcast_to(a, np_target), t)
    ref = fiamma.zeros(np_target)
    assert t.expand_as(ref).shape == np_target
    assert t.broadcast_to(np_target).shape == np_target
    if not nd:
        return
    d = data.draw(st.integers(-nd, nd - 1))
    n = a.shape[d]
    start = data.draw(st.integers(0, n))
    length = data.draw(st.integers(0, n - start))
    idx = [slice(None)] * nd
    idx[d] = slice(start, start + length)
    assert_same_view(t.narrow(d, start, length), a[tuple(idx)], t)
    if start:
        assert_same_view(t.narrow(d, start - n, length), a[tuple(idx)], t)
    if n:
        i = data.draw(st.integers(-n, n - 1))
        idx[d] = i
        assert_same_view(t.select(d, i), a[tuple(idx) + (Ellipsis,)], t)
        with pytest.raises(IndexError):
            t.select(d, n)
        with pytest.raises(IndexError):
            t.select(d, -n - 1)
    parts = t.unbind(d)
    assert len(parts) == n
    for k, p in enumerate(parts):
        idx[d] = k
        assert_same_view(p, a[tuple(idx) + (Ellipsis,)], t)
    with pytest.raises(RuntimeError):
        t.narrow(d, start, n - start + 1)


@EXAMPLES
@given(layout=layouts(min_dims=1), data=st.data())
def test_unfold_matches_sliding_window_view(layout, data):
    _, a = layout
    t = fiamma.from_numpy(a)
    nd = a.ndim
    d = data.draw(st.integers(0, nd - 1))
    size = data.draw(st.integers(0, a.shape[d]))
    step = data.draw(st.integers(1, 3))
    u = t.unfold(d, size, step)
    w = np.lib.stride_tricks.sliding_window_view(a, size, axis=d)
    idx = [slice(None)] * w.ndim
    idx[d] = slice(None, None, step)
    assert_same_view(u, w[tuple(idx)], t)
    with pytest.raises(RuntimeError):
        t.unfold(d, a.shape[d] + 1, 1)
    with pytest.raises(RuntimeError):
        t.unfold(d, size, 0)


def test_unfold_0d():
    s = fiamma.full((), 2.0)
    assert s.unfold(0, 1, 1).shape == (1,)
    assert s.unfold(0, 1, 1).tolist() == [2.0]


@EXAMPLES
@given(n=st.integers(1, 40), data=st.data())
def test_as_strided_matches_numpy(n, data):
    a = np.arange(n, dtype=np.int32)
    t = fiamma.from_numpy(a)
    nd = data.draw(st.integers(0, 3))
    size = tuple(data.draw(st.integers(0, 4)) for _ in range(nd))
    stride = tuple(data.draw(st.integers(0, 5)) for _ in range(nd))
    offset = data.draw(st.integers(0, n - 1))
    last = offset + sum((s - 1) * st_ for s, st_ in zip(size, stride)) if all(size) else offset
    if last >= n:
        with pytest.raises(RuntimeError, match="as_strided"):
            t.as_strided(size, stride, offset)
        return
    v = t.as_strided(size, stride, offset)
    expected = np.lib.stride_tricks.as_strided(a[offset:], size, [s * 4 for s in stride])
    assert v.storage_offset() == offset
    assert v.stride() == stride
    assert_same_view(v, expected, t)


def test_as_strided_errors_and_offset_default():
    t = fiamma.zeros(10)
    v = t.narrow(0, 3, 5)
    assert v.as_strided((2,), (1,)).storage_offset() == 3
    with pytest.raises(ValueError):
        t.as_strided((2, 2), (1,))
    with pytest.raises(ValueError):
        t.as_strided((2,), (-1,))
    with pytest.raises(RuntimeError):
        t.as_strided((11,), (1,), 0)


@pytest.mark.parametrize("src,dst", [(fiamma.float32, fiamma.int32), (fiamma.int32, fiamma.float32),
                                     (fiamma.float64, fiamma.int64), (fiamma.int16, fiamma.float16),
                                     (fiamma.uint8, fiamma.int8), (fiamma.uint8, fiamma.bool),
                                     (fiamma.int16, fiamma.bfloat16),
                                     (fiamma.bfloat16, fiamma.float16)])
def test_view_dtype_reinterprets_bits(src, dst, rng):
    t, _ = make_pair((3, 4), src, rng, "transposed")
    if dst is fiamma.bool:
        t = t.clone().fill_(1)  # only 0/1 bytes are valid bools
    v = t.view(dst)
    assert v.dtype is dst
    assert v.shape == t.shape and v.stride() == t.stride() and v.data_ptr() == t.data_ptr()
    assert v.untyped_storage() is t.untyped_storage()
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[src.itemsize]
    np.testing.assert_array_equal(t.view({1: fiamma.uint8, 2: fiamma.int16, 4: fiamma.int32,
                                          8: fiamma.int64}[src.itemsize]).numpy().view(bits),
                                  v.view({1: fiamma.uint8, 2: fiamma.int16, 4: fiamma.int32,
                                          8: fiamma.int64}[dst.itemsize]).numpy().view(bits))
    with pytest.raises(RuntimeError, match="view"):
        t.view(fiamma.int64 if src.itemsize != 8 else fiamma.int8)


@pytest.mark.parametrize("src,dst", [(fiamma.float32, fiamma.uint8), (fiamma.uint8, fiamma.float32),
                                     (fiamma.int16, fiamma.int64), (fiamma.float64, fiamma.int16),
                                     (fiamma.int32, fiamma.float64)])
def test_view_dtype_with_other_element_size_matches_numpy(src, dst, rng):
    """Different element sizes reinterpret the last (contiguous) dimension, like ndarray.view."""
    base = to_tensor(rng.integers(0, 100, size=(3, 16)).astype(src._np), src)
    for t in (base, base[1:], base[:, 8:], base[::2]):
        v = t.view(dst)
        ref = t.numpy().view(dst._np)
        assert v.shape == ref.shape and v.dtype is dst
        assert v.stride() == tuple(st // ref.itemsize for st in ref.strides)
        assert v.data_ptr() == t.data_ptr() and v.untyped_storage() is t.untyped_storage()
        np.testing.assert_array_equal(v.numpy(), ref)
    small, big = (src, dst) if src.itemsize < dst.itemsize else (dst, src)
    r = big.itemsize // small.itemsize
    t = fiamma.zeros(3, 4 * r + 1, dtype=small)
    with pytest.raises(RuntimeError, match="size\\(-1\\) must be divisible"):
        t.view(big)
    with pytest.raises(RuntimeError, match="storage_offset"):
        t.reshape(-1)[1:1 + 4 * r].view(big)
    with pytest.raises(RuntimeError, match="dim\\(\\) cannot be 0"):
        fiamma.zeros((), dtype=src).view(dst)
    with pytest.raises(RuntimeError, match="stride\\(-1\\) must be 1"):
        fiamma.zeros(4 * r, 4 * r, dtype=src).t().view(dst)


# ---- layout queries, contiguity, copies ----------------------------------------------------------

@EXAMPLES
@given(layout=layouts())
def test_contiguous_and_clone(layout):
    _, a = layout
    t = fiamma.from_numpy(a)
    if a.size:
        assert t.is_contiguous() == a.flags.c_contiguous
    c = t.contiguous()
    if t.is_contiguous():
        assert c is t
    else:
        assert c.untyped_storage() is not t.untyped_storage()
        assert c.is_contiguous()
        assert c.stride() == _c_strides(a.shape)
    np.testing.assert_array_equal(c.numpy(), a)
    k = t.clone()
    assert k.untyped_storage() is not t.untyped_storage()
    assert k.is_contiguous() and k.stride() == _c_strides(a.shape)
    np.testing.assert_array_equal(k.numpy(), a)
    k.fill_(-1)
    np.testing.assert_array_equal(t.numpy(), a)  # the clone is independent


def _c_strides(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def test_layout_queries():
    t = fiamma.zeros(2, 3, 4, dtype=fiamma.int16)
    assert t.stride() == (12, 4, 1) and t.stride(1) == 4 and t.stride(-1) == 1
    assert t.size() == (2, 3, 4) and t.size(-2) == 3 and t.shape == (2, 3, 4)
    assert isinstance(t.shape, fiamma.Size) and isinstance(t.size(), fiamma.Size)
    assert t.dim() == t.ndim == t.ndimension() == 3
    assert t.numel() == t.nelement() == 24
    assert t.element_size() == t.itemsize == 2 and t.nbytes == 48
    assert t.storage_offset() == 0
    v = t.select(0, 1).narrow(1, 1, 2)
    assert v.storage_offset() == 12 + 1
    assert v.data_ptr() == t.data_ptr() + 13 * 2
    assert t.is_floating_point() is False and t.is_signed() is True
    assert fiamma.zeros(1, dtype=fiamma.uint8).is_signed() is False
    assert fiamma.zeros(1).is_floating_point() is True
    assert t.device == fiamma.device("cpu") and t.is_cpu and not t.is_cuda
    assert t.layout is fiamma.strided and repr(t.layout) == "fiamma.strided"
    with pytest.raises(IndexError):
        t.size(3)
    with pytest.raises(IndexError):
        t.stride(-4)
    assert fiamma.Size([2, 3]).numel() == 6 and repr(fiamma.Size([2, 3])) == "fiamma.Size([2, 3])"
    assert isinstance(fiamma.Size([2, 3, 4])[1:], fiamma.Size)
    # arithmetic keeps the type (BoTorch calls .numel() on shape + shape sums)
    s = fiamma.Size([2, 3])
    for r, want in [(s + (4,), (2, 3, 4)), ((4,) + s, (4, 2, 3)), (s + s, (2, 3, 2, 3)),
                    (s * 2, (2, 3, 2, 3)), (2 * s, (2, 3, 2, 3)), (s * 0, ()),
                    (s + (fiamma.tensor(5),), (2, 3, 5)), (s[:1] + fiamma.Size([1]), (2, 1))]:
        assert type(r) is fiamma.Size and r == want
    assert (s + (4,)).numel() == 24
    with pytest.raises(TypeError, match=r"Size\(\) takes an iterable of 'int' \(item 2 is 'str'\)"):
        s + ("a",)
    with pytest.raises(TypeError, match=r"item 0 is 'float'"):
        (1.5,) + s
    with pytest.raises(TypeError):
        s + [1]
    with pytest.raises(TypeError):
        s * 2.0


def test_version_counter_shared_by_views():
    t = fiamma.zeros(4, 4)
    v = t.narrow(0, 1, 2).T
    w = t.view(16)
    v0 = t._version
    assert v._version == w._version == v0
    t.fill_(1.0)
    assert t._version == v._version == w._version == v0 + 1
    v.zero_()
    assert t._version == w._version == v0 + 2
    w.copy_(fiamma.ones(16))
    assert t._version == v._version == v0 + 3
    c = t.clone()
    assert c._version == 0
    c.fill_(2.0)
    assert t._version == v0 + 3


def test_fill_and_zero_on_views_write_through():
    a = np.zeros((4, 5))
    t = fiamma.from_numpy(a)
    t.T.narrow(0, 1, 2).fill_(7.0)
    expected = np.zeros((4, 5))
    expected[:, 1:3] = 7.0
    np.testing.assert_array_equal(a, expected)
    t.select(1, 2).zero_()
    expected[:, 2] = 0.0
    np.testing.assert_array_equal(a, expected)
    assert t.fill_(fiamma.full((), 3.0)) is t
    assert (a == 3.0).all()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_broadcasts_and_casts(layout, rng):
    dst, _ = make_pair((3, 4), fiamma.float64, rng, layout)
    src = to_tensor(np.arange(4, dtype=np.int32), fiamma.int32)
    assert dst.copy_(src) is dst
    np.testing.assert_array_equal(dst.numpy(), np.broadcast_to(np.arange(4.0), (3, 4)))
    dst.copy_(to_tensor(np.array([[1.5], [2.5], [3.5]]), fiamma.float32))
    np.testing.assert_array_equal(dst.numpy(), np.repeat([[1.5], [2.5], [3.5]], 4, 1))
    dst.copy_(fiamma.full((), 9))
    assert (dst.numpy() == 9).all()
    dst.copy_([[0, 1, 2, 3]] * 3)  # Python data
    np.testing.assert_array_equal(dst.numpy(), np.broadcast_to(np.arange(4.0), (3, 4)))
    dst.copy_(np.full((3, 4), 2.0))  # NumPy data
    assert (dst.numpy() == 2.0).all()
    with pytest.raises(RuntimeError):
        dst.copy_(fiamma.zeros(4, 3))
    with pytest.raises(RuntimeError):
        dst.copy_(fiamma.zeros(2, 3, 4))


OVERLAPS = {
    # name: (dst, src) as views of one 12-element tensor
    "shift right": lambda t: (t.narrow(0, 1, 11), t.narrow(0, 0, 11)),
    "shift left": lambda t: (t.narrow(0, 0, 11), t.narrow(0, 1, 11)),
    "shift right strided": lambda t: (t.as_strided((5,), (2,), 2), t.as_strided((5,), (2,), 0)),
    "transpose in place": lambda t: (t.as_strided((3, 3), (4, 1), 0),
                                     t.as_strided((3, 3), (1, 4), 0)),
}


@pytest.mark.parametrize("name", list(OVERLAPS))
def test_copy_between_overlapping_views_is_never_silently_wrong(name):
    """PyTorch raises for a copy_ between partially overlapping views; fiamma must either raise
    or give the answer of copying from a snapshot of the source."""
    t = to_tensor(np.arange(12.0), fiamma.float64)
    dst, src = OVERLAPS[name](t)
    expected_dst = src.clone().numpy()
    snapshot = t.clone().numpy()
    try:
        dst.copy_(src)
    except RuntimeError:
        np.testing.assert_array_equal(t.numpy(), snapshot)  # nothing half-done
        return
    np.testing.assert_array_equal(dst.numpy(), expected_dst)


def test_copy_into_itself_is_a_no_op():
    t = to_tensor(np.arange(6.0).reshape(2, 3), fiamma.float32)
    t.copy_(t)
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


# ---- conversions ---------------------------------------------------------------------------------

CONVERTERS = {"float": fiamma.float32, "double": fiamma.float64, "half": fiamma.float16,
              "bfloat16": fiamma.bfloat16, "long": fiamma.int64, "int": fiamma.int32,
              "short": fiamma.int16, "char": fiamma.int8, "byte": fiamma.uint8,
              "bool": fiamma.bool}


@pytest.mark.parametrize("method,dt", CONVERTERS.items())
def test_conversion_methods(method, dt, rng):
    t, a = make_pair((3, 4), fiamma.float64, rng, "strided", low=0.0, high=100.0)
    out = getattr(t, method)()
    assert out.dtype is dt and out.shape == t.shape
    assert out is t if dt is fiamma.float64 else out.is_contiguous()
    expected = a.astype(NP_DTYPE[dt]) if dt is not fiamma.bfloat16 else a
    assert_close(out, expected)
    same = out.to(dt)
    assert same is out
    assert getattr(out, method)() is out


def test_to_variants():
    t = fiamma.ones(2, 3)
    assert t.to(fiamma.float32) is t and t.to("cpu") is t and t.to(t) is t
    assert t.to(fiamma.device("cpu"), fiamma.float32) is t
    c = t.to(copy=True)
    assert c is not t and c.untyped_storage() is not t.untyped_storage()
    assert c.tolist() == t.tolist()
    assert t.to(dtype=fiamma.int64).dtype is fiamma.int64
    assert t.to(fiamma.zeros(1, dtype=fiamma.float16)).dtype is fiamma.float16
    assert t.to("cpu", fiamma.float64).dtype is fiamma.float64
    assert t.to(fiamma.float32, non_blocking=True) is t
    assert t.cpu() is t
    with pytest.raises(TypeError):
        t.to(fiamma.float32, foo=1)
    with pytest.raises(TypeError):
        t.to([1])
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        t.to("cuda")
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        t.cuda()
    with pytest.raises(ValueError):
        t.to("tpu")


def test_python_types_as_dtypes():
    t = fiamma.ones(2)
    assert t.to(int).dtype is fiamma.int64 and t.to(bool).dtype is fiamma.bool
    assert fiamma.zeros(1, dtype=float).dtype is fiamma.float64
    assert t.to(float).dtype is fiamma.float64


def test_type_and_type_as():
    names = {"bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor",
             "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor",
             "float16": "HalfTensor", "bfloat16": "BFloat16Tensor", "float32": "FloatTensor",
             "float64": "DoubleTensor"}
    for dt in ALL_DTYPES:
        assert fiamma.zeros(1, dtype=dt).type() == "fiamma." + names[dt.name]
    t = fiamma.ones(2)
    assert t.type(fiamma.int32).dtype is fiamma.int32
    assert t.type_as(fiamma.zeros(1, dtype=fiamma.float64)).dtype is fiamma.float64


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
def test_item_and_tolist(dt, rng):
    t, a = make_pair((2, 3, 2), dt, rng, "transposed")
    assert t.tolist() == a.tolist()
    one = t.select(0, 1).select(0, 2).select(0, 0)
    v = one.item()
    py = {0: bool, 1: int, 2: float}[dt._kind]
    assert type(v) is py and v == a[1, 2, 0]
    assert one.tolist() == v  # 0-d: a Python number
    assert t.narrow(0, 0, 1).narrow(1, 0, 1).narrow(2, 0, 1).item() == a[0, 0, 0]
    with pytest.raises(RuntimeError, match="item"):
        t.item()
    assert fiamma.zeros(0, 3, dtype=dt).tolist() == []
    assert fiamma.zeros(2, 0, dtype=dt).tolist() == [[], []]


def test_item_exact_for_extreme_values():
    big = to_tensor(np.array([2**63 - 1, -2**63]), fiamma.int64)
    assert big.tolist() == [2**63 - 1, -2**63]
    assert big.select(0, 0).item() == 2**63 - 1
    f = to_tensor(np.array([np.nan, np.inf, -0.0, 1e-310]), fiamma.float64)
    vals = [f.select(0, i).item() for i in range(4)]
    assert math.isnan(vals[0]) and vals[1] == math.inf
    assert math.copysign(1, vals[2]) == -1 and vals[3] == 1e-310
    assert fiamma.full((), 255, dtype=fiamma.uint8).item() == 255
    assert fiamma.full((), -128, dtype=fiamma.int8).item() == -128


def test_python_number_protocols():
    f = fiamma.full((), 3.75)
    i = fiamma.full((), -7, dtype=fiamma.int16)
    b = fiamma.full((1, 1), True)
    assert float(f) == 3.75 and int(f) == 3 and bool(f) is True
    assert int(i) == -7 and float(i) == -7.0 and operator.index(i) == -7
    assert [10, 20, 30][fiamma.full((), 1)] == 20
    assert list(range(10))[fiamma.full((), 2):fiamma.full((), 4)] == [2, 3]
    assert bool(b) is True and bool(fiamma.zeros(1)) is False
    assert complex(f) == 3.75 + 0j
    with pytest.raises(TypeError):
        operator.index(f)
    with pytest.raises(TypeError):
        operator.index(fiamma.zeros(2, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(fiamma.zeros(2))
    with pytest.raises(RuntimeError):
        float(fiamma.zeros(3))
    with pytest.raises(RuntimeError):
        bool(fiamma.zeros(0))


def test_len_and_iter():
    t = to_tensor(np.arange(6).reshape(3, 2), fiamma.int64)
    assert len(t) == 3 and len(t.T) == 2 and len(fiamma.zeros(0, 4)) == 0
    rows = list(t)
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    assert all(r.untyped_storage() is t.untyped_storage() for r in rows)
    assert [x.item() for x in t.select(1, 0)] == [0, 2, 4]
    assert list(fiamma.zeros(0)) == []
    with pytest.raises(TypeError):
        len(fiamma.full((), 1.0))
    with pytest.raises(TypeError):
        iter(fiamma.full((), 1.0))
    assert hash(t) == hash(t) and hash(t) != hash(t.view(6))


# ---- pickling and copying ------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 3, 4)], ids=str)
def test_pickle_round_trip(dt, shape, rng):
    t, _ = make_pair(shape, dt, rng, "transposed")
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        u = pickle.loads(pickle.dumps(t, protocol=proto))
        assert isinstance(u, fiamma.Tensor)
        assert u.dtype is dt and u.shape == t.shape and u.requires_grad is False
        np.testing.assert_array_equal(to_numpy(u), to_numpy(t))
        assert u.untyped_storage() is not t.untyped_storage()


def test_pickle_bfloat16_is_bit_exact():
    bits = np.arange(-32768, 32768, 97, dtype=np.int64).astype(np.int16)
    bits = bits[(bits & 0x7F80) != 0x7F80]  # no nan/inf patterns (nan payloads may change)
    t = fiamma.from_numpy(bits).view(fiamma.bfloat16)
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype is fiamma.bfloat16
    np.testing.assert_array_equal(u.view(fiamma.int16).numpy(), bits)


def test_pickle_related_objects_and_copies():
    for obj in ALL_DTYPES + [fiamma.device("cpu"), fiamma.device("cuda", 1), fiamma.Size([2, 3])]:
        assert pickle.loads(pickle.dumps(obj)) == obj
    for dt in ALL_DTYPES:
        assert pickle.loads(pickle.dumps(dt)) is dt
    t = to_tensor(np.arange(4.0), fiamma.float32).view(2, 2).T
    d = copy.deepcopy(t)
    assert d.untyped_storage() is not t.untyped_storage() and d.tolist() == t.tolist()
    shared = [t, t]
    d2 = copy.deepcopy(shared)
    assert d2[0] is d2[1]


# ---- creation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES + [None], ids=lambda d: d.name if d else "default")
def test_zeros_ones_full_empty(dt):
    for size_args in [((2, 3),), (2, 3), ([2, 3],), (fiamma.Size([2, 3]),)]:
        z = fiamma.zeros(*size_args, dtype=dt)
        assert z.shape == (2, 3) and z.dtype is (dt or fiamma.get_default_dtype())
        assert z.is_contiguous() and not to_numpy(z).any()
    expect = dt or fiamma.get_default_dtype()
    o = fiamma.ones(4, dtype=dt)
    assert o.dtype is expect and (to_numpy(o) == 1).all()
    e = fiamma.empty(3, 0, 2, dtype=dt)
    assert e.shape == (3, 0, 2) and e.dtype is expect and e.numel() == 0
    assert fiamma.empty((), dtype=dt).shape == ()
    assert fiamma.zeros((), dtype=dt).tolist() in (0, False)
    f = fiamma.full((2, 2), 1, dtype=dt)
    assert (to_numpy(f) == 1).all() and f.dtype is (dt or fiamma.int64)


def test_creation_errors_and_dtype_inference_of_full():
    with pytest.raises(RuntimeError, match="negative"):
        fiamma.zeros(2, -1)
    with pytest.raises(RuntimeError, match="negative"):
        fiamma.empty(-3)
    with pytest.raises(TypeError):
        fiamma.ones("3")
    with pytest.raises(TypeError):
        fiamma.zeros(2, dtype="complex32")
    assert fiamma.full((2,), 1).dtype is fiamma.int64
    assert fiamma.full((2,), 1.5).dtype is fiamma.get_default_dtype()
    assert fiamma.full((2,), True).dtype is fiamma.bool
    assert fiamma.full(3, 2.0).shape == (3,)
    assert fiamma.full((2,), fiamma.full((), 4, dtype=fiamma.int16)).dtype is fiamma.int16
    assert fiamma.full((2,), 2**40, dtype=fiamma.int64).tolist() == [2**40] * 2
    assert fiamma.full((1,), -1, dtype=fiamma.uint8).tolist() == [255]
    with pytest.raises(RuntimeError, match="overflow"):
        fiamma.full((1,), 2**64, dtype=fiamma.int64)
    f = fiamma.full((2,), float("nan"), dtype=fiamma.float16)
    assert all(math.isnan(x) for x in f.tolist())
    assert fiamma.scalar_tensor(3).dtype is fiamma.get_default_dtype()
    assert fiamma.scalar_tensor(3).shape == ()
    assert fiamma.scalar_tensor(True, dtype=fiamma.bool).item() is True


@pytest.mark.parametrize("dt", [fiamma.int8, fiamma.float16, fiamma.bfloat16, fiamma.float64])
def test_like_functions(dt, rng):
    x, _ = make_pair((3, 4), dt, rng, "transposed")
    for fn in (fiamma.empty_like, fiamma.zeros_like, fiamma.ones_like):
        y = fn(x)
        assert y.shape == x.shape and y.dtype is dt and y.device == x.device
        assert y.untyped_storage() is not x.untyped_storage()
    assert not to_numpy(fiamma.zeros_like(x)).any()
    assert (to_numpy(fiamma.ones_like(x)) == 1).all()
    assert (to_numpy(fiamma.full_like(x, 3)) == 3).all()
    assert fiamma.zeros_like(x, dtype=fiamma.int32).dtype is fiamma.int32
    assert fiamma.full_like(x, 2, dtype=fiamma.float32).tolist() == [[2.0] * 4] * 3
    with pytest.raises(TypeError):
        fiamma.zeros_like(np.zeros(3))


def test_empty_strided():
    t = fiamma.empty_strided((2, 3), (1, 2))
    assert t.shape == (2, 3) and t.stride() == (1, 2) and not t.is_contiguous()
    assert t.untyped_storage().nbytes() >= 6 * 4
    t.fill_(1.0)
    assert t.tolist() == [[1.0] * 3] * 2
    u = fiamma.empty_strided((3, 2), (4, 1), dtype=fiamma.int16)
    assert u.stride() == (4, 1) and u.untyped_storage().nbytes() >= (2 * 4 + 1 + 1) * 2
    assert fiamma.empty_strided((2, 0), (1, 2)).numel() == 0
    assert fiamma.empty_strided((), ()).shape == ()
    with pytest.raises(RuntimeError):
        fiamma.empty_strided((2, 3), (1,))


def test_legacy_tensor_constructor():
    assert fiamma.Tensor(2, 3).shape == (2, 3)
    assert fiamma.Tensor(2, 3).dtype is fiamma.get_default_dtype()
    assert fiamma.Tensor([1, 2]).dtype is fiamma.get_default_dtype()
    assert fiamma.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert fiamma.Tensor().shape == (0,)
    assert isinstance(fiamma.zeros(1), fiamma.Tensor)


# ---- fiamma.tensor: dtype inference --------------------------------------------------------------

@pytest.mark.parametrize("data,dtype,shape", [
    ([1.0, 2.0], "default", (2,)),
    ([1, 2], fiamma.int64, (2,)),
    ([True, False], fiamma.bool, (2,)),
    ([1, 2.5], "default", (2,)),
    ([True, 2], fiamma.int64, (2,)),
    ([[1, 2], [3, 4]], fiamma.int64, (2, 2)),
    ([[[1.0]], [[2.0]]], "default", (2, 1, 1)),
    ([], "default", (0,)),
    ([[], []], "default", (2, 0)),
    (((1, 2), (3, 4)), fiamma.int64, (2, 2)),
    (np.array([1.0, 2.0]), fiamma.float64, (2,)),
    (np.array([1, 2], dtype=np.int32), fiamma.int32, (2,)),
    (np.array([1, 2], dtype=np.uint8), fiamma.uint8, (2,)),
    (np.array([1, 2], dtype=np.float16), fiamma.float16, (2,)),
    (np.array([True]), fiamma.bool, (1,)),
    (np.zeros((2, 0, 3), dtype=np.int16), fiamma.int16, (2, 0, 3)),
    ([np.float64(1.5), 2], "default", (2,)),
])
def test_tensor_dtype_inference(data, dtype, shape):
    t = fiamma.tensor(data)
    assert t.dtype is (fiamma.get_default_dtype() if dtype == "default" else dtype)
    assert t.shape == shape
    np.testing.assert_array_equal(to_numpy(t), np.asarray(data, dtype=np.float64)
                                  .reshape(shape).astype(to_numpy(t).dtype))


@pytest.mark.parametrize("data,dtype", [(3.5, "default"), (3, fiamma.int64), (True, fiamma.bool),
                                        (np.float32(2.0), fiamma.float32),
                                        (np.array(7, dtype=np.int16), fiamma.int16)])
def test_tensor_of_a_scalar_is_0d(data, dtype):
    t = fiamma.tensor(data)
    assert t.shape == ()
    assert t.dtype is (fiamma.get_default_dtype() if dtype == "default" else dtype)
    assert t.item() == data


def test_tensor_of_a_list_of_0d_tensors():
    items = [fiamma.full((), 1.0), fiamma.full((), 2.0, dtype=fiamma.float64)]
    t = fiamma.tensor(items)
    assert t.shape == (2,) and t.tolist() == [1.0, 2.0]
    assert fiamma.tensor([[fiamma.full((), 1)], [fiamma.full((), 2)]]).shape == (2, 1)


def test_tensor_from_tensors_and_conversions():
    rows = [fiamma.ones(3), fiamma.zeros(3)]
    t = fiamma.tensor(rows)
    assert t.shape == (2, 3) and t.tolist() == [[1.0] * 3, [0.0] * 3]
    src = to_tensor(np.arange(4.0), fiamma.float64)
    c = fiamma.tensor(src)
    assert c.dtype is fiamma.float64 and c.untyped_storage() is not src.untyped_storage()
    assert fiamma.tensor(src, dtype=fiamma.int8).dtype is fiamma.int8
    assert fiamma.tensor([1.7, -1.7], dtype=fiamma.int32).tolist() == [1, -1]
    assert fiamma.tensor([1, 2], dtype=fiamma.bfloat16).tolist() == [1.0, 2.0]
    assert fiamma.tensor([0.1], dtype=fiamma.float64).item() == 0.1
    a = np.arange(3.0)
    t = fiamma.tensor(a)
    a[0] = 99
    assert t.tolist() == [0.0, 1.0, 2.0]  # a copy, not a view
    assert fiamma.tensor(a[::-1]).tolist() == [2.0, 1.0, 99.0]
    assert fiamma.tensor(np.arange(6).reshape(2, 3).T).tolist() == [[0, 3], [1, 4], [2, 5]]


@pytest.mark.parametrize("bad,exc", [([[1, 2], [3]], (ValueError, TypeError)),
                                     ([1, [2]], (ValueError, TypeError)),
                                     (["a", "b"], TypeError),
                                     ([object()], TypeError),
                                     (2**70, (TypeError, OverflowError, RuntimeError,
                                              ValueError))])
def test_tensor_rejects_bad_data(bad, exc):
    with pytest.raises(exc):
        fiamma.tensor(bad)


def test_set_default_dtype():
    assert fiamma.get_default_dtype() is fiamma.float32
    try:
        fiamma.set_default_dtype(fiamma.float64)
        assert fiamma.get_default_dtype() is fiamma.float64
        assert fiamma.tensor([1.5]).dtype is fiamma.float64
        assert fiamma.zeros(2).dtype is fiamma.float64
        assert fiamma.full((1,), 0.5).dtype is fiamma.float64
        assert fiamma.tensor([1]).dtype is fiamma.int64
        assert fiamma.result_type(fiamma.zeros(2, dtype=fiamma.int32), 1.0) is fiamma.float64
        fiamma.set_default_dtype(fiamma.float16)
        assert fiamma.ones(1).dtype is fiamma.float16
        fiamma.set_default_dtype(fiamma.bfloat16)
        assert fiamma.empty(1).dtype is fiamma.bfloat16
        for bad in (fiamma.int32, fiamma.bool, int):
            with pytest.raises(TypeError):
                fiamma.set_default_dtype(bad)
    finally:
        fiamma.set_default_dtype(fiamma.float32)
    assert fiamma.get_default_dtype() is fiamma.float32


# ---- allocator statistics ------------------------------------------------------------------------

def test_cpu_memory_stats_move():
    s0 = fiamma.cpu_memory_stats()
    assert set(s0) == {"allocated_bytes", "cached_bytes", "peak_allocated_bytes", "cache_hits",
                       "cache_misses", "cache_limit_bytes"}
    assert all(isinstance(v, int) and v >= 0 for v in s0.values())
    n = 3 << 20
    t = fiamma.empty(n, dtype=fiamma.uint8)
    s1 = fiamma.cpu_memory_stats()
    assert s1["allocated_bytes"] >= s0["allocated_bytes"] + n
    assert s1["peak_allocated_bytes"] >= s1["allocated_bytes"]
    del t
    s2 = fiamma.cpu_memory_stats()
    assert s2["allocated_bytes"] <= s1["allocated_bytes"] - n
    assert s2["cached_bytes"] >= n or s2["cache_limit_bytes"] < n


def test_cpu_allocator_cache_hits_and_limits():
    n = 5 << 20
    fiamma.cpu_empty_cache()
    assert fiamma.cpu_memory_stats()["cached_bytes"] == 0
    hits0 = fiamma.cpu_memory_stats()["cache_hits"]
    for _ in range(5):
        t = fiamma.empty(n, dtype=fiamma.uint8)
        del t
    s = fiamma.cpu_memory_stats()
    assert s["cache_hits"] >= hits0 + 4, "repeated same-size allocations must hit the cache"
    assert s["cached_bytes"] >= n
    fiamma.cpu_empty_cache()
    assert fiamma.cpu_memory_stats()["cached_bytes"] == 0
    limit = s["cache_limit_bytes"]
    try:
        fiamma.cpu_set_cache_limit(0)
        assert fiamma.cpu_memory_stats()["cache_limit_bytes"] == 0
        miss0 = fiamma.cpu_memory_stats()["cache_misses"]
        for _ in range(3):
            t = fiamma.empty(n, dtype=fiamma.uint8)
            del t
        s = fiamma.cpu_memory_stats()
        assert s["cached_bytes"] == 0 and s["cache_misses"] >= miss0 + 3
    finally:
        fiamma.cpu_set_cache_limit(limit)
    assert fiamma.cpu_memory_stats()["cache_limit_bytes"] == limit
    big = fiamma.empty(8 << 20, dtype=fiamma.uint8)
    peak = fiamma.cpu_memory_stats()["peak_allocated_bytes"]
    del big
    fiamma.cpu_reset_peak_memory_stats()
    s = fiamma.cpu_memory_stats()
    assert s["peak_allocated_bytes"] == s["allocated_bytes"] < peak


def test_small_tensors_reuse_memory():
    # small blocks come back from a pool: a freed address is handed out again
    a = fiamma.empty(16)
    p = a.data_ptr()
    del a
    assert fiamma.empty(16).data_ptr() == p


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
def test_allocations_are_aligned(dt):
    for n in (1, 3, 1000, 100000):
        assert fiamma.empty(n, dtype=dt).data_ptr() % 64 == 0


# ---- the shared helpers themselves ---------------------------------------------------------------

def test_conftest_helpers_can_fail(rng):
    t, a = make_pair((2, 3), fiamma.float16, rng, "strided")
    assert_close(t, a, dtype=fiamma.float16)
    with pytest.raises(AssertionError):
        assert_close(t, a + 1)
    with pytest.raises(AssertionError):
        assert_close(t, a, dtype=fiamma.float32)
    with pytest.raises(AssertionError):
        assert_close(t, a.reshape(3, 2))
    i, b = make_pair((4,), fiamma.int32, rng, "offset")
    assert_close(i, b)
    with pytest.raises(AssertionError):
        assert_close(i, b + 1)  # integers compare exactly
    bf, c = make_pair((5,), fiamma.bfloat16, rng, "transposed")
    assert_close(bf, c * (1 + 1e-3))  # bf16 tolerance
    for layout in LAYOUTS:
        x, ref = make_pair((3, 2, 2), fiamma.int16, rng, layout)
        assert (layout == "contiguous") == x.is_contiguous() or layout == "offset"
        np.testing.assert_array_equal(to_numpy(x), ref)


def test_as_subclass_shares_storage_and_keeps_the_type():
    class Sub(fiamma.Tensor):
        pass

    t = fiamma.arange(6.0).reshape(2, 3)[:, 1:]
    s = t.as_subclass(Sub)
    assert type(s) is Sub and s.shape == t.shape and s.stride() == t.stride()
    assert s.data_ptr() == t.data_ptr() and s.untyped_storage() is t.untyped_storage()
    s.add_(1)
    assert t.tolist() == [[2.0, 3.0], [5.0, 6.0]]
    assert type(s + 1) is Sub  # ops keep the subclass (the default __torch_function__)
    from fiamma._torch_function import DisableTorchFunctionSubclass

    with DisableTorchFunctionSubclass():
        assert type(s + 1) is fiamma.Tensor
    with pytest.raises(TypeError, match="as_subclass"):
        t.as_subclass(int)


def test_assigning_data_keeps_the_tensors_identity_and_flags():
    t = fiamma.zeros(3)
    t.requires_grad = True  # as autograd would set it (no autograd needed for this check)
    t.data = fiamma.ones(2, dtype=fiamma.float64)
    assert t.requires_grad and t.dtype is fiamma.float64 and t.detach().tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="data: expected a Tensor"):
        t.data = [1.0]


def test_openblas_thread_timeout_set_only_while_loading():
    """fiamma loads OpenBLAS with a short idle-thread timeout (its pollers otherwise take the
    CPU from fiamma's kernels) without leaving the variable behind; the user's value stays."""
    import os
    import subprocess
    import sys

    code = ("import os, fiamma; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT', '-'), "
            "float((fiamma.ones(300, 300) @ fiamma.ones(300, 300)).sum()))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["-", str(300.0 ** 3)]
    env["OPENBLAS_THREAD_TIMEOUT"] = "20"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "20"
