"""Pooling layers and functions: forward and gradients in float64 (gradcheck), module wiring,
errors, and (parity session) values, indices, gradients and reprs against torch for every
option of every layer, including non-contiguous inputs, batch of 1, unbatched and empty
batches."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def distinct(shape, seed=0, dtype=np.float64):
    """Values without ties (so max pools have one answer), spread over [-4, 4)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) / max(n, 1) * 8).reshape(shape).astype(dtype)


def leaf(a):
    return fiamma.tensor(a).requires_grad_()


# ---- float64 gradients and module wiring -------------------------------------------------------

GRAD_CASES = [
    (lambda: nn.MaxPool1d(3, 2, 1), (2, 3, 9)),
    (lambda: nn.MaxPool2d(2, ceil_mode=True), (2, 2, 5, 5)),
    (lambda: nn.MaxPool2d((3, 2), (1, 2), (1, 0), dilation=(1, 2)), (1, 2, 5, 7)),
    (lambda: nn.MaxPool3d(2, 1), (1, 2, 3, 4, 3)),
    (lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 8)),
    (lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True), (2, 2, 6, 5)),
    (lambda: nn.AvgPool2d(2, divisor_override=3), (2, 2, 4, 4)),
    (lambda: nn.AvgPool3d(2, 1, 1), (1, 2, 3, 3, 3)),
    (lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
    (lambda: nn.AdaptiveAvgPool2d((2, None)), (2, 2, 5, 3)),
    (lambda: nn.AdaptiveAvgPool3d(2), (1, 2, 3, 4, 5)),
    (lambda: nn.AdaptiveMaxPool1d(4), (2, 3, 9)),
    (lambda: nn.AdaptiveMaxPool2d(3), (2, 2, 5, 6)),
    (lambda: nn.AdaptiveMaxPool3d((2, 1, 2)), (1, 2, 3, 4, 5)),
    (lambda: nn.LPPool1d(2, 3), (2, 3, 7)),
    (lambda: nn.LPPool2d(3, (2, 3), (1, 2)), (2, 2, 4, 5)),
    (lambda: nn.LPPool3d(2, 2), (1, 2, 4, 4, 4)),
]


@pytest.mark.parametrize("case", range(len(GRAD_CASES)))
def test_module_gradcheck_float64(case):
    make, shape = GRAD_CASES[case]
    m = make()
    a = distinct(shape, case)
    if "LPPool" in type(m).__name__:
        a = np.abs(a) + 0.5
    x = leaf(a)
    assert gradcheck(lambda t: m(t), (x,))
    # unbatched input gives the batched result's first row
    np.testing.assert_allclose(m(x[0]).detach().numpy(), m(x).detach().numpy()[0], rtol=1e-12)


def test_maxpool_unpool_roundtrip_and_indices():
    x = fiamma.tensor(distinct((2, 3, 6, 6), 1))
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
    v, i = pool(x)
    u = unpool(v, i)
    assert u.shape == x.shape
    # each 2x2 block keeps only its max (values are distinct and nonzero)
    a, ua = x.numpy(), u.numpy()
    blocks = a.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(ua.reshape(2, 3, 3, 2, 3, 2).sum(axis=(3, 5)), blocks)
    assert (ua != 0).sum() == 2 * 3 * 9
    assert unpool(v, i, output_size=(7, 7)).shape == (2, 3, 7, 7)
    v1, i1 = F.max_pool2d_with_indices(x, 2)
    assert (v1 == v).all() and (i1 == i).all()
    v2, i2 = F.adaptive_max_pool2d_with_indices(x, 3)
    assert (v2 == v).all() and (i2 == i).all()
    # unbatched
    assert nn.MaxUnpool1d(2)(*nn.MaxPool1d(2, return_indices=True)(x[0, 0])).shape == (6, 6)


def test_empty_batch_and_no_parameters():
    for m in [nn.MaxPool2d(2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.LPPool2d(2, 2)]:
        assert m(fiamma.empty(0, 3, 4, 4)).shape[0] == 0
        assert m.state_dict() == {} or len(m.state_dict()) == 0
        assert list(m.parameters()) == []


def test_errors():
    x = fiamma.randn(2, 3, 8, 8)
    with pytest.raises(ValueError, match="max_pool2d.*padding"):
        nn.MaxPool2d(2, padding=2)(x)
    with pytest.raises(RuntimeError, match="max_pool2d.*3D.*4D"):
        nn.MaxPool2d(2)(fiamma.randn(8, 8))
    with pytest.raises(RuntimeError, match="avg_pool1d.*2D.*3D"):
        nn.AvgPool1d(2)(x)
    with pytest.raises(RuntimeError, match="adaptive_avg_pool2d.*output_size"):
        nn.AdaptiveAvgPool2d(-1)(x)  # 0 is allowed: an empty result, as PyTorch
    with pytest.raises(RuntimeError, match="max_pool3d.*too small"):
        nn.MaxPool3d(3)(fiamma.randn(1, 2, 2, 2))
    with pytest.raises(ValueError, match="max_unpool2d.*output_size"):
        v, i = nn.MaxPool2d(2, return_indices=True)(x)
        nn.MaxUnpool2d(2)(v, i, output_size=(3, 3))


# ---- parity with torch ---------------------------------------------------------------------

def _layout(a, layout):
    """fiamma and torch tensors (leaves) holding ``a`` with the given memory layout."""
    if layout == "transposed":
        b = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        f = fiamma.tensor(b).transpose(-1, -2)
        t = torch.tensor(b).transpose(-1, -2)
    elif layout == "strided":
        b = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
        b[..., ::2] = a
        f = fiamma.tensor(b)[..., ::2]
        t = torch.tensor(b)[..., ::2]
    else:
        f, t = fiamma.tensor(a), torch.tensor(a)
    return f.detach().requires_grad_(), t.detach().requires_grad_()


def _compare(fo, to, fx, tx, seed=0):
    if isinstance(to, tuple):
        fo, fi = fo
        to, ti = to
        np.testing.assert_array_equal(fi.numpy(), ti.numpy())
    assert tuple(fo.shape) == tuple(to.shape)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-5)
    if fo.numel() == 0:
        return
    g = np.random.default_rng(seed).standard_normal(tuple(to.shape)).astype(np.float32)
    fo.backward(fiamma.tensor(g))
    to.backward(torch.tensor(g))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


MAX_OPTS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=1, padding=1),  # overlapping: gradient accumulates
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),  # last window in padding
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
]
LAYOUTS = ["contiguous", "transposed", "strided"]
SPATIAL = {1: (11,), 2: (9, 8), 3: (5, 7, 6)}


def _opts_nd(opts, nd, seed):
    """Per-dim variants: tuples with different values per dim for some options."""
    out = dict(opts)
    if nd > 1 and seed % 2:
        for key in ("kernel_size", "stride"):
            if key in out:
                v = out[key]
                out[key] = tuple(v if d % 2 == 0 else max(1, v - 1) for d in range(nd))
        if "padding" in out:
            out["padding"] = tuple(min(out["padding"], (k if isinstance(k, int) else k) // 2)
                                   for k in (out["kernel_size"] if isinstance(
                                       out["kernel_size"], tuple) else (out["kernel_size"],) * nd))
    return out


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("opt", range(len(MAX_OPTS)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_max_pool_parity(nd, opt, layout):
    opts = _opts_nd(MAX_OPTS[opt], nd, opt + nd)
    batch = (1 + opt % 3, 3) if opt != 4 else (3,)
    a = distinct(batch + SPATIAL[nd], opt).astype(np.float32)
    fx, tx = _layout(a, layout)
    fm = getattr(nn, f"MaxPool{nd}d")(**opts, return_indices=True)
    tm = getattr(torch.nn, f"MaxPool{nd}d")(**opts, return_indices=True)
    assert repr(fm) == repr(tm)
    _compare(fm(fx), tm(tx), fx, tx, opt)
    fv = getattr(F, f"max_pool{nd}d")(fx.detach(), **opts)
    tv = getattr(torch.nn.functional, f"max_pool{nd}d")(tx.detach(), **opts)
    np.testing.assert_array_equal(fv.numpy(), tv.numpy())


AVG_OPTS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=1, padding=1, divisor_override=4),
]


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("opt", range(len(AVG_OPTS)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_avg_pool_parity(nd, opt, layout):
    opts = _opts_nd(AVG_OPTS[opt], nd, opt + nd)
    if nd == 1 and "divisor_override" in opts:
        pytest.skip("AvgPool1d has no divisor_override")
    batch = (1 + opt % 3, 3) if opt != 5 else (3,)
    a = distinct(batch + SPATIAL[nd], opt).astype(np.float32)
    fx, tx = _layout(a, layout)
    fm = getattr(nn, f"AvgPool{nd}d")(**opts)
    tm = getattr(torch.nn, f"AvgPool{nd}d")(**opts)
    assert repr(fm) == repr(tm)
    _compare(fm(fx), tm(tx), fx, tx, opt)


ADAPTIVE_SIZES = {1: [1, 3, 4, 13], 2: [1, (3, 2), (None, 4), 10], 3: [1, (2, 3, None), 4]}


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kind", ["Avg", "Max"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_adaptive_parity(nd, kind, layout):
    for j, size in enumerate(ADAPTIVE_SIZES[nd]):
        batch = [(2, 3), (1, 2), (3,)][j % 3]
        a = distinct(batch + SPATIAL[nd], j).astype(np.float32)
        fx, tx = _layout(a, layout)
        kw = {"return_indices": True} if kind == "Max" else {}
        fm = getattr(nn, f"Adaptive{kind}Pool{nd}d")(size, **kw)
        tm = getattr(torch.nn, f"Adaptive{kind}Pool{nd}d")(size, **kw)
        assert repr(fm) == repr(tm)
        _compare(fm(fx), tm(tx), fx, tx, j)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("opt", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                 dict(kernel_size=2, stride=2, padding=1)])
def test_max_unpool_parity(nd, opt):
    a = distinct((2, 3) + SPATIAL[nd], nd).astype(np.float32)
    tv, ti = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.tensor(a), **opt,
                                                             return_indices=True)
    fv, fi = getattr(F, f"max_pool{nd}d")(fiamma.tensor(a), **opt, return_indices=True)
    np.testing.assert_array_equal(fi.numpy(), ti.numpy())
    fm = getattr(nn, f"MaxUnpool{nd}d")(**opt)
    tm = getattr(torch.nn, f"MaxUnpool{nd}d")(**opt)
    assert repr(fm) == repr(tm)
    for size in [None, a.shape[-nd:], a.shape]:
        fx = fv.detach().requires_grad_()
        tx = tv.detach().requires_grad_()
        try:
            to = tm(tx, ti, output_size=size)
        except RuntimeError:  # an index beyond the default output size: both refuse it
            with pytest.raises(IndexError, match=f"max_unpool{nd}d.*out of range"):
                fm(fx, fi, output_size=size)
            continue
        _compare(fm(fx, fi, output_size=size), to, fx, tx, nd)


@pytest.mark.parity
@needs_torch
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("opt", [dict(norm_type=2, kernel_size=2),
                                 dict(norm_type=3, kernel_size=3, stride=2),
                                 dict(norm_type=1.5, kernel_size=2, stride=1, ceil_mode=True),
                                 dict(norm_type=2, kernel_size=3, stride=2, ceil_mode=True)])
def test_lp_pool_parity(nd, opt):
    if nd == 3 and not hasattr(torch.nn, "LPPool3d"):
        pytest.skip("this torch has no LPPool3d")
    a = (np.abs(distinct((2, 3) + SPATIAL[nd], nd)) + 0.5).astype(np.float32)
    fx, tx = _layout(a, "transposed")
    fm = getattr(nn, f"LPPool{nd}d")(**opt)
    tm = getattr(torch.nn, f"LPPool{nd}d")(**opt)
    assert repr(fm) == repr(tm)
    _compare(fm(fx), tm(tx), fx, tx, nd)


@pytest.mark.parity
@needs_torch
def test_empty_batch_and_state_dict_parity():
    pairs = [("MaxPool2d", (2,)), ("AvgPool2d", (3, 2, 1)), ("AdaptiveAvgPool2d", (2,)),
             ("AdaptiveMaxPool2d", (2,)), ("LPPool2d", (2, 2)), ("MaxPool1d", (2,)),
             ("AvgPool3d", (2,))]
    for name, args in pairs:
        fm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert list(fm.state_dict()) == list(tm.state_dict()) == []
        nd = int(name[-2])
        shape = (0, 3) + (6,) * nd
        fo = fm(fiamma.empty(*shape))
        to = tm(torch.empty(*shape))
        assert tuple(fo.shape) == tuple(to.shape)
