"""Tensor indexing (__getitem__/__setitem__, index_put_, nonzero) against NumPy.

fiamma follows PyTorch where it differs from NumPy: ints are basic indices (applied before the
advanced ones), and advanced indices are "adjacent" when they index consecutive dims of the
basic-indexed view. ``ref_index`` computes that with NumPy in two stages: first the basic items
(ints, slices, None, Ellipsis) as a NumPy view, then the advanced items on that view.
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fiamma

ALL_DTYPES = [fiamma.bool, fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64,
              fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64]
NP = {fiamma.bool: np.bool_, fiamma.uint8: np.uint8, fiamma.int8: np.int8,
      fiamma.int16: np.int16, fiamma.int32: np.int32, fiamma.int64: np.int64,
      fiamma.float16: np.float16, fiamma.bfloat16: np.float32, fiamma.float32: np.float32,
      fiamma.float64: np.float64}

try:
    import torch
except ImportError:  # optional reference
    torch = None


# ---- helpers ------------------------------------------------------------------------------

def np_data(shape, dt, seed=0):
    """Values exactly representable in every dtype (bf16 compared through float32)."""
    n = int(np.prod(shape)) if shape else 1
    vals = (np.arange(n) * 7 + seed) % 23
    if dt is fiamma.bool:
        vals = vals % 3 == 0
    return vals.reshape(shape).astype(NP[dt])


def make(a, dt, layout="contig"):
    """A fiamma tensor equal to ``a`` with dtype ``dt`` and the given memory layout."""
    shape = a.shape
    if layout == "transposed" and a.ndim >= 2:
        perm = list(range(a.ndim))[::-1]
        base = fiamma.tensor(np.ascontiguousarray(a.transpose(perm)), dtype=dt)
        t = base.permute(perm)
        assert not t.is_contiguous() or a.size <= 1 or sorted(shape)[-2] <= 1
        return t
    if layout == "strided" and a.ndim >= 1:
        big_shape = shape[:-1] + (2 * shape[-1] + 1,)
        big = np.zeros(big_shape, dtype=a.dtype)
        big[..., 1::2] = a
        base = fiamma.tensor(big, dtype=dt)
        strides = list(base.stride())
        strides[-1] *= 2
        return base.as_strided(shape, strides, 1)
    return fiamma.tensor(a, dtype=dt)


def to_np(t):
    if t.dtype is fiamma.bfloat16:
        t = t.float()
    return np.array(t.numpy())


def to_np_index(k):
    if isinstance(k, fiamma.Tensor):
        return to_np(k)
    if isinstance(k, list):
        a = np.asarray(k)
        return a.astype(np.int64) if a.size == 0 and a.dtype.kind == "f" else a
    return k


def ref_index(a, key):
    """PyTorch's indexing result for a NumPy array (see the module docstring)."""
    if not isinstance(key, tuple):
        key = (key,)
    key = [to_np_index(k) for k in key]
    consumed = 0
    for k in key:
        if isinstance(k, (int, np.integer, slice)) and not isinstance(k, (bool, np.bool_)):
            consumed += 1
        elif isinstance(k, np.ndarray):
            consumed += k.ndim if k.dtype == bool else 1
    s1, s2 = [], []
    for k in key:
        if isinstance(k, (bool, np.bool_)):
            s1.append(None)
            s2.append(np.array([0]) if k else np.array([], dtype=np.int64))
        elif isinstance(k, (int, np.integer)) or (isinstance(k, np.ndarray) and k.ndim == 0
                                                   and k.dtype != bool):
            s1.append(int(k))
        elif isinstance(k, slice) or k is None:
            s1.append(k)
            s2.append(slice(None))
        elif k is Ellipsis:
            s1.append(Ellipsis)
            s2.extend([slice(None)] * (a.ndim - consumed))
        else:
            s1.extend([slice(None)] * (k.ndim if k.dtype == bool else 1))
            s2.append(k)
    if not any(k is Ellipsis for k in s1):
        s1.append(Ellipsis)  # a[()] of a 0-d array is a scalar, a[...] a view
    view = a[tuple(s1)]
    return view, tuple(s2)


def ref_getitem(a, key):
    view, s2 = ref_index(a, key)
    return view[s2]


def assert_same(t, ref):
    got = to_np(t)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_array_equal(got, ref)


# ---- random index expressions ----------------------------------------------------------------

@st.composite
def index_cases(draw, max_ndim=4, allow_adv=True):
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    bshape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    has_mask = False
    key = []
    d = 0
    used_ell = False
    for _ in range(draw(st.integers(0, 5))):
        kinds = ["none"]
        if d < ndim:
            kinds += ["slice", "slice"]
            if shape[d] > 0:
                kinds += ["int", "int"]
            if allow_adv and shape[d] > 0:
                kinds += ["intarr", "intarr"]
            if allow_adv and not has_mask:
                kinds.append("mask")
        if not used_ell:
            kinds.append("ell")
        if allow_adv:
            kinds.append("true")
        kind = draw(st.sampled_from(kinds))
        if kind == "none":
            key.append(None)
        elif kind == "ell":
            used_ell = True
            key.append(Ellipsis)
            # the Ellipsis absorbs some dims now; the items after it must reach the last dim
            d += draw(st.integers(0, ndim - d))
        elif kind == "true":
            key.append(True)
        elif kind == "int":
            n = shape[d]
            i = draw(st.integers(-n, n - 1))
            form = draw(st.sampled_from(["int", "np", "tensor"]))
            key.append(i if form == "int" else np.int64(i) if form == "np" else fiamma.tensor(i))
            d += 1
        elif kind == "slice":
            n = shape[d]
            start = draw(st.none() | st.integers(-n - 2, n + 2))
            stop = draw(st.none() | st.integers(-n - 2, n + 2))
            step = draw(st.none() | st.integers(1, 3))
            key.append(slice(start, stop, step))
            d += 1
        elif kind == "intarr":
            n = shape[d]
            ish = bshape if not has_mask else ()
            # broadcastable to bshape: drop leading dims, set some to 1
            drop = draw(st.integers(0, len(ish)))
            ish = tuple(1 if draw(st.booleans()) else s for s in ish[drop:])
            cnt = int(np.prod(ish)) if ish else 1
            vals = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=cnt,
                                          max_size=cnt)), dtype=np.int64).reshape(ish)
            if not vals.ndim:
                vals = vals.reshape(1)
            form = draw(st.sampled_from(["tensor", "int32", "numpy", "list"]))
            key.append(fiamma.tensor(vals) if form == "tensor" else
                       fiamma.tensor(vals, dtype=fiamma.int32) if form == "int32" else
                       vals if form == "numpy" else vals.tolist())
            d += 1
        elif kind == "mask":
            if any(isinstance(k, (fiamma.Tensor, np.ndarray, list)) for k in key) and bshape:
                continue  # a mask's 1-d result must broadcast with the int arrays
            m = draw(st.integers(1, min(2, ndim - d)))
            msh = shape[d:d + m]
            cnt = int(np.prod(msh))
            vals = np.array(draw(st.lists(st.booleans(), min_size=cnt, max_size=cnt)),
                            dtype=bool).reshape(msh)
            form = draw(st.sampled_from(["tensor", "numpy"]))
            key.append(fiamma.tensor(vals) if form == "tensor" else vals)
            has_mask = True
            d += m
        if d > ndim:
            break
    if used_ell:
        key.extend([slice(None)] * (ndim - d))
    if has_mask:
        # int arrays drawn before the mask may not broadcast with its 1-d result
        adv = [k for k in key if isinstance(k, (fiamma.Tensor, np.ndarray, list))
               and not (isinstance(k, fiamma.Tensor) and k.dim() == 0)]
        if len(adv) > 1:
            new = []
            for k in key:
                if k is adv[-1] or not any(k is a for a in adv):
                    new.append(k)
                else:  # a slice per dim the dropped index consumed
                    nd_k = np.asarray(to_np_index(k)).ndim
                    is_mask = np.asarray(to_np_index(k)).dtype == bool
                    new.extend([slice(None)] * (nd_k if is_mask else 1))
            key = new
    bare = len(key) == 1 and draw(st.booleans())
    return shape, (key[0] if bare else tuple(key))


LAYOUTS = ["contig", "transposed", "strided"]


# ---- getitem -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=index_cases(), layout=st.sampled_from(LAYOUTS))
def test_getitem_matches_numpy(dt, case, layout):
    shape, key = case
    a = np_data(shape, dt)
    x = make(a, dt, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ref_getitem(a, key)
    got = x[key]
    assert got.dtype is dt
    assert_same(got, ref)
    np.testing.assert_array_equal(to_np(x), a)  # the source is untouched


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=index_cases(max_ndim=5), layout=st.sampled_from(LAYOUTS))
def test_getitem_many_shapes_float32(case, layout):
    shape, key = case
    a = np_data(shape, fiamma.float32, seed=3)
    x = make(a, fiamma.float32, layout)
    assert_same(x[key], ref_getitem(a, key))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=index_cases(allow_adv=False), layout=st.sampled_from(LAYOUTS))
def test_basic_indexing_gives_views(case, layout):
    shape, key = case
    a = np_data(shape, fiamma.int64)
    x = make(a, fiamma.int64, layout)
    v = x[key]
    ref = a[key]
    assert_same(v, ref)
    assert v.untyped_storage() is x.untyped_storage()
    # the view's layout matches NumPy's view of the same array
    itemsize = 8
    xs = x.numpy()
    if v.numel():
        nref, _ = ref_index(xs, key)  # NumPy's view (never a scalar)
        assert v.data_ptr() - x.data_ptr() == (nref.__array_interface__["data"][0] -
                                               xs.__array_interface__["data"][0])
        assert v.storage_offset() == x.storage_offset() + (v.data_ptr() - x.data_ptr()) // itemsize
        # writes through the view show in x
        v.fill_(-5)
        ref = ref.copy()
        a2 = a.copy()
        a2[key] = -5
        np.testing.assert_array_equal(to_np(x), a2)


def test_view_aliasing_and_offsets():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = fiamma.tensor(a)
    v = x[1:3]
    assert v.data_ptr() == x.data_ptr() + 6 * 4
    assert v.storage_offset() == 6 and v.is_contiguous()
    v[0, 0] = 100.0
    assert x[1, 0].item() == 100.0
    w = x[:, 1::2]
    assert w.stride() == (6, 2) and w.storage_offset() == 1 and not w.is_contiguous()
    w.fill_(0)
    assert to_np(x)[:, 1::2].sum() == 0
    e = x[..., None]
    assert e.shape == (4, 6, 1) and e.is_contiguous()
    s = x[2]
    assert s.storage_offset() == 12 and s.is_contiguous() and s.shape == (6,)
    z = x[1, 2]
    assert z.dim() == 0 and z.storage_offset() == 8
    assert x[()].data_ptr() == x.data_ptr() and x[...].shape == x.shape
    assert x[5:].shape == (0, 6) and x[-100:2].shape == (2, 6)
    # nested views keep offsets
    assert x[1:][1:][0].storage_offset() == 12


def test_zero_d_and_scalar_like_indices():
    x = fiamma.tensor(np.arange(12).reshape(3, 4))
    assert x[fiamma.tensor(1)].tolist() == [4, 5, 6, 7]
    assert x[np.int64(2), np.int32(1)].item() == 9
    assert x[np.array(1)].tolist() == [4, 5, 6, 7]
    assert x[fiamma.tensor(-1), 0].item() == 8
    s = fiamma.tensor(5.0)
    assert s[()].item() == 5.0 and s[None].shape == (1,) and s[...].shape == ()
    assert s[True].shape == (1,) and s[False].shape == (0,)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        s[0]


def test_bool_scalars():
    a = np.arange(24).reshape(2, 3, 4)
    x = fiamma.tensor(a)
    assert x[True].shape == (1, 2, 3, 4) and x[False].shape == (0, 2, 3, 4)
    assert_same(x[True, [0, 1]], a[None][[0], [0, 1]])
    assert_same(x[:, True], a[:, None])
    assert_same(x[..., False], a[..., None][..., []])


def test_separated_and_adjacent_advanced():
    a = np.arange(120).reshape(2, 3, 4, 5)
    x = fiamma.tensor(a)
    i, j = np.array([0, 1]), np.array([[1], [2]])
    ti, tj = fiamma.tensor(i), fiamma.tensor(j)
    assert_same(x[:, ti, tj], a[:, i, j])          # adjacent: in place
    assert x[:, ti, tj].shape == (2, 2, 2, 5)
    assert_same(x[ti, :, tj], a[i, :, j])          # separated: broadcast dims first
    assert x[ti, :, tj].shape == (2, 2, 3, 5)
    assert_same(x[ti, None, tj], a[i, None, j])
    assert_same(x[..., ti, tj], a[..., i, j])
    assert_same(x[ti, ..., tj], a[i, ..., j])
    # PyTorch's rule where NumPy differs: ints are applied first
    assert x[0, :, ti].shape == (3, 2, 5)
    assert_same(x[0, :, ti], a[0][:, i])
    # an Ellipsis that spans no dims does not separate (dims are adjacent in the view)
    assert x[:, ti, ..., tj, :].shape == (2, 2, 2, 5)


def test_masks():
    a = np.arange(24).reshape(2, 3, 4)
    x = fiamma.tensor(a)
    m = a % 3 == 0
    assert_same(x[fiamma.tensor(m)], a[m])
    assert_same(x[m], a[m])
    m2 = np.array([[True, False, True], [False, False, True]])
    assert_same(x[fiamma.tensor(m2)], a[m2])
    m1 = np.array([True, False, True])
    assert_same(x[:, fiamma.tensor(m1)], a[:, m1])
    assert_same(x[:, m1, 1:3], a[:, m1, 1:3])
    assert_same(x[[True, False]], a[[True, False]])
    # mask + int array broadcast together
    assert_same(x[:, m1, [0, 3]], a[:, m1, [0, 3]])
    # a mask over a non-contiguous tensor
    xt = x.permute(2, 1, 0)
    mt = a.transpose(2, 1, 0) > 10
    assert_same(xt[fiamma.tensor(mt)], a.transpose(2, 1, 0)[mt])
    # uint8 tensors are masks (PyTorch's deprecated rule)
    with pytest.warns(UserWarning, match="uint8"):
        assert_same(x[fiamma.tensor([1, 0], dtype=fiamma.uint8)], a[[True, False]])


def test_index_arrays_forms():
    a = np.arange(30).reshape(5, 6)
    x = fiamma.tensor(a)
    for idx in ([4, -1, 0], np.array([4, -1, 0]), fiamma.tensor([4, -1, 0]),
                fiamma.tensor([4, -1, 0], dtype=fiamma.int32),
                fiamma.tensor([4, -1, 0], dtype=fiamma.int16),
                fiamma.tensor([4, -1, 0], dtype=fiamma.int8)):
        assert_same(x[idx], a[np.array([4, -1, 0])])
    assert_same(x[np.array([4, 0, 2], np.uint16)], a[[4, 0, 2]])
    # a list of (fewer than 32) lists is a tuple of index arrays, as PyTorch 2.x reads it
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert_same(x[[[0, 1], [2, 3]]], a[[0, 1], [2, 3]])
    assert_same(x[np.array([[0, 1], [2, 3]])], a[np.array([[0, 1], [2, 3]])])  # array = array
    assert x[[]].shape == (0, 6)
    # non-contiguous index tensor
    idx = fiamma.tensor([[0, 9], [4, 9], [2, 9]])[:, 0]
    assert not idx.is_contiguous()
    assert_same(x[idx], a[[0, 4, 2]])
    assert_same(x[:, idx], a[:, [0, 4, 2]])
    # a list holding tensors/slices is a tuple (PyTorch)
    assert_same(x[[fiamma.tensor([0, 1]), slice(None, 2)]], a[[0, 1], :2])


def test_many_index_arrays():
    """More index arrays than the elementwise iterator's operand limit."""
    shape = (2, 3, 2, 3, 2, 2, 3, 2)
    a = np.arange(int(np.prod(shape))).reshape(shape)
    x = fiamma.tensor(a)
    rng = np.random.default_rng(0)
    idx = [rng.integers(-n, n, size=(4, 1)) for n in shape]
    idx[3] = idx[3].reshape(1, 4, 1)
    assert_same(x[tuple(fiamma.tensor(i) for i in idx)], a[tuple(idx)])
    y = x.clone()
    y[tuple(fiamma.tensor(i) for i in idx)] = -1
    a2 = a.copy()
    a2[tuple(idx)] = -1
    assert_same(y, a2)


def test_large_gather_rows():
    a = np.random.default_rng(1).standard_normal((1000, 33)).astype(np.float32)
    x = fiamma.tensor(a)
    idx = np.random.default_rng(2).integers(-1000, 1000, size=5000)
    assert_same(x[fiamma.tensor(idx)], a[idx])
    assert_same(x[:, fiamma.tensor(idx[:7] % 33)], a[:, idx[:7] % 33])
    assert_same(x.t()[fiamma.tensor(idx[:50] % 33)], a.T[idx[:50] % 33])


# ---- setitem -------------------------------------------------------------------------------

@st.composite
def value_for(draw, shape):
    """A value broadcastable to ``shape``: a scalar or an array (int64 or float64)."""
    kind = draw(st.sampled_from(["int", "float", "array", "array"]))
    if kind == "int":
        return draw(st.integers(0, 40))
    if kind == "float":
        return float(draw(st.integers(0, 40)))
    drop = draw(st.integers(0, len(shape)))
    vsh = [1 if draw(st.booleans()) else s for s in shape[drop:]]
    if draw(st.booleans()):
        vsh = [1] + vsh
    vals = (np.arange(int(np.prod(vsh)) if vsh else 1) * 3 + 1) % 37
    vals = vals.reshape(vsh)
    return vals.astype(draw(st.sampled_from([np.int64, np.float64, np.float32, np.int32])))


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=index_cases(), layout=st.sampled_from(LAYOUTS), data=st.data())
def test_setitem_matches_numpy(dt, case, layout, data):
    shape, key = case
    a = np_data(shape, dt)
    x = make(a, dt, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        view, s2 = ref_index(a, key)
        rshape = view[s2].shape
        value = data.draw(value_for(rshape))
        ref = a.copy()
        rview, _ = ref_index(ref, key)
        s2 = s2 + (Ellipsis,)  # makes a 0-d target an array, not an element
        if np.isscalar(value):
            rview[s2] = value
        else:
            rview[s2] = value.astype(NP[dt]) if dt is not fiamma.bool else value != 0
        v0 = x._version
        x[key] = value if np.isscalar(value) or data.draw(st.booleans()) else fiamma.tensor(value)
    assert x._version > v0
    assert_same(x, ref)


def test_setitem_basic_cases():
    a = np.zeros((3, 4), np.float32)
    x = fiamma.tensor(a)
    x[0] = 1
    x[:, -1] = fiamma.tensor([5.0, 6.0, 7.0])
    x[1:, :2] = fiamma.tensor([[1.0], [2.0]])
    x[..., 2] = fiamma.tensor(9.0)
    a[0] = 1
    a[:, -1] = [5, 6, 7]
    a[1:, :2] = [[1], [2]]
    a[..., 2] = 9
    assert_same(x, a)
    # leading size-1 dims of the value are dropped
    x[0] = fiamma.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    assert x[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    # casting: float into int truncates, numbers into bool test nonzero
    xi = fiamma.tensor([0, 0, 0])
    xi[0] = 2.7
    xi[1:] = fiamma.tensor([3.9, -1.5])
    assert xi.tolist() == [2, 3, -1]
    xb = fiamma.tensor([False, False, False])
    xb[[0, 2]] = 5
    assert xb.tolist() == [True, False, True]
    xb[xb] = fiamma.tensor([0.0, 0.5])
    assert xb.tolist() == [False, False, True]
    # numpy and list values
    x[2] = np.arange(4)
    x[1] = [4, 3, 2, 1]
    assert x[1:].tolist() == [[4, 3, 2, 1], [0, 1, 2, 3]]


def test_setitem_overlapping_value():
    a = np.arange(10, dtype=np.float64)
    x = fiamma.tensor(a)
    x[1:] = x[:-1]
    a[1:] = a[:-1].copy()
    assert_same(x, a)
    x[fiamma.tensor([3, 2, 1, 0])] = x[:4]
    a[[3, 2, 1, 0]] = a[:4].copy()
    assert_same(x, a)
    x[x > 3] = x[x > 3] * 2
    a[a > 3] = a[a > 3] * 2
    assert_same(x, a)


def test_setitem_indices_alias_target():
    x = fiamma.tensor([1, 0, 3, 2])
    a = x.numpy().copy()
    x[x] = fiamma.tensor([2, 3, 0, 1])
    a[a.copy()] = [2, 3, 0, 1]
    assert_same(x, a)
    b = fiamma.tensor([True, False, True, True, False, True])
    bn = to_np(b)
    b[:3][b[3:]] = False
    bn[:3][bn[3:].copy()] = False
    assert_same(b, bn)
    b[b] = True
    assert_same(b, bn)


def test_setitem_masks():
    a = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    x = fiamma.tensor(a)
    x[x > 0] = 0
    a[a > 0] = 0
    assert_same(x, a)
    m = a < -2
    x[fiamma.tensor(m)] = fiamma.tensor(np.arange(m.sum(), dtype=np.float32))
    a[m] = np.arange(m.sum())
    assert_same(x, a)
    x[fiamma.tensor(m)] = fiamma.tensor([7.0])
    a[m] = 7
    assert_same(x, a)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[fiamma.tensor(m)] = fiamma.tensor([1.0, 2.0])
    # a mask on a non-contiguous tensor and a strided value
    xt = x.t()
    mt = fiamma.tensor(a.T == 7)
    vals = fiamma.tensor(np.arange(2 * int((a == 7).sum()), dtype=np.float32))[::2]
    xt[mt] = vals
    at = a.T
    at[a.T == 7] = np.arange(2 * int((a == 7).sum()))[::2]
    assert_same(x, a)


def test_setitem_duplicates_last_wins():
    x = fiamma.zeros(5)
    x[fiamma.tensor([0, 0, 1])] = fiamma.tensor([1.0, 2.0, 3.0])
    assert x.tolist() == [2.0, 3.0, 0.0, 0.0, 0.0]


def test_version_counter():
    x = fiamma.zeros(4, 3)
    v = x[1:]
    n0 = x._version
    x[0] = 1
    assert x._version == n0 + 1 and v._version == n0 + 1
    v[0, 0] = 2
    x[[0, 1]] = 3
    x[x > 2] = 4
    x.index_put_((fiamma.tensor([0]),), fiamma.tensor(1.0))
    assert x._version == n0 + 5


# ---- index_put ----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_index_put_accumulate(dt):
    a = np_data((5, 3), dt)
    x = make(a, dt, "transposed")
    i = np.array([0, 4, 0, 0, -1])
    j = np.array([1, 2, 1, 0, 2])
    vals = np_data((5,), dt, seed=5)
    ref = a.copy()
    if dt is fiamma.bool:
        ref[i, j] |= vals
        np.logical_or.at(ref, (i, j), vals)
    else:
        np.add.at(ref, (i, j), vals)
    out = x.index_put((fiamma.tensor(i), fiamma.tensor(j)), make(vals, dt), accumulate=True)
    assert_same(out, ref)
    assert_same(x, a)  # out of place
    r = x.index_put_((fiamma.tensor(i), fiamma.tensor(j)), make(vals, dt), accumulate=True)
    assert r is x
    assert_same(x, ref)


def test_index_put_forms():
    x = fiamma.zeros(3, 4)
    x.index_put_((None, fiamma.tensor([1, 3])), fiamma.tensor(2.0))
    assert to_np(x).sum() == 12.0
    x.index_put_((fiamma.tensor([0, 0]),), fiamma.tensor([1.0, 1.0, 1.0, 1.0]), accumulate=True)
    assert x[0].tolist() == [2.0, 4.0, 2.0, 4.0]
    y = fiamma.index_put(x, (x > 3,), fiamma.tensor(-1.0))
    assert y[0].tolist() == [2.0, -1.0, 2.0, -1.0] and x[0, 1].item() == 4.0
    # a 0-d index tensor is an advanced index in index_put_
    x.index_put_((fiamma.tensor(2), fiamma.tensor([0, 1])), fiamma.tensor(5.0))
    assert x[2].tolist() == [5.0, 5.0, 0.0, 2.0]
    x.index_put_((fiamma.tensor([1]),), fiamma.tensor(1.0), accumulate=True)
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((fiamma.tensor([0]),), fiamma.tensor([1]))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_put_((fiamma.tensor([0, 3]),), fiamma.tensor(1.0))


def test_index_put_checks_before_writing():
    x = fiamma.zeros(4)
    with pytest.raises(IndexError):
        x[fiamma.tensor([0, 1, 7])] = 1.0
    assert x.tolist() == [0.0] * 4


# ---- nonzero ------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(0, 4), max_size=4).map(tuple),
       layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 50))
def test_nonzero_matches_numpy(dt, shape, layout, seed):
    a = np_data(shape, dt, seed) if dt is fiamma.bool else (np_data(shape, dt, seed) % 3)
    a = a.astype(NP[dt])
    x = make(a, dt, layout)
    got = fiamma.nonzero(x)
    ref = np.argwhere(a) if a.ndim else np.zeros((int(a != 0), 0), np.int64)
    assert got.dtype is fiamma.int64
    assert_same(got, ref)
    tup = x.nonzero(as_tuple=True)
    nz = np.nonzero(np.atleast_1d(a))
    assert len(tup) == len(nz)
    for t, r in zip(tup, nz):
        assert t.is_contiguous()
        assert_same(t, r)
    assert_same(fiamma.argwhere(x), ref)


def test_nonzero_floats():
    x = fiamma.tensor([0.0, -0.0, float("nan"), 1e-30, float("-inf")])
    assert fiamma.nonzero(x).flatten().tolist() == [2, 3, 4]
    for dt in (fiamma.float16, fiamma.bfloat16):
        y = fiamma.tensor([0.0, -0.0, float("nan"), 1.0], dtype=dt)
        assert y.nonzero().flatten().tolist() == [2, 3]
    assert fiamma.nonzero(fiamma.tensor(3)).shape == (1, 0)
    assert fiamma.nonzero(fiamma.tensor(0)).shape == (0, 0)
    assert [t.tolist() for t in fiamma.nonzero(fiamma.tensor(3), as_tuple=True)] == [[0]]


# ---- errors ---------------------------------------------------------------------------------

def test_errors():
    x = fiamma.tensor(np.arange(24).reshape(2, 3, 4))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x[:, -4]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[fiamma.tensor([0, 5])]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 2 with size 4"):
        x[:, :, fiamma.tensor([[-5]])]
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 3"):
        x[[0, 1], [9, 0]]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 3"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        x[:, :, :, None, :]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or "
                                         "bool tensors"):
        x[fiamma.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match=r"The shape of the mask \[3, 3\] at index 0 does not "
                                         r"match the shape of the indexed tensor \[2, 3, 4\]"):
        x[fiamma.ones(3, 3, dtype=fiamma.bool)]
    with pytest.raises(IndexError, match=r"mask \[2, 2\] at index 0 .* at index 1"):
        x[:, fiamma.ones(2, 2, dtype=fiamma.bool)]
    with pytest.raises(IndexError, match=r"could not be broadcast together with shapes \[2\], "
                                         r"\[3\]"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[:, ::0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match="valid indices"):
        x[1.5]
    with pytest.raises(IndexError, match="valid indices"):
        x["a"]
    with pytest.raises(IndexError, match="integer or boolean"):
        x[np.array([0.5])]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[0] = fiamma.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[[0, 1], [0, 1]] = fiamma.zeros(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[fiamma.tensor([2])] = 0
    # an empty result still checks its indices
    e = fiamma.zeros(3, 0)
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        e[fiamma.tensor([7])]
    assert x.tolist() == np.arange(24).reshape(2, 3, 4).tolist()


# ---- autograd hook ---------------------------------------------------------------------------

def test_records_for_autograd(monkeypatch):
    from fiamma import _grad_hook as G

    calls = []

    class Rec:
        def record(self, op, out, inputs, kwargs):
            calls.append(("record", op))
            out.requires_grad = True  # as fiamma-autograd does

        def record_inplace(self, op, out, inputs, kwargs):
            calls.append(("inplace", op))

        def requires_grad_(self, t, flag):
            t.requires_grad = flag

    monkeypatch.setattr(G, "_recorder", Rec())
    x = fiamma.zeros(3, 4).requires_grad_()
    x[0]
    x[:, 1:3]
    x[fiamma.tensor([0, 1])]
    x[1, [0, 1]]
    x[x > 0]
    y = fiamma.zeros(3, 4)
    y[0] = x[1]
    assert calls == [("record", "getitem"), ("record", "getitem"), ("record", "index"),
                     ("record", "getitem"), ("record", "index"), ("record", "gt"),
                     ("record", "index"), ("record", "getitem"), ("inplace", "setitem")]


# ---- parity with PyTorch (optional) -----------------------------------------------------------

TORCH_CASES = [
    lambda m: (0, slice(None), m.tensor([0, 1])),
    lambda m: (m.tensor([0, 1]), slice(None), 0),
    lambda m: (slice(None), m.tensor([0]), Ellipsis, m.tensor([0])),
    lambda m: (m.tensor([1, 0]), None, m.tensor([1, 2])),
    lambda m: (True, m.tensor([0, 1])),
    lambda m: (m.tensor([[True, False, True], [False, True, True]]), m.tensor([0, 3, 1, 2])),
    lambda m: (Ellipsis, None, m.tensor([[0], [3]]), None),
    lambda m: (slice(1, None), m.tensor([2, 0]), slice(None, None, 2)),
    lambda m: (m.tensor(1), m.tensor([[0, 1]]), m.tensor([3])),
    lambda m: (False, 0),
]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("case", range(len(TORCH_CASES)))
def test_torch_parity(case):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    tk = TORCH_CASES[case](torch)
    fk = TORCH_CASES[case](fiamma)
    expected = torch.from_numpy(a)[tk].numpy()
    assert_same(fiamma.tensor(a)[fk], expected)
    t = torch.from_numpy(a.copy())
    t[tk] = -1.0
    f = fiamma.tensor(a)
    f[fk] = -1.0
    assert_same(f, t.numpy())
