"""Shape utilities against NumPy (float64 references for cdist): random shapes with every
layout (contiguous, transposed, strided, offset), 0-d and empty tensors, every dtype; views
share storage and version counters; errors name the op; autograd records the documented ops."""

import itertools

import numpy as np
import pytest
from conftest import (
    ALL_DTYPES,
    LAYOUTS,
    XP_HOST,
    assert_close,
    make_pair,
    shapes,
    to_numpy,
    to_tensor,
)
from hypothesis import given, settings, strategies as st

import fiamma as F
from fiamma import _grad_hook as G

SETTINGS = settings(max_examples=40, deadline=None)


def pair(data, shape, dtype=None, layout=None):
    dtype = dtype or data.draw(st.sampled_from(ALL_DTYPES), "dtype")
    layout = layout or data.draw(st.sampled_from(LAYOUTS), "layout")
    seed = data.draw(st.integers(0, 2 ** 16), "seed")
    t, a = make_pair(shape, dtype, np.random.default_rng(seed), layout)
    return t, a, dtype


def dims_subset(data, nd):
    if nd == 0:
        return []
    return data.draw(st.lists(st.integers(-nd, nd - 1), max_size=nd, unique_by=lambda d: d % nd))


# ---- flip / roll / rot90 ---------------------------------------------------------------------

@SETTINGS
@given(st.data(), shapes())
def test_flip(data, shape):
    t, a, dt = pair(data, shape)
    dims = dims_subset(data, len(shape))
    want = np.flip(a, [d % len(shape) for d in dims]) if shape else a
    assert_close(F.flip(t, dims), want, dt)
    assert_close(t.flip(*dims) if dims else t.flip([]), want, dt)


def test_flip_lr_ud_and_errors():
    a = np.arange(24).reshape(2, 3, 4)
    t = F.from_numpy(a)
    assert_close(F.fliplr(t), np.fliplr(a))
    assert_close(t.flipud(), np.flipud(a))
    with pytest.raises(RuntimeError, match="fliplr.*>= 2-d"):
        F.fliplr(F.arange(3))
    with pytest.raises(RuntimeError, match="flip: dim 0 appears multiple times"):
        F.flip(t, (0, -3))
    with pytest.raises(IndexError, match="flip"):
        F.flip(t, (3,))


@SETTINGS
@given(st.data(), shapes(1, 4))
def test_roll(data, shape):
    t, a, dt = pair(data, shape)
    nd = len(shape)
    dims = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=3))
    shifts = data.draw(st.lists(st.integers(-12, 12), min_size=len(dims), max_size=len(dims)))
    assert_close(F.roll(t, shifts, dims), np.roll(a, shifts, dims), dt)
    s = shifts[0]
    assert_close(t.roll(s), np.roll(a, s), dt)  # flattened
    assert_close(t.roll(s, dims[0]), np.roll(a, s, dims[0]), dt)


def test_roll_errors_and_0d():
    assert F.roll(F.tensor(5), 3, 0).item() == 5
    with pytest.raises(RuntimeError, match="roll: shifts and dimensions must align"):
        F.roll(F.ones(3, 3), (1, 2), 0)
    with pytest.raises(RuntimeError, match="roll: shifts and dimensions must align"):
        F.roll(F.ones(3, 3), (1, 2))


@SETTINGS
@given(st.data(), shapes(2, 4))
def test_rot90(data, shape):
    t, a, dt = pair(data, shape)
    nd = len(shape)
    d0, d1 = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=2, max_size=2,
                                unique_by=lambda d: d % nd))
    k = data.draw(st.integers(-6, 6))
    assert_close(F.rot90(t, k, (d0, d1)), np.rot90(a, k, (d0, d1)), dt)
    assert_close(t.rot90(k, [d0, d1]), np.rot90(a, k, (d0, d1)), dt)


def test_rot90_errors():
    with pytest.raises(RuntimeError, match="rot90: expected total rotation dims == 2"):
        F.rot90(F.ones(2, 2), 1, (0, 1, 2))
    with pytest.raises(RuntimeError, match="rot90: expected total dims >= 2, but got total "
                                           "dims = 1"):
        F.rot90(F.ones(2))
    with pytest.raises(RuntimeError, match="rot90: expected rotation dims to be different"):
        F.rot90(F.ones(2, 2), 1, (1, -1))


# ---- repeat / tile / repeat_interleave -------------------------------------------------------

@SETTINGS
@given(st.data(), shapes(0, 3))
def test_repeat_and_tile(data, shape):
    t, a, dt = pair(data, shape)
    extra = data.draw(st.integers(0, 2))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=len(shape) + extra,
                              max_size=len(shape) + extra))
    assert_close(t.repeat(*reps), np.tile(a, reps), dt)
    assert_close(t.repeat(reps), np.tile(a, reps), dt)
    short = reps[:data.draw(st.integers(0, len(reps)))]
    assert_close(F.tile(t, short), np.tile(a, short), dt)
    assert_close(t.tile(*short) if short else t.tile(short), np.tile(a, short), dt)


def test_repeat_errors():
    with pytest.raises(RuntimeError, match="repeat: Number of dimensions of repeat dims can not "
                                           "be smaller"):
        F.ones(2, 2).repeat(2)
    with pytest.raises(RuntimeError, match="repeat.*negative"):
        F.ones(2).repeat(-1)


@SETTINGS
@given(st.data(), shapes(0, 3))
def test_repeat_interleave(data, shape):
    t, a, dt = pair(data, shape)
    r = data.draw(st.integers(0, 3))
    assert_close(F.repeat_interleave(t, r), np.repeat(a, r), dt)
    if shape:
        d = data.draw(st.integers(-len(shape), len(shape) - 1))
        assert_close(t.repeat_interleave(r, d), np.repeat(a, r, d), dt)
        counts = data.draw(st.lists(st.integers(0, 3), min_size=shape[d], max_size=shape[d]))
        rt = F.tensor(counts, dtype=F.int64)
        assert_close(t.repeat_interleave(rt, dim=d), np.repeat(a, counts, d), dt)
        assert_close(t.repeat_interleave(rt, dim=d, output_size=sum(counts)),
                     np.repeat(a, counts, d), dt)
        # a one-element repeats tensor broadcasts
        assert_close(t.repeat_interleave(F.tensor([r]), dim=d), np.repeat(a, r, d), dt)


def test_repeat_interleave_counts_only_and_errors():
    assert F.repeat_interleave(F.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    x = F.ones(2, 3)
    with pytest.raises(RuntimeError, match="repeat_interleave: repeats must have the same size "
                                           "as input along dim"):
        x.repeat_interleave(F.tensor([1, 2]), dim=1)
    with pytest.raises(RuntimeError, match="repeat_interleave: repeats can not be negative"):
        x.repeat_interleave(F.tensor([1, -1, 1]), dim=1)
    with pytest.raises(RuntimeError, match="repeat_interleave: repeats has to be Long or Int"):
        x.repeat_interleave(F.tensor([1.0, 1.0, 1.0]), dim=1)
    with pytest.raises(RuntimeError, match="repeat_interleave: allocated output_size 5"):
        x.repeat_interleave(2, dim=1, output_size=5)


# ---- tril / triu -----------------------------------------------------------------------------

@SETTINGS
@given(st.data(), shapes(2, 4))
def test_tril_triu(data, shape):
    t, a, dt = pair(data, shape)
    k = data.draw(st.integers(-4, 4))
    assert_close(F.tril(t, k), np.tril(a, k), dt)
    assert_close(t.triu(k), np.triu(a, k), dt)
    c = t.clone()
    assert c.tril_(k) is c
    assert_close(c, np.tril(a, k), dt)
    out = F.empty(0, dtype=dt)
    assert F.triu(t, k, out=out) is out
    assert_close(out, np.triu(a, k), dt)


def test_tril_errors():
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dim"):
        F.tril(F.ones(3))


@pytest.mark.parametrize("row,col,off", [(3, 3, 0), (4, 2, 1), (2, 5, -1), (0, 3, 0),
                                         (3, 4, -5), (3, 4, 7)])
def test_tri_indices(row, col, off):
    np.testing.assert_array_equal(F.tril_indices(row, col, off).numpy(),
                                  np.stack(np.tril_indices(row, off, col)))
    np.testing.assert_array_equal(F.triu_indices(row, col, off).numpy(),
                                  np.stack(np.triu_indices(row, off, col)))
    assert F.tril_indices(row, col, off).dtype is F.int64
    assert F.triu_indices(row, col, off, dtype=F.int32).dtype is F.int32


# ---- diagonals -------------------------------------------------------------------------------

@SETTINGS
@given(st.data(), shapes(2, 4))
def test_diagonal_is_a_view(data, shape):
    t, a, dt = pair(data, shape)
    nd = len(shape)
    d1, d2 = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=2, max_size=2,
                                unique_by=lambda d: d % nd))
    off = data.draw(st.integers(-5, 5))
    v = F.diagonal(t, off, d1, d2)
    want = np.diagonal(a, off, d1, d2)
    assert_close(v, want, dt)
    assert_close(t.diagonal(offset=off, dim1=d1, dim2=d2), want, dt)
    assert v.untyped_storage() is t.untyped_storage()
    if v.numel():
        before = t._version
        v.copy_(F.ones(v.shape, dtype=dt))
        assert t._version == v._version and t._version > before
        # the same write in NumPy, by index (NumPy's diagonal is a read-only view)
        b = a.copy()
        idx = np.indices(want.shape)
        pos = [None] * nd
        rest = [i for i in range(nd) if i not in (d1 % nd, d2 % nd)]
        for k, i in enumerate(rest):
            pos[i] = idx[k]
        pos[d1 % nd] = idx[-1] + max(-off, 0)
        pos[d2 % nd] = idx[-1] + max(off, 0)
        b[tuple(pos)] = 1
        assert_close(t, b, dt)


@SETTINGS
@given(st.data(), st.integers(0, 5), st.integers(-3, 3))
def test_diag(data, n, k):
    t, a, dt = pair(data, (n,))
    assert_close(F.diag(t, k), np.diag(a, k), dt)
    m = data.draw(st.integers(0, 5))
    t2, a2, dt2 = pair(data, (n, m))
    d = F.diag(t2, k)
    assert_close(d, np.diag(a2, k), dt2)
    if d.numel():
        assert d.untyped_storage() is not t2.untyped_storage()  # a copy
    assert_close(t2.diagflat(k), np.diagflat(a2, k), dt2)


def test_diag_errors():
    with pytest.raises(RuntimeError, match="diag: Supports 1D or 2D tensors. Got 3D"):
        F.diag(F.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="diagonal: diagonal dimensions cannot be identical"):
        F.diagonal(F.ones(2, 2), 0, 1, -1)


@SETTINGS
@given(st.data(), shapes(1, 3))
def test_diag_embed(data, shape):
    t, a, dt = pair(data, shape)
    nd = len(shape) + 1
    d1, d2 = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=2, max_size=2,
                                unique_by=lambda d: d % nd))
    off = data.draw(st.integers(-3, 3))
    r = F.diag_embed(t, off, d1, d2)
    # reference: the diagonal of r must be the input, everything else zero
    n = shape[-1] + abs(off)
    assert r.shape[d1] == n and r.shape[d2] == n
    got = to_numpy(r)
    assert_close(F.diagonal(r, off, d1, d2), a, dt)
    idx = np.indices(got.shape)
    m = (idx[d2 % nd] - idx[d1 % nd]) == off
    assert not np.any(got[~m])


def test_trace():
    a = np.arange(12).reshape(3, 4)
    assert F.trace(F.from_numpy(a)).item() == np.trace(a)
    assert F.from_numpy(a.astype(np.float32)).trace().item() == np.trace(a)
    assert F.trace(F.from_numpy(a.astype(np.int8))).dtype is F.int64
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        F.trace(F.ones(3))


# ---- broadcasting, meshgrid, movedim, atleast ------------------------------------------------

def test_broadcast_to_tensors_shapes():
    t = F.arange(3.0)
    b = F.broadcast_to(t, (2, 3))
    assert b.shape == (2, 3) and b.stride() == (0, 1)
    assert b.untyped_storage() is t.untyped_storage()
    x, y = F.broadcast_tensors(F.ones(2, 1), F.zeros(3))
    assert x.shape == y.shape == (2, 3)
    assert F.broadcast_shapes((2, 1), (3,), 1) == np.broadcast_shapes((2, 1), (3,), (1,))
    assert isinstance(F.broadcast_shapes(2), F.Size)
    with pytest.raises(RuntimeError, match="broadcast_shapes"):
        F.broadcast_shapes((2,), (3,))
    with pytest.raises(RuntimeError, match="broadcast_tensors"):
        F.broadcast_tensors(F.ones(2), F.ones(3))
    with pytest.raises(RuntimeError, match="expand"):
        F.broadcast_to(F.ones(2), (3,))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3,), (2, 3), (2, 0, 4), (1, 2, 3, 2)])
def test_meshgrid(indexing, sizes):
    arrs = [np.arange(n) * (i + 1) for i, n in enumerate(sizes)]
    got = F.meshgrid(*[F.from_numpy(a) for a in arrs], indexing=indexing)
    want = np.meshgrid(*arrs, indexing=indexing)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)
    got2 = F.meshgrid([F.from_numpy(a) for a in arrs], indexing=indexing)
    assert [g.shape for g in got2] == [g.shape for g in got]


def test_meshgrid_errors():
    with pytest.raises(RuntimeError, match="meshgrid: Expected 0D or 1D tensor"):
        F.meshgrid(F.ones(2, 2))
    with pytest.raises(RuntimeError, match="meshgrid: expects all tensors to have the same "
                                           "dtype"):
        F.meshgrid(F.ones(2), F.ones(2, dtype=F.int64))
    with pytest.raises(RuntimeError, match="meshgrid: indexing must be"):
        F.meshgrid(F.ones(2), indexing="ab")


@SETTINGS
@given(st.data(), shapes(0, 5))
def test_movedim(data, shape):
    t, a, dt = pair(data, shape)
    nd = len(shape)
    if nd == 0:
        assert F.movedim(t, 0, 0).shape == ()
        return
    k = data.draw(st.integers(1, nd))
    src = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=k, max_size=k,
                             unique_by=lambda d: d % nd))
    dst = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=k, max_size=k,
                             unique_by=lambda d: d % nd))
    v = F.movedim(t, src, dst)
    assert_close(v, np.moveaxis(a, src, dst), dt)
    assert v.untyped_storage() is t.untyped_storage()
    assert_close(t.moveaxis(src[0], dst[0]), np.moveaxis(a, src[0], dst[0]), dt)
    d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    assert_close(F.swapaxes(t, d0, d1), np.swapaxes(a, d0, d1), dt)
    assert_close(F.swapdims(t, d0, d1), np.swapaxes(a, d0, d1), dt)


def test_views_write_through_and_share_the_version_counter():
    base = F.zeros(2, 3, 4)
    views = [F.movedim(base, 0, -1), F.moveaxis(base, (0, 1), (1, 0)), F.swapaxes(base, 0, 2),
             F.swapdims(base, 1, 2), F.diagonal(base, 1, 1, 2), F.atleast_3d(base),
             base.diagonal(0, 0, 2)]
    for k, v in enumerate(views):
        v0 = base._version
        idx = (0,) * v.ndim
        v[idx] = k + 1  # an in-place write through the view
        assert base._version == v._version > v0
        assert (base == k + 1).sum().item() >= 1
        base.zero_() if hasattr(base, "zero_") else base.copy_(F.zeros(2, 3, 4))
    src = F.arange(3.0)
    b = F.broadcast_to(src, (4, 3))
    src[1] = 7.0
    assert b[:, 1].tolist() == [7.0] * 4
    g = F.meshgrid(src, F.arange(2.0))[0]
    src[0] = -1.0
    assert g[0].tolist() == [-1.0, -1.0]


def test_movedim_errors():
    with pytest.raises(RuntimeError, match="movedim: Invalid source or destination dims"):
        F.movedim(F.ones(2, 3), (0, 1), (0,))
    with pytest.raises(RuntimeError, match="movedim: repeated dim in `source`"):
        F.movedim(F.ones(2, 3), (0, 0), (0, 1))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)])
def test_atleast(shape):
    a = np.arange(int(np.prod(shape))).reshape(shape)
    t = F.from_numpy(a)
    for f, g in ((F.atleast_1d, np.atleast_1d), (F.atleast_2d, np.atleast_2d),
                 (F.atleast_3d, np.atleast_3d)):
        r = f(t)
        assert_close(r, g(a))
        assert r.untyped_storage() is t.untyped_storage()
        both = f(t, t)
        assert isinstance(both, tuple) and len(both) == 2
        assert isinstance(f([t]), tuple)


def test_function_forms_of_layout_methods():
    a = np.arange(24).reshape(2, 3, 4)
    x = F.from_numpy(a)
    assert_close(F.transpose(x, 0, 2), a.transpose(2, 1, 0))
    assert_close(F.permute(x, (1, 2, 0)), a.transpose(1, 2, 0))
    assert_close(F.reshape(x, (4, -1)), a.reshape(4, -1))
    assert_close(F.squeeze(F.unsqueeze(x, 1), 1), a)
    assert_close(F.flatten(x, 1), a.reshape(2, 12))
    assert_close(F.unflatten(x, 2, (2, 2)), a.reshape(2, 3, 2, 2))
    assert_close(F.ravel(x.transpose(0, 2)), a.transpose(2, 1, 0).ravel())
    assert_close(x.ravel(), a.ravel())
    assert_close(F.narrow(x, 2, 1, 2), a[:, :, 1:3])
    n = F.narrow_copy(x, 2, 1, 2)
    assert_close(n, a[:, :, 1:3])
    assert n.is_contiguous() and n.untyped_storage() is not x.untyped_storage()
    assert_close(F.select(x, 1, -1), a[:, -1])
    assert [u.shape for u in F.unbind(x, 1)] == [(2, 4)] * 3
    assert_close(F.t(x[0]), a[0].T)
    assert_close(F.adjoint(x), a.transpose(0, 2, 1))
    assert_close(F.as_strided(x, (2, 2), (1, 2), 1), np.lib.stride_tricks.as_strided(
        a.ravel()[1:], (2, 2), (8, 16)))
    assert_close(F.clone(x), a)
    assert F.numel(x) == 24 and F.is_tensor(x) and not F.is_tensor(a)
    assert not F.is_floating_point(x) and F.is_floating_point(x.float())
    for v in (F.transpose(x, 0, 1), F.narrow(x, 0, 0, 1), F.select(x, 0, 0), F.detach(x)):
        assert v.untyped_storage() is x.untyped_storage()
    with pytest.raises(TypeError, match="transpose: expected input to be a Tensor"):
        F.transpose(a, 0, 1)


# ---- pad -------------------------------------------------------------------------------------

def _np_pad(a, pads, mode, value=0):
    """Reference: crop the negative amounts, then np.pad (edge/reflect/wrap)."""
    nd = a.ndim
    lr = [(0, 0)] * nd
    for i in range(len(pads) // 2):
        lr[nd - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    sl = tuple(slice(max(-lo, 0), a.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(lr))
    a = a[sl]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in lr]
    if not width:
        return a.copy()
    if mode == "constant":
        return np.pad(a, width, mode="constant", constant_values=value)
    return np.pad(a, width, mode={"reflect": "reflect", "replicate": "edge",
                                  "circular": "wrap"}[mode])


@SETTINGS
@given(st.data(), shapes(0, 4))
def test_pad_constant(data, shape):
    t, a, dt = pair(data, shape)
    npd = data.draw(st.integers(0, len(shape)))
    pads = []
    for i in range(npd):
        n = shape[len(shape) - 1 - i]
        lo = data.draw(st.integers(-n, 3))
        hi = data.draw(st.integers(-(n + lo) if lo < 0 else -n, 3))
        hi = max(hi, -(n - max(-lo, 0)))
        pads += [lo, hi]
    value = data.draw(st.sampled_from([None, 0, 1, 2.5]))
    if dt is F.bool and value == 2.5:
        value = 1
    want = _np_pad(a, pads, "constant", 0 if value is None else value)
    assert_close(F.pad(t, pads, value=value), want.astype(a.dtype), dt)


@SETTINGS
@given(st.data(), st.sampled_from(["reflect", "replicate", "circular"]), st.integers(1, 3))
def test_pad_modes(data, mode, npd):
    nd = npd + data.draw(st.integers(1, 2))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(nd))
    t, a, dt = pair(data, shape)
    pads = []
    for i in range(npd):
        n = shape[nd - 1 - i]
        top = n - 1 if mode == "reflect" else (n if mode == "circular" else 4)
        lo = data.draw(st.integers(-1 if n > 2 else 0, top))
        hi = data.draw(st.integers(0, top))
        if mode != "replicate":  # the amounts must fit the cropped size
            lo = min(lo, n - 1 if mode == "reflect" else n)
            hi = min(hi, n - max(-lo, 0) - (1 if mode == "reflect" else 0))
        pads += [lo, hi]
    want = _np_pad(a, pads, mode)
    assert_close(F.pad(t, pads, mode=mode), want, dt)


def _index_pad(a, pads, mode):
    """Reference by PyTorch's definition: output index o reads input index o - left, clamped
    (replicate), mirrored (reflect), or padding (constant, 0) outside the input."""
    nd = a.ndim
    for i in range(len(pads) // 2):
        d = nd - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        n = a.shape[d]
        idx = np.arange(n + lo + hi) - lo
        if mode == "replicate":
            a = np.take(a, np.clip(idx, 0, n - 1), axis=d)
        elif mode == "reflect":
            idx = np.abs(idx)
            a = np.take(a, np.where(idx >= n, 2 * (n - 1) - idx, idx), axis=d)
        else:
            ok = (idx >= 0) & (idx < n)
            a = np.take(a, np.where(ok, idx, 0), axis=d) if n else \
                np.zeros(a.shape[:d] + (len(idx),) + a.shape[d + 1:], a.dtype)
            shape = [1] * nd
            shape[d] = len(idx)
            a = np.where(ok.reshape(shape), a, 0)
    return a


@pytest.mark.parametrize("mode,shape,pads", [
    ("constant", (1,), (4, -2)), ("constant", (2, 3), (-5, 4, 3, -4)),
    ("constant", (0, 2), (1, 1, 3, -2)), ("replicate", (1, 4), (-4, 3)),
    ("replicate", (2, 3, 4), (-5, 2, 1, -3)), ("reflect", (3, 3, 4), (-3, 2)),
    ("reflect", (1, 4, 4), (3, -2, -3, 2)), ("replicate", (2, 2), (2, -3))])
def test_pad_crops_into_the_other_side(mode, shape, pads):
    a = np.random.default_rng(0).standard_normal(shape)
    assert_close(F.pad(F.from_numpy(a), pads, mode=mode), _index_pad(a, pads, mode))


def test_pad_errors():
    x = F.ones(1, 1, 4)
    with pytest.raises(RuntimeError, match="pad: Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(RuntimeError, match="pad: Padding length should be less than or equal"):
        F.pad(x, (1,) * 8)
    with pytest.raises(RuntimeError, match="pad: Padding size should be less than the "
                                           "corresponding input dimension"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="pad: Padding value causes wrapping around more "
                                           "than once"):
        F.pad(x, (5, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="pad: Padding size 2 is not supported for 1D"):
        F.pad(F.ones(4), (1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="pad: Unrecognised padding mode foo"):
        F.pad(x, (1, 1), mode="foo")
    with pytest.raises(RuntimeError, match='pad: Padding mode "reflect" doesn\'t take in value'):
        F.pad(x, (1, 1), mode="reflect", value=1.0)
    with pytest.raises(RuntimeError, match="pad: The input size 4, plus negative padding -3 "
                                           "and -3 resulted in a negative output size"):
        F.pad(x, (-3, -3))
    assert F.pad(F.arange(3), (1, 1), value=2.7).tolist() == [2, 0, 1, 2, 2]


# ---- one_hot, block_diag, cartesian_prod, combinations, vander --------------------------------

@SETTINGS
@given(st.data(), shapes(0, 3))
def test_one_hot(data, shape):
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    a = rng.integers(0, 5, shape)
    t = to_tensor(a, F.int64)
    nc = data.draw(st.sampled_from([-1, 5, 7]))
    if nc == -1 and a.size == 0:
        with pytest.raises(RuntimeError, match="one_hot: Can not infer total number of classes"):
            F.one_hot(t)
        return
    n = a.max() + 1 if nc == -1 else nc
    r = F.one_hot(t, nc)
    assert r.dtype is F.int64
    assert_close(r, np.eye(n, dtype=np.int64)[a] if a.size else np.zeros(shape + (n,), np.int64))


def test_one_hot_errors():
    with pytest.raises(RuntimeError, match="one_hot: Class values must be smaller than "
                                           "num_classes"):
        F.one_hot(F.tensor([0, 3]), 3)
    with pytest.raises(RuntimeError, match="one_hot: Class values must be non-negative"):
        F.one_hot(F.tensor([0, -1]), 3)
    with pytest.raises(RuntimeError, match="one_hot: one_hot is only applicable to index tensor"):
        F.one_hot(F.tensor([0.0]), 3)


def test_block_diag():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 9, (2, 3))
    b = rng.integers(0, 9, (4,))
    c = np.array(7.0)
    e = np.zeros((0, 2))
    r = F.block_diag(F.from_numpy(a).t(), F.from_numpy(b), F.from_numpy(c), F.from_numpy(e))
    want = np.zeros((3 + 1 + 1 + 0, 2 + 4 + 1 + 2))
    want[0:3, 0:2] = a.T
    want[3, 2:6] = b
    want[4, 6] = 7.0
    assert r.dtype is F.float64
    assert_close(r, want)
    assert F.block_diag().shape == (0, 0)
    with pytest.raises(RuntimeError, match="block_diag: Input tensors must have 2 or fewer"):
        F.block_diag(F.ones(1, 1, 1))


def test_cartesian_prod_and_combinations():
    a, b, c = [1, 2, 3], [4, 5], [6, 7]
    got = F.cartesian_prod(F.tensor(a), F.tensor(b), F.tensor(c))
    assert got.tolist() == [list(p) for p in itertools.product(a, b, c)]
    assert F.cartesian_prod(F.tensor(a)).tolist() == a
    x = F.tensor([10, 20, 30, 40])
    for r in range(0, 5):
        for rep in (False, True):
            f = itertools.combinations_with_replacement if rep else itertools.combinations
            want = [list(p) for p in f([10, 20, 30, 40], r)]
            got = F.combinations(x, r, with_replacement=rep)
            if r == 0:
                assert got.shape == (0,)
            else:
                assert got.tolist() == want or (not want and got.shape == (0, r))
    with pytest.raises(RuntimeError, match="combinations: Expect a 1D vector"):
        F.combinations(F.ones(2, 2))


@pytest.mark.parametrize("dt", [F.int32, F.int64, F.float32, F.float64])
@pytest.mark.parametrize("N", [None, 0, 1, 4])
@pytest.mark.parametrize("inc", [False, True])
def test_vander(dt, N, inc):
    a = np.array([2, -1, 3, 0])
    got = F.vander(to_tensor(a, dt), N, inc)
    want = np.vander(a, N, inc)
    assert got.dtype is (dt if dt.is_floating_point else F.int64)
    assert_close(got, want, check_dtype=False)


# ---- einsum ----------------------------------------------------------------------------------

EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bi,bi->b", [(6, 3), (6, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i->...", [(2, 3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("ab,cd,bc->da", [(2, 3), (4, 5), (3, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("aab,bc->ac", [(3, 3, 4), (4, 2)]),
    ("ij,kl->ijkl", [(2, 3), (1, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    (",ij->ij", [(), (2, 3)]),
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("ij,j->i", [(3, 0), (0,)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),
    ("a b , b c -> a c", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes_", EQUATIONS)
@pytest.mark.parametrize("dt", [F.float64, F.float32, F.int64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_einsum(eq, shapes_, dt, layout):
    rng = np.random.default_rng(len(eq))
    pairs = [make_pair(s, dt, rng, layout) for s in shapes_]
    got = F.einsum(eq, *[p[0] for p in pairs])
    want = np.einsum(eq.replace(" ", ""), *[p[1] for p in pairs])
    assert_close(got, want, dt, rtol=1e-4 if dt is F.float32 else None)
    got2 = F.einsum(eq, [p[0] for p in pairs])
    assert_close(got2, want, dt, rtol=1e-4 if dt is F.float32 else None)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_einsum_random_equations(data):
    letters = "abcde"
    size = {c: data.draw(st.integers(0 if c == "e" else 1, 3)) for c in letters}
    nops = data.draw(st.integers(1, 4))
    subs = [data.draw(st.text(letters, min_size=0, max_size=4)) for _ in range(nops)]
    used = sorted(set("".join(subs)))
    eq = ",".join(subs)
    if data.draw(st.booleans()):
        out = data.draw(st.permutations(used))[:data.draw(st.integers(0, len(used)))]
        eq += "->" + "".join(out)
    dt = data.draw(st.sampled_from([F.float64, F.int64, F.float32]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    layout = data.draw(st.sampled_from(LAYOUTS))
    pairs = [make_pair([size[c] for c in s_], dt, rng, layout, low=-3, high=3) for s_ in subs]
    got = F.einsum(eq, *[p[0] for p in pairs])
    want = np.einsum(eq, *[p[1].astype(np.float64) for p in pairs])
    assert_close(got, want.astype(dt._np), dt, rtol=1e-4 if dt is F.float32 else None,
                 atol=1e-3 if dt is F.float32 else None)


@pytest.mark.parametrize("dt", [F.float16, F.bfloat16])
def test_einsum_half_precision(dt):
    rng = np.random.default_rng(4)
    ta, a = make_pair((2, 3, 4), dt, rng, "transposed", low=-2, high=2)
    tb, b = make_pair((2, 4, 5), dt, rng, "strided", low=-2, high=2)
    got = F.einsum("bij,bjk->bik", ta, tb)
    assert got.dtype is dt
    assert_close(got, np.einsum("bij,bjk->bik", a.astype(np.float64), b), dt, rtol=2e-2,
                 atol=5e-2)


def test_einsum_sublist_format():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    got = F.einsum(F.from_numpy(a), [0, 1, 2], F.from_numpy(b), [2, 3], [0, 1, 3])
    assert_close(got, np.einsum(a, [0, 1, 2], b, [2, 3], [0, 1, 3]))
    got = F.einsum(F.from_numpy(a), [Ellipsis, 2], F.from_numpy(b), [2, 3])
    assert_close(got, np.einsum("...c,cd", a, b))
    with pytest.raises(ValueError, match="einsum\\(\\): subscript in subscript list"):
        F.einsum(F.from_numpy(b), [0, 99])


def test_einsum_broadcasts_size_one_dims():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 1, 3))
    b = rng.standard_normal((1, 4, 3))
    got = F.einsum("bij,bkj->bik", F.from_numpy(a), F.from_numpy(b))
    want = np.einsum("bij,bkj->bik", np.broadcast_to(a, (2, 1, 3)),
                     np.broadcast_to(b, (2, 4, 3)))
    assert_close(got, want)


def test_einsum_errors():
    x = F.ones(2, 3)
    with pytest.raises(RuntimeError, match="einsum\\(\\): the number of subscripts"):
        F.einsum("ijk", x)
    with pytest.raises(RuntimeError, match="einsum\\(\\): subscript i is repeated for operand 0 "
                                           "but the sizes don't match, 2 != 3"):
        F.einsum("ii", x)
    with pytest.raises(RuntimeError, match="einsum\\(\\): output subscript k does not appear"):
        F.einsum("ij->k", x)
    with pytest.raises(RuntimeError, match="einsum\\(\\): operands do not broadcast"):
        F.einsum("ij,ij->i", x, F.ones(2, 4))
    with pytest.raises(RuntimeError, match="einsum\\(\\): 2 operands in the equation"):
        F.einsum("ij,jk", x)
    with pytest.raises(RuntimeError, match="einsum\\(\\): invalid subscript"):
        F.einsum("i1", x)


# ---- tensordot, kron, cross, cdist -----------------------------------------------------------

@pytest.mark.parametrize("sa,sb,dims", [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 2), 1),
                                        ((2, 3), (4, 5), 0), ((3, 4, 5), (5, 3), ([0, 2], [1, 0])),
                                        ((2, 0), (0, 3), 1)])
@pytest.mark.parametrize("dt", [F.float64, F.int32])
def test_tensordot(sa, sb, dims, dt):
    rng = np.random.default_rng(0)
    ta, a = make_pair(sa, dt, rng, "transposed")
    tb, b = make_pair(sb, dt, rng, "strided")
    assert_close(F.tensordot(ta, tb, dims), np.tensordot(a, b, dims), dt)


def test_tensordot_errors():
    with pytest.raises(RuntimeError, match="tensordot: contracted dimensions need to match"):
        F.tensordot(F.ones(2, 3), F.ones(4, 2), 1)


@SETTINGS
@given(st.data(), shapes(0, 3, max_side=3), shapes(0, 3, max_side=3))
def test_kron(data, sa, sb):
    dt = data.draw(st.sampled_from([F.int64, F.float32, F.float64, F.uint8]))
    ta, a, _ = pair(data, sa, dt)
    tb, b, _ = pair(data, sb, dt)
    assert_close(F.kron(ta, tb), np.kron(a, b), dt)
    assert_close(ta.kron(tb), np.kron(a, b), dt)


@SETTINGS
@given(st.data(), shapes(0, 3, 1, 4))
def test_cross(data, shape):
    dt = data.draw(st.sampled_from([F.int64, F.float32, F.float64]))
    d = data.draw(st.integers(0, len(shape)))
    s = shape[:d] + (3,) + shape[d:]
    ta, a, _ = pair(data, s, dt)
    tb, b, _ = pair(data, s, dt)
    assert_close(F.cross(ta, tb, dim=d), np.cross(a, b, axis=d), dt)
    first3 = s.index(3)
    assert_close(ta.cross(tb), np.cross(a, b, axis=first3), dt)


def test_cross_errors():
    with pytest.raises(RuntimeError, match="cross: inputs dimension 0 must have length 3"):
        F.cross(F.ones(4), F.ones(4), 0)
    with pytest.raises(RuntimeError, match="cross: no dimension of size 3"):
        F.cross(F.ones(4), F.ones(4))


def _cdist_ref(a, b, p):
    d = np.abs(a[..., :, None, :].astype(np.float64) - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(np.float64)
    if p == np.inf:
        return d.max(-1) if d.shape[-1] else np.zeros(d.shape[:-1])
    return (d ** p).sum(-1) ** (1.0 / p)


@pytest.mark.parametrize("p", [0, 1, 1.5, 2, 3, np.inf])
@pytest.mark.parametrize("sa,sb", [((5, 3), (4, 3)), ((2, 30, 4), (40, 4)),
                                   ((3, 1, 6, 2), (2, 7, 2)), ((0, 3), (4, 3))])
@pytest.mark.parametrize("dt", [F.float32, F.float64])
def test_cdist(p, sa, sb, dt):
    rng = np.random.default_rng(0)
    ta, a = make_pair(sa, dt, rng, "strided")
    tb, b = make_pair(sb, dt, rng, "contiguous")
    want = _cdist_ref(a, b, p)
    tol = 1e-4 if dt is F.float32 else 1e-9
    assert_close(F.cdist(ta, tb, p), want, dt, rtol=tol, atol=tol * 10)
    if p == 2:
        for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
            assert_close(F.cdist(ta, tb, p, compute_mode=mode), want, dt, rtol=tol,
                         atol=tol * 100)


def test_cdist_in_blocks(monkeypatch):
    from fiamma._ops import einsum as E

    monkeypatch.setattr(E, "_CDIST_BLOCK", 50)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 9, 4)), rng.standard_normal((2, 7, 4))
    assert_close(F.cdist(F.from_numpy(a), F.from_numpy(b), 1.0), _cdist_ref(a, b, 1.0))


def test_cdist_errors():
    with pytest.raises(RuntimeError, match="cdist: cdist only supports floating-point dtypes"):
        F.cdist(F.ones(2, 2, dtype=F.int64), F.ones(2, 2, dtype=F.int64))
    with pytest.raises(RuntimeError, match="cdist: X1 and X2 must have the same number of "
                                           "columns"):
        F.cdist(F.ones(2, 2), F.ones(2, 3))


# ---- autograd recording ----------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        if isinstance(out, F.Tensor):
            out.requires_grad = True
        self.calls.append((op, inputs, kwargs))

    def record_inplace(self, op, out, inputs, kwargs):
        self.calls.append((op, inputs, kwargs))

    def requires_grad_(self, t, flag):
        t.requires_grad = bool(flag)


@pytest.fixture
def recorder():
    prev = G._recorder
    rec = Recorder()
    G.register_autograd(rec)
    yield rec
    G._recorder = prev


def test_records(recorder):
    x = F.ones(3, 3).requires_grad_()
    checks = [
        (lambda: F.flip(x, [0]), "flip", {"dims": (0,)}),
        (lambda: F.roll(x, 1, 0), "roll", {"shifts": (1,), "dims": (0,)}),
        (lambda: F.rot90(x, 1), "rot90", {"k": 1, "dims": (0, 1)}),
        (lambda: x.repeat(2, 1), "repeat", {"repeats": (2, 1)}),
        (lambda: F.tile(x, (2,)), "repeat", {"repeats": (1, 2)}),
        (lambda: x.repeat_interleave(2, 0), "repeat_interleave",
         {"repeats": 2, "dim": 0, "output_size": None}),
        (lambda: F.tril(x, 1), "tril", {"diagonal": 1}),
        (lambda: F.triu(x), "triu", {"diagonal": 0}),
        (lambda: F.diag(x), "diag", {"diagonal": 0}),
        (lambda: F.diag_embed(x, 1), "diag_embed", {"offset": 1, "dim1": 1, "dim2": 2}),
        (lambda: F.diagflat(x), "diagflat", {"offset": 0}),
        (lambda: F.diagonal(x), "diagonal", None),
        (lambda: F.pad(x, (1, 1)), "pad", {"pad": (1, 1), "mode": "constant", "value": 0}),
        (lambda: F.block_diag(x, x), "block_diag", {}),
    ]
    for fn, op, kw in checks:
        recorder.calls.clear()
        fn()
        assert recorder.calls, op
        assert recorder.calls[-1][0] == op, (op, recorder.calls)
        if kw is not None:
            assert recorder.calls[-1][2] == kw, (op, recorder.calls[-1][2])
        assert len(recorder.calls) == 1, (op, [c[0] for c in recorder.calls])
    recorder.calls.clear()
    F.einsum("ij,jk->ik", x, x)
    assert [c[0] for c in recorder.calls] == ["matmul"]
    y = F.ones(3, 3)
    recorder.calls.clear()
    F.flip(y, [0])
    F.pad(y, (1, 1))
    assert recorder.calls == []


# ---- larger inputs -----------------------------------------------------------------------------

def test_flip_large_matches_numpy():
    a = np.arange(3 * 1000 * 7, dtype=np.float32).reshape(3, 1000, 7)
    t = F.from_numpy(a)[:, ::3]
    assert_close(F.flip(t, (0, 1, 2)), np.flip(a[:, ::3]))
    assert_close(F.roll(t, (5, -2), (1, 2)), np.roll(a[:, ::3], (5, -2), (1, 2)))


# ---- the contiguous fast path of view/reshape ---------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_view_reshape_fast_path_against_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 6, 24, 60]))
    base = F.arange(float(n + 3))
    x = base[3:] if seed % 2 else base[:n]  # contiguous, with and without an offset
    ref = np.arange(float(n + 3))[3:] if seed % 2 else np.arange(float(n + 3))[:n]
    divisors = [d for d in range(1, n + 1) if n % d == 0] or [0]
    for _ in range(6):
        d = int(rng.choice(divisors))
        shape = (d, n // d if d else 0)
        forms = [shape, list(shape), F.Size(shape), (shape[0], -1) if d else shape]
        for form in forms:
            for f in ("view", "reshape"):
                y = getattr(x, f)(form) if not isinstance(form, tuple) or len(form) != 2 \
                    else getattr(x, f)(*form)
                assert y.shape == ref.reshape(shape).shape
                np.testing.assert_array_equal(y.numpy(), ref.reshape(shape))
                assert y.data_ptr() == x.data_ptr() and y.storage_offset() == x.storage_offset()
                assert y.stride() == tuple(np.zeros(shape).strides[i] // 8
                                           for i in range(2)) or 0 in shape
                assert y.is_contiguous() and y._base is base
                # the C fast path's flag (FIAMMA_CPU_BACKEND=xp turns the fast path off)
                assert y._cpu_contig is not XP_HOST


def test_view_fast_path_leaves_errors_to_the_general_path():
    x = F.arange(6.0)
    for bad, err in [((4, -1), RuntimeError), ((-1, -1), RuntimeError), ((7,), RuntimeError),
                     ((-2, -3), RuntimeError), ((True, 6), None), ((np.int64(2), 3), None),
                     ((0, -1), RuntimeError), ((2.0, 3), TypeError)]:
        for f in ("view", "reshape"):
            if err is None:
                assert getattr(x, f)(*bad).shape == (int(bad[0]), int(bad[1]))
            else:
                with pytest.raises(err):
                    getattr(x, f)(*bad)
    assert x.view(F.float32).dtype == F.float32  # a dtype still reinterprets
    assert F.ones(1).view(()).shape == () and F.ones(1, 1).reshape([]).shape == ()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_constant_pad_of_complex_tensors(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)) + 1j * rng.standard_normal((2, 3, 4))
    x = x.astype(dtype)
    t = F.from_numpy(x.copy()).transpose(0, 2)  # a strided input
    got = F.pad(t, (1, 2, 0, 1), value=2.5).numpy()
    want = np.pad(x.transpose(2, 1, 0), ((0, 0), (0, 1), (1, 2)), constant_values=2.5)
    np.testing.assert_array_equal(got, want)
    got = F.pad(F.from_numpy(x.copy()), (1, 0), value=1 + 2j).numpy()
    assert got[0, 0, 0] == 1 + 2j
    np.testing.assert_array_equal(got[..., 1:], x)
