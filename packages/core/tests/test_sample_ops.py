"""Resampling ops (upsample, upsample_backward, grid_sampler, grid_sampler_backward and the
shuffles) against float64 NumPy references written from PyTorch's documented conventions."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma

# ---- references -------------------------------------------------------------------------------


def _cubic(t, A=-0.75):
    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _matrix(mode, n_in, n_out, ac, scale):
    """(n_out, n_in) resampling matrix of one dim."""
    m = np.zeros((n_out, n_in))
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
        for o in range(n_out):
            v = np.float32((o + (0.5 if mode == "nearest-exact" else 0.0)) * float(s))
            m[o, min(int(np.floor(v)), n_in - 1)] = 1
        return m
    if ac:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale else n_in / n_out
    for o in range(n_out):
        r = s * o if ac else s * (o + 0.5) - 0.5
        if mode == "linear":
            if n_in == n_out:
                m[o, o] = 1
                continue
            r = max(r, 0.0)
            i = min(int(np.floor(r)), n_in - 1)
            t = min(max(r - i, 0.0), 1.0)
            m[o, i] += 1 - t
            m[o, min(i + 1, n_in - 1)] += t
        else:
            i = min(int(np.floor(r)), n_in - 1)
            t = min(max(r - i, 0.0), 1.0)
            for k, w in enumerate(_cubic(t)):
                m[o, min(max(i - 1 + k, 0), n_in - 1)] += w
    return m


def ref_upsample(x, size, mode, ac, scales):
    y = x
    for d, n_out in enumerate(size):
        sc = scales[d] if scales else None
        m = _matrix(mode, x.shape[2 + d], n_out, ac, sc)
        y = np.moveaxis(np.tensordot(y, m, axes=([2 + d], [1])), -1, 2 + d)
    return y


def _unnorm(c, n, ac):
    return (c + 1) / 2 * (n - 1) if ac else ((c + 1) * n - 1) / 2


def _reflect(v, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    v = abs(v - lo)
    extra, flips = np.fmod(v, span), np.floor(v / span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _pad(v, n, pad, ac):
    if pad == 1:
        return min(max(v, 0.0), n - 1.0)
    if pad == 2:
        v = _reflect(v, 0, 2 * (n - 1)) if ac else _reflect(v, -1, 2 * n - 1)
        return min(max(v, 0.0), n - 1.0)
    return v


def ref_grid_sample(x, grid, mode, pad, ac):
    n, c = x.shape[:2]
    sp = x.shape[2:]
    nsp = len(sp)
    out = np.zeros((n, c) + grid.shape[1:-1])
    for b in range(n):
        for pt in np.ndindex(*grid.shape[1:-1]):
            g = grid[(b,) + pt]
            # coordinate of spatial dim d is grid component nsp - 1 - d
            if mode == 2:
                u = [_unnorm(g[nsp - 1 - d], sp[d], ac) for d in range(nsp)]
                f = [np.floor(v) for v in u]
                cf = [_cubic(v - fl) for v, fl in zip(u, f)]
                acc = np.zeros(c)
                for i in range(4):
                    for j in range(4):
                        iy = int(_pad(f[0] - 1 + i, sp[0], pad, ac))
                        ix = int(_pad(f[1] - 1 + j, sp[1], pad, ac))
                        if 0 <= iy < sp[0] and 0 <= ix < sp[1]:
                            acc += cf[0][i] * cf[1][j] * x[b, :, iy, ix]
                out[(b, slice(None)) + pt] = acc
                continue
            v = [_pad(_unnorm(g[nsp - 1 - d], sp[d], ac), sp[d], pad, ac) for d in range(nsp)]
            if mode == 1:
                idx = [int(np.rint(t)) for t in v]
                if all(0 <= i < s for i, s in zip(idx, sp)):
                    out[(b, slice(None)) + pt] = x[(b, slice(None)) + tuple(idx)]
                continue
            f = [int(np.floor(t)) for t in v]
            acc = np.zeros(c)
            for corner in np.ndindex(*(2,) * nsp):
                idx = [fi + k for fi, k in zip(f, corner)]
                if all(0 <= i < s for i, s in zip(idx, sp)):
                    w = np.prod([t - fi if k else 1 - (t - fi)
                                 for t, fi, k in zip(v, f, corner)])
                    acc += w * x[(b, slice(None)) + tuple(idx)]
            out[(b, slice(None)) + pt] = acc
    return out


def _noncontig(rng, shape):
    base = rng.standard_normal(shape[:-2] + (shape[-1], shape[-2]))
    return fiamma.tensor(base).transpose(-1, -2)


# ---- upsample -------------------------------------------------------------------------------

MODES = ["nearest", "nearest-exact", "linear", "cubic"]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(MODES), st.integers(1, 3), st.booleans(),
       st.booleans())
def test_upsample_matches_reference(seed, mode, nsp, ac, use_scale):
    rng = np.random.default_rng(seed)
    isz = tuple(int(v) for v in rng.integers(1, 7, nsp))
    n, c = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    if use_scale:
        scales = tuple(float(rng.choice([0.6, 1.7, 2.0, 0.5, 3.0, 1.0])) for _ in range(nsp))
        size = tuple(max(int(np.floor(i * s)), 1) for i, s in zip(isz, scales))
    else:
        scales = None
        size = tuple(int(v) for v in rng.integers(1, 9, nsp))
    x = _noncontig(rng, (n, c) + isz) if nsp >= 1 and rng.random() < 0.5 else \
        fiamma.tensor(rng.standard_normal((n, c) + isz))
    want = ref_upsample(x.numpy(), size, mode, ac and mode in ("linear", "cubic"), scales)
    got = fiamma.upsample(x, size, mode, ac, scales)
    assert got.dtype == fiamma.float64 and tuple(got.shape) == (n, c) + size
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # float32 agrees with the float64 result to rounding
    got32 = fiamma.upsample(x.to(fiamma.float32), size, mode, ac, scales)
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-4, atol=1e-5)
    # the backward is the adjoint: <up(x), g> == <x, up_back(g)>
    g = rng.standard_normal((n, c) + size)
    gb = fiamma.upsample_backward(fiamma.tensor(g), (n, c) + isz, mode, ac, scales)
    np.testing.assert_allclose((want * g).sum(), (x.numpy() * gb.numpy()).sum(), rtol=1e-9,
                               atol=1e-9)


def test_upsample_known_values():
    x = fiamma.tensor([[[0.0, 1.0, 2.0]]])
    assert fiamma.upsample(x, (6,), "nearest").tolist() == [[[0, 0, 1, 1, 2, 2]]]
    assert fiamma.upsample(x, (2,), "nearest-exact").tolist() == [[[0.0, 2.0]]]
    np.testing.assert_allclose(fiamma.upsample(x, (5,), "linear", True).numpy()[0, 0],
                               [0, 0.5, 1, 1.5, 2])
    # scale factor given: it drives the mapping (1/1.7), not in/out
    y = fiamma.upsample(x, (5,), "linear", False, (1.7,))
    np.testing.assert_allclose(y.numpy(), ref_upsample(x.numpy(), (5,), "linear", False, (1.7,)))
    assert not np.allclose(y.numpy(), fiamma.upsample(x, (5,), "linear").numpy())


@pytest.mark.parametrize("dt", [fiamma.float16, fiamma.bfloat16, fiamma.int64, fiamma.uint8])
def test_upsample_dtypes(dt):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 50, (2, 3, 4, 5)).astype(np.float64)
    x = fiamma.tensor(a).to(dt)
    y = fiamma.upsample(x, (7, 3), "nearest")
    assert y.dtype == dt
    np.testing.assert_array_equal(y.to(fiamma.float64).numpy(),
                                  ref_upsample(a, (7, 3), "nearest", False, None))
    if dt.is_floating_point:
        y = fiamma.upsample(x, (7, 3), "linear", True)
        assert y.dtype == dt
        np.testing.assert_allclose(y.to(fiamma.float64).numpy(),
                                   ref_upsample(a, (7, 3), "linear", True, None), rtol=2e-2)
    else:
        with pytest.raises(TypeError, match="upsample: not implemented for dtype"):
            fiamma.upsample(x, (7, 3), "linear")


def test_upsample_errors():
    x = fiamma.ones(1, 2, 3, 3)
    with pytest.raises(ValueError, match="upsample: mode must be one of"):
        fiamma.upsample(x, (4, 4), "area")
    with pytest.raises(ValueError, match="upsample: expected a 5-D input"):
        fiamma.upsample(x, (4, 4, 4), "nearest")
    with pytest.raises(ValueError, match="upsample: output sizes must be > 0"):
        fiamma.upsample(x, (0, 4), "nearest")
    with pytest.raises(ValueError, match="upsample: expected 1 to 3 spatial sizes"):
        fiamma.upsample(fiamma.ones(1, 1, 1, 1, 1, 1), (1, 1, 1, 1), "nearest")
    with pytest.raises(ValueError, match="upsample: input sizes must be > 0"):
        fiamma.upsample(fiamma.ones(1, 0, 3), (4,), "nearest")
    with pytest.raises(TypeError, match="upsample: not implemented for dtype"):
        fiamma.upsample(fiamma.ones(1, 1, 3, dtype=fiamma.bool), (4,), "nearest")
    with pytest.raises(TypeError, match="upsample: expected a Tensor"):
        fiamma.upsample([1.0], (4,), "nearest")
    with pytest.raises(ValueError, match="upsample_backward: grad_output of shape"):
        fiamma.upsample_backward(fiamma.ones(1, 2, 4), (1, 3, 2), "linear")


# ---- grid_sampler ---------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([(2, 0), (2, 1), (2, 2), (3, 0), (3, 1)]),
       st.integers(0, 2), st.booleans())
def test_grid_sampler_matches_reference(seed, nsp_mode, pad, ac):
    nsp, mode = nsp_mode
    rng = np.random.default_rng(seed)
    isz = tuple(int(v) for v in rng.integers(1, 6, nsp))
    osz = tuple(int(v) for v in rng.integers(1, 4, nsp))
    n, c = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    x = _noncontig(rng, (n, c) + isz) if rng.random() < 0.5 else \
        fiamma.tensor(rng.standard_normal((n, c) + isz))
    grid = rng.uniform(-1.6, 1.6, (n,) + osz + (nsp,))
    want = ref_grid_sample(x.numpy(), grid, mode, pad, ac)
    got = fiamma.grid_sampler(x, fiamma.tensor(grid), mode, pad, ac)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    got32 = fiamma.grid_sampler(x.to(fiamma.float32), fiamma.tensor(grid, dtype=fiamma.float32),
                                mode, pad, ac)
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-4, atol=1e-4)
    # input gradient: the adjoint; grid gradient: central differences of the reference
    g = rng.standard_normal(want.shape)
    gx, gg = fiamma.grid_sampler_backward(fiamma.tensor(g), x, fiamma.tensor(grid), mode, pad,
                                          ac)
    np.testing.assert_allclose((want * g).sum(), (x.numpy() * gx.numpy()).sum(), rtol=1e-9,
                               atol=1e-9)
    eps = 1e-6
    num = np.zeros_like(grid)
    if mode != 1:
        for i in np.ndindex(*grid.shape):
            hi, lo = grid.copy(), grid.copy()
            hi[i] += eps
            lo[i] -= eps
            num[i] = ((ref_grid_sample(x.numpy(), hi, mode, pad, ac) -
                       ref_grid_sample(x.numpy(), lo, mode, pad, ac)) * g).sum() / (2 * eps)
    np.testing.assert_allclose(gg.numpy(), num, rtol=1e-4, atol=1e-5)


def test_grid_sampler_edge_values():
    x = fiamma.arange(6.0).reshape(1, 1, 2, 3)
    far = fiamma.tensor([[[[5.0, 5.0], [float("nan"), 0.0], [float("inf"), -1e30]]]])
    y = fiamma.grid_sampler(x, far, 0, 0, False)  # outside / NaN / inf: zeros, no crash
    assert y.tolist() == [[[[0.0, 0.0, 0.0]]]]
    y = fiamma.grid_sampler(x, fiamma.tensor([[[[5.0, 5.0]]]]), 0, 1, False)  # border
    assert y.item() == 5.0
    # bicubic + border: a far coordinate clamps every tap to the last column
    y = fiamma.grid_sampler(x, fiamma.tensor([[[[1e30, 0.0]]]]), 2, 1, False)
    assert y.item() == pytest.approx(3.5)


def test_grid_sampler_errors():
    x = fiamma.ones(1, 2, 3, 3)
    with pytest.raises(ValueError, match="grid_sampler: expected grid of shape"):
        fiamma.grid_sampler(x, fiamma.zeros(2, 2, 2, 2))
    with pytest.raises(ValueError, match="grid_sampler: expected a 4-D or 5-D input"):
        fiamma.grid_sampler(fiamma.ones(1, 2, 3), fiamma.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="grid_sampler: bicubic interpolation needs a 4-D"):
        fiamma.grid_sampler(fiamma.ones(1, 1, 2, 2, 2), fiamma.zeros(1, 1, 1, 1, 3), 2)
    with pytest.raises(ValueError, match="grid_sampler: interpolation_mode must be"):
        fiamma.grid_sampler(x, fiamma.zeros(1, 2, 2, 2), 3)
    with pytest.raises(ValueError, match="grid_sampler: padding_mode must be"):
        fiamma.grid_sampler(x, fiamma.zeros(1, 2, 2, 2), 0, 5)
    with pytest.raises(TypeError, match="grid_sampler: expected grid to have the dtype"):
        fiamma.grid_sampler(x, fiamma.zeros(1, 2, 2, 2, dtype=fiamma.float64))
    with pytest.raises(ValueError, match="grid_sampler_backward: expected grad_output"):
        fiamma.grid_sampler_backward(fiamma.ones(1, 2, 3, 3), x, fiamma.zeros(1, 2, 2, 2))


def test_grid_sampler_half_and_empty():
    x = fiamma.arange(4.0).reshape(1, 1, 2, 2)
    g = fiamma.tensor([[[[0.0, 0.0]]]])
    for dt in (fiamma.float16, fiamma.bfloat16):
        y = fiamma.grid_sampler(x.to(dt), g.to(dt), 0, 0, True)
        assert y.dtype == dt and y.item() == 1.5
    y = fiamma.grid_sampler(fiamma.ones(0, 3, 2, 2), fiamma.zeros(0, 4, 5, 2))
    assert tuple(y.shape) == (0, 3, 4, 5)


# ---- shuffles -------------------------------------------------------------------------------

def test_shuffles():
    a = np.arange(2 * 18 * 2 * 2, dtype=np.float64).reshape(2, 18, 2, 2)
    x = fiamma.tensor(a)
    ref = a.reshape(2, 2, 3, 3, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 6)
    np.testing.assert_array_equal(fiamma.pixel_shuffle(x, 3).numpy(), ref)
    np.testing.assert_array_equal(fiamma.pixel_unshuffle(fiamma.tensor(ref), 3).numpy(), a)
    ref = a.reshape(2, 6, 3, 2, 2).transpose(0, 2, 1, 3, 4).reshape(2, 18, 2, 2)
    np.testing.assert_array_equal(fiamma.channel_shuffle(x, 6).numpy(), ref)
    with pytest.raises(ValueError, match="pixel_shuffle: upscale_factor must be > 0"):
        fiamma.pixel_shuffle(x, 0)
    with pytest.raises(ValueError, match="channel_shuffle: expected an input with at least 3"):
        fiamma.channel_shuffle(fiamma.ones(2, 4), 2)


def test_threaded_paths_match_single_plane_calls():
    # sizes above the threading threshold (and a batch of 1, so grid_sample's backward splits
    # channels into groups whose grid gradients are summed) agree with per-channel calls
    rng = np.random.default_rng(11)
    x = fiamma.tensor(rng.standard_normal((1, 16, 40, 40)))
    grid = fiamma.tensor(rng.uniform(-1.1, 1.1, (1, 64, 64, 2)))
    gy = fiamma.tensor(rng.standard_normal((1, 16, 64, 64)))
    for mode in (0, 2):
        y = fiamma.grid_sampler(x, grid, mode, 2, False)
        gx, gg = fiamma.grid_sampler_backward(gy, x, grid, mode, 2, False)
        gg_sum = np.zeros(tuple(grid.shape))
        for ch in range(16):
            xc, gc = x[:, ch:ch + 1], gy[:, ch:ch + 1]
            np.testing.assert_allclose(y[:, ch:ch + 1].numpy(),
                                       fiamma.grid_sampler(xc, grid, mode, 2, False).numpy(),
                                       rtol=1e-12, atol=1e-12)
            gxc, ggc = fiamma.grid_sampler_backward(gc, xc, grid, mode, 2, False)
            np.testing.assert_allclose(gx[:, ch:ch + 1].numpy(), gxc.numpy(), rtol=1e-12,
                                       atol=1e-12)
            gg_sum += ggc.numpy()
        np.testing.assert_allclose(gg.numpy(), gg_sum, rtol=1e-9, atol=1e-9)
    for mode in ("nearest", "linear", "cubic"):
        y = fiamma.upsample(x, (97, 61), mode, False)
        go = rng.standard_normal((1, 16, 97, 61))
        g = fiamma.upsample_backward(fiamma.tensor(go), (1, 16, 40, 40), mode, False)
        np.testing.assert_allclose((y.numpy() * go).sum(), (x.numpy() * g.numpy()).sum(),
                                   rtol=1e-9)
        np.testing.assert_allclose(y.numpy(), ref_upsample(x.numpy(), (97, 61), mode, False,
                                                           None), rtol=1e-10, atol=1e-12)
