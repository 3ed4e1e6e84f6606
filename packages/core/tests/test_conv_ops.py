"""Convolutions against a float64 NumPy reference written here (direct sums over kernel taps):
conv1d/2d/3d, conv_transpose1d/2d/3d, convolution_backward_weight, im2col/col2im, on random
shapes with stride, padding ('same'/'valid' too), dilation, groups, bias, non-contiguous inputs
and weights, batch 0, unbatched inputs, float16/bfloat16/float32/float64; bad input errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma


def ref_conv(x, w, b, stride, pad, dil, groups):
    """float64 cross-correlation: x (N, C, *S), w (O, C/g, *K), symmetric zero padding."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    k = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_sp = [(x.shape[2 + i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1
              for i in range(nd)]
    out = np.zeros((n, o, *out_sp))
    cg, og = c // groups, o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for tap in itertools.product(*[range(v) for v in k]):
            sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + stride[i] * (out_sp[i] - 1) + 1,
                             stride[i]) for i in range(nd))
            patch = xs[(slice(None), slice(None)) + sl]  # (N, cg, *out)
            wt = w[(slice(g * og, (g + 1) * og), slice(None)) + tap]  # (og, cg)
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, wt)
    if b is not None:
        out += b.astype(np.float64).reshape((1, o) + (1,) * nd)
    return out


def ref_conv_t(x, w, b, stride, pad, outpad, dil, groups):
    """float64 transposed convolution: scatter every input element through the kernel."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    n, c = x.shape[:2]
    k = w.shape[2:]
    og = w.shape[1]
    o = og * groups
    cg = c // groups
    big = [(x.shape[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + 1 + outpad[i]
           for i in range(nd)]
    full = np.zeros((n, o, *[big[i] + 2 * pad[i] for i in range(nd)]))
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for tap in itertools.product(*[range(v) for v in k]):
            sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + stride[i] * (x.shape[2 + i] - 1)
                             + 1, stride[i]) for i in range(nd))
            wt = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap]  # (cg, og)
            full[(slice(None), slice(g * og, (g + 1) * og)) + sl] += np.einsum(
                "nc...,co->no...", xs, wt)
    out = full[(slice(None), slice(None)) + tuple(slice(pad[i], pad[i] + big[i])
                                                    for i in range(nd))]
    if b is not None:
        out = out + b.astype(np.float64).reshape((1, o) + (1,) * nd)
    return out


def T(a, dtype=fiamma.float32):
    return fiamma.tensor(np.ascontiguousarray(a), dtype=dtype)


def noncontig(a, dtype):
    """A transposed view with the same values as ``a`` (non-contiguous)."""
    base = fiamma.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype=dtype)
    return base.transpose(-1, -2)


TOL = {fiamma.float32: 1e-4, fiamma.float64: 1e-10, fiamma.float16: 2e-2, fiamma.bfloat16: 6e-2}


def _close(out, ref, dtype):
    got = out.to(fiamma.float64).numpy() if dtype in (fiamma.float16, fiamma.bfloat16) \
        else out.numpy().astype(np.float64)
    assert got.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    np.testing.assert_allclose(got, ref, atol=TOL[dtype] * scale, rtol=TOL[dtype])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_conv_random(data):
    nd = data.draw(st.integers(1, 3))
    groups = data.draw(st.sampled_from([1, 1, 2, 3]))
    cg = data.draw(st.integers(1, 3))
    og = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 3))
    k = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    s = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    d = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    p = [data.draw(st.integers(0, 2)) for _ in range(nd)]
    sp = [data.draw(st.integers(max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i]), 7 if nd < 3 else 5))
          for i in range(nd)]
    dtype = data.draw(st.sampled_from([fiamma.float32, fiamma.float64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.standard_normal((n, cg * groups, *sp))
    w = rng.standard_normal((og * groups, cg, *k))
    b = rng.standard_normal(og * groups) if data.draw(st.booleans()) else None
    xt = noncontig(x, dtype) if data.draw(st.booleans()) else T(x, dtype)
    wt = noncontig(w, dtype) if data.draw(st.booleans()) else T(w, dtype)
    fn = [None, fiamma.conv1d, fiamma.conv2d, fiamma.conv3d][nd]
    out = fn(xt, wt, None if b is None else T(b, dtype), s, p, d, groups)
    _close(out, ref_conv(x, w, b, s, p, d, groups), dtype)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_conv_transpose_random(data):
    nd = data.draw(st.integers(1, 3))
    groups = data.draw(st.sampled_from([1, 1, 2]))
    cg, og = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 2))
    k = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    s = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    d = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    op = [data.draw(st.integers(0, max(s[i], d[i]) - 1)) for i in range(nd)]
    sp = [data.draw(st.integers(1, 5 if nd < 3 else 3)) for _ in range(nd)]
    p = [data.draw(st.integers(0, ((sp[i] - 1) * s[i] + d[i] * (k[i] - 1) + op[i]) // 2))
         for i in range(nd)]
    dtype = data.draw(st.sampled_from([fiamma.float32, fiamma.float64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.standard_normal((n, cg * groups, *sp))
    w = rng.standard_normal((cg * groups, og, *k))
    b = rng.standard_normal(og * groups) if data.draw(st.booleans()) else None
    xt = noncontig(x, dtype) if data.draw(st.booleans()) else T(x, dtype)
    fn = [None, fiamma.conv_transpose1d, fiamma.conv_transpose2d, fiamma.conv_transpose3d][nd]
    out = fn(xt, T(w, dtype), None if b is None else T(b, dtype), s, p, op, groups, d)
    _close(out, ref_conv_t(x, w, b, s, p, op, d, groups), dtype)


@pytest.mark.parametrize("dtype", [fiamma.float16, fiamma.bfloat16, fiamma.float32,
                                   fiamma.float64])
def test_dtypes_and_pointwise(dtype):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 4, 5, 6)), rng.standard_normal((3, 4, 1, 1)), \
        rng.standard_normal(3)
    out = fiamma.conv2d(T(x, dtype), T(w, dtype), T(b, dtype))
    assert out.dtype == dtype
    _close(out, ref_conv(x, w, b, (1, 1), (0, 0), (1, 1), 1), dtype)
    out = fiamma.conv2d(T(x, dtype), T(w, dtype), None, 2)  # 1x1 stride 2 (downsample)
    _close(out, ref_conv(x, w, None, (2, 2), (0, 0), (1, 1), 1), dtype)


def test_large_batch_threads_and_chunks():
    """Big enough for the threaded path and for several column chunks per image."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 24, 40, 40)), rng.standard_normal((8, 24, 3, 3))
    _close(fiamma.conv2d(T(x), T(w), None, 1, 1), ref_conv(x, w, None, (1, 1), (1, 1), (1, 1), 1),
           fiamma.float32)
    _close(fiamma.conv2d(T(x[:1]), T(w), None, 1, 1),
           ref_conv(x[:1], w, None, (1, 1), (1, 1), (1, 1), 1), fiamma.float32)
    g = rng.standard_normal((5, 8, 40, 40))
    gw = fiamma.convolution_backward_weight(T(x), T(g), (8, 24, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    ref = np.einsum("nohw,nchw->oc", g, x)  # the centre tap (no shift)
    np.testing.assert_allclose(gw.numpy()[:, :, 1, 1], ref, rtol=1e-4, atol=1e-3)
    # batch 1, pointwise with bias (column slices split over threads)
    w1, b1 = rng.standard_normal((32, 24, 1, 1)), rng.standard_normal(32)
    _close(fiamma.conv2d(T(x[:1]), T(w1), T(b1)),
           ref_conv(x[:1], w1, b1, (1, 1), (0, 0), (1, 1), 1), fiamma.float32)
    _close(fiamma.conv2d(T(x[:1]), T(w), T(b1[:8]), 1, 1),
           ref_conv(x[:1], w, b1[:8], (1, 1), (1, 1), (1, 1), 1), fiamma.float32)


def test_backward_weight_matches_reference():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 7, 6))
    g = rng.standard_normal((3, 6, 4, 6))
    s, p, d, groups = (2, 1), (1, 1), (1, 2), 2
    gw = fiamma.convolution_backward_weight(T(x, fiamma.float64), T(g, fiamma.float64),
                                            (6, 2, 3, 2), s, p, d, groups).numpy()
    # <g, conv(x, w)> is linear in w: its gradient by w is gw
    ref = np.zeros((6, 2, 3, 2))
    for idx in np.ndindex(*ref.shape):
        e = np.zeros(ref.shape)
        e[idx] = 1
        ref[idx] = (g * ref_conv(x, e, None, s, p, d, groups)).sum()
    np.testing.assert_allclose(gw, ref, rtol=1e-10, atol=1e-10)


def test_same_valid_and_unbatched():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 2, 4, 3))
    out = fiamma.conv2d(T(x), T(w), padding="same", dilation=(1, 2))
    assert tuple(out.shape) == (2, 5, 6)
    # PyTorch pads an even kernel's extra row at the end: total 3 rows -> (1, 2), cols 4 -> (2, 2)
    xp = np.pad(x, [(0, 0), (1, 2), (2, 2)])
    _close(out, ref_conv(xp[None], w, None, (1, 1), (0, 0), (1, 2), 1)[0], fiamma.float32)
    out = fiamma.conv2d(T(x), T(w), padding="valid")
    _close(out, ref_conv(x[None], w, None, (1, 1), (0, 0), (1, 1), 1)[0], fiamma.float32)
    y = rng.standard_normal((3, 4))
    wt = rng.standard_normal((3, 2, 2))
    _close(fiamma.conv_transpose1d(T(y), T(wt), None, 2),
           ref_conv_t(y[None], wt, None, (2,), (0,), (0,), (1,), 1)[0], fiamma.float32)


def test_im2col_col2im():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5, 6))
    k, d, p, s = (2, 3), (1, 2), (1, 1), (2, 1)
    cols = fiamma.im2col(T(x, fiamma.float64), k, d, p, s).numpy()
    # the columns' dot with the weight is the convolution
    w = rng.standard_normal((4, 3, *k))
    out = np.einsum("ok,nkl->nol", w.reshape(4, -1), cols)
    ref = ref_conv(x, w, None, s, p, d, 1)
    np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-10, atol=1e-10)
    # col2im is the adjoint: <im2col(x), c> == <x, col2im(c)>
    c = rng.standard_normal(cols.shape)
    back = fiamma.col2im(T(c, fiamma.float64), (5, 6), k, d, p, s).numpy()
    assert np.isclose((cols * c).sum(), (x * back).sum())


def ref_weight_grad(x, g, k, stride, pad, dil):
    """float64 gradient by the weight of sum(g * conv(x, w)) (groups 1): patches dotted with g."""
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_sp = g.shape[2:]
    gw = np.zeros((g.shape[1], x.shape[1], *k))
    for tap in itertools.product(*[range(v) for v in k]):
        sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + stride[i] * (out_sp[i] - 1) + 1,
                         stride[i]) for i in range(nd))
        patch = xp[(slice(None), slice(None)) + sl]
        gw[(slice(None), slice(None)) + tap] = np.einsum(
            "ncl,nol->oc", patch.reshape(*patch.shape[:2], -1), g.reshape(*g.shape[:2], -1))
    return gw


# whole output rows take a path of their own in conv.c (one copy per row segment; float32 rows
# of at most 16 outputs at unit stride one masked load): widths around 16, padding wider than
# the kernel's reach, strides and dilations along rows, 1-D, and 3-D with a single depth slice
ROW_CASES = [  # (spatial, kernel, stride, padding, dilation)
    ((9, 5), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((7, 16), (5, 5), (1, 1), (2, 2), (1, 1)),
    ((6, 17), (3, 5), (1, 1), (0, 2), (1, 1)),
    ((6, 20), (3, 3), (1, 1), (1, 3), (1, 2)),
    ((5, 18), (2, 3), (2, 1), (1, 4), (1, 1)),
    ((8, 13), (3, 3), (1, 2), (1, 1), (1, 1)),
    ((8, 31), (3, 4), (2, 3), (2, 2), (2, 1)),
    ((4, 3), (1, 1), (1, 1), (2, 2), (1, 1)),
    ((4, 6), (3, 3), (1, 1), (3, 3), (2, 2)),
    ((28,), (5,), (1,), (2,), (1,)),
    ((40,), (3,), (3,), (1,), (2,)),
    ((1, 6, 12), (1, 3, 3), (3, 1, 1), (1, 1, 1), (1, 1, 1)),
]


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("case", ROW_CASES, ids=[str(c[0]) + str(c[2:]) for c in ROW_CASES])
def test_whole_row_columns(case, dtype):
    sp, k, s, p, d = case
    nd = len(sp)
    rng = np.random.default_rng(len(sp) * 100 + sum(sp))
    for n in (1, 5):  # one image (chunked slices) and several to a product
        x = rng.standard_normal((n, 3, *sp))
        w = rng.standard_normal((4, 3, *k))
        b = rng.standard_normal(4)
        fn = [None, fiamma.conv1d, fiamma.conv2d, fiamma.conv3d][nd]
        ref = ref_conv(x, w, b, s, p, d, 1)
        _close(fn(T(x, dtype), T(w, dtype), T(b, dtype), s, p, d), ref, dtype)
        g = rng.standard_normal(ref.shape)
        gw = fiamma.convolution_backward_weight(T(x, dtype), T(g, dtype), w.shape, s, p, d, 1)
        _close(gw, ref_weight_grad(x, g, k, s, p, d), dtype)
        # the input gradient (the transposed convolution: columns summed back), checked by
        # <conv(x, w), g> == <x, conv^T(g)> and element by element
        outpad = [sp[i] - ((ref.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1)
                  for i in range(nd)]
        fn_t = [None, fiamma.conv_transpose1d, fiamma.conv_transpose2d,
                fiamma.conv_transpose3d][nd]
        gx = fn_t(T(g, dtype), T(w, dtype), None, s, p, outpad, 1, d).numpy().astype(np.float64)
        e = np.zeros_like(x)
        lin = (ref_conv(x, w, None, s, p, d, 1) * g).sum()
        assert np.isclose((gx * x).sum(), lin, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
        for idx in [tuple(rng.integers(0, v) for v in x.shape) for _ in range(4)]:
            e[...] = 0
            e[idx] = 1
            want = (ref_conv(e, w, None, s, p, d, 1) * g).sum()
            assert np.isclose(gx[idx], want, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    if nd == 2:  # unfold / fold of the same geometry
        x = rng.standard_normal((2, 3, *sp))
        cols = fiamma.im2col(T(x, dtype), k, d, p, s).numpy().astype(np.float64)
        w = rng.standard_normal((4, 3, *k))
        out = np.einsum("ok,nkl->nol", w.reshape(4, -1), cols)
        ref = ref_conv(x, w, None, s, p, d, 1)
        np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=TOL[dtype] * 10,
                                   atol=TOL[dtype] * 10)
        c = rng.standard_normal(cols.shape)
        back = fiamma.col2im(T(c, dtype), sp, k, d, p, s).numpy().astype(np.float64)
        assert np.isclose((cols * c).sum(), (x * back).sum(), rtol=TOL[dtype] * 10)


def test_empty_batch_and_backward_weight_zero():
    w = fiamma.ones(4, 3, 3, 3)
    out = fiamma.conv2d(fiamma.ones(0, 3, 5, 5), w, fiamma.ones(4))
    assert tuple(out.shape) == (0, 4, 3, 3)
    gw = fiamma.convolution_backward_weight(fiamma.ones(0, 3, 5, 5), fiamma.ones(0, 4, 3, 3),
                                            (4, 3, 3, 3), 1, 0, 1, 1)
    assert gw.abs().sum().item() == 0
    assert tuple(fiamma.conv_transpose2d(fiamma.ones(0, 4, 2, 2), w).shape) == (0, 3, 4, 4)


@pytest.mark.parametrize("call,msg", [
    (lambda: fiamma.conv2d(fiamma.ones(1, 4, 5, 5), fiamma.ones(2, 3, 3, 3)), "conv"),
    (lambda: fiamma.conv2d(fiamma.ones(5, 5), fiamma.ones(2, 3, 3, 3)), "conv2d"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 2, 2), fiamma.ones(2, 3, 3, 3)), "conv"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3), stride=0), "stride"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3), padding=-1),
     "padding"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 4, 5, 5), fiamma.ones(3, 2, 3, 3), groups=2), "groups"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3), fiamma.ones(3)),
     "bias"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5, dtype=fiamma.int64),
                           fiamma.ones(2, 3, 3, 3, dtype=fiamma.int64)), "dtype"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3, dtype=fiamma.float64)),
     "dtype"),
    (lambda: fiamma.conv2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3), stride=2,
                           padding="same"), "same"),
    (lambda: fiamma.conv_transpose2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(2, 3, 3, 3)), "conv"),
    (lambda: fiamma.conv_transpose2d(fiamma.ones(1, 3, 5, 5), fiamma.ones(3, 3, 3, 3),
                                     output_padding=1), "output padding"),
    (lambda: fiamma.col2im(fiamma.ones(1, 8, 5), (3, 3), (2, 2)), "col2im"),
])
def test_bad_input(call, msg):
    with pytest.raises((RuntimeError, ValueError, TypeError)) as e:
        call()
    assert msg in str(e.value)


# ---- depthwise (groups == input channels): the direct path of conv_dw.c -----------------------

def ref_dw_weight_grad(x, g, k, stride, pad, dil, m):
    """float64 gradient by the weight (C * m, 1, *k) of a depthwise convolution."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    xr = np.repeat(xp, m, axis=1)  # output channel o reads input channel o // m
    out = np.zeros((g.shape[1], 1) + tuple(k))
    for tap in itertools.product(*[range(v) for v in k]):
        sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + stride[i] * (g.shape[2 + i] - 1) + 1,
                         stride[i]) for i in range(nd))
        out[(slice(None), 0) + tap] = (xr[(slice(None), slice(None)) + sl] * g).sum(
            axis=tuple([0] + list(range(2, 2 + nd))))
    return out


def _dw_case(data, nd):
    n = data.draw(st.integers(0, 3))
    c = data.draw(st.integers(2, 6))
    m = data.draw(st.sampled_from([1, 1, 2, 3]))
    k = tuple(data.draw(st.integers(1, 5 if nd < 3 else 3)) for _ in range(nd))
    s = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    d = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    p = tuple(data.draw(st.integers(0, 3)) for _ in range(nd))
    sp = tuple(max(data.draw(st.integers(1, 12 if nd < 3 else 6)), d[i] * (k[i] - 1) + 1 - 2 * p[i])
               for i in range(nd))
    return n, c, m, k, s, d, p, sp


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_depthwise_random(data):
    """Forward, gradient by input (transposed conv) and by weight of depthwise convolutions
    against the float64 references, and against the im2col path (toggled off)."""
    from fiamma._lib import lib

    nd = data.draw(st.sampled_from([1, 2, 2, 2, 3]))
    n, c, m, k, s, d, p, sp = _dw_case(data, nd)
    dtype = data.draw(st.sampled_from([fiamma.float32, fiamma.float64]))
    nc = data.draw(st.booleans())
    bias = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.standard_normal((n, c) + sp)
    w = rng.standard_normal((c * m, 1) + k)
    b = rng.standard_normal(c * m) if bias else None
    conv = getattr(fiamma, f"conv{nd}d")
    mk = (lambda a: noncontig(a, dtype)) if nc else (lambda a: T(a, dtype))
    xt, wt = mk(x), mk(w)
    bt = None if b is None else T(b, dtype)
    out = conv(xt, wt, bt, s, p, d, c)
    ref = ref_conv(x, w, b, s, p, d, c)
    _close(out, ref, dtype)
    prev = lib.fm_conv_set_depthwise(0)
    try:
        old = conv(xt, wt, bt, s, p, d, c)
    finally:
        lib.fm_conv_set_depthwise(prev)
    _close(out, old.numpy().astype(np.float64), dtype)
    # gradient by the weight
    g = rng.standard_normal(ref.shape)
    gw = fiamma.convolution_backward_weight(xt, mk(g), w.shape, s, p, d, c)
    _close(gw, ref_dw_weight_grad(x, g, k, s, p, d, m), dtype)
    # gradient by the input: the transposed depthwise convolution (C * m -> C channels)
    op = tuple(data.draw(st.integers(0, max(s[i], d[i]) - 1)) for i in range(nd))
    if n and all((ref.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1 + op[i] > 0
                 for i in range(nd)):
        bt2 = T(rng.standard_normal(c), dtype) if bias else None
        ct = getattr(fiamma, f"conv_transpose{nd}d")
        got = ct(mk(g), wt, bt2, s, p, op, c, d)
        _close(got, ref_conv_t(g, w, None if bt2 is None else bt2.numpy(), s, p, op, d, c),
               dtype)


def test_depthwise_threads_and_autograd():
    """Big enough for several threads; the gradients through autograd match the references."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((4, 32, 19, 21)), rng.standard_normal((64, 1, 3, 5))
    b = rng.standard_normal(64)
    for s in (1, 2):
        ref = ref_conv(x, w, b, (s, s), (1, 2), (1, 1), 32)
        _close(fiamma.conv2d(T(x), T(w), T(b), s, (1, 2), 1, 32), ref, fiamma.float32)
        g = rng.standard_normal(ref.shape)
        gw = fiamma.convolution_backward_weight(T(x), T(g), w.shape, (s, s), (1, 2), (1, 1), 32)
        _close(gw, ref_dw_weight_grad(x, g, (3, 5), (s, s), (1, 2), (1, 1), 2), fiamma.float32)
        op = (1, 0) if s == 2 else (0, 0)
        gx = fiamma.conv_transpose2d(T(g), T(w), None, s, (1, 2), op, 32)
        _close(gx, ref_conv_t(g, w, None, (s, s), (1, 2), op, (1, 1), 32), fiamma.float32)
        # the gradient by input of conv2d is the transposed conv: <g, conv(x)> = <gx, x>
        if op == (0, 0) or ref_conv_t(g, w, None, (s, s), (1, 2), op, (1, 1), 32).shape == x.shape:
            np.testing.assert_allclose((g * ref).sum() - (g.sum(axis=(0, 2, 3)) * b).sum(),
                                       (gx.numpy().astype(np.float64) * x).sum(), rtol=1e-4)


def test_depthwise_empty_batch():
    w = fiamma.ones(6, 1, 3, 3)
    out = fiamma.conv2d(fiamma.zeros(0, 3, 5, 5), w, None, 1, 1, 1, 3)
    assert tuple(out.shape) == (0, 6, 5, 5)
    gw = fiamma.convolution_backward_weight(fiamma.zeros(0, 3, 5, 5), fiamma.zeros(0, 6, 5, 5),
                                            (6, 1, 3, 3), 1, 1, 1, 3)
    assert tuple(gw.shape) == (6, 1, 3, 3) and float(gw.abs().sum()) == 0.0


def test_geometry_cache_keeps_checks_and_results():
    """A geometry seen before skips the shape checks (fiamma._ops.conv remembers it): results
    stay those of the reference, and every call with another geometry, another dtype or bad
    shapes is checked as the first one was."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = ref_conv(x, w, b, (1, 1), (1, 1), (1, 1), 1)
    for _ in range(3):  # the first call checks and remembers, the others reuse
        got = fiamma.convolution(fiamma.from_numpy(x), fiamma.from_numpy(w), fiamma.from_numpy(b),
                                 (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    # the same parameters as lists (not a cache key) give the same result
    got = fiamma.convolution(fiamma.from_numpy(x), fiamma.from_numpy(w), fiamma.from_numpy(b),
                             [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    # the remembered geometry does not hide per-call errors: dtype, then shapes
    with pytest.raises(RuntimeError, match="convolution.*same dtype"):
        fiamma.convolution(fiamma.from_numpy(x), fiamma.from_numpy(w.astype(np.float64)),
                           fiamma.from_numpy(b), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    with pytest.raises(RuntimeError, match="convolution"):
        fiamma.convolution(fiamma.from_numpy(x[:, :2]), fiamma.from_numpy(w),
                           fiamma.from_numpy(b), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    gy = fiamma.ones(2, 4, 6, 6)
    for _ in range(2):
        gw = fiamma.convolution_backward_weight(fiamma.from_numpy(x), gy, (4, 3, 3, 3), (1, 1),
                                                (1, 1), (1, 1), 1)
        assert tuple(gw.shape) == (4, 3, 3, 3)
    with pytest.raises(RuntimeError, match="convolution_backward_weight"):
        fiamma.convolution_backward_weight(fiamma.from_numpy(x), gy, (4, 2, 3, 3), (1, 1),
                                           (1, 1), (1, 1), 1)
