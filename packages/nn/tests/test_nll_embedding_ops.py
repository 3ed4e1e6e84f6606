"""F.nll_loss and F.embedding as one autograd node each (NllLossBackward0, EmbeddingBackward0):
values and gradients against NumPy and PyTorch (weight, ignore_index, reductions, spatial dims;
padding_idx, max_norm, scale_grad_by_freq), numerical first and second derivatives, errors,
and the top-level fiamma.embedding / fiamma.embedding_renorm_ (torch.embedding, ...)."""

import numpy as np
import pytest

import fiamma
from fiamma.nn import functional as F

SHAPES = [(5,), (4, 5), (3, 5, 4), (2, 5, 3, 2)]


def _case(shape, seed=0, ignore=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = rng.integers(0, c, tshape)
    if ignore is not None and t.size > 1:
        t.reshape(-1)[1] = ignore
    w = rng.uniform(0.5, 2.0, c)
    return x, t, w


def _nll_ref(x, t, w, ii, reduction):
    """NumPy reference: the loss and d loss / d x for an all-ones upstream gradient."""
    cdim = 0 if x.ndim == 1 else 1
    xm = np.moveaxis(x, cdim, -1).reshape(-1, x.shape[cdim])
    tf = t.reshape(-1)
    keep = tf != ii
    safe = np.where(keep, tf, 0)
    wt = (w[safe] if w is not None else np.ones(len(tf))) * keep
    loss = -xm[np.arange(len(tf)), safe] * wt
    g = np.zeros_like(xm)
    scale = 1.0 / wt.sum() if reduction == "mean" else 1.0
    g[np.arange(len(tf)), safe] = -wt * scale
    moved = np.moveaxis(x, cdim, -1).shape
    g = np.moveaxis(g.reshape(moved), -1, cdim)
    if reduction == "none":
        return loss.reshape(t.shape), g
    if reduction == "sum":
        return loss.sum(), g
    return loss.sum() / wt.sum(), g


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ii", [-100, 2])
def test_nll_loss_against_numpy(shape, reduction, weighted, ii):
    x, t, w = _case(shape, ignore=ii)
    w = w if weighted else None
    xf = fiamma.tensor(x, requires_grad=True)
    out = F.nll_loss(xf, fiamma.tensor(t), None if w is None else fiamma.tensor(w),
                     ignore_index=ii, reduction=reduction)
    # one node straight to the input's leaf, named as PyTorch's last node (its 2-d kernel for
    # spatial inputs, viewed back for reduction='none' unless 4-d)
    spatial = len(shape) > 2
    expect = ("ViewBackward0" if spatial and len(shape) != 4 and reduction == "none" else
              "NllLoss2DBackward0" if spatial else "NllLossBackward0")
    assert out.grad_fn.name() == expect
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    ref, gref = _nll_ref(x, t, w, ii, reduction)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(xf.grad.numpy(), gref, rtol=1e-12)


def test_nll_loss_all_ignored_mean_is_nan_and_int32_target():
    x = fiamma.randn(3, 4, requires_grad=True)
    out = F.nll_loss(x, fiamma.tensor([-100, -100, -100]))
    assert np.isnan(out.item())
    t32 = fiamma.tensor([1, 2, 3], dtype=fiamma.int32)
    np.testing.assert_allclose(F.nll_loss(x, t32).item(),
                               F.nll_loss(x, t32.long()).item())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_gradcheck_and_double_backward(reduction):
    x, t, w = _case((3, 4, 2), seed=1, ignore=1)
    xf = fiamma.tensor(x, requires_grad=True)
    tf, wf = fiamma.tensor(t), fiamma.tensor(w)

    def f(x):  # a nonlinearity after the loss so the second derivative is not zero
        return F.nll_loss(x, tf, wf, ignore_index=1, reduction=reduction).pow(2)

    assert fiamma.autograd.gradcheck(f, (xf,))
    assert fiamma.autograd.gradgradcheck(f, (xf,))
    # the gradient itself is differentiable w.r.t. the upstream gradient
    out = F.nll_loss(xf, tf, wf, ignore_index=1, reduction=reduction)
    go = fiamma.ones_like(out, requires_grad=True)
    (gx,) = fiamma.autograd.grad(out, xf, go, create_graph=True)
    assert gx.requires_grad
    (ggo,) = fiamma.autograd.grad(gx.sum(), go)
    assert ggo.shape == out.shape


def test_nll_loss_weight_requiring_grad_is_differentiated():
    x = fiamma.randn(4, 3, dtype=fiamma.float64)
    w = fiamma.rand(3, dtype=fiamma.float64, requires_grad=True)
    t = fiamma.tensor([0, 2, 1, 2])
    assert fiamma.autograd.gradcheck(lambda w: F.nll_loss(x, t, w), (w,))


def test_nll_loss_errors_name_op_expected_actual():
    x = fiamma.randn(4, 5, requires_grad=True)
    with pytest.raises(IndexError, match=r"nll_loss: Target 5 is out of bounds .*0 <= target < 5"):
        F.nll_loss(x, fiamma.tensor([0, 1, 5, 2]))
    with pytest.raises(IndexError, match=r"nll_loss: Target -3 is out of bounds"):
        F.nll_loss(x, fiamma.tensor([0, -3, 1, 2]), fiamma.ones(5))
    with pytest.raises(RuntimeError,
                       match=r"nll_loss: expected target of an integer dtype.*float32"):
        F.nll_loss(x, fiamma.tensor([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"nll_loss: expected target of shape \[4\] for input of "
                                         r"shape \[4, 5\], got \[3\]"):
        F.nll_loss(x, fiamma.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match=r"nll_loss: weight tensor should be defined .* 5 "
                                           r"classes .* shape: \[4\]"):
        F.nll_loss(x, fiamma.tensor([0, 1, 2, 3]), fiamma.ones(4))
    with pytest.raises(ValueError, match="nll_loss: bad is not a valid value for reduction"):
        F.nll_loss(x, fiamma.tensor([0, 1, 2, 3]), reduction="bad")
    with pytest.raises(RuntimeError, match="derivative for 'weight'"):
        fiamma.fused.nll_loss(x, fiamma.tensor([0, 1, 2, 3]),
                              fiamma.ones(5, requires_grad=True))


@pytest.mark.parity
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_parity(shape, reduction):
    torch = pytest.importorskip("torch")
    x, t, w = _case(shape, seed=3, ignore=0)
    x = x.astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    xf = fiamma.tensor(x, requires_grad=True)
    for kw in ({}, {"ignore_index": 0}):
        for wt_, wf_ in ((None, None), (torch.tensor(w, dtype=torch.float32),
                                        fiamma.tensor(w, dtype=fiamma.float32))):
            xt.grad = xf.grad = None
            ot = torch.nn.functional.nll_loss(xt, torch.tensor(t), wt_, reduction=reduction, **kw)
            of = F.nll_loss(xf, fiamma.tensor(t), wf_, reduction=reduction, **kw)
            assert of.grad_fn.name() == ot.grad_fn.name()
            np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
            (ot * 1.5).sum().backward()
            (of * 1.5).sum().backward()
            np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7)


# ---- embedding ------------------------------------------------------------------------------

def _emb_ref_grad(idx, g, n, padding_idx=None, scale=False):
    flat = idx.reshape(-1)
    gf = g.reshape(len(flat), -1)
    counts = np.bincount(flat, minlength=n)
    ref = np.zeros((n, gf.shape[1]))
    for i, r in enumerate(flat):
        if r == padding_idx:
            continue
        ref[r] += gf[i] / (counts[r] if scale else 1)
    return ref


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_against_numpy(padding_idx, scale):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3))
    idx = np.array([[0, 2, 5, 2], [2, 5, 1, 1]])
    wf = fiamma.tensor(w, requires_grad=True)
    out = F.embedding(fiamma.tensor(idx), wf, padding_idx=padding_idx, scale_grad_by_freq=scale)
    assert out.grad_fn.name() == "EmbeddingBackward0"
    np.testing.assert_array_equal(out.detach().numpy(), w[idx])
    g = rng.standard_normal(out.shape)
    out.backward(fiamma.tensor(g))
    p = None if padding_idx is None else padding_idx % 6
    np.testing.assert_allclose(wf.grad.numpy(), _emb_ref_grad(idx, g, 6, p, scale), rtol=1e-12)


def test_embedding_padding_row_gets_zero_even_for_nan_gradient():
    w = fiamma.ones(3, 2, requires_grad=True)
    out = F.embedding(fiamma.tensor([0, 1]), w, padding_idx=1)
    out.backward(fiamma.tensor([[1.0, 1.0], [float("nan"), 1.0]]))
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]


def test_embedding_gradcheck_scale_and_padding():
    idx = fiamma.tensor([[0, 2, 3], [3, 3, 4]])
    w = fiamma.randn(5, 3, dtype=fiamma.float64, requires_grad=True)

    def f(w):
        return F.embedding(idx, w).pow(2)

    assert fiamma.autograd.gradcheck(f, (w,))
    assert fiamma.autograd.gradgradcheck(f, (w,))
    # with padding_idx and scale_grad_by_freq the gradient is not the derivative (by design):
    # the backward is linear in the upstream gradient, and that derivative checks numerically
    go = fiamma.randn(2, 3, 3, dtype=fiamma.float64, requires_grad=True)

    def vjp(go):
        out = F.embedding(idx, w, padding_idx=4, scale_grad_by_freq=True)
        return fiamma.autograd.grad(out, w, go, create_graph=True)[0]

    assert fiamma.autograd.gradcheck(vjp, (go,))


def test_embedding_max_norm_renormalises_in_place():
    w = fiamma.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], requires_grad=True)
    v = w._version
    out = F.embedding(fiamma.tensor([0, 1, 0]), w, max_norm=1.0)
    assert w._version > v
    norms = np.linalg.norm(w.detach().numpy(), axis=1)
    np.testing.assert_allclose(norms, [1.0, 0.5, 10.0], rtol=1e-6)  # row 2 not referenced
    np.testing.assert_allclose(out.detach().numpy(), w.detach().numpy()[[0, 1, 0]])
    assert out.grad_fn.name() == "EmbeddingBackward0"


def test_embedding_int32_and_other_integer_indices():
    w = fiamma.arange(6.0).reshape(3, 2)
    for dt in (fiamma.int32, fiamma.int16, fiamma.uint8):
        assert F.embedding(fiamma.tensor([2, 0], dtype=dt), w).tolist() == [[4.0, 5.0],
                                                                             [0.0, 1.0]]


def test_embedding_errors():
    w = fiamma.randn(4, 3, requires_grad=True)
    with pytest.raises(IndexError, match=r"embedding: index 4 is out of range .*4 rows"):
        F.embedding(fiamma.tensor([0, 4]), w)
    with pytest.raises(IndexError, match=r"embedding: index -1 is out of range"):
        F.embedding(fiamma.tensor([-1]), w)
    with pytest.raises(RuntimeError, match="embedding: expected an integer index tensor"):
        F.embedding(fiamma.tensor([0.0]), w)
    with pytest.raises(RuntimeError, match=r"embedding: 'weight' must be 2-D"):
        F.embedding(fiamma.tensor([0]), fiamma.randn(4))
    with pytest.raises(ValueError, match="Padding_idx must be within num_embeddings"):
        F.embedding(fiamma.tensor([0]), w, padding_idx=4)
    with pytest.raises(RuntimeError, match="embedding: expected indices of dtype int64 or int32"):
        fiamma.embedding(w, fiamma.tensor([0], dtype=fiamma.int16))


@pytest.mark.parity
@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("max_norm", [None, 1.5])
def test_embedding_parity(padding_idx, scale, max_norm):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((7, 4)).astype(np.float32)
    idx = rng.integers(0, 7, (3, 5))
    idx[0, :3] = 1
    g = rng.standard_normal((3, 5, 4)).astype(np.float32)
    wt = torch.tensor(w, requires_grad=True)
    wf = fiamma.tensor(w, requires_grad=True)
    kw = {"padding_idx": padding_idx, "scale_grad_by_freq": scale, "max_norm": max_norm}
    ot = torch.nn.functional.embedding(torch.tensor(idx), wt, **kw)
    of = F.embedding(fiamma.tensor(idx), wf, **kw)
    assert of.grad_fn.name() == ot.grad_fn.name() == "EmbeddingBackward0"
    np.testing.assert_allclose(wf.detach().numpy(), wt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-6)
    ot.backward(torch.tensor(g))
    of.backward(fiamma.tensor(g))
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parity
def test_top_level_embedding_parity():
    torch = pytest.importorskip("torch")
    w = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    idx = np.array([[3, 0], [1, 1]])
    wt, wf = torch.tensor(w, requires_grad=True), fiamma.tensor(w, requires_grad=True)
    # positional order (weight, indices, padding_idx, scale_grad_by_freq, sparse)
    ot = torch.embedding(wt, torch.tensor(idx), 1, True, False)
    of = fiamma.embedding(wf, fiamma.tensor(idx), 1, True, False)
    assert of.grad_fn.name() == ot.grad_fn.name()
    np.testing.assert_array_equal(of.detach().numpy(), ot.detach().numpy())
    ot.sum().backward()
    of.sum().backward()
    np.testing.assert_array_equal(wf.grad.numpy(), wt.grad.numpy())
    # torch.embedding_renorm_
    wt2, wf2 = torch.tensor(w * 0.3), fiamma.tensor(w * 0.3)
    with torch.no_grad():
        torch.embedding_renorm_(wt2, torch.tensor([3, 1]), 2.0, 1.0)
    fiamma.embedding_renorm_(wf2, fiamma.tensor([3, 1]), 2.0, 1.0)
    np.testing.assert_allclose(wf2.numpy(), wt2.numpy(), rtol=1e-6)


def test_same_results_on_the_array_module_reference_device():
    rng = np.random.default_rng(9)
    w0 = rng.standard_normal((6, 3))
    x0 = rng.standard_normal((5, 4, 2))
    t0 = np.array([[0, 1], [-100, 3], [2, 2], [1, -100], [3, 0]])
    res = {}
    for dev in ("cpu", "xp"):
        w = fiamma.tensor(w0).to(dev).requires_grad_()
        e = F.embedding(fiamma.tensor([[1, 2], [1, 5]]).to(dev), w, padding_idx=2,
                        scale_grad_by_freq=True)
        (e * e).sum().backward()
        ws = fiamma.tensor(w0).to(dev).requires_grad_()
        F.embedding(fiamma.tensor([4, 4, 0]).to(dev), ws, sparse=True).sum().backward()
        x = fiamma.tensor(x0).to(dev).requires_grad_()
        loss = F.nll_loss(x, fiamma.tensor(t0).to(dev), fiamma.tensor([1.0, 2, 3, 4]).to(dev))
        loss.backward()
        assert loss.grad_fn.name() == "NllLoss2DBackward0"
        res[dev] = (e.detach().cpu().numpy(), w.grad.cpu().numpy(),
                    ws.grad.to_dense().cpu().numpy(), loss.item(), x.grad.cpu().numpy())
    for a, b in zip(res["cpu"], res["xp"]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
