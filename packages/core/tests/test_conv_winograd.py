"""The Winograd F(2x2, 3x3) path of float32 3x3 stride-1 convolutions (csrc/conv_wino.c):
forward and data gradient (the transposed convolution) with the path forced on, off and
automatic, against the float64 references of test_conv_ops, on random shapes with odd image
sizes (partial tiles), 1x1 images, padding 0/1/2, batch 0/1/3, bias or not, non-contiguous
inputs, and channel counts around the automatic threshold (16)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from test_conv_ops import T, noncontig, ref_conv, ref_conv_t

import fiamma
from fiamma._lib import lib

# F(2, 3) in float32: a few times im2col's rounding error (relative to the largest output)
REL = 2e-5


_FIXED = [HealthCheck.function_scoped_fixture]  # the fixture only restores a global setting


@pytest.fixture
def wino():
    """Yields a setter for the path (0 off, 1 automatic, 2 forced); restores the setting."""
    prev = lib.fm_conv_set_winograd(-1)
    yield lib.fm_conv_set_winograd
    lib.fm_conv_set_winograd(prev)


def _rel(out, ref):
    out = out.numpy().astype(np.float64)
    assert out.shape == ref.shape
    return np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30)


def test_setter_roundtrip(wino):
    wino(0)
    assert wino(2) == 0
    assert wino(-1) == 2
    assert wino(1) == 2 and wino(-1) == 1


@settings(max_examples=40, deadline=None,
          suppress_health_check=_FIXED)
@given(n=st.sampled_from([0, 1, 3]), cin=st.sampled_from([1, 3, 15, 16, 17, 33]),
       cout=st.sampled_from([1, 4, 15, 16, 17, 40]), h=st.integers(1, 13), w=st.integers(1, 13),
       pad=st.sampled_from([0, 1, 2]), bias=st.booleans(), nc=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_forward_forced_auto_off(wino, n, cin, cout, h, w, pad, bias, nc, seed):
    if h + 2 * pad < 3 or w + 2 * pad < 3:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w))
    wt = rng.standard_normal((cout, cin, 3, 3))
    b = rng.standard_normal(cout) if bias else None
    ref = ref_conv(x, wt, b, (1, 1), (pad, pad), (1, 1), 1)
    xt = noncontig(x, fiamma.float32) if nc else T(x)
    outs = []
    for mode in (2, 1, 0):
        wino(mode)
        out = fiamma.conv2d(xt, T(wt), None if b is None else T(b), 1, pad)
        if n:
            assert _rel(out, ref) < REL, mode
        else:
            assert tuple(out.shape) == ref.shape
        outs.append(out.numpy())
    # forced and off are different computations: both near the reference, not bit-equal
    if n and ref.size > 1:
        assert np.abs(outs[0] - outs[2]).max() <= 4 * REL * np.abs(ref).max()


@settings(max_examples=30, deadline=None,
          suppress_health_check=_FIXED)
@given(n=st.sampled_from([1, 3]), cin=st.sampled_from([2, 16, 21]),
       cout=st.sampled_from([3, 16, 24]), h=st.integers(1, 12), w=st.integers(1, 12),
       pad=st.sampled_from([0, 1, 2]), bias=st.booleans(), nc=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_data_gradient_forced_auto_off(wino, n, cin, cout, h, w, pad, bias, nc, seed):
    """conv_transpose2d with stride 1 is the data gradient of conv2d: same kernel, flipped."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, cin, h, w))
    wt = rng.standard_normal((cin, cout, 3, 3))
    b = rng.standard_normal(cout) if bias else None
    if h + 2 - 2 * pad < 1 or w + 2 - 2 * pad < 1:
        return
    ref = ref_conv_t(g, wt, b, (1, 1), (pad, pad), (0, 0), (1, 1), 1)
    gt = noncontig(g, fiamma.float32) if nc else T(g)
    for mode in (2, 1, 0):
        wino(mode)
        out = fiamma.conv_transpose2d(gt, T(wt), None if b is None else T(b), 1, pad)
        assert _rel(out, ref) < REL, mode


def test_resnet_like_layers_accuracy(wino):
    """Winograd's error stays within a few times im2col's on ResNet-like layers."""
    rng = np.random.default_rng(3)
    for n, c, s in [(2, 64, 20), (1, 128, 14), (1, 256, 7)]:
        x = rng.standard_normal((n, c, s, s))
        wt = rng.standard_normal((c, c, 3, 3)) * (2.0 / (9 * c)) ** 0.5
        ref = ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), 1)
        errs = {}
        for mode in (2, 0):
            wino(mode)
            errs[mode] = _rel(fiamma.conv2d(T(x), T(wt), None, 1, 1), ref)
        assert errs[2] < max(4 * errs[0], 1e-6), errs


def test_large_batch_threads_and_chunks(wino):
    """Enough tiles for several chunks (and threads when the BLAS thread count allows), a
    chunk size that splits tile rows, and the automatic choice taking the path."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 20, 23, 25))
    wt = rng.standard_normal((18, 20, 3, 3))
    b = rng.standard_normal(18)
    ref = ref_conv(x, wt, b, (1, 1), (1, 1), (1, 1), 1)
    prev = lib.fm_conv_set_winograd_tiles(37)
    try:
        for mode in (1, 2):
            wino(mode)
            assert _rel(fiamma.conv2d(T(x), T(wt), T(b), 1, 1), ref) < REL
            g = rng.standard_normal(ref.shape)
            gx = fiamma.conv_transpose2d(T(g), T(wt), None, 1, 1)
            assert _rel(gx, ref_conv_t(g, wt, None, (1, 1), (1, 1), (0, 0), (1, 1), 1)) < REL
    finally:
        lib.fm_conv_set_winograd_tiles(prev)


def test_other_convolutions_unaffected(wino):
    """float64, stride 2, dilation 2, groups 2, 5x5 and 1-D stay on im2col and stay right."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 16, 11, 10))
    wino(2)
    for wt, s, d, gr in [(rng.standard_normal((16, 16, 3, 3)), 2, 1, 1),
                         (rng.standard_normal((16, 16, 3, 3)), 1, 2, 1),
                         (rng.standard_normal((16, 8, 3, 3)), 1, 1, 2),
                         (rng.standard_normal((16, 16, 5, 5)), 1, 1, 1)]:
        ref = ref_conv(x, wt, None, (s, s), (1, 1), (d, d), gr)
        assert _rel(fiamma.conv2d(T(x), T(wt), None, s, 1, d, gr), ref) < 1e-5
    wt = rng.standard_normal((16, 16, 3, 3))
    ref = ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), 1)
    out = fiamma.conv2d(T(x, fiamma.float64), T(wt, fiamma.float64), None, 1, 1)
    assert _rel(out, ref) < 1e-12
    x1, w1 = rng.standard_normal((2, 16, 9)), rng.standard_normal((16, 16, 3))
    ref = ref_conv(x1, w1, None, (1,), (1,), (1,), 1)
    assert _rel(fiamma.conv1d(T(x1), T(w1), None, 1, 1), ref) < 1e-5


def test_autograd_input_gradient(wino):
    """Through autograd (if installed): the input gradient of a 3x3 conv takes the path."""
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(11)
    x, wt = rng.standard_normal((2, 16, 9, 7)), rng.standard_normal((20, 16, 3, 3))
    g = rng.standard_normal((2, 20, 9, 7))
    ref = ref_conv_t(g, wt, None, (1, 1), (1, 1), (0, 0), (1, 1), 1)
    for mode in (2, 0):
        wino(mode)
        xt = T(x).requires_grad_()
        fiamma.conv2d(xt, T(wt), None, 1, 1).backward(T(g))
        assert _rel(xt.grad, ref) < REL


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("tiles", [0, 21])
def test_wide_images_forward_and_data_gradient(wino, pad, tiles):
    """Images 31+ wide take the per-tile-row transform (narrower ones the staged one); odd
    sizes give partial tiles at the right and bottom; small chunks split tile rows."""
    rng = np.random.default_rng(pad)
    x = rng.standard_normal((2, 17, 9, 37))
    wt = rng.standard_normal((19, 17, 3, 3))
    b = rng.standard_normal(19)
    ref = ref_conv(x, wt, b, (1, 1), (pad, pad), (1, 1), 1)
    g = rng.standard_normal((2, 17, 7, 33))
    wt2 = rng.standard_normal((17, 19, 3, 3))
    ref2 = ref_conv_t(g, wt2, b, (1, 1), (pad, pad), (0, 0), (1, 1), 1)
    prev = lib.fm_conv_set_winograd_tiles(tiles)
    try:
        wino(2)
        assert _rel(fiamma.conv2d(T(x), T(wt), T(b), 1, pad), ref) < REL
        assert _rel(fiamma.conv_transpose2d(T(g), T(wt2), T(b), 1, pad), ref2) < REL
    finally:
        lib.fm_conv_set_winograd_tiles(prev)


@pytest.mark.parametrize("tiles", [0, 30])
def test_two_threads_sharing_chunks(wino, tiles):
    """Few chunks for the thread count: the threads share each chunk (input channels, then
    output channels) instead of taking whole chunks."""
    prev_t = lib.fm_blas_get_num_threads()
    prev = lib.fm_conv_set_winograd_tiles(tiles)
    lib.fm_blas_set_num_threads(2)
    try:
        rng = np.random.default_rng(13)
        x = rng.standard_normal((2, 48, 13, 14))
        wt = rng.standard_normal((40, 48, 3, 3))
        b = rng.standard_normal(40)
        for mode in (1, 2):
            wino(mode)
            ref = ref_conv(x, wt, b, (1, 1), (1, 1), (1, 1), 1)
            assert _rel(fiamma.conv2d(T(x), T(wt), T(b), 1, 1), ref) < REL
            g = rng.standard_normal(ref.shape)
            gx = fiamma.conv_transpose2d(T(g), T(wt), None, 1, 0)
            assert _rel(gx, ref_conv_t(g, wt, None, (1, 1), (0, 0), (0, 0), (1, 1), 1)) < REL
    finally:
        lib.fm_blas_set_num_threads(prev_t)
        lib.fm_conv_set_winograd_tiles(prev)


def ref_weight_grad(x, g, pad):
    """float64 gradient by weight of a 3x3 stride-1 conv: x (N, C, H, W), g (N, K, OH, OW)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    xp = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    oh, ow = g.shape[2:]
    out = np.zeros((g.shape[1], x.shape[1], 3, 3))
    for r in range(3):
        for s in range(3):
            out[:, :, r, s] = np.einsum("nkhw,nchw->kc", g, xp[:, :, r:r + oh, s:s + ow])
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=_FIXED)
@given(n=st.sampled_from([0, 1, 3]), cin=st.sampled_from([2, 16, 21]),
       cout=st.sampled_from([3, 8, 24]), h=st.integers(1, 12), w=st.integers(1, 36),
       pad=st.sampled_from([0, 1, 2]), nc=st.booleans(), tiles=st.sampled_from([0, 5]),
       seed=st.integers(0, 2**31 - 1))
def test_weight_gradient_forced_auto_off(wino, n, cin, cout, h, w, pad, nc, tiles, seed):
    if h + 2 * pad < 3 or w + 2 * pad < 3:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w))
    g = rng.standard_normal((n, cout, h + 2 * pad - 2, w + 2 * pad - 2))
    ref = ref_weight_grad(x, g, pad)
    xt = noncontig(x, fiamma.float32) if nc else T(x)
    prev = lib.fm_conv_set_winograd_tiles(tiles)
    try:
        for mode in (2, 1, 0):
            wino(mode)
            gw = fiamma.convolution_backward_weight(xt, T(g), (cout, cin, 3, 3), 1, pad, 1, 1)
            if n:
                assert _rel(gw, ref) < REL, mode
            else:
                assert float(gw.abs().sum()) == 0.0
    finally:
        lib.fm_conv_set_winograd_tiles(prev)


@pytest.mark.parametrize("tiles", [0, 30, 200])
def test_weight_gradient_threads(wino, tiles):
    """Two threads: whole chunks with a gradient sum per thread (small tile counts), or shared
    chunks (the default count for this size)."""
    prev_t = lib.fm_blas_get_num_threads()
    prev = lib.fm_conv_set_winograd_tiles(tiles)
    lib.fm_blas_set_num_threads(2)
    try:
        rng = np.random.default_rng(17)
        x = rng.standard_normal((3, 40, 17, 22))
        g = rng.standard_normal((3, 36, 17, 22))
        for mode in (1, 2):
            wino(mode)
            gw = fiamma.convolution_backward_weight(T(x), T(g), (36, 40, 3, 3), 1, 1, 1, 1)
            assert _rel(gw, ref_weight_grad(x, g, 1)) < REL
    finally:
        lib.fm_blas_set_num_threads(prev_t)
        lib.fm_conv_set_winograd_tiles(prev)
