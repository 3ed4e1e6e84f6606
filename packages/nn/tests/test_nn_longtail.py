"""nn.CrossMapLRN2d, nn.grad, NLLLoss2d/Container, factory_kwargs, common_types,
F.linear_cross_entropy / nn.LinearCrossEntropyLoss / LinearCrossEntropyOptions: float64 NumPy
references and (with PyTorch installed) PyTorch's values and gradients."""

import warnings

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

# ---- CrossMapLRN2d -----------------------------------------------------------------------


def _lrn_reference(x, g, size, alpha, beta, k):
    """PyTorch's legacy CrossMapLRN2d, written as loops over channels from its documented
    running-window definition (forward) and legacy backward formula."""
    n, c = x.shape[:2]
    pre = int((size - 1) / 2 + 1)
    sq = x * x
    scale = np.zeros_like(x)
    for ch in range(c):
        members = set(range(0, min(ch + pre - 1, c - 1) + 1))
        if ch > pre:
            members -= set(range(1, ch - pre + 1))
        scale[:, ch] = sum(sq[:, m] for m in members)
    scale = scale * (alpha / size) + k
    y = x * scale ** -beta
    p = int(size - (size - 1) / 2)
    ratio = g * y / scale
    accum = np.zeros_like(x)
    for ch in range(c):
        for m in range(ch - p, ch + size - p):
            if 0 <= m < c:
                accum[:, ch] += ratio[:, m]
    gi = scale ** -beta * g - 2 * alpha * beta / size * x * accum
    return y, gi


@pytest.mark.parametrize("channels,size", [(1, 3), (10, 1), (2, 3), (7, 5), (8, 4), (12, 7), (3, 9),
                                           (6, 2)])
def test_cross_map_lrn2d_equals_reference(channels, size):
    rng = np.random.default_rng(channels * 10 + size)
    x = rng.standard_normal((2, channels, 3, 4))
    g = rng.standard_normal(x.shape)
    xt = fiamma.tensor(x, requires_grad=True)
    y = nn.CrossMapLRN2d(size, alpha=0.3, beta=0.7, k=1.5)(xt)
    y.backward(fiamma.tensor(g))
    ry, rg = _lrn_reference(x, g, size, 0.3, 0.7, 1.5)
    np.testing.assert_allclose(y.detach().numpy(), ry, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(xt.grad.numpy(), rg, rtol=1e-12, atol=1e-13)


def test_cross_map_lrn2d_checks_and_repr():
    m = nn.CrossMapLRN2d(5)
    assert repr(m) == "CrossMapLRN2d(5, alpha=0.0001, beta=0.75, k=1)"
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D"):
        m(fiamma.ones(2, 3, 4))


# ---- nn.grad ------------------------------------------------------------------------------

CONV_CASES = [(1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1), (2, 0, 3, 4)]


def _np_conv_grads(x, w, go, stride, pad, dil, groups):
    """Gradients of a correlation, by direct loops (float64 NumPy): for every output position
    and kernel tap, the input element it reads."""
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * nd)
    gx = np.zeros_like(xp)
    gw = np.zeros_like(w)
    cout, cin_g = w.shape[:2]
    cout_g = cout // groups
    for o in np.ndindex(*go.shape[2:]):
        for kk in np.ndindex(*w.shape[2:]):
            pos = tuple(oi * stride + ki * dil for oi, ki in zip(o, kk))
            for gi in range(groups):
                cs = slice(gi * cin_g, (gi + 1) * cin_g)
                os_ = slice(gi * cout_g, (gi + 1) * cout_g)
                xin = xp[(slice(None), cs) + pos]          # (N, cin_g)
                gout = go[(slice(None), os_) + o]          # (N, cout_g)
                wk = w[(os_, slice(None)) + kk]            # (cout_g, cin_g)
                gw[(os_, slice(None)) + kk] += gout.T @ xin
                gx[(slice(None), cs) + pos] += gout @ wk
    crop = (slice(None), slice(None)) + tuple(slice(pad, pad + s) for s in x.shape[2:])
    return gx[crop], gw


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("stride,pad,dil,groups", CONV_CASES)
def test_conv_grads_equal_direct_loops(n, stride, pad, dil, groups):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2, 4) + (7,) * n)
    w = rng.standard_normal((8, 4 // groups) + (3,) * n)
    y = getattr(F, f"conv{n}d")(fiamma.tensor(x), fiamma.tensor(w), None, stride, pad, dil,
                                groups)
    go = rng.standard_normal(tuple(y.shape))
    gx = getattr(nn.grad, f"conv{n}d_input")(x.shape, fiamma.tensor(w), fiamma.tensor(go),
                                             stride, pad, dil, groups)
    gw = getattr(nn.grad, f"conv{n}d_weight")(fiamma.tensor(x), w.shape, fiamma.tensor(go),
                                              stride, pad, dil, groups)
    rx, rw = _np_conv_grads(x, w, go, stride, pad, dil, groups)
    np.testing.assert_allclose(gx.numpy(), rx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gw.numpy(), rw, rtol=1e-10, atol=1e-10)


def test_conv_grad_input_size_is_checked():
    w = fiamma.ones(1, 1, 3)
    go = fiamma.ones(1, 1, 4)
    assert tuple(nn.grad.conv1d_input((1, 1, 9), w, go, stride=2).shape) == (1, 1, 9)
    assert tuple(nn.grad.conv1d_input((1, 1, 10), w, go, stride=2).shape) == (1, 1, 10)
    with pytest.raises(ValueError, match="conv1d_input: input_size"):
        nn.grad.conv1d_input((1, 1, 12), w, go, stride=2)


def test_conv_weight_grad_is_differentiable():
    x = fiamma.randn(1, 2, 5, 5, dtype=fiamma.float64, requires_grad=True)
    go = fiamma.randn(1, 3, 3, 3, dtype=fiamma.float64)
    gw = nn.grad.conv2d_weight(x, (3, 2, 3, 3), go)
    gw.sum().backward()
    # d/dx sum(gw) = sum over output channels of go, spread over the 3x3 windows
    ref = F.conv_transpose2d(go, fiamma.ones(3, 2, 3, 3, dtype=fiamma.float64))
    np.testing.assert_allclose(x.grad.numpy(), ref.numpy(), rtol=1e-12)


# ---- deprecated aliases and helpers --------------------------------------------------------

def test_nll_loss2d_and_container_warn_and_work():
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = nn.NLLLoss2d(ignore_index=1)
    assert isinstance(loss, nn.NLLLoss) and loss.ignore_index == 1
    logp = F.log_softmax(fiamma.randn(2, 3, 4, 4), 1)
    t = fiamma.randint(0, 3, (2, 4, 4))
    assert loss(logp, t).item() == F.nll_loss(logp, t, ignore_index=1).item()
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        c = nn.Container(fc=nn.Linear(2, 3), act=nn.ReLU())
    assert isinstance(c, nn.Module) and list(dict(c.named_children())) == ["fc", "act"]
    assert "fc.weight" in c.state_dict()


def test_factory_kwargs():
    fk = nn.factory_kwargs
    assert fk(None) == {}
    assert fk({"device": "cpu", "dtype": fiamma.float64}) == {"device": "cpu",
                                                              "dtype": fiamma.float64}
    assert fk({"factory_kwargs": {"dtype": fiamma.float16}, "device": "cpu"}) == {
        "dtype": fiamma.float16, "device": "cpu"}
    with pytest.raises(TypeError, match="unexpected kwargs"):
        fk({"bias": True})
    with pytest.raises(TypeError, match="dtype specified twice"):
        fk({"dtype": fiamma.float32, "factory_kwargs": {"dtype": fiamma.float64}})


def test_common_types_is_an_attribute():
    assert nn.common_types._size_2_t is not None
    assert nn.grad.conv2d_input is not None


# ---- linear_cross_entropy -----------------------------------------------------------------

def _np_xent(x, w, b, t, cw, reduction, ignore=-100):
    """float64 NumPy loss and gradients (input, weight, bias) of cross_entropy(x w^T + b)."""
    z = x @ w.T + (0 if b is None else b)
    m = z.max(1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(1, keepdims=True)))[:, 0]
    valid = t != ignore
    tc = np.where(valid, t, 0)
    wt = (np.ones(len(t)) if cw is None else cw[tc]) * valid
    loss = (lse - z[np.arange(len(t)), tc]) * wt
    dz = np.exp(z - lse[:, None])
    dz[np.arange(len(t)), tc] -= 1
    dz *= wt[:, None]
    if reduction == "mean":
        loss, dz = loss.sum() / wt.sum(), dz / wt.sum()
    elif reduction == "sum":
        loss = loss.sum()
    return loss, dz @ w, dz.T @ x, dz.sum(0)


def _run(lib, x, w, b, t, cw, reduction, opts):
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = None if b is None else lib.tensor(b, requires_grad=True)
    o = None if opts is None else lib.nn.LinearCrossEntropyOptions(**opts)
    loss = lib.nn.functional.linear_cross_entropy(
        xt, wt, lib.tensor(t), linear_bias=bt, weight=None if cw is None else lib.tensor(cw),
        reduction=reduction, options=o)
    (loss if reduction != "none" else loss.sum()).backward()
    return [loss.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()] + (
        [] if b is None else [bt.grad.numpy()])


def _data(seed=0, n=37, d=8, c=300):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    w = rng.standard_normal((c, d)) * 0.3
    b = rng.standard_normal(c)
    t = rng.integers(0, c, n)
    t[3] = -100
    cw = rng.uniform(0.5, 2.0, c)
    return x, w, b, t, cw


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("opts", [None, dict(batch_chunk_size=5), dict(),
                                  dict(chunking_method="aspect_ratio")])
@pytest.mark.parametrize("with_bias_and_weight", [False, True])
def test_linear_cross_entropy_equals_reference(reduction, opts, with_bias_and_weight):
    x, w, b, t, cw = _data()
    if not with_bias_and_weight:
        b = cw = None
    ours = _run(fiamma, x, w, b, t, cw, reduction, opts)
    loss, gx, gw, gb = _np_xent(x, w, b, t, cw, reduction)
    ref = [loss, gx, gw] + ([] if b is None else [gb])
    for a, r in zip(ours, ref):
        np.testing.assert_allclose(a, r, rtol=1e-10, atol=1e-12)


def test_chunked_path_does_not_hold_the_full_logits():
    n, d, c = 512, 16, 20000
    x = fiamma.randn(n, d, requires_grad=True)
    w = fiamma.randn(c, d, requires_grad=True)
    t = fiamma.randint(0, c, (n,))
    full_logits = n * c * 4
    peaks = []
    for opts in [None, nn.LinearCrossEntropyOptions(batch_chunk_size=16)]:
        fiamma.cpu_reset_peak_memory_stats()
        before = fiamma.cpu_memory_stats()["allocated_bytes"]
        F.linear_cross_entropy(x, w, t, options=opts).backward()
        peaks.append(fiamma.cpu_memory_stats()["peak_allocated_bytes"] - before)
        x.grad = w.grad = None
    assert peaks[0] >= full_logits  # the reference path holds the (n, c) logits
    assert peaks[1] < full_logits / 4


def test_linear_cross_entropy_checks_and_fallback():
    x, w = fiamma.randn(4, 3), fiamma.randn(10, 3)
    t = fiamma.tensor([1, 2, 3, 4])
    with pytest.raises(RuntimeError, match="dimensionality 1 or 2, got 3"):
        F.linear_cross_entropy(fiamma.randn(2, 4, 3), w, t)
    with pytest.raises(RuntimeError, match="in_features"):
        F.linear_cross_entropy(fiamma.randn(4, 5), w, t)
    with pytest.raises(RuntimeError, match="expected linear_bias shape"):
        F.linear_cross_entropy(x, w, t, linear_bias=fiamma.randn(3))
    probs = F.softmax(fiamma.randn(4, 10), 1)
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified"):
        F.linear_cross_entropy(x, w, probs, ignore_index=0)
    # probabilities and label smoothing fall back to the reference path with a warning
    opts = nn.LinearCrossEntropyOptions()
    with pytest.warns(UserWarning, match="``options`` ignored"):
        a = F.linear_cross_entropy(x, w, t, label_smoothing=0.1, options=opts)
    b = F.cross_entropy(x @ w.T, t, label_smoothing=0.1)
    assert abs(a.item() - b.item()) < 1e-6
    with pytest.raises(ValueError, match="give different chunk sizes"):
        F.linear_cross_entropy(x, w, t, options=nn.LinearCrossEntropyOptions(
            batch_chunk_size=3, chunking_method="aspect_ratio"))
    with pytest.raises(ValueError, match="invalid acc_policy"):
        nn.LinearCrossEntropyOptions(acc_policy="fast")
    with pytest.raises(ValueError, match="invalid chunking_method"):
        nn.LinearCrossEntropyOptions(chunking_method="rows")
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        F.linear_cross_entropy(x, w, fiamma.tensor([1, 2, 10, 4]), options=opts)
    # unbatched input
    u = F.linear_cross_entropy(x[0], w, t[0], options=opts)
    assert u.dim() == 0 and abs(u.item() - F.cross_entropy(x[:1] @ w.T, t[:1]).item()) < 1e-6


def test_linear_cross_entropy_k_dimensional():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3))
    w = rng.standard_normal((4, 2, 3))  # C=4, out_features (2,)
    t = rng.integers(0, 4, (5, 2))
    loss = F.linear_cross_entropy(fiamma.tensor(x), fiamma.tensor(w), fiamma.tensor(t))
    z = np.einsum("ni,cki->nck", x, w)
    lse = np.log(np.exp(z).sum(1))
    picked = np.take_along_axis(z, t[:, None, :], 1)[:, 0]
    np.testing.assert_allclose(loss.item(), (lse - picked).mean(), rtol=1e-12)


def test_linear_cross_entropy_loss_module():
    fiamma.manual_seed(0)
    m = nn.LinearCrossEntropyLoss(4, 6, bias=True, ignore_index=0)
    assert sorted(m.state_dict()) == ["linear.bias", "linear.weight"]
    assert repr(m) == ("LinearCrossEntropyLoss(\n  in_features=4, num_classes=6, out_features=(), "
                       "bias=True, reduction=mean, ignore_index=0, label_smoothing=0.0, "
                       "options=None\n  (linear): Linear(in_features=4, out_features=6, "
                       "bias=True)\n)")
    x, t = fiamma.randn(3, 4), fiamma.tensor([0, 2, 5])
    ref = F.cross_entropy(m.linear(x), t, ignore_index=0)
    assert abs(m(x, t).item() - ref.item()) < 1e-6
    m3 = nn.LinearCrossEntropyLoss(4, 6, out_features=(2,))
    assert tuple(m3.linear.weight.shape) == (12, 4)
    assert m3(x, fiamma.randint(0, 6, (3, 2))).dim() == 0
    with pytest.raises(RuntimeError, match="expected weight shape to be"):
        nn.LinearCrossEntropyLoss(4, 6, weight=fiamma.ones(5))


# ---- PyTorch parity ----------------------------------------------------------------------

@pytest.mark.parity
@pytest.mark.parametrize("channels,size", [(2, 3), (7, 5), (8, 4), (12, 7), (3, 9), (6, 2)])
def test_cross_map_lrn2d_equals_pytorch(channels, size):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(size)
    x = rng.standard_normal((2, channels, 3, 4)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    out = []
    for lib in (fiamma, torch):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.7, k=1.5)(xt)
        y.backward(lib.tensor(g))
        out.append((y.detach().numpy(), xt.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parity
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("stride,pad,dil,groups", CONV_CASES)
def test_conv_grads_equal_pytorch(n, stride, pad, dil, groups):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10 + n)
    x = rng.standard_normal((2, 4) + (9,) * n)
    w = rng.standard_normal((8, 4 // groups) + (3,) * n)
    y = getattr(torch.nn.functional, f"conv{n}d")(torch.tensor(x), torch.tensor(w), None,
                                                  stride, pad, dil, groups)
    go = rng.standard_normal(tuple(y.shape))
    def conv(lib, v):
        return lib.tensor(v) if isinstance(v, np.ndarray) else tuple(v)

    for name, a1, a2 in [("input", x.shape, w), ("weight", x, w.shape)]:
        fn = f"conv{n}d_{name}"
        ours = getattr(nn.grad, fn)(conv(fiamma, a1), conv(fiamma, a2), fiamma.tensor(go),
                                    stride, pad, dil, groups)
        theirs = getattr(torch.nn.grad, fn)(conv(torch, a1), conv(torch, a2),
                                            torch.tensor(go), stride, pad, dil, groups)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parity
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("opts", [None, dict(batch_chunk_size=5), dict()])
def test_linear_cross_entropy_equals_pytorch(reduction, opts):
    torch = pytest.importorskip("torch")
    x, w, b, t, cw = _data(seed=2)
    ours = _run(fiamma, x, w, b, t, cw, reduction, opts)
    theirs = _run(torch, x, w, b, t, cw, reduction, opts)
    for a, r in zip(ours, theirs):
        np.testing.assert_allclose(a, r, rtol=1e-10, atol=1e-12)


@pytest.mark.parity
def test_deprecation_warnings_match_pytorch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (fiamma, torch):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            lib.nn.NLLLoss2d()
            lib.nn.Container()
        msgs.append([(r.category, str(r.message)) for r in rec])
    assert msgs[0] == msgs[1]


def test_functional_torchscript_helpers():
    F.assert_int_or_pair(3, "kernel_size", "{} must be an int or a pair")
    F.assert_int_or_pair((1, 2), "kernel_size", "{} must be an int or a pair")
    with pytest.raises(AssertionError, match="kernel_size must be an int or a pair"):
        F.assert_int_or_pair((1, 2, 3), "kernel_size", "{} must be an int or a pair")

    def with_idx(x, flag=False):
        """doc"""
        return ("idx", x)

    def without(x, flag=False):
        return ("plain", x)

    f = F.boolean_dispatch("flag", 1, False, with_idx, without, "mod", "pick")
    assert f(1) == ("plain", 1) and f(1, True) == ("idx", 1) and f(1, flag=True)[0] == "idx"
    assert f.__name__ == "pick" and f.__module__ == "mod" and f.__doc__ == "doc"
    with pytest.raises(RuntimeError, match="only one function can have a docstring"):
        F.boolean_dispatch("flag", 1, False, with_idx, with_idx, None, None)
    assert F.BroadcastingList2[int] is None and F.BroadcastingList1[float] is None
