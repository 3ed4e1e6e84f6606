"""nn.functional's elementwise losses through core's fused loss (one autograd node each):
PyTorch's node names, gradients for the input and the target checked numerically in float64
(first and second order), broadcasting (with the size-mismatch warning), the composed fallback
for operands the fused op does not take, and (parity) values, gradients and double-backward
gradients against PyTorch for every reduction, float dtype, broadcast and edge value."""

import warnings

import numpy as np
import pytest

import fiamma
from fiamma.autograd import gradcheck, gradgradcheck
from fiamma.nn import functional as F

# name, F's keyword arguments, PyTorch's node name
LOSSES = [
    ("mse_loss", {}, "MseLossBackward0"),
    ("l1_loss", {}, "L1LossBackward0"),
    ("smooth_l1_loss", {"beta": 0.7}, "SmoothL1LossBackward0"),
    ("smooth_l1_loss", {"beta": 0.0}, "L1LossBackward0"),
    ("huber_loss", {"delta": 1.3}, "HuberLossBackward0"),
    ("binary_cross_entropy", {}, "BinaryCrossEntropyBackward0"),
    ("binary_cross_entropy_with_logits", {}, "BinaryCrossEntropyWithLogitsBackward0"),
    ("soft_margin_loss", {}, "SoftMarginLossBackward0"),
]
IDS = [f"{n}-{next(iter(k.values()), '')}" for n, k, _ in LOSSES]


def _data(name, rng, shape):
    x = rng.standard_normal(shape) * 2
    t = rng.standard_normal(shape) * 2
    if name == "binary_cross_entropy":
        x = rng.uniform(0.05, 0.95, shape)
        t = rng.uniform(0, 1, shape)
    elif name == "binary_cross_entropy_with_logits":
        t = rng.uniform(0, 1, shape)
    elif name == "soft_margin_loss":
        t = np.sign(t)
    elif name == "kl_div":
        t = rng.uniform(0.05, 1.0, shape)
    return x, t


@pytest.mark.parametrize("name,kw,node", LOSSES, ids=IDS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_one_named_node_with_pytorchs_edges(name, kw, node, reduction):
    rng = np.random.default_rng(0)
    x, t = _data(name, rng, (4, 3))
    xt = fiamma.tensor(x, requires_grad=True)
    loss = getattr(F, name)(xt, fiamma.tensor(t), reduction=reduction, **kw)
    assert loss.grad_fn.name() == node
    nxt = loss.grad_fn.next_functions
    assert nxt[0][0].name() == "AccumulateGrad" and nxt[1][0] is None and len(nxt) == 2


@pytest.mark.parametrize("name,kw,node", LOSSES, ids=IDS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gradcheck_input_and_target_first_and_second_order(name, kw, node, reduction):
    rng = np.random.default_rng(1)
    x, t = _data(name, rng, (3, 4))
    if name in ("l1_loss", "smooth_l1_loss", "huber_loss"):
        t = x + np.sign(t) * rng.uniform(0.1, 3.0, x.shape)  # away from the kinks
    xt = fiamma.tensor(x, requires_grad=True)
    tt = fiamma.tensor(t, requires_grad=True)

    def fn(a, b):
        return getattr(F, name)(a, b, reduction=reduction, **kw)
    assert gradcheck(fn, (xt, tt))
    assert gradgradcheck(fn, (xt, tt))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gradcheck_weighted_bce(reduction):
    rng = np.random.default_rng(2)
    x, t = _data("binary_cross_entropy_with_logits", rng, (3, 4))
    w = fiamma.tensor(rng.uniform(0.5, 2, (4,)))
    pw = fiamma.tensor(rng.uniform(0.5, 3, (3, 1)))
    xt = fiamma.tensor(x, requires_grad=True)
    tt = fiamma.tensor(t, requires_grad=True)

    def fn(a, b):
        return F.binary_cross_entropy_with_logits(a, b, weight=w, pos_weight=pw,
                                                  reduction=reduction)
    assert gradcheck(fn, (xt, tt))
    assert gradgradcheck(fn, (xt, tt))
    p = fiamma.tensor(rng.uniform(0.05, 0.95, (3, 4)), requires_grad=True)

    def bce(a, b):
        return F.binary_cross_entropy(a, b, weight=w, reduction=reduction)
    assert gradcheck(bce, (p, tt))
    assert gradgradcheck(bce, (p, tt))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_gradcheck(reduction, log_target):
    rng = np.random.default_rng(3)
    x, t = _data("kl_div", rng, (3, 4))
    if log_target:
        t = np.log(t)
    xt = fiamma.tensor(x, requires_grad=True)
    tt = fiamma.tensor(t, requires_grad=True)

    def fn(a, b):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return F.kl_div(a, b, reduction=reduction, log_target=log_target)
    assert gradcheck(fn, (xt, tt))
    assert gradgradcheck(fn, (xt, tt))


def test_broadcast_warns_and_reduces_gradients_to_each_shape():
    rng = np.random.default_rng(4)
    x = fiamma.tensor(rng.standard_normal((5, 1)), requires_grad=True)
    t = fiamma.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    for name in ("mse_loss", "l1_loss"):
        with pytest.warns(UserWarning, match="Using a target size"):
            loss = getattr(F, name)(x, t)
        loss.backward()
        assert x.grad.shape == (5, 1) and t.grad.shape == (5, 3)
        d = x.detach().numpy() - t.detach().numpy()
        g = 2 * d if name == "mse_loss" else np.sign(d)
        np.testing.assert_allclose(x.grad.numpy(), (g / 15).sum(1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(t.grad.numpy(), -g / 15, rtol=1e-12)
        x.grad = t.grad = None


def test_fallbacks_keep_working():
    # an integer target (promoted by the composition) and a weight that requires grad (PyTorch
    # refuses it; fiamma's composition differentiates it)
    x = fiamma.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = F.l1_loss(x, fiamma.tensor([1, 0, 2]))
    loss.backward()
    assert loss.item() == pytest.approx(0.5)
    np.testing.assert_allclose(x.grad.numpy(), [-1 / 3, -1 / 3, 0.0])
    w = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    t = fiamma.tensor([0.0, 1.0, 0.5])
    F.binary_cross_entropy_with_logits(x, t, weight=w, reduction="sum").backward()
    ref = (1 - t.numpy()) * x.detach().numpy() + np.logaddexp(0, -x.detach().numpy())
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-6)


def test_no_grad_and_plain_tensors_record_nothing():
    x, t = fiamma.rand(3), fiamma.rand(3)
    assert F.mse_loss(x, t).grad_fn is None
    xg = x.clone().requires_grad_()
    with fiamma.no_grad():
        assert F.binary_cross_entropy(xg, t).grad_fn is None


def test_double_backward_through_the_gradient():
    x = fiamma.tensor([0.3, -1.2, 2.0], dtype=fiamma.float64, requires_grad=True)
    t = fiamma.tensor([0.0, 1.0, 0.5], dtype=fiamma.float64)
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="sum")
    (g,) = fiamma.autograd.grad(loss, x, create_graph=True)
    g.sum().backward()
    s = 1 / (1 + np.exp(-x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 - s), rtol=1e-12)


# ---- parity -----------------------------------------------------------------------------------

DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _tol(dtype):
    # 16-bit: PyTorch rounds after each op of its composition (fiamma once, from float32), so
    # the two differ by a few roundings of the terms (up to ~3 here, before cancellation)
    return {"float64": (1e-11, 1e-13), "float32": (2e-5, 1e-6), "float16": (2e-2, 5e-3),
            "bfloat16": (5e-2, 3e-2)}[dtype]


def _run(lib, F_, name, kw, x, t, dtype, reduction, w=None, pw=None, target_grad=True):
    dt = getattr(lib, dtype)
    xt = lib.tensor(x).to(dt).requires_grad_()
    tt = lib.tensor(t).to(dt)
    if target_grad:
        tt.requires_grad_()
    extra = {}
    if w is not None:
        extra["weight"] = lib.tensor(w).to(dt)
    if pw is not None:
        extra["pos_weight"] = lib.tensor(pw).to(dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = getattr(F_, name)(xt, tt, reduction=reduction, **kw, **extra)
    g = lib.ones_like(out) if reduction == "none" else lib.tensor(1.0).to(dt)
    out.backward(g * 0.75)
    grads = [xt.grad.float().numpy()]
    if target_grad:
        grads.append(tt.grad.float().numpy())
    return [out.detach().float().numpy()] + grads


@pytest.mark.parity
@pytest.mark.parametrize("name,kw,node", LOSSES + [("kl_div", {}, None),
                                                 ("kl_div", {"log_target": True}, None)],
                         ids=IDS + ["kl_div", "kl_div-log"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_equal_pytorch(name, kw, node, reduction, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, t = _data(name, rng, (7, 6))
    if kw.get("log_target"):
        t = np.log(t)
    w = pw = None
    if name.startswith("binary"):
        w = rng.uniform(0.5, 2.0, (6,))
    if name.endswith("logits"):
        pw = rng.uniform(0.5, 3.0, (6,))
    # PyTorch gives no target gradient for soft_margin_loss (fiamma does; tested above)
    tg = name != "soft_margin_loss"
    got = _run(fiamma, F, name, kw, x, t, dtype, reduction, w, pw, tg)
    want = _run(torch, torch.nn.functional, name, kw, x, t, dtype, reduction, w, pw, tg)
    rtol, atol = _tol(dtype)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parity
@pytest.mark.parametrize("name,kw,node", LOSSES, ids=IDS)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_broadcast_and_non_contiguous_equal_pytorch(name, kw, node, reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x, t = _data(name, rng, (6, 5))
    res = []
    for lib, F_ in ((fiamma, F), (torch, torch.nn.functional)):
        xt = lib.tensor(x.T.copy(), requires_grad=True)
        tt = lib.tensor(t, requires_grad=True)
        xv = xt.t()  # non-contiguous
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
                out = getattr(F_, name)(xv, tt[:1], reduction=reduction, **kw)  # broadcast
            else:
                out = getattr(F_, name)(xv, tt.detach(), reduction=reduction, **kw)
        out.sum().backward()
        res.append([out.detach().numpy(), xt.grad.numpy()]
                   + ([tt.grad.numpy()] if tt.grad is not None else []))
    assert len(res[0]) == len(res[1])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parity
@pytest.mark.parametrize("name,kw,node", LOSSES + [("kl_div", {"log_target": True}, None)],
                         ids=IDS + ["kl_div-log"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_double_backward_equal_pytorch(name, kw, node, reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x, t = _data(name, rng, (4, 5))
    if kw.get("log_target"):
        t = np.log(t)
    res = []
    for lib, F_ in ((fiamma, F), (torch, torch.nn.functional)):
        xt = lib.tensor(x, requires_grad=True)
        tt = lib.tensor(t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = getattr(F_, name)(xt, tt, reduction=reduction, **kw)
        (g,) = (fiamma if lib is fiamma else torch).autograd.grad(out.sum(), xt,
                                                                  create_graph=True)
        # + x^2: a graph even where the gradient is constant in x (l1, kl_div's)
        ((g * g).sum() + (xt * xt).sum()).backward()
        res.append((np.array(g.tolist()), np.array(xt.grad.tolist())))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parity
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kl_div_batchmean_equal_pytorch(log_target, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x, t = _data("kl_div", rng, (5, 6))
    if log_target:
        t = np.log(t)
    kw = {"log_target": log_target}
    got = _run(fiamma, F, "kl_div", kw, x, t, dtype, "batchmean")
    want = _run(torch, torch.nn.functional, "kl_div", kw, x, t, dtype, "batchmean")
    rtol, atol = _tol(dtype)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    # double backward
    res = []
    for lib, F_ in ((fiamma, F), (torch, torch.nn.functional)):
        xt = lib.tensor(x, requires_grad=True)
        tt = lib.tensor(t, requires_grad=True)
        out = F_.kl_div(xt, tt, reduction="batchmean", log_target=log_target)
        gx, gt = (fiamma if lib is fiamma else torch).autograd.grad(out, (xt, tt),
                                                                    create_graph=True)
        ((gt * gt).sum() + (gx * gx).sum()).backward()
        res.append((np.array(gt.tolist()), np.array(xt.grad.tolist()),
                    np.array(tt.grad.tolist())))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parity
def test_edge_values_equal_pytorch():
    torch = pytest.importorskip("torch")
    res = []
    for lib, F_ in ((fiamma, F), (torch, torch.nn.functional)):
        vals = []
        e = lib.zeros(0, 4)
        vals += [F_.mse_loss(e, e).item(), F_.l1_loss(e, e, reduction="sum").item(),
                 F_.binary_cross_entropy_with_logits(e, e).item()]
        x = lib.tensor([1.0, -1.0, 0.5, 0.0, 2.0, -2.0, 0.25], requires_grad=True)
        t = lib.zeros(7)
        for f in (lambda: F_.smooth_l1_loss(x, t, beta=1.0, reduction="none"),
                  lambda: F_.smooth_l1_loss(x, t, beta=0.0, reduction="none"),
                  lambda: F_.huber_loss(x, t, delta=2.0, reduction="none"),
                  lambda: F_.huber_loss(x, t, delta=0.25, reduction="none")):
            out = f()
            out.sum().backward()
            vals += out.tolist() + x.grad.tolist()
            x.grad = None
        big = lib.tensor([200.0, -200.0, 30.0, -30.0], dtype=lib.float32, requires_grad=True)
        out = F_.binary_cross_entropy_with_logits(big, lib.tensor([0.0, 1.0, 1.0, 0.0]),
                                                  reduction="none")
        out.sum().backward()
        vals += out.tolist() + big.grad.tolist()
        res.append(vals)
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6, equal_nan=True)
